"""The ``replay`` subcommand: its options (``add_arguments``) and what it does (``run``).

Exit codes: 0 done, 1 ``--fail-on-denial`` and some call would be denied, 2 a usage or
configuration error, or not one transcript could be read, or (with ``--strict``) any warning.
A file that cannot be read is one warning on stderr and the others still replay.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, TextIO, final

from dsh_loop_brake._bundle_row import loop_brake_bundle_row
from dsh_loop_brake._config import Resolved, Source
from dsh_loop_brake.exits import EXIT_DENIED, EXIT_OK, EXIT_USAGE, error_line, warn, write_line
from dsh_loop_brake.harness import HarnessError, Row
from dsh_loop_brake.harness.profiles import resolve_home
from dsh_loop_brake.loop_brake import (
    ENV_VAR,
    PLUGIN_NAME,
    LoopBrakeConfigError,
    normalize_max_repeats,
)
from dsh_loop_brake.plugin import ROW_ID
from dsh_loop_brake.profile_options import (
    add_profile_options,
    add_strict_option,
    compose_profile,
    row_max_repeats,
)
from dsh_loop_brake.replay.errors import ReaderError, ReplayUsageError
from dsh_loop_brake.replay.readers import (
    FORMATS,
    TRANSCRIPT_SUFFIXES,
    Transcript,
    open_transcript,
)
from dsh_loop_brake.replay.report import printable, render_json, render_table
from dsh_loop_brake.replay.runner import Replayer

__all__ = ["EXAMPLES", "add_arguments", "find_transcripts", "parse_sweep", "run"]

EXAMPLES: Final = Path(__file__).resolve().with_name("examples")
"""The example transcripts shipped in the package, replayed when no PATH is given."""

STDIN: Final = "-"
"""The PATH that means standard input."""
STDIN_NAME: Final = "<stdin>"
"""How standard input is named in the report and in warnings."""

MAX_SWEEP_VALUES: Final = 100

_Warn = Callable[[str], None]
_SWEEP: Final = re.compile(r"\s*(\d{1,9})\s*\.\.\s*(\d{1,9})\s*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``replay`` options to ``parser``."""
    parser.add_argument(
        "paths",
        nargs="*",
        type=_transcript_path,
        metavar="PATH",
        help="transcript files or directories (searched recursively for .json, .jsonl and "
        ".ndjson; hidden ones skipped), or - for standard input; none: the example transcripts "
        "shipped in the package",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="the transcript format (default: %(default)s, decided per file)",
    )
    parser.add_argument(
        "--max-repeats",
        metavar="N",
        default=None,
        help=f"replay at this maxRepeats (overrides the profile's row and ${ENV_VAR})",
    )
    add_profile_options(parser)
    parser.add_argument(
        "--sweep",
        metavar="LO..HI",
        default=None,
        help="also replay at every maxRepeats from LO to HI and list what each would deny",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--fail-on-denial",
        action="store_true",
        help="exit with code 1 when the brake would deny any call (for CI)",
    )
    add_strict_option(parser)


def _transcript_path(text: str) -> Path:
    # An unset shell variable (`replay "$LOG_DIR"`) would otherwise replay the current directory.
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "a PATH is empty; give a transcript file or directory, or none for the examples"
        )
    return Path(text)


def run(args: argparse.Namespace) -> int:
    """Replay the transcripts ``args`` names and print the report; return the exit code."""
    err = _Stderr(sys.stderr)
    try:
        return _run(args, err)
    except (ReplayUsageError, HarnessError, LoopBrakeConfigError) as error:
        err.clear_progress()
        write_line(error_line(str(error)), err.stream)
        return EXIT_USAGE
    finally:
        err.clear_progress()


def _run(args: argparse.Namespace, err: _Stderr) -> int:
    sweep = parse_sweep(args.sweep) if args.sweep is not None else ()
    override = None
    if args.max_repeats is not None:
        override = normalize_max_repeats(args.max_repeats, source="--max-repeats")
    setting = _loop_brake_row(args, override, err)
    replayer = Replayer(setting.row, sweep)
    try:
        return _replay(args, replayer, setting, err)
    finally:
        replayer.dispose()


