"""Transcript readers: recorded agent sessions in four formats, streamed call by call.

``open_transcript(path, format)`` returns a :class:`Transcript`; iterating it yields one
:class:`RecordedCall` per tool call, in the order the agent made them. JSON Lines (a ``.jsonl``
or ``.ndjson`` file, or any file or stream whose first line is one JSON object with more lines
after it) is read line by line, so memory does not grow with the file; anything else is one
JSON document, parsed whole.

A file that cannot be read at all, or holds no entry of the format it is read as, raises
:class:`ReaderError`; a single bad line or entry is reported through ``on_problem`` and
skipped, so one truncated line never costs the whole file.

How a file is read, from the top: :func:`open_transcript` opens it; :func:`_open` reads it as
JSON Lines (:mod:`._jsonlines`) or as one document and turns either into records, decides the
format from the first ones when asked to (:mod:`._detect`), and :func:`_read` hands the records
to that format's reader in :data:`_READERS` (:mod:`._formats`).
"""

from __future__ import annotations

import functools
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final, final

from dsh_loop_brake.replay._detect import (
    ANTHROPIC,
    CLAUDE_CODE,
    JSONL,
    MESSAGES,
    OPENAI,
    RESPONSES,
    SESSIONS,
    Detector,
    api_response,
    session_messages,
)
from dsh_loop_brake.replay._formats import (
    NoEntry,
    Reading,
    Record,
    RecordedCall,
    read_calls,
    read_chat,
    read_claude_code,
)
from dsh_loop_brake.replay._jsonlines import (
    BLOCK_BYTES,
    MAX_LINE_BYTES,
    Line,
    json_lines,
    json_message,
    loads,
)
from dsh_loop_brake.replay._problems import (
    Problems,
    ProblemSink,
    SinkFailed,
    describe,
    json_type,
)
from dsh_loop_brake.replay.errors import ReaderError

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "TRANSCRIPT_SUFFIXES",
    "RecordedCall",
    "Transcript",
    "open_transcript",
]

FORMATS: Final = ("auto", JSONL, OPENAI, ANTHROPIC, CLAUDE_CODE)
"""The values of ``--format``; ``auto`` decides per file."""

TRANSCRIPT_SUFFIXES: Final = (".json", ".jsonl", ".ndjson")
"""The file name endings a directory search picks up (case-insensitive)."""

_LINE_SUFFIXES: Final = (".jsonl", ".ndjson")
_DETECT_LINES: Final = 64  # lines examined to tell a JSON Lines file's format
_HINT: Final = "pass --format to say which format it is"

Reader = Callable[[Iterable[Record], Reading], Iterator[RecordedCall]]

_READERS: Final[dict[str, Reader]] = {
    JSONL: read_calls,
    CLAUDE_CODE: read_claude_code,
    OPENAI: functools.partial(read_chat, openai=True, anthropic=False),
    ANTHROPIC: functools.partial(read_chat, openai=False, anthropic=True),
}
"""Each format's reader, as ``--format`` asks for it."""

# A chat log whose format was detected is read for both APIs' tool calls: its first lines
# may not have shown which API wrote it, and a call of either kind is not lost.
_DETECTED_CHAT: Final[Reader] = functools.partial(read_chat, openai=True, anthropic=True)


