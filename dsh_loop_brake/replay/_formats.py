"""The format readers: a transcript's records in, its tool calls out, in recorded order.

A record is one line of a JSON Lines file (``(line number, value, None)``, or ``(line number,
None, reason)`` for a line that is not JSON) or one item of a JSON document (``("message #3",
item, None)``). Every reader takes the records and a :class:`Reading` (where the session names
go, where problems are reported, how a chat log is laid out) and yields one
:class:`RecordedCall` per tool call.

The formats: ``jsonl`` (:func:`read_calls`), ``claude-code`` (:func:`read_claude_code`), and
chat logs (:func:`read_chat`), whose messages carry OpenAI ``tool_calls`` or Anthropic
``tool_use`` blocks or both, and logs of OpenAI API responses (Chat Completions and the
Responses API), each file one session.

A reader that finds no entry of its format in the whole file (a plain JSON Lines file of calls
read as Claude Code, an Anthropic conversation read as OpenAI) raises :class:`NoEntry` at the
end, so a file it did not understand is never a silent "0 calls".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple, final

from dsh_loop_brake.replay._detect import (
    ANTHROPIC,
    CLAUDE_CODE,
    MESSAGES,
    OPENAI,
    SESSIONS,
    api_response,
    chat_format,
    entry_of,
    is_message,
    session_messages,
)
from dsh_loop_brake.replay._jsonlines import loads
from dsh_loop_brake.replay._problems import Problems, json_type

__all__ = [
    "RECENT_TOOL_USE_IDS",
    "NoEntry",
    "Reading",
    "Record",
    "RecordedCall",
    "Sessions",
    "read_calls",
    "read_chat",
    "read_claude_code",
]

_SESSION_ID_KEYS: Final = ("id", "session_id", "task_id")

RECENT_TOOL_USE_IDS: Final = 1024
"""How many of a Claude Code session's latest ``tool_use`` ids are remembered (at least).

