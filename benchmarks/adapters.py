"""What each framework adapter adds to a tool call, next to the same agent without it.

    python benchmarks/adapters.py [--repeats N] [--calls K] [--only NAME ...]

For each framework, one agent run is one model turn that makes K tool calls (distinct arguments,
so every call is allowed and counted) followed by a final answer, with the framework's own
scripted test model, offline (Claude Code, which needs an account, is played by the scripted
Claude Code transport the tests use: the SDK's real control protocol carries each hook request).
Three agents take turns: without any hook ("plain"), with an empty hook at the adapter's
extension point that lets every call through ("empty hook": what the framework's hook machinery
costs by itself), and with the adapter ("braked"). The medians of their wall times give the
framework's own cost per call, what its hook costs, and what the adapter adds on top of an empty
hook. Times are the process's CPU time, so other processes on a busy machine do not count.

A whole run's time varies from run to run by more than the brakes cost, so the adapter's hook is
also timed alone ("hook alone"): its callback called directly, over and over, with the very
context objects the framework passed an empty hook during a real run (fresh ones where the
adapter tells calls apart by the object), and a continuation that returns at once. Beside it,
``Brakes.check`` alone on the same arguments: the rest of "hook alone" is the adapter reading the
framework's context.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

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

# n calls of the adapter's callback alone (context objects prepared beforehand) -> seconds
HookAlone = Callable[[int], float]


class Bench(NamedTuple):
    run: Run
    hook_alone: HookAlone


# CPU time of this process (every thread of it), not wall time: the machines these figures come
# from are shared, and time spent waiting for a core while another process runs is no one's cost.
# Nothing here waits on I/O (the models and Claude Code are scripted, in process).
clock = time.process_time


def brakes() -> Brakes:
    return Brakes(LoopBrake(10**9))  # every call allowed: the cost of counting, not of denying


def search(q: str) -> str:
    """Search the web."""
    return q


def cycle(captured: list[Any], n: int) -> list[Any]:
    """``n`` context objects taken in turn from what a real run passed the empty hook."""
    assert captured, "the capturing run passed the hook nothing"
    return [captured[i % len(captured)] for i in range(n)]


def timed_sync(call: Callable[[Any], object], inputs: list[Any]) -> float:
    start = clock()
    for item in inputs:
        call(item)
    return clock() - start


def timed_async(call: Callable[[Any], Any], inputs: list[Any]) -> float:
    async def loop() -> float:
        start = clock()
        for item in inputs:
            await call(item)
        return clock() - start

    return asyncio.run(loop())


# --- one agent per framework -----------------------------------------------------------------


def langchain_bench(calls: int) -> Bench:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
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
        def __init__(self, captured: list[Any] | None = None) -> None:
            super().__init__()
            self.captured = captured

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            if self.captured is not None:
                self.captured.append(request)
            return await handler(request)

    tools = [tool(search)]
    middleware = {
        "plain": [],
        "empty hook": [EmptyHook()],
        "braked": [LoopBrakeMiddleware(brakes())],
    }

    def run(mode: str, chain: list[Any] | None = None) -> None:
        used = middleware[mode] if chain is None else chain
        agent = create_agent(Scripted(messages=turn()), tools, middleware=used)
        asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))

    captured: list[Any] = []
    run("empty hook", [EmptyHook(captured)])
    hook = LoopBrakeMiddleware(brakes())
    result = ToolMessage(content="q", tool_call_id="c0")

    async def done(request: Any) -> Any:
        return result

    def hook_alone(n: int) -> float:
        # The ToolNode makes a runtime per call, and the middleware tells calls apart by it.
        fresh = [
            dataclasses.replace(r, runtime=dataclasses.replace(r.runtime))
            for r in cycle(captured, n)
        ]
        return timed_async(lambda request: hook.awrap_tool_call(request, done), fresh)

    return Bench(lambda mode: run(mode), hook_alone)


def openai_agents_bench(calls: int) -> Bench:
    import agents
    from agents import (
        Agent,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        function_tool,
    )
    from agents.testing import ScriptedModel, assistant_message, function_call

    from dsh_loop_brake.adapters.openai_agents import brake_agent, loop_brake_guardrail

    agents.set_tracing_disabled(True)
    guarded = function_tool(search)

    def allow(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    empty = ToolInputGuardrail(guardrail_function=allow, name="empty")

    def run(mode: str, guardrail: Any = None) -> None:
        model = ScriptedModel(
            [
                [function_call("search", {"q": f"q{i}"}, call_id=f"c{i}") for i in range(calls)],
                [assistant_message("done")],
            ]
        )
        agent = Agent(name="a", model=model, tools=[guarded])
        if guardrail is not None:
            brake_agent(agent, guardrail=guardrail)
        elif mode == "braked":
            brake_agent(agent, brakes())
        elif mode == "empty hook":
            brake_agent(agent, guardrail=empty)
        asyncio.run(Runner.run(agent, "go"))

    captured: list[Any] = []

    def capture(data: Any) -> ToolGuardrailFunctionOutput:
        captured.append(data)
        return ToolGuardrailFunctionOutput.allow()

    run("empty hook", ToolInputGuardrail(guardrail_function=capture, name="capture"))
    hook = loop_brake_guardrail(brakes()).guardrail_function

    def hook_alone(n: int) -> float:
        return timed_sync(hook, cycle(captured, n))

    return Bench(lambda mode: run(mode), hook_alone)


def pydantic_ai_bench(calls: int) -> Bench:
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
        def __init__(self, captured: list[Any] | None = None) -> None:
            self.captured = captured

        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            if self.captured is not None:
                self.captured.append((ctx, call, tool_def, args))
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

    captured: list[Any] = []
    Agent(FunctionModel(model), tools=[search], capabilities=[EmptyHook(captured)]).run_sync("go")
    hook = loop_brake_capability(brakes())

    async def done(args: Any) -> Any:
        return "q"

    def one(item: Any) -> Any:
        ctx, call, tool_def, args = item
        return hook.wrap_tool_execute(ctx, call=call, tool_def=tool_def, args=args, handler=done)

    def hook_alone(n: int) -> float:
        return timed_async(one, cycle(captured, n))

    return Bench(run, hook_alone)


def llm_bench(calls: int) -> Bench:
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

    captured: list[Any] = []
    model.chain(
        "go", tools=[search], before_call=lambda tool, call: captured.append((tool, call))
    ).text()
    hook = loop_brake_before_call(brakes())

    def hook_alone(n: int) -> float:
        return timed_sync(lambda item: hook(*item), cycle(captured, n))

    return Bench(run, hook_alone)


def google_adk_bench(calls: int) -> Bench:
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
        def __init__(self, name: str, captured: list[Any] | None = None) -> None:
            super().__init__(name=name)
            self.captured = captured

        async def before_tool_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any
        ) -> None:
            if self.captured is not None:
                self.captured.append((tool, tool_args, tool_context))
            return None

    agent = LlmAgent(name="a", model=Scripted(model="scripted"), tools=[search])
    captured: list[Any] = []
    apps = {
        "plain": App(name="plain", root_agent=agent),
        "empty hook": App(name="empty", root_agent=agent, plugins=[EmptyHook("empty")]),
        "braked": App(name="braked", root_agent=agent, plugins=[LoopBrakePlugin(brakes())]),
        "capture": App(name="capture", root_agent=agent, plugins=[EmptyHook("capture", captured)]),
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

    run("capture")
    hook = LoopBrakePlugin(brakes())

    def one(item: Any) -> Any:
        tool, tool_args, tool_context = item
        return hook.before_tool_callback(tool=tool, tool_args=tool_args, tool_context=tool_context)

    def hook_alone(n: int) -> float:
        return timed_async(one, cycle(captured, n))

    return Bench(run, hook_alone)


def claude_agent_sdk_bench(calls: int) -> Bench:
    from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, query

    from dsh_loop_brake.adapters.claude_agent_sdk import loop_brake_hook, loop_brake_hooks
    from tests.scripted_claude_code import ScriptedClaudeCode

    captured: list[Any] = []

    def empty_hook(into: list[Any] | None = None) -> Any:
        async def no_opinion(input_data: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
            if into is not None:
                into.append((input_data, tool_use_id, context))
            return {}

        return {"PreToolUse": [HookMatcher(matcher=None, hooks=[no_opinion])]}

    hooks = {"plain": None, "empty hook": empty_hook()}

    def run(mode: str, chosen: Any = None) -> None:
        turn = [("Bash", {"command": f"ls {i}"}) for i in range(calls)]
        cli = ScriptedClaudeCode([[turn]])
        options = ClaudeAgentOptions(
            hooks=chosen or (hooks[mode] if mode in hooks else loop_brake_hooks(brakes()))
        )

        async def drain() -> None:
            async for _message in query(prompt="go", options=options, transport=cli):
                pass

        asyncio.run(drain())
        assert len(cli.ran) == calls

    run("empty hook", empty_hook(captured))
    hook = loop_brake_hook(brakes())

    def hook_alone(n: int) -> float:
        return timed_async(lambda item: hook(*item), cycle(captured, n))

    return Bench(lambda mode: run(mode), hook_alone)


FRAMEWORKS: dict[str, Callable[[int], Bench]] = {
    "langchain": langchain_bench,
    "openai-agents": openai_agents_bench,
    "pydantic-ai": pydantic_ai_bench,
    "claude-agent-sdk": claude_agent_sdk_bench,
    "llm": llm_bench,
    "google-adk": google_adk_bench,
}


class Medians(NamedTuple):
    runs: dict[str, float]  # seconds per whole run, by mode
    hook: float  # seconds for ``hook_calls`` calls of the adapter's callback alone
    check: float  # seconds for as many calls of ``Brakes.check`` alone


def measure(bench: Bench, repeats: int, hook_calls: int) -> Medians:
    """Medians of interleaved samples: the three whole runs, the hook alone, the check alone."""
    check = check_alone(hook_calls)
    for mode in MODES:
        bench.run(mode)  # warm: imports, caches, first-call setup
    bench.hook_alone(hook_calls)
    check()
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    hook: list[float] = []
    checks: list[float] = []
    for _ in range(repeats):
        for mode in MODES:
            start = clock()
            bench.run(mode)
            samples[mode].append(clock() - start)
        hook.append(bench.hook_alone(hook_calls))
        checks.append(check())
    runs = {mode: statistics.median(times) for mode, times in samples.items()}
    return Medians(runs, statistics.median(hook), statistics.median(checks))


def check_alone(n: int) -> Callable[[], float]:
    """One sample: seconds for ``n`` calls of ``Brakes.check`` with arguments like the runs'."""
    checked = brakes()
    arguments = [{"q": f"q{i % 50}"} for i in range(n)]

    def once() -> float:
        start = clock()
        for args in arguments:
            checked.check("search", args, session_id="s")
        return clock() - start

    return once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per agent run")
    parser.add_argument(
        "--hook-calls", type=int, default=2000, help="calls per sample of the hook alone"
    )
    parser.add_argument("--only", nargs="*", help="frameworks to measure (default: all)")
    args = parser.parse_args()
    calls, n = args.calls, args.hook_calls
    print(f"{calls} tool calls per run, medians of {args.repeats} interleaved runs; per tool call:")
    print(
        f"{'framework':17} {'plain':>9} {'empty hook':>11} {'braked':>9}"
        f" {'adapter adds':>21} {'hook alone':>20} {'check':>8}"
    )
    for name, build in FRAMEWORKS.items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        measured = measure(build(calls), args.repeats, n)
        median = {mode: seconds / calls * 1e6 for mode, seconds in measured.runs.items()}
        added = median["braked"] - median["empty hook"]
        alone, check = measured.hook / n * 1e6, measured.check / n * 1e6
        print(
            f"{name:17} {median['plain']:7.1f}µs {median['empty hook']:9.1f}µs"
            f" {median['braked']:7.1f}µs {added:8.1f}µs ({added / median['plain']:+7.1%})"
            f" {alone:7.2f}µs ({alone / median['plain']:6.2%}) {check:6.2f}µs"
        )
    print("plain: the framework's own cost of one tool call in a run; empty hook: the same with a")
    print("hook at the adapter's extension point that does nothing; adapter adds: braked - empty")
    print("hook, and as a share of the plain cost (run-to-run noise included); hook alone: the")
    print("adapter's callback by itself, given the framework's own context objects, and as a share")
    print("of the plain cost; check: Brakes.check alone, sampled between the hook's samples (the")
    print("rest of the hook alone is the adapter reading the framework's context).")


if __name__ == "__main__":
    main()
