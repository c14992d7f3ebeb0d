"""loop_brake_capability inside real pydantic-ai agent runs, driven by pydantic-ai's own
FunctionModel, offline."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeError, call_hash
from dsh_loop_brake.adapters.pydantic_ai import loop_brake_capability
from dsh_loop_brake.circuit_breaker import (
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitBreakerError,
)
from tests.adapter_support import (
    CANARY,
    PROFILE_CALLS,
    PROFILE_RUNS,
    Runs,
    assert_no_arguments_in_our_frames,
    assert_profile_verdicts,
)
from tests.adapter_support import offline as offline  # the autouse network guard
from tests.adapter_support import profile_brakes as profile_brakes  # Brakes.from_profile()


class Calling:
    """A FunctionModel function that calls with each of ``calls`` in turn (``parallel`` at once),
    then answers."""

    def __init__(self, calls: Sequence[str | dict[str, Any]], *, parallel: int = 1) -> None:
        self.calls, self.parallel = calls, parallel
        self.received: list[ModelRequest] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        turn = len(self.received)  # this run's turns, whatever history came before
        self.received.append(last)
        if turn >= len(self.calls):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("search", self.calls[turn], tool_call_id=f"call-{turn}-{i}")
                for i in range(self.parallel)
            ]
        )

    def tool_results(self, request: int) -> list[ToolReturnPart | RetryPromptPart]:
        return [
            p
            for p in self.received[request].parts
            if isinstance(p, (ToolReturnPart, RetryPromptPart))
        ]


class Repeating(Calling):
    """The same call ``turns`` times (``parallel`` at once), then the answer."""

    def __init__(self, turns: int, args: str | dict[str, Any], *, parallel: int = 1) -> None:
        super().__init__([args] * turns, parallel=parallel)


def agent_for(script: Calling, runs: Runs, capability: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), capabilities=[capability])

    @agent.tool_plain
    def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    return agent


def test_the_third_identical_call_fails_and_the_model_reads_a_failed_tool_result() -> None:
    runs, script = Runs(), Repeating(4, {"q": "weather"})
    result = agent_for(script, runs, loop_brake_capability()).run_sync("weather?")

    assert result.output == "done"
    assert len(runs) == 2
    (third,) = script.tool_results(3)
    # A failed tool result, not a retry prompt: no "fix your arguments" and no retry used up.
    assert isinstance(third, ToolReturnPart) and third.outcome == "failed"
    assert str(third.content).startswith('loop brake: tool "search" called 3 times in a row')
    (fourth,) = script.tool_results(4)
    assert isinstance(fourth, ToolReturnPart) and "called 4 times" in str(fourth.content)


def test_on_deny_raise_stops_the_run_with_the_denial() -> None:
    runs, script = Runs(), Repeating(4, {"q": CANARY})
    agent = agent_for(script, runs, loop_brake_capability(on_deny="raise"))
    with pytest.raises(LoopBrakeError) as raised:
        agent.run_sync("weather?")
    assert len(runs) == 2 and raised.value.count == 3
    assert_no_arguments_in_our_frames(raised.value)


def test_identical_calls_issued_in_parallel_in_one_turn_count_exactly() -> None:
    runs, script = Runs(), Repeating(1, {"q": "weather"}, parallel=5)
    agent_for(script, runs, loop_brake_capability()).run_sync("weather?")
    assert len(runs) == 2
    outcomes = [p.outcome for p in script.tool_results(1) if isinstance(p, ToolReturnPart)]
    assert sorted(outcomes) == ["failed"] * 3 + ["success"] * 2


def test_a_conversation_keeps_its_streak_and_two_conversations_stay_apart() -> None:
    runs, brakes = Runs(), Brakes()
    capability = loop_brake_capability(brakes)
    first = agent_for(Repeating(1, {"q": "weather"}), runs, capability).run_sync("a")
    other = agent_for(Repeating(2, {"q": "weather"}), runs, capability).run_sync("b")
    assert len(runs) == 3  # two conversations: 1 + 2 calls, no denial
    assert first.conversation_id != other.conversation_id
    # Continuing the first conversation continues its streak: 2, then 3 (denied).
    again = agent_for(Repeating(2, {"q": "weather"}), runs, capability)
    again.run_sync("a, again", message_history=first.all_messages())
    assert len(runs) == 4
    key = call_hash("search", {"q": "weather"})[:12]
    assert brakes.loop_brake.streak(first.conversation_id) == (key, 3)
    assert brakes.loop_brake.streak(other.conversation_id) == (key, 2)


def test_session_overrides_the_conversation_and_json_string_arguments_are_parsed() -> None:
    runs, brakes = Runs(), Brakes(LoopBrake(10))
    capability = loop_brake_capability(brakes, session=lambda ctx: "user-1")
    agent_for(Repeating(2, '{"q": "weather"}'), runs, capability).run_sync("a")
    assert brakes.loop_brake.streak("user-1") == (call_hash("search", {"q": "weather"})[:12], 2)


def test_async_runs_are_braked_the_same_way() -> None:
    runs, script = Runs(), Repeating(3, {"q": "weather"})
    agent = agent_for(script, runs, loop_brake_capability(Brakes(LoopBrake(2))))
    asyncio.run(agent.run("weather?"))
    assert len(runs) == 1


def test_the_circuit_breaker_denies_through_the_same_capability() -> None:
    runs = Runs()
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    capability = loop_brake_capability(Brakes(LoopBrake(10), breaker), on_deny="raise")
    with pytest.raises(CircuitBreakerError):
        agent_for(Repeating(3, {"q": "weather"}), runs, capability).run_sync("a")
    assert len(runs) == 1


def test_a_profiles_patch_rows_configure_the_capability(profile_brakes: Brakes) -> None:
    runs, script = Runs(), Calling(PROFILE_CALLS)
    agent_for(script, runs, loop_brake_capability(profile_brakes)).run_sync("weather?")
    assert runs.calls == PROFILE_RUNS
    handed = [script.tool_results(turn) for turn in range(1, len(PROFILE_CALLS) + 1)]
    assert all(len(parts) == 1 for parts in handed)
    assert_profile_verdicts([str(parts[0].content) for parts in handed])
