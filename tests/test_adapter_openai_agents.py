"""loop_brake_guardrail / brake_agent inside real OpenAI Agents SDK runs, driven by the SDK's own
ScriptedModel, offline."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import agents
import pytest
from agents import (
    Agent,
    AgentsException,
    FunctionTool,
    Runner,
    RunResult,
    ToolInputGuardrail,
    function_tool,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeError, ToolCallDenied, call_hash
from dsh_loop_brake.adapters.openai_agents import (
    AgentsCircuitBreakerError,
    AgentsLoopBrakeError,
    brake_agent,
    loop_brake_guardrail,
)
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

agents.set_tracing_disabled(True)


def search_tool(runs: Runs) -> FunctionTool:
    @function_tool
    def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    return search


def repeating(turns: int, arguments: str | dict[str, Any], *, parallel: int = 1) -> ScriptedModel:
    """A model that makes the same call ``turns`` times (``parallel`` at once), then answers."""
    steps: list[Any] = [
        [function_call("search", arguments, call_id=f"call-{turn}-{i}") for i in range(parallel)]
        for turn in range(turns)
    ]
    steps.append([assistant_message("done")])
    return ScriptedModel(steps)


def outputs_handed_to(model: ScriptedModel, call: int) -> list[str]:
    """The function-call outputs the model was given in its ``call``-th request."""
    items = model.calls[call].input
    return [
        i["output"]
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]


def run(agent: Agent[Any], context: Any = None) -> RunResult:
    return asyncio.run(Runner.run(agent, "weather?", context=context))


def test_the_third_identical_call_is_denied_and_the_model_reads_the_reject_content() -> None:
    runs = Runs()
    model = repeating(4, {"q": "weather"})
    result = run(brake_agent(Agent(name="a", model=model, tools=[search_tool(runs)])))

    assert result.final_output == "done"
    assert len(runs) == 2
    handed = outputs_handed_to(model, -1)
    assert handed[:2] == ["results for weather"] * 2
    assert handed[2].startswith('loop brake: tool "search" called 3 times in a row')
    assert handed[3].startswith('loop brake: tool "search" called 4 times in a row')
    # The guardrail results say which guardrail rejected, with the denial as its output_info.
    rejected = [
        r for r in result.tool_input_guardrail_results if r.output.behavior["type"] != "allow"
    ]
    assert len(rejected) == 2 and isinstance(rejected[0].output.output_info, LoopBrakeError)


def test_on_deny_raise_leaves_runner_run_as_the_denial_itself() -> None:
    runs = Runs()
    model = repeating(4, {"q": CANARY})
    agent = brake_agent(Agent(name="a", model=model, tools=[search_tool(runs)]), on_deny="raise")
    with pytest.raises(LoopBrakeError) as raised:
        run(agent)
    error = raised.value
    assert type(error) is AgentsLoopBrakeError and isinstance(error, AgentsException)
    assert error.count == 3 and error.code == "LOOP_BRAKE"
    assert len(runs) == 2
    assert_no_arguments_in_our_frames(error)


def test_the_raised_denial_refuses_the_run_transcript_the_sdk_attaches() -> None:
    # What the SDK attaches to an AgentsException leaving Runner.run: the run's items, with
    # every call's arguments. Shown first on an error of the SDK's own, raised the same way
    # (from a tool input guardrail, at the third call).
    seen: list[object] = []

    def third_call_stops(data: Any) -> Any:
        seen.append(data)
        if len(seen) == 3:
            raise AgentsException("stopped")
        return agents.ToolGuardrailFunctionOutput.allow()

    tool = search_tool(Runs())
    tool.tool_input_guardrails = [
        ToolInputGuardrail(guardrail_function=third_call_stops, name="stop")
    ]
    with pytest.raises(AgentsException) as own:
        run(Agent(name="a", model=repeating(4, {"q": CANARY}), tools=[tool]))
    assert own.value.run_data is not None and CANARY in repr(own.value.run_data)

    agent = Agent(name="a", model=repeating(4, {"q": CANARY}), tools=[search_tool(Runs())])
    with pytest.raises(AgentsLoopBrakeError) as raised:
        run(brake_agent(agent, on_deny="raise"))
    error = raised.value
    assert error.run_data is None  # the SDK assigned it; the denial dropped it
    error.run_data = own.value.run_data
    assert error.run_data is None
    for shown in (str(error), repr(error), repr(error.args), repr(vars(error))):
        assert CANARY not in shown
    assert CANARY.encode() not in pickle.dumps(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is AgentsLoopBrakeError and copy.run_data is None
    assert (copy.count, copy.hash_prefix, str(copy)) == (error.count, error.hash_prefix, str(error))


def test_identical_calls_issued_in_parallel_in_one_turn_count_exactly() -> None:
    runs = Runs()
    model = repeating(1, {"q": "weather"}, parallel=5)
    run(brake_agent(Agent(name="a", model=model, tools=[search_tool(runs)])))
    assert len(runs) == 2
    handed = outputs_handed_to(model, 1)
    assert sum(h.startswith("loop brake:") for h in handed) == 3


def test_the_json_string_arguments_are_the_identity_of_the_call() -> None:
    # The SDK hands the guardrail the model's arguments as a JSON string: parsed, they hash like
    # the same arguments anywhere else (key order and spacing do not matter).
    runs = Runs()
    brakes = Brakes()
    guardrail = loop_brake_guardrail(brakes, session=lambda context: "s")
    model = ScriptedModel(
        [
            [function_call("search", '{"q": "weather"}', call_id="c1")],
            [function_call("search", '{ "q":"weather" }', call_id="c2")],
            [assistant_message("done")],
        ]
    )
    tool = search_tool(runs)
    tool.tool_input_guardrails = [guardrail]
    run(Agent(name="a", model=model, tools=[tool]))
    assert brakes.loop_brake.streak("s") == (call_hash("search", {"q": "weather"})[:12], 2)


def test_one_runner_run_is_one_session_and_two_runs_stay_apart() -> None:
    runs = Runs()
    brakes = Brakes()
    guardrail = loop_brake_guardrail(brakes)
    for _ in range(2):
        # Two runs of two identical calls each: 4 runs of the body, no denial (limit 3).
        agent = Agent(name="a", model=repeating(2, {"q": "weather"}), tools=[search_tool(runs)])
        run(brake_agent(agent, guardrail=guardrail))
    assert len(runs) == 4
    assert len(brakes.loop_brake) == 2  # one streak per run


def test_session_chooses_the_streak_across_runs() -> None:
    runs = Runs()
    brakes = Brakes()
    for _ in range(2):
        agent = Agent(name="a", model=repeating(2, {"q": "weather"}), tools=[search_tool(runs)])
        run(
            brake_agent(agent, brakes, session=lambda context: context.context["user"]),
            {"user": "u1"},
        )
    assert len(runs) == 2  # the second run's calls were the conversation's third and fourth
    assert brakes.loop_brake.streak("u1")[1] == 4


def test_an_agent_run_as_a_tool_is_a_run_of_its_own() -> None:
    runs = Runs()
    brakes = Brakes()
    guardrail = loop_brake_guardrail(brakes)
    inner = Agent(name="inner", model=repeating(2, {"q": "inner"}), tools=[search_tool(runs)])
    brake_agent(inner, guardrail=guardrail)
    outer_model = ScriptedModel(
        [
            [function_call("research", {"input": "x"}, call_id="outer-1")],
            [assistant_message("done")],
        ]
    )
    outer = Agent(name="outer", model=outer_model, tools=[inner.as_tool("research", "Research.")])
    run(brake_agent(outer, guardrail=guardrail))
    assert len(runs) == 2
    assert len(brakes.loop_brake) == 2  # the outer run's streak and the inner run's


def test_brake_agent_copies_shared_tools_and_braking_twice_leaves_one_guardrail() -> None:
    runs = Runs()
    tool = search_tool(runs)
    first = brake_agent(Agent(name="a", tools=[tool]))
    second = brake_agent(brake_agent(Agent(name="b", tools=[tool]), on_deny="raise"))
    assert tool.tool_input_guardrails is None  # the shared tool itself is left as it was
    for agent in (first, second):
        (braked,) = agent.tools
        assert isinstance(braked, FunctionTool)
        assert [g.name for g in braked.tool_input_guardrails or ()] == ["dsh_loop_brake"]


def test_the_circuit_breaker_denies_through_the_same_guardrail() -> None:
    runs = Runs()
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    model = repeating(3, {"q": "weather"})
    agent = Agent(name="a", model=model, tools=[search_tool(runs)])
    with pytest.raises(ToolCallDenied) as raised:
        run(brake_agent(agent, Brakes(LoopBrake(10), breaker), on_deny="raise"))
    assert type(raised.value) is AgentsCircuitBreakerError
    assert len(runs) == 1


def test_a_profiles_patch_rows_configure_the_guardrail(profile_brakes: Brakes) -> None:
    runs = Runs()
    steps: list[Any] = [
        [function_call("search", args, call_id=f"call-{turn}")]
        for turn, args in enumerate(PROFILE_CALLS)
    ]
    model = ScriptedModel([*steps, [assistant_message("done")]])
    run(brake_agent(Agent(name="a", model=model, tools=[search_tool(runs)]), profile_brakes))
    assert runs.calls == PROFILE_RUNS
    assert_profile_verdicts(outputs_handed_to(model, -1))
