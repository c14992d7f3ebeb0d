"""The three hosts as the hook process sees them: the event it is run for and the deny JSON.

Each host's contract (its documentation and source, with the versions read) is written up in
docs/hooks.md, "Host contracts". In short:

- Claude Code and Codex CLI run the hook on ``PreToolUse`` and read a deny from
  ``hookSpecificOutput.permissionDecision`` with the model-facing reason in
  ``permissionDecisionReason``;
- gemini-cli runs it on ``BeforeTool`` and reads a top-level ``decision`` with ``reason``.

All three treat exit code 0 with nothing on standard output as "no opinion" (the call goes on
through the host's own permission rules), exit code 2 as a block, and any other exit code as a
non-blocking error: the hook process only ever exits 0 or 1.
"""

from __future__ import annotations

import json

__all__ = ["HOSTS", "HOST_NAMES", "Host"]


class Host:
    """One host: its command-line name, how people call it, its pre-tool event, its deny JSON."""

    __slots__ = ("event", "name", "title")

    def __init__(self, name: str, title: str, event: str) -> None:
        self.name = name
        self.title = title
        self.event = event

    def deny_output(self, message: str) -> bytes:
        """The JSON the host reads as "deny this call", with ``message`` for the model to read.

        Bytes, ASCII only (non-ASCII escaped), written as they are: neither the locale of the
        host's pipe nor ``PYTHONIOENCODING`` can garble them.
        """
        if self.event == "BeforeTool":
            decision: dict[str, object] = {"decision": "deny", "reason": message}
        else:
            decision = {
                "hookSpecificOutput": {
                    "hookEventName": self.event,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": message,
                }
            }
        return json.dumps(decision, ensure_ascii=True).encode("ascii") + b"\n"

    def __repr__(self) -> str:
        return f"Host({self.name!r})"


HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        Host("claude-code", "Claude Code", "PreToolUse"),
        Host("codex", "Codex CLI", "PreToolUse"),
        Host("gemini", "gemini-cli", "BeforeTool"),
    )
}
HOST_NAMES = tuple(HOSTS)
