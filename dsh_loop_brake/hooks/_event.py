"""Reading the host's pre-tool-use event from standard input, and checking its shape.

The three hosts send one JSON object per call. The fields the hook reads:

- ``hook_event_name``: ``PreToolUse`` (Claude Code, Codex CLI) or ``BeforeTool`` (gemini-cli);
  an event of another kind (a hook installed on ``PostToolUse`` by hand) is refused, because
  counting it would count every call a second time;
- ``session_id``: the host's session; ``agent_id`` (Claude Code and Codex CLI, only in an event
  from a subagent) makes the session ``session_id/agent_id``, so a subagent never shares a
  streak with its parent;
- ``tool_name`` and ``tool_input``: the call.

Every other field (``cwd``, ``transcript_path``, ``tool_use_id``, ``timestamp``...) is ignored.
Messages name fields and JSON types, never a value: ``tool_input`` is where secrets are.
"""

from __future__ import annotations

import json

from dsh_loop_brake.hooks._errors import HookError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

    from dsh_loop_brake.hooks._hosts import Host

__all__ = ["MAX_EVENT_BYTES", "MAX_ID_LENGTH", "ToolCallEvent", "parse_event", "read_event"]

#: The most standard input the hook reads: a larger event is refused, not read on.
MAX_EVENT_BYTES = 16 * 1024 * 1024

#: The longest ``session_id``, ``agent_id`` or ``tool_name`` accepted (real ones are < 100).
MAX_ID_LENGTH = 1024


class ToolCallEvent:
    """The call an event announces, the session whose streak it counts in, and the event's size
    in bytes."""

    __slots__ = ("session", "size", "tool_input", "tool_name")

    def __init__(
        self, session: str, tool_name: str, tool_input: dict[str, object], size: int
    ) -> None:
        self.session = session
        self.tool_name = tool_name
        self.tool_input = tool_input
        self.size = size

    def __repr__(self) -> str:  # never the input: it is where paths and secrets are
        return f"ToolCallEvent(session={self.session!r}, tool_name={self.tool_name!r})"


def read_event(stream: BinaryIO, host: Host) -> ToolCallEvent:
    """Read at most 16 MiB from ``stream`` and parse it as ``host``'s pre-tool-use event."""
    data = stream.read(MAX_EVENT_BYTES + 1)
    if len(data) > MAX_EVENT_BYTES:
        raise HookError(
            f"standard input holds more than {MAX_EVENT_BYTES // (1024 * 1024)} MiB, which is "
            f"not a {host.title} {host.event} event; nothing was counted"
        )
    return parse_event(data, host)


def parse_event(data: bytes, host: Host) -> ToolCallEvent:
    """Parse one event; a :class:`HookError` says what is wrong with it (never its content)."""
    expected = f"one JSON object, the {host.title} {host.event} event"
    if not data.strip():
        raise HookError(f"standard input is empty; the hook reads {expected}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HookError(
            f"standard input is not UTF-8 (an invalid byte at offset {exc.start}); "
            f"the hook reads {expected}"
        ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookError(
            f"standard input is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"the hook reads {expected}"
        ) from None
    except RecursionError:
        raise HookError(
            f"standard input is JSON nested too deeply to read; the hook reads {expected}"
        ) from None
    except ValueError:  # e.g. an integer of more digits than Python converts
        raise HookError(
            f"standard input holds JSON the hook cannot read (a number too long to convert); "
            f"the hook reads {expected}"
        ) from None
    if not isinstance(value, dict):
        raise HookError(f"standard input is a JSON {_kind(value)}; the hook reads {expected}")
    event = value.get("hook_event_name")
    if event != host.event:
        if event is None:
            problem = "has no hook_event_name"
        elif isinstance(event, str):
            shown = json.dumps(event[:64])  # one short, escaped line
            problem = f"is a {shown} event"
        else:
            problem = f"has a hook_event_name that is a JSON {_kind(event)}"
        raise HookError(
            f"the event on standard input {problem}, not {host.event}: this hook counts "
            f"{host.title}'s {host.event} events only (install it with "
            f"`dsh-loop-brake hook install {host.name}`); nothing was counted"
        )
    session = _identifier(value, "session_id", host, required=True)
    agent = _identifier(value, "agent_id", host, required=False)
    tool_name = _identifier(value, "tool_name", host, required=True)
    tool_input = value.get("tool_input")
    if not isinstance(tool_input, dict):
        got = "no tool_input" if "tool_input" not in value else f"a {_kind(tool_input)}"
        raise HookError(
            f"the {host.event} event on standard input has {got} where tool_input should be "
            "a JSON object; nothing was counted"
        )
    assert session is not None and tool_name is not None  # required above
    if agent is not None:
        session = f"{session}/{agent}"
    return ToolCallEvent(session, tool_name, tool_input, len(data))


def _identifier(event: dict[str, object], field: str, host: Host, *, required: bool) -> str | None:
    value = event.get(field)
    if value is None and not required:
        return None
    if isinstance(value, str) and value and len(value) <= MAX_ID_LENGTH and _is_unicode(value):
        return value
    if value is None:
        problem = f"has no {field}"
    elif not isinstance(value, str):
        problem = f"has a {field} that is a JSON {_kind(value)}, not a string"
    elif not value:
        problem = f"has an empty {field}"
    elif len(value) > MAX_ID_LENGTH:
        problem = f"has a {field} of {len(value)} characters (at most {MAX_ID_LENGTH})"
    else:
        problem = f"has a {field} that is not valid Unicode (an unpaired surrogate)"
    raise HookError(f"the {host.event} event on standard input {problem}; nothing was counted")


def _is_unicode(text: str) -> bool:
    # A JSON \\ud800 escape gives an unpaired surrogate, which no file or database can store.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
