"""Safe YAML: core tags only; size, nesting and node-count limits refused with file and line."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from dsh_loop_brake.harness import PatchError, load_path
from dsh_loop_brake.harness.safe_yaml import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    check_events,
    load_text,
    read_text,
    to_plain,
)


def write(tmp_path: Path, text: str, name: str = "doc.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "- !!python/object/apply:os.system ['echo pwned']\n",
        "- !!python/name:os.system\n",
        "a: !!python/object:collections.OrderedDict {}\n",
        "a: !custom 1\n",
        "a: !!binary aGVsbG8=\n",
        "a: !!timestamp 2001-12-14\n",
        "a: !<tag:example.com,2000:app/foo> x\n",
    ],
)
def test_only_core_tags_are_accepted(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PatchError, match="is not allowed; only the YAML core tags") as caught:
        load_path(path)
    assert caught.value.line == 1 and caught.value.file == str(path)


def test_core_tags_are_fine_and_load_as_plain_values(tmp_path: Path) -> None:
    text = "a: !!str 5\nb: !!int '7'\nc: !!float 2\nd: !!bool true\ne: !!null ~\nf: !!seq [1]\n"
    assert to_plain(load_path(write(tmp_path, text))) == {
        "a": "5",
        "b": 7,
        "c": 2.0,
        "d": True,
        "e": None,
        "f": [1],
    }


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        refs = ",".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    path = write(tmp_path, billion_laughs())
    tracemalloc.start()
    try:
        with pytest.raises(PatchError, match=f"more than {MAX_NODES:,} nodes") as caught:
            load_path(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Expanded, this is 10^9 nodes; counted with memoised sizes it is refused at level 5.
    assert caught.value.line == 5
    assert peak < 20 * 1024 * 1024


def test_aliases_count_as_the_nodes_they_stand_for(tmp_path: Path) -> None:
    # 1,001 distinct nodes, but each of the 100 aliases stands for 1,001 of them.
    items = ",".join(["1"] * 1000)
    text = f"base: &b [{items}]\nuses: [" + ",".join(["*b"] * 100) + "]\n"
    with pytest.raises(PatchError, match="nodes"):
        load_text(text, "x.yml")
    small = f"base: &b [{items}]\nuses: [" + ",".join(["*b"] * 90) + "]\n"
    assert len(to_plain(load_text(small, "x.yml"))["uses"]) == 90


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="recursive") as caught:
        load_path(write(tmp_path, "a: 1\nb: &x\n  - *x\n"))
    assert caught.value.line == 3


def test_an_anchor_defined_twice_is_refused() -> None:
    with pytest.raises(PatchError, match="anchor &x is defined twice") as caught:
        load_text("a: &x [1]\nb: &x [*x]\n", "twice.yml")
    assert caught.value.line == 2


def test_nesting_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    assert load_text("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok.yml") is not None
    deep = write(tmp_path, "a: 1\nb: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n")
    with pytest.raises(PatchError, match=f"deeper than {MAX_DEPTH}") as caught:
        load_path(deep)
    assert caught.value.line == 2


def test_absurd_nesting_is_refused_without_recursion(tmp_path: Path) -> None:
    path = write(tmp_path, "[" * 20_000 + "]" * 20_000)
    with pytest.raises(PatchError, match="deeper than"):
        load_path(path)
    block = "".join("  " * level + "k:\n" for level in range(5000))
    with pytest.raises(PatchError, match="deeper than"):
        load_text(block, "block.yml")


def test_a_file_over_4_mib_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    path.write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    with pytest.raises(PatchError, match="larger than 4 MiB") as caught:
        load_path(path)
    assert caught.value.file == str(path)
    fits = tmp_path / "fits.yml"
    fits.write_bytes(b"#" + b"x" * (MAX_BYTES - 5) + b"\n[]\n")
    assert len(read_text(fits)) == MAX_BYTES  # exactly at the limit is still read


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "- id: loop-brake\n  config: {maxRepeats: 5\n- id: x\n")
    with pytest.raises(PatchError, match="malformed YAML") as caught:
        load_path(path)
    assert caught.value.file == str(path) and caught.value.line == 3
    assert "\n" not in str(caught.value)


def test_duplicate_keys_and_several_documents_are_malformed(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="duplicate key") as caught:
        load_path(write(tmp_path, "a: 1\na: 2\n"))
    assert caught.value.line == 2
    with pytest.raises(PatchError, match="single document"):
        load_path(write(tmp_path, "a: 1\n---\nb: 2\n", "two.yml"))


def test_text_that_is_not_utf8_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(PatchError, match="not UTF-8") as caught:
        load_path(path)
    assert caught.value.line == 2


# --- the node count equals the size of the expanded document --------------------------------

SCALARS = st.one_of(st.integers(-5, 5), st.text("abc", max_size=3), st.booleans(), st.none())


@st.composite
def shared_documents(draw: st.DrawFn) -> Any:
    """Nested lists and mappings that reuse earlier subtrees (dumped as anchors and aliases)."""
    made: list[Any] = []

    def node(depth: int) -> Any:
        choice = draw(st.integers(0, 3 if depth < 4 else 0))
        if choice == 0 or depth >= 4:
            return draw(SCALARS)
        if choice == 1 and made:
            return draw(st.sampled_from(made))  # a shared subtree: an alias in the YAML
        if choice == 2:
            value: Any = [node(depth + 1) for _ in range(draw(st.integers(0, 3)))]
        else:
            keys = draw(st.lists(st.text("xyz", min_size=1, max_size=2), max_size=3, unique=True))
            value = {key: node(depth + 1) for key in keys}
        made.append(value)
        return value

    return [node(0) for _ in range(draw(st.integers(1, 4)))]


def expanded_size(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + expanded_size(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(expanded_size(item) for item in value)
    return 1


@settings(max_examples=120)
@given(shared_documents())
def test_the_node_count_is_the_expanded_size_however_aliases_nest(document: Any) -> None:
    stream = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, stream)
    text = stream.getvalue()
    assert check_events(text, "generated.yml") == expanded_size(document)
    assert to_plain(load_text(text, "generated.yml")) == document
