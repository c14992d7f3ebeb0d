"""The circuit breaker's incident log: one JSON line per first denial, appended, never followed
through a symbolic link, and never a reason to change a verdict."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Mapping

from dsh_loop_brake._short_repr import json_literal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from typing import Final, final
else:
    from dsh_loop_brake._no_typing import final


__all__ = ["IncidentLog", "agent_keys"]

_MAX_AGENT_KEYS: Final = 64

# Append-only, created owner-only, never blocking and never through a link. O_NONBLOCK because
# opening a named pipe for writing would otherwise wait for a reader, holding up the tool call (on
# a regular file it changes nothing). O_NOFOLLOW because a link planted at the path in a shared
# directory would otherwise make the guard append to whatever file it points to; the kernel
# refuses it atomically, with no window between a check and the open.
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_FLAGS: Final = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | _NOFOLLOW
)


@final
class IncidentLog:
    """An append-only JSON Lines file at ``path``; a failure to write is warned about once."""

    __slots__ = ("_lock", "_warned", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._warned = False

    def record(
        self, *, kind: str, tool: str, count: int, limit: int, agent_id: str | None, agent: object
    ) -> None:
        """Append one incident line. ``agent_id`` is the agent's id; when the agent has none
        (and is not ``None``), its attribute names are written instead, never their values."""
        record: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kind": kind,
            "tool": tool,
            "count": count,
            "limit": limit,
        }
        if agent is None or agent_id is not None:
            record["agent"] = agent_id
        else:
            record["agentKeys"] = agent_keys(agent)
        # ASCII JSON: a hostile tool name cannot forge another line.
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
        self._append(line.encode("ascii"))

    def _append(self, line: bytes) -> None:
        # One os.write of the whole line on an O_APPEND descriptor: concurrent writers (threads or
        # processes) never interleave within a line.
        try:
            if not _NOFOLLOW and os.path.islink(self.path):
                # No O_NOFOLLOW on this platform (Windows): the best that can be done is a check.
                raise OSError(errno.ELOOP, "is a symbolic link")
            fd = os.open(self.path, _FLAGS, 0o600)
            try:
                written = os.write(fd, line)
            finally:
                os.close(fd)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
        except Exception as error:
            self._warn(error)

    def _warn(self, error: Exception) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        if os.path.islink(self.path):
            reason = "it is a symbolic link, and the log is never written through one"
        elif isinstance(error, OSError) and error.strerror:
            reason = error.strerror
        else:
            reason = type(error).__name__
        import logging  # only now: the guard's own path never needs it

        logging.getLogger("dsh_loop_brake.circuit_breaker").warning(
            "circuit breaker: could not append to the incident log %s (%s); denials still apply,"
            " but incidents are not being recorded",
            json_literal(self.path),
            reason,
        )


def agent_keys(agent: object) -> list[str]:
    """The agent's attribute (or key) names, never their values, to map an unknown shape by hand."""
    names: set[str] = set()
    try:
        if isinstance(agent, Mapping):
            names.update(key for key in agent if isinstance(key, str))
        else:
            names.update(getattr(agent, "__dict__", {}))
            for cls in type(agent).__mro__:
                slots = cls.__dict__.get("__slots__", ())
                for slot in (slots,) if isinstance(slots, str) else slots:
                    if isinstance(slot, str) and hasattr(agent, slot):
                        names.add(slot)
    except Exception:
        pass
    public = sorted(n for n in names if not (n.startswith("__") and n.endswith("__")))
    return public[:_MAX_AGENT_KEYS]
