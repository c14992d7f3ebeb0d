"""Store URLs: which store a URL names, where a ``sqlite:`` path lives, and showing a URL safely.

A password in a URL is never shown: ``redact_url`` replaces it with ``***`` before a URL reaches
a message or a repr -- also in a URL typed wrong, which is just when its error message is shown.
Of a Redis URL's query options only those known to hold no secret show their values
(``SHOWN_OPTIONS``, names read with their escapes decoded as redis-py reads them); every other
value -- ``password``, ``ssl_password``, and any name typed wrong, such as ``pasword`` -- is
``***``, and so is a fragment.
"""

from __future__ import annotations

import os
import re

from dsh_loop_brake._store import StoreConfigError

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final

__all__ = [
    "MEMORY_URL",
    "REDIS_OPTIONS",
    "REDIS_SCHEMES",
    "SHOWN_OPTIONS",
    "check_memory_url",
    "default_home",
    "escaped",
    "redact_url",
    "scheme_of",
    "shown",
    "sqlite_path",
]

#: The memory store's URL, the only one it has: the default store.
MEMORY_URL: Final = "memory:"
REDIS_SCHEMES: Final = ("redis", "rediss", "unix")
# The query options a Redis URL may carry, by scheme, as redis-py reads their names (decoded);
# the Redis store refuses any other (redis-py would pass it on to the connection, which fails
# only when it first connects). Not offered: what would change the answers' types (protocol,
# decode_responses) or the store's own retry policy.
_COMMON_OPTIONS: Final = frozenset(
    {
        "client_name",
        "db",
        "health_check_interval",
        "max_connections",
        "password",
        "socket_connect_timeout",
        "socket_timeout",
        "username",
    }
)
_TLS_OPTIONS: Final = frozenset(
    {
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_cert_reqs",
        "ssl_certfile",
        "ssl_check_hostname",
        "ssl_ciphers",
        "ssl_keyfile",
        "ssl_min_version",
        "ssl_password",
    }
)
REDIS_OPTIONS: Final = {
    "redis": _COMMON_OPTIONS | {"socket_keepalive"},
    "rediss": _COMMON_OPTIONS | {"socket_keepalive"} | _TLS_OPTIONS,
    "unix": _COMMON_OPTIONS,
}
#: The query options whose values a shown URL keeps: known to hold no secret. Any other value is
#: ``***`` (an allow-list: a password option typed wrong is hidden too).
SHOWN_OPTIONS: Final = (REDIS_OPTIONS["rediss"] | REDIS_OPTIONS["unix"]) - {
    "password",
    "ssl_password",
}

_KNOWN: Final = "memory:, sqlite:PATH, redis://, rediss:// or unix://"

_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_QUERY_OPTION: Final = re.compile(r"([?&;])([^=&;#]*)=([^&;#]*)")
# Schemes whose URL is a path: an @ in it is part of a file name, never user info.
_PATH_SCHEMES: Final = ("sqlite", "memory")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def redact_url(url: str) -> str:
    """``url`` with the password of its user info, the value of every query option not in
    ``SHOWN_OPTIONS`` and any fragment shown as ``***``.

    Errs on the side of hiding: everything before the last ``@`` after the scheme (and its
    ``//``, or without one: ``redis:/:secret@host`` is a typo, not a path) is user info, and user
    info without a ``:`` is hidden whole (``redis://secret@host`` may be a password). Only the
    path of a ``sqlite:`` or ``memory:`` URL without ``//`` is shown as it is (but for the value of
    anything in it that looks like a ``...pass...=`` option).
    """
    match = _SCHEME.match(url)
    head, rest = (url[: match.end()], url[match.end() :]) if match else ("", url)
    if rest.startswith("//"):
        head, rest = head + "//", rest[2:]
    elif match is not None and match.group(1).lower() in _PATH_SCHEMES:
        return _hide_options(url, _looks_secret)
    rest, hash_sign, _fragment = rest.partition("#")
    userinfo, at, after = rest.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        rest = f"{user}:***@{after}" if colon else f"***@{after}"
    return head + _hide_options(rest, _not_shown) + ("#***" if hash_sign else "")


