"""The loop brake's exceptions.

Exceptions::

    Exception
    └── LoopBrakeError            a call was denied because it repeated too often
    ValueError
    └── LoopBrakeConfigError      a loop-brake configuration is unusable
        └── InvalidMaxRepeatsError    maxRepeats is not an integer of at least 1
"""

from __future__ import annotations

from typing import Any, Final

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH
from dsh_loop_brake._short_repr import json_literal, short_repr

__all__ = ["PLUGIN_NAME", "InvalidMaxRepeatsError", "LoopBrakeConfigError", "LoopBrakeError"]

PLUGIN_NAME: Final = "dsh-loop-brake"


class LoopBrakeError(Exception):
    """A tool call was denied because it repeated the same call ``max_repeats`` times in a row."""

    code: Final = "LOOP_BRAKE"
    plugin: Final = PLUGIN_NAME

    def __init__(
        self,
        tool_name: str,
        count: int,
        max_repeats: int,
        hash_prefix: str,
        session_id: str,
    ) -> None:
        self.tool_name = tool_name
        self.count = count
        self.max_repeats = max_repeats
        self.hash_prefix = hash_prefix[:HASH_PREFIX_LENGTH]
        self.session_id = session_id
        # The arguments are deliberately not taken: they are the likeliest place for paths,
        # queries and credentials, and this error is the likeliest thing to be logged.
        super().__init__(
            f"loop brake: tool {json_literal(tool_name)} called {count} times in a row with "
            f"identical arguments (call {self.hash_prefix}\u2026, limit {max_repeats}); the call "
            "was denied before it ran. Change the arguments, call a different tool, or stop."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.tool_name, self.count, self.max_repeats, self.hash_prefix, self.session_id),
        )


class LoopBrakeConfigError(ValueError):
    """A loop-brake configuration is unusable; the message says which key and what to do."""

    code: str = "LOOP_BRAKE_CONFIG"


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
