"""The plugin's two seams on hosts of other shapes (SPEC §3): executions given as mappings,
bodies handed a copy of the execution, and executes that return futures."""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import pytest

from dsh_loop_brake import LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin

_ids = itertools.count()


class Context:
    def __init__(self, tools: Any) -> None:
        self.tools = tools
        self.disposers: list[Callable[[], object]] = []

    def effect(self, callback: Callable[[], Callable[[], object]]) -> None:
        self.disposers.append(callback())


class Body:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, args: Any, execution: Any = None) -> str:
        self.calls += 1
        return "ok"


class CopyingTools:
    """Executions are JSON-shaped mappings (``callId``); each body gets its own copy of one."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: dict[str, Any]) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: dict[str, Any]) -> Any:
        body = self.defs[execution["name"]]["execute"]
        return body(execution["arguments"], dict(execution))


def mapping_call(agent: str = "agent-1") -> dict[str, Any]:
    return {
        "callId": f"toolu_{next(_ids)}",
        "name": "search",
        "arguments": {"q": "weather"},
        "agent": {"id": agent},
    }


def test_mapping_executions_are_read_by_key_and_counted_once_by_their_call_id() -> None:
    tools = CopyingTools()
    brake = loop_brake_plugin.apply(Context(tools), {"maxRepeats": 4})
    body = Body()
    tools.register({"name": "search", "execute": body})

    for index in range(1, 4):
        assert tools.execute(mapping_call()) == "ok", index
    with pytest.raises(LoopBrakeError) as denied:
        tools.execute(mapping_call())

    assert body.calls == 3  # counted once per call, though the body saw another object
    assert denied.value.count == 4
    assert denied.value.session_id == "agent-1"  # the agent's id, read by key
    assert brake.streak("agent-1") is not None and brake.streak("default") is None


class FutureTools:
    """A synchronous execute that hands the body to a pool and returns the pool's future."""

    def __init__(self, pool: concurrent.futures.Executor) -> None:
        self.defs: dict[str, Any] = {}
        self.pool = pool

    def register(self, definition: Any) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: dict[str, Any]) -> concurrent.futures.Future[Any]:
        body = self.defs[execution["name"]]["execute"]
        return self.pool.submit(body, execution["arguments"], execution)


@pytest.mark.parametrize("max_repeats", [2, 3, 5])
def test_a_future_returned_by_execute_is_the_hosts_own_and_its_body_counts_once(
    pool: concurrent.futures.ThreadPoolExecutor, max_repeats: int
) -> None:
    tools = FutureTools(pool)
    loop_brake_plugin.apply(Context(tools), {"maxRepeats": max_repeats})
    body = Body()
    tools.register({"name": "search", "execute": body})

    for index in range(1, max_repeats):
        future = tools.execute(mapping_call())
        assert isinstance(future, concurrent.futures.Future)
        assert future.result(timeout=10) == "ok", index  # not denied in the pool at half the limit
    future = tools.execute(mapping_call())
    with pytest.raises(LoopBrakeError) as denied:
        future.result(timeout=10)  # the braked body counts its call, in the pool, before it runs

    assert denied.value.count == max_repeats
    assert body.calls == max_repeats - 1


def test_an_asyncio_future_returned_by_a_sync_execute_keeps_its_type(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    import asyncio

    class LoopTools(FutureTools):
        def execute(self, execution: dict[str, Any]) -> Any:  # type: ignore[override]
            body = self.defs[execution["name"]]["execute"]
            loop = asyncio.get_running_loop()
            return loop.run_in_executor(self.pool, body, execution["arguments"], execution)

    tools = LoopTools(pool)
    loop_brake_plugin.apply(Context(tools), {"maxRepeats": 3})
    body = Body()
    tools.register({"name": "search", "execute": body})

    async def scenario() -> None:
        for _ in range(2):
            pending = tools.execute(mapping_call())
            assert asyncio.isfuture(pending)  # add_done_callback, cancel... still there
            assert await pending == "ok"
        with pytest.raises(LoopBrakeError):
            await tools.execute(mapping_call())

    asyncio.run(scenario())
    assert body.calls == 2


class Tool(NamedTuple):
    name: str
    execute: Any


class RecordTools:
    """Tool definitions are immutable records (NamedTuple); no execute seam."""

    def __init__(self) -> None:
        self.defs: dict[str, Tool] = {}

    def register(self, definition: Tool) -> None:
        self.defs[definition.name] = definition


def test_the_register_seam_brakes_an_immutable_record_definition() -> None:
    tools = RecordTools()
    loop_brake_plugin.apply(Context(tools), {"maxRepeats": 2})
    body = Body()
    original = Tool("search", body)
    tools.register(original)

    braked = tools.defs["search"]
    assert type(braked) is Tool and original.execute is body
    assert braked.execute({"q": 1}) == "ok"
    with pytest.raises(LoopBrakeError):
        braked.execute({"q": 1})
    assert body.calls == 1


class PropertyExecution:
    """A host execution whose fields are properties that count their reads; it has ``callId``
    (the JavaScript spelling) and no ``call_id``."""

    reads: ClassVar[dict[str, int]] = {}

    def __init__(self, call_id: str) -> None:
        self._call_id = call_id

    def _read(self, field: str, value: Any) -> Any:
        PropertyExecution.reads[field] = PropertyExecution.reads.get(field, 0) + 1
        return value

    name = property(lambda self: self._read("name", "search"))
    arguments = property(lambda self: self._read("arguments", {"q": "weather"}))
    agent = property(lambda self: self._read("agent", None))
    callId = property(lambda self: self._read("callId", self._call_id))


class PassingTools:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: dict[str, Any]) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: Any) -> Any:
        return self.defs[execution.name]["execute"]({"q": "weather"}, execution)


