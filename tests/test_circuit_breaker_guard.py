"""The circuit breaker's guard against a minimal host: what it denies, what it lets through."""

from __future__ import annotations

import logging
import sys
import threading
import unicodedata
from typing import Any

import pytest
from conftest import FakeCtx
from hypothesis import given
from hypothesis import strategies as st

from dsh_loop_brake.circuit_breaker import CircuitBreaker, apply
from dsh_loop_brake.harness import Agent, ToolExecution


class Host:
    """Applies the breaker to a fake host and makes calls through the guard it installed."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.ctx = FakeCtx()
        self.breaker: CircuitBreaker = apply(self.ctx, config)
        self.calls = 0

    def call(self, name: str, arguments: Any = None, agent: Any = None) -> str | None:
        """The guard's verdict on one call: ``None`` when it would run, else the deny message."""
        self.calls += 1
        execution = ToolExecution(f"call-{self.calls}", name, arguments, agent)
        verdicts = [guard(execution) for guard in self.ctx.tools.guards]
        return next((v for v in verdicts if v is not None), None)

    def allowed(self, name: str, arguments: Any = None, agent: Any = None) -> bool:
        return self.call(name, arguments, agent) is None


# --- duplicates -------------------------------------------------------------------------


def test_echo_cbprobe4_ten_times_with_a_rewritten_description_runs_five() -> None:
    """The seed's probe: the model rewrites ``description`` every time; the sixth call is denied."""
    host = Host()
    agent = Agent("agent-007")
    verdicts = [
        host.call("bash", {"command": "echo cbprobe4", "description": f"Run probe step {i}"}, agent)
        for i in range(1, 11)
    ]
    assert verdicts[:5] == [None] * 5
    denials = verdicts[5:]
    assert all(isinstance(v, str) for v in denials)
    first = denials[0]
    assert first is not None
    assert "this call to bash was denied" in first and "count 6" in first and "limit 6" in first
    assert "\n" not in first
    for secret in ("cbprobe4", "echo", "probe step", "command"):
        assert all(secret not in (v or "") for v in denials)


def test_without_ignore_args_the_rewritten_description_slips_past() -> None:
    """Why ``ignoreArgs`` exists: ten distinct comparison keys for ten identical commands."""
    host = Host({"ignoreArgs": []})
    agent = Agent("a")
    for i in range(10):
        assert host.allowed("bash", {"command": "echo cbprobe4", "description": f"step {i}"}, agent)


def test_each_ignored_annotation_is_dropped_and_only_at_the_top_level() -> None:
    host = Host({"duplicateLimit": 2, "window": 10})
    agent = Agent("a")
    assert host.allowed(
        "bash", {"command": "ls", "explanation": "1", "reason": "1", "thought": "1"}, agent
    )
    assert not host.allowed("bash", {"command": "ls", "purpose": "2", "description": "2"}, agent)
    nested = Host({"duplicateLimit": 2, "window": 10})
    assert nested.allowed("bash", {"options": {"description": "one"}}, agent)
    assert nested.allowed("bash", {"options": {"description": "two"}}, agent)


def test_argument_order_never_changes_the_call() -> None:
    host = Host({"duplicateLimit": 2, "window": 2})
    assert host.allowed("search", {"q": "weather", "n": 3})
    assert not host.allowed("search", {"n": 3, "q": "weather"})
    assert host.allowed("search", {"n": 3, "q": "weather "})


def test_non_consecutive_repeats_inside_the_window_are_counted() -> None:
    """A B A C A D ...: the loop brake's streak never sees it, the window does."""
    host = Host()
    agent = Agent("a")
    for i in range(5):
        assert host.allowed("search", {"q": "weather"}, agent)
        assert host.allowed("search", {"q": f"other {i}"}, agent)
    message = host.call("search", {"q": "weather"}, agent)
    assert message is not None and "count 6" in message


def test_a_repeat_ages_out_of_the_window() -> None:
    host = Host({"duplicateLimit": 3, "window": 5})
    agent = Agent("a")
    a = {"q": "A"}
    assert host.allowed("search", a, agent)
    assert host.allowed("search", a, agent)  # window: A A
    for letter in "BCD":
        assert host.allowed("search", {"q": letter}, agent)  # A A B C D
    assert not host.allowed("search", a, agent)  # would be the third A inside the window
    assert host.allowed("search", {"q": "E"}, agent)  # A B C D E: the first A aged out
    assert host.allowed("search", a, agent)  # B C D E A
    assert host.allowed("search", a, agent)  # C D E A A
    assert not host.allowed("search", a, agent)  # a third A inside the window again


