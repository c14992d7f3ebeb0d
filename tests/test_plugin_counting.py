"""Every call counts exactly once, however the host reaches the body (the plugin, SPEC §3).

Each test drives one stub host of ``tests/hosts`` through its public methods with the plugin
applied, and checks the one thing a user sees: which identical call is denied, and how many
bodies ran.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hosts import (
    AsyncHost,
    Context,
    DeepCopyingHost,
    DictOnlyHost,
    HandingBackHost,
    InlineHost,
    QueueingHost,
    RegisterOnlyHost,
    SchemaDefaultsHost,
    TaskHost,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_loop_brake import LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin
from dsh_loop_brake.harness.context import Context as HarnessContext
from dsh_loop_brake.harness.fibers import Fiber
from dsh_loop_brake.harness.tools import ToolRegistry
from dsh_loop_brake.harness.types import Agent, ToolDefinition, ToolExecution


class Body:
    """A tool body that counts how often it really ran."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, arguments: Any, execution: Any = None) -> str:
        self.calls += 1
        return "ok"


def execution(name: str = "read_file", agent: str = "agent-1", **arguments: Any) -> dict[str, Any]:
    """A call as a JSON-shaped host passes it: no call id."""
    return {"name": name, "arguments": arguments or {"path": "a.txt"}, "agent": {"id": agent}}


def denied_at(run: Any, calls: int = 8) -> int | None:
    """The 1-based index of the first identical call that is denied (None: none was)."""
    for index in range(1, calls + 1):
        try:
            run(execution())
        except LoopBrakeError:
            return index
    return None


def test_a_host_that_rebuilds_the_arguments_for_the_body_is_braked() -> None:
    host = SchemaDefaultsHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "read_file", "execute": body})

    assert denied_at(host.execute) == 3
    assert body.calls == 2


def test_a_host_that_deep_copies_the_execution_counts_each_call_once() -> None:
    host = DeepCopyingHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "read_file", "execute": body})

    with pytest.raises(LoopBrakeError) as denied:
        for _ in range(3):
            host.execute(execution())
    assert denied.value.count == 3
    assert body.calls == 2


def test_a_host_that_queues_bodies_for_a_worker_counts_each_call_once() -> None:
    host = QueueingHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "read_file", "execute": body})

    tickets = [host.execute(execution()) for _ in range(4)]
    host.close()  # the worker stops once these four have run
    assert [host.result(ticket) for ticket in tickets[:2]] == ["ok", "ok"]
    for ticket, count in zip(tickets[2:], (3, 4), strict=True):
        with pytest.raises(LoopBrakeError) as denied:
            host.result(ticket)
        assert denied.value.count == count
    assert body.calls == 2


def test_a_definition_wrapping_what_get_returned_counts_once() -> None:
    host = RegisterOnlyHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "read_file", "execute": body})
    inner = host.get("read_file")

    def logged(arguments: Any, execution: Any) -> Any:
        return inner["execute"](arguments, execution)

    host.register({"name": "read_file", "execute": logged})

    assert denied_at(host.call) == 3
    assert body.calls == 2


@pytest.mark.parametrize("host_type", [InlineHost, RegisterOnlyHost])
def test_a_braked_body_registered_again_under_another_name_counts_once(host_type: type) -> None:
    # An alias (`read` for `read_file`) made of what get returned: one call through two braked
    # layers of one brake. Counted under both names, each call ended the other's streak, and
    # the alias was never denied.
    host = host_type()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "read_file", "execute": body})
    host.register({"name": "read", "execute": host.get("read_file")["execute"]})
    run = host.call if host_type is RegisterOnlyHost else host.execute

    with pytest.raises(LoopBrakeError) as denied:
        for _ in range(3):
            run(execution("read"))
    assert (denied.value.tool_name, denied.value.count) == ("read", 3)
    assert body.calls == 2


