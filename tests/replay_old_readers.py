"""Transcript readers: recorded agent sessions in four formats, streamed call by call.

``open_transcript(path, format)`` returns a :class:`Transcript`; iterating it yields one
:class:`RecordedCall` per tool call, in the order the agent made them. JSON Lines files
(``.jsonl``, ``.ndjson``) are read line by line, so memory does not grow with the file; a ``.json``
file is one JSON document and is parsed whole (a ``.json`` file that turns out to hold JSON Lines
is then read line by line).

A file that cannot be read at all raises :class:`ReaderError`; a single bad line or entry is
reported through ``on_problem`` and skipped, so one truncated line never costs the whole file.
"""

from __future__ import annotations

import io
import itertools
import json
import json.scanner
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final, NamedTuple, cast, final

from dsh_loop_brake.replay.errors import ReaderError

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "TRANSCRIPT_SUFFIXES",
    "RecordedCall",
    "Transcript",
    "open_transcript",
]

FORMATS: Final = ("auto", "jsonl", "openai", "anthropic", "claude-code")
"""The values of ``--format``; ``auto`` decides per file."""

TRANSCRIPT_SUFFIXES: Final = (".json", ".jsonl", ".ndjson")
"""The file name endings a directory search picks up (case-insensitive)."""

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""A JSON Lines line longer than this is reported and skipped without being held in memory."""

ProblemSink = Callable[[str], None]

_LINE_SUFFIXES: Final = (".jsonl", ".ndjson")
# Lines examined to tell a JSON Lines file's format, and bad lines reported per file in full.
_DETECT_LINES: Final = 64
_PROBLEMS_SHOWN: Final = 5
_SESSION_ID_KEYS: Final = ("id", "session_id", "task_id")
# Item types of the OpenAI Responses API that appear in a message list.
_RESPONSES_ITEMS: Final = ("function_call", "function_call_output", "message", "reasoning")
_CALL_HINT_KEYS: Final = ("args", "arguments", "session", "agent", "call_id")
# How auto-detected chat logs are read: OpenAI tool calls and Anthropic tool_use blocks both
# count, so a log whose first lines do not show which API wrote it loses no call.
_CHAT: Final = "chat"


class RecordedCall(NamedTuple):
    """One recorded tool call: its session (an index into ``Transcript.sessions``), tool, args."""

    session: int
    tool: str
    arguments: Any


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
    path: str | Path, format: str = "auto", *, on_problem: ProblemSink | None = None
) -> Transcript:
    """Open one transcript file; ``ReaderError`` when it cannot be read or is no transcript.

    ``format`` is one of :data:`FORMATS`. ``on_problem`` receives one line per skipped line or
    entry (``"<path>:<line>: <reason>"``); by default such problems are ignored.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown transcript format {format!r}; use one of {', '.join(FORMATS)}")
    shown = str(path)
    problems = _Problems(shown, on_problem)
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed when the calls are exhausted
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
# Opening: one JSON document, or JSON Lines


def _open(file: IO[bytes], path: Path, shown: str, format: str, problems: _Problems) -> Transcript:
    if path.suffix.lower() not in _LINE_SUFFIXES:
        data = file.read()
        document = _parse_document(data, shown)
        if document is not _JSON_LINES:
            file.close()
            return _from_document(document, path, shown, format, problems)
        if file.seekable():
            del data
            file.seek(0)  # read it again line by line: memory stays flat
        else:
            # A pipe (`replay /dev/stdin`, `<(zcat ...)`) cannot be rewound; it is already read.
            file.close()
            file = io.BytesIO(data)
    return _from_lines(file, path, shown, format, problems)


# The json module's scanner (its C implementation): json.loads without the per-call wrapping.
_SCAN: Final = cast(
    "Callable[[str, int], tuple[Any, int]]",
    json.scanner.make_scanner(json.JSONDecoder()),  # type: ignore[arg-type]
)
_new_call: Final = tuple.__new__  # RecordedCall(...) without the Python-level __new__: per call


