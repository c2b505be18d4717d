"""The rule of every command text: it must show something (``shows_nothing``)."""

from __future__ import annotations


def shows_nothing(text: str) -> bool:
    """Whether ``text`` shows nothing: empty, whitespace, or only invisible characters
    (zero-width spaces, bidi marks: Unicode format characters, which ``strip`` keeps; and
    control characters, ASCII's among them: an instruction of NUL or ESC alone was taken).
    The rule of every command text (``not_blank``), which the API's ``/steer`` asks first
    to name its own field. ASCII text is judged by one ``strip`` of ASCII's invisible
    characters."""
    if text.isascii():
        return not text.strip(_ASCII_INVISIBLE)
    return not any(c.isprintable() and not c.isspace() for c in text)


def not_blank(value: str) -> str:
    """``value``, unless it shows nothing (``shows_nothing``)."""
    # ASCII (nearly every command's text) judged here: no second call for it
    if value.strip(_ASCII_INVISIBLE) if value.isascii() else not shows_nothing(value):
        return value
    raise ValueError("must not be blank (it shows no visible character)")


#: The ASCII characters that show nothing: the controls, the space and DEL.
_ASCII_INVISIBLE = "".join(map(chr, range(0x21))) + "\x7f"


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (a str may hold lone surrogates; no encoder
    takes them, and no store can hold them)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def storable(text: str) -> bool:
    """Whether every store can hold and compare ``text``: no NUL (PostgreSQL's text takes
    none) and no lone surrogate (``encodes_as_utf8``)."""
    return "\x00" not in text and encodes_as_utf8(text)


def plain_text(text: str) -> str:
    """The characters ``text`` holds, as a plain ``str``: a subclass of ``str`` may say
    anything of itself through its own ``__str__``, ``__len__``, ``isascii`` or ``encode``,
    and a check that measures or encodes text reads what is there instead."""
    return str.__str__(text)


#: How many characters a text holds, whatever a subclass of ``str`` says of itself through its
#: own ``__len__`` (``len(plain_text(text))`` without the copy).
text_len = str.__len__