@pytest.mark.parametrize("through", ["execute", "definition"])
@pytest.mark.parametrize("host_type", [InlineHost, DictOnlyHost])
def test_a_tool_that_runs_another_tool_has_that_call_counted(host_type: type, through: str) -> None:
    host = host_type()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Body()
    host.register({"name": "search", "execute": body})

    def research(arguments: Any, execution: Any) -> str:
        for _ in range(10):  # stuck: the same search, again and again
            inner = {**execution, "name": "search", "arguments": {"q": "weather"}}
            if through == "execute":
                host.execute(inner)
            else:
                host.defs["search"]["execute"](inner["arguments"], inner)
        return "done"

    host.register({"name": "research", "execute": research})

    outer = {**execution("research", topic="weather"), "callId": "toolu_01"}
    with pytest.raises(LoopBrakeError) as denied:
        host.execute(outer)
    assert denied.value.tool_name == "search"
    assert body.calls == 2


# --------------------------------------------------------------------------------------------
# Bodies run later, in tasks, in threads; definitions re-registered and disposed


async def async_body(arguments: Any, execution: Any = None) -> str:
    await asyncio.sleep(0)
    return "ok"


def test_a_host_that_runs_each_body_as_a_task_counts_each_call_once() -> None:
    host = TaskHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    host.register({"name": "read_file", "execute": async_body})

    async def scenario() -> list[str]:
        tasks = [host.execute(execution()) for _ in range(4)]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return ["denied" if isinstance(r, LoopBrakeError) else r for r in results]

    assert asyncio.run(scenario()) == ["ok", "ok", "denied", "denied"]


def test_a_sync_execute_handing_back_the_bodys_coroutine_counts_it_once() -> None:
    host = HandingBackHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    host.register({"name": "read_file", "execute": async_body})

    async def scenario() -> int:
        for index in range(1, 6):
            try:
                await host.execute(execution())
            except LoopBrakeError:
                return index
        return 0

    assert asyncio.run(scenario()) == 3


@pytest.mark.parametrize("host_type", [InlineHost, DictOnlyHost])
def test_a_tool_registered_before_apply_and_again_after_counts_once(host_type: type) -> None:
    host = host_type()
    body = Body()
    host.register({"name": "read_file", "execute": body})  # before the plugin: unbraked
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    assert denied_at(host.execute) == 3  # the execute seam counts it

    host.register({"name": "read_file", "execute": body})  # again: braked, its body counts
    assert denied_at(host.execute) == 1  # the streak went on: one count per call, not two
    assert body.calls == 2


def test_a_braked_registration_disposed_leaves_the_earlier_one_counted_by_the_execute_seam() -> (
    None
):
    registry = ToolRegistry()
    body = Body()
    registry.register(ToolDefinition("read_file", body))  # before the plugin: unbraked
    brake = loop_brake_plugin.apply(HarnessContext(registry, Fiber("row")), {"maxRepeats": 3})
    dispose = registry.register(ToolDefinition("read_file", body))  # shadows it, braked

    def run(call: ToolExecution) -> Any:
        return asyncio.run(registry.execute(call))

    def harness_call() -> ToolExecution:
        return ToolExecution("", "read_file", {"path": "a.txt"}, Agent("agent-1"))

    run(harness_call())
    dispose()  # the unbraked definition is live again
    run(harness_call())
    assert brake.streak("agent-1")[1] == 2  # type: ignore[index]
    with pytest.raises(LoopBrakeError):
        run(harness_call())
    assert body.calls == 2


def test_a_definition_without_a_callable_execute_is_registered_as_it_is() -> None:
    host = DictOnlyHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 1})
    schema_only = {"name": "later", "parameters": {"type": "object"}}
    host.register(schema_only)
    assert host.defs["later"] is schema_only


def test_a_tool_that_calls_itself_through_the_host_is_counted_each_time() -> None:
    host = InlineHost()
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    depth = []

    def recurse(arguments: Any, execution: Any) -> Any:
        depth.append(1)
        return host.execute(dict(execution))  # the very same call, again, through the host

    host.register({"name": "read_file", "execute": recurse})
    with pytest.raises(LoopBrakeError) as denied:
        host.execute(execution())
    assert denied.value.count == 3 and len(depth) == 2


# --------------------------------------------------------------------------------------------
# Reading the call fails open


