"""Reliability under load and faults: exact counts, dispose in flight, exceptions pass through."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

from dsh_loop_brake import LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin
from dsh_loop_brake.harness import (
    Agent,
    Context,
    Fiber,
    Harness,
    Row,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
)

LOOP_BRAKE_ROW = Row("loop-brake", "dsh-loop-brake", {"maxRepeats": 4})


class CountingBody:
    """A thread-safe tool body that counts the calls that really ran."""

    def __init__(self) -> None:
        self.ran = 0
        self._lock = threading.Lock()

    def __call__(self, args: Any, execution: Any) -> str:
        with self._lock:
            self.ran += 1
        return "ok"


def test_16_threads_x_50000_calls_across_1000_sessions_give_exact_counts() -> None:
    """Every session gets the same call from all threads: exactly maxRepeats - 1 run per session.

    The streak of an identical call only grows, whatever the interleaving, so the expected
    numbers are exact even though sixteen threads race on every session.
    """
    threads, calls_per_thread, sessions = 16, 50_000, 1_000
    harness = Harness.from_rows([LOOP_BRAKE_ROW])
    body = CountingBody()
    harness.tools.register(ToolDefinition("search", body))
    agents = [Agent(f"agent-{n}") for n in range(sessions)]
    outcomes: list[Counter[str]] = [Counter() for _ in range(threads)]

    def worker(index: int) -> None:
        async def run() -> None:
            tally = outcomes[index]
            for i in range(calls_per_thread):
                session = (i * threads + index) % sessions
                result = await harness.execute(
                    ToolExecution(
                        f"t{index}-{i}", "search", {"q": f"weather in {session}"}, agents[session]
                    )
                )
                tally["denied" if result.is_error else "allowed"] += 1
                if result.is_error:
                    assert result.error is not None and result.error["code"] == "LOOP_BRAKE"

        asyncio.run(run())

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    total = sum(outcomes, Counter())
    harness.dispose()

    assert total["allowed"] == sessions * 3
    assert total["denied"] == threads * calls_per_thread - sessions * 3
    assert body.ran == sessions * 3


def test_10000_concurrent_asyncio_tasks_give_exact_counts() -> None:
    harness = Harness.from_rows([LOOP_BRAKE_ROW])
    body = CountingBody()

    async def slow_search(args: Any, execution: Any) -> str:
        await asyncio.sleep(0)  # let every other task interleave inside the body
        return body(args, execution)

    harness.tools.register(ToolDefinition("search", slow_search))
    agents = [Agent(f"agent-{n}") for n in range(100)]

    async def one(n: int) -> bool:
        result = await harness.execute(
            ToolExecution(f"call-{n}", "search", {"q": "weather"}, agents[n % 100])
        )
        return result.is_error

    async def everything() -> list[bool]:
        return await asyncio.gather(*(one(n) for n in range(10_000)))

    denied = asyncio.run(everything())
    harness.dispose()

    assert denied.count(False) == 100 * 3
    assert denied.count(True) == 10_000 - 300
    assert body.ran == 300


def test_dispose_while_calls_are_in_flight_neither_crashes_nor_denies_afterwards() -> None:
    registry = ToolRegistry()
    fiber = Fiber("row loop-brake")
    loop_brake_plugin.apply(Context(registry, fiber), {"maxRepeats": 2})
    release = threading.Event()
    entered = threading.Barrier(5)

    def blocking(args: Any, execution: Any) -> str:
        if args.get("block"):
            entered.wait(timeout=10)
            release.wait(timeout=10)
        return "ok"

    registry.register(ToolDefinition("search", blocking))
    errors: list[BaseException] = []
    after: list[bool] = []
    disposed = threading.Event()

    def in_flight(n: int) -> None:
        try:
            result = asyncio.run(
                registry.execute(ToolExecution(f"c{n}", "search", {"block": True}, Agent(f"a{n}")))
            )
            assert not result.is_error
            disposed.wait(timeout=10)
            for i in range(20):  # after dispose: never denied
                execution = ToolExecution(f"c{n}-{i}", "search", {"q": "x"}, Agent("same"))
                after.append(asyncio.run(registry.execute(execution)).is_error)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=in_flight, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    entered.wait(timeout=10)  # four bodies are running inside both seams
    fiber.dispose()
    release.set()
    disposed.set()
    for thread in threads:
        thread.join()

    assert errors == []
    assert after == [False] * 80
    assert "execute" not in vars(registry) and "register" not in vars(registry)


class ToolFailure(Exception):
    pass


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_tool_exception_passes_through_the_braked_body_as_the_same_object(
    asynchronous: bool,
) -> None:
    registry = ToolRegistry()
    loop_brake_plugin.apply(Context(registry, Fiber("row")), {"maxRepeats": 5})
    failure = ToolFailure("disk full")

    def failing(args: Any, execution: Any) -> None:
        raise failure

    async def failing_async(args: Any, execution: Any) -> None:
        raise failure

    registry.register(ToolDefinition("write", failing_async if asynchronous else failing))
    braked = registry.get("write")
    assert braked is not None
    execution = ToolExecution("c1", "write", {"path": "a"})

    with pytest.raises(ToolFailure) as caught:
        result = braked.execute({"path": "a"}, execution)
        if asynchronous:
            asyncio.run(result)
    assert caught.value is failure


@pytest.mark.parametrize("exception", [KeyboardInterrupt(), asyncio.CancelledError()])
def test_keyboard_interrupt_and_cancellation_pass_through_the_harness_unchanged(
    exception: BaseException,
) -> None:
    harness = Harness.from_rows([LOOP_BRAKE_ROW])

    async def interrupted(args: Any, execution: Any) -> None:
        raise exception

    harness.tools.register(ToolDefinition("search", interrupted))

    async def call() -> None:
        await harness.execute(ToolExecution("c1", "search", {"q": "x"}, Agent("a")))

    with pytest.raises(BaseException) as caught:
        asyncio.run(call())
    harness.dispose()
    assert caught.value is exception


def test_cancelling_a_call_in_flight_leaves_the_brake_counting_exactly() -> None:
    harness = Harness.from_rows([LOOP_BRAKE_ROW])

    async def scenario() -> list[bool]:
        gate = asyncio.Event()

        async def slow(args: Any, execution: Any) -> str:
            gate.set()
            await asyncio.sleep(10)
            return "late"

        async def fast(args: Any, execution: Any) -> str:
            return "ok"

        harness.tools.register(ToolDefinition("slow", slow))
        harness.tools.register(ToolDefinition("search", fast))
        agent = Agent("a")
        task = asyncio.create_task(harness.execute(ToolExecution("c0", "slow", {}, agent)))
        await gate.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        results = []
        for n in range(5):
            execution = ToolExecution(f"c{n + 1}", "search", {"q": "x"}, agent)
            results.append((await harness.execute(execution)).is_error)
        return results

    # The cancelled call counted once; the next, different call starts a new streak of its own.
    assert asyncio.run(scenario()) == [False, False, False, True, True]
    harness.dispose()


def test_denial_from_the_execute_seam_is_raised_by_the_registry_not_returned() -> None:
    registry = ToolRegistry()
    loop_brake_plugin.apply(Context(registry, Fiber("row")), {"maxRepeats": 1})
    registry.register(ToolDefinition("search", CountingBody()))
    with pytest.raises(LoopBrakeError):
        asyncio.run(registry.execute(ToolExecution("c1", "search", {"q": "x"})))
