"""The ``dsh-loop-brake`` command line: install into a profile, show the resolved configuration.

Every subcommand is one :class:`Command` in :data:`COMMANDS` (its options and its ``run``); a
user's mistake is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO

from dsh_loop_brake import config_command
from dsh_loop_brake.exits import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    error_line,
    one_line,
    strict_failure,
    write_line,
)
from dsh_loop_brake.harness.errors import HarnessError
from dsh_loop_brake.harness.profiles import install, resolve_home, uninstall
from dsh_loop_brake.hooks import command as hook_command
from dsh_loop_brake.loop_brake import PLUGIN_NAME, LoopBrakeConfigError
from dsh_loop_brake.mcp_proxy import command as mcp_proxy_command
from dsh_loop_brake.profile_options import add_profile_options, check_home
from dsh_loop_brake.replay import command as replay_command
from dsh_loop_brake.stores import StoreError

__all__ = ["COMMANDS", "Command", "build_parser", "main", "parse_arguments"]

PROG = "dsh-loop-brake"

# A store a row names that cannot be reached at apply (StoreError) is the user's to fix too.
USER_ERRORS = (HarnessError, LoopBrakeConfigError, StoreError, OSError)
"""What a user can cause and fix: shown as one line on stderr, exit code 2."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, how to add its options, and how to run it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    # Reads the dsh home (--home, else DSH_HOME, else ~/.dsh): main refuses one that is not a
    # directory before the command runs, in one line naming where it came from.
    reads_home: bool = False


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
# The command table and main


COMMANDS: list[Command] = [
    Command(
        "install",
        f"add {PLUGIN_NAME} to a profile's bundle list (creates the profile; idempotent)",
        _configure_install,
        _run_install,
        reads_home=True,
    ),
    Command(
        "uninstall",
        f"remove {PLUGIN_NAME} from a profile's bundle list",
        _configure_install,
        _run_uninstall,
        reads_home=True,
    ),
    Command(
        "config",
        "show both plugins' composed rows, every resolved setting and where it came from",
        config_command.add_arguments,
        config_command.run,
        reads_home=True,
    ),
    Command(
        "replay",
        "replay recorded agent transcripts through the brake and report what it would deny",
        replay_command.add_arguments,
        replay_command.run,
        reads_home=True,
    ),
    Command(
        "hook",
        "the hook Claude Code, Codex CLI and gemini-cli run before each tool call; install it",
        hook_command.add_arguments,
        hook_command.run,
    ),
    Command(
        "mcp-proxy",
        "stand between an MCP client and a stdio MCP server, denying the calls of a tool loop",
        mcp_proxy_command.add_arguments,
        mcp_proxy_command.run,
        reads_home=True,
    ),
    # More subcommands are added here: one Command(name, help, configure, run).
]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (argparse prints its whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        write_line(error_line(f"{message}; see `{self.prog} --help`"), sys.stderr)
        self.exit(EXIT_USAGE)


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The argument parser with one subparser per command."""
    parser = _Parser(
        prog=PROG,
        description="Stop runaway AI-agent tool loops in code, outside the model.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="show the version and exit"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(run=command.run, parser=sub, reads_home=command.reads_home)
    return parser


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line; a mistake is one line pointing at that command's ``--help``."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # argparse would blame the top-level parser and point at the wrong --help
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code: 0 ok, 1 denials with --fail-on-denial, 2 error."""
    _tolerant_output()
    args = parse_arguments(argv)
    if sys.stdout is None:  # started with standard output closed (`dsh-loop-brake config >&-`)
        write_line(
            error_line(
                "standard output is closed, so nothing could be reported; run the command with "
                "it open (redirect it to /dev/null to discard the output)"
            ),
            sys.stderr,
        )
        return EXIT_USAGE
    with _StderrLogging() as shown, _GuardedStdout.installed():
        try:
            if args.reads_home:
                check_home(args.home)
            code: int = args.run(args)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. `dsh-loop-brake config | head -1`: not an error
            _silence_stdout()
            return EXIT_OK
        except _StdoutFailed as exc:
            _silence_stdout()
            write_line(error_line(str(exc)), sys.stderr)
            return EXIT_USAGE
        except USER_ERRORS as exc:
            write_line(error_line(_message(exc)), sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            write_line(error_line("interrupted"), sys.stderr)
            return EXIT_INTERRUPTED
    if getattr(args, "strict", False) and shown.warnings:
        write_line(strict_failure(shown.warnings), sys.stderr)
        return EXIT_USAGE
    return code


def _tolerant_output() -> None:
    """Characters the terminal's encoding cannot show become escapes, never a crash.

    With ``PYTHONIOENCODING=latin-1`` (or a C locale) a path with other characters would raise
    ``UnicodeEncodeError`` while printing — after ``install`` had already written the profile.
    JSON stays valid: the ``config --json`` writer escapes non-ASCII itself on such a stream.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a detached or odd stream
                reconfigure(errors="backslashreplace")


class _StdoutFailed(Exception):
    """Standard output cannot be written (a full disk, an I/O error): not the user's files."""

    @classmethod
    def of(cls, error: OSError) -> _StdoutFailed:
        return cls(f"cannot write to standard output ({error.strerror or error})")


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a failed write says it was standard output.

    An ``OSError`` from writing the report (``> /dev/full``) would otherwise read like a
    problem with one of the user's files. A reader that went away stays ``BrokenPipeError``.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @classmethod
    @contextlib.contextmanager
    def installed(cls) -> Iterator[None]:
        original = sys.stdout
        sys.stdout = cls(original)
        try:
            yield
        finally:
            sys.stdout = original

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StdoutFailed(
                f"cannot write to standard output ({exc.strerror or exc})"
            ) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StdoutFailed(
                f"cannot write to standard output ({exc.strerror or exc})"
            ) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, HarnessError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return str(exc)


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
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            message += f" ({type(exc).__name__}: {exc})"
        return f"{record.levelname.lower()}: {one_line(message)}"


class _StderrLogging(logging.Handler):
    """Show the package's warnings on stderr, one line each, while a command runs; count them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(_OneLineFormatter())
        self.warnings = 0
        self._logger = logging.getLogger("dsh_loop_brake")
        self._propagate = self._logger.propagate

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.warnings += 1
        write_line(self.format(record), sys.stderr)

    def __enter__(self) -> _StderrLogging:
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked for (reading metadata costs every command)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        write_line(f"{parser.prog} {_version()}", sys.stdout)
        parser.exit(EXIT_OK)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PROG)
    except PackageNotFoundError:
        return "(not installed)"
