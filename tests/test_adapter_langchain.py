"""LoopBrakeMiddleware inside a real LangChain v1 agent (create_agent), driven by LangChain's own
fake chat model, offline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from dsh_loop_brake import Brakes, LoopBrake, LoopBrakeError, ToolCallDenied, call_hash
from dsh_loop_brake.adapters.langchain import LoopBrakeMiddleware
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


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's generic fake chat model, able to be bound to tools, remembering its inputs."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic copies the default

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def repeating(turns: int, args: dict[str, Any], *, parallel: int = 1) -> Iterator[AIMessage]:
    """A model that makes the same call ``turns`` times (``parallel`` at once), then answers."""
    for turn in range(turns):
        calls = [
            {"name": "search", "args": args, "id": f"call-{turn}-{i}", "type": "tool_call"}
            for i in range(parallel)
        ]
        yield AIMessage(content="", tool_calls=calls)
    yield AIMessage(content="done")


def calling(calls: Sequence[dict[str, Any]]) -> Iterator[AIMessage]:
    """A model that makes one call per turn, with each of ``calls`` in turn, then answers."""
    for turn, args in enumerate(calls):
        call = {"name": "search", "args": args, "id": f"call-{turn}", "type": "tool_call"}
        yield AIMessage(content="", tool_calls=[call])
    yield AIMessage(content="done")


def search_tool(runs: Runs) -> BaseTool:
    @tool
    def search(q: str) -> str:
        """Search the web."""
        runs.record(q)
        return f"results for {q}"

    return search


def agent_for(model: ScriptedChatModel, runs: Runs, middleware: LoopBrakeMiddleware) -> Any:
    return create_agent(model, [search_tool(runs)], middleware=[middleware])


def graph_of(node: ToolNode) -> Any:
    """A one-node graph around a bare ToolNode (a ToolNode runs inside a graph's runtime)."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def run(agent: Any, thread_id: str | None = None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}} if thread_id else None
    result: dict[str, Any] = agent.invoke({"messages": [("user", "weather?")]}, config)
    return result


def test_the_third_identical_call_is_denied_and_the_model_reads_an_error_tool_message() -> None:
    runs = Runs()
    model = ScriptedChatModel(messages=repeating(4, {"q": "weather"}))
    state = run(agent_for(model, runs, LoopBrakeMiddleware()), "thread-1")

    assert len(runs) == 2  # maxRepeats 3: two run, the third and fourth are denied
    results = tool_messages(state)
    assert [m.status for m in results] == ["success", "success", "error", "error"]
    denial = results[2]
    assert denial.content.startswith('loop brake: tool "search" called 3 times in a row')
    assert denial.tool_call_id == "call-2-0" and denial.name == "search"
    # ... and that is what the model was handed on its next turn.
    assert model.received[3][-1] == denial


def test_awrap_tool_call_brakes_an_async_run_the_same_way() -> None:
    runs = Runs()
    model = ScriptedChatModel(messages=repeating(3, {"q": "weather"}))
    agent = agent_for(model, runs, LoopBrakeMiddleware(Brakes(LoopBrake(2))))
    state = asyncio.run(agent.ainvoke({"messages": [("user", "weather?")]}))
    assert len(runs) == 1
    assert [m.status for m in tool_messages(state)] == ["success", "error", "error"]


def test_on_deny_raise_stops_the_run_with_the_denial() -> None:
    runs = Runs()
    model = ScriptedChatModel(messages=repeating(4, {"q": CANARY}))
    agent = agent_for(model, runs, LoopBrakeMiddleware(on_deny="raise"))
    with pytest.raises(LoopBrakeError) as raised:
        run(agent)
    assert len(runs) == 2
    assert raised.value.count == 3 and raised.value.session_id == "default"
    assert_no_arguments_in_our_frames(raised.value)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_identical_calls_issued_in_parallel_in_one_turn_count_exactly(mode: str) -> None:
    # The ToolNode runs one turn's calls concurrently: threads for invoke, tasks for ainvoke.
    runs = Runs()
    model = ScriptedChatModel(messages=repeating(1, {"q": "weather"}, parallel=5))
    agent = agent_for(model, runs, LoopBrakeMiddleware())
    request = {"messages": [("user", "weather?")]}
    state = agent.invoke(request) if mode == "invoke" else asyncio.run(agent.ainvoke(request))
    assert len(runs) == 2
    assert sorted(m.status for m in tool_messages(state)) == ["error"] * 3 + ["success"] * 2


def test_two_threads_keep_two_streaks_and_session_overrides_the_thread_id() -> None:
    runs = Runs()
    middleware = LoopBrakeMiddleware()
    for thread in ("thread-a", "thread-b"):
        model = ScriptedChatModel(messages=repeating(2, {"q": "weather"}))
        run(agent_for(model, runs, middleware), thread)
    assert len(runs) == 4  # two per thread: neither thread reached its third call
    brake = middleware.brakes.loop_brake
    assert brake.streak("thread-a") == (call_hash("search", {"q": "weather"})[:12], 2)
    assert brake.streak("thread-b") is not None

    # A session function sees the request; here every thread is one user's session.
    shared = LoopBrakeMiddleware(session=lambda request: "user-7")
    for thread in ("thread-a", "thread-b"):
        model = ScriptedChatModel(messages=repeating(2, {"q": "weather"}))
        run(agent_for(model, runs, shared), thread)
    assert shared.brakes.loop_brake.streak("user-7") == (
        call_hash("search", {"q": "weather"})[:12],
        4,
    )


def test_a_retry_around_the_middleware_does_not_count_the_call_twice() -> None:
    # A handler called three times for one model call (a retry middleware placed outside).
    runs = Runs()
    middleware = LoopBrakeMiddleware()
    attempts: list[str] = []

    def retrying(request: Any, handler: Any) -> Any:
        for _ in range(3):
            attempts.append(request.tool_call["id"])
            result = middleware.wrap_tool_call(request, handler)
        return result

    graph = graph_of(ToolNode([search_tool(runs)], wrap_tool_call=retrying))
    model_turn = next(repeating(1, {"q": "weather"}))
    output = graph.invoke({"messages": [model_turn]})
    assert attempts == ["call-0-0"] * 3
    assert len(runs) == 3  # the body ran each time the handler was called ...
    assert middleware.brakes.loop_brake.streak("default")[1] == 1  # ... the call counted once
    assert output["messages"][-1].status == "success"


def test_a_bare_tool_node_takes_the_middleware_hooks() -> None:
    runs = Runs()
    middleware = LoopBrakeMiddleware(Brakes(LoopBrake(2)))
    graph = graph_of(
        ToolNode(
            [search_tool(runs)],
            wrap_tool_call=middleware.wrap_tool_call,
            awrap_tool_call=middleware.awrap_tool_call,
        )
    )
    first, second = list(repeating(2, {"q": "weather"}))[:2]
    assert graph.invoke({"messages": [first]})["messages"][-1].status == "success"
    denied = asyncio.run(graph.ainvoke({"messages": [second]}))["messages"][-1]
    assert denied.status == "error" and "limit 2" in denied.content
    assert len(runs) == 1


def test_the_circuit_breaker_denies_through_the_same_middleware() -> None:
    runs = Runs()
    breaker = CircuitBreaker(CircuitBreakerConfig(duplicate_limit=2, window=10))
    middleware = LoopBrakeMiddleware(Brakes(LoopBrake(10), breaker), on_deny="raise")
    model = ScriptedChatModel(messages=repeating(3, {"q": "weather"}))
    with pytest.raises(CircuitBreakerError) as raised:
        run(agent_for(model, runs, middleware), "thread-1")
    assert isinstance(raised.value, ToolCallDenied)
    assert len(runs) == 1


def test_a_profiles_patch_rows_configure_the_middleware(profile_brakes: Brakes) -> None:
    runs = Runs()
    model = ScriptedChatModel(messages=calling(PROFILE_CALLS))
    state = run(agent_for(model, runs, LoopBrakeMiddleware(profile_brakes)), "thread-1")
    assert runs.calls == PROFILE_RUNS
    assert_profile_verdicts([str(m.content) for m in tool_messages(state)])
