"""The loop brake itself: one streak per session, the ``max_repeats``-th identical call denied.

A call is identified by its SHA-256 digest (``call_digest``); each session keeps one streak, the
digest of its latest call and how many times in a row it was made. ``LoopBrake`` decides; the
streaks live in its **store** (``dsh_loop_brake._store``): a ``MemoryStore`` private to the brake
unless it is given another (a SQLite file or Redis, ``dsh_loop_brake.stores``), so that processes
sharing one store count one agent's calls together. The brake talks to its store through
``advance_streak`` (one atomic compare-and-advance per call), ``forget_streaks``,
``read_streak`` and ``count_streaks`` only.

A store that fails at run time fails open: the call is allowed and not counted (``check``
returns 0), ``store_errors`` grows by one, and the store is warned about at most once a minute
(``_store_failures``); the next call tries the store again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, Token

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH, call_digest, describe_unidentifiable
from dsh_loop_brake._config import DEFAULT_MAX_REPEATS, normalize_max_repeats
from dsh_loop_brake._errors import LoopBrakeError
from dsh_loop_brake._short_repr import json_literal
from dsh_loop_brake._store import MemoryStore
from dsh_loop_brake._store_failures import store_failed

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    import logging
    from typing import Any, Final, TypeVar, final, overload

    from dsh_loop_brake._store import Store

    _F = TypeVar("_F", bound=Callable[..., Any])
else:
    from dsh_loop_brake._no_typing import final


__all__ = ["LOGGER_NAME", "LoopBrake", "SessionScope"]

LOGGER_NAME: Final = "dsh_loop_brake"
"""The logger the brake warns on (``logging`` is imported only when it does)."""

# Tool names remembered for the once-per-tool warning; bounded so hostile names cannot grow it.
_WARNED_TOOLS_LIMIT: Final = 1024


@final
class LoopBrake:
    """Counts consecutive identical calls per session and denies the ``max_repeats``-th one.

    ``store`` is where the streaks live: ``None`` (the default) is a ``MemoryStore`` private to
    this brake; pass a ``SQLiteStore`` or ``RedisStore`` (``dsh_loop_brake.stores``) to share the
    counts with every process that uses the same store. The brake never closes a store it was
    given.
    """

    __slots__ = (
        "_errors_lock",
        "_max_repeats",
        "_session",
        "_store",
        "_store_errors",
        "_warned",
        "_warned_lock",
    )

    def __init__(
        self, max_repeats: int = DEFAULT_MAX_REPEATS, *, store: Store | None = None
    ) -> None:
        self._max_repeats = normalize_max_repeats(max_repeats, source="LoopBrake(max_repeats=...)")
        if store is None:
            store = MemoryStore()
        elif not callable(getattr(store, "advance_streak", None)):
            raise TypeError(
                "loop brake: store must be a store (a MemoryStore, SQLiteStore or RedisStore from"
                f" dsh_loop_brake.stores) or None, got {type(store).__name__}"
            )
        self._store: Store = store
        self._store_errors = 0
        self._errors_lock = threading.Lock()
        # The current session of `with brake.session(...)`: per thread and per asyncio task.
        self._session: ContextVar[str] = ContextVar("dsh_loop_brake_session", default="default")
        self._warned: set[str] = set()
        self._warned_lock = threading.Lock()

    @property
    def max_repeats(self) -> int:
        """The streak length at which a call is denied."""
        return self._max_repeats

    @property
    def store(self) -> Store:
        """Where the streaks live (a ``MemoryStore`` private to this brake unless given one)."""
        return self._store

    @property
    def store_errors(self) -> int:
        """How many calls the store failed for, each allowed and not counted (fail open)."""
        return self._store_errors

    def check(self, tool_name: str, args: Any, *, session_id: str | None = None) -> int:
        """Count this call; return the streak, or raise ``LoopBrakeError`` when it is denied.

        ``session_id=None`` is the current ``session(...)``, else ``"default"``. Arguments that
        cannot be identified (not JSON, or raising while read) are allowed: 0, and the session's
        streak ends. A store that fails allows the call too: 0, and ``store_errors`` grows.
        """
        if session_id is None:
            session_id = self._session.get()
        elif type(session_id) is not str and not isinstance(session_id, str):
            del args  # as below: no frame of ours keeps the arguments in a traceback
            raise TypeError(
                f"loop brake: a session id must be a str, got {type(session_id).__name__}"
            )
        if type(tool_name) is not str and not isinstance(tool_name, str):
            del args
            raise TypeError(
                f"loop brake: the tool name must be a str, got {type(tool_name).__name__}"
            )
        try:
            digest = call_digest(tool_name, args)
        except Exception as error:
            # Fail open: a brake must never block real work it cannot judge, nor crash it. The
            # call is a different call from whatever came before, so the streak ends here.
            del args
            self._warn_unidentifiable(tool_name, error)
            try:
                self._store.forget_streaks(session_id)
            except Exception as failure:
                self._store_failed(failure)
            return 0
        # An error tracker renders the locals of every frame a LoopBrakeError leaves (Sentry
        # does by default): the arguments must not be among them.
        del args
        try:
            count = self._store.advance_streak(session_id, digest)
        except Exception as failure:
            # Fail open: the brake's memory is away (unreachable, locked, corrupted). Blocking
            # every call until it is back would do more harm than the loops it is there to stop.
            self._store_failed(failure)
            return 0
        if count >= self._max_repeats:
            raise LoopBrakeError(tool_name, count, self._max_repeats, digest.hex(), session_id)
        return count

    def session(self, session_id: str) -> SessionScope:
        """A context manager making ``session_id`` the current session of the calls made inside
        it (``check(..., session_id=None)``), in this thread or asyncio task; nested sessions
        restore the outer one on leaving."""
        if type(session_id) is not str and not isinstance(session_id, str):
            raise TypeError(
                f"loop brake: a session id must be a str, got {type(session_id).__name__}"
            )
        return SessionScope(self._session, session_id)

    if TYPE_CHECKING:  # the overloads are for type checkers (typing is not imported at run time)

        @overload
        def tool(self, fn: _F, /) -> _F: ...
        @overload
        def tool(
            self, fn: None = None, /, *, name: str | None = None, session_id: str | None = None
        ) -> Callable[[_F], _F]: ...

    def tool(
        self,
        fn: _F | None = None,
        /,
        *,
        name: str | None = None,
        session_id: str | None = None,
    ) -> _F | Callable[[_F], _F]:
        """Brake a plain function (sync or async) whose parameters are the tool's arguments.

        ``@brake.tool`` or ``@brake.tool(name="search", session_id=None)``: each call is
        checked as ``name`` (default: the function's name) with its arguments bound to the
        signature, defaults applied, before the body runs; the session is ``session_id``, else
        the current ``brake.session(...)``. The function keeps its signature, name and docstring.
        """
        # Imported here: _wrapping builds on this module.
        from dsh_loop_brake._wrapping import brake_function

        if fn is None:
            return lambda function: brake_function(function, self, name=name, session_id=session_id)
        return brake_function(fn, self, name=name, session_id=session_id)

    def streak(self, session_id: str) -> tuple[str, int] | None:
        """The session's current call (hash prefix) and its count, or ``None``.

        Asks the store, so a store that fails raises its ``StoreError`` here.
        """
        streak = self._store.read_streak(session_id)
        if streak is None:
            return None
        digest, count = streak
        return digest[: HASH_PREFIX_LENGTH // 2].hex(), count

    def streak_digest(self, session_id: str) -> tuple[bytes, int] | None:
        """The session's current call as its whole SHA-256 digest, and its count, or ``None``:
        ``streak`` for hosts that keep records of their own by call (as replay does)."""
        return self._store.read_streak(session_id)

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's streak, or every session's -- in the store, so in a shared
        store for every process that uses it."""
        self._store.forget_streaks(session_id)

    def __len__(self) -> int:
        return self._store.count_streaks()

    def __repr__(self) -> str:
        if type(self._store) is MemoryStore:
            return f"LoopBrake(max_repeats={self._max_repeats})"
        try:
            url = self._store.url
        except Exception:
            url = f"<{type(self._store).__name__}>"
        return f"LoopBrake(max_repeats={self._max_repeats}, store={url})"

    def _store_failed(self, error: Exception) -> None:
        with self._errors_lock:
            self._store_errors += 1
        store_failed(self._store, error, logger=LOGGER_NAME, brake="loop brake")

    def _warn_unidentifiable(self, tool_name: str, error: Exception) -> None:
        with self._warned_lock:
            if tool_name in self._warned or len(self._warned) >= _WARNED_TOOLS_LIMIT:
                return
            self._warned.add(tool_name)
        _logger().warning(
            "loop brake: tool %s was called with arguments that cannot be identified (%s); "
            "the call was allowed and not counted",
            json_literal(tool_name),
            describe_unidentifiable(error),
        )


@final
class SessionScope:
    """``with brake.session("agent-1"):`` — the current session for the calls inside."""

    __slots__ = ("_session_id", "_token", "_variable")

    def __init__(self, variable: ContextVar[str], session_id: str) -> None:
        self._variable = variable
        self._session_id = session_id
        self._token: Token[str] | None = None

    def __enter__(self) -> str:
        if self._token is not None:
            raise RuntimeError(
                "loop brake: this session scope is already entered; call brake.session() again"
            )
        self._token = self._variable.set(self._session_id)
        return self._session_id

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            self._variable.reset(self._token)
            self._token = None


def _logger() -> logging.Logger:
    # The hooks start a process per tool call: `logging` costs more to import than the rest of
    # the brake, and is only needed the first time a call cannot be identified.
    import logging

    return logging.getLogger(LOGGER_NAME)
