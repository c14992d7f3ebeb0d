"""loop_brake_before_call inside real llm tool chains, driven by a scripted llm.Model (the way an
llm model plugin is written), offline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import llm
import pytest

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeError, call_hash
from dsh_loop_brake.adapters.llm import loop_brake_before_call
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfig
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


class Calling(llm.Model):
    """A model that calls with each of ``calls`` in turn (``parallel`` at once), then answers."""

    model_id = "scripted-calling"
    supports_tools = True
    can_stream = False

    def __init__(self, calls: Sequence[dict[str, Any]], *, parallel: int = 1) -> None:
        self.calls, self.parallel = calls, parallel
        self.received: list[list[llm.ToolResult]] = []

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Iterator[str]:
        turn = len(self.received)
        self.received.append(list(prompt.tool_results))
        if turn >= len(self.calls):
            return iter(["done"])
        for _ in range(self.parallel):
            response.add_tool_call(llm.ToolCall(name="search", arguments=self.calls[turn]))
        return iter(())


class Repeating(Calling):
    """The same call ``turns`` times (``parallel`` at once), then the answer."""

    def __init__(self, turns: int, arguments: dict[str, Any], *, parallel: int = 1) -> None:
        super().__init__([arguments] * turns, parallel=parallel)


class AsyncRepeating(llm.AsyncModel):
    model_id = "scripted-repeating-async"
    supports_tools = True
    can_stream = False

    def __init__(self, turns: int, arguments: dict[str, Any], *, parallel: int = 1) -> None:
        self.turns, self.arguments, self.parallel = turns, arguments, parallel

    async def execute(
        self, prompt: Any, stream: bool, response: Any, conversation: Any
    ) -> AsyncIterator[str]:
        done = len(conversation.responses) if conversation is not None else 0
        if done >= self.turns:
            yield "done"
            return
        for _ in range(self.parallel):
            response.add_tool_call(llm.ToolCall(name="search", arguments=self.arguments))


def search_tool(runs: Runs) -> Any:
    def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    return search


def test_the_third_identical_call_is_cancelled_and_the_model_reads_why() -> None:
    runs, model = Runs(), Repeating(4, {"q": "weather"})
    text = model.chain("weather?", tools=[search_tool(runs)], before_call=loop_brake_before_call())
    assert text.text() == "done"
    assert len(runs) == 2
    outputs = [results[0].output for results in model.received[1:]]
    assert outputs[:2] == ["results for weather"] * 2
    assert outputs[2].startswith('Cancelled: loop brake: tool "search" called 3 times in a row')
    assert "called 4 times" in outputs[3]
    assert isinstance(model.received[3][0].exception, llm.CancelToolCall)


def test_on_deny_raise_stops_the_chain_with_the_denial() -> None:
    runs, model = Runs(), Repeating(4, {"q": CANARY})
    hook = loop_brake_before_call(on_deny="raise")
    with pytest.raises(LoopBrakeError) as raised:
        model.chain("weather?", tools=[search_tool(runs)], before_call=hook).text()
    assert len(runs) == 2 and raised.value.session_id == hook.session_id
    assert_no_arguments_in_our_frames(raised.value)


def test_parallel_calls_of_an_async_chain_count_exactly() -> None:
    runs = Runs()

    async def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    async def chain() -> str:
        model = AsyncRepeating(1, {"q": "weather"}, parallel=5)
        response = model.chain("weather?", tools=[search], before_call=loop_brake_before_call())
        return await response.text()

    assert asyncio.run(chain()) == "done"
    assert len(runs) == 2


def test_one_hook_is_one_session_and_session_names_one() -> None:
    runs, brakes = Runs(), Brakes()
    first, second = loop_brake_before_call(brakes), loop_brake_before_call(brakes)
    assert first.session_id != second.session_id
    for hook in (first, second):
        Repeating(2, {"q": "weather"}).chain(
            "?", tools=[search_tool(runs)], before_call=hook
        ).text()
    assert len(runs) == 4  # two hooks, two sessions: no denial

    named = loop_brake_before_call(brakes, session="conversation-9")
    by_tool = loop_brake_before_call(brakes, session=lambda tool, tool_call: f"by-{tool.name}")
    for hook in (named, by_tool):
        Repeating(1, {"q": "weather"}).chain(
            "?", tools=[search_tool(runs)], before_call=hook
        ).text()
    key = call_hash("search", {"q": "weather"})[:12]
    assert brakes.loop_brake.streak("conversation-9") == (key, 1)
    assert brakes.loop_brake.streak("by-search") == (key, 1)


def test_a_conversation_chain_keeps_one_streak_across_prompts() -> None:
    runs, brakes = Runs(), Brakes()
    model = Repeating(1, {"q": "weather"})
    hook = loop_brake_before_call(brakes)
    conversation = model.conversation(tools=[search_tool(runs)], before_call=hook)
    for _ in range(3):
        model.received.clear()
        conversation.chain("again?").text()
    assert len(runs) == 2  # the third prompt's call was the conversation's third


def test_the_circuit_breaker_denies_through_the_same_hook() -> None:
    runs = Runs()
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    model = Repeating(3, {"q": "weather"})
    hook = loop_brake_before_call(Brakes(LoopBrake(10), breaker))
    model.chain("?", tools=[search_tool(runs)], before_call=hook).text()
    assert len(runs) == 1
    assert model.received[2][0].output.startswith("Cancelled: circuit breaker:")


def test_a_profiles_patch_rows_configure_the_hook(profile_brakes: Brakes) -> None:
    runs, model = Runs(), Calling(PROFILE_CALLS)
    hook = loop_brake_before_call(profile_brakes)
    model.chain("?", tools=[search_tool(runs)], before_call=hook).text()
    assert runs.calls == PROFILE_RUNS
    handed = [results[0].output for results in model.received[1:]]
    assert_profile_verdicts([h.removeprefix("Cancelled: ") for h in handed])
