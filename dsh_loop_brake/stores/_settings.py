"""A row's ``store`` and ``sessionTtl``: resolved (row, then environment, then default), checked,
and opened, for both plugins.

``store`` is a store URL; ``DSH_LOOP_BRAKE_STORE`` supplies it only when the row has no ``store``
key (or it is ``null``), as ``DSH_LOOP_BRAKE_MAX_REPEATS`` does for ``maxRepeats``; a blank value
counts as not set. ``sessionTtl`` is an integer number of seconds (default 86400) and has no
environment variable. Resolving does no I/O: a URL that can never work (an unknown scheme, a
malformed URL, a Redis URL without the ``redis`` extra) is refused there, so ``config`` says so
too. Opening (at apply) creates or checks the file, or reaches the server once: what only then
shows up as unusable (a directory that cannot be created, a file that is not a store) is a
configuration error too, naming the key and its source; a store that cannot be reached or refuses
the credentials is a ``StoreError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from dsh_loop_brake._config import Source, integer_value
from dsh_loop_brake._errors import LoopBrakeConfigError
from dsh_loop_brake._short_repr import short_repr
from dsh_loop_brake._store import (
    DEFAULT_SESSION_TTL,
    MAX_SESSION_TTL,
    SESSION_TTL_RULE,
    MemoryStore,
    Store,
    StoreConfigError,
    StoreError,
)
from dsh_loop_brake.stores._url import (
    MEMORY_URL,
    check_memory_url,
    redact_url,
    scheme_of,
    sqlite_path,
)

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Final, final
else:
    from dsh_loop_brake._no_typing import final


__all__ = [
    "DEFAULT_SESSION_TTL",
    "DEFAULT_STORE",
    "STORE_ENV_VAR",
    "STORE_KEYS",
    "ConfigErrorFactory",
    "StoreSetting",
    "check_store_url",
    "loop_brake_config_error",
    "open_row_store",
    "open_store_setting",
    "resolve_store_setting",
]

STORE_ENV_VAR: Final = "DSH_LOOP_BRAKE_STORE"
DEFAULT_STORE: Final = MEMORY_URL
#: The row keys that say where a brake's state lives (both rows take them).
STORE_KEYS: Final = ("store", "sessionTtl")

#: Makes the plugin's configuration error from a message and the row key at fault (``None``
#: when the value came from the environment).
ConfigErrorFactory = Callable[[str, "str | None"], LoopBrakeConfigError]

_URLS: Final = "memory:, sqlite:PATH, redis://, rediss:// or unix://"


def loop_brake_config_error(message: str, key: str | None) -> LoopBrakeConfigError:
    """The loop brake's configuration error, with the row key at fault."""
    error = LoopBrakeConfigError(message)
    error.key = key
    return error


@final
class StoreSetting:
    """Where a row's brake keeps its state (an immutable value).

    ``url`` is the URL as configured -- it may hold a password: show ``shown`` instead, which
    has any password as ``***`` --, ``source`` where it came from; ``session_ttl`` and
    ``ttl_source`` the same for ``sessionTtl``; ``ignored_env`` names ``DSH_LOOP_BRAKE_STORE``
    when it is set but the row's ``store`` wins.
    """

    __slots__ = ("ignored_env", "session_ttl", "source", "ttl_source", "url")

    url: str
    source: Source
    session_ttl: int
    ttl_source: Source
    ignored_env: tuple[str, ...]

    def __init__(
        self,
        url: str = DEFAULT_STORE,
        source: Source | None = None,
        session_ttl: int = DEFAULT_SESSION_TTL,
        ttl_source: Source | None = None,
        ignored_env: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "source", source or Source("default"))
        object.__setattr__(self, "session_ttl", session_ttl)
        object.__setattr__(self, "ttl_source", ttl_source or Source("default"))
        object.__setattr__(self, "ignored_env", ignored_env)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def shown(self) -> str:
        """The URL with any password as ``***``: what messages and ``config`` show."""
        return redact_url(self.url)

    @property
    def is_memory(self) -> bool:
        """Whether the state lives in the process's own memory (nothing to open)."""
        return self.url == DEFAULT_STORE

    def _key(self) -> tuple[object, ...]:
        return (self.url, self.source, self.session_ttl, self.ttl_source, self.ignored_env)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreSetting) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"StoreSetting({self.shown!r}, {self.source!r}, session_ttl={self.session_ttl!r},"
            f" ttl_source={self.ttl_source!r}, ignored_env={self.ignored_env!r})"
        )

    def located(self, store: Source, ttl: Source) -> StoreSetting:
        """The same setting with other (located) sources."""
        return StoreSetting(self.url, store, self.session_ttl, ttl, self.ignored_env)


