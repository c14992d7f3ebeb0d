"""maxRepeats values and where they come from (SPEC §2, configuration values)."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from typing import Any

import pytest

from dsh_loop_brake import (
    DEFAULT_MAX_REPEATS,
    ENV_VAR,
    InvalidMaxRepeatsError,
    LoopBrakeConfigError,
    normalize_max_repeats,
    resolve_max_repeats,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (3, 3),
        (10**6, 10**6),
        (5.0, 5),
        (1.0, 1),
        ("4", 4),
        ("  12\n", 12),
        ("\t1 ", 1),
        ("0" * 40 + "5", 5),  # a plain decimal integer, however it is written
        (" 1" + "0" * 40 + " ", 10**40),
        ("0" * 10_000 + "8", 8),
    ],
    ids=lambda value: repr(value)[:24],
)
def test_accepted_values(value: Any, expected: int) -> None:
    result = normalize_max_repeats(value)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    "value",
    [
        0,
        -3,
        True,
        False,
        2.5,
        0.0,
        -1.0,
        float("nan"),
        float("inf"),
        "0",
        "-1",
        "+5",
        "5.0",
        "1e3",
        "five",
        "",
        "   ",
        "0x10",
        "1_000",
        "\u0663",
        None,
        [3],
        {"n": 3},
        b"3",
        3j,
    ],
)
def test_rejected_values(value: Any) -> None:
    with pytest.raises(InvalidMaxRepeatsError) as caught:
        normalize_max_repeats(value)
    error = caught.value
    assert isinstance(error, LoopBrakeConfigError)
    assert isinstance(error, ValueError)
    assert error.code == "LOOP_BRAKE_CONFIG"
    assert error.source == "the loop-brake patch row"
    assert error.value is value or (value != value and error.value != error.value)


def test_the_message_names_value_rule_and_source() -> None:
    with pytest.raises(InvalidMaxRepeatsError) as caught:
        normalize_max_repeats(0)
    assert str(caught.value) == (
        "loop brake: maxRepeats must be an integer of at least 1, got 0 "
        "(from the loop-brake patch row)"
    )
    with pytest.raises(InvalidMaxRepeatsError) as env:
        normalize_max_repeats("x", source=f"the environment variable {ENV_VAR}")
    assert str(env.value) == (
        "loop brake: maxRepeats must be an integer of at least 1, got 'x' "
        "(from the environment variable DSH_LOOP_BRAKE_MAX_REPEATS)"
    )
    assert env.value.source == "the environment variable DSH_LOOP_BRAKE_MAX_REPEATS"


def test_a_huge_value_is_shown_short_without_walking_it() -> None:
    for value in [
        "9" * 1_000_000 + "x",
        list(range(1_000_000)),
        -(10**100_000),
        b"z" * 10**6,
        {i: i for i in range(100_000)},
        "0" * 10**6,
    ]:
        with pytest.raises(InvalidMaxRepeatsError) as caught:
            normalize_max_repeats(value)
        shown = str(caught.value).split("got ", 1)[1].rsplit(" (from ", 1)[0]
        assert 0 < len(shown) <= 80


class Counted:
    """An item that records every time it is compared or shown."""

    touched = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return self.n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counted) and other.n == self.n

    def __lt__(self, other: Counted) -> bool:
        Counted.touched += 1
        return self.n < other.n

    def __repr__(self) -> str:
        Counted.touched += 1
        return f"C{self.n}"


class Tagged(list):  # type: ignore[type-arg]
    """A list subclass, as a YAML round-trip loader hands back (ruamel's CommentedSeq)."""


@pytest.mark.parametrize(
    "make",
    [
        lambda: {Counted(i): i for i in range(10_000)},
        lambda: {Counted(i) for i in range(10_000)},
        lambda: Tagged(Counted(i) for i in range(10_000)),
        lambda: OrderedDict((i, Counted(i)) for i in range(10_000)),
    ],
    ids=["dict", "set", "list-subclass", "dict-subclass"],
)
def test_a_huge_value_is_shown_from_its_first_items_never_sorted_or_walked(make: Any) -> None:
    value = make()
    Counted.touched = 0
    with pytest.raises(InvalidMaxRepeatsError) as caught:
        normalize_max_repeats(value)
    assert Counted.touched <= 10, Counted.touched
    assert len(str(caught.value).split("got ", 1)[1].rsplit(" (from ", 1)[0]) <= 80


@pytest.mark.parametrize("value", [[10**5000], {"n": 10**5000}, (1, [2, [-(10**9000)]])])
def test_a_huge_int_inside_a_value_is_refused_with_the_config_error(value: Any) -> None:
    # Python refuses to write an int of over 4300 digits in decimal: that must not turn the
    # configuration error into an unrelated ValueError.
    with pytest.raises(InvalidMaxRepeatsError, match="maxRepeats must be an integer"):
        normalize_max_repeats(value)


def test_invalid_max_repeats_error_pickles() -> None:
    with pytest.raises(InvalidMaxRepeatsError) as caught:
        normalize_max_repeats(-2, source="somewhere")
    restored = pickle.loads(pickle.dumps(caught.value))
    assert (restored.value, restored.source, str(restored)) == (-2, "somewhere", str(caught.value))


def test_config_error_is_a_value_error_with_a_code() -> None:
    error = LoopBrakeConfigError("loop brake: something is wrong")
    assert isinstance(error, ValueError)
    assert error.code == "LOOP_BRAKE_CONFIG"
    assert LoopBrakeConfigError.code == "LOOP_BRAKE_CONFIG"
    assert str(error) == "loop brake: something is wrong"


# resolve_max_repeats: the row beats the environment; the environment only when the key is missing.
ENV_7 = {ENV_VAR: "7"}


@pytest.mark.parametrize(
    ("config", "environ", "expected"),
    [
        (None, {}, DEFAULT_MAX_REPEATS),
        ({}, {}, 3),
        ({"maxRepeats": None}, {}, 3),
        ({"maxRepeats": 5}, {}, 5),
        ({"maxRepeats": "6"}, {}, 6),
        ({"maxRepeats": 5}, ENV_7, 5),  # row beats env
        ({"maxRepeats": 1}, ENV_7, 1),
        (None, ENV_7, 7),  # env only when the key is missing...
        ({}, ENV_7, 7),
        ({"maxRepeats": None}, ENV_7, 7),  # ...or null
        ({}, {ENV_VAR: " 9 "}, 9),
        ({}, {ENV_VAR: ""}, 3),  # blank counts as not set
        ({}, {ENV_VAR: "  \t"}, 3),
        ({}, {"OTHER": "8"}, 3),
        (OrderedDict(maxRepeats=4), ENV_7, 4),
        ({"maxRepeats": 5}, {ENV_VAR: "not a number"}, 5),  # env not even read
    ],
)
def test_resolution_matrix(config: Any, environ: dict[str, str], expected: int) -> None:
    assert resolve_max_repeats(config, environ) == expected


def test_invalid_values_from_either_source_raise_naming_it() -> None:
    with pytest.raises(InvalidMaxRepeatsError) as row:
        resolve_max_repeats({"maxRepeats": 0}, ENV_7)
    assert row.value.source == "the loop-brake patch row"
    with pytest.raises(InvalidMaxRepeatsError) as env:
        resolve_max_repeats({}, {ENV_VAR: "0"})
    assert env.value.source == f"the environment variable {ENV_VAR}"
    assert "DSH_LOOP_BRAKE_MAX_REPEATS" in str(env.value)
    with pytest.raises(InvalidMaxRepeatsError):
        resolve_max_repeats({"maxRepeats": False}, {})


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "11")
    assert resolve_max_repeats(None) == 11
    assert resolve_max_repeats({"maxRepeats": 2}) == 2
    monkeypatch.setenv(ENV_VAR, "-1")
    with pytest.raises(InvalidMaxRepeatsError):
        resolve_max_repeats({})
    monkeypatch.delenv(ENV_VAR)
    assert resolve_max_repeats({}) == 3


@pytest.mark.parametrize("config", [{"maxRepeat": 5}, {"maxRepeats": 5, "limit": 2}, {"": 1}])
def test_unknown_keys_are_rejected_naming_the_key_and_the_keys_that_exist(config: Any) -> None:
    unknown = next(key for key in config if key != "maxRepeats")
    with pytest.raises(LoopBrakeConfigError) as caught:
        resolve_max_repeats(config, ENV_7)
    message = str(caught.value)
    assert not isinstance(caught.value, InvalidMaxRepeatsError)
    assert repr(unknown) in message or f'"{unknown}"' in message
    assert "maxRepeats" in message
    assert "\n" not in message


@pytest.mark.parametrize("config", [5, "maxRepeats: 5", [("maxRepeats", 5)], True, 0])
def test_a_config_that_is_not_a_mapping_is_rejected(config: Any) -> None:
    with pytest.raises(LoopBrakeConfigError) as caught:
        resolve_max_repeats(config, {})
    assert "mapping" in str(caught.value)
    assert type(config).__name__ in str(caught.value)