def test_an_executions_properties_are_read_once_per_call() -> None:
    # A property may do work (or log); reading it twice on every call would be a surprise.
    tools = PassingTools()
    loop_brake_plugin.apply(Context(tools), {"maxRepeats": 1000})
    body = Body()
    tools.register({"name": "search", "execute": body})
    PropertyExecution.reads = {}
    calls = 50
    for index in range(calls):
        assert tools.execute(PropertyExecution(f"c{index}")) == "ok"
    assert body.calls == calls
    # The host reads `name` once itself; the brake at most once more per call (the execute
    # seam, to find the live definition). The body is handed the arguments, and reads `agent`.
    assert PropertyExecution.reads["name"] <= 2 * calls
    assert PropertyExecution.reads.get("arguments", 0) <= calls
    assert PropertyExecution.reads["agent"] <= calls
    assert PropertyExecution.reads.get("callId", 0) <= calls


class CountingAgent:
    """An agent whose ``id`` is a property that counts its reads."""

    def __init__(self, agent_id: object) -> None:
        self._id = agent_id
        self.reads = 0

    @property
    def id(self) -> object:
        self.reads += 1
        return self._id


class AgentExecution(NamedTuple):
    call_id: str
    name: str
    arguments: dict[str, Any]
    agent: CountingAgent


@pytest.mark.parametrize(
    ("agent_id", "session"), [("a1", "a1"), (42, "42"), ("", "default"), (None, "default")]
)
def test_an_agents_id_is_read_once_per_call_whatever_it_holds(
    agent_id: object, session: str
) -> None:
    tools = PassingTools()
    brake = loop_brake_plugin.apply(Context(tools), {"maxRepeats": 1000})
    tools.register({"name": "search", "execute": Body()})
    agent = CountingAgent(agent_id)
    for index in range(5):
        tools.execute(AgentExecution(f"c{index}", "search", {"q": "weather"}, agent))
    assert agent.reads == 5
    assert brake.streak(session) is not None and brake.streak(session)[1] == 5  # type: ignore[index]


def test_a_body_called_with_keyword_arguments_gets_them_and_counts_once() -> None:
    tools = PassingTools()
    brake = loop_brake_plugin.apply(Context(tools), {"maxRepeats": 3})
    received: list[tuple[Any, Any]] = []

    def body(args: Any, execution: Any = None) -> str:
        received.append((args, execution))
        return "ok"

    tools.register({"name": "search", "execute": body})
    braked = tools.defs["search"]["execute"]
    execution = AgentExecution("k1", "search", {"q": "weather"}, CountingAgent("a1"))
    assert braked(args={"q": "weather"}) == "ok"  # no execution: counted for "default"
    assert braked({"q": "weather"}, execution=execution) == "ok"  # counted for "a1"
    assert received == [({"q": "weather"}, None), ({"q": "weather"}, execution)]
    assert brake.streak("default") is not None and brake.streak("a1") is not None


class CopyingToolsWithoutIds:
    """Executions carry no call id; each body gets a shallow copy, in a thread pool."""

    def __init__(self, pool: concurrent.futures.ThreadPoolExecutor) -> None:
        self.defs: dict[str, Any] = {}
        self.pool = pool

    def register(self, definition: dict[str, Any]) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: dict[str, Any]) -> Any:
        body = self.defs[execution["name"]]["execute"]
        return self.pool.submit(body, execution["arguments"], dict(execution)).result()


def test_a_shallow_copy_of_a_call_without_an_id_counts_once(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    tools = CopyingToolsWithoutIds(pool)
    loop_brake_plugin.apply(Context(tools), {"maxRepeats": 3})
    body = Body()
    tools.register({"name": "search", "execute": body})

    def call() -> dict[str, Any]:
        return {"name": "search", "arguments": {"q": "weather"}, "agent": {"id": "a1"}}

    assert tools.execute(call()) == "ok"
    assert tools.execute(call()) == "ok"  # counted twice, this would be denied here
    with pytest.raises(LoopBrakeError) as denied:
        tools.execute(call())
    assert denied.value.count == 3 and body.calls == 2