def _replay(args: argparse.Namespace, replayer: Replayer, setting: _Setting, err: _Stderr) -> int:
    paths: list[Path] = list(args.paths)
    if not paths:
        err.line(
            f"note: no PATH given: replaying the example transcripts shipped with "
            f"{PLUGIN_NAME} ({EXAMPLES}); pass your agents' transcript files or directories"
        )
        paths = [EXAMPLES]
    files = list(find_transcripts(paths, err.warn))
    if not files:
        raise ReplayUsageError(
            "no transcript to replay: no .json, .jsonl or .ndjson file was found at "
            + ", ".join(str(path) for path in paths)
        )
    read = asyncio.run(_replay_files(replayer, files, args.format, err))
    report = replace(replayer.report(), max_repeats_source=setting.max_repeats.source.label)
    err.clear_progress()
    if not read:
        if len(files) == 1:
            raise ReplayUsageError("nothing could be read (see the warning above)")
        raise ReplayUsageError(
            f"nothing could be read: none of the {len(files)} transcript files could be read "
            "(see the warnings above)"
        )
    if args.json:
        sys.stdout.write(render_json(report))
    else:
        # Names are cut to fit a terminal's columns, never in a file or a pipe.
        table = render_table(report, setting=setting.described, cut=_isatty(sys.stdout))
        sys.stdout.write(_terminal_safe(table, sys.stdout))
    sys.stdout.flush()
    if args.fail_on_denial and report.totals.denied:
        return EXIT_DENIED
    return EXIT_OK


async def _replay_files(replayer: Replayer, files: list[Path], format: str, err: _Stderr) -> int:
    """Replay each file in turn in one event loop; return how many could be read."""
    read = 0
    progress = _Progress(err, len(files))
    replayer.on_progress = progress.calls if err.is_terminal else None
    for number, path in enumerate(files, 1):
        progress.file(number, path, replayer.calls)
        try:
            transcript = _open(path, format, err)
            try:
                await replayer.replay(transcript)
            finally:
                transcript.close()
        except ReaderError as error:
            err.warn(f"{error}; the file was skipped")
            continue
        read += 1
    return read


def _open(path: Path, format: str, err: _Stderr) -> Transcript:
    """The transcript at ``path``; ``-`` is standard input (its format told by its content)."""
    if str(path) != STDIN:
        return open_transcript(path, format, on_problem=err.warn)
    if sys.stdin is None:  # started with no fd 0 (`replay - <&-`)
        raise ReaderError(STDIN_NAME, "standard input is closed, so there is nothing to read")
    if _isatty(sys.stdin):
        err.line("note: reading a transcript from the terminal; end it with Ctrl-D")
    return open_transcript(STDIN_NAME, format, on_problem=err.warn, stream=sys.stdin.buffer)


def parse_sweep(text: str) -> range:
    """``"LO..HI"`` as the range of maxRepeats values LO to HI, both included."""
    match = _SWEEP.fullmatch(text)
    low, high = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not match or low < 1 or high < low:
        raise ReplayUsageError(
            f"--sweep must be LO..HI with whole numbers 1 <= LO <= HI, such as --sweep 2..10; "
            f"got {text!r}"
        )
    if high - low + 1 > MAX_SWEEP_VALUES:
        raise ReplayUsageError(
            f"--sweep {low}..{high} asks for {high - low + 1} replays; at most "
            f"{MAX_SWEEP_VALUES} values can be swept at once"
        )
    return range(low, high + 1)


def find_transcripts(paths: Sequence[Path], warn: _Warn) -> Iterator[Path]:
    """The files to replay: each file as given, each directory searched recursively.

    A directory contributes its ``.json``, ``.jsonl`` and ``.ndjson`` files in sorted order,
    skipping hidden files and directories and anything that is not a regular file (a named
    pipe); a file reached twice is replayed once. ``-`` is standard input.
    """
    seen: set[str] = set()
    for path in paths:
        if str(path) == STDIN:  # standard input, read once however often it is named
            if STDIN not in seen:
                seen.add(STDIN)
                yield path
        elif path.is_dir():
            found = False
            for file in _walk(path, warn):
                found = True
                key = os.path.realpath(file)
                if key not in seen:
                    seen.add(key)
                    yield file
            if not found:
                warn(f"{path}: no .json, .jsonl or .ndjson file in this directory")
        else:
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                yield path  # also a missing path: opening it reports why


