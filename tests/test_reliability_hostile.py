"""Hostile arguments never crash a call: each is identified exactly or fails open."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import fractions
import math
import tracemalloc
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeError, call_hash, canonical_json
from dsh_loop_brake.harness import Agent, Harness, Row, ToolDefinition, ToolExecution


def nested_lists(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth - 1):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def nested_objects(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    current = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        current["k"] = child
        current = child
    return root


def cyclic_list() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


def cyclic_dict() -> dict[str, Any]:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = {"up": loop}
    return loop


# Values JSON cannot express: the brake must let the call through, uncounted.
NOT_JSON: dict[str, Any] = {
    "bytes": {"data": b"\x00\x01"},
    "bytearray": {"data": bytearray(b"ab")},
    "memoryview": {"data": memoryview(b"ab")},
    "set": {"ids": {1, 2}},
    "frozenset": {"ids": frozenset({1})},
    "complex": {"z": 1j},
    "decimal": {"amount": decimal.Decimal("1.10")},
    "fraction": {"ratio": fractions.Fraction(1, 3)},
    "datetime": {"when": datetime.datetime(2026, 9, 1, 23, 10, 7)},
    "date": {"day": datetime.date(2026, 9, 1)},
    "uuid": {"id": uuid.UUID(int=7)},
    "path": {"path": Path("/tmp/x")},
    "object": {"thing": object()},
    "function": {"callback": print},
    "type": {"kind": int},
    "range": {"r": range(3)},
    "generator": {"g": (n for n in range(3))},
    "ellipsis": {"e": ...},
    "int key": {1: "one"},
    "float key": {1.5: "x"},
    "tuple key": {(1, 2): "x"},
    "None key": {None: "x"},
    "bool key": {True: "x"},
    "cyclic list": cyclic_list(),
    "cyclic dict": cyclic_dict(),
    "huge int beyond decimal conversion limit": {"n": 10**5000},
}

# Awkward but valid JSON values: identified exactly, never refused.
AWKWARD: dict[str, tuple[Any, str]] = {
    "lone high surrogate": ({"s": "a\ud800b"}, '{"s":"a\\ud800b"}'),
    "lone low surrogate key": ({"\udc00": 1}, '{"\\udc00":1}'),
    "NaN": ({"x": math.nan}, '{"x":null}'),
    "infinities": ([math.inf, -math.inf], "[null,null]"),
    "negative zero": (-0.0, "0"),
    "big int": (2**64 + 1, "18446744073709551617"),
    "tuple": ((1, "a"), '[1,"a"]'),
    "ordered dict": (OrderedDict([("b", 1), ("a", 2)]), '{"a":2,"b":1}'),
    "control characters": ("\x00\x1f\x7f", '"\\u0000\\u001f\x7f"'),
    "line separators": ("\u2028\u2029", '"\u2028\u2029"'),
    "astral key order": ({"\U0001f600": 1, "\uffff": 2}, '{"\U0001f600":1,"\uffff":2}'),
}


@pytest.mark.parametrize("args", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_values_without_json_form_fail_open_and_clear_the_streak(args: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(args)
    brake = LoopBrake(max_repeats=2)
    brake.check("search", {"q": "x"}, session_id="s")
    for _ in range(5):
        assert brake.check("search", args, session_id="s") == 0  # allowed, never denied
    assert brake.streak("s") is None  # an unidentified call ends the streak
    assert brake.check("search", {"q": "x"}, session_id="s") == 1


@pytest.mark.parametrize(("args", "expected"), AWKWARD.values(), ids=AWKWARD.keys())
def test_awkward_json_values_are_identified_exactly(args: Any, expected: str) -> None:
    assert canonical_json(args) == expected
    brake = LoopBrake(max_repeats=2)
    brake.check("t", args)
    with pytest.raises(LoopBrakeError):
        brake.check("t", args)


@pytest.mark.parametrize("make", [nested_lists, nested_objects], ids=["lists", "objects"])
def test_100000_deep_nesting_is_identified_without_recursion_error(make: Any) -> None:
    deep = make(100_000)
    text = canonical_json(deep)
    assert len(text) >= 200_000 and text[:2] in ("[[", '{"')
    assert call_hash("t", deep) == call_hash("t", make(100_000))
    brake = LoopBrake(max_repeats=2)
    brake.check("t", deep)
    with pytest.raises(LoopBrakeError):
        brake.check("t", make(100_000))


def test_a_10_mb_string_costs_at_most_3x_its_size_in_memory() -> None:
    big = {"content": "x" * (10 * 1024 * 1024), "path": "/tmp/big.txt"}
    size = len(big["content"])
    brake = LoopBrake()
    brake.check("write_file", big)  # warm up: lazy imports and caches
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        brake.check("write_file", big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 3 * size, f"peak {peak} bytes for a {size}-byte string"


def test_a_10_mb_non_ascii_string_with_escapes_is_identified() -> None:
    chunk = 'ü\n"\\€😀'
    big = {"content": chunk * (10 * 1024 * 1024 // len(chunk.encode()))}
    assert canonical_json(big).startswith('{"content":"ü\\n\\"\\\\€😀')
    assert call_hash("t", big) == call_hash("t", {"content": str(big["content"])})


def test_hostile_arguments_through_the_harness_never_crash_a_call() -> None:
    harness = Harness.from_rows([Row("loop-brake", "dsh-loop-brake", {"maxRepeats": 3})])
    ran: list[str] = []
    harness.tools.register(ToolDefinition("t", lambda args, execution: ran.append("ran")))
    cases = [*NOT_JSON.values(), *(args for args, _ in AWKWARD.values()), nested_lists(50_000)]

    async def run_all() -> list[bool]:
        results = []
        for index, args in enumerate(cases):
            execution = ToolExecution(f"c{index}", "t", args, Agent(f"agent-{index}"))
            results.append((await harness.execute(execution)).is_error)
        return results

    errors = asyncio.run(run_all())
    harness.dispose()
    assert errors == [False] * len(cases)
    assert len(ran) == len(cases)
