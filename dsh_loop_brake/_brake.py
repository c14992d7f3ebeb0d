"""The loop brake itself: one streak per session, the ``max_repeats``-th identical call denied."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final, TypeVar, final, overload

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH, call_digest, describe_unidentifiable
from dsh_loop_brake._config import DEFAULT_MAX_REPEATS, normalize_max_repeats
from dsh_loop_brake._errors import LoopBrakeError
from dsh_loop_brake._short_repr import json_literal

__all__ = [
    "STREAK_DIGEST_BITS",
    "STREAK_PREFIX_MASK",
    "STREAK_PREFIX_SHIFT",
    "LoopBrake",
    "logger",
]

_F = TypeVar("_F", bound=Callable[..., Any])

# Tool names remembered for the once-per-tool warning; bounded so hostile names cannot grow it.
_WARNED_TOOLS_LIMIT: Final = 1024

logger = logging.getLogger("dsh_loop_brake")

# PROVISIONAL (wrap, until core's session() lands): the session of `with brake.session(...)`.
_current_session: ContextVar[str | None] = ContextVar("dsh_loop_brake_session", default=None)


# A session's streak is one int: the current call's SHA-256 digest in the low 256 bits and how
# many times in a row it was made above them. One small object per session (about 60 bytes) keeps
# 100,000 sessions within 256 bytes each, session-id string and dict slot included.
STREAK_DIGEST_BITS: Final = 256
_STREAK_DIGEST_MASK: Final = (1 << STREAK_DIGEST_BITS) - 1
_STREAK_COUNT_UNIT: Final = 1 << STREAK_DIGEST_BITS
_int_from_bytes: Final = int.from_bytes  # looked up once, not on every call
# Where the hash prefix (its first 12 hex digits, 48 bits) sits in a streak.
STREAK_PREFIX_SHIFT: Final = STREAK_DIGEST_BITS - 4 * HASH_PREFIX_LENGTH
STREAK_PREFIX_MASK: Final = (1 << 4 * HASH_PREFIX_LENGTH) - 1


@final
class LoopBrake:
    """Counts consecutive identical calls per session and denies the ``max_repeats``-th one."""

    __slots__ = ("_lock", "_max_repeats", "_streaks", "_warned")

    def __init__(self, max_repeats: int = DEFAULT_MAX_REPEATS) -> None:
        self._max_repeats = normalize_max_repeats(max_repeats, source="LoopBrake(max_repeats=...)")
        self._lock = threading.Lock()
        # session id -> its streak, packed in one int (see _STREAK_COUNT_UNIT)
        self._streaks: dict[str, int] = {}
        self._warned: set[str] = set()

    @property
    def max_repeats(self) -> int:
        """The streak length at which a call is denied."""
        return self._max_repeats

    def check(self, tool_name: str, args: Any, *, session_id: str | None = None) -> int:
        """Count this call; return the streak, or raise ``LoopBrakeError`` when it is denied."""
        if session_id is None:  # PROVISIONAL (wrap): the current session, else "default"
            session_id = _current_session.get() or "default"
        if type(tool_name) is not str and not isinstance(tool_name, str):
            raise TypeError(
                f"loop brake: the tool name must be a str, got {type(tool_name).__name__}"
            )
        try:
            digest = call_digest(tool_name, args)
        except (TypeError, ValueError) as error:
            # Fail open: a brake must never block real work it cannot judge. The call is a
            # different call from whatever came before, so the streak ends here.
            with self._lock:
                self._streaks.pop(session_id, None)
            self._warn_unidentifiable(tool_name, error)
            return 0
        call = _int_from_bytes(digest, "big")
        lock = self._lock
        lock.acquire()  # rather than `with`, which costs twice as much on every call's path
        try:
            streak = self._streaks.get(session_id, 0)
            if streak & _STREAK_DIGEST_MASK != call:
                streak = call  # another call: a new streak, counted from zero
            streak += _STREAK_COUNT_UNIT
            self._streaks[session_id] = streak
        finally:
            lock.release()
        count = streak >> STREAK_DIGEST_BITS
        if count >= self._max_repeats:
            raise LoopBrakeError(tool_name, count, self._max_repeats, digest.hex(), session_id)
        return count

    def session(self, session_id: str) -> _Session:
        """PROVISIONAL (wrap): ``with brake.session(id):`` makes ``id`` the current session."""
        return _Session(session_id)

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
        # No lock: the streak is one immutable int, replaced whole, and one dict read is atomic.
        # (Replay reads the packed int the same way, in place, after every call.)
        streak = self._streaks.get(session_id)
        if streak is None:
            return None
        prefix = (streak >> STREAK_PREFIX_SHIFT) & STREAK_PREFIX_MASK
        return format(prefix, "012x"), streak >> STREAK_DIGEST_BITS

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's streak, or every session's."""
        with self._lock:
            if session_id is None:
                self._streaks.clear()
            else:
                self._streaks.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._streaks)

    def __repr__(self) -> str:
        return f"LoopBrake(max_repeats={self._max_repeats})"

    def _warn_unidentifiable(self, tool_name: str, error: Exception) -> None:
        with self._lock:
            if tool_name in self._warned or len(self._warned) >= _WARNED_TOOLS_LIMIT:
                return
            self._warned.add(tool_name)
        logger.warning(
            "loop brake: tool %s was called with arguments that cannot be identified (%s); "
            "the call was allowed and not counted",
            json_literal(tool_name),
            describe_unidentifiable(error),
        )


@final
class _Session:
    """PROVISIONAL (wrap, until core's lands): the context manager of ``LoopBrake.session``."""

    __slots__ = ("_session_id", "_tokens")

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._tokens: list[Any] = []

    def __enter__(self) -> str:
        self._tokens.append(_current_session.set(self._session_id))
        return self._session_id

    def __exit__(self, *exc_info: object) -> None:
        _current_session.reset(self._tokens.pop())
