"""Reading a host's execution input: fields by key or by attribute, and the session of a call.

Also the one warning a call that could not be read gets: it runs without the brake (fail open),
and the ``dsh_loop_brake`` logger says so once per tool, naming types only, never a value.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

# typing is imported by type checkers only (why, and what it costs: dsh_loop_brake._no_typing).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "MAPPING_TYPES",
    "OBJECT_TYPES",
    "agent_session",
    "execution_session",
    "read_field",
    "session_key",
    "session_of",
    "warn_fail_open",
]


def session_key(session_id: str | None = None, execution: object = None) -> str:
    """The explicit session id, else the calling agent's id from the execution, else "default"."""
    if session_id is not None:
        return session_id
    return agent_session(read_field(execution, "agent"))


def agent_session(agent: object) -> str:
    """The agent's id as a session key, or "default" for no agent or an empty id."""
    if agent is None:
        return "default"
    # read_field's usual case in place: this runs on every call's path.
    kind = type(agent)
    agent_id = getattr(agent, "id", None) if kind in OBJECT_TYPES else read_field(agent, "id")
    if type(agent_id) is str and agent_id:
        return agent_id  # the usual id, a plain string: no conversion
    return session_of(agent_id)


def execution_session(execution: object) -> str | None:
    """The agent's id in an execution as a session key, or ``None`` when it names no agent.

    ``None`` is the brake's "current session" (``brake.session(...)``, else ``"default"``).
    """
    # read_field's usual case in place: this runs on every braked call's path.
    kind = type(execution)
    agent = (
        getattr(execution, "agent", None)
        if kind in OBJECT_TYPES
        else read_field(execution, "agent")
    )
    if agent is None:
        return None
    kind = type(agent)
    agent_id = getattr(agent, "id", None) if kind in OBJECT_TYPES else read_field(agent, "id")
    if type(agent_id) is str:
        return agent_id or None  # the usual id, a plain string: no conversion
    if agent_id is None or agent_id == "":
        return None
    return str(agent_id)


def session_of(agent_id: object) -> str:
    """An agent id already read, as a session key: ``str()`` of it, or "default" if none."""
    if type(agent_id) is str:
        return agent_id or "default"
    if agent_id is not None and agent_id != "":
        return str(agent_id)
    return "default"


def read_field(source: Any, name: str) -> Any:
    """``source[name]`` when ``source`` is a mapping, else ``source.name``; ``None`` if absent."""
    kind = type(source)
    if kind in OBJECT_TYPES:
        return getattr(source, name, None)
    if kind is dict or kind in MAPPING_TYPES or _learn_is_mapping(source):
        return source.get(name)
    return getattr(source, name, None)


def _learn_is_mapping(source: object) -> bool:
    # An isinstance check against the Mapping ABC costs more than the rest of a field read, and
    # fields are read several times before every tool call; the type alone decides, so it is
    # asked once per type (and remembered for a bounded number of types, so hostile types
    # cannot grow the sets).
    is_mapping = isinstance(source, Mapping)
    known = MAPPING_TYPES if is_mapping else OBJECT_TYPES
    if len(known) < 256:
        known.add(type(source))
    return is_mapping


MAPPING_TYPES: set[type] = {dict}
OBJECT_TYPES: set[type] = {type(None)}
"""Types known to be read by key (mappings) and by attribute (everything else)."""


def warn_fail_open(tool: object, error: BaseException, reading: str) -> None:
    """Say once per tool that a call of ``tool`` ran unbraked because ``reading`` raised ``error``.

    ``tool`` is the tool's name, or ``None`` when even that could not be read. Names only the
    tool and the exception's type: a value read from a call could be a secret.
    """
    # Imported here: a coding-agent hook is a new process per call, and most never warn.
    from dsh_loop_brake._short_repr import json_literal

    shown = json_literal(tool) if isinstance(tool, str) else "of unknown name"
    with _warned_lock:
        if shown in _warned or len(_warned) >= _WARNED_LIMIT:
            return
        _warned.add(shown)
    import logging

    logging.getLogger("dsh_loop_brake").warning(
        "loop brake: a call of tool %s ran without the brake: %s raised %s",
        shown,
        reading,
        type(error).__name__,
    )


# Tools warned about; bounded so that hostile names cannot grow it.
_WARNED_LIMIT: Final = 1024
_warned: set[str] = set()
_warned_lock = threading.Lock()