Claude Code logs an entry again right after itself (or a few entries later), never far away,
so a window of recent ids finds every duplicate while memory stays flat however long the
session runs (every id, remembered, would cost 150 bytes or so a call).
"""

Record = tuple["int | str", Any, "str | None"]
"""(where, value, None), or (where, None, reason) for a line that is skipped."""


class RecordedCall(NamedTuple):
    """One recorded tool call: its session (an index into ``Transcript.sessions``), tool, args."""

    session: int
    tool: str
    arguments: Any


_new_call: Final = tuple.__new__  # RecordedCall(...) without the Python-level __new__: per call


@final
class NoEntry(Exception):
    """The whole file held no entry of the format it was read as."""


@final
class Sessions:
    """Session names in first-seen order, and the index of each session key."""

    __slots__ = ("index", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[object, int] = {}

    def add(self, name: str) -> int:
        """A new session (a name may repeat: two runs of one task are two sessions)."""
        self.names.append(name)
        return len(self.names) - 1

    def keyed(self, key: object, name: str) -> int:
        """The session of ``key``, added under ``name`` the first time the key is seen."""
        index = self.index.get(key)
        if index is None:
            index = self.index[key] = self.add(name)
        return index


@final
class Reading:
    """What a format reader is given besides the records.

    ``file_name`` names the file's own session (a session that nothing else names);
    ``layout`` says how a chat log is laid out: ``lines`` (JSON Lines: each record a message,
    a session or an API response), ``messages`` (a document whose records are the file's
    messages or API responses) or ``sessions`` (a document whose records are sessions).
    """

    __slots__ = ("file_name", "layout", "problems", "sessions")

    def __init__(self, file_name: str, problems: Problems, layout: str = "lines") -> None:
        self.file_name = file_name
        self.problems = problems
        self.layout = layout
        self.sessions = Sessions()


# --------------------------------------------------------------------------------------------
# jsonl: one call per record


def read_calls(records: Iterable[Record], reading: Reading) -> Iterator[RecordedCall]:
    """``jsonl``: one call per record, ``{"tool"|"name", "args"|"arguments", "session"?, ...}``."""
    sessions = reading.sessions
    problems = reading.problems
    default: int | None = None
    known = sessions.index.get  # a session seen before: one dict look-up per call
    for where, record, reason in records:
        if type(record) is not dict:  # not an object, or a bad line (its value is None)
            problems.at(where, reason or f"not a call (a JSON {json_type(record)}, not an object)")
            continue
        tool = record.get("tool")
        if tool is None:
            tool = record.get("name")
        if type(tool) is not str or not tool:
            problems.at(where, 'not a call (no "tool" or "name" string)')
            continue
        arguments = record["args"] if "args" in record else record.get("arguments", {})
        name = record.get("session")
        index = known(name) if type(name) is str else None
        if index is None:  # a new session, or no "session" string
            if name is None:
                name = record.get("agent")
                if type(name) is dict:
                    name = name.get("id")
            if name is None:
                if default is None:
                    default = sessions.keyed(None, reading.file_name)
                index = default
            elif type(name) is str or type(name) is int:
                shown = str(name)  # 7 and "7" are one session
                index = sessions.keyed(shown, shown)
            else:
                problems.at(
                    where, f"not a call (its session is a JSON {json_type(name)}, not a string)"
                )
                continue
        yield _new_call(RecordedCall, (index, tool, arguments))
    if not sessions.names:  # a session is made for a call only
        raise NoEntry


# --------------------------------------------------------------------------------------------
# claude-code: the tool_use blocks of assistant entries


def read_claude_code(records: Iterable[Record], reading: Reading) -> Iterator[RecordedCall]:
    """``claude-code``: ``tool_use`` blocks of assistant entries, one call per ``tool_use`` id."""
    sessions = reading.sessions
    problems = reading.problems
    seen: list[_RecentIds] = []  # tool_use ids already counted, per session
    other_entries = False  # a Claude Code entry of another type (a summary): not a session
    for where, entry, reason in records:
        if type(entry) is not dict:  # not an object, or a bad line (its value is None)
            problems.at(where, reason or f"not a Claude Code entry (a JSON {json_type(entry)})")
            continue
        entry_type = entry.get("type")
        if entry_type != "assistant" and entry_type != "user":
            if not other_entries:
                other_entries = entry_of(entry) == CLAUDE_CODE
            continue
        session_id = entry.get("sessionId")
        name = session_id if type(session_id) is str and session_id else reading.file_name
        agent_id = entry.get("agentId")
        if entry.get("isSidechain") is True and type(agent_id) is str and agent_id:
            index = sessions.keyed((name, agent_id), f"{name}/{agent_id}")
        else:
            index = sessions.keyed((name, None), name)
        if index == len(seen):
            seen.append(_RecentIds())
        if entry_type != "assistant":
            continue
        message = entry.get("message")
        content = message.get("content") if type(message) is dict else None
        if type(content) is not list:
            continue
        ids = seen[index]
        for tool, arguments, block_id in tool_uses(content, where, problems):
            if type(block_id) is str and not ids.first_time(block_id):
                continue  # the same entry logged again: one call
            yield _new_call(RecordedCall, (index, tool, arguments))
    if not sessions.names and not other_entries:
        raise NoEntry


@final
class _RecentIds:
    """A session's latest :data:`RECENT_TOOL_USE_IDS` ids at least, and twice that at most.

    Two generations: ids go into the current set; when it is full it becomes the previous one
    and the one before is let go. No per-id bookkeeping of age, and no id is forgotten before
    :data:`RECENT_TOOL_USE_IDS` newer ones have been seen.
    """

    __slots__ = ("current", "previous")

    def __init__(self) -> None:
        self.current: set[str] = set()
        self.previous: set[str] = set()

    def first_time(self, tool_use_id: str) -> bool:
        """Whether the id is new (it is remembered from now on), not one seen recently."""
        current = self.current
        if tool_use_id in current or tool_use_id in self.previous:
            return False
        if len(current) >= RECENT_TOOL_USE_IDS:
            self.previous = current
            self.current = current = set()
        current.add(tool_use_id)
        return True


def tool_uses(
    content: list[Any], where: int | str, problems: Problems
) -> Iterator[tuple[str, Any, Any]]:
    """(name, input, id) of each ``tool_use`` block of an Anthropic message's ``content``."""
    for block in content:
        if type(block) is not dict or block.get("type") != "tool_use":
            continue
        tool = block.get("name")
        if type(tool) is not str or not tool:
            problems.at(where, "a tool_use block without a name")
            continue
        yield tool, block.get("input", {}), block.get("id")


# --------------------------------------------------------------------------------------------
# Chat logs: OpenAI tool calls, Anthropic tool_use blocks


def read_chat(
    records: Iterable[Record], reading: Reading, *, openai: bool, anthropic: bool
) -> Iterator[RecordedCall]:
    """Chat logs: the tool calls of every message, OpenAI's and/or Anthropic's."""
    chat = _Chat(openai, anthropic)
    if reading.layout == SESSIONS:
        yield from _chat_sessions(records, reading, chat)
    elif reading.layout == MESSAGES:
        index = reading.sessions.add(reading.file_name)
        yield from _chat_messages(records, index, reading.problems, chat)
    else:
        yield from _chat_lines(records, reading, chat)
    if not chat.has_entries:
        raise NoEntry


@final
class _Chat:
    """Which APIs' tool calls a chat reader reads, and what its messages have shown so far.

    A file is a chat log of the format asked for when a message shows that API's marks (see
    :func:`chat_format`), or when its messages show no API at all (a chat without tool calls);
    one whose messages show only the other API's marks is not.
    """

    __slots__ = ("anthropic", "neutral", "openai", "other", "shown")

    def __init__(self, openai: bool, anthropic: bool) -> None:
        self.openai = openai
        self.anthropic = anthropic
        self.shown = False  # a message showed an API this reader reads
        self.neutral = False  # a message that shows no API
        self.other = False  # a message that showed the API this reader does not read

    def see(self, message: Any) -> None:
        """Take note of what one message (or API response) shows, until one shows what is read."""
        api = chat_format(message)
        if api is None:
            if is_message(message):
                self.neutral = True
        elif (self.openai and api == OPENAI) or (self.anthropic and api == ANTHROPIC):
            self.shown = True
        else:
            self.other = True

    @property
    def has_entries(self) -> bool:
        """Whether the messages seen are of this reader's format."""
        return self.shown or (self.neutral and not self.other)


