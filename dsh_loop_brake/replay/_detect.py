"""Telling the transcript formats apart from a file's first JSON values.

Each value is looked at on its own (:func:`entry_of`): a call of the ``jsonl`` format, a Claude
Code entry, or an entry of a chat log — an OpenAI API response (perhaps inside the record of a
logged request), a session (an object with a ``messages``/``traj`` list) or a message. A chat
log does not always show on its first line which API wrote it (a user message looks the same
in both), so :class:`Detector` looks on through the values for one that does; a chat log that
never shows it is read as ``openai`` (both APIs' tool calls are read).
"""

from __future__ import annotations

from typing import Any, Final, final

__all__ = [
    "ANTHROPIC",
    "API_RESPONSE_OBJECTS",
    "CLAUDE_CODE",
    "JSONL",
    "MESSAGES",
    "OPENAI",
    "RESPONSES",
    "RESPONSES_ITEMS",
    "SESSIONS",
    "Detector",
    "api_response",
    "chat_format",
    "entry_of",
    "is_message",
    "session_messages",
]

JSONL: Final = "jsonl"
CLAUDE_CODE: Final = "claude-code"
OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"

# The entries of a chat log: API responses, sessions (each with its messages), or messages.
RESPONSES: Final = "responses"
SESSIONS: Final = "sessions"
MESSAGES: Final = "messages"

API_RESPONSE_OBJECTS: Final = ("chat.completion", "response")
"""The ``object`` of an OpenAI Chat Completions response and of a Responses API response."""

# Where a logged request's record keeps the response: {"request", "response"} (and LiteLLM's
# payload, whose "messages" are the request's), {"input", "output"} (OpenPipe's export),
# {"custom_id", "response": {"status_code", "body"}} (the Batch API's output), "response_body".
_RESPONSE_KEYS: Final = ("response", "output", "body", "response_body")
_RESPONSE_DEPTH: Final = 3

RESPONSES_ITEMS: Final = ("function_call", "function_call_output", "message", "reasoning")
"""Item types of the OpenAI Responses API that appear in a message list."""

_CALL_HINT_KEYS: Final = ("args", "arguments", "session", "agent", "call_id")


def entry_of(value: Any) -> str | None:
    """What one JSON value is: a call (JSONL), a Claude Code entry, a chat session or message."""
    if type(value) is not dict:
        return None
    if isinstance(value.get("tool"), str):
        return JSONL
    if "sessionId" in value or "parentUuid" in value:
        return CLAUDE_CODE
    if "type" in value and ("uuid" in value or "leafUuid" in value or "messageId" in value):
        return CLAUDE_CODE
    if api_response(value) is not None:
        return RESPONSES
    if isinstance(value.get("messages"), list) or isinstance(value.get("traj"), list):
        return SESSIONS
    if is_message(value):
        return MESSAGES
    if isinstance(value.get("name"), str) and any(key in value for key in _CALL_HINT_KEYS):
        return JSONL
    return None


def api_response(value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The OpenAI API response a value is, or holds as a logged request's response; else None.

    Only the response side of a record is looked into: a request repeats the conversation so
    far, whose calls were made (and logged) before.
    """
    if type(value) is not dict:
        return None
    if value.get("object") in API_RESPONSE_OBJECTS:
        return value
    if depth < _RESPONSE_DEPTH:
        for key in _RESPONSE_KEYS:
            inner = value.get(key)
            if type(inner) is dict:
                found = api_response(inner, depth + 1)
                if found is not None:
                    return found
    return None


def is_message(value: dict[str, Any] | Any) -> bool:
    """Whether a value is a chat message: an object with a ``role``, or a Responses API item."""
    return type(value) is dict and (
        isinstance(value.get("role"), str) or value.get("type") in RESPONSES_ITEMS
    )


def chat_format(message: Any) -> str | None:
    """``openai`` or ``anthropic`` when a chat message shows which API wrote it, else None."""
    if type(message) is not dict:
        return None
    if (
        "tool_calls" in message
        or "function_call" in message
        or message.get("role") == "tool"
        or message.get("type") in RESPONSES_ITEMS
    ):
        return OPENAI
    content = message.get("content")
    if type(content) is list:
        for block in content:
            if type(block) is dict and block.get("type") in ("tool_use", "tool_result"):
                return ANTHROPIC
    return OPENAI if api_response(message) is not None else None


def session_messages(value: Any) -> list[Any] | None:
    """A chat session's messages (its ``messages`` list, else its ``traj`` list), or None."""
    if type(value) is not dict:
        return None
    messages = value.get("messages")
    if type(messages) is list:
        return messages
    traj = value.get("traj")
    return traj if type(traj) is list else None


@final
class Detector:
    """Shown values one by one, decides the format of the file they come from.

    The first value that is an entry of some format decides it, except that a chat log is
    then looked through (its values read the way its first entry is laid out) for a message
    that shows which API wrote it.
    """

    __slots__ = ("_chat", "decided", "first")

    def __init__(self) -> None:
        self.first: str | None = None  # what the first entry is (see entry_of)
        self._chat: str | None = None  # the API a chat log's messages show, once one does
        self.decided = False

    def see(self, value: Any) -> bool:
        """Look at one more value; True once the format is decided."""
        if self.first is None:
            self.first = entry_of(value)
        first = self.first
        if first is None:
            return False
        if first in (SESSIONS, MESSAGES) and self._chat is None:
            messages = session_messages(value) if first == SESSIONS else [value]
            self._chat = next(filter(None, map(chat_format, messages or ())), None)
            if self._chat is None:
                return False
        self.decided = True
        return True

    @property
    def format(self) -> str | None:
        """The format decided so far (a chat log that shows no API: ``openai``), or None."""
        first = self.first
        if first in (SESSIONS, MESSAGES):
            return self._chat or OPENAI
        return OPENAI if first == RESPONSES else first
