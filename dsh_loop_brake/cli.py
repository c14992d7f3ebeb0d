"""The ``dsh-loop-brake`` command line: install into a profile, show the resolved configuration.

Every subcommand is one :class:`Command` in :data:`COMMANDS` (its options and its ``run``); a
user's mistake is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

from dsh_loop_brake.harness.errors import HarnessError
from dsh_loop_brake.harness.layers import compose
from dsh_loop_brake.harness.patches import Composition
from dsh_loop_brake.harness.profiles import (
    default_home,
    install,
    profile_dir,
    resolve_home,
    uninstall,
)
from dsh_loop_brake.harness.types import Row
from dsh_loop_brake.hooks import command as hook_command
from dsh_loop_brake.loop_brake import (
    ENV_VAR,
    PLUGIN_NAME,
    InvalidMaxRepeatsError,
    LoopBrakeConfigError,
    resolve_max_repeats,
)
from dsh_loop_brake.replay import command as replay_command

__all__ = ["COMMANDS", "Command", "add_profile_options", "main"]

PROG = "dsh-loop-brake"
LOOP_BRAKE_ROW = "loop-brake"
EXIT_OK, EXIT_USAGE = 0, 2

USER_ERRORS = (HarnessError, LoopBrakeConfigError, OSError)
"""What a user can cause and fix: shown as one line on stderr, exit code 2."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, how to add its options, and how to run it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


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


def _home_directory(text: str) -> Path:
    # An unset shell variable (`--home "$DSH_DIR"`) would otherwise mean the current directory.
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "the directory is empty; give one, or leave --home out to use $DSH_HOME or ~/.dsh"
        )
    return Path(text)


# ---------------------------------------------------------------------------------------------
# install / uninstall


def _configure_install(parser: argparse.ArgumentParser) -> None:
    add_profile_options(parser, patches=False)


