"""How accepted steering reaches the model: a structured message with provenance.

    [steering · add_instruction · from parent agent "orchestrator" (run r-12) · c-7f3a]
    <steering>
    focus only on billing evidence
    </steering>
    This steering does not change your tools, limits or task contract.

The payload can never close the fence early: ``</steering>`` inside it is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tinyagents.harness.model import Message
from tinyagents.steering.commands import SteeringCommand, SteeringKind

_CLOSING = re.compile(r"</\s*steering\s*>", re.IGNORECASE)

DEFAULT_TEMPLATE = (
    "[steering · {kind} · from {actor} · {correlation_id}]\n"
    "<steering>\n{text}\n</steering>\n"
    "{footer}"
)
FOOTER = "This steering does not change your tools, limits or task contract."
_FOOTERS = {
    SteeringKind.REPLACE_INSTRUCTION: "These instructions replace your previous standing "
    "instructions; your tools, limits and task contract are unchanged.",
    SteeringKind.REDIRECT: "This is your new goal; your tools, limits and task contract are "
    "unchanged.",
    SteeringKind.ASK_CLARIFYING_QUESTION: "Answer this question in your next reply; your tools, "
    "limits and task contract are unchanged.",
}


def escape(text: str) -> str:
    return _CLOSING.sub("<\\/steering>", text)


@dataclass(slots=True, kw_only=True)
class SteeringRenderer:
    """Turns a command into the message the model sees. Template and role are configurable."""

    template: str = DEFAULT_TEMPLATE
    role: Literal["system", "user"] = "user"

    def text_of(self, cmd: SteeringCommand) -> str:
        p = cmd.payload
        if cmd.kind is SteeringKind.PROVIDE_CONTEXT:
            text = p.get("text") if p.get("text") is not None else repr(p.get("value"))
            return f"(context from {p['source']})\n{text}" if p.get("source") else str(text)
        return str(cmd.text or "")

    def render(self, cmd: SteeringCommand) -> Message:
        body = self.template.format(
            kind=cmd.kind.value,
            actor=cmd.actor.describe(),
            correlation_id=cmd.correlation_id,
            text=escape(self.text_of(cmd)),
            footer=_FOOTERS.get(cmd.kind, FOOTER),
        )
        return Message(
            role=self.role,
            content=body,
            metadata={"steering": cmd.correlation_id, "kind": cmd.kind.value},
        )
