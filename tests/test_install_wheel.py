"""From a built wheel in a fresh virtualenv: install into a profile, and config shows the row.

This is the path a user takes (not an editable install): the bundle patch must be read from
the manifest shipped inside the installed package. Builds take a while; nothing is timed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
_IGNORE = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", ".venv", ".*_cache", ".hypothesis", "build", "dist"
)


def _run(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv (seeing the system's pluggy and ruamel.yaml) with the built wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DSH_")}
    # Build from a copy so the working tree gets no build artefacts.
    source = work / "source"
    shutil.copytree(REPO_ROOT, source, ignore=_IGNORE)
    dist = work / "dist"
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        command += ["--wheel-dir", dist]
    _run(*command, source, cwd=work, env=env)
    (wheel,) = dist.glob("dsh_loop_brake-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"dsh_loop_brake/plugin.toml", "dsh_loop_brake/cordis.patch.yml"} <= names

    environment = work / "venv"
    _run(
        sys.executable,
        "-m",
        "venv",
        "--system-site-packages",
        "--without-pip",
        environment,
        cwd=work,
        env=env,
    )
    python = _python(environment)
    # The system pip installs into the venv (sys.prefix is the venv's); no registry needed.
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        "--disable-pip-version-check",
        "--quiet",
        wheel,
        cwd=work,
        env=env,
    )
    shutil.rmtree(source)  # nothing may be read from the source tree any more
    return environment


def _python(environment: Path) -> Path:
    scripts = environment / ("Scripts" if os.name == "nt" else "bin")
    return scripts / ("python.exe" if os.name == "nt" else "python")


def _script(environment: Path) -> Path:
    scripts = environment / ("Scripts" if os.name == "nt" else "bin")
    return scripts / ("dsh-loop-brake.exe" if os.name == "nt" else "dsh-loop-brake")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DSH_")}


def test_install_then_config_shows_the_row_from_the_wheels_own_bundle_patch(
    venv: Path, tmp_path: Path
) -> None:
    home = tmp_path / "H"
    env = _clean_env()
    package = _run(
        _python(venv),
        "-c",
        "import dsh_loop_brake; print(dsh_loop_brake.__file__)",
        cwd=tmp_path,
        env=env,
    ).stdout.strip()
    assert Path(package).is_relative_to(venv)

    installed = _run(_script(venv), "install", "--home", home, cwd=tmp_path, env=env)
    assert "installed dsh-loop-brake in profile 'default'" in installed.stdout

    shown = json.loads(
        _run(_script(venv), "config", "--home", home, "--json", cwd=tmp_path, env=env).stdout
    )
    assert shown == {
        "row": {"id": "loop-brake", "name": "dsh-loop-brake", "config": None, "disabled": False},
        "maxRepeats": 3,
        "source": "default",
        "skipped": [],
    }
    # The row was inserted by the bundle patch inside the installed package, not a checkout.
    text = _run(_script(venv), "config", "--home", home, cwd=tmp_path, env=env).stdout
    bundle_patch = Path(package).parent / "cordis.patch.yml"
    assert f"inserted by {bundle_patch}:" in text


def test_python_dash_m_and_a_patch_layer_work_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "H"
    env = _clean_env()
    _run(_python(venv), "-m", "dsh_loop_brake", "install", "--home", home, cwd=tmp_path, env=env)
    patch = tmp_path / "tight.yml"
    patch.write_text("- id: loop-brake\n  config: {maxRepeats: 2}\n", encoding="utf-8")
    shown = json.loads(
        _run(
            _python(venv),
            "-m",
            "dsh_loop_brake",
            "config",
            "--home",
            home,
            "--patch",
            patch,
            "--json",
            cwd=tmp_path,
            env=env,
        ).stdout
    )
    assert (shown["maxRepeats"], shown["source"]) == (2, str(patch))
