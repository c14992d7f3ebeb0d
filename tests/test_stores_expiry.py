"""Expiry: state no call touched for session_ttl seconds is forgotten, and the file stays bounded.

The SQLite store takes a clock, so these tests move time instead of waiting for it (the Redis
store's expiry is the server's own EXPIRE, tested in test_stores_failures.py).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from dsh_loop_brake.stores import BreakerDenial, MemoryStore, SQLiteStore

A = hashlib.sha256(b"a").digest()
B = hashlib.sha256(b"b").digest()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        count: int = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return count


def test_a_streak_left_alone_for_the_ttl_starts_again_at_one(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "b.sqlite3", session_ttl=10, clock=clock)
    assert [store.advance_streak("s", A) for _ in range(2)] == [1, 2]
    clock.now += 9.5  # within the ttl: the streak goes on, and the clock restarts
    assert store.advance_streak("s", A) == 3
    clock.now += 9.5
    assert store.read_streak("s") == (A, 3)
    assert store.count_streaks() == 1
    clock.now += 1
    assert store.read_streak("s") is None
    assert store.count_streaks() == 0
    assert store.advance_streak("s", A) == 1


def test_an_agent_left_alone_for_the_ttl_starts_afresh(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "b.sqlite3", session_ttl=10, clock=clock)
    limits = {"duplicate_limit": 2, "window": 5, "cap": 3}
    assert store.judge_call("ag", A, **limits) is None
    assert store.judge_call("ag", A, **limits) == BreakerDenial("duplicate", 2, 2, True)
    clock.now += 9  # a denied call touches the agent too
    assert store.judge_call("ag", B, **limits) is None
    clock.now += 10
    assert store.breaker_calls("ag") == 0
    assert store.count_agents() == 0
    # Window, count and incident marks are all gone: the same call is the first again.
    assert store.judge_call("ag", A, **limits) is None
    assert store.judge_call("ag", A, **limits) == BreakerDenial("duplicate", 2, 2, True)
    assert store.breaker_calls("ag") == 1


def test_new_sessions_purge_expired_ones_so_the_file_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    clock = Clock()
    store = SQLiteStore(path, session_ttl=60, clock=clock)
    for number in range(50):
        store.advance_streak(f"old-{number}", A)
    clock.now += 3 * 3600  # past the hour its expiry fell in, so a purge may take it
    for number in range(20):  # each new session purges at most two expired ones
        store.advance_streak(f"new-{number}", A)
    assert rows(path, "streaks") == 20 + 50 - 2 * 20
    for number in range(20, 40):
        store.advance_streak(f"new-{number}", A)
    assert rows(path, "streaks") == 40  # every expired session is gone
    assert store.count_streaks() == 40
    # A session that keeps calling is never purged, however long it has been around.
    for _ in range(100):
        clock.now += 30
        store.advance_streak("busy", A)
        store.advance_streak(f"fresh-{clock.now}", A)
    assert store.read_streak("busy") == (A, 100)


def test_new_agents_purge_expired_ones_with_their_windows(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    clock = Clock()
    store = SQLiteStore(path, session_ttl=60, clock=clock)
    limits = {"duplicate_limit": 5, "window": 10, "cap": 0}
    for number in range(6):
        for call in range(4):
            store.judge_call(f"old-{number}", hashlib.sha256(bytes([call])).digest(), **limits)
    assert rows(path, "agent_window") == 24
    clock.now += 3 * 3600  # past the hour its expiry fell in, so a purge may take it
    for number in range(3):
        store.judge_call(f"new-{number}", A, **limits)
    assert rows(path, "agents") == 3
    assert rows(path, "agent_window") == 3


def test_the_memory_store_never_expires_anything() -> None:
    store = MemoryStore()
    assert store.session_ttl is None
    store.advance_streak("s", A)
    store.judge_call("ag", A, duplicate_limit=2, window=5, cap=0)
    assert store.read_streak("s") == (A, 1)
    assert store.breaker_calls("ag") == 1
