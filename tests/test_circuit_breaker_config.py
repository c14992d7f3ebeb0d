"""The circuit-breaker row's config: every key's default, and validation at apply (SPEC §6)."""

from __future__ import annotations

import ast
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeCtx, FakeTools
from hypothesis import given
from hypothesis import strategies as st

from dsh_loop_brake import LoopBrakeConfigError
from dsh_loop_brake import circuit_breaker as circuit_breaker_module
from dsh_loop_brake.circuit_breaker import (
    DEFAULT_DENY_MESSAGE,
    DEFAULTS,
    MAX_WINDOW,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitBreakerConfigError,
    apply,
    resolve_config,
)

TABLE = {
    "enabled": True,
    "duplicateLimit": 6,
    "window": 200,
    "maxCallsPerAgent": 300,
    "exempt": ["todo_write", "ask_user_question", "exit_plan_mode"],
    "only": [],
    "ignoreArgs": ["description", "explanation", "reason", "thought", "purpose"],
    "denyMessage": DEFAULT_DENY_MESSAGE,
    "incidentLog": "",
}


# --- defaults -----------------------------------------------------------------------------


def test_every_key_of_the_table_has_its_default() -> None:
    assert resolve_config(None).as_row_config() == TABLE
    assert resolve_config({}).as_row_config() == TABLE
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in DEFAULTS.items()} == TABLE


def test_the_config_class_defaults_are_the_table_too() -> None:
    assert CircuitBreakerConfig() == resolve_config(None) == resolve_config({})
    assert CircuitBreakerConfig().as_row_config() == TABLE
    assert list(DEFAULTS) == list(TABLE)  # the docs' order


def test_each_default_is_written_once_in_the_source() -> None:
    # Four copies of the nine defaults drifted apart once; one copy cannot.
    package = Path(circuit_breaker_module.__file__).parent
    sources = [package / "circuit_breaker.py", *package.glob("_breaker*.py")]
    constants: list[object] = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
                constants.append(node.value)
    for default in (6, 200, 300, "todo_write", "ask_user_question", "exit_plan_mode", "thought"):
        assert constants.count(default) == 1, default
    assert constants.count(DEFAULT_DENY_MESSAGE) == 1


def test_a_config_is_immutable_comparable_and_pickles() -> None:
    config = resolve_config({"duplicateLimit": 3, "exempt": ["read"]})
    with pytest.raises(AttributeError, match="immutable"):
        config.window = 5  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del config.window  # type: ignore[misc]
    same = resolve_config({"exempt": ["read"], "duplicateLimit": 3.0})
    assert config == same and hash(config) == hash(same) and config != CircuitBreakerConfig()
    assert pickle.loads(pickle.dumps(config)) == config
    assert repr(config).startswith("CircuitBreakerConfig(enabled=True, duplicate_limit=3, ")


def test_a_null_value_takes_the_default() -> None:
    assert resolve_config(dict.fromkeys(TABLE)).as_row_config() == TABLE


def test_apply_without_config_returns_a_breaker_with_the_defaults_and_one_guard() -> None:
    ctx = FakeCtx()
    breaker = apply(ctx)
    assert isinstance(breaker, CircuitBreaker)
    assert breaker.config.as_row_config() == TABLE
    assert ctx.tools.guards == [breaker.check]


def test_default_deny_message_is_one_line_and_uses_every_placeholder() -> None:
    assert "\n" not in DEFAULT_DENY_MESSAGE
    for placeholder in ("{tool}", "{count}", "{limit}"):
        assert placeholder in DEFAULT_DENY_MESSAGE
    assert "stop" in DEFAULT_DENY_MESSAGE and "change your approach" in DEFAULT_DENY_MESSAGE


def test_every_key_can_be_set() -> None:
    config = {
        "enabled": False,
        "duplicateLimit": 3,
        "window": 3,
        "maxCallsPerAgent": 0,
        "exempt": ["read"],
        "only": ["bash", "search"],
        "ignoreArgs": [],
        "denyMessage": "no more {tool} ({count}/{limit}) {{literally}}",
        "incidentLog": "/var/log/incidents.jsonl",
    }
    assert resolve_config(config).as_row_config() == config


def test_integers_are_accepted_as_the_loop_brake_accepts_them() -> None:
    settings = resolve_config({"duplicateLimit": 4.0, "window": " 50 ", "maxCallsPerAgent": "0"})
    assert (settings.duplicate_limit, settings.window, settings.max_calls_per_agent) == (4, 50, 0)


