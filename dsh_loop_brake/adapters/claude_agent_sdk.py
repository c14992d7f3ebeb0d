"""The brakes in the Claude Agent SDK: a ``PreToolUse`` hook.

``ClaudeAgentOptions(hooks=loop_brake_hooks())`` — Claude Code asks the hook before every tool
call (the SDK's own hook callbacks, called over its control protocol). An allowed call gets an
empty answer (no opinion: the user's permission rules still apply); a denied one gets
``permissionDecision: "deny"`` with the denial as the reason Claude reads, so the tool never
runs. With ``on_deny="raise"`` the answer also carries ``continue: false`` and the denial as the
``stopReason``, which ends the run: the SDK turns an exception raised by a hook into an error
answer that Claude Code treats as no decision, so raising would let the call run.

The session is the hook input's ``session_id``, and ``session_id/agent_id`` for a call made by
a subagent (so a subagent never shares a streak with its parent or with another subagent);
``session=`` (a function of the hook input) overrides it.

To keep hooks of your own, add the matcher to them::

    hooks = {"PreToolUse": [*loop_brake_hooks()["PreToolUse"], HookMatcher(...)]}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake.adapters._common import (
    OnDeny,
    SessionRule,
    Verdicts,
    missing_framework,
    session_of,
)

try:
    from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
    from claude_agent_sdk.types import SyncHookJSONOutput
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(
        __name__, "the Claude Agent SDK", "claude-agent-sdk", "claude_agent_sdk", error
    ) from error

__all__ = ["loop_brake_hook", "loop_brake_hooks"]

_WHERE = "loop_brake_hooks"


def loop_brake_hooks(
    brakes: Brakes | None = None,
    *,
    session: Callable[[Mapping[str, Any]], object] | None = None,
    on_deny: OnDeny = "message",
    timeout: float | None = None,
) -> dict[Literal["PreToolUse"], list[HookMatcher]]:
    """The ``hooks`` mapping for ``ClaudeAgentOptions``: one ``PreToolUse`` matcher, every tool.

    ``timeout`` is the matcher's (seconds; ``None``: the SDK's default).
    """
    callback = loop_brake_hook(brakes, session=session, on_deny=on_deny)
    return {"PreToolUse": [HookMatcher(matcher=None, hooks=[callback], timeout=timeout)]}


def loop_brake_hook(
    brakes: Brakes | None = None,
    *,
    session: Callable[[Mapping[str, Any]], object] | None = None,
    on_deny: OnDeny = "message",
) -> Callable[[HookInput, str | None, HookContext], Any]:
    """The ``PreToolUse`` hook callback itself, for a ``HookMatcher`` of your own."""
    verdicts = Verdicts(brakes, on_deny, where=_WHERE)
    session_rule = SessionRule(session, _session, where=_WHERE)

    async def dsh_loop_brake(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        if input_data.get("hook_event_name") != "PreToolUse":
            return {}  # registered for another event by hand: no opinion
        session_id = session_rule.session_id(input_data)
        denial = verdicts.judge(
            str(input_data.get("tool_name")), input_data.get("tool_input"), session_id
        )
        if denial is None:
            return {}  # no opinion; never "allow", which would skip the user's permission rules
        message = str(denial)
        decision: SyncHookJSONOutput = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": message,
            }
        }
        if verdicts.raises:
            # The SDK writes these as "continue" and "stopReason" for Claude Code.
            decision["continue_"] = False
            decision["stopReason"] = message
        return decision

    return dsh_loop_brake


def _session(input_data: Mapping[str, Any]) -> str:
    session_id = session_of(input_data.get("session_id"))
    agent_id = input_data.get("agent_id")
    return f"{session_id}/{agent_id}" if agent_id else session_id
