"""A host that runs a tool body again for the same call -- a retry after a transient failure, a
second speculative run -- still counts that call once, when the plugin has the host's
``execute``: every body run inside one ``execute`` call of the same tool, session and arguments
is that one call. A host without ``execute`` cannot be told apart from a model asking twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest
from hosts import (
    AsyncRetryingHost,
    Context,
    InlineHost,
    RegisterOnlyRetryingHost,
    RetryingHost,
)

from dsh_loop_brake import LoopBrakeError, call_hash
from dsh_loop_brake import plugin as loop_brake_plugin


class Flaky:
    """A tool body that fails its first run of every call (every odd run) with a transient
    error, and counts how often it really ran."""

    def __init__(self) -> None:
        self.runs = 0
        self.lock = threading.Lock()

    def __call__(self, arguments: Any, execution: Any = None) -> str:
        with self.lock:
            self.runs += 1
            failing = self.runs % 2 == 1
        if failing:
            raise ConnectionError("the upstream timed out")
        return "ok"


class AsyncFlaky(Flaky):
    """``Flaky`` as a coroutine function (``body``), as an async host finds one."""

    def __init__(self) -> None:
        super().__init__()
        flaky = super().__call__

        async def body(arguments: Any, execution: Any = None) -> str:
            await asyncio.sleep(0)
            return flaky(arguments, execution)

        self.body = body


def execution(name: str = "read_file", **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments or {"path": "a.txt"}, "agent": {"id": "agent-1"}}


def runner(host: Any) -> Any:
    if isinstance(host, AsyncRetryingHost):
        return lambda call: asyncio.run(host.execute(call))
    if isinstance(host, RegisterOnlyRetryingHost):
        return host.call
    return host.execute


def register(host: Any, body: Flaky, registration: str) -> None:
    """Put ``body`` in as ``read_file``: ``before``/``after`` the plugin was applied (a definition
    registered before is counted by the execute seam), or ``wrapped`` -- a definition of the host's
    own around what ``get`` returned, registered over it."""
    host.register({"name": "read_file", "execute": getattr(body, "body", body)})
    if registration == "wrapped":
        inner = host.get("read_file")["execute"]
        if asyncio.iscoroutinefunction(inner):

            async def logged(arguments: Any, execution: Any) -> Any:
                return await inner(arguments, execution)

        else:

            def logged(arguments: Any, execution: Any) -> Any:
                return inner(arguments, execution)

        host.register({"name": "read_file", "execute": logged})


@pytest.mark.parametrize("registration", ["after", "before", "wrapped"])
@pytest.mark.parametrize(
    ("host_type", "body_type"),
    [(RetryingHost, Flaky), (AsyncRetryingHost, Flaky), (AsyncRetryingHost, AsyncFlaky)],
    ids=["sync", "async-host-sync-body-in-a-thread", "async"],
)
def test_a_host_that_retries_a_failed_body_counts_the_call_once(
    host_type: type, body_type: type, registration: str
) -> None:
    host = host_type()
    body = body_type()
    if registration == "before":
        register(host, body, registration)
    brake = loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    if registration != "before":
        register(host, body, registration)
    run = runner(host)

    assert run(execution()) == "ok"  # the first run failed, the host ran it again
    assert run(execution()) == "ok"
    assert body.runs == 4
    assert brake.streak("agent-1")[1] == 2  # type: ignore[index]
    with pytest.raises(LoopBrakeError) as denied:
        run(execution())  # the host retries a denial too (it retries on any exception) ...
    assert denied.value.count == 3  # ... and each retry is denied without counting again
    assert body.runs == 4
    with pytest.raises(LoopBrakeError) as denied:
        run(execution())
    assert denied.value.count == 4  # the model's next call is the next count


def test_a_retry_that_stops_at_the_transient_errors_is_denied_once() -> None:
    host = RetryingHost(retry_on=(ConnectionError,))
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 2})
    body = Flaky()
    host.register({"name": "read_file", "execute": body})

    assert host.execute(execution()) == "ok"
    with pytest.raises(LoopBrakeError) as denied:
        host.execute(execution())
    assert denied.value.count == 2 and body.runs == 2


@pytest.mark.parametrize("through", ["execute", "definition"])
def test_a_retried_body_that_runs_another_tool_has_that_call_counted_each_run(
    through: str,
) -> None:
    # The retried body really makes its inner call again: that one is the body's own call, and
    # each counts. The outer call, the one the model asked for, counts once.
    host = RetryingHost()
    brake = loop_brake_plugin.apply(Context(host), {"maxRepeats": 5})
    host.register({"name": "search", "execute": lambda a, e: "results"})
    runs = []

    def research(arguments: Any, execution: Any) -> str:
        runs.append(1)
        inner = {**execution, "name": "search", "arguments": {"q": "weather"}}
        if through == "execute":
            host.execute(inner)  # a host call of its own
        else:
            host.get("search")["execute"](inner["arguments"], inner)
        if len(runs) == 1:
            raise ConnectionError("the upstream timed out")
        return "done"

    host.register({"name": "research", "execute": research})
    assert host.execute(execution("research", topic="weather")) == "done"
    assert len(runs) == 2
    # research (1), search (1), the retry: research not again, search (2).
    assert brake.streak("agent-1") == (call_hash("search", {"q": "weather"})[:12], 2)


def test_a_tool_calling_itself_through_a_retrying_host_is_still_counted_each_time() -> None:
    host = RetryingHost(retry_on=(ConnectionError,))
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    depth = []

    def recurse(arguments: Any, execution: Any) -> Any:
        depth.append(1)
        return host.execute(dict(execution))  # the very same call, again, through the host

    host.register({"name": "read_file", "execute": recurse})
    with pytest.raises(LoopBrakeError) as denied:
        host.execute(execution())
    assert denied.value.count == 3 and len(depth) == 2


def test_two_speculative_runs_of_one_call_in_threads_count_it_once() -> None:
    # A hedging host: the same call's body started twice at once (each thread in a copy of the
    # execute call's context), the first answer taken.
    class HedgingHost(InlineHost):
        def execute(self, execution: dict[str, Any]) -> Any:
            body = self.defs[execution["name"]]["execute"]
            barrier = threading.Barrier(2)
            outcomes: list[Any] = []

            def run() -> None:
                barrier.wait()
                try:
                    outcomes.append(body(execution["arguments"], dict(execution)))
                except LoopBrakeError as error:
                    outcomes.append(error)

            threads = [
                threading.Thread(target=contextvars.copy_context().run, args=(run,))
                for _ in range(2)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if isinstance(outcomes[0], LoopBrakeError):
                raise outcomes[0]
            return outcomes[0]

    host = HedgingHost()
    brake = loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    host.register({"name": "read_file", "execute": lambda a, e: "ok"})
    for _ in range(20):
        brake.reset()
        assert host.execute(execution()) == "ok"
        assert host.execute(execution()) == "ok"
        with pytest.raises(LoopBrakeError) as denied:
            host.execute(execution())
        assert denied.value.count == 3


def test_a_register_only_host_that_retries_counts_each_run() -> None:
    # The documented limit: without the host's execute, nothing marks where one call ends and
    # the next begins, so a run again is a call again (docs/harness.md, the host contract).
    host = RegisterOnlyRetryingHost(retry_on=(ConnectionError,))
    loop_brake_plugin.apply(Context(host), {"maxRepeats": 3})
    body = Flaky()
    host.register({"name": "read_file", "execute": body})

    assert host.call(execution()) == "ok"  # two runs, two counts
    with pytest.raises(LoopBrakeError) as denied:
        host.call(execution())
    assert denied.value.count == 3
