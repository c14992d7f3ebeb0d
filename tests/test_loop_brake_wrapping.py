"""session_key, wrap_execute and decorate_tool (SPEC §2, session key and wrapping)."""

from __future__ import annotations

import asyncio
import dataclasses
import types
from typing import Any, NamedTuple

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeError, decorate_tool, session_key, wrap_execute

# --- session_key -----------------------------------------------------------------------------


@dataclasses.dataclass
class Agent:
    id: Any


@dataclasses.dataclass
class Execution:
    call_id: str
    name: str
    arguments: Any
    agent: Any = None


def test_session_key_prefers_the_explicit_session_id() -> None:
    execution = Execution("c1", "t", {}, Agent("agent-1"))
    assert session_key("explicit", execution) == "explicit"
    assert session_key("explicit") == "explicit"


def test_session_key_reads_the_agent_id_by_attribute_or_by_key() -> None:
    assert session_key(None, Execution("c1", "t", {}, Agent("agent-1"))) == "agent-1"
    assert session_key(execution={"agent": {"id": "agent-2"}}) == "agent-2"
    assert session_key(execution={"agent": Agent("agent-3")}) == "agent-3"
    assert session_key(execution=types.SimpleNamespace(agent={"id": "agent-4"})) == "agent-4"


@pytest.mark.parametrize(
    "execution",
    [
        None,
        Execution("c1", "t", {}),
        {"agent": None},
        {"agent": {}},
        {},
        object(),
        {"agent": {"id": None}},
    ],
)
def test_session_key_falls_back_to_default(execution: Any) -> None:
    assert session_key(None, execution) == "default"
    assert session_key() == "default"


# --- wrap_execute ----------------------------------------------------------------------------


def test_sync_wrapper_checks_before_the_body_and_passes_the_result_through() -> None:
    brake = LoopBrake(2)
    ran: list[Any] = []
    marker = object()

    def execute(args: Any, execution: Any = None) -> Any:
        ran.append((args, execution))
        return marker

    braked = wrap_execute(execute, brake, tool="search")
    assert braked({"q": "a"}) is marker
    assert ran == [({"q": "a"}, None)]
    with pytest.raises(LoopBrakeError) as denied:
        braked({"q": "a"})
    assert denied.value.tool_name == "search"
    assert len(ran) == 1  # the denied call's body never ran


def test_sync_wrapper_uses_the_session_from_the_execution() -> None:
    brake = LoopBrake(2)
    braked = wrap_execute(lambda args, execution: "ok", brake, tool="t")
    assert braked({}, {"agent": {"id": "a1"}}) == "ok"
    assert braked({}, {"agent": {"id": "a2"}}) == "ok"  # another agent, another session
    assert brake.streak("a1") is not None and brake.streak("a2") is not None
    with pytest.raises(LoopBrakeError) as denied:
        braked({}, {"agent": {"id": "a1"}})
    assert denied.value.session_id == "a1"


def test_an_explicit_session_id_beats_the_execution() -> None:
    brake = LoopBrake(2)
    braked = wrap_execute(lambda args, execution: None, brake, tool="t", session_id="pinned")
    braked({}, {"agent": {"id": "a1"}})
    with pytest.raises(LoopBrakeError) as denied:
        braked({}, {"agent": {"id": "a2"}})
    assert denied.value.session_id == "pinned"


def test_sync_exceptions_pass_through_as_the_same_object() -> None:
    failure = RuntimeError("tool failed")

    def execute(args: Any) -> Any:
        raise failure

    braked = wrap_execute(execute, LoopBrake(5), tool="t")
    with pytest.raises(RuntimeError) as caught:
        braked({})
    assert caught.value is failure


def test_async_wrapper_is_a_coroutine_function_and_checks_before_the_body_starts() -> None:
    brake = LoopBrake(2)
    started: list[Any] = []

    async def execute(args: Any, execution: Any = None) -> str:
        started.append(args)
        await asyncio.sleep(0)
        return "done"

    braked = wrap_execute(execute, brake, tool="fetch")
    assert asyncio.iscoroutinefunction(braked)

    async def scenario() -> None:
        assert await braked({"url": "u"}, {"agent": {"id": "x"}}) == "done"
        pending = braked({"url": "u"}, {"agent": {"id": "x"}})
        with pytest.raises(LoopBrakeError):
            await pending
        assert started == [{"url": "u"}]  # the body of the denied call never started

    asyncio.run(scenario())


def test_async_exceptions_pass_through_as_the_same_object() -> None:
    failure = ValueError("bad input")

    async def execute(args: Any) -> Any:
        await asyncio.sleep(0)
        raise failure

    braked = wrap_execute(execute, LoopBrake(5), tool="t")

    async def scenario() -> None:
        with pytest.raises(ValueError) as caught:
            await braked({})
        assert caught.value is failure

    asyncio.run(scenario())


def test_wrapped_function_keeps_its_name() -> None:
    def read_file(args: Any) -> None:
        """Read a file."""

    braked = wrap_execute(read_file, LoopBrake(), tool="read_file")
    assert braked.__name__ == "read_file"
    assert braked.__doc__ == "Read a file."


