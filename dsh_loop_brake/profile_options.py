"""The profile every command reads: its options, and each row's settings with where they came from.

Shared by ``config``, ``replay`` and every command to come, so no command imports another:

* :func:`add_profile_options` — ``--profile NAME``, ``--home DIR``, ``--patch FILE``...;
  :func:`add_strict_option` — ``--strict`` (any warning makes the exit code 2);
* :func:`compose_profile` — the profile's composed rows, saying on stderr when the profile does
  not exist (and which ones do);
* :func:`row_max_repeats` — a ``loop-brake`` row's ``maxRepeats`` resolved as the plugin does
  (row, then environment, then default) with a typed :class:`~dsh_loop_brake._config.Source`
  carrying the patch file and line; a bad value is a ``LoopBrakeConfigError`` whose message
  starts with that file and line;
* :func:`resolve_circuit_breaker` — the ``circuit-breaker`` row's every key, resolved and
  validated as the plugin does at apply, with the layer (file:line) or default of each.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dsh_loop_brake import circuit_breaker
from dsh_loop_brake._config import Resolved, Source, resolve_max_repeats_with_source
from dsh_loop_brake.exits import warn
from dsh_loop_brake.harness.errors import locate
from dsh_loop_brake.harness.layers import compose
from dsh_loop_brake.harness.patches import Composition
from dsh_loop_brake.harness.profiles import profile_dir, profile_names
from dsh_loop_brake.harness.types import Origin, Row
from dsh_loop_brake.loop_brake import LoopBrakeConfigError

__all__ = [
    "CIRCUIT_BREAKER_ROW",
    "DEFAULT_STORE",
    "LOOP_BRAKE_ROW",
    "CircuitBreakerSetting",
    "LoopBrakeSetting",
    "add_profile_options",
    "add_strict_option",
    "compose_profile",
    "missing_profile_message",
    "resolve_circuit_breaker",
    "resolve_loop_brake",
    "row_max_repeats",
]

LOOP_BRAKE_ROW: Final = "loop-brake"
CIRCUIT_BREAKER_ROW: Final = circuit_breaker.ROW_ID

DEFAULT_STORE: Final = "memory:"
"""The loop brake's store when its row configures none (the stores add ``store`` to the row)."""


# ---------------------------------------------------------------------------------------------
# Options


def add_profile_options(parser: argparse.ArgumentParser, *, patches: bool = True) -> None:
    """``--profile NAME``, ``--home DIR`` and (optionally) repeatable ``--patch FILE``."""
    parser.add_argument(
        "--profile", default="default", metavar="NAME", help="the profile (default: %(default)s)"
    )
    parser.add_argument(
        "--home",
        type=_home_directory,
        default=None,
        metavar="DIR",
        help="the dsh home (default: $DSH_HOME, else ~/.dsh)",
    )
    if patches:
        parser.add_argument(
            "--patch",
            dest="patches",
            action="append",
            type=Path,
            default=[],
            metavar="FILE",
            help="a patch file composed after all others (repeatable, in order)",
        )


def add_strict_option(parser: argparse.ArgumentParser) -> None:
    """``--strict``: every warning makes the exit code 2 (the command line enforces it)."""
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit with code 2 on any warning (a skipped patch, a file or line that could not "
        "be read, a profile that does not exist), for CI",
    )


def _home_directory(text: str) -> Path:
    # An unset shell variable (`--home "$DSH_DIR"`) would otherwise mean the current directory.
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "the directory is empty; give one, or leave --home out to use $DSH_HOME or ~/.dsh"
        )
    return Path(text)


# ---------------------------------------------------------------------------------------------
# The profile


