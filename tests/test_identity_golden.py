"""Call identity against golden vectors produced by JavaScript's JSON.stringify (SPEC §1).

``tests/golden/identity_inputs.json`` holds the inputs in "tagged JSON" (see make_golden.mjs);
``identity_expected.json`` is what ``node tests/golden/make_golden.mjs`` printed for them. The
expected file is committed so the suite runs without Node; when Node is present a test re-runs the
script and requires byte-identical output, so the vectors cannot drift from JavaScript.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import call_hash, canonical_json, hash_prefix

GOLDEN = Path(__file__).parent / "golden"
INPUTS = GOLDEN / "identity_inputs.json"
EXPECTED = GOLDEN / "identity_expected.json"
SCRIPT = GOLDEN / "make_golden.mjs"

_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def decode_tagged(node: Any) -> Any:
    """A tagged-JSON node (as parsed by json.loads) as the Python value it stands for."""
    if isinstance(node, list):
        return [decode_tagged(item) for item in node]
    if not isinstance(node, dict):
        return node
    if "$py" not in node:
        return {key: decode_tagged(value) for key, value in node.items()}
    tag = node["$py"]
    if tag == "int":
        return int(node["digits"])
    if tag == "float":
        return _NON_FINITE[node["value"]]
    if tag == "object":
        return {key: decode_tagged(value) for key, value in node["pairs"]}
    raise AssertionError(f"unknown tag {tag!r}")


def _load(path: Path) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


VECTORS = list(zip(_load(INPUTS), _load(EXPECTED), strict=False))


def test_every_input_has_its_expected_output() -> None:
    assert len(VECTORS) == len(_load(INPUTS)) == len(_load(EXPECTED)) > 100
    for given, expected in VECTORS:
        assert given["name"] == expected["name"]


@pytest.mark.parametrize(("given", "expected"), VECTORS, ids=[g["name"] for g, _ in VECTORS])
def test_canonical_json_matches_javascript(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert canonical_json(decode_tagged(given["value"])) == expected["canonical"]


HASHED = [(g, e) for g, e in VECTORS if "tool" in g]


@pytest.mark.parametrize(("given", "expected"), HASHED, ids=[g["name"] for g, _ in HASHED])
def test_call_hash_matches_javascript(given: dict[str, Any], expected: dict[str, Any]) -> None:
    digest = call_hash(given["tool"], decode_tagged(given["value"]))
    assert digest == expected["callHash"]
    assert hash_prefix(digest) == expected["callHash"][:12]


def test_the_vectors_cover_what_the_spec_names() -> None:
    outputs = {e["name"]: e["canonical"] for _, e in VECTORS}
    assert outputs["float 1.0"] == "1"
    assert outputs["float -0.0"] == "0"
    assert outputs["float 1e21"] == "1e+21"
    assert outputs["float 1e-7"] == "1e-7"
    assert outputs["float 1.2345678901234568e20"] == "123456789012345680000"
    assert outputs["float NaN"] == outputs["float Infinity"] == "null"
    assert outputs["lone high surrogate"] == '"a\\ud800b"'
    assert outputs["control character U+001F"] == '"a\\u001fb"'
    assert outputs["U+2028 line separator"] == '"a\u2028b"'
    assert outputs["astral key sorts before U+FFFF key (UTF-16 order)"] == (
        '{"\U0001f600":"astral","\uffff":"ffff"}'
    )
    assert len(HASHED) >= 8


def test_big_int_vectors_follow_the_exact_decimal_rule() -> None:
    # JavaScript would round these; the spec writes Python ints exactly, so for them the expected
    # text is the rule itself, and the reference script writes it from a BigInt.
    big = [
        (g, e)
        for g, e in VECTORS
        if isinstance(g["value"], dict) and g["value"].get("$py") == "int"
    ]
    assert len(big) >= 5
    for given, expected in big:
        number = int(given["value"]["digits"])
        assert abs(number) > 2**53 - 1
        assert expected["canonical"] == str(number) == canonical_json(number)


def test_call_hash_is_sha256_of_name_newline_canonical_json() -> None:
    for given, _ in HASHED:
        value = decode_tagged(given["value"])
        data = (given["tool"] + "\n" + canonical_json(value)).encode("utf-8")
        assert call_hash(given["tool"], value) == hashlib.sha256(data).hexdigest()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_reference_script_still_produces_the_committed_vectors() -> None:
    completed = subprocess.run(
        ["node", str(SCRIPT), str(INPUTS)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert completed.stdout.decode("utf-8") == EXPECTED.read_text(encoding="utf-8")
