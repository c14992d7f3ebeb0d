"""``dsh-loop-brake config``: the composed row, maxRepeats and its source, skips, and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake.harness import Harness

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]
ENV = "DSH_LOOP_BRAKE_MAX_REPEATS"


@pytest.fixture
def home(run_cli: RunCli, tmp_path: Path) -> Path:
    """A home whose default profile has dsh-loop-brake installed by the real command line."""
    path = tmp_path / "home"
    done = run_cli("install", "--home", str(path))
    assert done.returncode == 0, done.stderr
    return path


def config_json(run_cli: RunCli, home: Path, *args: str, **env: str) -> dict[str, Any]:
    done = run_cli("config", "--home", str(home), "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def assert_one_line_error(done: subprocess.CompletedProcess[str], starts: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("error: " + starts), errors[0]
    return errors[0].removeprefix("error: ")


def test_the_bundle_row_with_the_default(run_cli: RunCli, home: Path) -> None:
    assert config_json(run_cli, home) == {
        "row": {"id": "loop-brake", "name": "dsh-loop-brake", "config": None, "disabled": False},
        "maxRepeats": 3,
        "source": "default",
        "skipped": [],
        "circuitBreaker": None,
        "store": "memory:",
        "ignoredEnv": [],
    }


def test_the_environment_variable_fills_in_when_the_row_has_no_value(
    run_cli: RunCli, home: Path
) -> None:
    shown = config_json(run_cli, home, **{ENV: " 7 "})
    assert (shown["maxRepeats"], shown["source"]) == (7, "env DSH_LOOP_BRAKE_MAX_REPEATS")
    blank = config_json(run_cli, home, **{ENV: "  "})
    assert (blank["maxRepeats"], blank["source"]) == (3, "default")


def test_a_patch_row_beats_the_environment_and_is_named_as_the_source(
    run_cli: RunCli, home: Path
) -> None:
    profile_patch = write(
        home / "profiles" / "default" / "cordis.patch.yml",
        "- id: loop-brake\n  config: {maxRepeats: 5}\n",
    )
    shown = config_json(run_cli, home, **{ENV: "7"})
    assert (shown["maxRepeats"], shown["source"]) == (5, str(profile_patch))
    assert shown["row"]["config"] == {"maxRepeats": 5}

    home_patch = write(
        home / "cordis.patch.yml", "- id: loop-brake\n  config:\n    maxRepeats: 6\n"
    )
    shown = config_json(run_cli, home, **{ENV: "7"})
    assert (shown["maxRepeats"], shown["source"]) == (6, str(home_patch))


def test_a_patch_overlay_with_an_empty_config_falls_back_to_the_env_var(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    write(home / "cordis.patch.yml", "- id: loop-brake\n  config: {maxRepeats: 5}\n")
    overlay = write(tmp_path / "overlay.yml", "- id: loop-brake\n  config: {}\n")
    shown = config_json(run_cli, home, "--patch", str(overlay), **{ENV: "8"})
    assert shown["row"]["config"] == {}
    assert (shown["maxRepeats"], shown["source"]) == (8, "env DSH_LOOP_BRAKE_MAX_REPEATS")
    shown = config_json(run_cli, home, "--patch", str(overlay))
    assert (shown["maxRepeats"], shown["source"]) == (3, "default")


def test_patch_files_apply_in_the_order_given(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    first = write(tmp_path / "first.yml", "- id: loop-brake\n  config: {maxRepeats: 4}\n")
    second = write(tmp_path / "second.yml", "- id: loop-brake\n  config: {maxRepeats: 9}\n")
    shown = config_json(run_cli, home, "--patch", str(first), "--patch", str(second))
    assert (shown["maxRepeats"], shown["source"]) == (9, str(second))
    shown = config_json(run_cli, home, "--patch", str(second), "--patch", str(first))
    assert (shown["maxRepeats"], shown["source"]) == (4, str(first))


def test_skipped_patches_are_listed_and_warned_once_each(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    overlay = write(
        tmp_path / "overlay.yml",
        "- id: loop-brak\n  config: {maxRepeats: 2}\n"
        "- id: loop-brake\n  name: something-else\n  disabled: true\n",
    )
    done = run_cli("config", "--home", str(home), "--json", "--patch", str(overlay))
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["maxRepeats"] == 3 and shown["row"]["disabled"] is False
    assert [(s["layer"], s["id"]) for s in shown["skipped"]] == [
        (str(overlay), "loop-brak"),
        (str(overlay), "loop-brake"),
    ]
    assert "no row has this id" in shown["skipped"][0]["reason"]
    assert "does not match" in shown["skipped"][1]["reason"]
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2 and all(line.startswith("warning: ") for line in warnings)
    assert f"{overlay}:1" in warnings[0] and f"{overlay}:3" in warnings[1]


def test_the_text_output_names_row_value_source_and_skips(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    home_patch = write(
        home / "cordis.patch.yml", "- id: loop-brake\n  config:\n    maxRepeats: 6\n"
    )
    stray = write(tmp_path / "stray.yml", "- id: nope\n  disabled: true\n")
    done = run_cli("config", "--home", str(home), "--patch", str(stray))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\nrow: loop-brake (plugin dsh-loop-brake)" in out
    assert "\nstate: enabled\n" in out
    assert f'\nconfig: {{"maxRepeats": 6}}, set by {home_patch}:2\n' in out
    assert f"\nmaxRepeats: 6 (from {home_patch}:3)\n" in out
    assert f"{stray}:1: patch for row 'nope' skipped: no row has this id" in out
    env_done = run_cli(
        "config",
        "--home",
        str(home),
        "--patch",
        str(write(tmp_path / "empty.yml", "- id: loop-brake\n  config: null\n")),
        env={ENV: "4"},
    )
    assert "maxRepeats: 4 (from the environment variable DSH_LOOP_BRAKE_MAX_REPEATS" in (
        env_done.stdout
    )


def test_no_row_prints_nulls_and_a_hint(run_cli: RunCli, tmp_path: Path) -> None:
    empty_home = tmp_path / "empty"
    assert config_json(run_cli, empty_home) == {
        "row": None,
        "maxRepeats": None,
        "source": None,
        "skipped": [],
        "circuitBreaker": None,
        "store": "memory:",
        "ignoredEnv": [],
    }
    done = run_cli("config", "--home", str(empty_home), "--profile", "ci")
    assert done.returncode == 0
    assert "has no loop-brake row" in done.stdout
    assert "dsh-loop-brake install --profile ci" in done.stdout


def test_a_disabled_row_is_shown_as_such(run_cli: RunCli, home: Path) -> None:
    write(home / "cordis.patch.yml", "- id: loop-brake\n  disabled: true\n")
    shown = config_json(run_cli, home)
    assert shown["row"]["disabled"] is True
    assert shown["maxRepeats"] == 3
    text = run_cli("config", "--home", str(home)).stdout
    assert f"state: disabled by {home / 'cordis.patch.yml'}:2: the brake is off" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0", "got 0"), ("2.5", "got 2.5"), ("true", "got True"), ("'many'", "got 'many'")],
)
def test_an_invalid_value_exits_2_naming_the_file_and_key(
    run_cli: RunCli, home: Path, value: str, shown: str
) -> None:
    bad = write(
        home / "cordis.patch.yml", f"- id: loop-brake\n  config:\n    maxRepeats: {value}\n"
    )
    done = run_cli("config", "--home", str(home), "--json", env={ENV: "5"})
    line = assert_one_line_error(done, f"{bad}:3: loop brake: maxRepeats must be an integer")
    assert shown in line
    assert done.stdout == ""


def test_a_misspelt_key_exits_2_naming_the_file_line_and_key(run_cli: RunCli, home: Path) -> None:
    bad = write(home / "cordis.patch.yml", "- id: loop-brake\n  config:\n    maxRepeat: 5\n")
    line = assert_one_line_error(run_cli("config", "--home", str(home)), f"{bad}:3: ")
    assert "maxRepeat" in line and "maxRepeats" in line


def test_an_invalid_environment_value_exits_2_naming_the_variable(
    run_cli: RunCli, home: Path
) -> None:
    done = run_cli("config", "--home", str(home), env={ENV: "lots"})
    line = assert_one_line_error(done, "loop brake: maxRepeats must be an integer")
    assert "(from the environment variable DSH_LOOP_BRAKE_MAX_REPEATS)" in line


def test_a_disabled_row_with_a_bad_config_is_not_an_error(run_cli: RunCli, home: Path) -> None:
    write(
        home / "cordis.patch.yml", "- id: loop-brake\n  disabled: true\n  config: {maxRepeats: 0}\n"
    )
    shown = config_json(run_cli, home)
    assert shown["row"]["disabled"] is True and shown["maxRepeats"] is None


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("- id: loop-brake\n  config: {maxRepeats: 5\n", 3, "malformed YAML"),
        ("- id: loop-brake\n  config: !!python/object/apply:os.system [ls]\n", 2, "the tag"),
        ("- id: loop-brake\n  disable: true\n", 2, "unknown key 'disable'"),
        ("- id: loop-brake\n  config: " + "[" * 70 + "]" * 70 + "\n", 2, "deeper than 64"),
        ("- insert:\n    - {id: loop-brake, name: dsh-loop-brake}\n", 2, "already inserted"),
    ],
)
def test_a_bad_patch_file_exits_2_with_file_and_line(
    run_cli: RunCli, home: Path, tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    bad = write(tmp_path / "bad.yml", text)
    done = run_cli("config", "--home", str(home), "--patch", str(bad))
    message = assert_one_line_error(done, f"{bad}:{line}: ")
    assert fragment in message


def test_an_alias_bomb_is_refused(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    lines = [
        "- id: loop-brake",
        '  config: {maxRepeats: 3, x: &a0 ["a","a","a","a","a","a","a","a","a","a"]}',
    ]
    lines.append("- insert:")
    for level in range(1, 10):
        refs = ",".join([f"*a{level - 1}"] * 10)
        lines.append(f"    - {{id: r{level}, name: p, config: {{v: &a{level} [{refs}]}}}}")
    bomb = write(tmp_path / "bomb.yml", "\n".join(lines) + "\n")
    done = run_cli("config", "--home", str(home), "--patch", str(bomb))
    assert "more than 100,000 nodes" in assert_one_line_error(done, f"{bomb}:")


def test_a_missing_patch_file_or_a_bad_profile_name_exits_2(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.yml"
    assert_one_line_error(
        run_cli("config", "--home", str(home), "--patch", str(missing)),
        f"{missing}: cannot read the patch file",
    )
    assert_one_line_error(
        run_cli("config", "--home", str(home), "--profile", "../x"), "invalid profile name"
    )


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("config", "--no-such-option"),
        ("install", "--home", ""),
        ("replay", "--format", "bogus"),
        ("replay", "--sweep"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(run_cli: RunCli, argv: tuple[str, ...]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr  # no usage block, no traceback
    assert done.stderr.startswith("error: ") and " --help`" in done.stderr


def test_help_lists_the_commands(run_cli: RunCli) -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    assert all(name in done.stdout for name in ("install", "uninstall", "config"))


@pytest.mark.parametrize(
    ("patch", "env", "expected"),
    [
        (None, None, 3),
        (None, "6", 6),
        ("- id: loop-brake\n  config: {maxRepeats: 4}\n", "6", 4),
        ("- id: loop-brake\n  config: {}\n", "6", 6),
        ("- id: loop-brake\n  config: {maxRepeats: null}\n", None, 3),
    ],
)
def test_config_shows_what_boot_applies(
    run_cli: RunCli,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    patch: str | None,
    env: str | None,
    expected: int,
) -> None:
    if patch is not None:
        write(home / "cordis.patch.yml", patch)
    shown = config_json(run_cli, home, **({ENV: env} if env else {}))
    if env:
        monkeypatch.setenv(ENV, env)
    with Harness.boot("default", home) as harness:
        assert shown["maxRepeats"] == harness.handle("loop-brake").max_repeats == expected


def test_a_closed_stdout_is_not_an_error(cli_env: dict[str, str], home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_loop_brake", "config", "--home", str(home), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # like `| head -c0`: the reader is gone before anything is written
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, stderr
    assert "Traceback" not in stderr


def test_a_bundle_that_is_not_installed_is_named_with_the_profile_file_and_line(
    run_cli: RunCli, home: Path
) -> None:
    profile = write(
        home / "profiles" / "default" / "profile.yml",
        "# mine\nbundles:\n  - dsh-loop-brake\n  - dsh-loop-brak\n",
    )
    done = run_cli("config", "--home", str(home))
    line = assert_one_line_error(done, f"{profile}:4: the bundle 'dsh-loop-brak' is not installed")
    assert "remove it from the profile" in line


def test_the_install_hint_is_the_command_to_run_as_is(run_cli: RunCli, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    # ~/.dsh is the default home, so the hint needs no --home; another home needs it.
    plain = run_cli("config", env={"HOME": str(user_home)})
    assert "hint: add it with `dsh-loop-brake install --profile default`\n" in plain.stdout
    other = tmp_path / "elsewhere"
    elsewhere = run_cli("config", "--home", str(other), env={"HOME": str(user_home)})
    assert f"install --profile default --home {other}`" in elsewhere.stdout
    # Running the hinted command really adds the row that config was missing.
    assert run_cli("install", env={"HOME": str(user_home)}).returncode == 0
    assert "has no loop-brake row" not in run_cli("config", env={"HOME": str(user_home)}).stdout


def test_with_json_and_no_row_the_install_hint_goes_to_stderr(
    run_cli: RunCli, tmp_path: Path
) -> None:
    empty_home = tmp_path / "empty"
    done = run_cli("config", "--home", str(empty_home), "--json", "--profile", "ci")
    assert done.returncode == 0
    assert json.loads(done.stdout)["row"] is None  # stdout stays one JSON object
    assert f"hint: add it with `dsh-loop-brake install --profile ci --home {empty_home}`" in (
        done.stderr
    )
