"""The JSON Lines scanner: a file's lines as parsed JSON values, in blocks, in flat memory.

:func:`json_lines` yields one :data:`Line` per nonblank line: ``(line number, value, None)``,
or ``(line number, None, reason)`` for a line that is not one JSON value (the format readers
report the reasons, so bad lines come out in line order). No line longer than
:data:`MAX_LINE_BYTES` is ever held in memory.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable, Iterator
from typing import IO, Any, Final, cast

__all__ = [
    "BLOCK_BYTES",
    "MAX_LINE_BYTES",
    "Line",
    "json_error",
    "json_lines",
    "json_message",
    "loads",
    "size",
]

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""A JSON Lines line longer than this is reported and skipped without being held in memory."""

BLOCK_BYTES: Final = 1 << 16
"""Read this much at a time; never more than MAX_LINE_BYTES, so no whole line in a block is over."""

Line = tuple[int, Any, "str | None"]
"""One line of a JSON Lines file: (line number, value, None), or (line number, None, reason)."""

# The json module's scanner (its C implementation): json.loads without the per-call wrapping.
_SCAN: Final = cast(
    "Callable[[str, int], tuple[Any, int]]",
    json.scanner.make_scanner(json.JSONDecoder()),  # type: ignore[arg-type]
)


def json_lines(file: IO[bytes]) -> Iterator[Line]:
    """One :data:`Line` per nonblank line of ``file``.

    The file is read in blocks. A block's whole lines are decoded in one piece and scanned in
    place with the json module's C scanner: the loop below runs once per line and calls nothing
    else for a line that is one JSON value. The line a block ends inside is finished by
    :func:`_unfinished_line`; any other line goes through :func:`_parse_line` (or, when the block
    is not UTF-8 throughout, every line through :func:`_raw_line`).
    """
    read = file.read
    readline = file.readline
    scan = _SCAN
    number = 0
    while True:
        block = read(min(BLOCK_BYTES, MAX_LINE_BYTES))
        if not block:
            return
        cut = block.rfind(b"\n") + 1  # the block's whole lines end here
        text = _whole_text(block[:cut])
        if text is None:  # not UTF-8 somewhere, or a NUL: line by line, to say which line
            for raw in block[:cut].split(b"\n")[:-1]:
                number += 1
                line = _raw_line(raw + b"\n", number)
                if line is not None:
                    yield line
            text = ""
        # Each newline becomes a NUL, which the scanner takes nowhere (not as whitespace, not in
        # a string): no value can run on past its line, so scanning a line in place finds what
        # scanning it on its own would, and a value that ends at a NUL is its line, whole.
        sealed = text.replace("\n", "\0")
        start = 0
        size = len(sealed)
        while start < size:
            number += 1
            try:
                value, end = scan(sealed, start)
            except (StopIteration, ValueError, RecursionError):
                end = 0  # no value here (a value ends past 0)
            else:
                if sealed[end] == "\0":  # the usual case
                    yield number, value, None
                    start = end + 1
                    continue
                if sealed[end] == "\r" and sealed[end + 1] == "\0":  # a line ended by CRLF
                    yield number, value, None
                    start = end + 2
                    continue
            stop = sealed.index("\0", start) + 1  # just past the line's newline
            if end and text[end:stop].isspace():  # the value, then whitespace such as "\r"
                yield number, value, None
            else:
                line = _parse_line(text[start:stop], number)
                if line is not None:
                    yield line
            start = stop
        if cut < len(block):
            number += 1
            line = _unfinished_line(block[cut:], readline, number)
            if line is not None:
                yield line


def loads(text: str) -> Any:
    """``json.loads(text)``, by the C scanner alone when it takes the whole text (usually)."""
    try:
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, RecursionError):
        pass
    return json.loads(text)  # whitespace around the value, or not JSON: it decides and says why


def json_error(error: ValueError) -> str:
    """Why a line is not JSON, in a few words (never its contents)."""
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON ({json_message(error)} at column {error.colno})"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    return "not JSON"


def json_message(error: json.JSONDecodeError) -> str:
    """The json module's message without a trailing "at" (it is followed by the position)."""
    message = error.msg
    return message[:-3] if message.endswith(" at") else message


def size(count: int) -> str:
    """A byte count as people write it: ``64 MiB``, ``1 KiB``, ``100 bytes``."""
    for unit, unit_size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= unit_size and count % unit_size == 0:
            return f"{count // unit_size} {unit}"
    return f"{count} bytes"


def _whole_text(data: bytes) -> str | None:
    """``data`` decoded, or None if it is not UTF-8 or holds a NUL (that would end a line)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def _unfinished_line(start: bytes, readline: Callable[[int], bytes], number: int) -> Line | None:
    """The line a block ends inside (``start`` is the end of the block), read on to its end.

    No more than MAX_LINE_BYTES and one byte of it is ever held: a longer line is read past in
    pieces and reported.
    """
    raw = start + readline(MAX_LINE_BYTES + 1 - len(start))
    if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
        return _raw_line(raw, number)
    del raw
    while True:
        rest = readline(1 << 20)
        if not rest or rest.endswith(b"\n"):
            return number, None, f"longer than the line limit of {size(MAX_LINE_BYTES)}"


def _raw_line(raw: bytes, number: int) -> Line | None:
    """The :data:`Line` for one line's bytes; None when it is blank."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return number, None, "not UTF-8 text"
    return _text_line(text, number)


def _text_line(text: str, number: int) -> Line | None:
    """The :data:`Line` for one line's text (its newline, if any, included); None if blank.

    The C scanner takes the line when it holds one value, perhaps with whitespace after it;
    anything else goes to :func:`_parse_line`.
    """
    try:
        value, end = _SCAN(text, 0)
        if end == len(text) or text[end:].isspace():
            return number, value, None
    except (StopIteration, ValueError, RecursionError):
        pass
    return _parse_line(text, number)


def _parse_line(text: str, number: int) -> Line | None:
    """A line the C scanner did not take: None if blank, else what ``json.loads`` makes of it."""
    if number == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark
    if not text.strip():
        return None
    try:
        return number, json.loads(text), None
    except ValueError as error:
        return number, None, json_error(error)
    except RecursionError:
        return number, None, "JSON nested too deeply"
