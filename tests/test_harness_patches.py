"""Patch files and layers: every composition rule, per-key provenance, a property over stacks."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_loop_brake.harness import (
    Layer,
    ManifestError,
    PatchError,
    compose,
    compose_layers,
    profile_layers,
)


def layer(path: Path, text: str, kind: str = "patch") -> Layer:
    path.write_text(text, encoding="utf-8")
    return Layer(kind, path, kind)  # type: ignore[arg-type]


BASE = "- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n"


def test_insert_appends_rows_in_order_and_remembers_where(tmp_path: Path) -> None:
    first = layer(tmp_path / "a.yml", BASE)
    second = layer(tmp_path / "b.yml", "- insert:\n    - {id: cb, name: dsh-circuit-breaker}\n")
    composition = compose_layers([first, second])
    assert [row.as_dict() for row in composition.rows] == [
        {"id": "loop-brake", "name": "dsh-loop-brake", "config": None, "disabled": False},
        {"id": "cb", "name": "dsh-circuit-breaker", "config": None, "disabled": False},
    ]
    loop_brake = composition.rows[0]
    assert loop_brake.sources["id"].layer == first and loop_brake.sources["id"].line == 2
    assert loop_brake.sources["name"].line == 3
    assert "config" not in loop_brake.sources and "disabled" not in loop_brake.sources
    assert composition.skipped == ()


def test_a_patch_config_replaces_the_whole_config(tmp_path: Path) -> None:
    bundle = layer(
        tmp_path / "bundle.yml",
        "- insert:\n    - id: cb\n      name: dsh-circuit-breaker\n"
        "      config: {duplicateLimit: 4, window: 50}\n",
    )
    override = layer(tmp_path / "mine.yml", "- id: cb\n  config:\n    window: 80\n")
    row = compose_layers([bundle, override]).rows[0]
    assert row.config == {"window": 80}  # duplicateLimit is gone: no merge
    assert row.sources["config"].layer == override
    assert row.sources["config.window"].line == 3
    assert "config.duplicateLimit" not in row.sources


def test_config_null_means_no_config_and_empty_mapping_is_empty(tmp_path: Path) -> None:
    base = layer(tmp_path / "a.yml", BASE + "      config: {maxRepeats: 5}\n")
    to_null = layer(tmp_path / "b.yml", "- id: loop-brake\n  config: null\n")
    assert compose_layers([base, to_null]).rows[0].config is None
    to_empty = layer(tmp_path / "c.yml", "- id: loop-brake\n  config: {}\n")
    row = compose_layers([base, to_empty]).rows[0]
    assert row.config == {} and row.sources["config"].layer == to_empty


def test_disabled_switches_a_row_off_and_a_later_layer_on_again(tmp_path: Path) -> None:
    base = layer(tmp_path / "a.yml", BASE)
    off = layer(tmp_path / "b.yml", "- id: loop-brake\n  disabled: true\n")
    on = layer(tmp_path / "c.yml", "- id: loop-brake\n  disabled: false\n")
    assert compose_layers([base, off]).rows[0].disabled is True
    row = compose_layers([base, off, on]).rows[0]
    assert row.disabled is False and row.sources["disabled"].layer == on


def test_a_patch_for_an_unknown_id_warns_and_does_not_insert(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = layer(tmp_path / "a.yml", BASE)
    stray = layer(tmp_path / "b.yml", "# my tweaks\n- id: loop-brak\n  config: {maxRepeats: 2}\n")
    with caplog.at_level(logging.WARNING, logger="dsh_loop_brake.harness"):
        composition = compose_layers([base, stray])
    assert [row.id for row in composition.rows] == ["loop-brake"]
    assert composition.rows[0].config is None
    (entry,) = composition.skipped
    assert entry.as_dict() == {
        "layer": str(stray.path),
        "line": 2,
        "id": "loop-brak",
        "reason": entry.reason,
    }
    assert "no row has this id" in entry.reason
    assert entry.line == 2
    assert f"{stray.path}:2" in caplog.text and "loop-brak" in caplog.text


def test_a_patch_whose_name_differs_is_skipped_and_never_renames(tmp_path: Path) -> None:
    base = layer(tmp_path / "a.yml", BASE)
    rename = layer(
        tmp_path / "b.yml", "- id: loop-brake\n  name: dsh-circuit-breaker\n  disabled: true\n"
    )
    composition = compose_layers([base, rename])
    row = composition.rows[0]
    assert row.name == "dsh-loop-brake" and row.disabled is False
    (entry,) = composition.skipped
    assert "does not match" in entry.reason and entry.id == "loop-brake"


def test_a_patch_whose_name_matches_applies(tmp_path: Path) -> None:
    base = layer(tmp_path / "a.yml", BASE)
    patch = layer(
        tmp_path / "b.yml", "- id: loop-brake\n  name: dsh-loop-brake\n  disabled: true\n"
    )
    composition = compose_layers([base, patch])
    assert composition.rows[0].disabled is True and composition.skipped == ()
    assert composition.rows[0].sources["name"].layer.path == base.path  # matching sets nothing


def test_inserting_an_id_that_exists_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    base = layer(tmp_path / "a.yml", BASE)
    again = layer(tmp_path / "b.yml", "# copy of the bundle\n" + BASE)
    with pytest.raises(PatchError) as caught:
        compose_layers([base, again])
    assert caught.value.file == str(again.path) and caught.value.line == 3
    assert "already inserted" in str(caught.value) and str(base.path) in str(caught.value)
    twice = layer(tmp_path / "c.yml", "- insert:\n    - {id: x, name: p}\n    - {id: x, name: p}\n")
    with pytest.raises(PatchError, match="already inserted"):
        compose_layers([twice])


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("- id: loop-brake\n  disable: true\n", 2, "unknown key 'disable'"),
        ("- insert:\n    - id: x\n      name: p\n      confg: {}\n", 4, "unknown key 'confg'"),
        ("- insert:\n    - {id: x, name: p}\n  extra: 1\n", 3, "unknown key 'extra'"),
        ("- id: g\n  insert:\n    - {id: x, name: p}\n", 1, "group inserts"),
        ("- insert:\n    - {name: p}\n", 2, "needs an id"),
        ("- insert:\n    - {id: x}\n", 2, "needs a name"),
        ("- insert:\n    - {id: 5, name: p}\n", 2, "id must be a non-empty string"),
        ("- insert:\n    - {id: x, name: p, config: [1]}\n", 2, "config must be a mapping"),
        (
            "- insert:\n    - {id: x, name: p, disabled: 'yes'}\n",
            2,
            "disabled must be true or false",
        ),
        ("- id: x\n  config: 5\n", 2, "config must be a mapping"),
        ("- insert: {id: x, name: p}\n", 1, "insert takes a list of rows"),
        ("- just a string\n", 1, "each patch is a mapping"),
        ("- {name: p}\n", 1, "a patch is"),
        ("id: loop-brake\n", 1, "a patch file is a YAML list"),
    ],
)
def test_malformed_patches_name_file_line_and_what_exists(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    bad = layer(tmp_path / "bad.yml", text)
    with pytest.raises(PatchError) as caught:
        compose_layers([bad])
    assert caught.value.file == str(bad.path)
    assert caught.value.line == line
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"{bad.path}:{line}: ")


def test_an_unknown_key_error_lists_the_keys_that_exist(tmp_path: Path) -> None:
    bad = layer(tmp_path / "bad.yml", "- id: loop-brake\n  disable: true\n")
    with pytest.raises(PatchError, match="the keys that exist are id, name, config, disabled"):
        compose_layers([bad])


def test_an_empty_patch_file_has_no_patches(tmp_path: Path) -> None:
    assert compose_layers([layer(tmp_path / "e.yml", "# nothing yet\n")]).rows == ()
    assert compose_layers([layer(tmp_path / "f.yml", "[]\n")]).rows == ()


def test_a_missing_patch_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="cannot read the patch file"):
        compose_layers([Layer("patch", tmp_path / "absent.yml", "--patch")])


# --- layers of a profile --------------------------------------------------------------------


def make_profile(home: Path, name: str = "default", bundles: str = "[dsh-loop-brake]") -> Path:
    directory = home / "profiles" / name
    directory.mkdir(parents=True)
    (directory / "profile.yml").write_text(f"bundles: {bundles}\n", encoding="utf-8")
    return directory


def test_layers_are_bundles_then_profile_then_home_then_patch_files(dsh_home: Path) -> None:
    directory = make_profile(dsh_home)
    (directory / "cordis.patch.yml").write_text(
        "- id: loop-brake\n  config: {maxRepeats: 4}\n", encoding="utf-8"
    )
    (dsh_home / "cordis.patch.yml").write_text(
        "- id: loop-brake\n  config: {maxRepeats: 5}\n", encoding="utf-8"
    )
    first = dsh_home / "first.yml"
    first.write_text("- id: loop-brake\n  config: {maxRepeats: 6}\n", encoding="utf-8")
    second = dsh_home / "second.yml"
    second.write_text("- id: loop-brake\n  disabled: true\n", encoding="utf-8")

    layers = profile_layers("default", patches=[first, second])
    assert [(lay.kind, lay.path.name) for lay in layers] == [
        ("bundle", "cordis.patch.yml"),
        ("profile", "cordis.patch.yml"),
        ("home", "cordis.patch.yml"),
        ("patch", "first.yml"),
        ("patch", "second.yml"),
    ]
    assert layers[1].path == directory / "cordis.patch.yml"
    row = compose("default", patches=[first, second]).rows[0]
    assert row.config == {"maxRepeats": 6} and row.disabled is True
    assert row.sources["config"].layer.path == first
    assert row.sources["disabled"].layer.path == second
    assert row.sources["id"].layer.kind == "bundle"


def test_the_explicit_home_argument_beats_dsh_home(dsh_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"
    make_profile(other)
    assert [row.id for row in compose("default", other).rows] == ["loop-brake"]
    assert compose("default").rows == ()  # $DSH_HOME has no such profile


def test_a_missing_profile_is_an_empty_one(dsh_home: Path) -> None:
    assert profile_layers("ghost") == []
    assert compose("ghost").rows == ()


def test_a_bundle_that_is_not_installed_is_a_clear_error(dsh_home: Path) -> None:
    make_profile(dsh_home, bundles="[dsh-loop-brake, not-a-real-bundle]")
    with pytest.raises(ManifestError, match="'not-a-real-bundle' is not installed"):
        compose()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("bundles: dsh-loop-brake\n", "bundles must be a list"),
        ("bundles:\n  - dsh-loop-brake\n  - dsh-loop-brake\n", "listed twice"),
        ("bundles:\n  - {x: 1}\n", "must be a bundle name"),
        ("- dsh-loop-brake\n", "a profile.yml is a mapping"),
    ],
)
def test_a_malformed_profile_names_file_and_line(dsh_home: Path, text: str, fragment: str) -> None:
    directory = dsh_home / "profiles" / "default"
    directory.mkdir(parents=True)
    (directory / "profile.yml").write_text(text, encoding="utf-8")
    with pytest.raises(PatchError, match=fragment) as caught:
        compose()
    assert caught.value.file == str(directory / "profile.yml") and caught.value.line is not None


# --- the property: a model of the rules against random layer stacks ---------------------------

IDS = st.sampled_from(["a", "b", "c"])
NAMES = st.sampled_from(["p", "q"])
CONFIGS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["maxRepeats", "window", "x"]), st.integers(0, 9), max_size=2),
)
ROW = st.fixed_dictionaries(
    {"id": IDS, "name": NAMES}, optional={"config": CONFIGS, "disabled": st.booleans()}
)
INSERT = st.builds(lambda rows: {"insert": rows}, st.lists(ROW, max_size=2))
PATCH = st.fixed_dictionaries(
    {"id": IDS}, optional={"name": NAMES, "config": CONFIGS, "disabled": st.booleans()}
)
STACK = st.lists(st.lists(st.one_of(INSERT, PATCH), max_size=4), max_size=4)


def model(stack: list[list[dict[str, Any]]]) -> Any:
    """The composition rules written plainly: ('error', layer, line) or the expected result."""
    rows: dict[str, dict[str, Any]] = {}
    origin: dict[str, dict[str, tuple[int, int]]] = {}
    skipped: list[tuple[int, str, int]] = []
    for index, operations in enumerate(stack):
        for number, operation in enumerate(operations, start=1):
            if "insert" in operation:
                for row in operation["insert"]:
                    if row["id"] in rows:
                        return ("error", index, number)
                    rows[row["id"]] = {"config": None, "disabled": False, **row}
                    origin[row["id"]] = {key: (index, number) for key in row}
                continue
            target = rows.get(operation["id"])
            if target is None or operation.get("name", target["name"]) != target["name"]:
                skipped.append((index, operation["id"], number))
                continue
            for key in ("config", "disabled"):
                if key in operation:
                    target[key] = operation[key]
                    origin[operation["id"]][key] = (index, number)
    return rows, origin, skipped


@settings(max_examples=150)
@given(STACK)
def test_composition_follows_the_rules_for_any_layer_stack(
    stack: list[list[dict[str, Any]]],
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        layers = []
        for index, operations in enumerate(stack):
            path = Path(temp) / f"layer{index}.yml"
            # One patch per line, so a patch's line number is its position in the file.
            text = "".join(f"- {json.dumps(operation)}\n" for operation in operations)
            layers.append(layer(path, text or "[]\n"))
        expected = model(stack)
        if expected[0] == "error":
            with pytest.raises(PatchError, match="already inserted") as caught:
                compose_layers(layers)
            assert caught.value.file == str(layers[expected[1]].path)
            assert caught.value.line == expected[2]
            return
        rows, origin, skipped = expected
        composition = compose_layers(layers)
        assert [row.id for row in composition.rows] == list(rows)
        for row in composition.rows:
            want = rows[row.id]
            assert (row.name, row.config, row.disabled) == (
                want["name"],
                want["config"],
                want["disabled"],
            )
            for key, (index, number) in origin[row.id].items():
                assert row.sources[key].layer is layers[index]
                assert row.sources[key].line == number
            assert set(row.sources) - {"id", "name", "config", "disabled"} == {
                f"config.{key}" for key in (row.config or {})
            }
        assert [(s.layer, s.id, s.line) for s in composition.skipped] == [
            (layers[index], row_id, number) for index, row_id, number in skipped
        ]


def test_a_skipped_unknown_id_says_which_ids_exist_so_the_typo_can_be_fixed(
    tmp_path: Path,
) -> None:
    base = layer(tmp_path / "a.yml", BASE + "    - {id: circuit-breaker, name: p}\n")
    stray = layer(tmp_path / "b.yml", "- id: loop-brak\n  config: {maxRepeats: 2}\n")
    (entry,) = compose_layers([base, stray]).skipped
    assert entry.reason.startswith("no row has this id")
    assert entry.reason.endswith("the ids that exist are 'loop-brake', 'circuit-breaker'")
    (alone,) = compose_layers([stray]).skipped
    assert "no row has been inserted yet" in alone.reason
    assert "bundles" in alone.reason  # the likely cause: the bundle is not in the profile