class Exploding:
    """An agent (or execution) whose fields raise when read."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getattr__(self, name: str) -> Any:
        raise ConnectionError("the agent service is down")


@pytest.mark.parametrize("before_apply", [False, True], ids=["body-counts", "seam-counts"])
def test_a_call_whose_execution_cannot_be_read_runs_unbraked_with_one_warning(
    before_apply: bool, caplog: pytest.LogCaptureFixture
) -> None:
    tool = f"flaky_{before_apply}"
    host = InlineHost()
    body = Body()
    if before_apply:
        host.register({"name": tool, "execute": body})
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 1})
    if not before_apply:
        host.register({"name": tool, "execute": body})

    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for _ in range(3):
            call = {"name": tool, "arguments": {"token": "sk-CANARY"}, "agent": Exploding("id")}
            assert host.execute(call) == "ok"
    assert body.calls == 3
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh_loop_brake"]
    assert len(warnings) == 1
    assert f'"{tool}"' in warnings[0] and "ConnectionError" in warnings[0]
    assert "CANARY" not in warnings[0] and "down" not in warnings[0]


# --------------------------------------------------------------------------------------------
# Any host, any registration, any sequence of calls: exactly the streak model's denials


class Setup:
    """A host kind, how the tool gets into it, and how one call is made and its outcome read."""

    def __init__(self, host_type: type, registration: str) -> None:
        self.host_type = host_type
        self.registration = registration

    def __repr__(self) -> str:
        return f"{self.host_type.__name__}/{self.registration}"


SETUPS = [
    Setup(host_type, registration)
    for host_type in (
        InlineHost,
        DictOnlyHost,
        SchemaDefaultsHost,
        DeepCopyingHost,
        QueueingHost,
        AsyncHost,
        RegisterOnlyHost,
        ToolRegistry,
    )
    for registration in ("after", "before", "wrapped")
    if not (registration == "before" and host_type is RegisterOnlyHost)  # nothing would brake it
    if not (registration == "wrapped" and host_type is DictOnlyHost)  # it has no get
]


def drive(setup: Setup, max_repeats: int, calls: list[tuple[str, str]]) -> tuple[list[int], int]:
    """Run ``calls`` (agent, query) through the setup; the denied indices and the bodies run."""
    harness = setup.host_type is ToolRegistry
    host = setup.host_type()
    ran = Body()

    def define(execute: Any) -> None:
        host.register(
            ToolDefinition("search", execute) if harness else {"name": "search", "execute": execute}
        )

    if setup.registration == "before":
        define(ran)
    ctx = HarnessContext(host, Fiber("row")) if harness else Context(host)
    loop_brake_plugin.apply(ctx, {"maxRepeats": max_repeats})
    if setup.registration != "before":
        define(ran)
    if setup.registration == "wrapped":
        inner = host.get("search")
        inner_execute = inner.execute if harness else inner["execute"]
        define(lambda arguments, execution: inner_execute(arguments, execution))

    def one(agent: str, query: str) -> Any:
        if harness:
            return asyncio.run(
                host.execute(ToolExecution("", "search", {"q": query}, Agent(agent)))
            )
        call = {"name": "search", "arguments": {"q": query}, "agent": {"id": agent}}
        if isinstance(host, QueueingHost):
            return host.result(host.execute(call))
        if isinstance(host, AsyncHost):
            return asyncio.run(host.execute(call))
        if isinstance(host, RegisterOnlyHost):
            return host.call(call)
        return host.execute(call)

    denied = []
    try:
        for index, (agent, query) in enumerate(calls):
            try:
                one(agent, query)
            except LoopBrakeError:
                denied.append(index)
    finally:
        if isinstance(host, QueueingHost):
            host.close()
    return denied, ran.calls


def model(max_repeats: int, calls: list[tuple[str, str]]) -> list[int]:
    streaks: dict[str, tuple[str, int]] = {}
    denied = []
    for index, (agent, query) in enumerate(calls):
        last, count = streaks.get(agent, ("", 0))
        count = count + 1 if last == query else 1
        streaks[agent] = (query, count)
        if count >= max_repeats:
            denied.append(index)
    return denied


@pytest.mark.parametrize("setup", SETUPS, ids=repr)
@settings(max_examples=25)
@given(
    max_repeats=st.integers(1, 4),
    calls=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xy")), max_size=10),
)
def test_every_host_and_registration_denies_exactly_what_the_streak_model_denies(
    setup: Setup, max_repeats: int, calls: list[tuple[str, str]]
) -> None:
    denied, ran = drive(setup, max_repeats, calls)
    assert denied == model(max_repeats, calls)
    assert ran == len(calls) - len(denied)
