"""The rule every id a caller gives obeys, on every backend, and how errors quote an id.

An id (of a run, its root and parent, a thread, a tenant, a graph task; in a command's target
and actor; a checkpoint id) is non-empty text of at most ``MAX_ID_LENGTH`` characters with no
control character (U+0000-U+001F, U+007F-U+009F: NUL among them), no line or paragraph
separator (U+2028, U+2029: JavaScript, the console's log views and many log readers break a
line at them, as at a newline), no character that shows as nothing or reorders the text
around it (``SPOOFING``: a bidi control such as U+202E, a zero-width space or joiner, a byte
order mark; ``"run\u202e1-"`` shows as another id than the one stored, and an operator would
steer the run it names) and no lone surrogate. The
bound is what fits PostgreSQL's btree indexes (about 2.7 KB a row) for every index that holds
two ids at four UTF-8 bytes a character; the memory and SQLite stores took longer ids, and the
same id then failed deep inside PostgreSQL. It is checked where an id enters: pydantic
constraints on the command models (in pydantic's compiled core, so a command costs nothing
more) and ``tinyagents.runs.info.check_id`` for runs and threads.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

#: The longest id, in characters (``len``).
MAX_ID_LENGTH = 256
#: The characters an id may not hold that show as nothing or move the text around them: the
#: bidi marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F, U+202A-U+202E,
#: U+2066-U+2069), the zero-width space, non-joiner and joiner (U+200B-U+200D), the word
#: joiner and invisible operators (U+2060-U+2064) and the byte order mark (U+FEFF). Letters
#: of every script (right-to-left ones too), emoji and combining marks stay ids.
SPOOFING = r"\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff"
#: What an id may hold, as a pattern (no control character, no line or paragraph separator,
#: nothing of ``SPOOFING``; ``\uXXXX`` reads alike in Python's ``re``, pydantic's core and
#: JSON Schema's ECMA regex).
ID_PATTERN = rf"^[^\x00-\x1f\x7f-\x9f\u2028\u2029{SPOOFING}]*$"
#: The pattern of an id that looks up what may be stored already (``id_problem(stored=True)``).
STORED_ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SPOOFING = re.compile(rf"[{SPOOFING}]")
#: What an id problem says (the pattern would say only that it did not match).
CONTROL_PROBLEM = (
    "holds a control character (U+0000-U+001F or U+007F-U+009F, NUL among them) or a line "
    "or paragraph separator (U+2028, U+2029); an id is printable text"
)

#: An id field of a protocol model, checked by pydantic's core.
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]

#: An id (or name) in an error message is cut to this many characters: a store's error quoted
#: a megabyte-long id whole.
MAX_QUOTED_ID = 80


def id_problem(value: str, *, stored: bool = False) -> str | None:
    """What breaks the id rule in ``value`` (a str), or None (blankness and lone surrogates
    aside: ``check_id`` says those). ``stored``: ``value`` looks up what is stored already (a
    run's page, a listing's filter), where a character of ``SPOOFING`` is let through: ids
    were saved with them before the rule refused them, and they must still read (a command to
    one is refused, saying why)."""
    if len(value) > MAX_ID_LENGTH:
        return f"{len(value):,} characters; at most {MAX_ID_LENGTH}"
    if _CONTROL.search(value) is not None:
        return CONTROL_PROBLEM
    if stored:
        return None
    if (found := _SPOOFING.search(value)) is not None:
        return (
            f"holds U+{ord(found.group()):04X}, a character that shows as nothing or reorders "
            "the text around it (a bidi control, a zero-width one, a byte order mark): the id "
            "would be shown as another; an id is text shown as it is stored"
        )
    return None


def shown_name(text: str) -> str:
    """A path or name the caller gave, as a terminal may be shown it: as it is, or as its
    ``repr`` (quoted, escaped) when it holds a character that is not printable (a terminal
    escape in a file's name reached the terminal as it was)."""
    return text if text.isprintable() else repr(text)


def shown_id(value: object) -> str:
    """``value`` as an error message quotes it: as it is, or cut to ``MAX_QUOTED_ID``
    characters, saying how long it was."""
    text = str(value)
    if len(text) <= MAX_QUOTED_ID:
        return text
    return f"{text[:MAX_QUOTED_ID]}... ({len(text):,} characters)"
