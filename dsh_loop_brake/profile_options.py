"""The profile every command reads: its options, and each row's settings with where they came from.

Shared by ``config``, ``replay`` and every command to come, so no command imports another:

* :func:`add_profile_options` — ``--profile NAME``, ``--home DIR``, ``--patch FILE``...;
  :func:`add_strict_option` — ``--strict`` (any warning makes the exit code 2);
* :func:`check_home` — a dsh home that is not a directory, refused in one sentence naming where
  it came from (``--home``, ``DSH_HOME`` or the default ``~/.dsh``);
* :func:`compose_profile` — the profile's composed rows, saying on stderr when the profile does
  not exist (and which ones do);
* :func:`row_max_repeats` — a ``loop-brake`` row's ``maxRepeats`` resolved as the plugin does
  (row, then environment, then default) with a typed :class:`~dsh_loop_brake._config.Source`
  carrying the patch file and line; a bad value is a ``LoopBrakeConfigError`` whose message
  starts with that file and line;
* :func:`row_store` — a row's ``store`` and ``sessionTtl`` resolved as its plugin does (row,
  then ``DSH_LOOP_BRAKE_STORE``, then ``memory:``), checked without opening the store;
* :func:`resolve_circuit_breaker` — the ``circuit-breaker`` row's every key, resolved and
  validated as the plugin does at apply, with the layer (file:line) or default of each.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dsh_loop_brake import circuit_breaker
from dsh_loop_brake._config import Resolved, Source, resolve_max_repeats_with_source
from dsh_loop_brake.exits import warn
from dsh_loop_brake.harness.errors import HarnessError, locate
from dsh_loop_brake.harness.layers import compose
from dsh_loop_brake.harness.patches import Composition
from dsh_loop_brake.harness.profiles import HOME_ENV, profile_dir, profile_names, resolve_home
from dsh_loop_brake.harness.types import Origin, Row
from dsh_loop_brake.loop_brake import LoopBrakeConfigError
from dsh_loop_brake.stores._settings import (
    DEFAULT_STORE,
    ConfigErrorFactory,
    StoreSetting,
    loop_brake_config_error,
    resolve_store_setting,
)

__all__ = [
    "CIRCUIT_BREAKER_ROW",
    "DEFAULT_STORE",
    "LOOP_BRAKE_ROW",
    "CircuitBreakerSetting",
    "LoopBrakeSetting",
    "add_profile_options",
    "add_strict_option",
    "check_home",
    "compose_profile",
    "missing_profile_message",
    "resolve_circuit_breaker",
    "resolve_loop_brake",
    "row_max_repeats",
    "row_store",
]

LOOP_BRAKE_ROW: Final = "loop-brake"
CIRCUIT_BREAKER_ROW: Final = circuit_breaker.ROW_ID


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


def check_home(given: Path | None, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a dsh home that is not a directory and cannot become one: a ``HarnessError``.

    ``given`` is ``--home`` (``None``: ``$DSH_HOME``, else ``~/.dsh``). The home itself, or the
    nearest part of its path that exists, being a file (a device, a pipe...) would otherwise
    surface as a warning that the profile does not exist followed by an error that the profile
    cannot be read; this says what is wrong once, and where the path came from. A home that
    does not exist yet is left to the command (install creates it; the others read no profile).
    """
    home = resolve_home(given, environ)
    if home.is_dir():
        return  # the usual case: one stat
    blocker = _not_a_directory(home)
    if blocker is None:
        return
    if given is not None:
        subject = f"--home is {home}"
        fix = "give --home a directory (the dsh home), or leave it out to use $DSH_HOME or ~/.dsh"
    elif (os.environ if environ is None else environ).get(HOME_ENV, "").strip():
        subject = f"{HOME_ENV} is {home}"
        fix = f"set {HOME_ENV} to a directory (the dsh home), or unset it to use ~/.dsh"
    else:
        subject = f"the default dsh home ~/.dsh is {home}"
        fix = f"move it aside, or name another directory with {HOME_ENV} or --home"
    if blocker == home:
        problem = f"which is {_kind_of(blocker)}, not a directory"
    else:
        problem = f"which cannot be a directory because {blocker} is {_kind_of(blocker)}"
    raise HarnessError(f"{subject}, {problem}; {fix}")


