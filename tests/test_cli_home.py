"""The dsh home as every command that reads it sees it: a home that is not a directory is one
clear error naming where it came from (``DSH_HOME``, ``--home`` or the default ``~/.dsh``),
exit 2, before anything is read or written; a home that does not exist yet is what each command
always made of it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import RunCli

# Every command that reads the dsh home, as a user would run it (`hook` has its own handling).
COMMANDS = {
    "install": ["install"],
    "uninstall": ["uninstall"],
    "config": ["config"],
    "config-json": ["config", "--json"],
    "replay": ["replay", "--json"],
    "mcp-proxy": ["mcp-proxy", "--", sys.executable, "-c", "pass"],
}


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "hostname"
    path.write_text("box\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("below", [False, True], ids=["the-file", "a-path-below-it"])
@pytest.mark.parametrize("source", ["DSH_HOME", "--home"])
@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_a_home_that_is_a_file_is_one_error_naming_where_it_came_from(
    run_cli: RunCli, a_file: Path, command: str, source: str, below: bool
) -> None:
    home = a_file / "dsh" if below else a_file
    args = COMMANDS[command]
    if source == "DSH_HOME":
        result = run_cli(*args, env={"DSH_HOME": str(home)})
    else:
        result = run_cli(args[0], "--home", str(home), *args[1:])

    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("error: ")
    assert f"{source} is {home}, which" in line
    if below:
        assert f"which cannot be a directory because {a_file} is a file; " in line
    else:
        assert "which is a file, not a directory; " in line
    assert "a directory (the dsh home)" in line  # what to do
    assert "Traceback" not in result.stderr and "profile.yml" not in line
    assert a_file.read_text(encoding="utf-8") == "box\n"  # nothing written


def test_the_default_home_that_is_a_file_is_named_as_the_default(
    run_cli: RunCli, cli_env: dict[str, str]
) -> None:
    dsh = Path(cli_env["HOME"]) / ".dsh"
    dsh.write_text("", encoding="utf-8")
    result = run_cli("config")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert f"the default dsh home ~/.dsh is {dsh}, which is a file, not a directory" in line
    assert "DSH_HOME" in line and "--home" in line  # the ways to name another


def test_a_home_that_is_a_device_says_what_it_is(run_cli: RunCli) -> None:
    result = run_cli("config", "--home", "/dev/null")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "--home is /dev/null" in line and "not a directory" in line


# What a home that does not exist yet gives, command by command: kept as it always was.
NEW_HOME = {
    "install": (0, "created the profile"),
    "uninstall": (0, "nothing to do"),
    "config": (0, "does not exist"),
    "config-json": (0, "does not exist"),
    "replay": (0, "does not exist"),
    "mcp-proxy": (0, ""),
}


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_a_home_that_does_not_exist_yet_is_what_it_always_was(
    run_cli: RunCli, tmp_path: Path, command: str
) -> None:
    home = tmp_path / "new-home"
    result = run_cli(*COMMANDS[command], env={"DSH_HOME": str(home)})
    code, said = NEW_HOME[command]
    assert result.returncode == code, result.stderr
    assert said in result.stdout + result.stderr
    assert "error" not in result.stderr
    assert home.is_dir() == (command == "install")  # only install creates it
