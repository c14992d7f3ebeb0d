"""One random sequence of operations through MemoryStore, SQLiteStore and RedisStore: every
result and every error must be the same on all three."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from _redis_server import RedisServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_loop_brake.stores import MemoryStore, RedisStore, SQLiteStore, Store

SESSIONS = ["default", "agent-1", "", "\ud83d", "a\x00b", "*", "streak:x"]
AGENTS: list[str | None] = [None, "agent-1", "agent-2", "", "\udfff"]
DIGESTS: list[object] = [hashlib.sha256(bytes([n])).digest() for n in range(3)]
BAD_DIGESTS: list[object] = [b"short", "a" * 32, None, bytearray(32)]
LIMITS: list[object] = [1, 2, 3, 4]
BAD_LIMITS: list[object] = [0, -1, True, 2.0, 2**53]

sessions = st.sampled_from(SESSIONS)
digests = st.sampled_from(DIGESTS)

OPERATIONS = st.one_of(
    st.tuples(st.just("advance_streak"), sessions, digests),
    st.tuples(st.just("advance_streak"), sessions, digests),  # twice as likely: streaks grow
    st.tuples(st.just("read_streak"), sessions),
    st.tuples(st.just("forget_streaks"), st.one_of(st.none(), sessions)),
    st.tuples(st.just("count_streaks")),
    st.tuples(
        st.just("judge_call"),
        st.sampled_from(AGENTS),
        st.one_of(digests, st.none()),
        st.sampled_from(LIMITS),
        st.sampled_from([1, 2, 3, 5, 8]),
        st.sampled_from([0, 0, 3, 6, 10]),
    ),
    st.tuples(st.just("breaker_calls"), st.sampled_from(AGENTS)),
    st.tuples(st.just("forget_breaker")),
    st.tuples(st.just("count_agents")),
    st.tuples(st.just("close")),
    # What every store must refuse in the same words.
    st.tuples(st.just("advance_streak"), st.sampled_from([None, 3, b"s"]), digests),
    st.tuples(st.just("advance_streak"), sessions, st.sampled_from(BAD_DIGESTS)),
    st.tuples(
        st.just("judge_call"),
        st.sampled_from([*AGENTS, 1]),
        st.one_of(digests, st.sampled_from(BAD_DIGESTS)),
        st.sampled_from([*LIMITS, *BAD_LIMITS]),
        st.sampled_from([1, 5, *BAD_LIMITS]),
        st.sampled_from([0, 3, -1, True]),
    ),
)


def run(store: Store, operation: tuple[Any, ...]) -> object:
    name, *args = operation
    try:
        if name == "judge_call":
            agent, call, limit, window, cap = args
            return store.judge_call(agent, call, duplicate_limit=limit, window=window, cap=cap)
        return getattr(store, name)(*args)
    except Exception as error:  # compared across the stores, type and message
        return ("raised", type(error).__name__, str(error))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("property")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, max_size=40))
def test_every_store_gives_the_same_answers(
    operations: list[tuple[Any, ...]], redis_server: RedisServer, workdir: Path
) -> None:
    name = uuid.uuid4().hex
    memory = MemoryStore()
    sqlite = SQLiteStore(workdir / f"{name}.sqlite3")
    redis = RedisStore(redis_server.url, prefix=f"prop:{name}:")
    try:
        for number, operation in enumerate(operations):
            expected = run(memory, operation)
            for store in (sqlite, redis):
                assert run(store, operation) == expected, (number, operation, store)
    finally:
        sqlite.close()
        redis.forget_streaks()
        redis.forget_breaker()
        redis.close()