def _not_a_directory(home: Path) -> Path | None:
    """The nearest existing part of ``home``'s path (itself first) when it is not a directory."""
    for path in (home, *home.parents):
        try:
            mode = path.stat().st_mode
        except OSError as error:
            if isinstance(error, (FileNotFoundError, NotADirectoryError)):
                continue  # not there (or under a file): look further up
            return None  # cannot be looked at (permissions): the command says what it finds
        return None if stat.S_ISDIR(mode) else path
    return None


def _kind_of(path: Path) -> str:
    mode = path.stat().st_mode
    for test, kind in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "something else"


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
    # Where the brake keeps its streaks (row, then DSH_LOOP_BRAKE_STORE, then memory:), with the
    # file and line that set it; None without a row, or for a disabled row that is unusable.
    store_setting: StoreSetting | None = None

    @property
    def store(self) -> str:
        """The store URL with any password shown as ``***`` (``memory:`` when none is set)."""
        return DEFAULT_STORE if self.store_setting is None else self.store_setting.shown

    @property
    def ignored_env(self) -> tuple[str, ...]:
        """The environment variables that are set but lose to this row."""
        ignored = () if self.max_repeats is None else self.max_repeats.ignored_env
        if self.store_setting is not None:
            ignored += self.store_setting.ignored_env
        return ignored


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
        store = row_store(row, environ)
    except LoopBrakeConfigError as error:
        if not row.disabled:
            raise
        return LoopBrakeSetting(row, None, composition, problem=str(error))
    return LoopBrakeSetting(row, resolved, composition, store_setting=store)


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


def row_store(
    row: Row,
    environ: Mapping[str, str] | None = None,
    *,
    brake: str = "loop brake",
    source: str = "the loop-brake patch row",
    error: ConfigErrorFactory = loop_brake_config_error,
) -> StoreSetting:
    """The row's ``store`` and ``sessionTtl`` as its plugin resolves them (row, then
    ``DSH_LOOP_BRAKE_STORE``, then ``memory:``), with the file and line that set each; checked
    without opening the store.

    A bad value raises the plugin's ``LoopBrakeConfigError``, prefixed with the file and line
    of the key at fault (a value from the environment names the variable instead).
    """
    config = row.config if isinstance(row.config, Mapping) else None
    try:
        setting = resolve_store_setting(config, environ, brake=brake, source=source, error=error)
    except LoopBrakeConfigError as problem:
        origin = None if problem.key is None else row.config_origin(problem.key)
        if origin is not None:
            locate(problem, origin.path, origin.line)
        raise
    return setting.located(
        _located(setting.source, row, "store"), _located(setting.ttl_source, row, "sessionTtl")
    )


def _located(source: Source, row: Row, key: str) -> Source:
    if source.kind != "row":
        return source
    origin = row.config_origin(key)
    return source.located(
        None if origin is None else origin.path, None if origin is None else origin.line
    )


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
    # Origin: the patch that set it; None: the default; a Source: the environment (store only).
    sources: dict[str, Origin | Source | None]
    problem: str | None = None
    store_setting: StoreSetting | None = None

    @property
    def ignored_env(self) -> tuple[str, ...]:
        """The environment variables that are set but lose to this row."""
        return () if self.store_setting is None else self.store_setting.ignored_env


def resolve_circuit_breaker(
    composition: Composition, environ: Mapping[str, str] | None = None
) -> CircuitBreakerSetting | None:
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
    try:
        store = row_store(
            row,
            environ,
            brake="circuit breaker",
            source="the circuit-breaker patch row",
            error=circuit_breaker.CircuitBreakerConfigError,
        )
    except LoopBrakeConfigError as error:
        if not row.disabled:
            raise
        return CircuitBreakerSetting(row, None, {}, problem=str(error))
    given = row.config or {}
    sources: dict[str, Origin | Source | None] = {
        key: row.config_origin(key) if given.get(key) is not None else None for key in resolved
    }
    resolved["store"] = store.shown  # never the password
    resolved["sessionTtl"] = store.session_ttl
    sources["store"] = _origin(store.source, row, "store")
    sources["sessionTtl"] = _origin(store.ttl_source, row, "sessionTtl")
    return CircuitBreakerSetting(row, resolved, sources, store_setting=store)


def _origin(source: Source, row: Row, key: str) -> Origin | Source | None:
    """How ``sources`` says where a store key came from: the patch, the environment, or None."""
    if source.kind == "row":
        return row.config_origin(key)
    return source if source.kind == "env" else None
