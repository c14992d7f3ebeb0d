"""From a built wheel in a new virtualenv: install into a profile, and config shows the row.

This is the path a user takes (not an editable install): the bundle patch must be read from
the manifest shipped inside the installed package. The venv comes from conftest's
``installed_venv`` (built once per run); nothing is timed.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from conftest import InstalledVenv


def test_the_wheel_carries_the_manifest_and_the_bundle_patch(installed_venv: InstalledVenv) -> None:
    with zipfile.ZipFile(installed_venv.wheel) as archive:
        names = set(archive.namelist())
    assert {"dsh_loop_brake/plugin.toml", "dsh_loop_brake/cordis.patch.yml"} <= names


def test_the_venv_does_not_see_the_base_interpreters_packages(
    installed_venv: InstalledVenv, tmp_path: Path
) -> None:
    # The bug this fixture had: --system-site-packages showed the *base* interpreter's
    # packages, so a fresh `python3 -m venv .venv` (whose base has no ruamel.yaml) failed.
    shown = installed_venv.run(
        installed_venv.python,
        "-c",
        "import sys; print(sys.flags.no_site, sys.base_prefix != sys.prefix);"
        "import ruamel.yaml, pluggy, dsh_loop_brake; print(dsh_loop_brake.__file__)",
        cwd=tmp_path,
    ).stdout.split("\n")
    assert shown[0] == "0 True"
    assert Path(shown[1]).is_relative_to(installed_venv.root)
    config = (installed_venv.root / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in config


def test_install_then_config_shows_the_row_from_the_wheels_own_bundle_patch(
    installed_venv: InstalledVenv, tmp_path: Path
) -> None:
    home = tmp_path / "H"
    package = installed_venv.run(
        installed_venv.python,
        "-c",
        "import dsh_loop_brake; print(dsh_loop_brake.__file__)",
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(package).is_relative_to(installed_venv.root)

    installed = installed_venv.run(installed_venv.script, "install", "--home", home, cwd=tmp_path)
    assert "installed dsh-loop-brake in profile 'default'" in installed.stdout

    shown = json.loads(
        installed_venv.run(
            installed_venv.script, "config", "--home", home, "--json", cwd=tmp_path
        ).stdout
    )
    assert shown["row"] == {
        "id": "loop-brake",
        "name": "dsh-loop-brake",
        "config": None,
        "disabled": False,
    }
    assert (shown["maxRepeats"], shown["source"], shown["skipped"]) == (3, "default", [])
    # The row was inserted by the bundle patch inside the installed package, not a checkout.
    text = installed_venv.run(installed_venv.script, "config", "--home", home, cwd=tmp_path).stdout
    bundle_patch = Path(package).parent / "cordis.patch.yml"
    assert f"inserted by {bundle_patch}:" in text


def test_python_dash_m_and_a_patch_layer_work_from_the_wheel(
    installed_venv: InstalledVenv, tmp_path: Path
) -> None:
    home = tmp_path / "H"
    python = installed_venv.python
    installed_venv.run(python, "-m", "dsh_loop_brake", "install", "--home", home, cwd=tmp_path)
    patch = tmp_path / "tight.yml"
    patch.write_text("- id: loop-brake\n  config: {maxRepeats: 2}\n", encoding="utf-8")
    done = installed_venv.run(
        python,
        "-m",
        "dsh_loop_brake",
        "config",
        "--home",
        home,
        "--patch",
        patch,
        "--json",
        cwd=tmp_path,
    )
    shown = json.loads(done.stdout)
    assert (shown["maxRepeats"], shown["source"]) == (2, str(patch))
