"""Manifests: the repository's plugin.toml and bundle patch, found through the entry point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_loop_brake.harness import (
    Layer,
    ManifestError,
    PatchError,
    compose_layers,
    find_manifest,
    read_manifest,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def test_the_repository_manifest_is_the_one_the_spec_describes() -> None:
    data = tomllib.loads((REPO / "plugin.toml").read_text(encoding="utf-8"))
    assert data["dsh"]["name"] == "dsh-loop-brake"
    assert data["dsh"]["id"] == "loop-brake"
    assert data["dsh"]["bundle"]["patch"] == "cordis.patch.yml"
    assert data["dsh"]["host"]["tools"] == "0.1.1-rc.2"


def test_the_bundle_patch_inserts_exactly_the_loop_brake_row_with_defaults() -> None:
    layer = Layer("bundle", REPO / "cordis.patch.yml", "bundle dsh-loop-brake")
    composition = compose_layers([layer])
    assert [row.as_dict() for row in composition.rows] == [
        {"id": "loop-brake", "name": "dsh-loop-brake", "config": None, "disabled": False}
    ]


def test_no_second_copy_of_the_manifest_lives_in_the_package_tree() -> None:
    assert not (REPO / "dsh_loop_brake" / "plugin.toml").exists()
    assert not (REPO / "dsh_loop_brake" / "cordis.patch.yml").exists()


def test_the_installed_bundle_manifest_is_found_through_its_entry_point() -> None:
    manifest = find_manifest("dsh-loop-brake")
    assert manifest.name == "dsh-loop-brake" and manifest.id == "loop-brake"
    assert manifest.host_tools == "0.1.1-rc.2"
    assert manifest.patch is not None and manifest.patch.name == "cordis.patch.yml"
    assert manifest.patch.parent == manifest.path.parent
    # From a source checkout or an editable install: the files at the repository root.
    assert manifest.path.resolve() in {
        (REPO / "plugin.toml").resolve(),
        (REPO / "dsh_loop_brake" / "plugin.toml").resolve(),
    } or "site-packages" in str(manifest.path)


def test_an_unknown_bundle_is_not_installed() -> None:
    with pytest.raises(ManifestError, match="'nothing-here' is not installed"):
        find_manifest("nothing-here")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[dsh\nname = 1\n", "malformed TOML"),
        ("[dsh]\nname = 5\n", "name must be a non-empty string"),
        ('[dsh]\nname = "x"\n[dsh.bundle]\npatch = "/etc/passwd"\n', "relative to the manifest"),
        ('dsh = "flat"\n', "[dsh] must be a table"),
    ],
)
def test_a_malformed_manifest_names_its_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "plugin.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        PatchError, match=fragment.replace("[", r"\[").replace("]", r"\]")
    ) as caught:
        read_manifest(path)
    assert caught.value.file == str(path)
