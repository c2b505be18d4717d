"""The rule every id a caller gives obeys, on every backend, and how errors quote an id.

An id (of a run, its root and parent, a thread, a tenant, a graph task; in a command's target
and actor; a checkpoint id; a command's correlation id) is non-empty text of at most
``MAX_ID_LENGTH`` characters (a correlation id: ``MAX_CORRELATION_ID``) with no control
character (U+0000-U+001F, U+007F-U+009F: NUL among them), no line or paragraph separator
(U+2028, U+2029: JavaScript, the console's log views and many log readers break a line at
them, as at a newline), no character that shows as nothing or reorders the text around it
(``SPOOFING``: a bidi control such as U+202E, a zero-width space or joiner, a soft hyphen, a
Hangul filler, a byte order mark; ``"run\u202e1-"`` shows as another id than the one stored,
and an operator would steer the run it names), no lone surrogate, and is in Unicode
normalization form NFC (``"cafe\u0301"`` and ``"caf\u00e9"`` show as one text, which
Unicode holds canonically equivalent and UAX #31 compares normalized: two runs were started
under them, both shown as ``café``; this is ``id_problem``'s, see there). The
bound is what fits PostgreSQL's btree indexes (about 2.7 KB a row) for every index that holds
two ids at four UTF-8 bytes a character; the memory and SQLite stores took longer ids, and the
same id then failed deep inside PostgreSQL. It is checked where an id enters: pydantic
constraints on the command models (in pydantic's compiled core, so a command costs nothing
more) and ``tinyagents.runs.info.check_id`` for runs and threads.

Zero-width joiner and non-joiner (U+200D, U+200C) are refused too, though words of some
scripts (Persian, Devanagari, Malayalam...) and emoji sequences need them. UTS #31 (Unicode
identifiers, section 2.3) allows them in an identifier only in three contexts (after a
virama, or a non-joiner between joining letters), and UTS #39 (security) takes them as
UTS #31 does; anywhere else they show as nothing: ``"run\u200d-1"`` shows as
``run-1``. An id is a key compared code point by code point, not a word; UTS #31 lets a
profile be stricter than its default, and the check of those contexts needs joining data
Python's ``unicodedata`` does not hold. So: refused everywhere, saying which code point. A
name shown beside an id (an agent's name, a message's text) may hold them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import StringConstraints

from tinyagents.protocol.text import encodes_as_utf8

#: The longest id, in characters (``len``).
MAX_ID_LENGTH = 256
#: The characters an id may not hold that show as nothing or move the text around them: every
#: character of the Basic Multilingual Plane Unicode calls default-ignorable (shown as nothing
#: where it is not understood) but the variation selectors U+FE00-U+FE0F (an emoji's
#: presentation: "\u2764\ufe0f"). That is the bidi marks, embeddings, overrides and isolates
#: (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), the zero-width space, non-joiner
#: and joiner (U+200B-U+200D; see the module's docstring), the word joiner, invisible
#: operators and deprecated format characters (U+2060-U+206F), the soft hyphen (U+00AD), the
#: combining grapheme joiner (U+034F), the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0),
#: the Khmer inherent vowels (U+17B4, U+17B5), the Mongolian variation selectors and vowel
#: separator (U+180B-U+180F), U+FFF0-U+FFF8 and the byte order mark (U+FEFF). Letters of
#: every script (right-to-left ones too), emoji and combining marks stay ids; so do the
#: default-ignorables past U+FFFF (tag characters, which spell a subdivision's flag emoji,
#: and a few format characters of historic scripts): the pattern is also a JSON Schema's,
#: whose regex writes such a character as two surrogates a class cannot hold.
SPOOFING = (
    r"\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufff8"
)
#: What an id may hold, as a pattern (no control character, no line or paragraph separator,
#: nothing of ``SPOOFING``; ``\uXXXX`` reads alike in Python's ``re``, pydantic's core and
#: JSON Schema's ECMA regex).
ID_PATTERN = rf"^[^\x00-\x1f\x7f-\x9f\u2028\u2029{SPOOFING}]*$"
#: The pattern of an id that looks up what may be stored already (``id_problem(stored=True)``).
STORED_ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SPOOFING = re.compile(rf"[{SPOOFING}]")
#: What a name shown beside an id (an agent's) may not hold: a control character, a line or
#: paragraph separator, or a bidi control (which shows the text around it reordered:
#: CVE-2021-42574, "Trojan Source"). Zero-width joiners stay: words and emoji need them.
_NOT_IN_A_NAME = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
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
    run's page, a listing's filter), where a character of ``SPOOFING`` and text not in NFC
    are let through: ids were saved with them before the rule refused them, and they must
    still read (a command to one holding a ``SPOOFING`` character is refused, saying why).
    NFC is checked here only, not by ``ID_PATTERN`` (no pattern says it): a command's target
    naming an id not in NFC is taken, and reaches only a run stored under it before."""
    if len(value) > MAX_ID_LENGTH:
        return f"{len(value):,} characters; at most {MAX_ID_LENGTH}"
    if (found := _CONTROL.search(value)) is not None:  # named: a line break shows as nothing
        return f"{CONTROL_PROBLEM} (U+{ord(found.group()):04X} here)"
    if stored:
        return None
    if (found := _SPOOFING.search(value)) is not None:
        return (
            f"holds U+{ord(found.group()):04X}, a character that shows as nothing or reorders "
            "the text around it (a bidi control, a zero-width one, a soft hyphen, a filler, a "
            "byte order mark): the id would be shown as another; an id is text shown as it is "
            "stored"
        )
    if not value.isascii() and not unicodedata.is_normalized("NFC", value):
        return (
            "is not in Unicode normalization form NFC (it spells, say, 'e' and a combining "
            "acute where NFC has one character): it shows as the same text as another id; "
            "give unicodedata.normalize('NFC', id)"
        )
    return None


