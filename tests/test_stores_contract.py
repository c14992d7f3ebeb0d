"""The Store contract, store by store: memory, SQLite and a real Redis give the same answers."""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_loop_brake.stores import (
    BreakerDenial,
    MemoryStore,
    SQLiteStore,
    Store,
    StoreConfigError,
    StoreError,
    open_store,
)

KINDS = ["memory", "sqlite", "redis"]


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


A, B, C = digest("a"), digest("b"), digest("c")


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = request.param
    if kind == "memory":
        opened: Store = open_store("memory:")
    elif kind == "sqlite":
        opened = open_store(f"sqlite:{tmp_path / 'brakes.sqlite3'}")
    else:
        opened = open_store(request.getfixturevalue("redis_url"))
    yield opened
    opened.close()


def judge(store: Store, agent: str | None, call: bytes | None, **limits: int) -> object:
    settings = {"duplicate_limit": 3, "window": 5, "cap": 0, **limits}
    return store.judge_call(agent, call, **settings)


# --- streaks ----------------------------------------------------------------------------------


def test_a_streak_grows_while_the_call_repeats_and_restarts_on_another(store: Store) -> None:
    assert [store.advance_streak("s", A) for _ in range(4)] == [1, 2, 3, 4]
    assert store.read_streak("s") == (A, 4)
    assert store.advance_streak("s", B) == 1
    assert store.advance_streak("s", A) == 1  # back to A: 1, not 5
    assert store.read_streak("s") == (A, 1)


def test_sessions_never_share_a_streak(store: Store) -> None:
    store.advance_streak("one", A)
    store.advance_streak("one", A)
    assert store.advance_streak("two", A) == 1
    assert store.read_streak("one") == (A, 2)
    assert store.count_streaks() == 2


def test_any_str_is_a_session_of_its_own(store: Store) -> None:
    # Lone surrogates (JSON can carry them), NUL, the empty string and look-alikes stay apart.
    sessions = ["", "\ud800", "\udc00", "a\x00b", "a", "a\x00", "streak:a", "*", "é", "e\u0301"]
    for number, session in enumerate(sessions, start=1):
        for _ in range(number):
            store.advance_streak(session, A)
    assert [store.read_streak(s) for s in sessions] == [(A, n) for n in range(1, 11)]
    assert store.count_streaks() == len(sessions)


def test_forgetting_one_session_or_all(store: Store) -> None:
    for session in ("x", "y", "z"):
        store.advance_streak(session, A)
    store.forget_streaks("y")
    assert store.read_streak("y") is None
    assert store.count_streaks() == 2
    assert store.advance_streak("y", A) == 1
    store.forget_streaks("never-seen")
    store.forget_streaks()
    assert store.count_streaks() == 0
    assert store.read_streak("x") is None
    assert store.advance_streak("x", A) == 1


# --- windows ----------------------------------------------------------------------------------


def test_the_duplicate_limit_denies_the_nth_identical_call_in_the_window(store: Store) -> None:
    assert judge(store, "ag", A) is None
    assert judge(store, "ag", A) is None
    assert judge(store, "ag", A) == BreakerDenial("duplicate", 3, 3, True)
    # Denied calls are neither recorded nor counted: the count stays at the limit.
    assert judge(store, "ag", A) == BreakerDenial("duplicate", 3, 3, False)
    assert store.breaker_calls("ag") == 2


def test_the_window_forgets_its_oldest_call(store: Store) -> None:
    for call in (A, A, B, C, B):  # a full window of 5
        assert judge(store, "ag", call) is None
    assert judge(store, "ag", C) is None  # evicts the first A
    assert judge(store, "ag", A) is None  # one A left in the window, so this is the second
    assert judge(store, "ag", B) == BreakerDenial("duplicate", 3, 3, True)