def test_denied_calls_are_not_recorded_so_the_breaker_never_latches() -> None:
    host = Host({"duplicateLimit": 3, "window": 5})
    agent = Agent("a")
    a = {"q": "A"}
    assert host.allowed("search", a, agent)
    assert host.allowed("search", a, agent)
    for _ in range(100):  # a looping model hammering the denied call
        assert not host.allowed("search", a, agent)
    assert host.breaker.calls(agent) == 2
    for letter in "BCDE":
        assert host.allowed("search", {"q": letter}, agent)  # A B C D E
    assert host.allowed("search", {"q": "F"}, agent)  # B C D E F: both A gone
    assert host.allowed("search", a, agent)
    assert host.allowed("search", a, agent)
    assert not host.allowed("search", a, agent)


def test_count_is_the_identical_calls_in_the_window_and_stays_at_the_limit() -> None:
    host = Host({"duplicateLimit": 2, "window": 4, "denyMessage": "{tool} {count}/{limit}"})
    assert host.allowed("read", {"path": "/etc"})
    assert host.call("read", {"path": "/etc"}) == "read 2/2"
    assert host.call("read", {"path": "/etc"}) == "read 2/2"


def test_duplicate_limit_of_one_denies_every_identifiable_call() -> None:
    host = Host({"duplicateLimit": 1})
    assert host.call("read", {"path": "/"}) is not None
    assert host.allowed("read", {"path": b"/"})  # not identifiable: passes


# --- the per-agent cap -------------------------------------------------------------------


def test_the_cap_denies_every_call_after_the_limit_and_leaves_other_agents_alone() -> None:
    host = Host({"maxCallsPerAgent": 5, "denyMessage": "{tool} {count}/{limit}"})
    busy, other = Agent("busy"), Agent("other")
    for i in range(5):
        assert host.allowed("search", {"q": f"varied {i}"}, busy)
    assert host.call("search", {"q": "varied 99"}, busy) == "search 5/5"
    assert host.call("read", {"path": "/new"}, busy) == "read 5/5"
    for i in range(5):
        assert host.allowed("search", {"q": f"varied {i}"}, other)
    assert host.call("bash", {"command": "x"}, busy) == "bash 5/5"  # for good
    assert host.breaker.calls(busy) == 5


def test_a_cap_of_zero_disables_it() -> None:
    host = Host({"maxCallsPerAgent": 0})
    agent = Agent("a")
    for i in range(1000):
        assert host.allowed("search", {"q": i}, agent)


def test_the_cap_is_checked_before_duplicates() -> None:
    host = Host({"maxCallsPerAgent": 2, "duplicateLimit": 3, "window": 3, "denyMessage": "{count}"})
    assert host.allowed("x", 1)
    assert host.allowed("x", 1)
    assert host.call("x", 1) == "2"  # the cap's count, not the duplicate's 3


# --- exempt and only ----------------------------------------------------------------------


def test_exempt_tools_are_ignored_entirely() -> None:
    host = Host({"maxCallsPerAgent": 3})
    agent = Agent("a")
    for _ in range(50):
        for tool in ("todo_write", "ask_user_question", "exit_plan_mode"):
            assert host.allowed(tool, {"todos": []}, agent)
    assert host.breaker.calls(agent) == 0  # neither counted nor recorded
    for i in range(3):
        assert host.allowed("bash", {"command": i}, agent)
    assert not host.allowed("bash", {"command": 4}, agent)
    assert host.allowed("todo_write", {"todos": []}, agent)  # still exempt past the cap


def test_exempt_can_be_emptied_or_replaced() -> None:
    host = Host({"exempt": ["read"], "duplicateLimit": 2, "window": 2})
    assert host.allowed("todo_write", 1)
    assert not host.allowed("todo_write", 1)
    assert host.allowed("read", 1) and host.allowed("read", 1)


def test_only_guards_just_those_tools_and_overrides_exempt() -> None:
    host = Host({"only": ["bash", "todo_write"], "duplicateLimit": 2, "window": 2})
    for _ in range(20):
        assert host.allowed("search", {"q": "same"})
    assert host.allowed("bash", {"command": "ls"})
    assert not host.allowed("bash", {"command": "ls"})
    assert host.allowed("todo_write", 1)
    assert not host.allowed("todo_write", 1)  # exempt by default, guarded because listed


# --- what cannot be identified ------------------------------------------------------------


class Opaque:
    def __repr__(self) -> str:
        return "Opaque(secret-token)"


