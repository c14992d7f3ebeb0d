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


# --- the same, through the brakes ---------------------------------------------------------------

TOOLS = ["search", "read", "todo_write"]  # todo_write: exempt from the breaker by default
ARGUMENTS: list[object] = [
    {"q": "weather"},
    {"q": "weather", "reason": "annotation only"},  # the same call to the breaker (ignoreArgs)
    {"q": "news"},
    {},
    {"q": {1, 2}},  # not identifiable: allowed, not counted, the streak ends
]


class Agent:
    """An agent object with an id: the memory store keeps its state with the object, a shared
    store under its id. One object per id (and no string of that id), so both hold the same
    calls."""

    def __init__(self, ident: str) -> None:
        self.id = ident


BRAKE_AGENTS: list[object] = [None, "", "agent-1", "agent-2", Agent("agent-3")]

BRAKE_OPERATIONS = st.one_of(
    st.tuples(
        st.just("check"),
        st.sampled_from(TOOLS),
        st.sampled_from(range(len(ARGUMENTS))),
        st.sampled_from([None, *SESSIONS[:3]]),
    ),
    st.tuples(
        st.just("check_call"),
        st.sampled_from(TOOLS),
        st.sampled_from(range(len(ARGUMENTS))),
        st.sampled_from(range(len(BRAKE_AGENTS))),
    ),
    st.tuples(st.just("streak"), st.sampled_from(SESSIONS[:3])),
    st.tuples(st.just("reset"), st.one_of(st.none(), st.sampled_from(SESSIONS[:3]))),
    st.tuples(st.just("len")),
    st.tuples(st.just("calls"), st.sampled_from(range(len(BRAKE_AGENTS)))),
    st.tuples(st.just("breaker_reset")),
    st.tuples(st.just("breaker_len")),
    st.tuples(st.just("close")),
    # What every store must refuse in the same words, through the brakes.
    st.tuples(st.just("check_bad_session"), st.sampled_from([3, b"s"])),
)


def run_brakes(brake: Any, breaker: Any, operation: tuple[Any, ...]) -> object:
    from dsh_loop_brake import LoopBrakeError
    from dsh_loop_brake.circuit_breaker import CircuitBreakerError

    name, *args = operation
    try:
        if name == "check":
            tool, argument, session = args
            return brake.check(tool, ARGUMENTS[argument], session_id=session)
        if name == "check_call":
            tool, argument, agent = args
            return breaker.check_call(tool, ARGUMENTS[argument], agent=BRAKE_AGENTS[agent])
        if name == "streak":
            return brake.streak(args[0])
        if name == "reset":
            return brake.reset(args[0])
        if name == "len":
            return len(brake)
        if name == "calls":
            return breaker.calls(BRAKE_AGENTS[args[0]])
        if name == "breaker_reset":
            return breaker.reset()
        if name == "breaker_len":
            return len(breaker)
        if name == "close":
            return brake.store.close()
        if name == "check_bad_session":
            return brake.check("search", {}, session_id=args[0])
        raise AssertionError(name)
    except LoopBrakeError as denial:
        return ("denied", str(denial), denial.count, denial.hash_prefix, denial.session_id)
    except CircuitBreakerError as denial:
        return ("denied", str(denial), denial.kind, denial.count, denial.limit, denial.session_id)
    except Exception as error:
        return ("raised", type(error).__name__, str(error))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    operations=st.lists(BRAKE_OPERATIONS, max_size=40),
    max_repeats=st.integers(1, 4),
    limits=st.sampled_from([(2, 2, 0), (2, 4, 5), (3, 5, 0), (3, 8, 12)]),
)
def test_the_brakes_give_the_same_answers_on_every_store(
    operations: list[tuple[Any, ...]],
    max_repeats: int,
    limits: tuple[int, int, int],
    redis_server: RedisServer,
    workdir: Path,
) -> None:
    from dsh_loop_brake import LoopBrake
    from dsh_loop_brake.circuit_breaker import CircuitBreaker, resolve_config

    limit, window, cap = limits
    config = resolve_config({"duplicateLimit": limit, "window": window, "maxCallsPerAgent": cap})
    name = uuid.uuid4().hex
    stores: list[Store] = [
        MemoryStore(),
        SQLiteStore(workdir / f"brakes-{name}.sqlite3"),
        RedisStore(redis_server.url, prefix=f"prop-brakes:{name}:"),
    ]
    # One store for both brakes, as a profile with one store URL for both rows has it.
    lanes = [(LoopBrake(max_repeats, store=s), CircuitBreaker(config, store=s)) for s in stores]
    try:
        for number, operation in enumerate(operations):
            expected = run_brakes(*lanes[0], operation)
            for brake, breaker in lanes[1:]:
                got = run_brakes(brake, breaker, operation)
                assert got == expected, (number, operation, brake.store)
        for brake, breaker in lanes:
            assert brake.store_errors == 0 and breaker.store_errors == 0
    finally:
        for store in stores[1:]:
            store.forget_streaks()
            store.forget_breaker()
            store.close()
