"""Store and service URLs as they may be shown: in errors, banners and ``url`` attributes."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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
