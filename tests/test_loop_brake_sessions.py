"""The current session (§2): ``with brake.session(...)`` and ``check(..., session_id=None)``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeError, call_hash, hash_prefix

A = ("search", {"q": "weather"})
PREFIX = hash_prefix(call_hash(*A))


def test_calls_inside_a_session_count_in_it_and_outside_in_default() -> None:
    brake = LoopBrake(max_repeats=3)
    with brake.session("agent-1") as current:
        assert current == "agent-1"
        assert brake.check(*A) == 1
        assert brake.check(*A) == 2
    assert brake.check(*A) == 1  # "default" is another session
    assert brake.streak("agent-1") == (PREFIX, 2)
    assert brake.streak("default") == (PREFIX, 1)
    with brake.session("agent-1"), pytest.raises(LoopBrakeError) as denied:
        brake.check(*A)
    assert denied.value.session_id == "agent-1" and denied.value.count == 3


def test_an_explicit_session_id_beats_the_current_session() -> None:
    brake = LoopBrake()
    with brake.session("agent-1"):
        brake.check(*A, session_id="agent-2")
        brake.check(*A, session_id=None)
    assert brake.streak("agent-2") == (PREFIX, 1)
    assert brake.streak("agent-1") == (PREFIX, 1)
    assert brake.streak("default") is None


def test_nested_sessions_restore_the_outer_one_also_after_an_error() -> None:
    brake = LoopBrake(max_repeats=10)
    with brake.session("outer"):
        brake.check(*A)
        with pytest.raises(RuntimeError), brake.session("inner"):
            brake.check(*A)
            raise RuntimeError("the tool failed")
        brake.check(*A)
    brake.check(*A)
    assert brake.streak("outer") == (PREFIX, 2)
    assert brake.streak("inner") == (PREFIX, 1)
    assert brake.streak("default") == (PREFIX, 1)


def test_a_session_belongs_to_its_brake() -> None:
    first, second = LoopBrake(), LoopBrake()
    with first.session("agent-1"):
        second.check(*A)
        first.check(*A)
    assert second.streak("default") == (PREFIX, 1)
    assert first.streak("agent-1") == (PREFIX, 1)
    assert first.streak("default") is None


def test_sessions_are_per_thread() -> None:
    brake = LoopBrake(max_repeats=1000)
    ready, go = threading.Barrier(4, timeout=30), threading.Event()

    def agent(name: str) -> None:
        with brake.session(name):
            ready.wait()
            assert go.wait(timeout=30)
            for _ in range(50):
                brake.check(*A)

    threads = [threading.Thread(target=agent, args=(f"agent-{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
        with brake.session("main"):
            go.set()
            for _ in range(50):
                brake.check(*A)
    finally:
        go.set()
        for thread in threads:
            thread.join(timeout=30)
    for name in ("agent-0", "agent-1", "agent-2", "main"):
        assert brake.streak(name) == (PREFIX, 50)
    assert brake.streak("default") is None


def test_sessions_are_per_asyncio_task() -> None:
    brake = LoopBrake(max_repeats=1000)

    async def agent(name: str) -> int:
        with brake.session(name):
            count = 0
            for _ in range(20):
                count = brake.check(*A)
                await asyncio.sleep(0)  # every task runs between two of another's calls
            return count

    async def main() -> list[int]:
        return list(await asyncio.gather(*(agent(f"task-{n}") for n in range(5))))

    assert asyncio.run(main()) == [20] * 5
    assert len(brake) == 5 and brake.streak("default") is None


def test_a_task_started_inside_a_session_inherits_it_and_changes_it_only_for_itself() -> None:
    brake = LoopBrake(max_repeats=1000)

    async def child() -> None:
        brake.check(*A)
        with brake.session("child"):
            brake.check(*A)

    async def main() -> None:
        with brake.session("parent"):
            await asyncio.create_task(child())
            brake.check(*A)

    asyncio.run(main())
    assert brake.streak("parent") == (PREFIX, 2)
    assert brake.streak("child") == (PREFIX, 1)


@pytest.mark.parametrize("bad", [None, 7, b"agent", ["agent"]])
def test_a_session_id_must_be_a_str(bad: Any) -> None:
    with pytest.raises(TypeError, match="session id must be a str"):
        LoopBrake().session(bad)


def test_a_session_scope_is_entered_once_at_a_time_and_may_be_used_again() -> None:
    brake = LoopBrake(max_repeats=10)
    scope = brake.session("agent-1")
    with scope:
        with pytest.raises(RuntimeError, match="already entered"), scope:
            pass
        brake.check(*A)
    with scope:
        brake.check(*A)
    assert brake.streak("agent-1") == (PREFIX, 2)


def test_streak_digest_is_the_whole_digest_of_the_current_call() -> None:
    brake = LoopBrake(max_repeats=10)
    assert brake.streak_digest("s") is None
    brake.check(*A, session_id="s")
    brake.check(*A, session_id="s")
    assert brake.streak_digest("s") == (bytes.fromhex(call_hash(*A)), 2)
    brake.check("t", {"x": b"not json"}, session_id="s")
    assert brake.streak_digest("s") is None
