"""Tool descriptions from docstrings, read as pydantic-ai reads them (with griffe).

``read_docstring(fn)`` gives a tool's description and its argument descriptions from a
docstring in any of the styles pydantic-ai reads: Google (``Args:``), Sphinx (``:param x:``)
or NumPy (a ``Parameters`` section underlined with dashes). The description is the text,
admonitions kept; a ``Returns`` section makes it pydantic-ai's XML:
``<summary>text</summary>`` over a ``<returns>`` block with its ``<type>`` and
``<description>``.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

__all__ = ["read_docstring"]


def read_docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description and the argument descriptions of ``fn``'s docstring ("" and {} for
    none)."""
    doc = inspect.getdoc(fn) or ""
    summary, params = _parse_docstring(doc)
    returns = _returns(doc.splitlines(), _style(getattr(fn, "__doc__", None) or doc), fn)
    return _with_returns(summary, returns), params


#: The patterns of this module are text, compiled on first use and kept by ``re``'s cache
#: (``re.compile`` where each is used): ``import tinyagents`` compiles none of them.
_SECTION_RE = r"^(\w+(?: \w+)?):$"
#: The sections that describe arguments (lower case), as griffe reads them for pydantic-ai.
_ARG_SECTIONS = frozenset(
    f"{kind} {word}".strip()
    for kind in ("", "keyword", "other")
    for word in ("args", "arguments", "params", "parameters")
)
#: The Google sections that are no prose, as griffe parses them (the header of any other, an
#: admonition such as ``Note:``, is part of the description, with its text).
_GOOGLE_SECTIONS = _ARG_SECTIONS | frozenset(
    {"type args", "type arguments", "type params", "type parameters", "raises", "exceptions"}
    | {"returns", "yields", "receives", "examples", "attributes", "functions", "methods"}
    | {"classes", "type aliases", "modules", "warns"}
)
_PARAM_RE = r"^ {1,4}\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"
#: ``:param foo: ...`` or ``:param int foo: ...`` (Sphinx); any other ``:field:`` ends one.
_SPHINX_PARAM_RE = r"^:param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
#: ``foo : int`` (or just ``foo``, or ``foo, bar : int``), at the left margin of a NumPy
#: ``Parameters`` section.
_NUMPY_PARAM_RE = r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$"
_UNDERLINE_RE = r"^\s*-{3,}\s*$"


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (see ``_description``) and the argument descriptions of a docstring in any
    of the styles pydantic-ai reads: Google (``Args:``), Sphinx (``:param foo:``) or NumPy (a
    ``Parameters`` section underlined with dashes). A description may go on over more lines,
    indented under its first."""
    lines = doc.splitlines()
    params: dict[str, str] = {}
    style: str | None = None  # the argument section we are in: "google", "numpy", "sphinx"
    current: list[str] = []  # the arguments the line describes, if it goes on a description
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if re.compile(_UNDERLINE_RE).match(line):
            continue
        if line.strip() and re.compile(_UNDERLINE_RE).match(following):  # a NumPy section's title
            style = "numpy" if line.strip().lower() in _ARG_SECTIONS else None
            current = []
        elif header := re.compile(_SECTION_RE).match(line):
            style = "google" if header.group(1).lower() in _ARG_SECTIONS else None
            current = []
        elif match := re.compile(_SPHINX_PARAM_RE).match(line):
            style, current = "sphinx", [match.group(1)]
            params[match.group(1)] = match.group(2).strip()
        elif line.startswith(":"):  # :returns:, :type foo:, :raises: ...
            current = []
        elif style == "google" and (match := re.compile(_PARAM_RE).match(line)):
            current = [match.group(1)]
            params[match.group(1)] = match.group(2).strip()
        elif style == "numpy" and (match := re.compile(_NUMPY_PARAM_RE).match(line)):
            current = [name.strip().lstrip("*") for name in match.group(1).split(",")]
            params.update(dict.fromkeys(current, ""))
        elif current and line.strip() and (style == "google" or line[0].isspace()):
            for name in current:
                params[name] = f"{params[name]} {line.strip()}".strip()
    return _description(lines), params


def _fenced(lines: list[str]) -> list[bool]:
    """Which lines are in a ``` code fence (its fence lines too): text, whatever they say,
    as griffe reads them (a ``Returns:`` in an example is no section)."""
    marks: list[bool] = []
    inside = False
    for line in lines:
        fence = line.lstrip(" ").startswith("```")
        marks.append(inside or fence)
        inside = inside != fence
    return marks


