"""Configuration values of the loop brake: ``maxRepeats`` from the row, the environment or the
default, validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from dsh_loop_brake._errors import InvalidMaxRepeatsError, LoopBrakeConfigError
from dsh_loop_brake._short_repr import short_repr

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "integer_value",
    "normalize_max_repeats",
    "resolve_max_repeats",
]

DEFAULT_MAX_REPEATS: Final = 3
ENV_VAR: Final = "DSH_LOOP_BRAKE_MAX_REPEATS"
CONFIG_KEYS: Final = ("maxRepeats",)


def normalize_max_repeats(value: object, *, source: str = "the loop-brake patch row") -> int:
    """``value`` as an int of at least 1, or ``InvalidMaxRepeatsError`` naming ``source``."""
    number = integer_value(value)
    if number is None or number < 1:
        raise InvalidMaxRepeatsError(value, source)
    return number


def integer_value(value: object) -> int | None:
    """An int (not bool), an integral float or a plain decimal string as an int, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            try:
                # Without its leading zeros, so "0007" is 7 however many zeros it has.
                return int(text.lstrip("0") or "0")
            except ValueError:
                return None  # beyond Python's limit for decimal conversion (4300 digits)
    return None


def resolve_max_repeats(
    config: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> int:
    """The row's ``maxRepeats``, else ``DSH_LOOP_BRAKE_MAX_REPEATS`` when set, else 3."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise LoopBrakeConfigError(
            "loop brake: the config must be a mapping such as {maxRepeats: 5}, got a "
            f"{type(config).__name__}; write it as a mapping or leave it out for the defaults"
        )
    for key in config:
        if key not in CONFIG_KEYS:
            raise LoopBrakeConfigError(
                f"loop brake: unknown config key {short_repr(key)}; the keys that exist are "
                f"{', '.join(CONFIG_KEYS)} (check the spelling)"
            )
    value = config.get("maxRepeats")
    if value is not None:
        return normalize_max_repeats(value)
    raw = (os.environ if environ is None else environ).get(ENV_VAR)
    if raw is not None and raw.strip():
        return normalize_max_repeats(raw, source=f"the environment variable {ENV_VAR}")
    return DEFAULT_MAX_REPEATS
