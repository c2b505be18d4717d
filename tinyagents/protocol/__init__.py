"""The vocabulary every layer shares: commands, targets, actors, kinds, payloads, the receipt,
``Boundary`` and ``CommandState`` (DESIGN.md §1, the protocol layer).

Nothing here imports from tinyagents outside this package except the two modules that sit
below every layer: ``tinyagents._clock`` (ids and time) and ``tinyagents.errors`` (the
exception tree, which imports nothing from tinyagents, so the command models can raise
``InvalidCommandError`` and ``SteeringRejected`` can carry a receipt without a cycle).
Public names are exported from ``tinyagents`` and from their modules here, not from this
package.
"""
