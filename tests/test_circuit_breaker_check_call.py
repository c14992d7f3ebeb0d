"""The circuit breaker outside a guard: check_call raises CircuitBreakerError (SPEC §6), and the
guard's returned message carries the same code."""

from __future__ import annotations

import copy
import gc
import json
import pickle
from typing import Any

import pytest

import dsh_loop_brake
from dsh_loop_brake import ToolCallDenied
from dsh_loop_brake.circuit_breaker import (
    CircuitBreaker,
    CircuitBreakerError,
    DenyMessage,
    resolve_config,
)
from dsh_loop_brake.harness import Agent, ToolExecution


def breaker(**config: Any) -> CircuitBreaker:
    return CircuitBreaker(resolve_config(config))


def denial(b: CircuitBreaker, tool: str, args: Any, agent: Any = None) -> CircuitBreakerError:
    with pytest.raises(CircuitBreakerError) as caught:
        b.check_call(tool, args, agent=agent)
    return caught.value


# --- the error -------------------------------------------------------------------------------


def test_the_nth_identical_call_in_the_window_raises_a_duplicate_denial() -> None:
    b = breaker(duplicateLimit=3, window=10)
    for _ in range(2):
        assert b.check_call("search", {"q": "weather"}, agent="agent-7") is None
    error = denial(b, "search", {"q": "weather"}, "agent-7")
    assert isinstance(error, ToolCallDenied)
    assert (error.code, error.kind, error.count, error.limit) == (
        "CIRCUIT_BREAKER",
        "duplicate",
        3,
        3,
    )
    assert (error.tool_name, error.session_id) == ("search", "agent-7")
    assert str(error).startswith("circuit breaker: this call to search was denied before it ran")
    assert error.args == (str(error),)


def test_the_cap_raises_a_cap_denial() -> None:
    b = breaker(maxCallsPerAgent=2, denyMessage="{tool}: {count} of {limit}")
    b.check_call("read", {"path": "a"}, agent="a")
    b.check_call("read", {"path": "b"}, agent="a")
    error = denial(b, "write", {"path": "c"}, "a")
    assert (error.kind, error.count, error.limit, str(error)) == ("cap", 2, 2, "write: 2 of 2")


def test_denied_calls_are_not_counted_so_it_never_latches() -> None:
    b = breaker(duplicateLimit=2, window=3)
    b.check_call("t", 1, agent="a")
    for _ in range(10):
        denial(b, "t", 1, "a")
    assert b.calls("a") == 1
    for n in (2, 3, 4):
        b.check_call("t", n, agent="a")  # the first call ages out of the window
    assert b.check_call("t", 1, agent="a") is None


@pytest.mark.parametrize(
    ("agent", "session_id"),
    [("agent-7", "agent-7"), (Agent("agent-7"), "agent-7"), ({"id": 42}, "42"), (None, None)],
    ids=["str-id", "agent-object", "mapping-with-int-id", "no-agent"],
)
def test_the_session_id_is_the_agents_id(agent: Any, session_id: str | None) -> None:
    b = breaker(duplicateLimit=1)
    assert denial(b, "t", {}, agent).session_id == session_id


def test_the_error_carries_no_argument_and_pickles_whole() -> None:
    b = breaker(duplicateLimit=1)
    error = denial(b, "http_get", {"token": "sk-SECRET-123"}, "agent-7")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(error, protocol=protocol)
        assert b"sk-SECRET-123" not in data
        restored = pickle.loads(data)
        assert type(restored) is CircuitBreakerError
        assert str(restored) == str(error) and vars(restored) == vars(error)
    assert vars(copy.deepcopy(error)) == vars(error)
    assert "sk-SECRET-123" not in repr(error) + repr(vars(error)) + str(error)


def test_a_tool_name_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tool name must be a str"):
        breaker().check_call(b"search", {})  # type: ignore[arg-type]


def test_it_is_exported_from_the_package_root() -> None:
    assert dsh_loop_brake.CircuitBreakerError is CircuitBreakerError
    assert "CircuitBreakerError" in dsh_loop_brake.__all__


# --- agents ----------------------------------------------------------------------------------


def test_string_ids_each_get_their_own_state_apart_from_calls_without_an_agent() -> None:
    b = breaker(duplicateLimit=2, window=5)
    b.check_call("t", 1, agent="alice")
    b.check_call("t", 1, agent="bob")  # another agent: not a repeat
    b.check_call("t", 1)  # no agent: the shared host-level state, not alice's
    denial(b, "t", 1, "alice")
    denial(b, "t", 1, None)
    assert (b.calls("alice"), b.calls("bob"), b.calls(None)) == (1, 1, 1)


def test_an_agent_object_is_weakly_held() -> None:
    b = breaker(duplicateLimit=2, window=5)
    agent = Agent("a")
    b.check_call("t", 1, agent=agent)
    assert len(b) == 1
    denial(b, "t", 1, agent)
    del agent
    gc.collect()
    assert len(b) == 0


def test_the_guard_and_check_call_judge_one_state() -> None:
    b = breaker(duplicateLimit=3, window=5)
    agent = Agent("a")
    assert b.check(ToolExecution("c1", "t", {"x": 1}, agent)) is None
    b.check_call("t", {"x": 1}, agent=agent)
    assert denial(b, "t", {"x": 1}, agent).count == 3
    assert b.check(ToolExecution("c2", "t", {"x": 1}, agent)) is not None


def test_exempt_only_and_enabled_apply_to_check_call_too() -> None:
    exempt = breaker(duplicateLimit=1)
    for _ in range(5):
        exempt.check_call("todo_write", {"todos": []}, agent="a")
    only = breaker(duplicateLimit=1, only=["bash"])
    only.check_call("search", {}, agent="a")
    denial(only, "bash", {}, "a")
    off = breaker(duplicateLimit=1, enabled=False)
    off.check_call("bash", {}, agent="a")


def test_annotation_arguments_are_ignored_by_check_call() -> None:
    b = breaker(duplicateLimit=2, window=5)
    b.check_call("bash", {"command": "ls", "description": "look around"}, agent="a")
    denial(b, "bash", {"command": "ls", "description": "look again"}, "a")


# --- the guard's message ---------------------------------------------------------------------


def test_the_guard_returns_a_string_that_carries_the_code() -> None:
    b = breaker(duplicateLimit=2, window=5, denyMessage="stop {tool} ({count}/{limit})")
    agent = Agent("a")
    assert b.check(ToolExecution("c1", "bash", {"command": "ls"}, agent)) is None
    message = b.check(ToolExecution("c2", "bash", {"command": "ls"}, agent))
    assert isinstance(message, DenyMessage) and isinstance(message, str)
    assert message == "stop bash (2/2)"
    assert (message.code, message.kind, message.count, message.limit) == (
        "CIRCUIT_BREAKER",
        "duplicate",
        2,
        2,
    )


def test_the_message_still_works_as_a_plain_string() -> None:
    b = breaker(duplicateLimit=1, denyMessage="stop {tool}, stop")
    message = b.check({"name": "bash", "arguments": {}})
    assert message is not None
    assert message.count == 1 and message.count("stop") == 2  # the count, and str.count
    assert json.dumps({"reason": message}) == '{"reason": "stop bash, stop"}'
    assert message.upper() == "STOP BASH, STOP" and hash(message) == hash("stop bash, stop")
    restored = pickle.loads(pickle.dumps(message))
    assert type(restored) is DenyMessage and restored == message
    assert (restored.code, restored.kind, restored.count, restored.limit) == (
        "CIRCUIT_BREAKER",
        "duplicate",
        1,
        1,
    )