class _JsonLines:
    """Marker: the document parser found JSON Lines, not one document."""


_JSON_LINES: Final = _JsonLines()


def _parse_document(data: bytes, shown: str) -> Any:
    if not data.strip():
        return []
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            return _JSON_LINES  # several JSON values, one per line: read it as JSON Lines
        raise ReaderError(
            shown, f"not JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None
    except UnicodeDecodeError:
        raise ReaderError(shown, "not JSON: the file is not UTF-8 text") from None
    except ValueError as error:
        raise ReaderError(shown, f"not JSON ({error})") from None
    except RecursionError:
        raise ReaderError(shown, "not a transcript: JSON nested too deeply") from None


def _from_document(
    document: Any, path: Path, shown: str, format: str, problems: _Problems
) -> Transcript:
    """A transcript from one parsed JSON document (a list, or one object)."""
    items: list[Any] = document if isinstance(document, list) else [document]
    if not isinstance(document, (list, dict)):
        raise ReaderError(shown, f"not a transcript: the file holds a JSON {_json_type(document)}")
    kind = _kind_of(items)
    label = format
    if format == "auto":
        if kind is None:
            if not items:
                return Transcript(shown, "jsonl", [], iter(()))
            raise ReaderError(
                shown, f"not a recognised transcript ({_describe(document)}); {_HINT}"
            )
        flavour = None
        if kind in ("messages", "sessions"):
            flavour = next(filter(None, (_flavour_of(kind, item) for item in items)), None)
        label = _format_for(kind, flavour)
        format = _CHAT if label in ("openai", "anthropic") else label
    elif (
        format in ("openai", "anthropic")
        and isinstance(document, dict)
        and kind not in ("sessions", "messages")
    ):
        raise ReaderError(
            shown,
            f"not a transcript in the {format} format: expected a list of messages, an object "
            f"with messages or a list of sessions, got {_describe(document)}",
        )
    sessions = _Sessions()
    records = ((f"item #{number}", item, None) for number, item in enumerate(items, 1))
    calls: Iterator[RecordedCall]
    if format == "jsonl":
        calls = _calls_from_records(records, path.name, sessions, problems)
    elif format == "claude-code":
        calls = _claude_calls(records, path.name, sessions, problems)
    elif isinstance(document, dict) or kind != "sessions":
        messages = _session_messages(document) if isinstance(document, dict) else document
        if messages is None:
            messages = items  # a single message object
        calls = _chat_session(messages, sessions.add(path.name), format, problems, "")
    else:
        calls = _chat_sessions(items, sessions, format, problems)
    return Transcript(shown, label, sessions.names, _finish(calls, None, shown, problems))


def _from_lines(
    file: IO[bytes], path: Path, shown: str, format: str, problems: _Problems
) -> Transcript:
    """A transcript read line by line; the first lines decide the format when asked to."""
    values = _json_values(file)
    peeked: list[_Line] = []  # every line read while deciding, bad ones too: read again below
    first: _Line | None = None  # the first line that is JSON
    kind: str | None = None
    flavour: str | None = None
    label = format
    for line in values:
        peeked.append(line)
        if line[2] is None:
            value = line[1]
            if first is None:
                first = line
            if format != "auto":
                break  # the format is given: the first JSON line shows the file is JSON Lines
            kind = kind or _kind(value)
            if kind in ("messages", "sessions"):
                flavour = flavour or _flavour_of(kind, value)
            if kind is not None and (kind not in ("messages", "sessions") or flavour):
                break
        if len(peeked) >= _DETECT_LINES:
            break
    if peeked and first is None:
        number, _, reason = peeked[0]
        raise ReaderError(
            shown, f"not JSON Lines: line {number} is {reason}, and so is every line read"
        )
    if format == "auto":
        if kind is None:
            if first is None:  # no line at all
                file.close()
                return Transcript(shown, "jsonl", [], iter(()))
            shape = _describe(first[1])
            raise ReaderError(
                shown, f"not a recognised transcript (its first lines are {shape}); {_HINT}"
            )
        label = _format_for(kind, flavour)
        format = _CHAT if label in ("openai", "anthropic") else label
    # The peeked lines, then the rest: chained in C, so no Python frame per line. Through a
    # list iterator, which lets go of the peeked lines once they are read (chaining the list
    # itself would hold up to 64 parsed lines until the end of the file).
    records = itertools.chain(iter(peeked), values)
    sessions = _Sessions()
    calls: Iterator[RecordedCall]
    if format == "jsonl":
        calls = _calls_from_records(records, path.name, sessions, problems)
    elif format == "claude-code":
        calls = _claude_calls(records, path.name, sessions, problems)
    else:
        calls = _chat_lines(records, path.name, sessions, format, problems)
    calls = _finish(calls, file, shown, problems)
    return Transcript(shown, label, sessions.names, calls, file=file)


# One line of a JSON Lines file: (line number, value, None), or (line number, None, reason) when
# the line is skipped. The format readers report the reasons, so bad lines come in line order.
_Line = tuple[int, Any, str | None]
# Read this much at a time; never more than MAX_LINE_BYTES, so no whole line in a block is over.
_BLOCK_BYTES: Final = 1 << 16


def _json_values(file: IO[bytes]) -> Iterator[_Line]:
    """One :data:`_Line` per nonblank line of ``file``.

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
        block = read(min(_BLOCK_BYTES, MAX_LINE_BYTES))
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


def _whole_text(data: bytes) -> str | None:
    """``data`` decoded, or None if it is not UTF-8 or holds a NUL (that would end a line)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def _unfinished_line(start: bytes, readline: Callable[[int], bytes], number: int) -> _Line | None:
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
            return number, None, f"longer than the line limit of {_size(MAX_LINE_BYTES)}"


def _raw_line(raw: bytes, number: int) -> _Line | None:
    """The :data:`_Line` for one line's bytes; None when it is blank."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return number, None, "not UTF-8 text"
    return _text_line(text, number)


def _text_line(text: str, number: int) -> _Line | None:
    """The :data:`_Line` for one line's text (its newline, if any, included); None if blank.

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


def _parse_line(text: str, number: int) -> _Line | None:
    """A line the C scanner did not take: None if blank, else what ``json.loads`` makes of it."""
    if number == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark
    if not text.strip():
        return None
    try:
        return number, json.loads(text), None
    except ValueError as error:
        return number, None, _json_error(error)
    except RecursionError:
        return number, None, "JSON nested too deeply"


def _finish(
    calls: Iterator[RecordedCall], file: IO[bytes] | None, shown: str, problems: _Problems
) -> Iterator[RecordedCall]:
    """Close the file and summarise the problems when the calls run out (or reading fails)."""
    try:
        yield from calls
    except _SinkFailed as failed:
        raise failed.error from None  # the caller's own error, not a file that cannot be read
    except OSError as error:
        raise ReaderError(shown, _os_reason(error)) from None
    finally:
        if file is not None:
            file.close()
        problems.finish()


# --------------------------------------------------------------------------------------------
# Telling the formats apart


_HINT: Final = "pass --format to say which format it is"


def _kind(value: Any) -> str | None:
    """What one JSON value looks like: calls, claude-code, sessions, messages, or None."""
    if type(value) is not dict:
        return None
    if isinstance(value.get("tool"), str):
        return "calls"
    if "sessionId" in value or "parentUuid" in value:
        return "claude-code"
    if "type" in value and ("uuid" in value or "leafUuid" in value or "messageId" in value):
        return "claude-code"
    if isinstance(value.get("messages"), list) or isinstance(value.get("traj"), list):
        return "sessions"
    if isinstance(value.get("role"), str) or value.get("type") in _RESPONSES_ITEMS:
        return "messages"
    if isinstance(value.get("name"), str) and any(key in value for key in _CALL_HINT_KEYS):
        return "calls"
    return None


def _kind_of(items: list[Any]) -> str | None:
    for item in items:
        kind = _kind(item)
        if kind is not None:
            return kind
    return None


def _format_for(kind: str, flavour: str | None) -> str:
    """The format name for a detected kind (chat logs default to ``openai``)."""
    if kind == "calls":
        return "jsonl"
    if kind == "claude-code":
        return "claude-code"
    return flavour or "openai"


def _flavour_of(kind: str, value: Any) -> str | None:
    """For a message (or a session's messages): ``openai``/``anthropic`` if it shows which."""
    messages = _session_messages(value) if kind == "sessions" else [value]
    for message in messages or ():
        flavour = _chat_flavour(message)
        if flavour is not None:
            return flavour
    return None


def _chat_flavour(message: Any) -> str | None:
    """``openai`` or ``anthropic`` when a message shows which API wrote it, else None."""
    if type(message) is not dict:
        return None
    if (
        "tool_calls" in message
        or "function_call" in message
        or message.get("role") == "tool"
        or message.get("type") in _RESPONSES_ITEMS
    ):
        return "openai"
    content = message.get("content")
    if type(content) is list:
        for block in content:
            if type(block) is dict and block.get("type") in ("tool_use", "tool_result"):
                return "anthropic"
    return None


# --------------------------------------------------------------------------------------------
# The formats


# What the format readers take: a line (:data:`_Line`), or ("item #N", item, None) per item of
# a JSON document.
_Record = tuple[int | str, Any, str | None]


@final
class _Sessions:
    """Session names in first-seen order, and the index of each session key."""

    __slots__ = ("index", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[object, int] = {}

    def add(self, name: str) -> int:
        self.names.append(name)
        return len(self.names) - 1

    def keyed(self, key: object, name: str) -> int:
        index = self.index.get(key)
        if index is None:
            index = self.index[key] = self.add(name)
        return index


def _calls_from_records(
    records: Iterable[_Record],
    file_name: str,
    sessions: _Sessions,
    problems: _Problems,
) -> Iterator[RecordedCall]:
    """``jsonl``: one call per record, ``{"tool"|"name", "args"|"arguments", "session"?, ...}``."""
    default: int | None = None
    known = sessions.index.get  # a session seen before: one dict look-up per call
    for where, record, reason in records:
        if type(record) is not dict:  # not an object, or a bad line (its value is None)
            problems.at(where, reason or f"not a call (a JSON {_json_type(record)}, not an object)")
            continue
        tool = record.get("tool")
        if tool is None:
            tool = record.get("name")
        if type(tool) is not str or not tool:
            problems.at(where, 'not a call (no "tool" or "name" string)')
            continue
        arguments = record["args"] if "args" in record else record.get("arguments", {})
        label = record.get("session")
        index = known(label) if type(label) is str else None
        if index is None:  # a new session, or no "session" string
            if label is None:
                label = record.get("agent")
                if type(label) is dict:
                    label = label.get("id")
            if label is None:
                if default is None:
                    default = sessions.keyed(None, file_name)
                index = default
            elif type(label) is str or type(label) is int:
                name = str(label)  # 7 and "7" are one session
                index = sessions.keyed(name, name)
            else:
                problems.at(
                    where, f"not a call (its session is a JSON {_json_type(label)}, not a string)"
                )
                continue
        yield _new_call(RecordedCall, (index, tool, arguments))


def _claude_calls(
    records: Iterable[_Record],
    file_name: str,
    sessions: _Sessions,
    problems: _Problems,
) -> Iterator[RecordedCall]:
    """``claude-code``: ``tool_use`` blocks of assistant entries, one call per ``tool_use`` id."""
    seen: list[set[str]] = []  # tool_use ids already counted, per session
    for where, entry, reason in records:
        if type(entry) is not dict:  # not an object, or a bad line (its value is None)
            problems.at(where, reason or f"not a Claude Code entry (a JSON {_json_type(entry)})")
            continue
        entry_type = entry.get("type")
        if entry_type != "assistant" and entry_type != "user":
            continue
        session_id = entry.get("sessionId")
        name = session_id if type(session_id) is str and session_id else file_name
        agent_id = entry.get("agentId")
        if entry.get("isSidechain") is True and type(agent_id) is str and agent_id:
            index = sessions.keyed((name, agent_id), f"{name}/{agent_id}")
        else:
            index = sessions.keyed((name, None), name)
        if index == len(seen):
            seen.append(set())
        if entry_type != "assistant":
            continue
        message = entry.get("message")
        content = message.get("content") if type(message) is dict else None
        if type(content) is not list:
            continue
        ids = seen[index]
        for block in content:
            if type(block) is not dict or block.get("type") != "tool_use":
                continue
            tool = block.get("name")
            if type(tool) is not str or not tool:
                problems.at(where, "a tool_use block without a name")
                continue
            block_id = block.get("id")
            if type(block_id) is str:
                if block_id in ids:
                    continue  # the same entry logged again: one call
                ids.add(block_id)
            yield _new_call(RecordedCall, (index, tool, block.get("input", {})))


def _chat_lines(
    records: Iterable[_Record],
    file_name: str,
    sessions: _Sessions,
    format: str,
    problems: _Problems,
) -> Iterator[RecordedCall]:
    """``openai``/``anthropic`` JSON Lines: one message per line (or one session per line)."""
    file_session: int | None = None
    number = 0
    for where, value, reason in records:
        if reason is not None:  # a bad line
            problems.at(where, reason)
            continue
        messages = _session_messages(value)
        if messages is not None:
            number += 1
            index = sessions.add(_session_name(value, number))
            yield from _chat_session(messages, index, format, problems, f"line {where}: ")
            continue
        if file_session is None:
            file_session = sessions.add(file_name)
        yield from _message_calls(value, file_session, format, problems, where)


def _chat_sessions(
    items: list[Any], sessions: _Sessions, format: str, problems: _Problems
) -> Iterator[RecordedCall]:
    """A list of sessions, each an object with ``messages`` or ``traj`` (tau-bench style)."""
    for number, item in enumerate(items, 1):
        messages = _session_messages(item)
        if messages is None:
            problems.at(f"session #{number}", "not an object with a messages or traj list")
            continue
        index = sessions.add(_session_name(item, number))
        yield from _chat_session(messages, index, format, problems, f"session #{number}, ")


def _chat_session(
    messages: list[Any], index: int, format: str, problems: _Problems, prefix: str
) -> Iterator[RecordedCall]:
    for number, message in enumerate(messages, 1):
        yield from _message_calls(message, index, format, problems, f"{prefix}message #{number}")


def _message_calls(
    message: Any, index: int, format: str, problems: _Problems, where: int | str
) -> Iterator[RecordedCall]:
    """The tool calls one chat message asks for, in order."""
    if type(message) is not dict:
        problems.at(where, f"not a message (a JSON {_json_type(message)})")
        return
    if format != "anthropic":
        tool_calls = message.get("tool_calls")
        if type(tool_calls) is list:
            for tool_call in tool_calls:
                function = tool_call.get("function") if type(tool_call) is dict else None
                call = _openai_function(function)
                if call is None:
                    problems.at(where, "a tool call without a function name")
                    continue
                yield _new_call(RecordedCall, (index, call[0], call[1]))
        legacy = message.get("function_call")
        if legacy is not None:
            call = _openai_function(legacy)
            if call is None:
                problems.at(where, "a function_call without a name")
            else:
                yield _new_call(RecordedCall, (index, call[0], call[1]))
        if message.get("type") == "function_call":
            call = _openai_function(message)
            if call is not None:
                yield _new_call(RecordedCall, (index, call[0], call[1]))
    if format != "openai":
        content = message.get("content")
        if type(content) is list:
            for block in content:
                if type(block) is not dict or block.get("type") != "tool_use":
                    continue
                tool = block.get("name")
                if type(tool) is not str or not tool:
                    problems.at(where, "a tool_use block without a name")
                    continue
                yield _new_call(RecordedCall, (index, tool, block.get("input", {})))


def _openai_function(function: Any) -> tuple[str, Any] | None:
    """(name, arguments) of ``{"name", "arguments"}``; arguments decoded when they are JSON."""
    if type(function) is not dict:
        return None
    name = function.get("name")
    if type(name) is not str or not name:
        return None
    arguments = function.get("arguments")
    if arguments is None:
        return name, {}
    if type(arguments) is str:
        try:
            return name, _loads(arguments)
        except (ValueError, RecursionError):
            return name, arguments  # not JSON: the raw text is still the call's identity
    return name, arguments


def _loads(text: str) -> Any:
    """``json.loads(text)``, by the C scanner alone when it takes the whole text (usually)."""
    try:
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, RecursionError):
        pass
    return json.loads(text)  # whitespace around the value, or not JSON: it decides and says why


def _session_messages(value: Any) -> list[Any] | None:
    if type(value) is not dict:
        return None
    messages = value.get("messages")
    if type(messages) is list:
        return messages
    traj = value.get("traj")
    return traj if type(traj) is list else None


def _session_name(value: dict[str, Any], number: int) -> str:
    for key in _SESSION_ID_KEYS:
        label = value.get(key)
        if (type(label) is str and label) or type(label) is int:
            return str(label)
    return f"#{number}"


# --------------------------------------------------------------------------------------------
# Problems and descriptions


@final
class _SinkFailed(Exception):
    """An ``OSError`` the problem callback raised, carried past the reader's own file errors."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


@final
class _Problems:
    """Reports skipped lines and entries: the first few in full, then a count."""

    __slots__ = ("hidden", "path", "shown", "sink")

    def __init__(self, path: str, sink: ProblemSink | None) -> None:
        self.path = path
        self.sink = sink
        self.shown = 0
        self.hidden = 0

    def at(self, where: int | str, reason: str) -> None:
        if self.sink is None:
            return
        if self.shown >= _PROBLEMS_SHOWN:
            self.hidden += 1
            return
        self.shown += 1
        separator = ":" if isinstance(where, int) else ": "
        try:
            self.sink(f"{self.path}{separator}{where}: {reason}; skipped")
        except OSError as error:
            raise _SinkFailed(error) from None

    def finish(self) -> None:
        if self.sink is not None and self.hidden:
            plural = "s" if self.hidden != 1 else ""
            self.sink(f"{self.path}: {self.hidden} more problem{plural} like these; skipped")
            self.hidden = 0


def _json_error(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON ({error.msg} at column {error.colno})"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    return "not JSON"


def _json_type(value: Any) -> str:
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


def _describe(value: Any) -> str:
    """A short description of a JSON value's shape, never its contents beyond a few key names."""
    if isinstance(value, dict):
        keys = [json.dumps(str(key)[:40]) for key in list(value)[:6]]
        more = ", ..." if len(value) > 6 else ""
        return f"an object with keys {', '.join(keys)}{more}" if keys else "an empty object"
    if isinstance(value, list):
        if not value:
            return "an empty array"
        return f"an array of {_json_type(value[0])}s"
    return f"a JSON {_json_type(value)}"


def _size(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"


def _os_reason(error: OSError) -> str:
    reason = error.strerror or type(error).__name__
    return f"cannot read the file ({reason[0].lower()}{reason[1:]})"
