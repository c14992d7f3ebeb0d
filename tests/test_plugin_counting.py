"""Every call counts exactly once, however the host reaches the body (the plugin, SPEC §3).

Each test drives one stub host of ``tests/hosts`` through its public methods with the plugin
applied, and checks the one thing a user sees: which identical call is denied, and how many
bodies ran.
"""

from __future__ import annotations

from typing import Any

import pytest
from hosts import (
    Context,
    DeepCopyingHost,
    DictOnlyHost,
    InlineHost,
    QueueingHost,
    RegisterOnlyHost,
    SchemaDefaultsHost,
)

from dsh_loop_brake import LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin


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