def check_store_url(url: str) -> None:
    """Refuse, without any I/O, a store URL that can never work (``StoreConfigError``)."""
    scheme = scheme_of(url)
    if scheme == "memory":
        check_memory_url(url)
    elif scheme == "sqlite":
        sqlite_path(url, os.sep)  # its form only: where a relative path lands is for opening
    else:
        from dsh_loop_brake.stores._redis import check_redis_url

        check_redis_url(url)


def resolve_store_setting(
    config: Mapping[str, object] | None,
    environ: Mapping[str, str] | None = None,
    *,
    brake: str = "loop brake",
    source: str = "the loop-brake patch row",
    error: ConfigErrorFactory = loop_brake_config_error,
) -> StoreSetting:
    """The row's ``store`` (else ``DSH_LOOP_BRAKE_STORE``, else ``memory:``) and ``sessionTtl``
    (else 86400), checked without any I/O.

    ``config`` is the row's config, already known to be a mapping (or ``None``); ``brake`` and
    ``source`` name the brake and the row in messages; ``error`` makes the plugin's configuration
    error (its ``key`` is the row key at fault, ``None`` for a value from the environment).
    """
    given = config if config is not None else {}
    raw = (os.environ if environ is None else environ).get(STORE_ENV_VAR)
    env_value = raw.strip() if raw is not None else ""
    value = given.get("store")
    ignored: tuple[str, ...] = ()
    if value is not None:
        url, origin, where, key = value, Source("row"), source, "store"
        ignored = (STORE_ENV_VAR,) if env_value else ()
    elif env_value:
        url, origin = env_value, Source("env", STORE_ENV_VAR)
        where, key = f"the environment variable {STORE_ENV_VAR}", None
    else:
        url, origin, where, key = DEFAULT_STORE, Source("default"), "the default", None
    if not isinstance(url, str):
        # Only a scalar is shown: a list or mapping could hold the URL, password and all.
        got = short_repr(url) if isinstance(url, (int, float)) else f"a {type(url).__name__}"
        raise error(
            f"{brake}: store must be a store URL ({_URLS}) as a string, got {got} (from {where})",
            key,
        )
    try:
        check_store_url(url)
    except StoreConfigError as problem:
        raise error(f"{brake}: {problem} (from {where})", key) from None
    ttl, ttl_origin = DEFAULT_SESSION_TTL, Source("default")
    ttl_value = given.get("sessionTtl")
    if ttl_value is not None:
        number = integer_value(ttl_value)
        if number is None or not 1 <= number <= MAX_SESSION_TTL:
            raise error(
                f"{brake}: sessionTtl must be {SESSION_TTL_RULE}, got {short_repr(ttl_value)}"
                f" (from {source})",
                "sessionTtl",
            )
        ttl, ttl_origin = number, Source("row")
    return StoreSetting(url, origin, ttl, ttl_origin, ignored)


def open_store_setting(
    setting: StoreSetting,
    *,
    home: str | os.PathLike[str] | None = None,
    brake: str = "loop brake",
    source: str = "the loop-brake patch row",
    error: ConfigErrorFactory = loop_brake_config_error,
) -> Store:
    """Open the store ``setting`` names and reach it once (a relative ``sqlite:`` path is under
    ``home``, by default ``$DSH_HOME`` or ``~/.dsh``).

    A store that can never work is the plugin's configuration error naming the key and its
    source; one that cannot be reached, or refuses the credentials, a ``StoreError`` saying
    which brake's store it is.
    """
    from dsh_loop_brake.stores import open_store

    where = source if setting.source.kind == "row" else str(setting.source)
    key = "store" if setting.source.kind == "row" else None
    try:
        return open_store(setting.url, session_ttl=setting.session_ttl, home=home)
    except StoreConfigError as problem:
        raise error(f"{brake}: {problem} (from {where})", key) from None
    except StoreError as problem:
        failure = StoreError(f"{brake}: {problem} (from {where})", url=problem.url)
        failure.key = key  # where the harness locates it: the row's file and line
        raise failure from None


def open_row_store(
    setting: StoreSetting,
    ctx: object,
    *,
    brake: str = "loop brake",
    source: str = "the loop-brake patch row",
    error: ConfigErrorFactory = loop_brake_config_error,
) -> Store:
    """:func:`open_store_setting` for a plugin applied with ``ctx``: a relative ``sqlite:`` path
    is under ``ctx.home`` (the harness's ``DSH_HOME``) when the host gives one, else under
    ``$DSH_HOME`` or ``~/.dsh``. The memory store is made without any I/O."""
    if setting.is_memory:
        return MemoryStore()
    home = getattr(ctx, "home", None)
    if not isinstance(home, (str, os.PathLike)):
        home = None
    return open_store_setting(setting, home=home, brake=brake, source=source, error=error)
