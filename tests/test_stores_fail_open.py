"""The brakes fail open when their store fails at run time: the call is allowed and not counted,
``store_errors`` counts it, one warning a minute names the store (password as ``***``) and the
error's type, and the next call tries the store again -- with a real Redis server killed,
stopped and restarted, and a real SQLite file locked by another process or corrupted."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _redis_server import MakeRedisServer
from _sqlite_lock import write_lock_held

from dsh_loop_brake import LoopBrake, LoopBrakeError, _store_failures
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerError, resolve_config
from dsh_loop_brake.stores import (
    MemoryStore,
    SQLiteStore,
    StoreConfigError,
    StoreError,
    open_store,
)

CALL = ("search", {"q": "weather"})
PASSWORD = "hunter2-CANARY"


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every test starts with no store warned about, and a clock it can move."""
    now = [1000.0]
    monkeypatch.setattr(_store_failures, "_last_warned", {})
    monkeypatch.setattr(_store_failures, "_clock", lambda: now[0])
    yield now


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "the store" in r.getMessage()]


def loop_check(brake: LoopBrake) -> object:
    try:
        return brake.check(*CALL, session_id="s")
    except LoopBrakeError as denial:
        return ("denied", denial.count)


def breaker_check(breaker: CircuitBreaker) -> object:
    try:
        breaker.check_call(*CALL, agent="agent-1")
    except CircuitBreakerError as denial:
        return (denial.kind, denial.count)
    return "allowed"


# --- Redis goes away --------------------------------------------------------------------------


