"""The user's environment never makes the command line show a traceback.

An encoding that cannot show the path, a closed or full standard output, no ``HOME``, a user with
no entry in the password database: each is one clear line and a documented exit code. Every test
runs the command line as a subprocess.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO_ROOT


def run(
    args: list[str], env: dict[str, str], **options: object
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [sys.executable, "-m", "dsh_loop_brake", *args],
        capture_output=options.pop("capture_output", True),
        env=env,
        timeout=120,
        **options,
    )


def no_traceback(done: subprocess.CompletedProcess[bytes]) -> str:
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    return stderr


def test_an_encoding_that_cannot_show_the_home_is_no_crash(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "h\u00e9-\u65e5\u672c"  # é is latin-1; 日本 is not
    env = {**cli_env, "PYTHONIOENCODING": "latin-1"}
    installed = run(["install", "--home", str(home)], env)
    assert installed.returncode == 0, no_traceback(installed)
    no_traceback(installed)
    (line,) = installed.stdout.decode("latin-1").splitlines()
    assert line.startswith("installed dsh-loop-brake in profile 'default' (created the profile)")
    assert "h\u00e9-\\u65e5\\u672c" in line  # shown as escapes, not a UnicodeEncodeError
    assert (home / "profiles" / "default" / "profile.yml").is_file()
    shown = run(["config", "--home", str(home)], env)
    assert shown.returncode == 0 and no_traceback(shown) == ""
    as_json = run(["config", "--home", str(home), "--json"], env)
    assert as_json.returncode == 0 and no_traceback(as_json) == ""
    assert json.loads(as_json.stdout.decode("latin-1"))["maxRepeats"] == 3


def test_an_undecodable_path_is_shown_escaped(cli_env: dict[str, str], tmp_path: Path) -> None:
    home = os.fsdecode(os.fsencode(tmp_path) + b"/h\xff")  # not UTF-8: a lone surrogate
    done = run(["install", "--home", home], cli_env)
    assert done.returncode == 0, no_traceback(done)
    assert "h\\udcff" in done.stdout.decode("utf-8")
    as_json = run(["config", "--home", home, "--json"], cli_env)
    assert as_json.returncode == 0, no_traceback(as_json)
    json.loads(as_json.stdout)


@pytest.mark.parametrize("command", ["install", "config", "replay"])
def test_a_closed_standard_output_is_one_line_and_exit_2(
    cli_env: dict[str, str], tmp_path: Path, command: str
) -> None:
    home = tmp_path / "home"
    done = run(
        [command, "--home", str(home)],
        cli_env,
        capture_output=False,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),  # the command starts with no fd 1 at all
    )
    stderr = no_traceback(done)
    assert done.returncode == 2
    assert stderr.startswith("error: standard output is closed")
    assert stderr.count("\n") == 1
    assert not home.exists()  # install did not change anything it could not report


def test_replay_of_a_closed_standard_input_is_one_warning_and_exit_2(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    done = run(
        ["replay", "-", "--home", str(tmp_path)],
        cli_env,
        preexec_fn=lambda: os.close(0),  # `dsh-loop-brake replay - <&-`: no fd 0 at all
    )
    stderr = no_traceback(done)
    assert done.returncode == 2, stderr
    assert "warning: <stdin>: standard input is closed" in stderr, stderr
    assert stderr.splitlines()[-1] == "error: nothing could be read (see the warning above)"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["config", "replay"])
def test_a_full_standard_output_is_one_line_and_exit_2(
    cli_env: dict[str, str], tmp_path: Path, command: str
) -> None:
    with open("/dev/full", "w") as full:
        done = run(
            [command, "--home", str(tmp_path)],
            cli_env,
            capture_output=False,
            stdout=full,
            stderr=subprocess.PIPE,
        )
    stderr = no_traceback(done)
    assert done.returncode == 2
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: cannot write to standard output (No space left on device)"]
    assert "Exception ignored" not in stderr


def test_no_home_variable_falls_back_to_the_password_database(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    # Read-only (config), and true whether or not the real user has a default profile there:
    # a developer who followed the README's quick start has one.
    env = {key: value for key, value in cli_env.items() if key != "HOME"}
    done = run(["config"], env, cwd=tmp_path)
    assert done.returncode == 0, no_traceback(done)
    expected = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".dsh" / "profiles" / "default"
    first = done.stdout.decode("utf-8").splitlines()[0]
    assert first == f"profile: default ({expected})", first


@pytest.mark.skipif(
    not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another uid"
)
@pytest.mark.parametrize("command", ["install", "config", "replay"])
def test_a_user_without_a_passwd_entry_and_no_home_is_one_line_and_exit_2(
    cli_env: dict[str, str], command: str
) -> None:
    uid = next(uid for uid in range(54321, 60000) if not _has_passwd_entry(uid))
    env = {key: value for key, value in cli_env.items() if key != "HOME"}
    # The interpreter lives where another user may not read, so the child imports the
    # command line as root, then becomes the uid that has no passwd entry, then runs it.
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from dsh_loop_brake.cli import main
        os.setgid({uid})
        os.setuid({uid})
        sys.exit(main([{command!r}]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=env, cwd="/", timeout=120
    )
    stderr = no_traceback(done)
    assert done.returncode == 2, stderr
    assert stderr.startswith("error: cannot find the home directory for '~/.dsh': HOME is not set")
    assert f"(uid {uid}) has no entry in the password database" in stderr
    assert stderr.count("\n") == 1


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
