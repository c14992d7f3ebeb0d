"""The breaker's lifecycle: ``close()`` stops judging, forgets what this process holds and closes
what the breaker opened itself -- never a store it was given; the plugin's dispose closes the
store its ``apply`` opened."""

from __future__ import annotations

from pathlib import Path

import pytest
from _sqlite_lock import open_files
from conftest import FakeCtx

from dsh_loop_brake import circuit_breaker
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerError, resolve_config
from dsh_loop_brake.harness import Agent, ToolExecution
from dsh_loop_brake.stores import MemoryStore, SQLiteStore

LS = {"command": "ls"}


def test_close_stops_judging_forgets_the_state_and_can_be_called_again() -> None:
    breaker = CircuitBreaker(resolve_config({"duplicateLimit": 2}))
    agent = Agent("agent-1")
    breaker.check_call("bash", LS, agent=agent)
    with pytest.raises(CircuitBreakerError):
        breaker.check_call("bash", LS, agent=agent)

    breaker.close()
    assert len(breaker) == 0 and breaker.calls(agent) == 0
    breaker.check_call("bash", LS, agent=agent)  # closed: nothing is judged any more
    assert breaker.check(ToolExecution("c", "bash", LS, agent)) is None
    breaker.close()  # idempotent
    assert breaker.calls(agent) == 0


def test_close_leaves_a_store_the_caller_passed_open(tmp_path: Path) -> None:
    database = tmp_path / "shared.sqlite3"
    store = SQLiteStore(database)
    try:
        breaker = CircuitBreaker(resolve_config({"duplicateLimit": 5}), store=store)
        breaker.check_call("bash", LS, agent="agent-1")
        assert open_files(database) > 0
        breaker.close()
        assert open_files(database) > 0  # the caller's: still open, still holding the count
        assert store.breaker_calls("agent-1") == 1
    finally:
        store.close()
    assert open_files(database) == 0


def test_close_of_a_breaker_with_a_memory_store_given_forgets_only_the_breakers_state() -> None:
    store = MemoryStore()
    store.advance_streak("session", b"\x01" * 32)  # a loop brake sharing it
    breaker = CircuitBreaker(store=store)
    breaker.check_call("bash", LS, agent="agent-1")
    breaker.close()
    assert store.breaker_calls("agent-1") == 0
    assert store.read_streak("session") == (b"\x01" * 32, 1)


def test_a_closed_breaker_writes_no_incident(tmp_path: Path) -> None:
    log = tmp_path / "incidents.jsonl"
    breaker = CircuitBreaker(resolve_config({"duplicateLimit": 2, "incidentLog": str(log)}))
    breaker.check_call("bash", LS, agent="agent-1")
    breaker.close()
    breaker.check_call("bash", LS, agent="agent-1")  # would have been the first denial
    assert not log.exists()


def test_a_breaker_is_a_context_manager_that_closes() -> None:
    with CircuitBreaker(resolve_config({"duplicateLimit": 2})) as breaker:
        breaker.check_call("bash", LS, agent="agent-1")
    breaker.check_call("bash", LS, agent="agent-1")  # closed on leaving: not denied


def test_dispose_closes_the_store_apply_opened_and_the_breaker(tmp_path: Path) -> None:
    database = tmp_path / "brakes.sqlite3"
    log = tmp_path / "incidents.jsonl"
    ctx = FakeCtx()
    breaker = circuit_breaker.apply(
        ctx, {"duplicateLimit": 2, "store": f"sqlite:{database}", "incidentLog": str(log)}
    )
    (guard,) = ctx.tools.guards
    assert guard(ToolExecution("c", "bash", LS, Agent("agent-1"))) is None
    assert open_files(database) > 0

    ctx.dispose()
    assert ctx.tools.guards == []
    assert open_files(database) == 0  # what apply opened, dispose closed
    assert breaker.check(ToolExecution("c", "bash", LS, Agent("agent-1"))) is None  # closed
    assert not log.exists()
    breaker.close()  # after dispose: nothing left to do, and no error
