"""Fail open that cannot crash (SPEC §2): arguments that raise while they are read allow the call.

Also: a ``LoopBrakeError`` leaving ``check`` keeps no argument in the locals of its frames, as an
error tracker renders them (``traceback.TracebackException(..., capture_locals=True)``).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_loop_brake import LoopBrake, LoopBrakeError, call_hash, canonical_json

CANARY = "sk-CANARY-91d2e7"


class LazyList(list[Any]):
    """A list fetched on iteration, as an ORM or a network client might hand one over."""

    def __iter__(self) -> Iterator[Any]:
        raise ConnectionError(f"could not fetch {CANARY}")


class LyingLength(list[Any]):
    def __len__(self) -> int:
        raise ConnectionError(f"no length for {CANARY}")


class LazyTuple(tuple[Any, ...]):
    def __iter__(self) -> Iterator[Any]:
        raise TimeoutError(CANARY)


class LazyMapping(dict[str, Any]):
    """A dict subclass whose items are fetched on access."""

    def __iter__(self) -> Iterator[str]:
        return iter(dict.keys(self))

    def __getitem__(self, key: str) -> Any:
        raise KeyError(CANARY)


def hostile_arguments() -> dict[str, Any]:
    return {
        "list whose __iter__ raises": {"q": LazyList([CANARY])},
        "list whose __len__ raises": {"q": LyingLength([CANARY])},
        "tuple whose __iter__ raises": {"q": LazyTuple((CANARY,))},
        "dict whose __getitem__ raises": {"q": LazyMapping(token=CANARY)},
        "at the top": LazyList([CANARY]),
        "deep inside": {"a": [{"b": [1, 2, {"c": LazyList([CANARY])}]}]},
        "beside an embedding": {"v": [0.5] * 100, "w": LazyList([CANARY])},
    }


HOSTILE = hostile_arguments()
HOSTILE_TYPES = {
    "list whose __iter__ raises": ("LazyList", "ConnectionError"),
    "list whose __len__ raises": ("LyingLength", "ConnectionError"),
    "tuple whose __iter__ raises": ("LazyTuple", "TimeoutError"),
    "dict whose __getitem__ raises": ("LazyMapping", "KeyError"),
    "at the top": ("LazyList", "ConnectionError"),
    "deep inside": ("LazyList", "ConnectionError"),
    "beside an embedding": ("LazyList", "ConnectionError"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_arguments_that_raise_while_read_allow_the_call_and_end_the_streak(name: str) -> None:
    brake = LoopBrake(max_repeats=2)
    assert brake.check("search", {"q": "x"}, session_id="s") == 1
    for _ in range(4):
        assert brake.check("search", HOSTILE[name], session_id="s") == 0  # allowed, never denied
    assert brake.streak("s") is None  # an unidentified call ends the streak
    assert brake.check("search", {"q": "x"}, session_id="s") == 1


@pytest.mark.parametrize("name", HOSTILE)
def test_canonical_json_refuses_them_with_a_type_error_naming_only_types(name: str) -> None:
    with pytest.raises(TypeError) as refused:
        canonical_json(HOSTILE[name])
    container, raised = HOSTILE_TYPES[name]
    assert f"'{container}' raised {raised} while being read" in str(refused.value)
    assert CANARY not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


@pytest.mark.parametrize("name", HOSTILE)
def test_the_warning_names_the_tool_and_the_types_once_and_never_a_value(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    brake = LoopBrake()
    with caplog.at_level(logging.DEBUG, logger="dsh_loop_brake"):
        for _ in range(3):
            brake.check("fetch_rows", HOSTILE[name])
    (record,) = [r for r in caplog.records if r.name == "dsh_loop_brake"]
    message = record.getMessage()
    container, raised = HOSTILE_TYPES[name]
    assert record.levelno == logging.WARNING
    assert '"fetch_rows"' in message and container in message and raised in message
    assert CANARY not in message and "\n" not in message


class RaisingComparison(str):
    def __lt__(self, other: object) -> bool:
        raise ConnectionError(CANARY)

    def __gt__(self, other: object) -> bool:
        raise ConnectionError(CANARY)


class ReversedComparison(str):
    def __lt__(self, other: object) -> bool:
        return str.__gt__(self, str(other))


class SecretText(str):
    def __str__(self) -> str:
        raise ConnectionError(CANARY)

    def __repr__(self) -> str:
        raise ConnectionError(CANARY)

    def __hash__(self) -> int:
        return str.__hash__(self)


class HostileNumber(float):
    def __float__(self) -> float:
        raise ConnectionError(CANARY)

    def __repr__(self) -> str:
        raise ConnectionError(CANARY)


class RaisingFloat(float):
    def __float__(self) -> float:
        raise ConnectionError(CANARY)


class ComparisonRaises(float):
    def __eq__(self, other: object) -> bool:
        raise ConnectionError(CANARY)

    def __hash__(self) -> int:
        return float.__hash__(self)


class HostileInt(int):
    def __int__(self) -> int:
        raise ConnectionError(CANARY)

    def __index__(self) -> int:
        raise ConnectionError(CANARY)


class QuietList(list[Any]):
    def __bool__(self) -> bool:
        raise ConnectionError(CANARY)


def test_subclass_methods_that_raise_are_never_called_for_keys_and_scalars() -> None:
    # Keys are ordered by the text they hold (RFC 8785: UTF-16 code units), never by their own
    # comparison; scalars are written by their base type. So none of these raise, and each is
    # the very call its plain form is: counted, and denied at the limit.
    plain = {"a": 1, "b": "two", "c": 3.5, "d": 7, "e": [1, 2], "f": 0.25}
    hostile = {
        RaisingComparison("b"): SecretText("two"),
        ReversedComparison("a"): 1,
        RaisingComparison("c"): ComparisonRaises(3.5),
        ReversedComparison("d"): HostileInt(7),
        "e": QuietList([1, 2]),
        "f": HostileNumber(0.25),
    }
    assert (
        canonical_json(hostile)
        == canonical_json(plain)
        == ('{"a":1,"b":"two","c":3.5,"d":7,"e":[1,2],"f":0.25}')
    )
    brake = LoopBrake(max_repeats=2)
    assert brake.check("t", plain) == 1
    with pytest.raises(LoopBrakeError):
        brake.check("t", hostile)


def test_subclass_keys_holding_one_text_are_one_key_to_javascript_and_refused() -> None:
    class Distinct(str):
        __hash__ = object.__hash__  # two instances with one text are two dict keys

        def __eq__(self, other: object) -> bool:
            return self is other

    with pytest.raises(ValueError, match="same key to JavaScript"):
        canonical_json({Distinct("k"): 1, Distinct("k"): 2})
    assert LoopBrake().check("t", {Distinct("k"): 1, Distinct("k"): 2}) == 0


def test_a_subclass_that_contains_itself_is_a_cycle_not_a_hang() -> None:
    # Read through list(), a subclass is a new list each time: the cycle is still seen.
    plain: list[Any] = []
    cyclic = QuietList([plain])
    plain.append(cyclic)
    itself = QuietList()
    itself.append(itself)
    for value in (cyclic, itself, {"k": [cyclic]}):
        with pytest.raises(ValueError, match="contains itself"):
            canonical_json(value)
        assert LoopBrake().check("t", value) == 0


# --- Hypothesis: any mixture of JSON and hostile containers ------------------------------------


def _hostile(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3).map(LazyList),
        st.lists(children, max_size=3).map(LyingLength),
        st.lists(children, max_size=3).map(QuietList),
        st.dictionaries(st.text(max_size=3), children, max_size=3).map(LazyMapping),
        st.dictionaries(st.text(max_size=3).map(RaisingComparison), children, max_size=3),
    )


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    # (hypothesis shows examples by repr: these leave repr alone)
    st.sampled_from([RaisingComparison("s"), RaisingFloat(2.0), HostileInt(3), b"bytes", {1, 2}]),
)
_ANY = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=4), children, max_size=4),
        _hostile(children),
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(args=_ANY)
def test_no_argument_ever_crashes_a_check(args: Any) -> None:
    try:
        text = canonical_json(args)
    except (TypeError, ValueError):
        text = None  # refused: and nothing else may leave canonical_json
    brake = LoopBrake(max_repeats=2)
    first = brake.check("t", args, session_id="s")
    if text is None:
        assert first == 0 and brake.streak("s") is None
        assert brake.check("t", args, session_id="s") == 0
    else:
        assert first == 1
        assert brake.streak("s") == (call_hash("t", args)[:12], 1)
        with pytest.raises(LoopBrakeError):
            brake.check("t", args, session_id="s")


# --- A denial rendered with local variables ----------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = {"token": CANARY}
    for _ in range(depth):
        value = [value]
    return value


SECRET_SHAPES = {
    "flat": {"token": CANARY, "n": 1},
    "nested": {"headers": {"Authorization": f"Bearer {CANARY}"}, "retry": [1, 2.5, 3.0]},
    "deep (the exact encoder)": _nested(300),
    "subclass (the exact encoder)": {"q": QuietList([CANARY])},
    "embedding beside it": {"input": [1e-5, 0.25] * 100, "user": CANARY},
}


@pytest.mark.parametrize("shape", SECRET_SHAPES)
def test_a_denial_rendered_with_locals_shows_no_argument(shape: str) -> None:
    args = SECRET_SHAPES[shape]
    brake = LoopBrake(max_repeats=2)
    brake.check("http_get", args)
    with pytest.raises(LoopBrakeError) as denied:
        brake.check("http_get", args)
    error = denied.value
    rendered = traceback.TracebackException(
        type(error), error, error.__traceback__, capture_locals=True
    )
    ours = [frame for frame in rendered.stack if "dsh_loop_brake" in frame.filename]
    assert [frame.name for frame in ours] == ["check"]
    assert ours[0].locals is not None and ours[0].locals["self"] == "LoopBrake(max_repeats=2)"
    for frame in ours:
        assert CANARY not in repr(frame.locals)
    assert rendered.__context__ is None and rendered.__cause__ is None
