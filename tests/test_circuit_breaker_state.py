"""Where the circuit breaker keeps its state: per agent object, weakly held, and bounded."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from dataclasses import dataclass
from typing import Any

from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config
from dsh_loop_brake.harness import Agent, ToolExecution


def breaker(**config: Any) -> CircuitBreaker:
    return CircuitBreaker(resolve_config(config))


def call(b: CircuitBreaker, agent: Any, arguments: Any = None, name: str = "search") -> bool:
    """Whether the breaker lets the call run."""
    return b.check(ToolExecution("c", name, arguments, agent)) is None


def test_per_agent_state_disappears_with_the_agent() -> None:
    b = breaker(duplicateLimit=2, window=2)
    agent = Agent("sub-1")
    assert call(b, agent, {"q": 1})
    assert b.calls(agent) == 1
    assert len(b) == 1
    del agent
    gc.collect()
    assert len(b) == 0


def test_a_cycle_holding_the_agent_is_collected_too() -> None:
    b = breaker()
    agent: Any = Agent("sub")
    agent.me = agent  # only the cycle collector can free it
    call(b, agent, 1)
    assert len(b) == 1
    del agent
    gc.collect()
    assert len(b) == 0


def test_state_is_per_agent_object_not_per_equal_value() -> None:
    @dataclass(frozen=True)
    class ValueAgent:  # compares and hashes by value
        id: str

    @dataclass
    class UnhashableAgent:  # eq=True without frozen: __hash__ is None
        id: str

    for make in (ValueAgent, UnhashableAgent, Agent):
        b = breaker(duplicateLimit=2, window=2)
        first, second = make("same-id"), make("same-id")
        assert call(b, first, 1)
        assert call(b, second, 1)  # an equal agent is still another agent
        assert not call(b, first, 1)
        assert b.calls(first) == 1 and b.calls(second) == 1


def test_a_new_agent_never_inherits_a_dead_agents_state() -> None:
    b = breaker(maxCallsPerAgent=1)
    for _ in range(200):  # fresh objects, often at a reused address
        assert call(b, Agent("worker"), {"q": 1})
    assert len(b) == 0


def test_calls_without_an_agent_share_one_host_level_state() -> None:
    b = breaker(duplicateLimit=3, window=10)
    assert b.check({"name": "search", "arguments": 1}) is None
    assert b.check(ToolExecution("2", "search", 1, None)) is None
    assert b.check({"name": "search", "arguments": 1, "agent": None}) is not None
    assert b.calls(None) == 2
    assert len(b) == 0  # the host-level state is not an agent's
    assert call(b, Agent("a"), 1)  # agents are not affected by the host's repeats


def test_agents_that_cannot_be_weakly_referenced_are_keyed_by_their_id() -> None:
    class Slotted:
        __slots__ = ("id",)

        def __init__(self, ident: str) -> None:
            self.id = ident

    b = breaker(duplicateLimit=2, window=2)
    assert call(b, {"id": "m-1"}, 1)
    assert not call(b, {"id": "m-1"}, 1)  # a fresh dict each call: the same agent by id
    assert call(b, {"id": "m-2"}, 1)
    assert call(b, Slotted("s-1"), 1)
    assert not call(b, Slotted("s-1"), 1)
    assert call(b, {"id": 7}, 1)
    assert len(b) == 4


def test_the_id_keyed_store_is_bounded_and_drops_the_least_recently_active() -> None:
    b = breaker()
    assert call(b, {"id": "old"}, 0)
    assert call(b, {"id": "kept"}, 0)
    for i in range(5000):
        assert call(b, {"id": f"agent-{i}"}, i)
        if i % 100 == 0:
            assert call(b, {"id": "kept"}, i)  # stays active
    assert len(b) <= 1024
    assert b.calls({"id": "old"}) == 0  # dropped
    assert b.calls({"id": "kept"}) == 51


def test_an_unweakrefable_agent_without_an_id_uses_the_host_level_state() -> None:
    b = breaker(duplicateLimit=2, window=2)
    assert call(b, {"name": "no id here"}, 1)
    assert not call(b, ("tuple", "agent"), 1)
    assert b.calls(None) == 1
    assert len(b) == 0


def test_reset_forgets_everything() -> None:
    b = breaker(duplicateLimit=2, window=2)
    agent = Agent("a")
    call(b, agent, 1)
    call(b, None, 1)
    call(b, {"id": "d"}, 1)
    b.reset()
    assert len(b) == 0
    assert b.calls(agent) == b.calls(None) == b.calls({"id": "d"}) == 0
    assert call(b, agent, 1) and call(b, None, 1)


def test_one_agents_state_is_small_and_fixed_by_the_window() -> None:
    b = breaker(window=200, maxCallsPerAgent=0)
    agent = Agent("a")
    call(b, agent, "warm-up")
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(5_000):  # the ring turns over 25 times
            call(b, agent, {"q": i})
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # 200 digests and their counts


def test_memory_stays_bounded_over_a_million_calls() -> None:
    """A million calls: one agent that lives throughout, 500 that come and go, repeats, denials.

    tracemalloc slows every allocation several times over, so it traces the last 100,000 calls
    (a leak of any size per call or per agent shows there as growth), while the interpreter's
    allocated-block count, which costs nothing to read, covers the whole million.
    """
    b = breaker(maxCallsPerAgent=600, duplicateLimit=6, window=200)
    # Odd calls repeat one of 40 queries (the window trips on them), even ones never repeat.
    executions = [
        ToolExecution(str(i), "search", {"q": i % 40 if i % 2 else i}, None) for i in range(1000)
    ]
    check = b.check
    keeper = Agent("long-lived")

    def run(agent: Any, count: int) -> None:
        for execution in executions:
            execution.agent = agent
        for i in range(count):
            check(executions[i % 1000])

    def phase(number: int) -> None:
        run(keeper, 1000)  # past its cap after 600 calls: denied, and not recorded
        run(Agent(f"short-{number}"), 800)
        run(None, 200)

    for number in range(5):  # warm-up: every structure at its steady size
        phase(number)
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    for number in range(5, 450):
        phase(number)
    gc.collect()
    blocks_after_900k = sys.getallocatedblocks()
    tracemalloc.start()
    try:
        traced_before, _ = tracemalloc.get_traced_memory()
        for number in range(450, 500):
            phase(number)
        for execution in executions:
            execution.agent = None
        gc.collect()
        traced_after, traced_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    gc.collect()
    assert traced_after - traced_before < 32 * 1024
    assert traced_peak - traced_before < 512 * 1024
    assert blocks_after_900k - blocks_before < 2_000  # 900,000 calls and 445 agents
    assert len(b) <= 1  # only the long-lived agent is still held
