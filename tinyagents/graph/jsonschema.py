"""JSON Schema of a graph's input, output and context (LangGraph's ``get_input_jsonschema``,
``get_output_jsonschema`` and ``get_context_jsonschema``), made by pydantic's
``TypeAdapter`` from the classes the graph was declared with."""

from __future__ import annotations

import sys
import typing
from typing import Any

import typing_extensions
from pydantic import BaseModel, TypeAdapter

from tinyagents.errors import ConfigurationError


def json_schema(typ: Any, *, title: str | None = None) -> dict[str, Any]:
    """``typ``'s JSON Schema: a pydantic model's own, else its ``TypeAdapter``'s. ``title``
    names a schema whose type has no name of its own (a one-value state, an entrypoint's
    annotations), as LangGraph's ``LangGraphInput`` / ``LangGraphOutput``."""
    if isinstance(typ, type) and issubclass(typ, BaseModel):
        return typ.model_json_schema()
    try:
        schema = TypeAdapter(_adaptable(typ)).json_schema()
    except Exception as exc:
        raise ConfigurationError(
            f"cannot describe {typ!r} as JSON Schema ({exc}); give the graph a TypedDict, "
            "dataclass or pydantic model of JSON-able fields"
        ) from exc
    if title is not None and "title" not in schema:
        schema = {"title": title, **schema}
    return schema


def _adaptable(typ: Any) -> Any:
    """``typ`` as pydantic reads it: a ``typing.TypedDict`` on Python < 3.12 (which pydantic
    refuses) remade as a ``typing_extensions.TypedDict`` of the same fields and totality."""
    if sys.version_info >= (3, 12) or not typing_extensions.is_typeddict(typ):
        return typ
    if typing_extensions.TypedDict in getattr(typ, "__orig_bases__", ()):
        return typ  # typing_extensions' own: pydantic reads it
    hints = typing.get_type_hints(typ, include_extras=True)
    required = getattr(typ, "__required_keys__", frozenset(hints))
    marked = (typing_extensions.Required, typing_extensions.NotRequired)
    fields = {
        k: v
        if typing_extensions.get_origin(v) in marked
        else typing_extensions.Required[v]
        if k in required
        else typing_extensions.NotRequired[v]
        for k, v in hints.items()
    }
    made: Any = typing_extensions.TypedDict(typ.__name__, fields)  # type: ignore[misc]
    made.__doc__ = typ.__doc__
    return made


__all__ = ["json_schema"]
