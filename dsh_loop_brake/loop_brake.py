"""The counting core, the public face: exact call identity and the per-session loop brake.

A call is identified by ``sha256(tool_name + "\\n" + canonical_json(args))``. Per session the brake
keeps one current digest and one count (a streak, not a histogram) and raises ``LoopBrakeError`` on
the call that brings the streak to ``max_repeats``. Nothing here opens a file or a socket, starts a
process or calls a model, and nothing here imports more than the standard library.

The work is done in private modules, each with one job, which this module re-exports:

* ``_canonical``  — ``canonical_json`` and the call hash (the encoder);
* ``_brake``      — ``LoopBrake``, the streaks;
* ``_wrapping``   — ``wrap_execute`` and ``decorate_tool``;
* ``_execution``  — reading a host's execution input and its session;
* ``_config``     — ``maxRepeats`` from a row, the environment or the default;
* ``_errors``     — the exceptions; ``_short_repr`` — values and names shown in messages.

Exceptions::

    Exception
    └── ToolCallDenied            a call was denied before it ran (the base of every denial)
        └── LoopBrakeError        it repeated the same call too often in a row
    ValueError
    └── LoopBrakeConfigError      a loop-brake configuration is unusable
        └── InvalidMaxRepeatsError    maxRepeats is not an integer of at least 1
"""

from dsh_loop_brake._brake import LoopBrake
from dsh_loop_brake._canonical import call_hash, canonical_json, hash_prefix
from dsh_loop_brake._config import (
    DEFAULT_MAX_REPEATS,
    ENV_VAR,
    normalize_max_repeats,
    resolve_max_repeats,
)
from dsh_loop_brake._errors import (
    PLUGIN_NAME,
    InvalidMaxRepeatsError,
    LoopBrakeConfigError,
    LoopBrakeError,
    ToolCallDenied,
)
from dsh_loop_brake._execution import session_key
from dsh_loop_brake._wrapping import decorate_tool, wrap_execute

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "PLUGIN_NAME",
    "InvalidMaxRepeatsError",
    "LoopBrake",
    "LoopBrakeConfigError",
    "LoopBrakeError",
    "ToolCallDenied",
    "call_hash",
    "canonical_json",
    "decorate_tool",
    "hash_prefix",
    "normalize_max_repeats",
    "resolve_max_repeats",
    "session_key",
    "wrap_execute",
]
