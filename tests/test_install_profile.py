"""install / uninstall: idempotent, round-trip edits that keep the user's file, atomic writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_loop_brake.harness import HarnessError, compose, install, uninstall
from dsh_loop_brake.harness import profiles as profiles_module
from dsh_loop_brake.harness.profiles import atomic_write

REPO_ROOT = Path(__file__).resolve().parent.parent
RunCli = Callable[..., "subprocess.CompletedProcess[str]"]

USER_PROFILE = textwrap.dedent(
    """\
    # My work profile: keep this comment
    # model: 'deepseek-chat'  (a commented-out line stays as it is)
    bundles:      # the order matters
        # security bundles first
        -   "other-bundle"   # pinned
        -   third
    # the end of my profile
    """
)


def profile_file(home: Path, name: str = "default") -> Path:
    return home / "profiles" / name / "profile.yml"


def write_profile(home: Path, text: str, name: str = "default") -> Path:
    path = profile_file(home, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_install_creates_a_missing_profile(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    done = run_cli("install", "--home", str(home), "--profile", "work")
    assert done.returncode == 0, done.stderr
    assert "installed dsh-loop-brake in profile 'work' (created the profile)" in done.stdout
    assert profile_file(home, "work").read_text(encoding="utf-8") == (
        "bundles:\n  - dsh-loop-brake\n"
    )
    assert [row.id for row in compose("work", home).rows] == ["loop-brake"]


def test_install_is_idempotent(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert run_cli("install", "--home", str(home)).returncode == 0
    path = profile_file(home)
    before = path.read_bytes()
    inode = path.stat().st_ino
    again = run_cli("install", "--home", str(home))
    assert again.returncode == 0, again.stderr
    assert "already installed" in again.stdout
    assert path.read_bytes() == before
    assert path.stat().st_ino == inode  # not even rewritten
    assert compose("default", home).rows[0].id == "loop-brake"


def test_install_keeps_comments_order_quoting_and_indentation(
    run_cli: RunCli, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    path = write_profile(home, USER_PROFILE)
    done = run_cli("install", "--home", str(home))
    assert done.returncode == 0, done.stderr
    expected = USER_PROFILE.replace("    -   third\n", "    -   third\n    -   dsh-loop-brake\n")
    assert path.read_text(encoding="utf-8") == expected


def test_install_appends_to_a_flow_list_and_to_an_empty_bundles_key(tmp_path: Path) -> None:
    flow = write_profile(tmp_path, "bundles: ['a-bundle']\n", "flow")
    install("dsh-loop-brake", "flow", tmp_path)
    assert flow.read_text(encoding="utf-8") == "bundles: ['a-bundle', dsh-loop-brake]\n"
    empty = write_profile(tmp_path, "# to fill\nbundles:\n", "empty")
    install("dsh-loop-brake", "empty", tmp_path)
    assert empty.read_text(encoding="utf-8") == "# to fill\nbundles:\n  - dsh-loop-brake\n"


def test_uninstall_removes_only_our_entry(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "h"
    path = write_profile(home, USER_PROFILE)
    assert run_cli("install", "--home", str(home)).returncode == 0
    done = run_cli("uninstall", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert "removed dsh-loop-brake from profile 'default'" in done.stdout
    assert path.read_text(encoding="utf-8") == USER_PROFILE
    again = run_cli("uninstall", "--home", str(home))
    assert again.returncode == 0 and "not installed" in again.stdout
    assert path.read_text(encoding="utf-8") == USER_PROFILE


def test_uninstall_of_a_missing_profile_creates_nothing(tmp_path: Path) -> None:
    change = uninstall("dsh-loop-brake", "default", tmp_path)
    assert not change.changed and not (tmp_path / "profiles").exists()


def test_install_keeps_the_file_mode(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "bundles: []\n")
    path.chmod(0o640)
    install("dsh-loop-brake", "default", tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_install_writes_through_a_symlinked_profile(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "profile.yml"
    real.parent.mkdir()
    real.write_text("bundles: []\n", encoding="utf-8")
    link = profile_file(tmp_path)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    install("dsh-loop-brake", "default", tmp_path)
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8") == "bundles:\n  - dsh-loop-brake\n"


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_an_interrupted_write_leaves_the_previous_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = write_profile(tmp_path, USER_PROFILE)

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    if failing == "write":
        real_fdopen = os.fdopen

        def half_then_fail(fd: int, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            stream = real_fdopen(fd, mode)
            real_write = stream.write

            def write(data: bytes) -> int:
                real_write(data[: len(data) // 2])
                raise OSError(28, "No space left on device")

            stream.write = write  # type: ignore[method-assign]
            return stream

        monkeypatch.setattr(profiles_module.os, "fdopen", half_then_fail)
    else:
        monkeypatch.setattr(profiles_module.os, failing, fail)
    with pytest.raises(OSError, match="No space left"):
        install("dsh-loop-brake", "default", tmp_path)
    assert path.read_text(encoding="utf-8") == USER_PROFILE
    assert sorted(p.name for p in path.parent.iterdir()) == ["profile.yml"]  # no temp left


def test_a_process_killed_before_the_rename_leaves_the_previous_file_intact(
    tmp_path: Path,
) -> None:
    path = write_profile(tmp_path, USER_PROFILE)
    # A real crash: the process dies between writing the temp file and renaming it.
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from dsh_loop_brake.harness import install, profiles
        profiles.os.replace = lambda *a: os._exit(9)
        install("dsh-loop-brake", "default", {str(tmp_path)!r})
        """
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert killed.returncode == 9
    assert path.read_text(encoding="utf-8") == USER_PROFILE
    # The next install works and ignores the orphaned temp file.
    install("dsh-loop-brake", "default", tmp_path)
    assert "dsh-loop-brake" in path.read_text(encoding="utf-8")


