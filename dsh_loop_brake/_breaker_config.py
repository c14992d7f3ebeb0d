"""The circuit breaker's settings: the nine keys of its row, their defaults, and validation.

The row also takes ``store`` and ``sessionTtl`` (where the breaker's state lives): checked here,
resolved and opened by the plugin, and not part of :class:`CircuitBreakerConfig`.

The defaults are spelled once, in :class:`CircuitBreakerConfig`'s constructor; ``DEFAULTS``,
``resolve_config`` and ``as_row_config`` read them from there through ``_ROW_KEYS``, the table of
row keys and the attributes they set.

Exceptions::

    ValueError
     └── LoopBrakeConfigError             (dsh_loop_brake.loop_brake)
          └── CircuitBreakerConfigError   a circuit-breaker config that cannot be applied

Nothing here imports ``typing`` or ``dataclasses`` at run time: a coding-agent hook validates this
row in a new process for every tool call (``dataclasses`` alone, with the ``inspect`` it pulls in,
costs more than everything else the breaker imports).
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from types import MappingProxyType

from dsh_loop_brake._config import integer_value
from dsh_loop_brake._errors import LoopBrakeConfigError
from dsh_loop_brake._short_repr import short_repr
from dsh_loop_brake._store import MAX_COUNT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn, final
else:
    from dsh_loop_brake._no_typing import final


__all__ = [
    "DEFAULTS",
    "DEFAULT_DENY_MESSAGE",
    "MAX_WINDOW",
    "CircuitBreakerConfig",
    "CircuitBreakerConfigError",
    "resolve_config",
]

#: The default denial text. ``{tool}`` is the tool's name (control characters escaped), so the
#: sentence reads "this call to bash was denied".
DEFAULT_DENY_MESSAGE: Final = (
    "circuit breaker: this call to {tool} was denied before it ran (count {count}, limit"
    " {limit}): this agent has repeated the same call too often or has used up its call budget."
    " Repeating it will not work: change your approach, or stop and tell the user what you"
    " could not finish."
)

#: The largest ``window`` accepted; it bounds the memory one agent's state can take.
MAX_WINDOW: Final = 100_000

# Each row key and the attribute of CircuitBreakerConfig it sets, in the order of the docs' table.
_ROW_KEYS: Final = MappingProxyType(
    {
        "enabled": "enabled",
        "duplicateLimit": "duplicate_limit",
        "window": "window",
        "maxCallsPerAgent": "max_calls_per_agent",
        "exempt": "exempt",
        "only": "only",
        "ignoreArgs": "ignore_args",
        "denyMessage": "deny_message",
        "incidentLog": "incident_log",
    }
)

# The keys that say where the breaker's state lives, not how it judges: resolved, checked and
# opened by the plugin (dsh_loop_brake.stores._settings), so they are not settings of the
# CircuitBreakerConfig (whose repr would otherwise show a store URL's password).
_STORE_KEYS: Final = ("store", "sessionTtl")

_SOURCE: Final = "the circuit-breaker patch row"
_PLACEHOLDERS: Final = frozenset({"tool", "count", "limit"})


class CircuitBreakerConfigError(LoopBrakeConfigError):
    """A circuit-breaker config that cannot be applied: wrong type, out of range, or unknown key.

    ``key`` is the row key at fault (``None`` when the config as a whole is not a mapping).
    """

    code = "CIRCUIT_BREAKER_CONFIG"

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@final
class CircuitBreakerConfig:
    """A validated circuit-breaker configuration (the row's keys, in Python spelling); immutable.

    Build one with :func:`resolve_config`, which checks every value; the constructor takes the
    values as they are.
    """

    __slots__ = tuple(_ROW_KEYS.values())

    enabled: bool
    duplicate_limit: int
    window: int
    max_calls_per_agent: int
    exempt: tuple[str, ...]
    only: tuple[str, ...]
    ignore_args: tuple[str, ...]
    deny_message: str
    incident_log: str

    def __init__(  # the one place the defaults are written
        self,
        enabled: bool = True,
        duplicate_limit: int = 6,
        window: int = 200,
        max_calls_per_agent: int = 300,
        exempt: tuple[str, ...] = ("todo_write", "ask_user_question", "exit_plan_mode"),
        only: tuple[str, ...] = (),
        ignore_args: tuple[str, ...] = (
            "description",
            "explanation",
            "reason",
            "thought",
            "purpose",
        ),
        deny_message: str = DEFAULT_DENY_MESSAGE,
        incident_log: str = "",
    ) -> None:
        values = (
            enabled,
            duplicate_limit,
            window,
            max_calls_per_agent,
            exempt,
            only,
            ignore_args,
            deny_message,
            incident_log,
        )
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def as_row_config(self) -> dict[str, object]:
        """Return the configuration as a row's ``config`` mapping, every key spelled out."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in zip(_ROW_KEYS, self._values(), strict=True)
        }

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(
            f"CircuitBreakerConfig is immutable; cannot set {name!r} (build a new one with"
            " resolve_config)"
        )

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"CircuitBreakerConfig is immutable; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not CircuitBreakerConfig:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{n}={v!r}" for n, v in zip(self.__slots__, self._values(), strict=True)
        )
        return f"CircuitBreakerConfig({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (CircuitBreakerConfig, self._values())


_DEFAULT_CONFIG: Final = CircuitBreakerConfig()

