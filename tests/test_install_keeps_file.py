"""install keeps the user's profile.yml: long lines, CRLF, aliases, comments, mode and umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_loop_brake.harness import compose, install, uninstall

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


def profile_at(home: Path, text: str | bytes) -> Path:
    path = home / "profiles" / "default" / "profile.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def installed(run_cli: RunCli, home: Path) -> None:
    done = run_cli("install", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert "installed dsh-loop-brake" in done.stdout


def test_a_long_line_is_not_re_wrapped_at_80_columns(run_cli: RunCli, tmp_path: Path) -> None:
    description = ("The support agents' profile, which keeps every tool call honest " * 3).strip()
    entry = "a-very-long-bundle-list-entry-" + "x" * 70
    text = f"description: {description}\nbundles: [{entry}]\n"
    path = profile_at(tmp_path, text)
    installed(run_cli, tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [f"description: {description}", f"bundles: [{entry}, dsh-loop-brake]"]


def test_crlf_line_endings_stay_crlf(run_cli: RunCli, tmp_path: Path) -> None:
    text = b"# made on Windows\r\nbundles:\r\n  - other  # pinned\r\n# the end\r\n"
    path = profile_at(tmp_path, text)
    installed(run_cli, tmp_path)
    assert path.read_bytes() == (
        b"# made on Windows\r\nbundles:\r\n  - other  # pinned\r\n  - dsh-loop-brake\r\n"
        b"# the end\r\n"
    )
    assert run_cli("uninstall", "--home", str(tmp_path)).returncode == 0
    assert path.read_bytes() == text


def test_an_aliased_bundles_list_gets_its_own_list(run_cli: RunCli, tmp_path: Path) -> None:
    text = "x-defaults: &defaults\n  - other\nx-staging: *defaults\nbundles: *defaults\n"
    path = profile_at(tmp_path, text)
    installed(run_cli, tmp_path)
    assert path.read_text(encoding="utf-8") == (
        "x-defaults: &defaults\n  - other\n"
        "x-staging: *defaults\n"
        "bundles:\n  - other\n  - dsh-loop-brake\n"
    )


def test_comment_lines_below_the_list_stay_below_it(run_cli: RunCli, tmp_path: Path) -> None:
    text = "bundles:\n  - other   # pinned\n\n# ask ops before adding a bundle\n"
    path = profile_at(tmp_path, text)
    installed(run_cli, tmp_path)
    assert path.read_text(encoding="utf-8") == (
        "bundles:\n  - other   # pinned\n  - dsh-loop-brake\n\n# ask ops before adding a bundle\n"
    )
    assert run_cli("uninstall", "--home", str(tmp_path)).returncode == 0
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(("umask", "mode"), [(0o077, 0o600), (0o002, 0o644), (0o022, 0o644)])
def test_a_new_profile_is_0644_less_the_umask(
    cli_env: dict[str, str], tmp_path: Path, umask: int, mode: int
) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "install", "--home", str(home)],
        capture_output=True,
        text=True,
        env=cli_env,
        umask=umask,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    path = home / "profiles" / "default" / "profile.yml"
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_an_existing_profile_keeps_its_mode(run_cli: RunCli, tmp_path: Path) -> None:
    path = profile_at(tmp_path, "bundles: []\n")
    path.chmod(0o600)
    installed(run_cli, tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_install_never_changes_the_process_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.umask sets the mask of every thread: reading it by setting it (and back) lets a
    # thread that creates a file in between get 0644 under a 077 umask.
    def no_umask(mask: int) -> int:
        raise AssertionError("install changed the process umask")

    monkeypatch.setattr(os, "umask", no_umask)
    install("dsh-loop-brake", "default", tmp_path)  # a new file
    install("dsh-loop-brake", "other", tmp_path)
    uninstall("dsh-loop-brake", "other", tmp_path)  # an existing one
    assert [row.id for row in compose("default", tmp_path).rows] == ["loop-brake"]
