"""dsh-loop-brake: stop runaway AI-agent tool loops in code, outside the model.

The names below are the package's public face (SPEC §2, the circuit breaker's error, ``Brakes``).
They are imported on first use (PEP 562), not when the package is: a coding-agent hook is a new
process for every tool call, and ``import dsh_loop_brake.<module>`` must cost only what that
module itself needs.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from dsh_loop_brake._brakes import Brakes
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
    "Brakes",
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

# Where each name is defined. The core's names are the very objects dsh_loop_brake.loop_brake
# re-exports, taken from the private module that defines them, so `from dsh_loop_brake import
# LoopBrake` does not also import the wrappers (a test holds the two faces to the same objects).
_HOMES = {
    "DEFAULT_MAX_REPEATS": "dsh_loop_brake._config",
    "ENV_VAR": "dsh_loop_brake._config",
    "PLUGIN_NAME": "dsh_loop_brake._errors",
    "Brakes": "dsh_loop_brake._brakes",
    "CircuitBreakerError": "dsh_loop_brake._breaker",
    "InvalidMaxRepeatsError": "dsh_loop_brake._errors",
    "LoopBrake": "dsh_loop_brake._brake",
    "LoopBrakeConfigError": "dsh_loop_brake._errors",
    "LoopBrakeError": "dsh_loop_brake._errors",
    "ToolCallDenied": "dsh_loop_brake._errors",
    "call_hash": "dsh_loop_brake._canonical",
    "canonical_json": "dsh_loop_brake._canonical",
    "decorate_tool": "dsh_loop_brake._wrapping",
    "hash_prefix": "dsh_loop_brake._canonical",
    "normalize_max_repeats": "dsh_loop_brake._config",
    "resolve_max_repeats": "dsh_loop_brake._config",
    "session_key": "dsh_loop_brake._execution",
    "wrap_execute": "dsh_loop_brake._wrapping",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'dsh_loop_brake' has no attribute {name!r}")
    # __import__ with a fromlist returns the submodule itself (importlib, not yet imported at
    # startup, would cost more than it does).
    home = __import__(_HOMES[name], fromlist=(name,))
    value = getattr(home, name)
    globals()[name] = value  # once imported, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
