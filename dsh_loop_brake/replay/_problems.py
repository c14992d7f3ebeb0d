"""What the readers say about a transcript: skipped lines and entries, and shapes of JSON values.

A bad line or entry is reported through the caller's ``on_problem`` callback (the first few in
full, then a count) and skipped; a value is described by its shape and a few key names, never
by its contents, since a transcript holds the agent's arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, final

__all__ = ["PROBLEMS_SHOWN", "ProblemSink", "Problems", "SinkFailed", "describe", "json_type"]

ProblemSink = Callable[[str], None]

PROBLEMS_SHOWN: Final = 5
"""Bad lines or entries reported per file in full; the rest are counted."""


@final
class SinkFailed(Exception):
    """An ``OSError`` the problem callback raised, carried past the reader's own file errors."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


@final
class Problems:
    """Reports skipped lines and entries of one file: the first few in full, then a count."""

    __slots__ = ("held", "hidden", "path", "shown", "sink")

    def __init__(self, path: str, sink: ProblemSink | None) -> None:
        self.path = path
        self.sink = sink
        self.shown = 0
        self.hidden = 0
        # Problems held back until the file shows it is of its format: a file that is not
        # (every line "not a call") is one error, not five warnings and then the error.
        self.held: list[str] | None = None

    def at(self, where: int | str, reason: str) -> None:
        """Report the line number (an int) or the entry (``"message #3"``) skipped, and why."""
        if self.sink is None:
            return
        if self.shown >= PROBLEMS_SHOWN:
            self.hidden += 1
            return
        self.shown += 1
        separator = ":" if isinstance(where, int) else ": "
        message = f"{self.path}{separator}{where}: {reason}; skipped"
        if self.held is not None:
            self.held.append(message)
        else:
            self._send(message)

    def hold(self) -> None:
        """Keep the problems reported from now on until :meth:`release` (or :meth:`drop`)."""
        self.held = []

    def release(self) -> None:
        """Report the problems held back, in order, and any further ones as they come."""
        held, self.held = self.held, None
        for message in held or ():
            self._send(message)

    def drop(self) -> None:
        """Forget the problems held back and those not shown (the whole file is the problem)."""
        self.held = None
        self.hidden = 0

    def finish(self) -> None:
        """Report the problems held back, and how many were not shown in full."""
        self.release()
        if self.sink is not None and self.hidden:
            plural = "s" if self.hidden != 1 else ""
            self._send(f"{self.path}: {self.hidden} more problem{plural} like these; skipped")
            self.hidden = 0

    def _send(self, message: str) -> None:
        assert self.sink is not None
        try:
            self.sink(message)
        except OSError as error:
            raise SinkFailed(error) from None


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: ``object``, ``array``, ``string``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def describe(value: Any) -> str:
    """A short description of a JSON value's shape, never its contents beyond a few key names."""
    if isinstance(value, dict):
        keys = [json.dumps(str(key)[:40]) for key in list(value)[:6]]
        more = ", ..." if len(value) > 6 else ""
        return f"an object with keys {', '.join(keys)}{more}" if keys else "an empty object"
    if isinstance(value, list):
        if not value:
            return "an empty array"
        return f"an array of {json_type(value[0])}s"
    return f"a JSON {json_type(value)}"