def test_a_relative_incident_log_is_fixed_at_apply(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_config({"incidentLog": "cb.jsonl"}).incident_log == str(tmp_path / "cb.jsonl")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_config({"incidentLog": "~/cb.jsonl"}).incident_log == str(
        tmp_path / "home" / "cb.jsonl"
    )
    assert resolve_config({"incidentLog": "  "}).incident_log == ""


def test_enabled_false_validates_but_installs_no_guard() -> None:
    ctx = FakeCtx()
    breaker = apply(ctx, {"enabled": False})
    assert ctx.tools.guards == []
    assert breaker.check({"name": "bash", "arguments": {}}) is None
    with pytest.raises(CircuitBreakerConfigError):
        apply(FakeCtx(), {"enabled": False, "window": 0})


# --- validation ---------------------------------------------------------------------------

BAD = [
    # (config, words the message must contain)
    ({"enabled": "yes"}, ["enabled", "'yes'", "true or false"]),
    ({"enabled": 1}, ["enabled", "1", "true or false"]),
    ({"duplicateLimit": 0}, ["duplicateLimit", "got 0", "from 1 to"]),
    ({"duplicateLimit": -3}, ["duplicateLimit", "-3"]),
    ({"duplicateLimit": True}, ["duplicateLimit", "True"]),
    ({"duplicateLimit": 2.5}, ["duplicateLimit", "2.5"]),
    ({"duplicateLimit": "six"}, ["duplicateLimit", "'six'"]),
    ({"duplicateLimit": [6]}, ["duplicateLimit", "[6]"]),
    ({"window": 0}, ["window", "got 0"]),
    ({"window": MAX_WINDOW + 1}, ["window", str(MAX_WINDOW + 1), f"to {MAX_WINDOW}"]),
    ({"window": 5}, ["window", "at least duplicateLimit (6)", "got 5"]),
    ({"duplicateLimit": 10, "window": 9}, ["window", "duplicateLimit (10)", "got 9"]),
    ({"maxCallsPerAgent": -1}, ["maxCallsPerAgent", "-1", "from 0 to 9007199254740991"]),
    # the largest count every store keeps exactly (2**53 - 1)
    ({"maxCallsPerAgent": 2**53}, ["maxCallsPerAgent", "9007199254740992", "9007199254740991"]),
    ({"maxCallsPerAgent": "many"}, ["maxCallsPerAgent", "'many'"]),
    ({"exempt": "todo_write"}, ["exempt", "'todo_write'", "list of tool names"]),
    ({"exempt": ["ok", 3]}, ["exempt", "list of tool names"]),
    ({"only": [""]}, ["only", "non-empty strings"]),
    ({"only": {"bash": True}}, ["only", "list"]),
    ({"ignoreArgs": "description"}, ["ignoreArgs", "list of argument names"]),
    ({"ignoreArgs": [None]}, ["ignoreArgs"]),
    ({"denyMessage": ""}, ["denyMessage", "non-blank"]),
    ({"denyMessage": "   "}, ["denyMessage", "non-blank"]),
    ({"denyMessage": 42}, ["denyMessage", "42"]),
    ({"denyMessage": "stop {agent}"}, ["denyMessage", "{agent}", "{tool}, {count} and {limit}"]),
    ({"denyMessage": "stop {}"}, ["denyMessage", "{}"]),
    ({"denyMessage": "stop {0}"}, ["denyMessage", "{0}"]),
    ({"denyMessage": "stop {tool!r}"}, ["denyMessage", "{tool!r}", "no format specs"]),
    ({"denyMessage": "stop {count:>5}"}, ["denyMessage", "{count:>5}"]),
    ({"denyMessage": "{tool.__class__}"}, ["denyMessage", "{tool.__class__}"]),
    ({"denyMessage": "{tool[0]}"}, ["denyMessage", "{tool[0]}"]),
    ({"denyMessage": "stop {tool"}, ["denyMessage", "literal brace as {{"]),
    ({"denyMessage": "stop }"}, ["denyMessage", "literal brace"]),
    ({"incidentLog": 7}, ["incidentLog", "7", "file path"]),
    ({"incidentLog": False}, ["incidentLog", "False"]),
    ({"incidentLog": "a\x00b"}, ["incidentLog", "'a\\x00b'"]),
    ({"store": 5}, ["store must be a store URL", "got 5"]),
    ({"store": "ftp://host/x"}, ["store ftp://host/x", "unknown store scheme ftp:"]),
    ({"store": "sqlite:"}, ["store sqlite:", "has no path"]),
    ({"store": "redis://:hunter2@host:port/0"}, ["store redis://:***@host:port/0", "malformed"]),
    ({"sessionTtl": 0}, ["sessionTtl", "got 0", "from 1 to"]),
    ({"sessionTtl": "a day"}, ["sessionTtl", "'a day'"]),
    ({"duplicatelimit": 6}, ["unknown key 'duplicatelimit'", "duplicateLimit, window"]),
    ({"maxRepeats": 3}, ["unknown key 'maxRepeats'", "enabled"]),
    ({3: 3}, ["unknown key 3"]),
]


@pytest.mark.parametrize(("config", "words"), BAD, ids=[repr(c)[:40] for c, _ in BAD])
def test_a_bad_config_is_refused_with_a_message_naming_key_value_and_rule(
    config: dict[Any, Any], words: list[str]
) -> None:
    with pytest.raises(CircuitBreakerConfigError) as caught:
        resolve_config(config)
    message = str(caught.value)
    for word in words:
        assert word in message
    assert message.startswith("circuit breaker: ")
    assert "\n" not in message
    assert "the circuit-breaker patch row" in message


@pytest.mark.parametrize("config", [[], "duplicateLimit: 6", 6, ("window", 200)])
def test_a_config_that_is_not_a_mapping_is_refused(config: object) -> None:
    with pytest.raises(CircuitBreakerConfigError, match="must be a mapping"):
        resolve_config(config)


@pytest.mark.parametrize(("config", "words"), BAD[:6] + BAD[-3:])
def test_apply_refuses_before_touching_the_registry(
    config: dict[Any, Any], words: list[str]
) -> None:
    ctx = FakeCtx()
    with pytest.raises(CircuitBreakerConfigError):
        apply(ctx, config)
    assert ctx.tools.guards == []
    assert ctx.effects == []


def test_the_error_is_a_loop_brake_config_error_with_its_own_code() -> None:
    with pytest.raises(LoopBrakeConfigError) as caught:
        resolve_config({"window": 0})
    error = caught.value
    assert isinstance(error, ValueError)
    assert isinstance(error, CircuitBreakerConfigError)
    assert error.code == "CIRCUIT_BREAKER_CONFIG"
    assert CircuitBreakerConfigError.code == "CIRCUIT_BREAKER_CONFIG"
    assert LoopBrakeConfigError.code == "LOOP_BRAKE_CONFIG"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is CircuitBreakerConfigError and str(again) == str(error)


@pytest.mark.parametrize(
    "value",
    ["x" * 100_000, list(range(100_000)), {str(i): i for i in range(50_000)}, 10**100_000],
    ids=["str", "list", "dict", "int"],
)
def test_a_huge_bad_value_is_shown_cut_to_80_characters(value: object) -> None:
    with pytest.raises(CircuitBreakerConfigError) as caught:
        resolve_config({"window": value})
    message = str(caught.value)
    shown = message.split("got ", 1)[1].split(" (from", 1)[0]
    assert 0 < len(shown) <= 80
    assert len(message) < 250


def test_a_hostile_bad_value_cannot_break_the_message_line() -> None:
    with pytest.raises(CircuitBreakerConfigError) as caught:
        resolve_config({"incidentLog": ["\n\u2028{x}\r"]})
    assert "\n" not in str(caught.value) and "\u2028" not in str(caught.value)


def test_apply_needs_a_guard_hook_and_an_effect() -> None:
    class NoGuard:
        tools = object()

        def effect(self, fn: Callable[[], Any]) -> None:
            fn()

    class NoEffect:
        tools = FakeTools()

    with pytest.raises(TypeError, match=r"no tools\.guard\(fn\)"):
        apply(NoGuard())
    with pytest.raises(TypeError, match=r"needs ctx\.effect"):
        apply(NoEffect())
    assert NoEffect.tools.guards == []


@given(limit=st.integers(-5, MAX_WINDOW + 5), window=st.integers(-5, MAX_WINDOW + 5))
def test_ranges_hold_for_any_pair(limit: int, window: int) -> None:
    config = {"duplicateLimit": limit, "window": window}
    if 1 <= limit <= window <= MAX_WINDOW:
        settings = resolve_config(config)
        assert (settings.duplicate_limit, settings.window) == (limit, window)
    else:
        with pytest.raises(CircuitBreakerConfigError):
            resolve_config(config)


@given(template=st.text(max_size=60), tool=st.text(max_size=30), count=st.integers(0, 10**6))
def test_any_accepted_deny_message_renders_as_one_line_for_any_tool_name(
    template: str, tool: str, count: int
) -> None:
    try:
        settings = resolve_config({"denyMessage": template})
    except CircuitBreakerConfigError:
        return
    breaker = CircuitBreaker(
        resolve_config({"denyMessage": settings.deny_message, "maxCallsPerAgent": 1, "exempt": []})
    )
    assert breaker.check({"name": tool, "arguments": 1}) is None
    message = breaker.check({"name": tool, "arguments": 2})
    assert isinstance(message, str)
    assert message.count("\n") == template.count("\n")