def test_redis_killed_mid_run_lets_calls_through_once_warned_and_counting_resumes(
    make_redis_server: MakeRedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_redis_server()
    brake = LoopBrake(3, store=open_store(server.url))
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert [loop_check(brake) for _ in range(2)] == [1, 2]
        server.kill()
        assert [loop_check(brake) for _ in range(5)] == [0] * 5  # the 3rd, 4th... run unbraked
        assert brake.store_errors == 5
        server.start()  # on its old port, empty (persistence is off)
        assert [loop_check(brake) for _ in range(3)] == [1, 2, ("denied", 3)]
    assert brake.store_errors == 5
    (warning,) = store_warnings(caplog)
    assert warning.levelno == logging.WARNING and warning.name == "dsh_loop_brake"
    brake.store.close()


def test_the_circuit_breaker_fails_open_too_and_resumes(
    make_redis_server: MakeRedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_redis_server()
    store = open_store(server.url)
    breaker = CircuitBreaker(resolve_config({"duplicateLimit": 3, "window": 10}), store=store)
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert [breaker_check(breaker) for _ in range(2)] == ["allowed"] * 2
        server.kill()
        assert [breaker_check(breaker) for _ in range(4)] == ["allowed"] * 4
        assert breaker.store_errors == 4
        server.start()
        assert [breaker_check(breaker) for _ in range(3)] == [
            "allowed",
            "allowed",
            ("duplicate", 3),
        ]
    assert breaker.store_errors == 4
    (warning,) = store_warnings(caplog)
    assert warning.name == "dsh_loop_brake.circuit_breaker"
    assert "circuit breaker: the store" in warning.getMessage()
    store.close()


def test_the_warning_names_the_store_without_its_password_and_the_error_type_only(
    make_redis_server: MakeRedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_redis_server("--requirepass", PASSWORD)
    store = open_store(server.url)
    brake = LoopBrake(store=store)
    assert loop_check(brake) == 1
    server.kill()
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert loop_check(brake) == 0
    (warning,) = store_warnings(caplog)
    message = warning.getMessage()
    assert f'"redis://:***@127.0.0.1:{server.port}/0"' in message
    assert "(StoreError from ConnectionError)" in message
    assert "Connection refused" not in message  # the type, never the error's own words
    assert PASSWORD not in caplog.text
    # No traceback: an error tracker would render its frames' locals, the raw URL among them.
    assert warning.exc_info is None and warning.exc_text is None
    assert "\n" not in message
    store.close()


def test_a_stopped_server_holds_a_call_up_for_the_socket_timeout_at_most(
    make_redis_server: MakeRedisServer,
) -> None:
    # A server that accepts nothing (stopped, or a network gone quiet): the call waits for the
    # store's socket timeout (2 s), then runs.
    server = make_redis_server()
    brake = LoopBrake(2, store=open_store(server.url))
    assert loop_check(brake) == 1
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        assert loop_check(brake) == 0
        assert brake.store_errors == 1
    finally:
        server.process.send_signal(signal.SIGCONT)
    brake.store.close()


# --- one warning a minute per store object ----------------------------------------------------


class FlakyStore:
    """A memory store that raises ``failure`` from every operation while it is set."""

    shared = False
    session_ttl = None
    url = "flaky:"

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.failure: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def operation(*args: Any, **kwargs: Any) -> Any:
            if self.failure is not None:
                raise self.failure
            return method(*args, **kwargs)

        return operation


def test_the_warning_repeats_at_most_once_a_minute_per_store(
    fresh_warnings: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    store.failure = StoreError("store flaky: gone")
    brake = LoopBrake(store=store)  # type: ignore[arg-type]
    other = LoopBrake(store=store)  # type: ignore[arg-type]  # the same store: one warning
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for _ in range(3):
            assert loop_check(brake) == 0 and loop_check(other) == 0
        fresh_warnings[0] += 59.0
        assert loop_check(brake) == 0
        assert len(store_warnings(caplog)) == 1
        fresh_warnings[0] += 1.0
        assert loop_check(other) == 0
        assert len(store_warnings(caplog)) == 2
        another = FlakyStore()
        another.failure = StoreError("store flaky: gone")
        assert loop_check(LoopBrake(store=another)) == 0  # type: ignore[arg-type]
    assert len(store_warnings(caplog)) == 3  # another store object: its own minute
    assert (brake.store_errors, other.store_errors) == (4, 4)


@pytest.mark.parametrize(
    "failure",
    [
        StoreError("store x: the server cannot be reached"),
        StoreConfigError("store x: cannot open the database file (Too many open files)"),
        RuntimeError("something no store should raise"),
        OSError(24, "Too many open files"),
    ],
    ids=["StoreError", "StoreConfigError", "RuntimeError", "OSError"],
)
def test_any_exception_from_the_store_fails_open_and_the_next_call_tries_again(
    failure: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    brake = LoopBrake(2, store=store)  # type: ignore[arg-type]
    breaker_store = FlakyStore()
    breaker = CircuitBreaker(
        resolve_config({"duplicateLimit": 2, "window": 5}),
        store=breaker_store,  # type: ignore[arg-type]
    )
    assert loop_check(brake) == 1 and breaker_check(breaker) == "allowed"
    store.failure = breaker_store.failure = failure
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert loop_check(brake) == 0 and breaker_check(breaker) == "allowed"
        # Unidentifiable arguments end the streak in the store: a failure there is counted too.
        assert brake.check("search", {"q": {1, 2}}, session_id="s") == 0
    assert (brake.store_errors, breaker.store_errors) == (2, 1)
    assert type(failure).__name__ in store_warnings(caplog)[0].getMessage()
    store.failure = breaker_store.failure = None  # back: the very next call is counted
    # Nothing the store failed for was counted (nor the streak ended): it goes on from 1.
    assert loop_check(brake) == ("denied", 2)
    assert breaker_check(breaker) == ("duplicate", 2)


def test_a_keyboard_interrupt_in_the_store_is_not_swallowed() -> None:
    store = FlakyStore()
    store.failure = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        LoopBrake(store=store).check(*CALL)  # type: ignore[arg-type]


def test_inspecting_or_resetting_a_failed_store_raises_its_error() -> None:
    # Only a call is failed open; asking the brake what it holds, or to forget it, is a question
    # the store must answer.
    store = FlakyStore()
    store.failure = StoreError("store flaky: gone")
    brake = LoopBrake(store=store)  # type: ignore[arg-type]
    for ask in (lambda: brake.streak("s"), lambda: len(brake), brake.reset):
        with pytest.raises(StoreError):
            ask()


# --- SQLite locked or corrupted ---------------------------------------------------------------


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "brakes.sqlite3"


def test_a_sqlite_file_locked_by_another_process_fails_open_after_the_busy_timeout(
    sqlite_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(sqlite_file, busy_timeout=0.2)  # the default is the 2 s maximum
    brake = LoopBrake(3, store=store)
    breaker = CircuitBreaker(resolve_config({"duplicateLimit": 2, "window": 5}), store=store)
    assert loop_check(brake) == 1 and breaker_check(breaker) == "allowed"
    with write_lock_held(sqlite_file):
        with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
            assert loop_check(brake) == 0 and breaker_check(breaker) == "allowed"
        assert (brake.store_errors, breaker.store_errors) == (1, 1)
        assert len(store_warnings(caplog)) == 1  # both brakes share the store object
    assert loop_check(brake) == 2  # the lock is gone: counted again, the failed call never was
    assert breaker_check(breaker) == ("duplicate", 2)
    store.close()


def test_a_corrupted_sqlite_file_fails_open_on_every_call(
    sqlite_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(sqlite_file)
    brake = LoopBrake(2, store=store)
    assert loop_check(brake) == 1
    for path in sqlite_file.parent.iterdir():  # the database, its WAL and its index, overwritten
        path.write_bytes(b"\xa5" * path.stat().st_size)
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert [loop_check(brake) for _ in range(4)] == [0] * 4  # never denied, never crashed
    assert brake.store_errors == 4
    (warning,) = store_warnings(caplog)
    assert f'"sqlite:{sqlite_file}"' in warning.getMessage()
    store.close()


def test_a_file_replaced_by_junk_between_calls_fails_open_when_it_is_reopened(
    sqlite_file: Path,
) -> None:
    # The store reopens its file after close() (or in a new thread): a file that is no database
    # then is a StoreConfigError at run time, and fails open like any other store failure.
    store = SQLiteStore(sqlite_file)
    brake = LoopBrake(2, store=store)
    assert loop_check(brake) == 1
    store.close()
    for path in list(sqlite_file.parent.iterdir()):
        path.unlink()
    sqlite_file.write_bytes(os.urandom(8192))
    assert loop_check(brake) == 0
    assert brake.store_errors == 1
    store.close()


def test_a_store_failure_never_lets_an_argument_reach_the_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-CANARY-store-7f1"
    store = FlakyStore()
    store.failure = StoreError(f"store flaky: the server said {secret}")
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert LoopBrake(store=store).check("fetch", {"token": secret}) == 0  # type: ignore[arg-type]
    assert secret not in caplog.text
