"""Configuration values of the loop brake: ``maxRepeats`` from the row, the environment or the
default, validated — and where the value came from.

The resolution returns a :class:`Resolved` (the number and its :class:`Source`), so the command
line and replay say where a value came from without parsing a string back. The core knows only
*that* a value came from the row; the file and line of the patch that set it are the harness's
knowledge, added with :meth:`Source.located`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dsh_loop_brake._errors import InvalidMaxRepeatsError, LoopBrakeConfigError
from dsh_loop_brake._short_repr import short_repr

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final, Literal, TypeAlias, final

    SourceKind: TypeAlias = Literal["row", "env", "default", "option"]
else:
    from dsh_loop_brake._no_typing import final


__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "Resolved",
    "Source",
    "integer_value",
    "normalize_max_repeats",
    "resolve_max_repeats",
    "resolve_max_repeats_with_source",
]

DEFAULT_MAX_REPEATS: Final = 3
ENV_VAR: Final = "DSH_LOOP_BRAKE_MAX_REPEATS"
#: The loop-brake row's keys: ``store`` and ``sessionTtl`` (where the streaks live) are resolved
#: and opened by the plugin (``dsh_loop_brake.stores``), which the core does not import.
CONFIG_KEYS: Final = ("maxRepeats", "store", "sessionTtl")

_ROW_SOURCE: Final = "the loop-brake patch row"


@final
class Source:
    """Where a resolved setting came from (an immutable value).

    ``kind`` is ``"row"`` (the patch row's config; ``path`` and ``line`` of the patch file when
    known), ``"env"`` (``name`` is the environment variable), ``"default"``, or ``"option"``
    (``name`` is the command-line option that overrode everything else).
    """

    # A slotted class, not a NamedTuple or dataclass: the core is imported by every hook
    # process, and building either kind of class at import costs about a millisecond.
    __slots__ = ("kind", "line", "name", "path")

    kind: SourceKind
    name: str | None
    path: str | None
    line: int | None

    def __init__(
        self,
        kind: SourceKind,
        name: str | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "line", line)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple[object, ...]:
        return (self.kind, self.name, self.path, self.line)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Source({self.kind!r}, name={self.name!r}, path={self.path!r}, line={self.line!r})"

    def located(self, path: str | None, line: int | None = None) -> Source:
        """This source with the patch file (and line) that supplied the value."""
        return Source(self.kind, self.name, path, line)

    @property
    def label(self) -> str:
        """The source as ``config --json`` shows it: a path, ``env NAME``, ``default``, option."""
        if self.kind == "row":
            return self.path if self.path is not None else _ROW_SOURCE
        if self.kind == "env":
            return f"env {self.name}"
        if self.kind == "option":
            return str(self.name)
        return "default"

    def __str__(self) -> str:
        if self.kind == "row":
            if self.path is None:
                return _ROW_SOURCE
            return self.path if self.line is None else f"{self.path}:{self.line}"
        if self.kind == "env":
            return f"the environment variable {self.name}"
        if self.kind == "option":
            return str(self.name)
        return "the default"


@final
class Resolved:
    """A resolved ``maxRepeats`` (an immutable value): the number, where it came from, and what
    it won over — ``ignored_env`` names the environment variables that are set but lose to the
    row."""

    __slots__ = ("ignored_env", "source", "value")

    value: int
    source: Source
    ignored_env: tuple[str, ...]

    def __init__(self, value: int, source: Source, ignored_env: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "ignored_env", ignored_env)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resolved) and (
            (self.value, self.source, self.ignored_env)
            == (other.value, other.source, other.ignored_env)
        )

    def __hash__(self) -> int:
        return hash((self.value, self.source, self.ignored_env))

    def __repr__(self) -> str:
        return f"Resolved({self.value!r}, {self.source!r}, ignored_env={self.ignored_env!r})"

    def with_source(self, source: Source) -> Resolved:
        """The same value with another (a located) source."""
        return Resolved(self.value, source, self.ignored_env)


def normalize_max_repeats(value: object, *, source: str = _ROW_SOURCE) -> int:
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
    return resolve_max_repeats_with_source(config, environ).value


def resolve_max_repeats_with_source(
    config: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> Resolved:
    """Like :func:`resolve_max_repeats`, with where the value came from (a :class:`Resolved`).

    A bad value from the row raises an error whose ``key`` is the config key at fault; a bad
    value from the environment names the variable (``key`` is None).
    """
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise LoopBrakeConfigError(
            "loop brake: the config must be a mapping such as {maxRepeats: 5}, got a "
            f"{type(config).__name__}; write it as a mapping or leave it out for the defaults"
        )
    for key in config:
        if key not in CONFIG_KEYS:
            error = LoopBrakeConfigError(
                f"loop brake: unknown config key {short_repr(key)}; the keys that exist are "
                f"{', '.join(CONFIG_KEYS)} (check the spelling)"
            )
            error.key = key if isinstance(key, str) else None
            raise error
    raw = (os.environ if environ is None else environ).get(ENV_VAR)
    env_set = raw is not None and bool(raw.strip())
    value = config.get("maxRepeats")
    if value is not None:
        try:
            number = normalize_max_repeats(value)
        except InvalidMaxRepeatsError as error:
            error.key = "maxRepeats"
            raise
        return Resolved(number, Source("row"), (ENV_VAR,) if env_set else ())
    if env_set:
        number = normalize_max_repeats(raw, source=f"the environment variable {ENV_VAR}")
        return Resolved(number, Source("env", ENV_VAR))
    return Resolved(DEFAULT_MAX_REPEATS, Source("default"))