def test_unidentifiable_arguments_still_run_the_body() -> None:
    braked = wrap_execute(lambda args: "ran", LoopBrake(1), tool="t")
    assert braked({"when": object()}) == "ran"


# --- decorate_tool ---------------------------------------------------------------------------


@dataclasses.dataclass
class ToolDefinition:
    name: str
    execute: Any
    description: str = ""
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class FrozenTool:
    name: str
    execute: Any
    type: str = "function"


class PlainTool:
    def __init__(self, name: str, execute: Any) -> None:
        self.name = name
        self.execute = execute
        self.description = "plain"
        self.parameters = {"type": "object"}
        self.type = "function"


def body(args: Any, execution: Any = None) -> str:
    return f"ran {sorted(args)}"


def assert_braked(definition: Any, execute: Any) -> None:
    assert execute({"a": 1}) == "ran ['a']"
    with pytest.raises(LoopBrakeError) as denied:
        execute({"a": 1})
    assert denied.value.tool_name == "search"


def test_decorate_a_dataclass_returns_a_braked_copy() -> None:
    original = ToolDefinition("search", body, "Search the web", {"type": "object"})
    braked = decorate_tool(original, LoopBrake(2))
    assert braked is not original
    assert type(braked) is ToolDefinition
    assert (braked.name, braked.description, braked.parameters) == (
        "search",
        "Search the web",
        {"type": "object"},
    )
    assert original.execute is body
    assert_braked(braked, braked.execute)
    assert original.execute({"a": 1}) == "ran ['a']"  # the original stays unbraked


def test_decorate_a_frozen_dataclass() -> None:
    original = FrozenTool("search", body)
    braked = decorate_tool(original, LoopBrake(2))
    assert braked is not original and original.execute is body
    assert braked.type == "function"
    assert_braked(braked, braked.execute)


def test_decorate_a_plain_object() -> None:
    original = PlainTool("search", body)
    braked = decorate_tool(original, LoopBrake(2))
    assert braked is not original
    assert type(braked) is PlainTool
    assert original.execute is body
    assert (braked.name, braked.description, braked.parameters, braked.type) == (
        "search",
        "plain",
        {"type": "object"},
        "function",
    )
    assert_braked(braked, braked.execute)


def test_decorate_a_mapping() -> None:
    original = {
        "name": "search",
        "execute": body,
        "description": "d",
        "type": "function",
        "parameters": {"type": "object"},
    }
    snapshot = dict(original)
    braked = decorate_tool(original, LoopBrake(2))
    assert braked is not original
    assert original == snapshot
    assert {k: v for k, v in braked.items() if k != "execute"} == {
        k: v for k, v in original.items() if k != "execute"
    }
    assert_braked(braked, braked["execute"])


def test_decorated_async_tools_stay_async() -> None:
    async def fetch(args: Any, execution: Any = None) -> str:
        return "fetched"

    braked = decorate_tool(ToolDefinition("fetch", fetch), LoopBrake(2))
    assert asyncio.iscoroutinefunction(braked.execute)

    async def scenario() -> None:
        assert await braked.execute({}) == "fetched"
        with pytest.raises(LoopBrakeError):
            await braked.execute({})

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "definition",
    [
        ToolDefinition("t", None),
        ToolDefinition("t", "not callable"),
        {"name": "t"},
        {"name": "t", "execute": 42},
        PlainTool("t", None),
        types.SimpleNamespace(name="t"),
    ],
)
def test_a_definition_without_a_callable_execute_is_refused_naming_its_type(
    definition: Any,
) -> None:
    # A safety tool must not hand back an unbraked tool without a word.
    with pytest.raises(TypeError, match=type(definition).__name__) as refused:
        decorate_tool(definition, LoopBrake())
    assert "callable execute" in str(refused.value) and "\n" not in str(refused.value)


def test_a_plain_function_given_to_decorate_tool_is_pointed_to_brake_tool() -> None:
    def search(q: str) -> str:
        return q

    with pytest.raises(TypeError, match=r"@brake\.tool") as refused:
        decorate_tool(search, LoopBrake())
    assert "'search'" in str(refused.value)


def test_each_decorated_copy_shares_the_brake_and_the_session() -> None:
    brake = LoopBrake(3)
    first = decorate_tool(ToolDefinition("search", body), brake)
    second = decorate_tool(ToolDefinition("search", body), brake)
    first.execute({"q": 1}, {"agent": {"id": "a"}})
    second.execute({"q": 1}, {"agent": {"id": "a"}})
    with pytest.raises(LoopBrakeError):
        first.execute({"q": 1}, {"agent": {"id": "a"}})


class NamedTool(NamedTuple):
    name: str
    execute: Any
    description: str = "named"


def test_decorate_a_named_tuple() -> None:
    original = NamedTool("search", body)
    braked = decorate_tool(original, LoopBrake(2))
    assert braked is not original and original.execute is body
    assert type(braked) is NamedTool
    assert braked.description == "named"
    assert_braked(braked, braked.execute)