def compose_profile(
    profile: str,
    home: Path,
    patches: Iterable[str | os.PathLike[str]] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> Composition:
    """The profile's composed rows; a profile that does not exist is a warning (and empty)."""
    message = missing_profile_message(profile, home)
    if message is not None:
        warn(message)
    return compose(profile, home, patches, environ=environ)


def missing_profile_message(profile: str, home: Path) -> str | None:
    """Why ``profile`` does not exist under ``home`` and which profiles do; None if it exists."""
    directory = profile_dir(home, profile)
    if directory.is_dir():
        return None
    names = profile_names(home)
    if names:
        others = "the profiles that exist are " + ", ".join(repr(name) for name in names)
    else:
        others = f"no profile exists in {directory.parent} yet"
    return (
        f"profile {profile!r} does not exist (no directory {directory}), so it has no rows; "
        f"{others}"
    )


# ---------------------------------------------------------------------------------------------
# The loop-brake row


@dataclass(frozen=True)
class LoopBrakeSetting:
    """The composition's ``loop-brake`` row and its ``maxRepeats``, as the plugin would apply it.

    ``max_repeats`` is None when there is no row, or when a disabled row's config would be
    rejected (``problem`` says why; a disabled row is not applied, so that is no error).
    """

    row: Row | None
    max_repeats: Resolved | None
    composition: Composition
    problem: str | None = None
    # The store URL the brake keeps its streaks in (password as ***). The row's `store` key and
    # DSH_LOOP_BRAKE_STORE come with the stores; until then every brake keeps them in memory.
    store: str = DEFAULT_STORE


def resolve_loop_brake(
    composition: Composition, environ: Mapping[str, str] | None = None
) -> LoopBrakeSetting:
    """Resolve the ``loop-brake`` row as the plugin would at apply (row, then env, then 3).

    Raises ``LoopBrakeConfigError`` (message prefixed with the file and line that supplied
    the bad value) when an enabled row would be rejected.
    """
    row = composition.row(LOOP_BRAKE_ROW)
    if row is None:
        return LoopBrakeSetting(None, None, composition)
    try:
        resolved = row_max_repeats(row, environ)
    except LoopBrakeConfigError as error:
        if not row.disabled:
            raise
        return LoopBrakeSetting(row, None, composition, problem=str(error))
    return LoopBrakeSetting(row, resolved, composition)


def row_max_repeats(row: Row, environ: Mapping[str, str] | None = None) -> Resolved:
    """The row's ``maxRepeats`` as the plugin resolves it, with the file and line it came from.

    A bad value raises ``LoopBrakeConfigError`` prefixed with the file and line of the key at
    fault (a value from the environment names the variable instead).
    """
    try:
        resolved = resolve_max_repeats_with_source(row.config, environ)
    except LoopBrakeConfigError as error:
        # ``key`` is set when the row supplied the bad value; a bad env value names its variable.
        origin = None if error.key is None else row.config_origin(error.key)
        if origin is not None:
            locate(error, origin.path, origin.line)
        raise
    if resolved.source.kind != "row":
        return resolved
    origin = row.config_origin("maxRepeats")
    located: Source = resolved.source.located(
        None if origin is None else origin.path, None if origin is None else origin.line
    )
    return resolved.with_source(located)


# ---------------------------------------------------------------------------------------------
# The circuit-breaker row


@dataclass(frozen=True)
class CircuitBreakerSetting:
    """The composition's ``circuit-breaker`` row, every key resolved, and where each came from.

    ``config`` holds every key of the breaker's configuration as the plugin would apply it
    (defaults filled in); ``sources`` maps each key to the :class:`Origin` that set it, or None
    for the default. ``config`` is None when a disabled row's config would be rejected
    (``problem`` says why; a disabled row is not applied, so that is no error).
    """

    row: Row
    config: dict[str, object] | None
    sources: dict[str, Origin | None]
    problem: str | None = None


def resolve_circuit_breaker(composition: Composition) -> CircuitBreakerSetting | None:
    """Resolve the ``circuit-breaker`` row as the plugin would at apply; None without one.

    Raises ``CircuitBreakerConfigError`` (a ``LoopBrakeConfigError``; message prefixed with the
    file and line of the key at fault) when an enabled row would be rejected.
    """
    row = composition.row(CIRCUIT_BREAKER_ROW)
    if row is None:
        return None
    try:
        resolved = circuit_breaker.resolve_config(row.config).as_row_config()
    except LoopBrakeConfigError as error:
        origin = row.config_origin(error.key)
        if origin is not None:
            locate(error, origin.path, origin.line)
        if not row.disabled:
            raise
        return CircuitBreakerSetting(row, None, {}, problem=str(error))
    given = row.config or {}
    sources = {
        key: row.config_origin(key) if given.get(key) is not None else None for key in resolved
    }
    return CircuitBreakerSetting(row, resolved, sources)