def _chat_lines(records: Iterable[Record], reading: Reading, chat: _Chat) -> Iterator[RecordedCall]:
    """JSON Lines: one message per line (the file's session), or one session per line."""
    sessions = reading.sessions
    problems = reading.problems
    file_session: int | None = None
    number = 0
    for where, value, reason in records:
        if reason is not None:  # a bad line
            problems.at(where, reason)
            continue
        response = api_response(value)
        if response is not None:  # a response (a logged request's: its request is history)
            if file_session is None:
                file_session = sessions.add(reading.file_name)
            yield from _response_calls(response, file_session, problems, where, chat)
            continue
        messages = session_messages(value)
        if messages is not None:
            number += 1
            index = sessions.add(_session_name(value, number))
            yield from _session_calls(messages, index, problems, chat, f"line {where}: ")
            continue
        if file_session is None:
            file_session = sessions.add(reading.file_name)
        yield from _message_calls(value, file_session, problems, where, chat)


def _chat_sessions(
    records: Iterable[Record], reading: Reading, chat: _Chat
) -> Iterator[RecordedCall]:
    """A list of sessions, each an object with ``messages`` or ``traj`` (tau-bench style)."""
    sessions = reading.sessions
    problems = reading.problems
    file_session: int | None = None
    for number, (where, item, _) in enumerate(records, 1):
        response = api_response(item)
        if response is not None:
            if file_session is None:
                file_session = sessions.add(reading.file_name)
            yield from _response_calls(response, file_session, problems, where, chat)
            continue
        messages = session_messages(item)
        if messages is None:
            problems.at(where, "not an object with a messages or traj list")
            continue
        index = sessions.add(_session_name(item, number))
        yield from _session_calls(messages, index, problems, chat, f"{where}, ")


def _chat_messages(
    records: Iterable[Record], index: int, problems: Problems, chat: _Chat
) -> Iterator[RecordedCall]:
    """A document's messages (or API responses), all of them the file's session."""
    for where, message, _ in records:
        response = api_response(message)
        if response is not None:
            yield from _response_calls(response, index, problems, where, chat)
        else:
            yield from _message_calls(message, index, problems, where, chat)


def _response_calls(
    response: dict[str, Any], index: int, problems: Problems, where: int | str, chat: _Chat
) -> Iterator[RecordedCall]:
    """The tool calls of one OpenAI API response: its first choice's, or its output's."""
    if not chat.shown:
        chat.see(response)
    if not chat.openai:
        return
    if response.get("object") == "response":  # the Responses API: function_call output items
        output = response.get("output")
        for item in output if type(output) is list else ():
            if type(item) is dict and item.get("type") == "function_call":
                call = _openai_function(item)
                if call is None:
                    problems.at(where, "a function_call without a name")
                    continue
                yield _new_call(RecordedCall, (index, call[0], call[1]))
        return
    # Chat Completions: the assistant message of the first choice (the others were not taken).
    choices = response.get("choices")
    choice = choices[0] if type(choices) is list and choices else None
    message = choice.get("message") if type(choice) is dict else None
    if type(message) is dict:
        yield from _message_calls(message, index, problems, where, chat)


def _session_calls(
    messages: list[Any], index: int, problems: Problems, chat: _Chat, prefix: str
) -> Iterator[RecordedCall]:
    """The messages of one session object, labelled ``message #N`` after ``prefix``."""
    for number, message in enumerate(messages, 1):
        yield from _message_calls(message, index, problems, f"{prefix}message #{number}", chat)


def _message_calls(
    message: Any, index: int, problems: Problems, where: int | str, chat: _Chat
) -> Iterator[RecordedCall]:
    """The tool calls one chat message asks for, in order."""
    if not chat.shown:
        chat.see(message)
    if type(message) is not dict:
        problems.at(where, f"not a message (a JSON {json_type(message)})")
        return
    if chat.openai:
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
        if message.get("type") == "function_call":  # a Responses API item
            call = _openai_function(message)
            if call is not None:
                yield _new_call(RecordedCall, (index, call[0], call[1]))
    if chat.anthropic:
        content = message.get("content")
        if type(content) is list:
            for tool, arguments, _ in tool_uses(content, where, problems):
                yield _new_call(RecordedCall, (index, tool, arguments))


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
            return name, loads(arguments)
        except (ValueError, RecursionError):
            return name, arguments  # not JSON: the raw text is still the call's identity
    return name, arguments


def _session_name(value: dict[str, Any], number: int) -> str:
    for key in _SESSION_ID_KEYS:
        name = value.get(key)
        if (type(name) is str and name) or type(name) is int:
            return str(name)
    return f"#{number}"
