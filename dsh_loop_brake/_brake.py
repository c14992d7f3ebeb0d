"""The loop brake itself: one streak per session, the ``max_repeats``-th identical call denied.

A call is identified by its SHA-256 digest (``call_digest``); each session keeps one streak, the
digest of its latest call and how many times in a row it was made. ``LoopBrake`` decides; the
streaks live in ``_MemoryStreaks``, the one place that holds them (a store with the methods of
the store interface: ``advance_streak``, ``end_streak``, ``read_streak``, ``forget_streaks``,
``count_streaks``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Final, TypeVar, final, overload

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH, call_digest, describe_unidentifiable
from dsh_loop_brake._config import DEFAULT_MAX_REPEATS, normalize_max_repeats
from dsh_loop_brake._errors import LoopBrakeError
from dsh_loop_brake._short_repr import json_literal

if TYPE_CHECKING:
    import logging

__all__ = ["LOGGER_NAME", "LoopBrake", "SessionScope"]

LOGGER_NAME: Final = "dsh_loop_brake"
"""The logger the brake warns on (``logging`` is imported only when it does)."""

_F = TypeVar("_F", bound=Callable[..., Any])

# Tool names remembered for the once-per-tool warning; bounded so hostile names cannot grow it.
_WARNED_TOOLS_LIMIT: Final = 1024


@final
class LoopBrake:
    """Counts consecutive identical calls per session and denies the ``max_repeats``-th one."""

    __slots__ = ("_max_repeats", "_session", "_streaks", "_warned", "_warned_lock")

    def __init__(self, max_repeats: int = DEFAULT_MAX_REPEATS) -> None:
        self._max_repeats = normalize_max_repeats(max_repeats, source="LoopBrake(max_repeats=...)")
        self._streaks = _MemoryStreaks()
        # The current session of `with brake.session(...)`: per thread and per asyncio task.
        self._session: ContextVar[str] = ContextVar("dsh_loop_brake_session", default="default")
        self._warned: set[str] = set()
        self._warned_lock = threading.Lock()

    @property
    def max_repeats(self) -> int:
        """The streak length at which a call is denied."""
        return self._max_repeats

    def check(self, tool_name: str, args: Any, *, session_id: str | None = None) -> int:
        """Count this call; return the streak, or raise ``LoopBrakeError`` when it is denied.

        ``session_id=None`` is the current ``session(...)``, else ``"default"``. Arguments that
        cannot be identified (not JSON, or raising while read) are allowed: 0, and the session's
        streak ends.
        """
        if session_id is None:
            session_id = self._session.get()
        if type(tool_name) is not str and not isinstance(tool_name, str):
            del args  # as below: no frame of ours keeps the arguments in a traceback
            raise TypeError(
                f"loop brake: the tool name must be a str, got {type(tool_name).__name__}"
            )
        try:
            digest = call_digest(tool_name, args)
        except Exception as error:
            # Fail open: a brake must never block real work it cannot judge, nor crash it. The
            # call is a different call from whatever came before, so the streak ends here.
            del args
            self._streaks.end_streak(session_id)
            self._warn_unidentifiable(tool_name, error)
            return 0
        # An error tracker renders the locals of every frame a LoopBrakeError leaves (Sentry
        # does by default): the arguments must not be among them.
        del args
        count = self._streaks.advance_streak(session_id, digest)
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
        """The session's current call (hash prefix) and its count, or ``None``."""
        streak = self._streaks.read_streak(session_id)
        if streak is None:
            return None
        digest, count = streak
        return digest[: HASH_PREFIX_LENGTH // 2].hex(), count

    def streak_digest(self, session_id: str) -> tuple[bytes, int] | None:
        """The session's current call as its whole SHA-256 digest, and its count, or ``None``:
        ``streak`` for hosts that keep records of their own by call (as replay does)."""
        return self._streaks.read_streak(session_id)

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's streak, or every session's."""
        self._streaks.forget_streaks(session_id)

    def __len__(self) -> int:
        return self._streaks.count_streaks()

    def __repr__(self) -> str:
        return f"LoopBrake(max_repeats={self._max_repeats})"

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


# --- Where the streaks live --------------------------------------------------------------------

# A session's streak is one int: the call's SHA-256 digest in the low 256 bits and how many times
# in a row it was made above them. One small object per session (about 60 bytes) keeps 100,000
# sessions within 256 bytes each, session-id string and dict slot included (a tuple of digest
# bytes and count would take 130 more).
_DIGEST_BITS: Final = 256
_DIGEST_MASK: Final = (1 << _DIGEST_BITS) - 1
_COUNT_UNIT: Final = 1 << _DIGEST_BITS
_DIGEST_BYTES: Final = _DIGEST_BITS // 8
_int_from_bytes: Final = int.from_bytes  # looked up once, not on every call


@final
class _MemoryStreaks:
    """Every session's streak, in this process's memory; each method is one atomic step."""

    __slots__ = ("_lock", "_streaks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streaks: dict[str, int] = {}  # session id -> its streak, packed in one int

    def advance_streak(self, session: str, digest: bytes) -> int:
        """The same call again: its count + 1; another call: 1. Returns the new count."""
        call = _int_from_bytes(digest, "big")
        lock = self._lock
        lock.acquire()  # rather than `with`, which costs twice as much on every call's path
        try:
            streak = self._streaks.get(session, 0)
            if streak & _DIGEST_MASK != call:
                streak = call  # another call: a new streak, counted from zero
            streak += _COUNT_UNIT
            self._streaks[session] = streak
        finally:
            lock.release()
        return streak >> _DIGEST_BITS

    def end_streak(self, session: str) -> None:
        """An unidentified call: whatever came before is no longer repeated."""
        with self._lock:
            self._streaks.pop(session, None)

    def read_streak(self, session: str) -> tuple[bytes, int] | None:
        """The session's current digest and count, or ``None``."""
        # No lock: the streak is one immutable int, replaced whole, and one dict read is atomic.
        streak = self._streaks.get(session)
        if streak is None:
            return None
        return (streak & _DIGEST_MASK).to_bytes(_DIGEST_BYTES, "big"), streak >> _DIGEST_BITS

    def forget_streaks(self, session: str | None = None) -> None:
        """Forget one session's streak, or every session's."""
        with self._lock:
            if session is None:
                self._streaks.clear()
            else:
                self._streaks.pop(session, None)

    def count_streaks(self) -> int:
        """How many sessions have a streak."""
        return len(self._streaks)