def _run_install(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    change = install(PLUGIN_NAME, args.profile, home)
    if change.changed:
        made = " (created the profile)" if change.created else ""
        print(f"installed {PLUGIN_NAME} in profile {args.profile!r}{made}: {change.path}")
    else:
        print(f"{PLUGIN_NAME} is already installed in profile {args.profile!r}: {change.path}")
    return EXIT_OK


def _run_uninstall(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    change = uninstall(PLUGIN_NAME, args.profile, home)
    if change.changed:
        print(f"removed {PLUGIN_NAME} from profile {args.profile!r}: {change.path}")
    else:
        print(f"{PLUGIN_NAME} is not installed in profile {args.profile!r}; nothing to do")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# config


def _configure_config(parser: argparse.ArgumentParser) -> None:
    add_profile_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@dataclass(frozen=True)
class ResolvedConfig:
    """The loop-brake row of a composition, its ``maxRepeats`` and where that came from."""

    row: Row | None
    max_repeats: int | None
    source: str | None
    composition: Composition
    problem: str | None = None  # why a disabled row's config would be rejected


def resolve_loop_brake(
    composition: Composition, environ: Mapping[str, str] | None = None
) -> ResolvedConfig:
    """Resolve the ``loop-brake`` row as the plugin would at apply (row, then env, then 3).

    Raises ``LoopBrakeConfigError`` (message prefixed with the file and line that supplied
    the bad value) when an enabled row would be rejected.
    """
    env = os.environ if environ is None else environ
    row = composition.row(LOOP_BRAKE_ROW)
    if row is None:
        return ResolvedConfig(None, None, None, composition)
    try:
        max_repeats, source = max_repeats_and_source(row, env)
    except LoopBrakeConfigError as err:
        if not row.disabled:
            raise
        return ResolvedConfig(row, None, None, composition, problem=str(err))
    return ResolvedConfig(row, max_repeats, source, composition)


def max_repeats_and_source(row: Row, environ: Mapping[str, str]) -> tuple[int, str]:
    """The row's ``maxRepeats`` as the plugin resolves it, and its source as ``config`` shows it.

    The source is the patch file that set it, ``env DSH_LOOP_BRAKE_MAX_REPEATS`` or
    ``default``. A bad value raises ``LoopBrakeConfigError`` prefixed with its file and line.
    """
    config = row.config
    # The row's config alone first: an error here is the patch file's, so name that file.
    try:
        from_row = resolve_max_repeats(config, environ={})
    except LoopBrakeConfigError as err:
        origin = _origin_of_error(row, err)
        raise LoopBrakeConfigError(f"{origin}: {err}" if origin else str(err)) from None
    if config is not None and config.get("maxRepeats") is not None:
        supplied = row.sources.get("config.maxRepeats") or row.sources.get("config")
        return from_row, supplied.path if supplied is not None else "the loop-brake patch row"
    raw = environ.get(ENV_VAR)
    if raw is not None and raw.strip():
        # The message already names the environment variable.
        return resolve_max_repeats(config, environ), f"env {ENV_VAR}"
    return from_row, "default"


def _origin_of_error(row: Row, err: LoopBrakeConfigError) -> str | None:
    sources = row.sources
    if not isinstance(err, InvalidMaxRepeatsError) and isinstance(row.config, dict):
        for key in row.config:
            if key != "maxRepeats" and f"config.{key}" in sources:
                return str(sources[f"config.{key}"])
    origin = sources.get("config.maxRepeats") or sources.get("config")
    return None if origin is None else str(origin)


def _run_config(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    composition = compose(args.profile, home, args.patches)
    resolved = resolve_loop_brake(composition)
    if args.json:
        print(json.dumps(_config_json(resolved), indent=2, ensure_ascii=False, default=str))
        if resolved.row is None:  # stdout is for the JSON; the person still needs the hint
            sys.stderr.write(_install_hint(args.profile, home))
    else:
        _print_config_text(resolved, args.profile, home, sys.stdout)
    return EXIT_OK


def _config_json(resolved: ResolvedConfig) -> dict[str, Any]:
    return {
        "row": None if resolved.row is None else resolved.row.as_dict(),
        "maxRepeats": resolved.max_repeats,
        "source": resolved.source,
        "skipped": [entry.as_dict() for entry in resolved.composition.skipped],
    }


def _print_config_text(resolved: ResolvedConfig, profile: str, home: Path, out: TextIO) -> None:
    row = resolved.row
    where = profile_dir(home, profile)
    if row is None:
        out.write(f"profile {profile!r} ({where}) has no {LOOP_BRAKE_ROW} row.\n")
        out.write(_install_hint(profile, home))
    else:
        sources = row.sources
        out.write(f"profile:     {profile} ({where})\n")
        out.write(f"row:         {row.id} (plugin {row.name}), inserted by {sources.get('id')}\n")
        if row.disabled:
            out.write(f"state:       disabled by {sources.get('disabled')}: the brake is off\n")
        else:
            out.write("state:       enabled\n")
        if row.config is None:
            shown = "none (the defaults)"
        else:
            shown = json.dumps(row.config, ensure_ascii=False, default=str)
        set_by = f", set by {sources['config']}" if "config" in sources else ""
        out.write(f"config:      {shown}{set_by}\n")
        if resolved.max_repeats is None:
            out.write(f"maxRepeats:  unusable ({resolved.problem})\n")
        else:
            out.write(f"maxRepeats:  {resolved.max_repeats} (from {_describe(resolved)})\n")
    skipped = resolved.composition.skipped
    if not skipped:
        out.write("skipped:     none\n")
    else:
        out.write(f"skipped:     {len(skipped)} patch{'es' if len(skipped) != 1 else ''}\n")
        for entry in skipped:
            out.write(f"  {entry}\n")


def _install_hint(profile: str, home: Path) -> str:
    # A command to paste: --home only when the default home would be another one.
    home_option = f" --home {shlex.quote(str(home))}" if home != default_home() else ""
    return f"hint: add it with `{PROG} install --profile {profile}{home_option}`\n"


def _describe(resolved: ResolvedConfig) -> str:
    if resolved.source == "default":
        return "the default; neither the row nor the environment sets it"
    if resolved.source == f"env {ENV_VAR}":
        return f"the environment variable {ENV_VAR}; the row does not set it"
    row = resolved.row
    origin = None if row is None else row.sources.get("config.maxRepeats")
    return str(origin) if origin is not None else str(resolved.source)


# ---------------------------------------------------------------------------------------------
# The command table and main


COMMANDS: list[Command] = [
    Command(
        "install",
        f"add {PLUGIN_NAME} to a profile's bundle list (creates the profile; idempotent)",
        _configure_install,
        _run_install,
    ),
    Command(
        "uninstall",
        f"remove {PLUGIN_NAME} from a profile's bundle list",
        _configure_install,
        _run_uninstall,
    ),
    Command(
        "config",
        "show the composed loop-brake row, the resolved maxRepeats and where it came from",
        _configure_config,
        _run_config,
    ),
    Command(
        "replay",
        "replay recorded agent transcripts through the brake and report what it would deny",
        replay_command.add_arguments,
        replay_command.run,
    ),
    Command(
        "hook",
        "the hook Claude Code, Codex CLI and gemini-cli run before each tool call; install it",
        hook_command.add_arguments,
        hook_command.run,
    ),
    # More subcommands are added here: one Command(name, help, configure, run).
]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (argparse prints its whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}; see `{self.prog} --help`\n")


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The argument parser with one subparser per command."""
    parser = _Parser(
        prog=PROG,
        description="Stop runaway AI-agent tool loops in code, outside the model.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code: 0 ok, 1 denials with --fail-on-denial, 2 error."""
    args = build_parser().parse_args(argv)
    with _stderr_logging():
        try:
            code: int = args.run(args)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. `dsh-loop-brake config | head -1`: not an error
            _silence_stdout()
            return EXIT_OK
        except USER_ERRORS as exc:
            _print_error(exc)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
    return code


def _print_error(exc: BaseException) -> None:
    if isinstance(exc, OSError) and not isinstance(exc, HarnessError):
        where = f"{exc.filename}: " if exc.filename else ""
        message = f"{where}{exc.strerror or exc}"
    else:
        message = str(exc)
    print(" ".join(message.split()), file=sys.stderr)


def _silence_stdout() -> None:
    # Python would complain again while flushing stdout at exit; point it at devnull.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class _OneLineFormatter(logging.Formatter):
    """``warning: message`` on one line; an attached exception as ``(Type: text)``, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(record.getMessage().split())
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            message += f" ({type(exc).__name__}: {' '.join(str(exc).split())})"
        return f"{record.levelname.lower()}: {message}"


class _stderr_logging:
    """Show the package's warnings on stderr, one line each, while a command runs."""

    def __init__(self) -> None:
        self._logger = logging.getLogger("dsh_loop_brake")
        self._handler = logging.StreamHandler(sys.stderr)
        self._handler.setFormatter(_OneLineFormatter())
        self._propagate = self._logger.propagate

    def __enter__(self) -> None:
        self._logger.addHandler(self._handler)
        self._logger.propagate = False

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self._handler)
        self._logger.propagate = self._propagate


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PROG)
    except PackageNotFoundError:
        return "(not installed)"
