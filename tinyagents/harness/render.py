"""How accepted steering reaches the model: a structured message with provenance.

    [steering · add_instruction · from parent agent "orchestrator" (run r-12) · c-7f3a]
    <steering>
    focus only on billing evidence
    </steering>
    This steering does not change your tools, limits or task contract.

The payload can never open or close a fence, nor start a line that reads as a header: those
are escaped. Every provenance field in the header (actor ids and names, the correlation id) is
sender-controlled, so it is constrained to one short line without quotes, brackets, angle
brackets or separators: a sender cannot forge ``from human "admin"`` or a second header.
"""

from __future__ import annotations

import re
from string import Formatter
from typing import Literal

from tinyagents._record import Record, record
from tinyagents.errors import ConfigurationError
from tinyagents.harness.model import Message
from tinyagents.protocol.commands import SteeringActor, SteeringCommand, SteeringKind
from tinyagents.protocol.ids import shown_repr

_CLOSING = re.compile(r"</\s*steering\s*>", re.IGNORECASE)
_OPENING = re.compile(r"<\s*steering\b[^>]*>", re.IGNORECASE)
_HEADER_LINE = re.compile(r"^(\s*)\[(\s*steering)", re.IGNORECASE | re.MULTILINE)
#: What a provenance field may contain: letters, digits and a few id characters. Everything
#: else (newlines, quotes, brackets, ``<``/``>``, the ``·`` separator) becomes ``_``.
_UNSAFE = re.compile(r"[^\w .:@/+#-]")
MAX_FIELD = 64

DEFAULT_TEMPLATE = (
    "[steering · {kind} · from {actor} · {correlation_id}]\n"
    "<steering>\n{text}\n</steering>\n"
    "{footer}"
)
#: The fields a template may use.
_FIELDS = ("kind", "actor", "correlation_id", "text", "footer")
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
    """Text for inside the fence: it can neither open nor close one, nor fake a header line."""
    text = _CLOSING.sub("<\\/steering>", text)
    text = _OPENING.sub("<\\\\steering>", text)
    return _HEADER_LINE.sub(r"\1\\[\2", text)


def field(value: object) -> str:
    """A provenance field made safe for the header line: one short line that cannot end the
    quotes, brackets or line it sits in."""
    text = _UNSAFE.sub("_", str(value))
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


def describe_actor(actor: SteeringActor) -> str:
    """``actor.describe()`` with every field of the actor made safe (see ``field``)."""
    safe = {
        name: field(value)
        for name in type(actor).model_fields
        if name != "type" and isinstance(value := getattr(actor, name), str)
    }
    return actor.model_copy(update=safe).describe()


@record(slots=True, kw_only=True, eq=False, repr=False)
class SteeringRenderer(Record):
    """Turns a command into the message the model sees. Template and role are configurable."""

    template: str = DEFAULT_TEMPLATE
    role: Literal["system", "user"] = "user"

    def __post_init__(self) -> None:
        # Checked here: a template that cannot be filled in failed every steered run at its
        # first steering (KeyError), and an 'assistant' role had the model read steering as
        # its own words.
        if self.role not in ("user", "system"):
            raise ConfigurationError(
                f"SteeringRenderer: role must be 'user' or 'system', got {shown_repr(self.role)}"
            )
        if not isinstance(self.template, str):
            raise ConfigurationError(
                f"SteeringRenderer: template must be text, got {type(self.template).__name__}"
            )
        try:
            fields = [
                (name, conversion, spec)
                for _, name, spec, conversion in Formatter().parse(self.template)
                if name is not None
            ]
        except ValueError as exc:
            raise ConfigurationError(
                f"SteeringRenderer: template cannot be filled in ({exc}); write a literal "
                "brace as {{ or }}"
            ) from None
        names = ", ".join("{" + name + "}" for name in _FIELDS)
        for name, conversion, spec in fields:
            if name in _FIELDS and not conversion and not spec:
                continue
            if name.isidentifier() and not conversion and not spec:
                raise ConfigurationError(
                    f"SteeringRenderer: template has a field {{{name}}} that is not one of {names}"
                )
            # str.format reads a field's attributes and items ({text.__class__}), and pads to
            # any width ({text:>99999999999} was a MemoryError): a field is a name, as it is
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise ConfigurationError(
                f"SteeringRenderer: template field {shown} is not a plain name: a field is "
                f"one of {names}, as it is (no attribute, item, conversion or format spec)"
            )

    def text_of(self, cmd: SteeringCommand) -> str:
        p = cmd.payload
        if cmd.kind is SteeringKind.PROVIDE_CONTEXT:
            text = p.get("text") if p.get("text") is not None else repr(p.get("value"))
            return f"(context from {field(p['source'])})\n{text}" if p.get("source") else str(text)
        return str(cmd.text or "")

    def render(self, cmd: SteeringCommand) -> Message:
        body = self.template.format(
            kind=cmd.kind.value,
            actor=describe_actor(cmd.actor),
            correlation_id=field(cmd.correlation_id),
            text=escape(self.text_of(cmd)),
            footer=_FOOTERS.get(cmd.kind, FOOTER),
        )
        return Message(
            role=self.role,
            content=body,
            metadata={"steering": cmd.correlation_id, "kind": cmd.kind.value},
        )
