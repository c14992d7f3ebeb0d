"""Exact counts under threads and asyncio tasks (SPEC §2 thread safety, §7 reliability)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeError, wrap_execute

THREADS = 8


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    # Switch threads as often as the interpreter allows, so a lost update would show.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run_together(worker: Callable[[int], None], threads: int = THREADS) -> None:
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def start(index: int) -> None:
        try:
            barrier.wait()
            worker(index)
        except BaseException as error:  # surfaced below, in the test's thread
            errors.append(error)

    pool = [threading.Thread(target=start, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []


def test_eight_threads_on_one_session_lose_no_update() -> None:
    calls_each = 2_000
    brake = LoopBrake(10**9)
    args = {"command": "ls", "flags": ["-l", "-a"], "depth": 2}

    def worker(_: int) -> None:
        for _ in range(calls_each):
            brake.check("shell", args, session_id="shared")

    run_together(worker)
    streak = brake.streak("shared")
    assert streak is not None
    assert streak[1] == THREADS * calls_each


def test_threads_on_their_own_sessions_keep_their_own_counts() -> None:
    brake = LoopBrake(10**9)

    def worker(index: int) -> None:
        for _ in range(1_000 + index):
            brake.check("t", {"x": 1}, session_id=f"agent-{index}")

    run_together(worker)
    assert len(brake) == THREADS
    for index in range(THREADS):
        assert brake.streak(f"agent-{index}") is not None
        assert brake.streak(f"agent-{index}")[1] == 1_000 + index  # type: ignore[index]


@pytest.mark.parametrize("limit", [1, 2, 3, 25])
def test_under_contention_exactly_limit_minus_one_identical_calls_pass(limit: int) -> None:
    brake = LoopBrake(limit)
    calls_each = 50
    passed: list[int] = []
    denied: list[int] = []
    lock = threading.Lock()

    def worker(_: int) -> None:
        for _ in range(calls_each):
            try:
                count = brake.check("search", {"q": "weather"}, session_id="s")
            except LoopBrakeError as error:
                with lock:
                    denied.append(error.count)
            else:
                with lock:
                    passed.append(count)

    run_together(worker)
    total = THREADS * calls_each
    assert sorted(passed) == list(range(1, limit))
    # every denial saw its own, distinct position in the streak
    assert sorted(denied) == list(range(limit, total + 1))


def test_a_thread_pool_running_braked_bodies_counts_exactly() -> None:
    brake = LoopBrake(5)
    ran: list[int] = []
    braked = wrap_execute(lambda args, execution: ran.append(1), brake, tool="fetch")
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        futures = [pool.submit(braked, {"url": "u"}, {"agent": {"id": "a"}}) for _ in range(200)]
    outcomes = [future.exception() for future in futures]
    assert sum(outcome is None for outcome in outcomes) == 4 == len(ran)
    assert all(isinstance(o, LoopBrakeError) for o in outcomes if o is not None)


TASKS = 1_000


def test_a_thousand_asyncio_tasks_lose_no_update() -> None:
    brake = LoopBrake(10**9)

    async def body(args: Any, execution: Any = None) -> None:
        await asyncio.sleep(0)

    braked = wrap_execute(body, brake, tool="fetch")

    async def one() -> None:
        await asyncio.sleep(0)
        await braked({"url": "https://example.org"}, {"agent": {"id": "a"}})

    async def scenario() -> None:
        await asyncio.gather(*(one() for _ in range(TASKS)))

    asyncio.run(scenario())
    assert brake.streak("a") is not None
    assert brake.streak("a")[1] == TASKS  # type: ignore[index]


@pytest.mark.parametrize("limit", [1, 3, 40])
def test_a_thousand_asyncio_tasks_exactly_limit_minus_one_pass(limit: int) -> None:
    brake = LoopBrake(limit)
    started: list[int] = []

    async def body(args: Any, execution: Any = None) -> str:
        started.append(1)
        await asyncio.sleep(0)
        return "ok"

    braked = wrap_execute(body, brake, tool="fetch")

    async def one() -> Any:
        await asyncio.sleep(0)
        return await braked({"url": "u"}, {"agent": {"id": "a"}})

    async def scenario() -> list[Any]:
        return await asyncio.gather(*(one() for _ in range(TASKS)), return_exceptions=True)

    results = asyncio.run(scenario())
    assert results.count("ok") == limit - 1 == len(started)
    counts = sorted(r.count for r in results if isinstance(r, LoopBrakeError))
    assert counts == list(range(limit, TASKS + 1))


def test_asyncio_tasks_checking_from_worker_threads_count_exactly() -> None:
    brake = LoopBrake(7)

    async def scenario() -> list[Any]:
        calls = [
            asyncio.to_thread(brake.check, "t", {"i": [1, 2, 3]}, session_id="s")
            for _ in range(TASKS)
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(scenario())
    assert sorted(r for r in results if isinstance(r, int)) == list(range(1, 7))
    assert sorted(r.count for r in results if isinstance(r, LoopBrakeError)) == list(
        range(7, TASKS + 1)
    )
