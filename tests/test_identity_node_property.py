"""Random JSON values: canonical_json agrees with JavaScript (SPEC §1).

One Node process (tests/golden/make_golden.mjs --lines) serves the whole hypothesis run: each
example is one line in and one line out, so failures still shrink to a minimal value.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_loop_brake import canonical_json

SCRIPT = Path(__file__).parent / "golden" / "make_golden.mjs"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    # the recursive strategy's repr is long; hypothesis only says so, nothing is wrong
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

# Characters where JSON.stringify and Python differ most: controls, quote, backslash, DEL, line
# separators, surrogates (paired and lone), the top of the BMP and astral planes.
_INTERESTING = st.one_of(
    st.integers(0, 0x1F).map(chr),
    st.sampled_from('"\\/\x7f\x85\u2028\u2029\ufeff\uffff\ue000\u00e9'),
    st.sampled_from("\ud800\udbff\udc00\udfff\U00010000\U0001f600\U0010ffff"),
    # a surrogate pair held as two code points is the astral character to JavaScript
    st.sampled_from(["\ud83d\ude00", "\udbff\udfff"]),
)
_TEXT = st.lists(
    st.one_of(st.characters(codec=None, categories=None), _INTERESTING), max_size=10
).map("".join)

_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 2.0**53, 2.0**60]),
    st.integers(-(2**60), 2**60).map(float),
    st.integers(-330, 310).map(lambda e: 10.0**e if -308 <= e <= 308 else 5e-324),
)
_INTS = st.one_of(
    st.integers(-(2**53), 2**53), st.integers(-(10**300), 10**300), st.integers(-(2**80), 2**80)
)


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _objects(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    # Keys unique as JavaScript sees them: a pair held as two code points equals the astral
    # character, and an object with the same key twice has no JSON form (tested elsewhere).
    pairs = st.lists(st.tuples(_TEXT, values), max_size=6, unique_by=lambda kv: _utf16(kv[0]))
    return pairs.map(dict)


_LEAVES = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXT)
_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        _objects(children),
    ),
    max_leaves=25,
)


def to_tagged(value: Any) -> Any:
    """``value`` in the tagged JSON the reference script reads (see make_golden.mjs)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) <= 2**53 - 1:
            return value
        return {"$py": "int", "digits": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"$py": "float", "value": "nan"}
        if math.isinf(value):
            return {"$py": "float", "value": "inf" if value > 0 else "-inf"}
        return value
    if isinstance(value, (list, tuple)):
        return [to_tagged(item) for item in value]
    if "$py" in value:
        return {"$py": "object", "pairs": [[k, to_tagged(v)] for k, v in value.items()]}
    return {key: to_tagged(item) for key, item in value.items()}


class NodeReference:
    """A running ``make_golden.mjs --lines``: one value in, its canonical JSON out."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["node", str(SCRIPT), "--lines"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def canonical(self, value: Any) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        line = json.dumps(to_tagged(value), ensure_ascii=True, allow_nan=False)
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the Node reference process stopped"
        text: str = json.loads(answer)
        return text

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def node() -> Iterator[NodeReference]:
    reference = NodeReference()
    yield reference
    reference.close()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(value=_VALUES)
def test_random_values_match_javascript(node: NodeReference, value: Any) -> None:
    assert canonical_json(value) == node.canonical(value)


@settings(max_examples=60)
@given(keys=st.lists(_TEXT, min_size=2, max_size=8, unique_by=_utf16))
def test_random_keys_sort_as_javascript_sorts_them(node: NodeReference, keys: list[str]) -> None:
    value = {key: index for index, key in enumerate(keys)}
    assert canonical_json(value) == node.canonical(value)


# Floats of every magnitude, where float.__repr__ and Number::toString choose different forms
# (exponent notation below 1e-4 and from 1e16 for repr, below 1e-6 and from 1e21 for JavaScript).
_ANY_MAGNITUDE = st.one_of(
    _FLOATS,
    st.tuples(st.floats(1, 10, exclude_max=True), st.integers(-30, 30), st.booleans()).map(
        lambda t: (-1 if t[2] else 1) * t[0] * 10.0 ** t[1]
    ),
    st.integers(-(2**60), 2**60).map(float),
)
_NUMBERS = st.lists(st.one_of(_ANY_MAGNITUDE, _ANY_MAGNITUDE, _INTS), max_size=40)


@settings(max_examples=150)
@given(numbers=_NUMBERS, wrap=st.booleans())
def test_arrays_of_numbers_of_every_magnitude_match_javascript(
    node: NodeReference, numbers: list[Any], wrap: bool
) -> None:
    value: Any = {"input": numbers, "model": "m"} if wrap else numbers
    assert canonical_json(value) == node.canonical(value)


_ROW_VALUES = st.one_of(st.none(), st.booleans(), _INTS, _ANY_MAGNITUDE, _TEXT)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.dictionaries(
            st.sampled_from(["id", "name", "score", "tags", "\U0001f600"]), _ROW_VALUES
        ),
        min_size=50,
        max_size=400,
    )
)
def test_long_lists_of_small_objects_match_javascript(
    node: NodeReference, rows: list[dict[str, Any]]
) -> None:
    assert canonical_json({"rows": rows}) == node.canonical({"rows": rows})


# Text that looks like the end of a float as repr writes it ("1.0," "e-05" "e-07]"): the C
# encoder's text is only rewritten where every such sequence is a float's.
_LOOKALIKE_TEXT = st.text(alphabet="e-+0123456789.,}]:[x\x0e\x1e", max_size=10)
_FLOATS_AND_LOOKALIKES = st.recursive(
    st.one_of(_ANY_MAGNITUDE, _LOOKALIKE_TEXT, st.integers(-3, 3)),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_LOOKALIKE_TEXT, children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=200)
@given(value=_FLOATS_AND_LOOKALIKES)
def test_floats_beside_text_that_looks_like_them_match_javascript(
    node: NodeReference, value: Any
) -> None:
    assert canonical_json(value) == node.canonical(value)


# Floats from 1e-6 to 1e-4, which repr writes "1.5e-05" and JavaScript "0.000015": each is
# rewritten from the split of the C encoder's text (or of a number array's), so arrays made of
# little else, with every sign and digit count, their neighbours just outside the band, and
# integral floats and ints beside them, are where a misplaced digit or sign would show.
_BAND = st.one_of(
    st.floats(1e-6, 1e-4, exclude_max=True),
    st.floats(-1e-4, -1e-6, exclude_min=True),
    st.sampled_from([1e-6, 1e-5, -1e-5, 9.999999999999999e-05, 1.0000000000000002e-06]),
    st.sampled_from([9.99999999999e-07, -9.99999999999e-07, 1e-4, -1e-4, 0.5, -3.0, 7]),
    st.tuples(st.integers(1, 99999), st.integers(5, 10), st.booleans()).map(
        lambda t: (-1 if t[2] else 1) * t[0] * 10.0 ** -t[1]
    ),
)


@settings(max_examples=150)
@given(
    numbers=st.lists(_BAND, min_size=1, max_size=60),
    wrap=st.sampled_from(["bare", "object", "nested"]),
)
def test_floats_from_1e_6_to_1e_4_match_javascript(
    node: NodeReference, numbers: list[Any], wrap: str
) -> None:
    value: Any = numbers
    if wrap == "object":
        value = {"vector": numbers, "first": numbers[0], "id": "doc-7"}
    elif wrap == "nested":
        value = [{"p": number, "q": [number, -number]} for number in numbers]
    assert canonical_json(value) == node.canonical(value)