def test_a_smaller_window_cuts_the_oldest_calls_first(store: Store) -> None:
    for call in (A, A, B, C, C):
        assert judge(store, "ag", call, window=5) is None
    assert judge(store, "ag", A, window=5) == BreakerDenial("duplicate", 3, 3, True)
    # Cut to the 3 most recent (B, C, C): the two A are gone for good.
    assert judge(store, "ag", A, window=3) is None
    assert judge(store, "ag", A, window=5) is None
    assert judge(store, "ag", C, window=5) == BreakerDenial("duplicate", 3, 3, False)


def test_the_cap_denies_for_good_once_reached(store: Store) -> None:
    for number in range(3):
        assert judge(store, "ag", digest(f"call {number}"), cap=3) is None
    assert judge(store, "ag", digest("another"), cap=3) == BreakerDenial("cap", 3, 3, True)
    assert judge(store, "ag", None, cap=3) == BreakerDenial("cap", 3, 3, False)
    assert store.breaker_calls("ag") == 3
    assert judge(store, "ag", None, cap=0) is None  # 0 disables the cap
    assert store.breaker_calls("ag") == 4


def test_the_cap_is_judged_before_duplicates(store: Store) -> None:
    assert judge(store, "ag", A, cap=2) is None
    assert judge(store, "ag", A, cap=2) is None
    assert judge(store, "ag", A, cap=2) == BreakerDenial("cap", 2, 2, True)
    assert judge(store, "ag", A, cap=0) == BreakerDenial("duplicate", 3, 3, True)


def test_an_unidentified_call_counts_towards_the_cap_only(store: Store) -> None:
    for _ in range(5):
        assert judge(store, "ag", None, duplicate_limit=1) is None
    assert store.breaker_calls("ag") == 5
    assert judge(store, "ag", A, duplicate_limit=1) == BreakerDenial("duplicate", 1, 1, True)


def test_agents_and_the_no_agent_state_are_kept_apart(store: Store) -> None:
    judge(store, "one", A)
    judge(store, "one", A)
    assert judge(store, "two", A) is None
    assert judge(store, None, A) is None
    assert judge(store, "", A) is None  # an empty id is an id, not "no agent"
    assert store.breaker_calls("one") == 2
    assert store.breaker_calls(None) == 1
    assert store.breaker_calls("unknown") == 0
    assert store.count_agents() == 3  # one, two and "": the no-agent state is not counted


def test_forgetting_the_breaker_forgets_every_agent(store: Store) -> None:
    judge(store, "one", A)
    judge(store, None, A)
    store.advance_streak("s", A)
    store.forget_breaker()
    assert store.count_agents() == 0
    assert store.breaker_calls("one") == 0
    assert store.breaker_calls(None) == 0
    assert store.read_streak("s") == (A, 1)  # the loop brake's streaks are another matter
    judge(store, "one", A)
    judge(store, "one", A)
    assert judge(store, "one", A) == BreakerDenial("duplicate", 3, 3, True)  # first again


def test_streaks_and_windows_do_not_touch(store: Store) -> None:
    store.advance_streak("x", A)
    judge(store, "x", A)
    store.forget_streaks()
    assert store.breaker_calls("x") == 1
    assert store.count_agents() == 1


# --- arguments --------------------------------------------------------------------------------

BAD_CALLS = [
    ("advance_streak", (1, A), {}, TypeError),
    ("advance_streak", ("s", A.hex()), {}, TypeError),
    ("advance_streak", ("s", A[:31]), {}, ValueError),
    ("advance_streak", ("s", bytearray(A)), {}, TypeError),
    ("read_streak", (None,), {}, TypeError),
    ("forget_streaks", (b"s",), {}, TypeError),
    ("breaker_calls", (7,), {}, TypeError),
    ("judge_call", (5, A), {"duplicate_limit": 3, "window": 5, "cap": 0}, TypeError),
    ("judge_call", ("a", b""), {"duplicate_limit": 3, "window": 5, "cap": 0}, ValueError),
    ("judge_call", ("a", A), {"duplicate_limit": 0, "window": 5, "cap": 0}, ValueError),
    ("judge_call", ("a", A), {"duplicate_limit": True, "window": 5, "cap": 0}, TypeError),
    ("judge_call", ("a", A), {"duplicate_limit": 3, "window": 0, "cap": 0}, ValueError),
    ("judge_call", ("a", A), {"duplicate_limit": 3, "window": 5.0, "cap": 0}, TypeError),
    ("judge_call", ("a", A), {"duplicate_limit": 3, "window": 5, "cap": -1}, ValueError),
    ("judge_call", ("a", A), {"duplicate_limit": 3, "window": 2**53, "cap": 0}, ValueError),
]