def _walk(directory: Path, warn: _Warn) -> Iterator[Path]:
    def report(error: OSError) -> None:
        warn(f"{error.filename}: cannot list the directory ({error.strerror or error}); skipped")

    for root, dirs, names in os.walk(directory, onerror=report):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and name.lower().endswith(TRANSCRIPT_SUFFIXES):
                file = Path(root, name)
                # A named pipe or device found by a search is no transcript, and opening a
                # pipe nobody writes would wait for good (a path given by hand is still read).
                if file.is_file() or not file.exists():
                    yield file


# ---------------------------------------------------------------------------------------------
# The loop-brake row replay applies


@dataclass(frozen=True)
class _Setting:
    """The row replay applies, and its maxRepeats with where it came from (for the report)."""

    row: Row
    max_repeats: Resolved

    @property
    def described(self) -> str:
        """Where maxRepeats came from, as the report's heading says it."""
        source = self.max_repeats.source
        if source.kind == "default":
            return "the default"
        if source.kind == "env":
            return f"from ${source.name}"
        return f"from {source}"


def _loop_brake_row(args: argparse.Namespace, override: int | None, err: _Stderr) -> _Setting:
    """The row to replay with, and where its maxRepeats comes from (for the report's heading).

    The profile's composed ``loop-brake`` row (config as composed; ``--max-repeats`` replaces
    it). A profile without one is replayed with the package's own bundle row (the defaults);
    a disabled row is replayed as if it were enabled, with its config. Both are said on stderr.
    """
    home = resolve_home(args.home)
    composition = compose_profile(args.profile, home, args.patches)
    row = composition.row(ROW_ID)
    if row is None:
        row = loop_brake_bundle_row()
        if override is None:
            err.line(
                f"note: profile {args.profile!r} has no {ROW_ID} row; replaying with "
                f"{PLUGIN_NAME}'s own bundle row (maxRepeats from ${ENV_VAR}, else 3). "
                f"Add it to the profile with `dsh-loop-brake install --profile {args.profile}`"
            )
    elif row.disabled:
        where = row.sources.get("disabled")
        by = f" by {where}" if where is not None else ""
        err.line(
            f"note: the {ROW_ID} row is disabled{by}, so this profile would deny nothing; "
            "replaying as if it were enabled, to show what it would stop"
        )
    if override is not None:
        row = Row(id=row.id, name=row.name, config={"maxRepeats": override})
        return _Setting(row, Resolved(override, Source("option", "--max-repeats")))
    # Validated here, not at apply, so a bad value is reported with the file and line it came from.
    resolved = row_max_repeats(row, os.environ)
    return _Setting(Row(id=row.id, name=row.name, config=row.config), resolved)


# ---------------------------------------------------------------------------------------------
# stderr: warnings and progress


@final
class _Stderr:
    """One-line messages on stderr, and a progress line that they never get mixed into."""

    __slots__ = ("_progress_shown", "is_terminal", "stream")

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.is_terminal = _isatty(stream)
        self._progress_shown = False

    def line(self, message: str) -> None:
        self.clear_progress()
        self.stream.write(_terminal_safe(printable(" ".join(message.split())) + "\n", self.stream))
        self.stream.flush()

    def warn(self, message: str) -> None:
        # Through the package's logger, so the command line counts it for --strict.
        self.clear_progress()
        warn(printable(message))

    def progress(self, message: str) -> None:
        if not self.is_terminal:
            return
        self.stream.write("\r\x1b[K" + _terminal_safe(printable(message), self.stream))
        self.stream.flush()
        self._progress_shown = True

    def clear_progress(self) -> None:
        if self._progress_shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._progress_shown = False


@final
class _Progress:
    """``replaying 3/40 name.jsonl: 120000 calls`` at most a few times a second."""

    __slots__ = ("_err", "_last", "_name", "_total")

    def __init__(self, err: _Stderr, total: int) -> None:
        self._err = err
        self._total = total
        self._name = ""
        self._last = 0.0

    def file(self, number: int, path: Path, calls: int) -> None:
        name = STDIN_NAME if str(path) == STDIN else path.name
        self._name = f"{number}/{self._total} {name}"
        self.calls(calls)

    def calls(self, calls: int) -> None:
        now = time.monotonic()
        if not self._err.is_terminal or now - self._last < 0.25:
            return
        self._last = now
        self._err.progress(f"replaying {self._name}: {calls} calls so far")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _terminal_safe(text: str, stream: TextIO) -> str:
    """``text`` encodable by ``stream`` (characters it cannot show become escapes)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text