@final
class Transcript:
    """A transcript file opened for reading; iterate it once for its calls, in recorded order.

    ``sessions`` lists the session names in the order they first appear (a name can repeat:
    two runs of one task are two sessions); it is complete once the iteration has finished and
    includes sessions in which the agent made no tool call.
    """

    __slots__ = ("_calls", "_file", "format", "path", "sessions")

    def __init__(
        self,
        path: str,
        format: str,
        sessions: list[str],
        calls: Iterator[RecordedCall],
        *,
        file: IO[bytes] | None = None,
    ) -> None:
        self.path = path
        self.format = format
        self.sessions = sessions
        self._calls = calls
        self._file = file  # also closed by the calls' own end; closed here if they never start

    def __repr__(self) -> str:
        return f"<Transcript {self.path!r} format={self.format!r}>"

    def __iter__(self) -> Iterator[RecordedCall]:
        return self._calls

    def close(self) -> None:
        """Stop reading and release the file (also done when the iteration ends)."""
        close = getattr(self._calls, "close", None)
        if close is not None:
            close()
        # A generator closed before it started never runs its finally: the file is closed here.
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_transcript(
    path: str | Path,
    format: str = "auto",
    *,
    on_problem: ProblemSink | None = None,
    stream: IO[bytes] | None = None,
) -> Transcript:
    """Open one transcript file; ``ReaderError`` when it cannot be read or is no transcript.

    ``format`` is one of :data:`FORMATS`. ``on_problem`` receives one line per skipped line or
    entry (``"<path>:<line>: <reason>"``); by default such problems are ignored. ``stream``, a
    binary stream such as ``sys.stdin.buffer``, is read instead of opening ``path``, which then
    only names it (``"<stdin>"``); the stream is read from where it is and never closed.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown transcript format {format!r}; use one of {', '.join(FORMATS)}")
    shown = str(path)
    problems = Problems(shown, on_problem)
    try:
        if stream is None:
            file: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed when the calls run out
        else:
            file = io.BufferedReader(_Rejoined(b"", stream, owned=False))
    except OSError as error:
        raise ReaderError(shown, _os_reason(error)) from None
    try:
        return _open(file, Path(path), shown, format, problems)
    except OSError as error:
        file.close()
        raise ReaderError(shown, _os_reason(error)) from None
    except BaseException:
        file.close()
        raise


# --------------------------------------------------------------------------------------------
# Opening: JSON Lines, or one JSON document; either way, records


def _open(file: IO[bytes], path: Path, shown: str, format: str, problems: Problems) -> Transcript:
    """Read ``file`` as JSON Lines or as one document, whichever it holds.

    A ``.jsonl``/``.ndjson`` file is JSON Lines. Any other (a ``.json`` file, a pipe, standard
    input) is JSON Lines when its first line is one whole JSON object and another line follows,
    so a stream of JSON Lines is read line by line too; otherwise it is one document (and if it
    turns out to hold JSON Lines after all, it is read again line by line).
    """
    if path.suffix.lower() in _LINE_SUFFIXES:
        return _from_lines(file, path.name, shown, format, problems)
    head = file.read(BLOCK_BYTES)
    head, lines = _json_lines_ahead(head, file)
    if lines:
        return _from_lines(_rewound(file, head), path.name, shown, format, problems)
    if file.seekable():
        file.seek(0)
        data = file.read()  # read whole in one go (head + the rest would be a copy of it)
    else:
        data = head + file.read()
    del head
    if not data.strip():
        raise ReaderError(shown, f"{_no_entry(format)} (the file is empty)")
    document = _parse_document(data, shown)
    if document is not _JSON_LINES:
        file.close()
        return _from_document(document, path.name, shown, format, problems)
    if file.seekable():
        del data
        file.seek(0)  # read it again line by line: memory stays flat
    else:
        # A pipe (`replay -`, `<(zcat ...)`) cannot be rewound; it is already read.
        file.close()
        file = io.BytesIO(data)
    return _from_lines(file, path.name, shown, format, problems)


def _json_lines_ahead(head: bytes, file: IO[bytes]) -> tuple[bytes, bool]:
    """(what was read, whether it starts JSON Lines): a first line that is one whole JSON object,
    and more after it.

    ``head`` is the file's first block; blank lines after the first line are read past. A first
    line longer than the block is left to the document parser (which finds JSON Lines too,
    with the whole file in memory once).
    """
    start = len(head) - len(head.lstrip(b" \t\r\n"))
    end = head.find(b"\n", start)
    if end < 0 or not _one_object(head[start : end + 1]):
        return head, False
    while not head[end + 1 :].strip():  # only blank lines after it so far
        more = file.read(BLOCK_BYTES)
        if not more:
            return head, False  # a one-line document
        head += more
    return head, True


def _one_object(line: bytes) -> bool:
    """Whether a line is one whole JSON object (as the first line of JSON Lines is)."""
    try:
        text = line.decode()
    except UnicodeDecodeError:
        return False
    if not text.startswith("{"):
        return False
    try:
        return type(loads(text)) is dict
    except (ValueError, RecursionError):
        return False


def _rewound(file: IO[bytes], head: bytes) -> IO[bytes]:
    """``file`` as it was before ``head`` was read from it."""
    if file.seekable():
        file.seek(0)
        return file
    return io.BufferedReader(_Rejoined(head, file, owned=True), buffer_size=BLOCK_BYTES)


@final
class _Rejoined(io.RawIOBase):
    """A stream read from ``rest`` after ``head``: what was read of a pipe, put back in front.

    Closing it closes ``rest`` only when it is ``owned`` (a stream given to
    :func:`open_transcript`, such as standard input, is the caller's to close).
    """

    def __init__(self, head: bytes, rest: IO[bytes], *, owned: bool) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest
        self._owned = owned

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self._owned:
            self._rest.close()
        super().close()


class _JsonLines:
    """Marker: the document parser found JSON Lines, not one document."""


_JSON_LINES: Final = _JsonLines()


def _parse_document(data: bytes, shown: str) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            return _JSON_LINES  # several JSON values, one per line: read it as JSON Lines
        raise ReaderError(
            shown,
            f"not JSON ({json_message(error)} at line {error.lineno} column {error.colno})",
        ) from None
    except UnicodeDecodeError:
        raise ReaderError(shown, "not JSON: the file is not UTF-8 text") from None
    except ValueError as error:
        raise ReaderError(shown, f"not JSON ({error})") from None
    except RecursionError:
        raise ReaderError(shown, "not a transcript: JSON nested too deeply") from None


def _from_document(
    document: Any, file_name: str, shown: str, format: str, problems: Problems
) -> Transcript:
    """A transcript from one parsed JSON document (a list, or one object)."""
    if not isinstance(document, (list, dict)):
        raise ReaderError(shown, f"not a transcript: the file holds a JSON {json_type(document)}")
    items: list[Any] = document if isinstance(document, list) else [document]
    detector = Detector()
    any(map(detector.see, items))  # up to the first item that decides the format
    detected = format == "auto"
    if detected:
        if detector.format is None:
            if not items:
                raise ReaderError(shown, f"{_no_entry(format)} (the file holds an empty array)")
            raise ReaderError(shown, f"not a recognised transcript ({describe(document)}); {_HINT}")
        format = detector.format
    layout = MESSAGES  # how a chat document is laid out (the other formats take any records)
    if format in (JSONL, CLAUDE_CODE):
        label = "item"
    elif detector.first == RESPONSES:
        label = "response"
    elif isinstance(document, dict) or detector.first != SESSIONS:
        label = "message"
        messages = session_messages(document) if isinstance(document, dict) else document
        if messages is not None and api_response(document) is None:
            items = messages  # an object with messages: the file's session
    else:
        label, layout = "session", SESSIONS
    records = ((f"{label} #{number}", item, None) for number, item in enumerate(items, 1))
    return _read(records, format, detector, detected, file_name, shown, problems, layout, None)


def _from_lines(
    file: IO[bytes], file_name: str, shown: str, format: str, problems: Problems
) -> Transcript:
    """A transcript read line by line; the first lines decide the format when asked to."""
    lines = json_lines(file)
    peeked: list[Line] = []  # every line read while deciding, bad ones too: read again below
    first: Line | None = None  # the first line that is JSON
    detector = Detector()
    for line in lines:
        peeked.append(line)
        if line[2] is None:
            if first is None:
                first = line
            if detector.see(line[1]):
                break
        if len(peeked) >= _DETECT_LINES:
            break
    if not peeked:
        raise ReaderError(shown, f"{_no_entry(format)} (the file is empty)")
    if first is None:
        number, _, reason = peeked[0]
        raise ReaderError(
            shown, f"not JSON Lines: line {number} is {reason}, and so is every line read"
        )
    detected = format == "auto"
    if detected:
        if detector.format is None:
            shape = describe(first[1])
            raise ReaderError(
                shown, f"not a recognised transcript (its first lines are {shape}); {_HINT}"
            )
        format = detector.format
    # The peeked lines, then the rest: chained in C, so no Python frame per line. Through a
    # list iterator, which lets go of the peeked lines once they are read (chaining the list
    # itself would hold up to 64 parsed lines until the end of the file).
    records = itertools.chain(iter(peeked), lines)
    return _read(records, format, detector, detected, file_name, shown, problems, "lines", file)


def _read(
    records: Iterable[Record],
    format: str,
    detector: Detector,
    detected: bool,
    file_name: str,
    shown: str,
    problems: Problems,
    layout: str,
    file: IO[bytes] | None,
) -> Transcript:
    """The records read by the reader of their format (given, or ``detected``)."""
    reader = _DETECTED_CHAT if detected and format in (OPENAI, ANTHROPIC) else _READERS[format]
    reading = Reading(file_name, problems, layout)
    # What the file looks like, should it turn out to hold nothing of the format it is read as.
    looks_like = detector.format if detector.decided else None
    calls = _finish(reader(records, reading), format, looks_like, file, shown, problems)
    return Transcript(shown, format, reading.sessions.names, calls, file=file)


def _finish(
    calls: Iterator[RecordedCall],
    format: str,
    looks_like: str | None,
    file: IO[bytes] | None,
    shown: str,
    problems: Problems,
) -> Iterator[RecordedCall]:
    """Close the file and summarise the problems when the calls run out (or reading fails).

    The problems of the lines before the first call are held back: a file that turns out to
    hold no entry of its format is one error, not its every line "skipped" and then the error.
    """
    problems.hold()
    try:
        first = next(calls, None)
        problems.release()
        if first is not None:
            yield first
            yield from calls
    except NoEntry:
        problems.drop()
        hint = f" (it looks like {looks_like}: try --format {looks_like})"
        raise ReaderError(
            shown, _no_entry(format) + (hint if looks_like not in (None, format) else "")
        ) from None
    except SinkFailed as failed:
        raise failed.error from None  # the caller's own error, not a file that cannot be read
    except OSError as error:
        raise ReaderError(shown, _os_reason(error)) from None
    finally:
        if file is not None:
            file.close()
        try:
            problems.finish()
        except SinkFailed as failed:
            raise failed.error from None


def _no_entry(format: str) -> str:
    """``no entry of format claude-code was found`` (or ``of any format`` for ``auto``)."""
    return (
        "no entry of any format was found"
        if format == "auto"
        else (f"no entry of format {format} was found")
    )


def _os_reason(error: OSError) -> str:
    reason = error.strerror or type(error).__name__
    return f"cannot read the file ({reason[0].lower()}{reason[1:]})"
