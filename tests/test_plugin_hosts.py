"""The loop-brake plugin against hosts: the reference harness and a minimal foreign host."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import pickle
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_loop_brake import PLUGIN_NAME, LoopBrake, LoopBrakeConfigError, LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin
from dsh_loop_brake.harness.context import Context
from dsh_loop_brake.harness.fibers import Fiber
from dsh_loop_brake.harness.tools import ToolRegistry
from dsh_loop_brake.harness.types import Agent, Row, ToolDefinition, ToolExecution

SEARCH = {"q": "weather"}

# --------------------------------------------------------------------------------------------
# A minimal foreign host: a plain object with tools.register, optional tools.execute, and effect.


@dataclass
class ForeignTool:
    name: str
    execute: Callable[..., Any]


@dataclass
class ForeignExecution:
    call_id: str | None
    name: str
    arguments: Any
    agent: dict[str, str] | None = None


class ForeignTools:
    """Registry with a synchronous execute that runs the body in a thread pool."""

    def __init__(self, pool: concurrent.futures.Executor | None = None) -> None:
        self.defs: dict[str, Any] = {}
        self.pool = pool

    def register(self, definition: Any) -> Callable[[], None]:
        self.defs[definition.name] = definition
        return lambda: self.defs.pop(definition.name, None)

    def execute(self, execution: ForeignExecution) -> Any:
        body = self.defs[execution.name].execute
        if self.pool is None:
            return body(execution.arguments, execution)
        return self.pool.submit(body, execution.arguments, execution).result()


class AsyncForeignTools(ForeignTools):
    """Registry whose execute is a coroutine function; bodies run in a worker thread."""

    async def execute(self, execution: ForeignExecution) -> Any:  # type: ignore[override]
        body = self.defs[execution.name].execute
        return await asyncio.to_thread(body, execution.arguments, execution)


class RegisterOnlyTools:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: Any) -> None:
        self.defs[definition.name] = definition


@dataclass
class ForeignContext:
    tools: Any
    disposers: list[Callable[[], object]] = field(default_factory=list)

    def effect(self, callback: Callable[[], Callable[[], object]]) -> None:
        self.disposers.append(callback())

    def dispose(self) -> None:
        while self.disposers:
            self.disposers.pop()()


class Recorder:
    """A tool body that counts how often it really ran."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, args: Any, execution: Any = None) -> str:
        with self.lock:
            self.calls += 1
        return "ok"


_ids = itertools.count()


def call(name: str = "search", args: Any = None, agent: str | None = None, with_id: bool = True):
    return ForeignExecution(
        call_id=f"call_{next(_ids)}" if with_id else None,
        name=name,
        arguments=dict(SEARCH) if args is None else args,
        agent=None if agent is None else {"id": agent},
    )


def run_until_denied(
    execute: Callable[[Any], Any], make: Callable[[], Any], limit: int = 20
) -> int:
    """Call until the brake denies; return the 1-based index of the denied call."""
    for index in range(1, limit + 1):
        try:
            execute(make())
        except LoopBrakeError:
            return index
    raise AssertionError("never denied")


# --------------------------------------------------------------------------------------------
# Foreign host: both seams, one count per call


@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "thread-pool"])
@pytest.mark.parametrize("with_id", [True, False], ids=["call-id", "no-call-id"])
@pytest.mark.parametrize("max_repeats", [1, 2, 3, 5])
def test_foreign_sync_host_denies_exactly_at_max_repeats(
    pool: concurrent.futures.Executor, threaded: bool, with_id: bool, max_repeats: int
) -> None:
    ctx = ForeignContext(ForeignTools(pool if threaded else None))
    loop_brake_plugin.apply(ctx, {"maxRepeats": max_repeats})
    body = Recorder()
    ctx.tools.register(ForeignTool("search", body))

    denied_at = run_until_denied(ctx.tools.execute, lambda: call(with_id=with_id))

    assert denied_at == max_repeats  # not at half: both seams together count each call once
    assert body.calls == max_repeats - 1  # the denied call's body never ran


