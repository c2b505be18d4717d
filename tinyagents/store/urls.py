"""Store and service URLs as they may be shown: in errors, banners and ``url`` attributes."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tinyagents.errors import ConfigurationError

#: Query parameters that carry a password (libpq's ``password=`` and ``sslpassword=``).
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def redacted(dsn: str) -> str:
    """``dsn`` without its password (in its user part, or a ``password=`` / ``sslpassword=``
    query parameter), for messages, banners and ``url``: a store's, a Redis server's."""
    try:
        parts = urlsplit(dsn)
        password = parts.password
    except ValueError:  # not a URL we can read: show none of it
        return "<unreadable store URL>"
    query = parse_qsl(parts.query, keep_blank_values=True) if parts.query else []
    secret_query = any(k.lower() in _SECRET_PARAMS for k, _ in query)
    if password is None and not secret_query:
        return dsn  # as given: rebuilt, sqlite:////abs/path would lose a slash
    if password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1))
    if secret_query:
        shown = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in query]
        parts = parts._replace(query=urlencode(shown, safe="*"))
    return urlunsplit(parts)


#: The URL schemes of a SQLite file: ours, and SQLAlchemy's name of the aiosqlite driver.
SQLITE_SCHEMES = ("sqlite://", "sqlite+aiosqlite://")


def is_sqlite_url(spec: str) -> bool:
    """Whether ``spec`` is a SQLite URL (``sqlite:///runs.db``, ``sqlite+aiosqlite:///runs.db``)."""
    return spec.startswith(SQLITE_SCHEMES)


def sqlite_path(spec: str, *, what: str = "store") -> str:
    """The file a ``sqlite://`` URL names (``sqlite:///rel.db`` → ``rel.db``,
    ``sqlite:////abs.db`` → ``/abs.db``; ``sqlite+aiosqlite://`` alike); ``ConfigurationError``
    for one that names none or has a query or a fragment. ``what`` names the URL's user in the message."""
    path = spec.removeprefix("sqlite+aiosqlite://").removeprefix("sqlite://")
    path = path[1:] if path.startswith("/") else path
    if not path:  # SQLite reads "" as a private temporary database, gone at close
        raise ConfigurationError(
            f"{what} {spec!r} names no file: 'sqlite:///runs.db' (relative) or "
            "'sqlite:////abs/runs.db'; None keeps everything in memory"
        )
    if "?" in path:  # SQLite's URI options: read as part of the file's name, they made a new file
        name, _, query = spec.partition("?")
        raise ConfigurationError(
            f"{what} {spec!r}: a SQLite {what} URL takes no query ('?{query}'); name the file "
            f"alone, e.g. {name!r}"
        )
    if "#" in path:  # a URL's fragment: a URL reader drops it, and SQLite made it the name's
        name, _, fragment = spec.partition("#")
        raise ConfigurationError(
            f"{what} {spec!r}: a SQLite {what} URL takes no fragment ('#{fragment}'): read as a "
            f"URL it names {name!r}, but the file made would be {path!r}; name the file alone, "
            "or give a file whose name holds '#' as a path (SqliteStore(path))"
        )
    return path


#: What ends a folder's name in a path (``/``; and ``\\`` where it separates folders).
_SEPARATORS = tuple({"/", os.sep, os.altsep or "/"})


def check_file_name(path: str, *, what: str = "store") -> str:
    """``path`` if a file can have it, else a ``ConfigurationError``: a NUL, or a lone
    surrogate the file system's encoding has no bytes for (one ``os.fsdecode`` made of an
    undecodable byte has some). They failed at open, as a bare ``ValueError`` or
    ``UnicodeEncodeError``, or as a file that would not open. A path ending in a slash names
    a folder: SQLite made a file of the folder's name there."""
    if path.endswith(_SEPARATORS):
        raise ConfigurationError(
            f"{what} file name {path!a} ends in a slash: it names a folder, not a file; name "
            f"a file in it, e.g. {path + 'runs.db'!a} (nothing was made)"
        )
    if "\x00" in path:
        problem = "it holds a NUL"
    else:
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            problem = "it holds a lone surrogate, which no file name's bytes encode"
        else:
            return path
    raise ConfigurationError(
        f"{what} file name {path!a} is one no file can have ({problem}): name the file with "
        "text a file system takes"
    )
