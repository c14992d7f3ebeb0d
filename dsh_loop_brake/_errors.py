"""The loop brake's exceptions, and the base of every denial the package raises.

Exceptions::

    Exception
    └── ToolCallDenied            a call was denied before it ran (catch this one, show str(e))
        ├── LoopBrakeError        it repeated the same call too often in a row
        └── CircuitBreakerError   the circuit breaker's window or call cap (circuit_breaker)
    ValueError
    └── LoopBrakeConfigError      a loop-brake configuration is unusable
        └── InvalidMaxRepeatsError    maxRepeats is not an integer of at least 1

Nothing here imports ``typing`` at run time: a coding-agent hook imports this module in a new
process for every tool call, so the annotations stay strings (``from __future__``).
"""

from __future__ import annotations

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH
from dsh_loop_brake._short_repr import json_literal, short_repr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "PLUGIN_NAME",
    "InvalidMaxRepeatsError",
    "LoopBrakeConfigError",
    "LoopBrakeError",
    "ToolCallDenied",
]

PLUGIN_NAME: Final = "dsh-loop-brake"


class ToolCallDenied(Exception):
    """A tool call was denied before it ran; ``str(error)`` is the message for the model.

    The base of every denial this package raises. A host or adapter catches it once and hands
    the message back as the call's failed result; a host may raise its own the same way.
    ``code`` says which check denied it (``"DENIED"`` unless a subclass or the caller says
    otherwise); ``tool_name`` and ``session_id`` say which call. A denial never carries the
    call's arguments.
    """

    code: str
    tool_name: str
    session_id: str | None

    def __init__(
        self,
        message: str,
        *,
        code: str = "DENIED",
        tool_name: str = "",
        session_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.tool_name = tool_name
        self.session_id = session_id

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt without calling __init__, then given back every attribute: each subclass
        # pickles, whatever its constructor takes, and a host's own subclass does too.
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[ToolCallDenied], args: tuple[object, ...]) -> ToolCallDenied:
    """Unpickle a denial: the instance with its ``args``; pickle then restores ``__dict__``."""
    return cls.__new__(cls, *args)


class LoopBrakeError(ToolCallDenied):
    """A tool call was denied because it repeated the same call ``max_repeats`` times in a row."""

    code = "LOOP_BRAKE"
    plugin: Final = PLUGIN_NAME
    session_id: str  # always known when the loop brake denies ("default" at worst)

    def __init__(
        self,
        tool_name: str,
        count: int,
        max_repeats: int,
        hash_prefix: str,
        session_id: str,
    ) -> None:
        self.count = count
        self.max_repeats = max_repeats
        self.hash_prefix = hash_prefix[:HASH_PREFIX_LENGTH]
        # The arguments are deliberately not taken: they are the likeliest place for paths,
        # queries and credentials, and this error is the likeliest thing to be logged.
        super().__init__(
            f"loop brake: tool {json_literal(tool_name)} called {count} times in a row with "
            f"identical arguments (call {self.hash_prefix}\u2026, limit {max_repeats}); the call "
            "was denied before it ran. Change the arguments, call a different tool, or stop.",
            code=LoopBrakeError.code,
            tool_name=tool_name,
            session_id=session_id,
        )


class LoopBrakeConfigError(ValueError):
    """A loop-brake configuration is unusable; the message says which key and what to do.

    ``path`` and ``line`` say where the bad value was written, when it came from a patch file
    and the error was raised with that known (``str(error)`` then starts with ``path:line:``).
    """

    code: str = "LOOP_BRAKE_CONFIG"
    path: str | None = None
    line: int | None = None
    key: str | None = None
    """The row's config key whose value was refused, when the value came from the row."""


class InvalidMaxRepeatsError(LoopBrakeConfigError):
    """``maxRepeats`` is not an integer of at least 1."""

    def __init__(self, value: object, source: str) -> None:
        self.value = value
        self.source = source
        super().__init__(
            "loop brake: maxRepeats must be an integer of at least 1, "
            f"got {short_repr(value)} (from {source})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value, self.source))
