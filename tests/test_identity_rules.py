"""Call identity rules golden vectors cannot express (SPEC §1): Python types, refusals, depth."""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import re
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_loop_brake import call_hash, canonical_json, hash_prefix


def test_key_order_does_not_matter_and_nothing_else_is_changed() -> None:
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1}) == '{"a":1,"b":2}'
    assert call_hash("search", {"q": "weather"}) != call_hash("search", {"q": "weather "})
    assert call_hash("search", {"q": "weather"}) != call_hash("Search", {"q": "weather"})
    assert call_hash("search", {"q": "a", "n": 1}) != call_hash("search", {"q": "a", "n": "1"})
    assert canonical_json({"text": "  spaced\u00a0out  "}) == '{"text":"  spaced\u00a0out  "}'


def test_sorting_applies_at_every_level() -> None:
    value = {"z": [{"d": 1, "c": {"f": 2, "e": 3}}], "a": {"y": None, "x": True}}
    assert canonical_json(value) == '{"a":{"x":true,"y":null},"z":[{"c":{"e":3,"f":2},"d":1}]}'


def test_tuples_are_arrays_and_python_literals_are_json_literals() -> None:
    assert canonical_json((1, "a", None, True, False)) == '[1,"a",null,true,false]'
    assert canonical_json([(), []]) == "[[],[]]"
    assert call_hash("t", {"p": (1, 2)}) == call_hash("t", {"p": [1, 2]})


def test_ints_and_floats_that_javascript_sees_as_equal_are_one_call() -> None:
    assert call_hash("t", {"n": 1}) == call_hash("t", {"n": 1.0})
    assert call_hash("t", {"n": 0}) == call_hash("t", {"n": -0.0})


def test_ints_are_exact_beyond_two_to_the_53() -> None:
    assert canonical_json(2**53 + 1) == "9007199254740993"
    assert canonical_json(float(2**53 + 1)) == "9007199254740992"
    assert canonical_json([-(2**100)]) == f"[{-(2**100)}]"
    assert call_hash("t", 2**53 + 1) != call_hash("t", 2**53)


def test_subclasses_of_json_types_are_written_as_their_base_type() -> None:
    class Colour(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    class Ratio(float):
        def __repr__(self) -> str:
            return "not a number"

    class Word(str):
        def __str__(self) -> str:
            return "other"

    assert canonical_json({"c": Colour.RED, "l": Level.HIGH}) == '{"c":"red","l":3}'
    assert canonical_json([Ratio(0.5), Ratio(2.0), Word("w")]) == '[0.5,2,"w"]'
    assert canonical_json(OrderedDict([("b", 1), ("a", 2)])) == '{"a":2,"b":1}'
    assert canonical_json({Word("k"): 1}) == '{"k":1}'


class Opaque:
    def __repr__(self) -> str:
        return "Opaque(secret-token-123)"


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (datetime.datetime(2026, 1, 1), "datetime"),
        (decimal.Decimal("1.5"), "Decimal"),
        (Opaque(), "Opaque"),
        ({"a": [1, {"b": Opaque()}]}, "Opaque"),
        (complex(1, 2), "complex"),
        (range(3), "range"),
    ],
)
def test_values_that_are_not_json_are_refused_with_a_type_error(value: Any, type_name: str) -> None:
    with pytest.raises(TypeError) as caught:
        canonical_json(value)
    message = str(caught.value)
    assert type_name in message
    assert "secret-token-123" not in message
    with pytest.raises(TypeError):
        call_hash("t", value)


@pytest.mark.parametrize("key", [1, 1.5, None, True, ("a",), b"k"])
def test_non_str_keys_are_refused(key: Any) -> None:
    with pytest.raises(TypeError, match=type(key).__name__):
        canonical_json({key: "v"})
    with pytest.raises(TypeError):
        canonical_json({"a": {key: "v", "b": 1}})


def test_cycles_are_refused_with_a_value_error() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError):
        canonical_json(loop)
    tree: dict[str, Any] = {"a": {}}
    tree["a"]["up"] = tree
    with pytest.raises(ValueError):
        canonical_json({"x": tree})
    # exponential fan-out back to the root must not hang either
    fan: dict[str, Any] = {}
    fan["l"] = fan["r"] = fan
    with pytest.raises(ValueError):
        canonical_json(fan)


def test_a_shared_but_acyclic_value_is_fine() -> None:
    shared = [1, 2]
    assert canonical_json({"a": shared, "b": shared, "c": [shared, shared]}) == (
        '{"a":[1,2],"b":[1,2],"c":[[1,2],[1,2]]}'
    )


@pytest.mark.parametrize("depth", [500, 1_000, 20_000])
def test_deep_nesting_never_raises_recursion_error(depth: int) -> None:
    nested: Any = "x"
    for _ in range(depth):
        nested = [nested]
    assert canonical_json(nested) == "[" * depth + '"x"' + "]" * depth
    objects: Any = None
    for _ in range(depth):
        objects = {"k": objects}
    assert canonical_json(objects) == '{"k":' * depth + "null" + "}" * depth


