"""dsh-loop-brake: stop runaway AI-agent tool loops in code, outside the model."""

from dsh_loop_brake._breaker import CircuitBreakerError
from dsh_loop_brake.loop_brake import (
    DEFAULT_MAX_REPEATS,
    ENV_VAR,
    PLUGIN_NAME,
    InvalidMaxRepeatsError,
    LoopBrake,
    LoopBrakeConfigError,
    LoopBrakeError,
    ToolCallDenied,
    call_hash,
    canonical_json,
    decorate_tool,
    hash_prefix,
    normalize_max_repeats,
    resolve_max_repeats,
    session_key,
    wrap_execute,
)

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "PLUGIN_NAME",
    "CircuitBreakerError",
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