def _looks_secret(name: str) -> bool:
    return "pass" in name.lower()


def _not_shown(name: str) -> bool:
    return name not in SHOWN_OPTIONS


def _hide_options(text: str, hidden: Callable[[str], bool]) -> str:
    """``text`` with the value of each query option whose name is ``hidden`` as ``***``; the name
    is read unescaped (``pa%73sword``), as redis-py reads it."""
    if "=" not in text:
        return text

    def hide(option: re.Match[str]) -> str:
        from urllib.parse import unquote_plus  # only for a URL with options

        if hidden(unquote_plus(option.group(2))):
            return f"{option.group(1)}{option.group(2)}=***"
        return option.group(0)

    return _QUERY_OPTION.sub(hide, text)


def shown(url: str) -> str:
    """The redacted URL as a message shows it: control characters escaped, one line."""
    return escaped(redact_url(url))


def escaped(text: str) -> str:
    """``text`` with its control characters escaped (``\\n`` as ``\\x0a``): one line, as shown."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def scheme_of(url: object) -> str:
    """The store kind a URL names: ``memory``, ``sqlite`` or one of ``REDIS_SCHEMES``.

    Raises ``StoreConfigError`` for anything else, naming the URL (redacted) and the schemes
    that exist.
    """
    if not isinstance(url, str):
        raise StoreConfigError(
            f"store: a store URL must be a string ({_KNOWN}), got {type(url).__name__}"
        )
    if not url or url != url.strip():
        what = "empty" if not url.strip() else "surrounded by whitespace"
        raise StoreConfigError(
            f"store {shown(url)}: the URL is {what}; write one of {_KNOWN}", url=redact_url(url)
        )
    match = _SCHEME.match(url)
    scheme = match.group(1) if match else ""
    if scheme in ("memory", "sqlite", *REDIS_SCHEMES):
        return scheme
    raise StoreConfigError(
        f"store {shown(url)}: unknown store scheme {scheme + ':' if scheme else '(none)'}; write"
        f" one of {_KNOWN}",
        url=redact_url(url),
    )


def check_memory_url(url: str) -> None:
    """Refuse a ``memory:`` URL with anything after the colon: the memory store has one URL."""
    if url != MEMORY_URL:
        raise StoreConfigError(
            f"store {shown(url)}: the URL is malformed; the memory store is just {MEMORY_URL}",
            url=redact_url(url),
        )


def default_home() -> str:
    """``$DSH_HOME`` when set to a non-blank value, else ``~/.dsh`` (``~`` expanded)."""
    value = os.environ.get("DSH_HOME", "")
    return os.path.expanduser(value if value.strip() else "~/.dsh")


def sqlite_path(url: str, home: str | os.PathLike[str] | None) -> str:
    """The absolute file path of a ``sqlite:PATH`` URL; a relative PATH is under ``home``."""
    path = url[len("sqlite:") :]
    problem = None
    if not path:
        problem = "has no path"
    elif path.startswith("//"):
        problem = "is not sqlite:PATH (a path directly after the colon, no //)"
    elif "\x00" in path:
        problem = "has a NUL character in its path"
    elif path == ":memory:":
        problem = "names a private in-memory database, which no other process can share"
    if problem is not None:
        raise StoreConfigError(
            f"store {shown(url)}: the URL {problem}; write sqlite:PATH, e.g."
            " sqlite:state/brakes.sqlite3 (under the dsh home) or sqlite:/var/lib/agents/x.sqlite3,"
            " or memory: for a store private to one process",
            url=redact_url(url),
        )
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        base = default_home() if home is None else os.path.expanduser(os.fspath(home))
        path = os.path.join(base, path)
    return os.path.abspath(path)
