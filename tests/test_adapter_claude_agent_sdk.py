"""loop_brake_hooks for the Claude Agent SDK, offline.

Claude Code (the CLI the SDK drives) needs an account, so it cannot run here. Two ways in instead:

* end to end through the SDK's own ``query()`` and ``ClaudeSDKClient``, given a ``Transport`` —
  the SDK's public seam for talking to Claude Code some other way — that plays Claude Code's side
  of the wire: it answers ``initialize``, and for each scripted tool call sends the
  ``hook_callback`` control requests Claude Code sends before a tool runs, and runs the tool only
  when no hook denied it. The SDK's real control protocol registers our hook, dispatches the
  requests to it (concurrently, as it does for the CLI) and writes its answers back;
* the hook callbacks called directly with realistic PreToolUse inputs built from the SDK's own
  types, as the SDK calls them (input, tool_use_id, context).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookMatcher,
    PostToolUseHookInput,
    PreToolUseHookInput,
    ResultMessage,
    ToolResultBlock,
    UserMessage,
    query,
)

from dsh_loop_brake import Brakes, LoopBrake, call_hash
from dsh_loop_brake.adapters.claude_agent_sdk import loop_brake_hook, loop_brake_hooks
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfig
from tests.adapter_support import CANARY, PROFILE_CALLS, assert_profile_verdicts
from tests.adapter_support import offline as offline  # the autouse network guard
from tests.adapter_support import profile_brakes as profile_brakes  # Brakes.from_profile()
from tests.scripted_claude_code import SESSION, ScriptedClaudeCode, pre_tool_use

CONTEXT: HookContext = {"signal": None}


def call(hook: Any, event: PreToolUseHookInput) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(hook(event, event["tool_use_id"], CONTEXT))
    return result


def the_hook(**options: Any) -> Any:
    (matcher,) = loop_brake_hooks(**options)["PreToolUse"]
    assert isinstance(matcher, HookMatcher) and matcher.matcher is None  # every tool
    (hook,) = matcher.hooks
    return hook


# --- end to end: the SDK's query() and ClaudeSDKClient, over a scripted Claude Code ----------


def through_query(cli: ScriptedClaudeCode, options: ClaudeAgentOptions) -> list[Any]:
    async def run() -> list[Any]:
        return [m async for m in query(prompt="Fix the test", options=options, transport=cli)]

    return asyncio.run(run())


def tool_results(messages: list[Any]) -> list[ToolResultBlock]:
    return [
        block
        for m in messages
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for block in m.content
        if isinstance(block, ToolResultBlock)
    ]


def test_through_query_the_third_identical_call_never_runs_and_claude_reads_why() -> None:
    cli = ScriptedClaudeCode([[[("Bash", {"command": "npm test"})]] * 4])
    messages = through_query(cli, ClaudeAgentOptions(hooks=loop_brake_hooks()))

    assert len(cli.ran) == 2  # Claude Code ran the first two; the hook denied the others
    assert cli.answers[:2] == [{}, {}]  # no opinion, so the user's permission rules still apply
    assert [a["hookSpecificOutput"]["permissionDecision"] for a in cli.answers[2:]] == ["deny"] * 2
    results = tool_results(messages)
    assert [r.is_error for r in results] == [None, None, True, True]
    assert str(results[2].content).startswith('loop brake: tool "Bash" called 3 times in a row')
    assert isinstance(messages[0], AssistantMessage) and isinstance(messages[-1], ResultMessage)


def test_through_query_parallel_calls_in_one_turn_count_exactly() -> None:
    # One turn of five identical calls: Claude Code asks their hooks at once, and the SDK runs
    # each hook request as a task of its own.
    cli = ScriptedClaudeCode([[[("Grep", {"pattern": "TODO"})] * 5]])
    messages = through_query(cli, ClaudeAgentOptions(hooks=loop_brake_hooks()))
    assert len(cli.ran) == 2
    assert sorted(bool(r.is_error) for r in tool_results(messages)) == [False] * 2 + [True] * 3


def test_through_query_on_deny_raise_ends_the_run_in_claude_codes_own_words() -> None:
    cli = ScriptedClaudeCode([[[("Read", {"file_path": f"/home/dev/.aws/{CANARY}"})]] * 4])
    options = ClaudeAgentOptions(hooks=loop_brake_hooks(Brakes(LoopBrake(2)), on_deny="raise"))
    through_query(cli, options)
    assert len(cli.ran) == 1
    (denied,) = [a for a in cli.answers if a]
    # What Claude Code reads: "continue" (the SDK renamed our continue_), and the stop reason.
    assert denied["continue"] is False and "continue_" not in denied
    assert denied["stopReason"] == denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert cli.stopped_with is not None and cli.stopped_with.startswith("loop brake:")
    assert CANARY not in json.dumps(cli.answers)


def test_through_the_client_a_session_keeps_its_streak_across_prompts() -> None:
    # ClaudeSDKClient keeps one Claude Code session open: the streak continues from one prompt
    # to the next, and a subagent's calls (agent_id) are a streak of their own.
    brakes = Brakes()
    ls = ("Bash", {"command": "ls"})
    cli = ScriptedClaudeCode([[[ls]], [[ls], [ls]]])

    async def conversation() -> None:
        options = ClaudeAgentOptions(hooks=loop_brake_hooks(brakes))
        async with ClaudeSDKClient(options, transport=cli) as client:
            for prompt in ("list the files", "again, twice"):
                await client.query(prompt)
                async for _message in client.receive_response():
                    pass

    asyncio.run(conversation())
    assert len(cli.ran) == 2  # the second prompt's second call was the session's third
    assert brakes.loop_brake is not None
    assert brakes.loop_brake.streak(SESSION) == (call_hash(*ls)[:12], 3)

    subagent = ScriptedClaudeCode([[[ls], [ls]]], agent_id="a3f9c2e1")
    through_query(subagent, ClaudeAgentOptions(hooks=loop_brake_hooks(brakes)))
    assert len(subagent.ran) == 2
    assert brakes.loop_brake.streak(f"{SESSION}/a3f9c2e1") == (call_hash(*ls)[:12], 2)


# --- the hook callbacks, called as the SDK calls them ----------------------------------------


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