@pytest.mark.parametrize(
    "arguments",
    [{"data": b"secret-token"}, {"tags": {"secret-token"}}, Opaque(), {1: "secret-token"}],
    ids=["bytes", "set", "object", "int-key"],
)
def test_arguments_that_cannot_be_identified_pass(
    arguments: Any, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host({"duplicateLimit": 2, "window": 2})
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        for _ in range(20):
            assert host.allowed("upload", arguments)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per tool
    assert '"upload"' in warnings[0].getMessage()
    assert "secret-token" not in caplog.text


def test_hostile_arguments_never_crash_the_guard() -> None:
    host = Host({"duplicateLimit": 2, "window": 2})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    deep: Any = "x"
    for _ in range(50_000):
        deep = [deep]

    class BadKeys(dict[Any, Any]):
        def __iter__(self) -> Any:
            raise RuntimeError("no")

    verdicts = [
        host.call("t", a) for a in (cyclic, deep, {"n": float("nan")}, "\ud800", BadKeys(a=1))
    ]
    assert verdicts == [None] * 5  # none raised; none was a repeat yet
    assert not host.allowed("t", {"n": float("nan")})  # NaN is identified (as null): a repeat


def test_unidentifiable_calls_still_count_toward_the_cap() -> None:
    host = Host({"maxCallsPerAgent": 3})
    agent = Agent("a")
    for _ in range(3):
        assert host.allowed("upload", {"data": b"x"}, agent)
    assert not host.allowed("upload", {"data": b"x"}, agent)


# --- the message ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("evil\nINJECTED: ok", "evil\\u000aINJECTED: ok"),
        ("cr\rlf", "cr\\u000dlf"),
        ("tab\there", "tab\\u0009here"),
        ("\x1b[31mred", "\\u001b[31mred"),
        ("del\x7fnel\x85", "del\\u007fnel\\u0085"),
        ("\u2028line\u2029", "\\u2028line\\u2029"),
        ("lone\ud800", "lone\\ud800"),
        ("quote\"'", "quote\"'"),
        ("\u8bfb\u53d6\u6587\u4ef6", "\u8bfb\u53d6\u6587\u4ef6"),  # non-ASCII as it is
    ],
)
def test_a_hostile_tool_name_cannot_break_the_message_line(name: str, shown: str) -> None:
    host = Host({"duplicateLimit": 2, "window": 2, "exempt": [], "denyMessage": "stop {tool}"})
    assert host.allowed(name, {})
    message = host.call(name, {})
    assert message == f"stop {shown}"
    assert message.splitlines() == [message]  # no character any line splitter breaks on
    message.encode("utf-8")  # and nothing that cannot be written out


@given(st.text(max_size=40))
def test_any_tool_name_is_shown_as_it_is_but_for_what_could_break_a_line(name: str) -> None:
    host = Host({"duplicateLimit": 1, "exempt": [], "denyMessage": "stop {tool}."})
    message = host.call(name, {})
    # Control characters, line and paragraph separators, lone surrogates: \u00xx; all else as is.
    unsafe = {"Cc", "Zl", "Zp", "Cs"}
    shown = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in unsafe else c for c in name)
    assert message == f"stop {shown}."
    assert message.splitlines() == [message]
    message.encode("utf-8")


def test_execution_given_as_a_mapping() -> None:
    host = Host({"duplicateLimit": 2, "window": 2})
    guard = host.ctx.tools.guards[0]
    call = {"call_id": "1", "name": "read", "arguments": {"p": 1}, "agent": {"id": "m"}}
    assert guard(call) is None
    assert guard(dict(call, call_id="2")) is not None
    assert guard(dict(call, agent={"id": "n"})) is None  # another agent


# --- threads --------------------------------------------------------------------------------


@pytest.fixture
def busy_switching() -> Any:
    """Switch threads as often as the interpreter allows, so a missing lock shows up."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("busy_switching")
def test_no_update_is_lost_under_many_threads() -> None:
    host = Host({"maxCallsPerAgent": 2_000, "duplicateLimit": 50, "window": 200})
    guard = host.ctx.tools.guards[0]
    agent = Agent("shared")
    allowed: list[int] = []
    repeats: list[int] = []
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        start.wait()
        mine = sum(
            guard(ToolExecution(f"{n}-{i}", "search", {"q": f"{n}-{i}"}, agent)) is None
            for i in range(400)
        )
        same = sum(
            guard(ToolExecution(f"{n}-s{i}", "ping", {}, Agent(f"p{n % 2}"))) is None
            for i in range(100)
        )
        allowed.append(mine)
        repeats.append(same)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(allowed) == 2_000  # 3,200 distinct calls, exactly the cap let through
    assert host.breaker.calls(agent) == 2_000
    # Agent("p0") objects are new per call, so every ping is some fresh agent's first call.
    assert sum(repeats) == 800


@pytest.mark.usefixtures("busy_switching")
def test_identical_calls_from_many_threads_trip_at_exactly_the_limit() -> None:
    host = Host({"duplicateLimit": 50, "window": 200, "maxCallsPerAgent": 0})
    guard = host.ctx.tools.guards[0]
    agent = Agent("a")
    results: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(100):
            ok = guard(ToolExecution("c", "ping", {"x": 1}, agent)) is None
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 49
    assert len(results) == 800


def test_the_fail_open_warning_names_the_offending_type_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import datetime

    hostile = type("Forged\nWARNING injected line", (), {})
    host = Host({})
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert host.allowed("schedule", {"when": datetime.datetime(2026, 9, 1)})
        assert host.allowed("store", {"blob": hostile()})
    first, second = (r.getMessage() for r in caplog.records)
    assert "datetime" in first and "2026" not in first  # the type that failed, not "dict"
    assert "\n" not in second and "Forged" in second
