"""Where the brakes keep their counts: in memory, in one SQLite file, or in Redis.

* ``memory:`` (the default) -- ``MemoryStore``: the process's own memory, for one process;
* ``sqlite:PATH`` -- ``SQLiteStore``: one SQLite file, for the processes of one machine (hooks,
  worker pools);
* ``redis://...``, ``rediss://...``, ``unix://...`` -- ``RedisStore`` (the extra ``redis``): for
  many machines.

``open_store(url)`` opens the store a URL names and reaches it once. Every store implements the
``Store`` protocol (``dsh_loop_brake._store`` documents it method by method) and gives the same
answers for the same calls; the shared ones forget state untouched for ``session_ttl`` seconds.

Exceptions::

    Exception
    └── StoreError                  a store cannot be opened, reached or used
        └── StoreConfigError        (also a ValueError) a URL or setting that can never work
            └── MissingExtraError   (also an ImportError) a Redis URL, no redis extra
"""

from __future__ import annotations

import os

from dsh_loop_brake._store import (
    DEFAULT_SESSION_TTL,
    BreakerDenial,
    MemoryStore,
    Store,
    StoreConfigError,
    StoreError,
    check_session_ttl,
)
from dsh_loop_brake.stores._url import check_memory_url, redact_url, scheme_of, sqlite_path

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any

    from dsh_loop_brake.stores._redis import MissingExtraError, RedisStore
    from dsh_loop_brake.stores._sqlite import SQLiteStore

__all__ = [
    "BreakerDenial",
    "MemoryStore",
    "MissingExtraError",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreConfigError",
    "StoreError",
    "open_store",
    "redact_url",
]


def open_store(
    url: str,
    *,
    session_ttl: int = DEFAULT_SESSION_TTL,
    home: str | os.PathLike[str] | None = None,
) -> Store:
    """Open the store ``url`` names and reach it once.

    ``memory:`` is a new ``MemoryStore`` (which never expires anything); ``sqlite:PATH`` a
    ``SQLiteStore`` on PATH (``~`` expanded; a relative PATH is under ``home``, by default
    ``$DSH_HOME`` or ``~/.dsh``); ``redis://``, ``rediss://`` and ``unix://`` a ``RedisStore``.

    Raises ``StoreConfigError`` (a ``ValueError``) for a URL or setting that can never work --
    an unknown scheme, a malformed URL, a file that is not a store, a directory that cannot be
    created -- and ``MissingExtraError`` (an ``ImportError`` too) for a Redis URL without the
    ``redis`` extra; ``StoreError`` for a store that cannot be reached or refuses the
    credentials. Messages name the URL with any password shown as ``***``, and say what the cause
    was; the error carries no cause and no traceback below this call (the frames beneath hold
    the URL in their locals, which a traceback rendered with its locals would show).
    """
    try:
        return _open_store(url, session_ttl, home)
    except StoreError as error:
        # No frame below this one reaches the traceback (several hold the URL, password and
        # all, in their locals; so may a client library's frames in the cause), and this one
        # lets go of it before raising: the message says what the cause was.
        del url
        raise error.with_traceback(None) from None


def _open_store(url: str, session_ttl: int, home: str | os.PathLike[str] | None) -> Store:
    scheme = scheme_of(url)
    if scheme == "memory":
        check_session_ttl(session_ttl, redact_url(url))
        check_memory_url(url)
        return MemoryStore()
    if scheme == "sqlite":
        from dsh_loop_brake.stores._sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url, home), session_ttl=session_ttl)
    from dsh_loop_brake.stores._redis import RedisStore

    store = RedisStore(url, session_ttl=session_ttl)
    try:
        store.ping()
    except BaseException:
        store.close()
        raise
    return store


def __getattr__(name: str) -> Any:
    # The SQLite and Redis stores load on first use: importing this package stays cheap for a
    # process that only needs the memory store, and never imports redis.
    if name == "SQLiteStore":
        from dsh_loop_brake.stores._sqlite import SQLiteStore

        return SQLiteStore
    if name in ("RedisStore", "MissingExtraError"):
        from dsh_loop_brake.stores import _redis

        return getattr(_redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