@pytest.mark.parametrize("with_id", [True, False], ids=["call-id", "no-call-id"])
def test_foreign_async_host_denies_exactly_at_max_repeats(with_id: bool) -> None:
    ctx = ForeignContext(AsyncForeignTools())
    loop_brake_plugin.apply(ctx, {"maxRepeats": 4})
    body = Recorder()
    ctx.tools.register(ForeignTool("search", body))

    async def scenario() -> int:
        for index in range(1, 20):
            try:
                await ctx.tools.execute(call(with_id=with_id))
            except LoopBrakeError:
                return index
        raise AssertionError("never denied")

    assert asyncio.run(scenario()) == 4
    assert body.calls == 3


def test_tool_registered_before_apply_is_braked_by_the_execute_seam_alone() -> None:
    ctx = ForeignContext(ForeignTools())
    body = Recorder()
    ctx.tools.register(ForeignTool("search", body))  # before the plugin exists
    loop_brake_plugin.apply(ctx)

    assert run_until_denied(ctx.tools.execute, call) == 3
    assert body.calls == 2


def test_braked_definition_called_directly_is_braked_by_the_register_seam() -> None:
    ctx = ForeignContext(RegisterOnlyTools())  # no execute seam at all
    loop_brake_plugin.apply(ctx)
    body = Recorder()
    ctx.tools.register(ForeignTool("search", body))
    braked = ctx.tools.defs["search"]

    assert run_until_denied(lambda e: braked.execute(e.arguments, e), call) == 3
    assert body.calls == 2


def test_register_seam_keeps_the_caller_definition_unchanged() -> None:
    ctx = ForeignContext(RegisterOnlyTools())
    loop_brake_plugin.apply(ctx)
    body = Recorder()
    original = ForeignTool("search", body)
    ctx.tools.register(original)

    assert original.execute is body
    assert ctx.tools.defs["search"] is not original
    assert ctx.tools.defs["search"].name == "search"


def test_agents_are_separate_sessions() -> None:
    ctx = ForeignContext(ForeignTools())
    brake = loop_brake_plugin.apply(ctx)
    ctx.tools.register(ForeignTool("search", Recorder()))

    for _ in range(2):
        ctx.tools.execute(call(agent="agent-a"))
        ctx.tools.execute(call(agent="agent-b"))

    assert brake.streak("agent-a") == brake.streak("agent-b")
    assert brake.streak("agent-a") is not None and brake.streak("agent-a")[1] == 2  # type: ignore[index]
    with pytest.raises(LoopBrakeError) as denied:
        ctx.tools.execute(call(agent="agent-a"))
    assert denied.value.session_id == "agent-a"
    assert brake.streak("agent-b")[1] == 2  # type: ignore[index]