def _description(lines: list[str]) -> str:
    """A docstring's description, as pydantic-ai (griffe) reads it: its text, line breaks kept,
    without the sections that are no prose (Google ``Args:``, ``Returns:``, ``Raises:``,
    ``Examples:`` ...: a header over an indented block), an admonition (any other header,
    ``Note:``, ``Warning:``, over an indented block) kept as its header over its dedented
    text, the parts joined by a blank line; up to a Sphinx field (``:param x:``) or a NumPy
    section's title, where the argument descriptions begin."""
    parts: list[list[str]] = [[]]
    fenced = _fenced(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if not fenced[index] and (
            line.startswith(":") or re.compile(_UNDERLINE_RE).match(following)
        ):
            break
        header = None if fenced[index] else re.compile(_SECTION_RE).match(line)
        if header is None or not following[:1].isspace() or not following.strip():
            parts[-1].append(line)
            index += 1
            continue
        body = []  # the indented block under the header
        index += 1
        while index < len(lines) and (not lines[index].strip() or lines[index][:1].isspace()):
            body.append(lines[index])
            index += 1
        if header.group(1).lower() not in _GOOGLE_SECTIONS:  # an admonition
            parts.append([line, *textwrap.dedent("\n".join(body)).splitlines()])
        parts.append([])
    texts = ("\n".join(part).strip("\n") for part in parts)
    return "\n\n".join(text for text in texts if text.strip())


# --- the Returns section ------------------------------------------------------------------

#: pydantic-ai's docstring style inference (``_griffe._docstring_style_patterns``): the first
#: style whose pattern the raw docstring matches, else Google. It picks where the Returns
#: section is read from.
_STYLE_PATTERNS: tuple[tuple[str, list[str], str], ...] = (
    (
        r"\n[ \t]*:{0}([ \t]+\w+)*:([ \t]+.+)?\n",
        "param|parameter|arg|argument|key|keyword|type|var|ivar|cvar|vartype|returns|return|"
        "rtype|raises|raise|except|exception".split("|"),
        "sphinx",
    ),
    (
        r"\n[ \t]*{0}:([ \t]+.+)?\n[ \t]+.+",
        "args|arguments|params|parameters|keyword args|keyword arguments|other args|"
        "other arguments|other params|other parameters|raises|exceptions|returns|yields|"
        "receives|examples|attributes|functions|methods|classes|modules|warns|warnings".split("|"),
        "google",
    ),
    (
        r"\n[ \t]*{0}\n[ \t]*---+\n",
        "deprecated|parameters|other parameters|returns|yields|receives|raises|warns|"
        "attributes|functions|methods|classes|modules".split("|"),
        "numpy",
    ),
)
_SPHINX_RETURNS_RE = r"^:returns?:\s*(.*)$"
_SPHINX_RTYPE_RE = r"^:rtype:\s*(.*)$"


def _style(raw: str) -> str:
    for pattern, words, style in _STYLE_PATTERNS:
        for word in words:
            if re.search(pattern.format(word), raw, re.IGNORECASE | re.MULTILINE):
                return style
    return "google"


def _returns(lines: list[str], style: str, fn: Callable[..., Any]) -> tuple[str, str] | None:
    """The type ("" for none) and the description of the docstring's first Returns section,
    or None when it has none."""
    if style == "sphinx":
        return _sphinx_returns(lines)
    if style == "numpy":
        return _numpy_returns(lines)
    return _google_returns(lines, _annotated(fn))


def _annotated(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a return annotation (``-> None`` too), as pydantic-ai asks."""
    try:
        return inspect.signature(fn).return_annotation is not inspect.Signature.empty
    except (TypeError, ValueError):
        return False


def _google_returns(lines: list[str], annotated: bool) -> tuple[str, str] | None:
    """A ``Returns:`` header over an indented block (one item, as pydantic-ai has griffe read
    it). A function with a return annotation has that for its type: the block is the
    description whole. Else the text before the first line's colon (its parentheses
    dropped) is the type, and the rest the description."""
    fenced = _fenced(lines)
    for index, line in enumerate(lines):
        header = None if fenced[index] else re.compile(_SECTION_RE).match(line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if header is None or header.group(1).lower() != "returns":
            continue
        if not following.strip() or not following[:1].isspace():
            continue  # no indented block under it: text
        body: list[str] = []
        for below in lines[index + 1 :]:
            if below.strip() and not below[:1].isspace():
                break
            body.append(below)
        block = textwrap.dedent("\n".join(body)).rstrip("\n")
        first, _, rest = block.partition("\n")
        if annotated or ":" not in first:
            return "", block
        kind, _, description = first.partition(":")
        text = "\n".join([description.lstrip(), *rest.split("\n")] if rest else [description])
        return kind.strip().lstrip("(").rstrip(")"), text.lstrip().rstrip("\n")
    return None


def _sphinx_returns(lines: list[str]) -> tuple[str, str] | None:
    """``:returns:`` (or ``:return:``) and the indented lines under it; ``:rtype:`` the
    type. A ``:rtype:`` alone is no Returns section."""
    description: str | None = None
    kind = ""
    for index, line in enumerate(lines):
        if (match := re.compile(_SPHINX_RTYPE_RE).match(line)) is not None:
            kind = match.group(1).strip()
        elif (
            description is None
            and (match := re.compile(_SPHINX_RETURNS_RE).match(line)) is not None
        ):
            parts = [match.group(1).strip()]
            for below in lines[index + 1 :]:
                if not below.strip() or not below[:1].isspace():
                    break
                parts.append(below.strip())
            description = "\n".join(parts).strip("\n")
    return None if description is None else (kind, description)


def _numpy_returns(lines: list[str]) -> tuple[str, str] | None:
    """The first item of a ``Returns`` section (a title underlined with dashes): its line
    is the type (``name : type``, or ``type``), the indented lines under it the
    description."""
    for index, line in enumerate(lines[:-1]):
        if line.strip().lower() != "returns" or not re.compile(_UNDERLINE_RE).match(
            lines[index + 1]
        ):
            continue
        items = lines[index + 2 :]
        while items and not items[0].strip():
            items = items[1:]
        if not items or re.compile(_UNDERLINE_RE).match(items[1] if len(items) > 1 else ""):
            return None  # an empty section, another title next
        item = items[0].strip()
        kind = item.split(":", 1)[1].strip() if ":" in item else item
        body: list[str] = []
        for below in items[1:]:
            if below.strip() and not below[:1].isspace():
                break
            body.append(below)
        return kind, textwrap.dedent("\n".join(body))
    return None


def _with_returns(summary: str, returns: tuple[str, str] | None) -> str:
    """``summary``, with a Returns section as pydantic-ai's ``_main_desc_with_returns`` adds
    it: ``<summary>...</summary>`` over ``<returns>`` (no ``<summary>`` when there is no
    text)."""
    if returns is None:
        return summary
    kind, description = returns
    kind_tag = f"<type>{kind}</type>\n" if kind else ""
    block = f"<returns>\n{kind_tag}<description>{description}</description>\n</returns>"
    return f"<summary>{summary}</summary>\n{block}" if summary else block
