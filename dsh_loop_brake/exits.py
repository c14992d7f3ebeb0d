"""How every command ends and speaks: its exit codes, and one line per error, warning or note.

All subcommands share these, so ``config`` and ``replay`` word the same problem the same way::

    error: p5.yml:3: loop brake: maxRepeats must be an integer of at least 1, got 0 (...)
    warning: over.yml:2: patch for row 'loop-brak' skipped: no row has this id (...)
    note: no PATH given: replaying the example transcripts shipped with dsh-loop-brake (...)

A warning is a record on the ``dsh_loop_brake`` logger (:func:`warn`), which the command line
shows on stderr and counts, so ``--strict`` can turn any warning into exit code 2.
"""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

__all__ = [
    "EXIT_DENIED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "error_line",
    "note",
    "one_line",
    "strict_failure",
    "warn",
    "write_line",
]

EXIT_OK: Final = 0
"""The command did what was asked."""
EXIT_DENIED: Final = 1
"""``replay --fail-on-denial``: the brake would deny at least one recorded call."""
EXIT_USAGE: Final = 2
"""A usage or configuration error, or (with ``--strict``) any warning."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted (Ctrl-C), as a shell reports a SIGINT."""

logger = logging.getLogger("dsh_loop_brake.cli")


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs as one space, other control characters escaped.

    A file name or a value with a newline or an escape sequence in it cannot break the line or
    drive the terminal.
    """
    joined = " ".join(text.split())
    if joined.isprintable():
        return joined
    return "".join(
        char if char.isprintable() or char == " " else char.encode("unicode_escape").decode()
        for char in joined
    )


def error_line(message: str) -> str:
    """The one line a failed command prints on stderr."""
    return f"error: {one_line(message)}"


def warn(message: str) -> None:
    """A warning: shown as ``warning: ...`` on stderr by the command line, and counted."""
    logger.warning("%s", message)


def note(message: str, stream: TextIO | None = None) -> None:
    """Something the person should know that is not a problem (never counted by --strict)."""
    write_line(f"note: {one_line(message)}", sys.stderr if stream is None else stream)


def write_line(line: str, stream: TextIO | None) -> None:
    """Write one line to a stream that may be closed or unable to encode it; never raise."""
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        safe = line.encode(encoding, "backslashreplace").decode(encoding, "replace")
        try:
            stream.write(safe + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass
    except (OSError, ValueError):
        pass  # stderr closed or gone: nothing more can be said


def strict_failure(warnings: int) -> str:
    """The error line of a ``--strict`` run that had warnings."""
    plural = "" if warnings == 1 else "s"
    return error_line(
        f"--strict: {warnings} warning{plural} above; fix {'it' if warnings == 1 else 'them'}, "
        "or run without --strict"
    )
