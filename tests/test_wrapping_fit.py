"""Wrapping that fits real tools (SPEC §2 "Wrapping"): ``wrap_execute`` keeps the signature and
finds the execution by keyword, ``decorate_tool`` brakes definitions of every shape, and
``LoopBrake.tool`` brakes plain keyword-argument functions."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import inspect
import threading
import types
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_loop_brake import (
    LoopBrake,
    LoopBrakeError,
    call_hash,
    decorate_tool,
    hash_prefix,
    wrap_execute,
)

# --- wrap_execute ----------------------------------------------------------------------------


def read_file(path: dict[str, Any], execution: Any = None, *, encoding: str = "utf-8") -> str:
    """Read a file."""
    return "ok"


async def fetch(args: Any, execution: Any, /, retries: int = 2, **options: Any) -> str:
    return "ok"


@pytest.mark.parametrize("function", [read_file, fetch], ids=["sync", "async"])
def test_wrap_execute_keeps_the_signature_name_and_docstring(function: Any) -> None:
    braked = wrap_execute(function, LoopBrake(), tool="t")
    assert inspect.signature(braked) == inspect.signature(function)
    assert braked.__name__ == function.__name__ and braked.__doc__ == function.__doc__
    assert inspect.iscoroutinefunction(braked) == inspect.iscoroutinefunction(function)


def test_an_execution_given_by_keyword_is_the_session() -> None:
    brake = LoopBrake(2)
    braked = wrap_execute(lambda args, execution=None: "ok", brake, tool="search")
    alice, bob = {"agent": {"id": "alice"}}, {"agent": {"id": "bob"}}

    braked({"q": "x"}, execution=alice)
    braked({"q": "x"}, execution=bob)  # bob's first call, not alice's second

    assert brake.streak("alice") is not None and brake.streak("bob") is not None
    with pytest.raises(LoopBrakeError) as denied:
        braked({"q": "x"}, execution=alice)
    assert denied.value.session_id == "alice"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    "how",
    ["positional", "execution=", "arguments=", "args=", "own-names"],
)
def test_the_arguments_and_the_execution_are_found_however_they_are_passed(
    how: str, asynchronous: bool
) -> None:
    received: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def record(*args: Any, **kwargs: Any) -> str:
        received.append((args, kwargs))
        return "ok"

    def query_tool(query: Any, context: Any = None) -> str:
        return record(query, context=context)

    def plain(arguments: Any = None, execution: Any = None, args: Any = None) -> str:
        return record(arguments=arguments, execution=execution, args=args)

    async def plain_async(arguments: Any = None, execution: Any = None, args: Any = None) -> str:
        return plain(arguments, execution, args)

    async def query_tool_async(query: Any, context: Any = None) -> str:
        return query_tool(query, context)

    if how == "own-names":
        target: Any = query_tool_async if asynchronous else query_tool
    else:
        target = plain_async if asynchronous else plain
    brake = LoopBrake(2)
    braked = wrap_execute(target, brake, tool="search")
    call = {
        "positional": lambda a, e: braked(a, e),
        "execution=": lambda a, e: braked(a, execution=e),
        "arguments=": lambda a, e: braked(arguments=a, execution=e),
        "args=": lambda a, e: braked(args=a, execution=e),
        "own-names": lambda a, e: braked(query=a, context=e),
    }[how]

    def run(arguments: Any, agent: str) -> Any:
        result = call(arguments, {"agent": {"id": agent}})
        return asyncio.run(result) if asynchronous else result

    run({"q": "x"}, "alice")
    run({"q": "y"}, "alice")  # other arguments: a new streak
    run({"q": "y"}, "bob")
    with pytest.raises(LoopBrakeError) as denied:
        run({"q": "y"}, "alice")
    assert denied.value.session_id == "alice"
    assert brake.streak("bob") is not None and brake.streak("bob")[1] == 1  # type: ignore[index]
    assert len(received) == 3


def test_the_body_gets_exactly_what_the_wrapper_was_given() -> None:
    received: list[Any] = []

    def body(*args: Any, **kwargs: Any) -> str:
        received.append((args, kwargs))
        return "ok"

    braked = wrap_execute(body, LoopBrake(10), tool="t")
    execution = {"agent": {"id": "a"}}
    braked({"q": 1})
    braked({"q": 1}, execution, "extra", flag=True)
    braked(args={"q": 1}, execution=execution)
    assert received == [
        (({"q": 1},), {}),
        (({"q": 1}, execution, "extra"), {"flag": True}),
        ((), {"args": {"q": 1}, "execution": execution}),
    ]


def test_keywords_that_name_neither_are_the_arguments() -> None:
    brake = LoopBrake(2)
    braked = wrap_execute(lambda **kwargs: "ok", brake, tool="search")
    braked(q="weather", top_k=3)
    braked(q="news", top_k=3)  # not the same call: no denial at 2
    with pytest.raises(LoopBrakeError):
        braked(q="news", top_k=3)


def test_the_current_session_is_used_when_the_call_names_no_agent() -> None:
    brake = LoopBrake(2)
    braked = wrap_execute(lambda args: "ok", brake, tool="t")
    with brake.session("worker-7"):
        braked({})
    assert brake.streak("worker-7") is not None and brake.streak("default") is None


def test_a_braked_function_braked_again_by_the_same_brake_counts_once() -> None:
    brake, other = LoopBrake(3), LoopBrake(4)
    ran = []
    twice = wrap_execute(wrap_execute(lambda args: ran.append(1), brake, tool="t"), brake, tool="t")
    assert twice({}) is None and twice({}) is None
    with pytest.raises(LoopBrakeError) as denied:
        twice({})
    assert denied.value.count == 3 and len(ran) == 2

    # Under two brakes, each counts each call once.
    both = wrap_execute(wrap_execute(lambda args: ran.append(1), other, tool="u"), brake, tool="u")
    for _ in range(2):
        both({})
    assert brake.streak("default")[1] == 2 and other.streak("default")[1] == 2  # type: ignore[index]


def test_a_braked_function_braked_again_under_another_name_counts_once_under_the_outer() -> None:
    brake = LoopBrake(3)
    ran = []

    def read_file(arguments: Any, execution: Any = None) -> str:
        ran.append(1)
        return "ok"

    inner = wrap_execute(read_file, brake, tool="read_file")
    alias = wrap_execute(inner, brake, tool="read")

    @functools.wraps(inner)  # a host's own logging layer in between
    def logged(arguments: Any, execution: Any = None) -> Any:
        return inner(arguments, execution)

    logged_alias = wrap_execute(logged, brake, tool="cat")
    for braked, name in ((alias, "read"), (logged_alias, "cat")):
        ran.clear()
        with pytest.raises(LoopBrakeError) as denied:
            for _ in range(3):
                braked({"path": "a.txt"})
        assert (denied.value.tool_name, denied.value.count) == (name, 3)
        assert len(ran) == 2
    assert brake.check("read_file", {"path": "a.txt"}) == 1  # the inner name got no count


def test_a_tool_under_an_alias_still_counts_the_other_tools_it_calls() -> None:
    brake = LoopBrake(2)

    @brake.tool
    def search(path: str) -> str:
        return "results"

    def read_file(arguments: Any, execution: Any = None) -> str:
        return search(arguments["path"])  # another tool, called with the same values

    alias = wrap_execute(wrap_execute(read_file, brake, tool="read_file"), brake, tool="read")
    alias({"path": "a.txt"})  # read 1, search 1 (a call of its own)
    assert brake.streak("default")[1] == 1  # type: ignore[index]
    with pytest.raises(LoopBrakeError) as denied:
        search("a.txt")
    assert denied.value.tool_name == "search"


def test_a_sync_function_returning_a_coroutine_runs_it_inside_the_call() -> None:
    brake = LoopBrake(3)
    inner = wrap_execute(fetch, brake, tool="fetch")
    outer = wrap_execute(lambda args, execution: inner(args, execution), brake, tool="fetch")

    async def scenario() -> None:
        for _ in range(2):
            assert await outer({"url": "u"}, {"agent": {"id": "a"}}) == "ok"
        with pytest.raises(LoopBrakeError) as denied:
            await outer({"url": "u"}, {"agent": {"id": "a"}})
        assert denied.value.count == 3  # counted once per call, not once per wrapper

    asyncio.run(scenario())


# --- decorate_tool: definitions of every shape -----------------------------------------------


def body(arguments: Any, execution: Any = None) -> str:
    return "ran"


class SlotsWithExecute:
    __slots__ = ("description", "execute", "name")

    def __init__(self) -> None:
        self.name, self.execute, self.description = "search", body, "slots"


class SlotsWithMethod:
    __slots__ = ("description", "name")

    def __init__(self) -> None:
        self.name, self.description = "search", "method"

    def execute(self, arguments: Any, execution: Any = None) -> str:
        return "ran"

    def schema(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}


class PropertyExecute:
    def __init__(self) -> None:
        self.name, self.description, self._body = "search", "property", body

    @property
    def execute(self) -> Any:
        return self._body


class Uncopyable:
    def __init__(self) -> None:
        self.name, self.description, self.execute = "search", "locked", body
        self.lock = threading.Lock()

    def __copy__(self) -> Any:
        raise TypeError("cannot copy a lock")


@dataclasses.dataclass(frozen=True)
class Frozen:
    name: str
    execute: Any
    description: str = "frozen"


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenSlots:
    name: str
    execute: Any
    description: str = "frozen, slots"


@dataclasses.dataclass
class LateExecute:
    name: str
    description: str = "late"
    execute: Any = dataclasses.field(init=False, default=body)


class Record(NamedTuple):
    name: str
    execute: Any
    description: str = "record"


def shapes() -> list[Any]:
    return [
        SlotsWithExecute(),
        SlotsWithMethod(),
        PropertyExecute(),
        Uncopyable(),
        Frozen("search", body),
        FrozenSlots("search", body),
        LateExecute("search"),
        Record("search", body),
        types.SimpleNamespace(name="search", execute=body, description="namespace"),
    ]


def read(definition: Any, field: str) -> Any:
    return definition[field] if isinstance(definition, dict) else getattr(definition, field)


@pytest.mark.parametrize("original", shapes(), ids=lambda d: type(d).__name__)
def test_decorate_tool_brakes_every_shape_and_leaves_the_original_alone(original: Any) -> None:
    execute_before = original.execute
    braked = decorate_tool(original, LoopBrake(2))

    assert braked is not original
    assert isinstance(braked, type(original))
    assert braked.name == original.name and braked.description == original.description
    assert braked.execute({"q": 1}) == "ran"
    with pytest.raises(LoopBrakeError) as denied:
        braked.execute({"q": 1})
    assert denied.value.tool_name == "search"
    # The original is unchanged and unbraked.
    assert original.execute == execute_before
    for _ in range(3):
        assert original.execute({"q": 1}) == "ran"


def test_a_proxied_definition_reads_every_other_attribute_from_the_original() -> None:
    original = SlotsWithMethod()
    braked = decorate_tool(original, LoopBrake(2))
    assert braked.schema() == {"name": "search", "description": "method"}
    original.description = "changed"
    assert braked.description == "changed"  # read through, not a stale copy
    assert "schema" in dir(braked)
    assert repr(original) in repr(braked)


@pytest.mark.parametrize(
    "mapping",
    [
        {"name": "search", "execute": body, "type": "function"},
        collections.OrderedDict(name="search", execute=body, type="function"),
        types.MappingProxyType({"name": "search", "execute": body, "type": "function"}),
    ],
    ids=["dict", "OrderedDict", "mappingproxy"],
)
def test_decorate_tool_brakes_mappings(mapping: Any) -> None:
    snapshot = dict(mapping)
    braked = decorate_tool(mapping, LoopBrake(2))
    assert dict(mapping) == snapshot
    assert {k: v for k, v in braked.items() if k != "execute"} == {
        k: v for k, v in snapshot.items() if k != "execute"
    }
    if isinstance(mapping, dict):
        assert type(braked) is type(mapping)
    braked["execute"]({})
    with pytest.raises(LoopBrakeError):
        braked["execute"]({})


def test_decorate_tool_twice_with_one_brake_counts_once() -> None:
    brake = LoopBrake(3)
    twice = decorate_tool(decorate_tool(Frozen("search", body), brake), brake)
    twice.execute({}), twice.execute({})
    with pytest.raises(LoopBrakeError) as denied:
        twice.execute({})
    assert denied.value.count == 3


def test_a_definition_without_a_name_is_counted_under_its_bodys_name() -> None:
    brake = LoopBrake(2)
    braked = decorate_tool({"execute": body}, brake)
    braked["execute"]({})
    with pytest.raises(LoopBrakeError) as denied:
        braked["execute"]({})
    assert denied.value.tool_name == "body"


# --- LoopBrake.tool --------------------------------------------------------------------------


def test_brake_tool_binds_the_call_to_the_signature_with_defaults() -> None:
    brake = LoopBrake(3)
    ran = []

    @brake.tool
    def search(q: str, top_k: int = 3) -> str:
        """Search the web."""
        ran.append(q)
        return f"results for {q}"

    assert search.__name__ == "search" and search.__doc__ == "Search the web."
    assert list(inspect.signature(search).parameters) == ["q", "top_k"]
    assert inspect.signature(search) == inspect.signature(search.__wrapped__)  # type: ignore[attr-defined]
    assert search("weather") == "results for weather"
    assert brake.streak("default") == (
        hash_prefix(call_hash("search", {"q": "weather", "top_k": 3})),
        1,
    )
    search(q="weather", top_k=3)  # the same call, spelled another way
    with pytest.raises(LoopBrakeError) as denied:
        search("weather", 3)
    assert denied.value.count == 3 and denied.value.tool_name == "search"
    assert ran == ["weather", "weather"]


def test_brake_tool_star_args_are_a_list_and_star_kwargs_top_level_keys() -> None:
    brake = LoopBrake(5)

    @brake.tool(name="grep")
    def find(pattern: str, *paths: str, ignore_case: bool = False, **options: Any) -> None:
        return None

    find("TODO", "a.py", "b.py", context=2)
    expected = {
        "pattern": "TODO",
        "paths": ["a.py", "b.py"],
        "ignore_case": False,
        "context": 2,
    }
    assert brake.streak("default") == (hash_prefix(call_hash("grep", expected)), 1)


def test_brake_tool_sessions_explicit_current_and_default() -> None:
    brake = LoopBrake(5)

    @brake.tool
    def ping() -> str:
        return "pong"

    @brake.tool(session_id="pinned")
    def pinned() -> str:
        return "pong"

    ping()
    with brake.session("agent-1"):
        ping()
        pinned()
    assert brake.streak("default")[1] == 1  # type: ignore[index]
    assert brake.streak("agent-1")[1] == 1  # type: ignore[index]
    assert brake.streak("pinned") == (hash_prefix(call_hash("pinned", {})), 1)


def test_brake_tool_async_checks_before_the_body_starts() -> None:
    brake = LoopBrake(2)
    started = []

    @brake.tool
    async def fetch_page(url: str) -> str:
        started.append(url)
        return "page"

    assert inspect.iscoroutinefunction(fetch_page)

    async def scenario() -> None:
        assert await fetch_page("u") == "page"
        with pytest.raises(LoopBrakeError):
            await fetch_page(url="u")

    asyncio.run(scenario())
    assert started == ["u"]


def test_brake_tool_on_a_method_leaves_the_instance_out() -> None:
    brake = LoopBrake(2)

    class Toolkit:
        @brake.tool
        def lookup(self, key: str) -> str:
            return key

    Toolkit().lookup("k")
    assert brake.streak("default") == (hash_prefix(call_hash("lookup", {"key": "k"})), 1)
    with pytest.raises(LoopBrakeError):
        Toolkit().lookup(key="k")


def test_brake_tool_a_call_that_does_not_fit_raises_the_functions_own_error() -> None:
    brake = LoopBrake(1)

    @brake.tool
    def search(q: str) -> str:
        return q

    with pytest.raises(TypeError, match="argument"):
        search()  # type: ignore[call-arg]
    assert len(brake) == 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    q=JSON,
    top_k=st.one_of(st.none(), JSON),
    extra=st.dictionaries(st.sampled_from(["x", "y"]), JSON),
)
def test_brake_tool_identity_is_the_call_hash_of_the_bound_arguments(
    q: Any, top_k: Any, extra: dict[str, Any]
) -> None:
    brake = LoopBrake(1000)

    @brake.tool(name="search")
    def tool(q: Any, top_k: Any = 10, **options: Any) -> None:
        return None

    if top_k is None:
        tool(q, **extra)
        expected = {"q": q, "top_k": 10, **extra}
    else:
        tool(q=q, top_k=top_k, **extra)
        expected = {"q": q, "top_k": top_k, **extra}
    assert brake.streak("default") == (hash_prefix(call_hash("search", expected)), 1)