def test_concurrent_bodies_in_threads_count_each_call_once(
    pool: concurrent.futures.Executor,
) -> None:
    """Many threads, many agents, each agent's calls through both seams: never half the limit."""
    ctx = ForeignContext(ForeignTools(pool))
    loop_brake_plugin.apply(ctx, {"maxRepeats": 6})
    body = Recorder()
    ctx.tools.register(ForeignTool("search", body))
    outcomes: dict[str, list[str]] = {}

    def agent_run(agent: str) -> None:
        results = []
        for _ in range(8):
            try:
                ctx.tools.execute(call(agent=agent))
                results.append("ok")
            except LoopBrakeError:
                results.append("denied")
        outcomes[agent] = results

    threads = [threading.Thread(target=agent_run, args=(f"agent-{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for results in outcomes.values():
        assert results == ["ok"] * 5 + ["denied"] * 3
    assert body.calls == 8 * 5


# --------------------------------------------------------------------------------------------
# Validate first


@pytest.mark.parametrize(
    ("config", "env"),
    [
        ({"maxRepeats": 0}, None),
        ({"maxRepeats": "three"}, None),
        ({"maxRepeats": True}, None),
        ({"maxRepeat": 3}, None),
        (["maxRepeats", 3], None),
        ("maxRepeats: 3", None),
        (None, "0"),
        ({}, "lots"),
    ],
)
def test_invalid_config_is_rejected_before_the_registry_is_touched(
    monkeypatch: pytest.MonkeyPatch, config: Any, env: str | None
) -> None:
    if env is not None:
        monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", env)
    tools = ForeignTools()
    ctx = ForeignContext(tools)

    with pytest.raises(LoopBrakeConfigError) as error:
        loop_brake_plugin.apply(ctx, config)

    assert "\n" not in str(error.value)
    assert vars(tools).keys() == {"defs", "pool"}  # no seam patched
    assert ctx.disposers == []  # no effect ran


def test_env_var_error_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "-2")
    with pytest.raises(LoopBrakeConfigError, match="DSH_LOOP_BRAKE_MAX_REPEATS"):
        loop_brake_plugin.apply(ForeignContext(ForeignTools()))


def test_row_beats_env_and_env_fills_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "7")
    assert (
        loop_brake_plugin.apply(ForeignContext(ForeignTools()), {"maxRepeats": 2}).max_repeats == 2
    )
    assert loop_brake_plugin.apply(ForeignContext(ForeignTools()), {}).max_repeats == 7
    assert loop_brake_plugin.apply(ForeignContext(ForeignTools()), None).max_repeats == 7


def test_context_without_a_tool_registry_gets_a_clear_error() -> None:
    class Bare:
        def effect(self, callback: Callable[[], object]) -> None:
            callback()

    with pytest.raises(TypeError, match="needs a tool registry"):
        loop_brake_plugin.apply(Bare())


def test_no_tool_is_registered() -> None:
    tools = ForeignTools()
    loop_brake_plugin.apply(ForeignContext(tools))
    assert tools.defs == {}


# --------------------------------------------------------------------------------------------
# Dispose


def test_dispose_restores_class_methods_without_leaving_instance_attributes() -> None:
    tools = ForeignTools()
    ctx = ForeignContext(tools)
    loop_brake_plugin.apply(ctx)
    assert "register" in vars(tools) and "execute" in vars(tools)

    ctx.dispose()

    assert "register" not in vars(tools)
    assert "execute" not in vars(tools)
    assert tools.register == ForeignTools.register.__get__(tools)
    assert tools.execute == ForeignTools.execute.__get__(tools)


def test_dispose_restores_instance_attributes_that_were_there() -> None:
    tools = ForeignTools()
    own_register = tools.register
    own_execute = tools.execute
    tools.register = own_register  # type: ignore[method-assign]
    tools.execute = own_execute  # type: ignore[method-assign]
    ctx = ForeignContext(tools)
    loop_brake_plugin.apply(ctx)
    assert tools.register is not own_register

    ctx.dispose()

    assert vars(tools)["register"] is own_register
    assert vars(tools)["execute"] is own_execute


def test_after_dispose_braked_definitions_run_unbraked_and_streaks_are_forgotten() -> None:
    tools = ForeignTools()
    ctx = ForeignContext(tools)
    brake = loop_brake_plugin.apply(ctx)
    body = Recorder()
    tools.register(ForeignTool("search", body))
    braked = tools.defs["search"]
    tools.execute(call())
    tools.execute(call())
    assert len(brake) == 1

    ctx.dispose()

    assert len(brake) == 0
    for _ in range(10):
        braked.execute(dict(SEARCH), call())  # the copy made while the plugin lived
        tools.execute(call())
    assert body.calls == 2 + 20


def test_applying_again_starts_fresh() -> None:
    tools = ForeignTools()
    ctx = ForeignContext(tools)
    first = loop_brake_plugin.apply(ctx)
    tools.register(ForeignTool("search", Recorder()))
    tools.execute(call())
    tools.execute(call())
    ctx.dispose()

    second = loop_brake_plugin.apply(ctx)
    tools.register(ForeignTool("search", Recorder()))

    assert second is not first
    tools.execute(call())  # would be the third in a row if the brake remembered
    tools.execute(call())
    with pytest.raises(LoopBrakeError):
        tools.execute(call())


# --------------------------------------------------------------------------------------------
# The reference harness's registry


def harness_context() -> tuple[Context, Fiber]:
    fiber = Fiber("loop-brake")
    return Context(ToolRegistry(), fiber), fiber


async def _execute_until_denied(ctx: Context, make: Callable[[], ToolExecution]) -> int:
    for index in range(1, 20):
        try:
            await ctx.tools.execute(make())
        except LoopBrakeError:
            return index
    raise AssertionError("never denied")


def harness_call(agent: Agent | None = None, with_id: bool = True) -> ToolExecution:
    return ToolExecution(
        call_id=f"call_{next(_ids)}" if with_id else "",
        name="search",
        arguments=dict(SEARCH),
        agent=agent,
    )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync-body", "async-body"])
@pytest.mark.parametrize("with_id", [True, False], ids=["call-id", "no-call-id"])
def test_harness_registry_denies_exactly_at_max_repeats(asynchronous: bool, with_id: bool) -> None:
    ctx, _ = harness_context()
    loop_brake_plugin.apply(ctx, {"maxRepeats": 3})
    body = Recorder()

    async def async_body(args: Any, execution: Any) -> str:
        return body(args, execution)

    ctx.tools.register(ToolDefinition("search", async_body if asynchronous else body))
    agent = Agent("agent-1")

    denied_at = asyncio.run(_execute_until_denied(ctx, lambda: harness_call(agent, with_id)))

    assert denied_at == 3
    assert body.calls == 2


def test_harness_threaded_bodies_count_once() -> None:
    ctx, _ = harness_context()
    loop_brake_plugin.apply(ctx, {"maxRepeats": 4})
    body = Recorder()

    async def body_in_thread(args: Any, execution: Any) -> str:
        return await asyncio.to_thread(body, args, execution)

    ctx.tools.register(ToolDefinition("search", body_in_thread))
    agent = Agent("agent-1")

    assert asyncio.run(_execute_until_denied(ctx, lambda: harness_call(agent))) == 4
    assert body.calls == 3


def test_harness_dispose_restores_the_registry() -> None:
    ctx, fiber = harness_context()
    registry = ctx.tools
    loop_brake_plugin.apply(ctx)
    fiber.dispose()
    assert "register" not in vars(registry) and "execute" not in vars(registry)
    assert registry.register == ToolRegistry.register.__get__(registry)


def test_hookimpl_claims_only_its_own_rows() -> None:
    ctx, _ = harness_context()
    assert loop_brake_plugin.dsh_apply(ctx, Row("other", "dsh-circuit-breaker")) is None
    assert "register" not in vars(ctx.tools)
    handle = loop_brake_plugin.dsh_apply(ctx, Row("loop-brake", PLUGIN_NAME, {"maxRepeats": 9}))
    assert isinstance(handle, LoopBrake) and handle.max_repeats == 9


def test_denial_error_carries_no_arguments() -> None:
    ctx = ForeignContext(ForeignTools())
    loop_brake_plugin.apply(ctx, {"maxRepeats": 2})
    ctx.tools.register(ForeignTool("read_file", Recorder()))
    secret = {"path": "/home/u/.ssh/id_rsa", "token": "sk-CANARY-1234"}
    ctx.tools.execute(call("read_file", dict(secret)))
    with pytest.raises(LoopBrakeError) as denied:
        ctx.tools.execute(call("read_file", dict(secret)))
    dumped = str(denied.value) + repr(denied.value) + repr(denied.value.args)
    dumped += repr(pickle.dumps(denied.value)) + repr(vars(denied.value))
    assert "CANARY" not in dumped and "id_rsa" not in dumped


# --------------------------------------------------------------------------------------------
# No I/O


_AUDITING = threading.local()
_IO_EVENTS: list[str] = []
_IO_PREFIXES = (
    "open",
    "socket.",
    "subprocess.",
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
)


def _audit(event: str, _args: tuple[Any, ...]) -> None:
    if getattr(_AUDITING, "on", False) and event.startswith(_IO_PREFIXES):
        _IO_EVENTS.append(f"{event} {_args[:1]!r}")


sys.addaudithook(_audit)


def test_apply_calls_denials_and_dispose_do_no_io(caplog: pytest.LogCaptureFixture) -> None:
    import dsh_loop_brake.plugin  # noqa: F401  (imports are allowed to read files; calls are not)

    _IO_EVENTS.clear()
    _AUDITING.on = True
    try:
        tools = ForeignTools()
        ctx = ForeignContext(tools)
        loop_brake_plugin.apply(ctx)
        tools.register(ForeignTool("search", Recorder()))
        for _ in range(5):
            with contextlib.suppress(LoopBrakeError):
                tools.execute(call())
        tools.execute(call(args={"not json": {1, 2}}))  # fail open
        ctx.dispose()
    finally:
        _AUDITING.on = False
    assert _IO_EVENTS == []
