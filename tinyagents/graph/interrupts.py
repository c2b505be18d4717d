"""``Interrupt``: a node's pending question, as the graph records and surfaces it; and the
typed answers of ``interrupt(value, response_schema=...)``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

from tinyagents._record import FrozenRecord
from tinyagents.protocol.ids import shown_repr


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Interrupt(FrozenRecord):
    """A pending question from a node: answer it with ``Command(resume={id: value})``.

    ``ns`` is empty for the graph's own nodes and ``"node:task_id"`` (``|``-joined when
    nested) for an interrupt raised inside a sub-graph. ``response_schema``: the JSON Schema
    of the answer the node expects (``interrupt(value, response_schema=...)``), for a client
    to render a form; None when the node gave none. ``enclosing``: the ids of the tasks
    that run the sub-graphs it was raised in (outermost first) that ``ns`` does not name: a
    ``compile(checkpointer=True)`` sub-graph's namespace has no task ids (``"outer|review"``),
    so the tasks calling it, and those above them, are known by this alone (a steering
    answer sent to any of them finds the question); empty when ``ns`` names them all.
    """

    id: str
    value: Any
    task_id: str
    node: str
    ns: str = ""
    index: int = 0
    response_schema: dict[str, Any] | None = None
    enclosing: tuple[str, ...] = field(default=(), compare=False)
    #: what checks an answer, while the process that asked holds the question (never
    #: saved): a steering answer is checked before it is recorded
    check: ResponseSchema | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "value": self.value,
            "task_id": self.task_id,
            "node": self.node,
            "ns": self.ns,
            "index": self.index,
        }
        if self.response_schema is not None:
            data["response_schema"] = self.response_schema
        if self.enclosing:
            data["enclosing"] = list(self.enclosing)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interrupt:
        enclosing = data.get("enclosing")
        if enclosing is not None:
            data = {**data, "enclosing": tuple(enclosing)}
        return cls(**data)

    def names_task(self, task_id: str) -> bool:
        """Whether task ``task_id`` asks this question or runs a sub-graph it was raised in:
        its own task, a task id of its namespace, or one of ``enclosing``."""
        return self.task_id == task_id or f":{task_id}" in self.ns or task_id in self.enclosing

    def held_by(self, task_id: str) -> Interrupt:
        """This question as task ``task_id``, running the sub-graph that asked it, holds it:
        with ``task_id`` in front of ``enclosing`` unless it names the task already."""
        if self.names_task(task_id):
            return self
        return replace(self, enclosing=(task_id, *self.enclosing))


#: The attribute that marks a ``ValidationError`` as an answer ``interrupt()`` refused: the
#: id of the interrupt it answered (the run withdraws that answer).
_INVALID_RESUME = "_tinyagents_invalid_resume"


def is_invalid_resume(error: BaseException) -> bool:
    """Whether ``error`` is an answer to ``interrupt(..., response_schema=...)`` that did not
    match the schema (LangGraph's ``langgraph.errors.is_invalid_resume``): the answer was not
    kept, and the question waits for another ``Command(resume=...)``."""
    return invalid_resume_of(error) is not None


def invalid_resume_of(error: BaseException) -> str | None:
    """The id of the interrupt whose answer ``error`` refused, if it is such an error."""
    iid = getattr(error, _INVALID_RESUME, None)
    return iid if isinstance(error, ValidationError) and isinstance(iid, str) else None


class ResponseSchema:
    """What ``interrupt(value, response_schema=...)`` was given: the JSON Schema the question
    carries, and the adapter that checks an answer (None for a JSON Schema ``dict``, which is
    surfaced as given and checks nothing, as LangGraph's)."""

    __slots__ = ("adapter", "json")

    def __init__(self, schema: Any) -> None:
        self.adapter: TypeAdapter[Any] | None = None
        if isinstance(schema, dict):
            self.json: dict[str, Any] = schema
            return
        if isinstance(schema, str):  # pydantic would read it as a forward reference
            raise TypeError(_unreadable(schema, "a string is no schema"))
        try:
            self.adapter = TypeAdapter(schema)
            self.json = self.adapter.json_schema()
        except (PydanticUserError, NameError, SyntaxError) as exc:
            raise TypeError(_unreadable(schema, str(exc).splitlines()[0])) from exc
        # pydantic quoting it (an integer past 4,300 digits, a raising repr): any error
        except Exception as exc:
            why = f"pydantic cannot read it ({type(exc).__name__})"
            raise TypeError(_unreadable(schema, why)) from exc

    def check(self, answer: Any, interrupt_id: str) -> Any:
        """``answer`` as the schema reads it; a ``ValidationError`` marked as an invalid
        answer to ``interrupt_id`` when it does not match."""
        if self.adapter is None:
            return answer
        try:
            return self.adapter.validate_python(answer)
        except ValidationError as exc:
            setattr(exc, _INVALID_RESUME, interrupt_id)
            raise


def _unreadable(schema: Any, why: str) -> str:
    return (
        f"interrupt(response_schema={shown_repr(schema)}): {why}; give a JSON Schema dict, or a "
        "type "
        "pydantic validates (a BaseModel, a TypedDict, a dataclass, int, list[str], ...)"
    )


#: Schemas already read, by the object given (a type is read once, not at every call); at
#: most ``_READ_KEPT`` (a program that makes its types at run time does not grow it for good).
_READ: dict[Any, ResponseSchema] = {}
_READ_KEPT = 256


def read_response_schema(schema: Any) -> ResponseSchema | None:
    """``schema`` read (once per hashable schema): None for no schema; a ``TypeError`` for
    one pydantic cannot read."""
    if schema is None:
        return None
    try:
        read = _READ.get(schema)
    except TypeError:  # unhashable (a dict): read each time
        return ResponseSchema(schema)
    if read is None:
        read = ResponseSchema(schema)
        if len(_READ) >= _READ_KEPT:
            _READ.clear()
        _READ[schema] = read
    return read