def name_problem(name: str) -> str | None:
    """What keeps ``name`` (an agent's, shown in listings, logs and the steering header) from
    being shown as it is, or None: a character of ``_NOT_IN_A_NAME`` or a lone surrogate,
    named by code point."""
    if (found := _NOT_IN_A_NAME.search(name)) is not None:
        return (
            f"it holds U+{ord(found.group()):04X}, a control character, line break or bidi "
            "control, which a log line, a terminal or a web page shows as no text (or breaks, "
            "or reorders)"
        )
    if not encodes_as_utf8(name):
        # (a str holds a character past U+FFFF whole: a surrogate in one is alone)
        lone = next(c for c in name if "\ud800" <= c <= "\udfff")
        return (
            f"it holds U+{ord(lone):04X}, a lone surrogate, which is no UTF-8 text: "
            "no log line, store or steering header can carry it"
        )
    return None


def shown_name(text: str) -> str:
    """A path or name the caller gave, as a terminal may be shown it: as it is, or as its
    ``repr`` (quoted, escaped) when it holds a character that is not printable (a terminal
    escape in a file's name reached the terminal as it was)."""
    return text if text.isprintable() else repr(text)


def shown_repr(value: object) -> str:
    """``shown_id(repr(value))``, but an integer Python will not print (past 4,300 digits)
    is named by its size, and another value whose ``repr`` raises (a list holding such an
    integer, or an object whose ``__repr__`` raises) by its type: quoting it in an error
    raised a bare ``ValueError`` (or that ``__repr__``'s error) in place of the error meant."""
    try:
        text = repr(value)
    except Exception:
        if isinstance(value, int) and type(value).__repr__ is int.__repr__:  # too long
            return int_named(value)
        return f"a {type(value).__name__} that cannot be printed"
    return shown_id(text)


def int_named(value: int) -> str:
    """An integer too long to print, named by its size (``bit_length`` never prints it)."""
    sign = "a negative integer" if value < 0 else "an integer"
    return f"{sign} of about {int(value.bit_length() * 0.30103):,} digits"


def shown_id(value: object) -> str:
    """``value`` as an error message quotes it: as it is, or cut to ``MAX_QUOTED_ID``
    characters, saying how long it was."""
    text = str(value)
    if len(text) <= MAX_QUOTED_ID:
        return text
    return f"{text[:MAX_QUOTED_ID]}... ({len(text):,} characters)"
