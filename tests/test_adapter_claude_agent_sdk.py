"""loop_brake_hooks for the Claude Agent SDK. Its CLI (Claude Code) cannot run offline, so the hook
callbacks are driven with realistic PreToolUse inputs built from the SDK's own types, exactly as
the SDK calls them (input, tool_use_id, context)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookMatcher,
    PostToolUseHookInput,
    PreToolUseHookInput,
)

from dsh_loop_brake import Brakes, LoopBrake, call_hash
from dsh_loop_brake.adapters.claude_agent_sdk import loop_brake_hook, loop_brake_hooks
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfig
from tests.adapter_support import CANARY, PROFILE_CALLS, assert_profile_verdicts
from tests.adapter_support import offline as offline  # the autouse network guard
from tests.adapter_support import profile_brakes as profile_brakes  # Brakes.from_profile()

CONTEXT: HookContext = {"signal": None}


def pre_tool_use(
    tool_input: dict[str, Any],
    *,
    tool_name: str = "Bash",
    session_id: str = "5f1c2a9e-session",
    agent_id: str | None = None,
    tool_use_id: str = "toolu_01",
) -> PreToolUseHookInput:
    """A PreToolUse input as Claude Code sends it."""
    event = PreToolUseHookInput(
        session_id=session_id,
        transcript_path=f"/home/dev/.claude/projects/app/{session_id}.jsonl",
        cwd="/home/dev/app",
        permission_mode="default",
        hook_event_name="PreToolUse",
        tool_name=tool_name,
        tool_input=tool_input,
        tool_use_id=tool_use_id,
    )
    if agent_id is not None:
        event["agent_id"] = agent_id
        event["agent_type"] = "general-purpose"
    return event


def call(hook: Any, event: PreToolUseHookInput) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(hook(event, event["tool_use_id"], CONTEXT))
    return result


def the_hook(**options: Any) -> Any:
    (matcher,) = loop_brake_hooks(**options)["PreToolUse"]
    assert isinstance(matcher, HookMatcher) and matcher.matcher is None  # every tool
    (hook,) = matcher.hooks
    return hook


def test_the_options_take_the_hooks_mapping() -> None:
    options = ClaudeAgentOptions(hooks=loop_brake_hooks(timeout=5))
    assert options.hooks is not None
    assert options.hooks["PreToolUse"][0].timeout == 5


def test_an_allowed_call_gets_no_opinion_and_the_third_repeat_is_denied() -> None:
    hook = the_hook()
    event = pre_tool_use({"command": "npm test"})
    assert call(hook, event) == {}  # no opinion: the user's permission rules still apply
    assert call(hook, event) == {}
    denied = call(hook, event)
    assert denied == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": denied["hookSpecificOutput"]["permissionDecisionReason"],
        }
    }
    reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith('loop brake: tool "Bash" called 3 times in a row')
    json.dumps(denied)  # what the SDK sends to the CLI must be JSON


def test_on_deny_raise_answers_deny_and_stops_the_run() -> None:
    # The SDK turns an exception raised by a hook into "no decision", so raising would let the
    # call run; "continue": false with a stopReason is the SDK's own way to end the run.
    hook = the_hook(on_deny="raise", brakes=Brakes(LoopBrake(2)))
    event = pre_tool_use({"file_path": f"/home/dev/.aws/{CANARY}"}, tool_name="Read")
    assert call(hook, event) == {}
    denied = call(hook, event)
    reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert denied["continue_"] is False  # the SDK writes it as "continue"
    assert denied["stopReason"] == reason
    assert CANARY not in json.dumps(denied)


def test_a_subagent_never_shares_a_streak_with_its_parent_or_a_sibling() -> None:
    brakes = Brakes()
    hook = loop_brake_hook(brakes)
    arguments = {"pattern": "TODO"}
    for agent_id in (None, "a3f9c2e1", "b71d04aa", None, "a3f9c2e1", "b71d04aa"):
        assert call(hook, pre_tool_use(arguments, tool_name="Grep", agent_id=agent_id)) == {}
    key = call_hash("Grep", arguments)[:12]
    assert brakes.loop_brake.streak("5f1c2a9e-session") == (key, 2)
    assert brakes.loop_brake.streak("5f1c2a9e-session/a3f9c2e1") == (key, 2)
    assert brakes.loop_brake.streak("5f1c2a9e-session/b71d04aa") == (key, 2)


def test_two_sessions_stay_apart_and_session_overrides_the_rule() -> None:
    hook = the_hook()
    for _ in range(2):
        for session_id in ("session-1", "session-2"):
            assert call(hook, pre_tool_use({"command": "ls"}, session_id=session_id)) == {}

    brakes = Brakes()
    by_cwd = loop_brake_hook(brakes, session=lambda event: event["cwd"])
    for session_id in ("session-1", "session-2"):
        call(by_cwd, pre_tool_use({"command": "ls"}, session_id=session_id))
    assert brakes.loop_brake.streak("/home/dev/app") == (
        call_hash("Bash", {"command": "ls"})[:12],
        2,
    )


def test_parallel_calls_in_one_turn_count_exactly() -> None:
    # Claude Code fires the hooks of one turn's parallel tool calls concurrently.
    hook = the_hook()

    async def turn() -> list[dict[str, Any]]:
        events = [pre_tool_use({"command": "ls"}, tool_use_id=f"toolu_{i}") for i in range(5)]
        return await asyncio.gather(*(hook(e, e["tool_use_id"], CONTEXT) for e in events))

    answers = asyncio.run(turn())
    assert sum(a == {} for a in answers) == 2
    assert (
        sum(a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for a in answers)
        == 3
    )


def test_other_events_get_no_opinion_and_count_nothing() -> None:
    brakes = Brakes()
    hook = loop_brake_hook(brakes)
    event = PostToolUseHookInput(
        session_id="s",
        transcript_path="/t.jsonl",
        cwd="/",
        hook_event_name="PostToolUse",
        tool_name="Bash",
        tool_input={"command": "ls"},
        tool_response="ok",
        tool_use_id="toolu_9",
    )
    assert asyncio.run(hook(event, "toolu_9", CONTEXT)) == {}
    assert len(brakes.loop_brake) == 0


def test_the_circuit_breaker_denies_through_the_same_hook() -> None:
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    hook = the_hook(brakes=Brakes(LoopBrake(10), breaker))
    event = pre_tool_use({"command": "ls"})
    assert call(hook, event) == {}
    reason = call(hook, event)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("circuit breaker:")


def test_a_profiles_patch_rows_configure_the_hook(profile_brakes: Brakes) -> None:
    hook = the_hook(brakes=profile_brakes)
    handed = []
    for turn, arguments in enumerate(PROFILE_CALLS):
        event = pre_tool_use(arguments, tool_name="search", tool_use_id=f"toolu_{turn}")
        answer = call(hook, event)
        handed.append(answer.get("hookSpecificOutput", {}).get("permissionDecisionReason", ""))
    assert_profile_verdicts(handed)