def test_atomic_write_gives_a_new_file_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.yml", b"x: 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.yml").stat().st_mode) == 0o640


def test_an_unsafe_profile_is_refused_and_left_alone(run_cli: RunCli, tmp_path: Path) -> None:
    text = "bundles: !!python/object/apply:os.system ['echo pwned']\n"
    path = write_profile(tmp_path, text)
    done = run_cli("install", "--home", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}:1: the tag !!python/object/apply:os.system")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert path.read_text(encoding="utf-8") == text


def test_a_profile_whose_bundles_is_not_a_list_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    path = write_profile(tmp_path, "# mine\nbundles: dsh-loop-brake\n")
    done = run_cli("install", "--home", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == f"error: {path}:2: bundles must be a list of bundle names\n"


def test_a_profile_name_cannot_escape_the_home(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="invalid profile name"):
        install("dsh-loop-brake", "../../etc", tmp_path)


def test_install_uses_dsh_home_when_no_home_is_given(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "from-env"
    done = run_cli("install", env={"DSH_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert profile_file(home).is_file()


def test_install_defaults_to_the_dot_dsh_of_the_home_directory(
    run_cli: RunCli, tmp_path: Path
) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    done = run_cli("install", env={"HOME": str(user_home)})
    assert done.returncode == 0, done.stderr
    assert profile_file(user_home / ".dsh").is_file()


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("bundles: [dsh-loop-brake]\nbundles: [other]\n", 2, "duplicate key"),
        ("bundles: [dsh-loop-brake]\n---\nbundles: [other]\n", 2, "single document"),
    ],
)
@pytest.mark.parametrize("command", ["install", "uninstall", "config"])
def test_a_profile_with_a_duplicate_key_or_two_documents_is_one_line_exit_2(
    run_cli: RunCli, tmp_path: Path, command: str, text: str, line: int, fragment: str
) -> None:
    # These are found by the YAML composer, not the parser: they must still be a PatchError.
    path = write_profile(tmp_path, text)
    done = run_cli(command, "--home", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {path}:{line}: malformed YAML: "), done.stderr
    assert fragment in done.stderr
    assert path.read_text(encoding="utf-8") == text


def test_install_keeps_the_comments_of_a_profile_that_has_nothing_else(tmp_path: Path) -> None:
    text = "# work profile: bundles go below\n\n# (ask ops before adding one)\n"
    path = write_profile(tmp_path, text)
    change = install("dsh-loop-brake", "default", tmp_path)
    assert change.changed and not change.created
    assert path.read_text(encoding="utf-8") == text + "bundles:\n  - dsh-loop-brake\n"
    assert [row.id for row in compose("default", tmp_path).rows] == ["loop-brake"]


@pytest.mark.parametrize("command", ["install", "uninstall", "config"])
def test_an_empty_home_option_is_a_usage_error_not_the_current_directory(
    run_cli: RunCli, tmp_path: Path, command: str
) -> None:
    # `--home "$UNSET_VAR"` must not quietly make (or read) ./profiles.
    done = run_cli(command, "--home", "")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "--home" in done.stderr and "empty" in done.stderr
    assert not (tmp_path / "profiles").exists()
