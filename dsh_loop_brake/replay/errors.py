"""Exceptions of the replay command.

Every problem a user can cause and fix is one sentence naming the file (and line) involved::

    Exception
    ├── ReaderError         a transcript file cannot be read or is not a transcript
    └── ReplayUsageError    the replay command line itself is unusable (exit 2)

Problems with single lines or entries of an otherwise readable transcript are not exceptions:
they are reported through the reader's ``on_problem`` callback and the entry is skipped.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ReaderError", "ReplayUsageError"]


class ReaderError(Exception):
    """A transcript file cannot be read or parsed; ``str()`` is ``"<path>: <reason>"``."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.reason))


class ReplayUsageError(Exception):
    """The replay command line is unusable (a bad ``--sweep`` or no transcript to read)."""
