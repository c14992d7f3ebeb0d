"""What each framework adapter adds to a tool call, next to the same agent without it.

    python benchmarks/adapters.py [--repeats N] [--calls K] [--only NAME ...]

For each framework, one agent run is one model turn that makes K tool calls (distinct arguments,
so every call is allowed and counted) followed by a final answer, with the framework's own
scripted test model, offline. Three agents take turns: without any hook ("plain"), with an empty
hook at the adapter's extension point that lets every call through ("empty hook": what the
framework's hook machinery costs by itself), and with the adapter ("braked"). The medians of
their wall times give the framework's own cost per call, what its hook costs, and what the
adapter adds on top of an empty hook. The Claude Agent SDK's CLI cannot run offline: there the
hook callback is timed against the empty hook callback alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.update(
    {
        "OPENAI_API_KEY": "sk-bench-offline",
        "GOOGLE_API_KEY": "bench-offline",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        "LANGSMITH_TRACING": "false",
        "OTEL_SDK_DISABLED": "true",
    }
)

from dsh_loop_brake import Brakes, LoopBrake

Run = Callable[[str], None]  # one agent run: "plain", "empty hook" or "braked"
MODES = ("plain", "empty hook", "braked")


def brakes() -> Brakes:
    return Brakes(LoopBrake(10**9))  # every call allowed: the cost of counting, not of denying


def search(q: str) -> str:
    """Search the web."""
    return q


# --- one agent per framework -----------------------------------------------------------------


def langchain_run(calls: int) -> Run:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from dsh_loop_brake.adapters.langchain import LoopBrakeMiddleware

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

    def turn() -> Any:
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "search", "args": {"q": f"q{i}"}, "id": f"c{i}", "type": "tool_call"}
                for i in range(calls)
            ],
        )
        yield AIMessage(content="done")

    class EmptyHook(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    tools = [tool(search)]
    middleware = {
        "plain": [],
        "empty hook": [EmptyHook()],
        "braked": [LoopBrakeMiddleware(brakes())],
    }

    def run(mode: str) -> None:
        agent = create_agent(Scripted(messages=turn()), tools, middleware=middleware[mode])
        asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))

    return run


def openai_agents_run(calls: int) -> Run:
    import agents
    from agents import (
        Agent,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        function_tool,
    )
    from agents.testing import ScriptedModel, assistant_message, function_call

    from dsh_loop_brake.adapters.openai_agents import brake_agent

    agents.set_tracing_disabled(True)
    guarded = function_tool(search)

    def allow(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    empty = ToolInputGuardrail(guardrail_function=allow, name="empty")

    def run(mode: str) -> None:
        model = ScriptedModel(
            [
                [function_call("search", {"q": f"q{i}"}, call_id=f"c{i}") for i in range(calls)],
                [assistant_message("done")],
            ]
        )
        agent = Agent(name="a", model=model, tools=[guarded])
        if mode == "braked":
            brake_agent(agent, brakes())
        elif mode == "empty hook":
            brake_agent(agent, guardrail=empty)
        asyncio.run(Runner.run(agent, "go"))

    return run


def pydantic_ai_run(calls: int) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from dsh_loop_brake.adapters.pydantic_ai import loop_brake_capability

    def model(messages: Any, info: Any) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("search", {"q": f"q{i}"}, tool_call_id=f"c{i}") for i in range(calls)
            ]
        )

    class EmptyHook(AbstractCapability[Any]):
        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            return await handler(args)

    capabilities: dict[str, list[Any]] = {
        "plain": [],
        "empty hook": [EmptyHook()],
        "braked": [loop_brake_capability(brakes())],
    }
    built = {
        m: Agent(FunctionModel(model), tools=[search], capabilities=c)
        for m, c in capabilities.items()
    }

    def run(mode: str) -> None:
        built[mode].run_sync("go")

    return run


def llm_run(calls: int) -> Run:
    import llm

    from dsh_loop_brake.adapters.llm import loop_brake_before_call

    class Scripted(llm.Model):
        model_id = "bench-scripted"
        supports_tools = True
        can_stream = False

        def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Any:
            if prompt.tool_results:
                return iter(["done"])
            for i in range(calls):
                response.add_tool_call(llm.ToolCall(name="search", arguments={"q": f"q{i}"}))
            return iter(())

    model = Scripted()

    def empty(tool: Any, tool_call: Any) -> None:
        return None

    hooks = {"plain": None, "empty hook": empty}

    def run(mode: str) -> None:
        hook = hooks[mode] if mode in hooks else loop_brake_before_call(brakes())
        model.chain("go", tools=[search], before_call=hook).text()

    return run


def google_adk_run(calls: int) -> Run:
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models import BaseLlm, LlmRequest, LlmResponse
    from google.adk.plugins import BasePlugin
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    from dsh_loop_brake.adapters.google_adk import LoopBrakePlugin

    class Scripted(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            if any(c.role == "model" for c in llm_request.contents):
                parts = [types.Part(text="done")]
            else:
                parts = [
                    types.Part(function_call=types.FunctionCall(name="search", args={"q": f"q{i}"}))
                    for i in range(calls)
                ]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    class EmptyHook(BasePlugin):
        async def before_tool_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any
        ) -> None:
            return None

    agent = LlmAgent(name="a", model=Scripted(model="scripted"), tools=[search])
    apps = {
        "plain": App(name="plain", root_agent=agent),
        "empty hook": App(name="empty", root_agent=agent, plugins=[EmptyHook(name="empty")]),
        "braked": App(name="braked", root_agent=agent, plugins=[LoopBrakePlugin(brakes())]),
    }

    async def once(mode: str) -> None:
        service = InMemorySessionService()
        runner = Runner(app=apps[mode], session_service=service)
        session = await service.create_session(app_name=apps[mode].name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        async for _event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            pass

    def run(mode: str) -> None:
        asyncio.run(once(mode))

    return run


def claude_agent_sdk_run(calls: int) -> Run:
    from dsh_loop_brake.adapters.claude_agent_sdk import loop_brake_hook

    hook = loop_brake_hook(brakes())

    async def no_opinion(input_data: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
        return {}

    events = [
        {
            "session_id": "s",
            "transcript_path": "/t.jsonl",
            "cwd": "/",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"ls {i}"},
            "tool_use_id": f"toolu_{i}",
        }
        for i in range(calls)
    ]

    async def turn(callback: Any) -> None:
        for event in events:
            await callback(event, event["tool_use_id"], {"signal": None})

    def run(mode: str) -> None:
        asyncio.run(turn(hook if mode == "braked" else no_opinion))

    return run


FRAMEWORKS: dict[str, Callable[[int], Run]] = {
    "langchain": langchain_run,
    "openai-agents": openai_agents_run,
    "pydantic-ai": pydantic_ai_run,
    "claude-agent-sdk (hook only)": claude_agent_sdk_run,
    "llm": llm_run,
    "google-adk": google_adk_run,
}


def measure(run: Run, repeats: int) -> dict[str, float]:
    for mode in MODES:
        run(mode)  # warm: imports, caches, first-call setup
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode in MODES:
            start = time.perf_counter()
            run(mode)
            samples[mode].append(time.perf_counter() - start)
    return {mode: statistics.median(times) for mode, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per agent run")
    parser.add_argument("--only", nargs="*", help="frameworks to measure (default: all)")
    args = parser.parse_args()
    calls = args.calls
    print(f"{calls} tool calls per run, medians of {args.repeats} interleaved runs; per tool call:")
    print(f"{'framework':29} {'plain':>9} {'empty hook':>11} {'braked':>9} {'adapter adds':>13}")
    for name, build in FRAMEWORKS.items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        median = {
            mode: seconds / calls * 1e6
            for mode, seconds in measure(build(calls), args.repeats).items()
        }
        added = median["braked"] - median["empty hook"]
        print(
            f"{name:29} {median['plain']:7.1f}µs {median['empty hook']:9.1f}µs"
            f" {median['braked']:7.1f}µs {added:8.1f}µs ({added / median['plain']:+.1%})"
        )
    print("plain: the framework's own cost of one tool call in a run; empty hook: the same with a")
    print("hook at the adapter's extension point that does nothing; adapter adds: braked - empty")
    print("hook, and in parentheses as a share of the plain cost.")


if __name__ == "__main__":
    main()