@pytest.mark.parametrize(("method", "args", "kwargs", "error"), BAD_CALLS)
def test_every_store_refuses_bad_arguments_with_the_same_error(
    store: Store,
    tmp_path: Path,
    method: str,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    error: type[Exception],
) -> None:
    with pytest.raises(error) as raised:
        getattr(store, method)(*args, **kwargs)
    with pytest.raises(error) as in_memory:
        getattr(MemoryStore(), method)(*args, **kwargs)
    assert str(raised.value) == str(in_memory.value)
    assert store.count_streaks() == 0
    assert store.count_agents() == 0


# --- the rest of the protocol -----------------------------------------------------------------


def test_close_releases_and_the_next_operation_reconnects(store: Store) -> None:
    store.advance_streak("s", A)
    store.close()
    store.close()  # idempotent
    assert store.advance_streak("s", A) == 2
    store.ping()


def test_a_store_is_a_context_manager(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "x.sqlite3") as store:
        assert store.advance_streak("s", A) == 1
    with SQLiteStore(tmp_path / "x.sqlite3") as again:
        assert again.advance_streak("s", A) == 2


def test_the_attributes_say_what_the_store_is(store: Store, tmp_path: Path) -> None:
    if isinstance(store, MemoryStore):
        assert (store.url, store.shared, store.session_ttl) == ("memory:", False, None)
    else:
        assert store.shared is True
        assert store.session_ttl == 86400
        assert store.url.startswith(("sqlite:/", "redis://"))
        assert store.url in repr(store)


def test_a_store_is_shown_by_its_url_and_with_closes_it_for_reuse(store: Store) -> None:
    assert str(store) == store.url
    assert repr(store) == f"<{type(store).__name__} {store.url}>"
    with store as entered:  # type: ignore[attr-defined]  # not part of the Store protocol
        assert entered is store
        assert store.advance_streak("with", A) == 1
    assert store.advance_streak("with", A) == 2  # closed, and the next operation reopens


def test_many_threads_count_one_session_exactly(store: Store) -> None:
    counts: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        mine = [store.advance_streak("threads", A) for _ in range(50)]
        with lock:
            counts.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counts) == list(range(1, 401))


def test_many_threads_judge_one_agent_exactly(store: Store) -> None:
    answers: list[object] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(worker: int) -> None:
        start.wait()
        mine = [
            store.judge_call("ag", digest(f"{worker}/{i}"), duplicate_limit=2, window=50, cap=300)
            for i in range(50)
        ]
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    denials = [a for a in answers if a is not None]
    assert len(denials) == 100
    assert {(d.kind, d.count, d.limit) for d in denials} == {("cap", 300, 300)}
    assert sum(d.first for d in denials) == 1
    assert store.breaker_calls("ag") == 300


def test_errors_pickle_with_their_url() -> None:
    error = StoreConfigError("store x: no", url="redis://:***@h:1/0")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is StoreConfigError
    assert (str(copy), copy.url, copy.code) == ("store x: no", "redis://:***@h:1/0", error.code)
    assert isinstance(copy, StoreError) and isinstance(copy, ValueError)
    assert StoreError("x").code == "LOOP_BRAKE_STORE"