@pytest.mark.parametrize("leaf", [1.0, float("nan"), 1e-7, "\U0001f600", "\ud800"])
def test_deep_nesting_around_any_leaf_never_raises_recursion_error(leaf: Any) -> None:
    for depth in (900, 999, 1_001, 3_000):
        nested: Any = leaf
        for _ in range(depth):
            nested = [nested]
        text = canonical_json(nested)
        assert text == "[" * depth + canonical_json(leaf) + "]" * depth
        objects: Any = leaf
        for _ in range(depth):
            objects = {"\U0001f600": objects}
        assert canonical_json(objects).endswith(canonical_json(leaf) + "}" * depth)


def test_deep_cycle_is_refused_not_a_recursion_error() -> None:
    root: list[Any] = []
    node = root
    for _ in range(10_000):
        child: list[Any] = []
        node.append(child)
        node = child
    node.append(root)
    with pytest.raises(ValueError):
        canonical_json(root)


def test_a_pair_of_surrogate_code_points_is_the_astral_character_javascript_sees() -> None:
    assert canonical_json("\ud83d\ude00") == canonical_json("\U0001f600") == '"\U0001f600"'
    assert canonical_json("\ude00\ud83d") == '"\\ude00\\ud83d"'
    assert canonical_json({"\ud83d\ude00": 1, "\uffff": 2}) == '{"\U0001f600":1,"\uffff":2}'


def test_keys_javascript_would_see_as_one_key_are_refused() -> None:
    with pytest.raises(ValueError, match="same key"):
        canonical_json({"\ud83d\ude00": 1, "\U0001f600": 2})


def test_lone_surrogates_hash_without_error() -> None:
    assert call_hash("t", {"q": "\ud800"}) == hashlib.sha256(b't\n{"q":"\\ud800"}').hexdigest()
    assert call_hash("t", {"\udfff": 1}) != call_hash("t", {"\ud800": 1})


def test_call_hash_is_64_lowercase_hex_and_the_prefix_is_12() -> None:
    digest = call_hash("search", {"q": "weather"})
    assert re.fullmatch("[0-9a-f]{64}", digest)
    expected = hashlib.sha256(b'search\n{"q":"weather"}').hexdigest()
    assert digest == expected
    assert hash_prefix(digest) == expected[:12]
    assert len(hash_prefix(digest)) == 12
    assert hash_prefix("abc") == "abc"


def test_a_tool_name_reads_as_javascript_reads_it() -> None:
    assert call_hash("\ud83d\ude00", {}) == call_hash("\U0001f600", {})
    lone = call_hash("t\ud800", {})  # not valid Unicode: hashed, and kept apart from U+FFFD
    assert lone != call_hash("t\ufffd", {}) and lone != call_hash("t\udc00", {})


def test_tool_name_is_part_of_the_identity_and_must_be_a_string() -> None:
    assert call_hash("a\nb", {}) == hashlib.sha256(b"a\nb\n{}").hexdigest()
    assert call_hash("\u8bfb", {}) == hashlib.sha256("\u8bfb\n{}".encode()).hexdigest()
    with pytest.raises(TypeError):
        call_hash(7, {})  # type: ignore[arg-type]


def test_huge_values_are_identified() -> None:
    big = {"content": "x" * 5_000_000, "lines": list(range(100_000))}
    assert call_hash("write", big) == call_hash("write", dict(reversed(big.items())))
    wide = {f"k{i}": [i, {"v": float(i) / 7}] for i in range(20_000)}
    text = canonical_json(wide)
    assert text.startswith('{"k0":[0,{"v":0}],"k1":[1,{"v":0.14285714285714285}],"k10":')


@settings(max_examples=300)
@given(
    numbers=st.lists(
        st.one_of(
            st.floats(),
            st.integers(),
            st.tuples(st.floats(1, 10), st.integers(-330, 310)).map(
                lambda t: float(f"{t[0]}e{t[1]}")
            ),
        ),
        max_size=30,
    )
)
def test_an_array_of_numbers_is_its_numbers_each_written_alone(numbers: list[Any]) -> None:
    # An array of numbers is written in one piece; each number alone takes another path.
    assert canonical_json(numbers) == "[" + ",".join(map(canonical_json, numbers)) + "]"
    assert canonical_json(tuple(numbers)) == canonical_json(numbers)
    assert canonical_json({"v": numbers}) == '{"v":' + canonical_json(numbers) + "}"


def test_large_arguments_are_exact_whichever_path_writes_them() -> None:
    rows = [
        {"id": i, "name": f"item-{i}", "score": [0.5, 1.0, 1e-5, -0.0][i % 4]}
        for i in range(10_000)
    ]
    text = canonical_json({"rows": rows})
    assert text.startswith(
        '{"rows":[{"id":0,"name":"item-0","score":0.5},{"id":1,"name":"item-1","score":1},'
    )
    assert '{"id":2,"name":"item-2","score":0.00001},{"id":3,"name":"item-3","score":0}' in text
    astral = canonical_json([{"\U0001f600": i, "\uffff": -i, "a": 0.5} for i in range(1000)])
    assert astral.startswith('[{"a":0.5,"\U0001f600":0,"\uffff":0},{"a":0.5,"\U0001f600":1,')
    embedding = [float(("-" if i % 2 else "") + f"1.5e-{i % 12}") for i in range(1536)]
    assert canonical_json(embedding).startswith(
        "[1.5,-0.15,0.015,-0.0015,0.00015,-0.000015,0.0000015,-1.5e-7,"
    )
