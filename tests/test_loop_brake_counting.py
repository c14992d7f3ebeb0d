"""LoopBrake counting (SPEC §2): streaks, denial, sessions, fail-open."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import pytest

from dsh_loop_brake import (
    DEFAULT_MAX_REPEATS,
    InvalidMaxRepeatsError,
    LoopBrake,
    LoopBrakeError,
    call_hash,
    hash_prefix,
)

A = ("search", {"q": "weather"})
B = ("search", {"q": "weather in Paris"})


def check(brake: LoopBrake, call: tuple[str, Any], session: str = "default") -> int:
    return brake.check(call[0], call[1], session_id=session)


def test_default_is_three() -> None:
    assert DEFAULT_MAX_REPEATS == 3
    assert LoopBrake().max_repeats == 3


def test_two_identical_calls_run_and_the_third_is_denied() -> None:
    brake = LoopBrake()
    assert check(brake, A) == 1
    assert check(brake, A) == 2
    with pytest.raises(LoopBrakeError) as denied:
        check(brake, A)
    assert denied.value.count == 3
    assert denied.value.max_repeats == 3


def test_a_denied_call_stays_in_the_streak() -> None:
    brake = LoopBrake(3)
    check(brake, A)
    check(brake, A)
    for expected in (3, 4, 5):
        with pytest.raises(LoopBrakeError) as denied:
            check(brake, A)
        assert denied.value.count == expected
    assert brake.streak("default") == (hash_prefix(call_hash(*A)), 5)


def test_a_streak_is_consecutive_calls_not_a_histogram() -> None:
    brake = LoopBrake(3)
    assert [check(brake, c) for c in (A, A, B, A)] == [1, 2, 1, 1]
    assert check(brake, A) == 2


def test_alternating_calls_never_trip_the_brake() -> None:
    # A documented limit: A, B, A, B ... is not a streak of anything.
    brake = LoopBrake(2)
    for _ in range(50):
        assert check(brake, A) == 1
        assert check(brake, B) == 1


def test_argument_key_order_is_the_same_call() -> None:
    brake = LoopBrake(2)
    brake.check("edit", {"path": "a.py", "line": 3})
    with pytest.raises(LoopBrakeError):
        brake.check("edit", {"line": 3, "path": "a.py"})


def test_same_arguments_to_another_tool_is_another_call() -> None:
    brake = LoopBrake(2)
    assert brake.check("read", {"path": "x"}) == 1
    assert brake.check("stat", {"path": "x"}) == 1


@pytest.mark.parametrize("limit", [2, 5, 10])
def test_denial_at_the_nth_call(limit: int) -> None:
    brake = LoopBrake(limit)
    for expected in range(1, limit):
        assert check(brake, A) == expected
    with pytest.raises(LoopBrakeError) as denied:
        check(brake, A)
    assert (denied.value.count, denied.value.max_repeats) == (limit, limit)
    with pytest.raises(LoopBrakeError) as again:
        check(brake, A)
    assert again.value.count == limit + 1


def test_max_repeats_one_denies_every_call_even_the_first() -> None:
    brake = LoopBrake(1)
    with pytest.raises(LoopBrakeError) as first:
        check(brake, A)
    assert first.value.count == 1
    with pytest.raises(LoopBrakeError) as other:
        check(brake, B)
    assert other.value.count == 1


def test_sessions_never_share_a_count() -> None:
    brake = LoopBrake(2)
    assert check(brake, A, "agent-1") == 1
    assert check(brake, A, "agent-2") == 1
    assert check(brake, A, "default") == 1
    with pytest.raises(LoopBrakeError) as denied:
        check(brake, A, "agent-2")
    assert denied.value.session_id == "agent-2"
    assert brake.streak("agent-1") == (hash_prefix(call_hash(*A)), 1)


def test_session_id_defaults_to_default() -> None:
    brake = LoopBrake()
    brake.check(*A)
    brake.check(*A, session_id="default")
    assert brake.streak("default") == (hash_prefix(call_hash(*A)), 2)


def test_streak_reset_and_len() -> None:
    brake = LoopBrake()
    assert len(brake) == 0
    assert brake.streak("s1") is None
    check(brake, A, "s1")
    check(brake, A, "s1")
    check(brake, B, "s2")
    assert len(brake) == 2
    prefix, count = brake.streak("s1") or ("", 0)
    assert (prefix, count) == (call_hash(*A)[:12], 2)
    assert len(prefix) == 12
    assert brake.streak("s2") == (call_hash(*B)[:12], 1)
    brake.reset("s1")
    assert brake.streak("s1") is None
    assert len(brake) == 1
    assert check(brake, A, "s1") == 1
    brake.reset("never-seen")  # forgetting an unknown session is not an error
    brake.reset()
    assert len(brake) == 0
    assert brake.streak("s2") is None
    assert check(brake, B, "s2") == 1


def test_memory_is_one_slot_per_session() -> None:
    brake = LoopBrake(10**9)
    for i in range(1_000):
        brake.check("t", {"i": i % 3}, session_id="one")
    assert len(brake) == 1
    for i in range(100):
        brake.check("t", {}, session_id=f"s{i}")
    assert len(brake) == 101


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "many", None])
def test_the_limit_is_validated(bad: Any) -> None:
    with pytest.raises(InvalidMaxRepeatsError):
        LoopBrake(bad)


def test_integral_limits_are_accepted() -> None:
    assert LoopBrake(4.0).max_repeats == 4  # type: ignore[arg-type]
    assert LoopBrake(" 7 ").max_repeats == 7  # type: ignore[arg-type]


class Secret:
    def __repr__(self) -> str:
        return "Secret(hunter2)"


def test_unidentifiable_arguments_fail_open(caplog: pytest.LogCaptureFixture) -> None:
    brake = LoopBrake(2)
    check(brake, A)
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        assert brake.check("search", {"q": Secret()}) == 0
    # allowed, not counted, and the streak is gone: A starts again from 1
    assert brake.streak("default") is None
    assert check(brake, A) == 1
    assert brake.check("search", {"q": Secret()}) == 0
    assert brake.check("search", {"q": Secret()}) == 0  # never denied, however often


def test_fail_open_clears_only_its_own_session() -> None:
    brake = LoopBrake(3)
    check(brake, A, "other")
    assert brake.check("t", {1: "int key"}, session_id="mine") == 0
    assert brake.streak("other") == (call_hash(*A)[:12], 1)


def test_fail_open_warns_once_per_tool_with_the_type_and_never_the_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    brake = LoopBrake()
    secret_moment = datetime.datetime(2026, 9, 1, 23, 10, 7)
    with caplog.at_level(logging.DEBUG, logger="dsh_loop_brake"):
        brake.check("schedule", {"when": secret_moment, "token": "hunter2"})
        brake.check("schedule", {"when": secret_moment})
        brake.check("schedule", {"x": Secret()})
        brake.check("store", {"blob": b"hunter2"})
    records = [r for r in caplog.records if r.name == "dsh_loop_brake"]
    assert len(records) == 2
    first, second = (r.getMessage() for r in records)
    assert records[0].levelno == logging.WARNING
    assert '"schedule"' in first and "datetime" in first
    assert '"store"' in second and "bytes" in second
    for message in (first, second):
        assert "hunter2" not in message
        assert "2026" not in message
        assert "\n" not in message


def test_fail_open_warning_keeps_a_hostile_tool_name_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    brake = LoopBrake()
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake"):
        brake.check('evil"\nINJECTED line', {"x": {1, 2}})
    (record,) = caplog.records
    message = record.getMessage()
    assert "\n" not in message and "\r" not in message
    assert '"evil\\"\\nINJECTED line"' in message


@pytest.mark.parametrize(
    "hostile",
    [
        {"n": float("nan")},
        {"n": float("-inf")},
        {"s": "\ud800"},
        {"deep": [[[[[[[[[[]]]]]]]]]] * 3},
        {"cycle": None},
        {"bytes": b"\x00"},
        {"huge": "y" * 1_000_000},
    ],
)
def test_hostile_arguments_never_crash_a_call(hostile: dict[str, Any]) -> None:
    if "cycle" in hostile:
        hostile["cycle"] = hostile
    brake = LoopBrake(2)
    first = brake.check("t", hostile)
    assert first in (0, 1)
    if first == 1:
        with pytest.raises(LoopBrakeError):
            brake.check("t", hostile)


def test_deeply_nested_arguments_are_counted() -> None:
    nested: Any = "x"
    for _ in range(20_000):
        nested = {"n": nested}
    brake = LoopBrake(2)
    assert brake.check("t", nested) == 1
    with pytest.raises(LoopBrakeError):
        brake.check("t", nested)