#: Every key of the row with its default (lists as tuples): the table in docs/circuit-breaker.md.
DEFAULTS: Final[Mapping[str, object]] = MappingProxyType(
    dict(zip(_ROW_KEYS, _DEFAULT_CONFIG._values(), strict=True))
)


# --- validation -------------------------------------------------------------------------------


def _fail(key: str, rule: str, value: object, source: str) -> CircuitBreakerConfigError:
    return CircuitBreakerConfigError(
        f"circuit breaker: {key} must be {rule}, got {short_repr(value)} (from {source})", key
    )


def _boolean(key: str, value: object, source: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, "true or false", value, source)
    return value


def _integer(key: str, value: object, minimum: int, maximum: int | None, source: str) -> int:
    """Accept what ``maxRepeats`` accepts: an int, an integral float, or a decimal string."""
    rule = f"an integer of at least {minimum}"
    if maximum is not None:
        rule = f"an integer from {minimum} to {maximum}"
    number = integer_value(value)
    if number is None or number < minimum or (maximum is not None and number > maximum):
        raise _fail(key, rule, value, source)
    return number


def _names(key: str, value: object, what: str, source: str) -> tuple[str, ...]:
    rule = f"a list of {what} (non-empty strings)"
    if not isinstance(value, (list, tuple)):
        raise _fail(key, rule, value, source)
    for item in value:
        if not isinstance(item, str) or not item:
            raise _fail(key, rule, value, source)
    return tuple(dict.fromkeys(value))


def _deny_message(value: object, source: str) -> str:
    rule = "a non-blank string whose only placeholders are {tool}, {count} and {limit}"
    if not isinstance(value, str) or not value.strip():
        raise _fail("denyMessage", rule, value, source)
    try:
        fields = list(string.Formatter().parse(value))
    except ValueError:
        literal = " (write a literal brace as {{ or }})"
        raise _fail("denyMessage", rule + literal, value, source) from None
    for _literal, field, spec, conversion in fields:
        if field is None:
            continue
        if field not in _PLACEHOLDERS or spec or conversion:
            shown = (
                f"{{{field}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            )
            raise CircuitBreakerConfigError(
                f"circuit breaker: denyMessage may only use the placeholders {{tool}}, {{count}}"
                f" and {{limit}} (no format specs), got {short_repr(shown)} in"
                f" {short_repr(value)} (from {source})",
                "denyMessage",
            )
    return value


def _incident_log(value: object, source: str) -> str:
    rule = 'a file path, or "" to keep no incident log'
    if not isinstance(value, str) or "\x00" in value:
        raise _fail("incidentLog", rule, value, source)
    if not value.strip():
        return ""
    # Fixed at apply time, so a later chdir by the host or a tool never moves the log.
    return os.path.abspath(os.path.expanduser(value))


def resolve_config(config: object = None, *, source: str = _SOURCE) -> CircuitBreakerConfig:
    """Validate a row's ``config`` and fill in the defaults; ``None`` means no config at all.

    A key set to ``null`` takes its default. Raises :class:`CircuitBreakerConfigError` naming the
    key, the bad value and the rule.
    """
    if config is None:
        return _DEFAULT_CONFIG
    if not isinstance(config, Mapping):
        raise CircuitBreakerConfigError(
            f"circuit breaker: the config must be a mapping of keys to values, got"
            f" {short_repr(config)} (from {source})"
        )
    for key in config:
        if key not in _ROW_KEYS and key not in _STORE_KEYS:
            raise CircuitBreakerConfigError(
                f"circuit breaker: unknown key {short_repr(key)} (from {source}); the keys are"
                f" {', '.join((*_ROW_KEYS, *_STORE_KEYS))} (check the spelling)",
                key if isinstance(key, str) else None,
            )
    if any(config.get(key) is not None for key in _STORE_KEYS):
        # The row's own store and sessionTtl, checked as at apply (no I/O; the environment's
        # store is the plugin's to resolve).
        from dsh_loop_brake.stores._settings import resolve_store_setting

        resolve_store_setting(
            config, {}, brake="circuit breaker", source=source, error=CircuitBreakerConfigError
        )
    given = {
        **DEFAULTS,
        **{
            key: value
            for key, value in config.items()
            if value is not None and key not in _STORE_KEYS
        },
    }

    enabled = _boolean("enabled", given["enabled"], source)
    limit = _integer("duplicateLimit", given["duplicateLimit"], 1, MAX_WINDOW, source)
    window = _integer("window", given["window"], 1, MAX_WINDOW, source)
    if window < limit:
        raise CircuitBreakerConfigError(
            f"circuit breaker: window must be at least duplicateLimit ({limit}), got {window}"
            f" (from {source}); a window shorter than the limit can never hold enough identical"
            f" calls to trip",
            "window",
        )
    # The upper bound is what every store counts exactly (a Redis script's numbers are doubles).
    cap = _integer("maxCallsPerAgent", given["maxCallsPerAgent"], 0, MAX_COUNT, source)
    return CircuitBreakerConfig(
        enabled=enabled,
        duplicate_limit=limit,
        window=window,
        max_calls_per_agent=cap,
        exempt=_names("exempt", given["exempt"], "tool names", source),
        only=_names("only", given["only"], "tool names", source),
        ignore_args=_names("ignoreArgs", given["ignoreArgs"], "argument names", source),
        deny_message=_deny_message(given["denyMessage"], source),
        incident_log=_incident_log(given["incidentLog"], source),
    )
