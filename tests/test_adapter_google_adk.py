"""LoopBrakePlugin inside real Google ADK runs (App, Runner, LlmAgent, in-memory sessions), driven
by a scripted BaseLlm, offline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.genai import types

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeError, call_hash
from dsh_loop_brake.adapters.google_adk import LoopBrakePlugin
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfig
from tests.adapter_support import (
    CANARY,
    PROFILE_CALLS,
    PROFILE_RUNS,
    WEATHER,
    Runs,
    assert_no_arguments_in_our_frames,
    assert_profile_verdicts,
)
from tests.adapter_support import offline as offline  # the autouse network guard
from tests.adapter_support import profile_brakes as profile_brakes  # Brakes.from_profile()


class Calling(BaseLlm):
    """A model that calls with each of ``calls`` in turn (``parallel`` at once), then answers."""

    calls: list[dict[str, Any]]
    parallel: int = 1
    received: list[types.Content] = []  # noqa: RUF012 - pydantic copies the default

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn = len(self.received)
        self.received.append(llm_request.contents[-1])
        if turn >= len(self.calls):
            parts = [types.Part(text="done")]
        else:
            call = types.FunctionCall(name="search", args=self.calls[turn])
            parts = [types.Part(function_call=call) for _ in range(self.parallel)]
        yield LlmResponse(content=types.Content(role="model", parts=parts))

    def responses(self, turn: int) -> list[dict[str, Any]]:
        """The function responses the model was handed at ``turn``."""
        parts = self.received[turn].parts or []
        return [dict(p.function_response.response or {}) for p in parts if p.function_response]


def repeating(turns: int, arguments: dict[str, Any], *, parallel: int = 1) -> Calling:
    """The same call ``turns`` times (``parallel`` at once), then the answer."""
    return Calling(model="scripted", calls=[arguments] * turns, parallel=parallel)


def search_tool(runs: Runs) -> Any:
    def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    return search


async def _run(model: Calling, runs: Runs, plugin: LoopBrakePlugin, sessions: int) -> list[str]:
    agent = LlmAgent(name="assistant", model=model, tools=[search_tool(runs)])
    service = InMemorySessionService()
    app = App(name="app", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=service)
    ids = []
    for _ in range(sessions):
        model.received.clear()  # each session's model turns start again
        session = await service.create_session(app_name="app", user_id="user")
        message = types.Content(role="user", parts=[types.Part(text="weather?")])
        async for _event in runner.run_async(
            user_id="user", session_id=session.id, new_message=message
        ):
            pass
        ids.append(session.id)
    return ids


def run(model: Calling, runs: Runs, plugin: LoopBrakePlugin, sessions: int = 1) -> list[str]:
    return asyncio.run(_run(model, runs, plugin, sessions))


def test_the_third_identical_call_is_denied_and_its_response_is_the_denial() -> None:
    runs, model = Runs(), repeating(4, {"q": "weather"})
    run(model, runs, LoopBrakePlugin())
    assert len(runs) == 2
    assert model.responses(1) == [{"result": "results for weather"}]
    (third,) = model.responses(3)
    assert third["error"].startswith('loop brake: tool "search" called 3 times in a row')
    (fourth,) = model.responses(4)
    assert "called 4 times" in fourth["error"]


def test_on_deny_raise_stops_the_run_with_the_denial_as_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL, logger="google_adk")  # ADK logs the wrapped error
    runs = Runs()
    with pytest.raises(RuntimeError) as raised:
        run(repeating(4, {"q": CANARY}), runs, LoopBrakePlugin(on_deny="raise"))
    denial = raised.value.__cause__
    assert isinstance(denial, LoopBrakeError) and denial.count == 3
    assert "dsh_loop_brake" in str(raised.value)  # ADK names the plugin
    assert len(runs) == 2
    assert_no_arguments_in_our_frames(denial)


def test_identical_calls_issued_in_parallel_in_one_turn_count_exactly() -> None:
    runs = Runs()
    model = repeating(1, {"q": "weather"}, parallel=5)
    run(model, runs, LoopBrakePlugin())
    assert len(runs) == 2
    responses = model.responses(1)
    assert sum("error" in r for r in responses) == 3


def test_two_sessions_stay_apart_and_session_overrides_the_rule() -> None:
    runs, brakes = Runs(), Brakes()
    ids = run(repeating(2, {"q": "weather"}), runs, LoopBrakePlugin(brakes), sessions=2)
    assert len(runs) == 4  # two sessions of two calls: no denial
    key = call_hash("search", {"q": "weather"})[:12]
    assert [brakes.loop_brake.streak(i) for i in ids] == [(key, 2), (key, 2)]

    per_agent = Brakes()
    plugin = LoopBrakePlugin(per_agent, session=lambda ctx: f"{ctx.session.id}/{ctx.agent_name}")
    (session_id,) = run(repeating(1, {"q": "weather"}), runs, plugin)
    assert per_agent.loop_brake.streak(f"{session_id}/assistant") == (key, 1)


def test_the_circuit_breaker_denies_through_the_same_plugin() -> None:
    runs = Runs()
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    model = repeating(3, {"q": "weather"})
    run(model, runs, LoopBrakePlugin(Brakes(LoopBrake(10), breaker)))
    assert len(runs) == 1
    (second,) = model.responses(2)
    assert second["error"].startswith("circuit breaker:")


def test_a_profiles_patch_rows_configure_the_plugin(profile_brakes: Brakes) -> None:
    runs, model = Runs(), Calling(model="scripted", calls=list(PROFILE_CALLS))
    run(model, runs, LoopBrakePlugin(profile_brakes))
    assert runs.calls == PROFILE_RUNS
    handed = [model.responses(turn) for turn in range(1, len(PROFILE_CALLS) + 1)]
    assert all(len(responses) == 1 for responses in handed)
    assert_profile_verdicts([r.get("error") or r["result"] for (r,) in handed])


def test_a_call_that_asks_for_confirmation_is_counted_once_and_a_denied_one_never_asks() -> None:
    # ADK presents a call that needs the user's confirmation to the plugin twice: when the model
    # makes it (then ADK asks the user and the run pauses) and again once the user confirmed it.
    # With maxRepeats 2, counting both would deny the very call the user approved.
    runs, brakes = Runs(), Brakes(LoopBrake(2))
    model = Calling(model="scripted", calls=[WEATHER, WEATHER])
    confirmed_tool = FunctionTool(search_tool(runs), require_confirmation=True)
    agent = LlmAgent(name="assistant", model=model, tools=[confirmed_tool])
    service = InMemorySessionService()
    app = App(name="app", root_agent=agent, plugins=[LoopBrakePlugin(brakes)])
    runner = Runner(app=app, session_service=service)

    async def conversation() -> tuple[str, list[Any]]:
        session = await service.create_session(app_name="app", user_id="user")

        async def send(*parts: types.Part) -> list[Any]:
            message = types.Content(role="user", parts=list(parts))
            events = runner.run_async(user_id="user", session_id=session.id, new_message=message)
            return [event async for event in events]

        asked = await send(types.Part(text="weather?"))
        (request,) = confirmation_requests(asked)
        assert len(runs) == 0  # paused: the user has not answered yet
        answer = types.FunctionResponse(
            id=request.id, name=request.name, response={"confirmed": True}
        )
        return session.id, await send(types.Part(function_response=answer))

    session_id, resumed = asyncio.run(conversation())
    assert runs.calls == ["weather"]  # the confirmed call ran: it was counted once, not twice
    # The model's second identical call was denied before ADK could ask the user about it.
    assert confirmation_requests(resumed) == []
    (denied,) = model.responses(-1)
    assert denied["error"].startswith('loop brake: tool "search" called 2 times in a row')
    assert brakes.loop_brake.streak(session_id) == (call_hash("search", WEATHER)[:12], 2)


def confirmation_requests(events: list[Any]) -> list[types.FunctionCall]:
    return [
        call
        for event in events
        for call in event.get_function_calls()
        if call.name == "adk_request_confirmation"
    ]
