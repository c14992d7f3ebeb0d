"""Profiles and YAML never surprise: every problem is one line with file and line, never a hang.

CLI tests run the real command line as a subprocess on real files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_loop_brake.harness import BootError, Harness, ManifestError, PatchError
from dsh_loop_brake.loop_brake import LoopBrakeConfigError

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a failed run (warnings aside); no traceback."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("error: "), errors[0]
    return errors[0].removeprefix("error: ")


@pytest.fixture
def home(run_cli: RunCli, tmp_path: Path) -> Path:
    path = tmp_path / "home"
    assert run_cli("install", "--home", str(path)).returncode == 0
    return path


# --- profile.yml keys -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["install", "config", "replay"])
def test_a_misspelt_profile_key_is_an_error_naming_file_line_and_the_keys(
    run_cli: RunCli, tmp_path: Path, command: str
) -> None:
    text = "# my profile\nbundle:\n  - dsh-loop-brake\n"
    profile = write(tmp_path / "profiles" / "default" / "profile.yml", text)
    line = one_error(run_cli(command, "--home", str(tmp_path)))
    assert line.startswith(f"{profile}:2: unknown key 'bundle' in the profile; ")
    assert "the keys that exist are bundles" in line
    # install did not add a second, correctly spelt `bundles:` beside the typo
    assert profile.read_text(encoding="utf-8") == text


# --- a profile that does not exist ------------------------------------------------------------


def test_config_says_the_profile_does_not_exist_and_lists_those_that_do(
    run_cli: RunCli, home: Path
) -> None:
    (home / "profiles" / "work").mkdir()
    done = run_cli("config", "--home", str(home), "--profile", "prod")
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if "does not exist" in line)
    assert warning.startswith("warning: profile 'prod' does not exist")
    assert "the profiles that exist are 'default', 'work'" in warning
    strict = run_cli("config", "--home", str(home), "--profile", "prod", "--strict")
    assert strict.returncode == 2
    assert strict.stderr.splitlines()[-1].startswith("error: --strict: 1 warning above")


def test_replay_says_the_profile_does_not_exist_too(run_cli: RunCli, home: Path) -> None:
    done = run_cli("replay", "--home", str(home), "--profile", "prod")
    assert done.returncode == 0, done.stderr
    assert "warning: profile 'prod' does not exist" in done.stderr
    assert "the profiles that exist are 'default'" in done.stderr
    assert run_cli("replay", "--home", str(home), "--profile", "prod", "--strict").returncode == 2


def test_an_existing_profile_draws_no_warning(run_cli: RunCli, home: Path) -> None:
    done = run_cli("config", "--home", str(home), "--strict")
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr


# --- YAML problems: one line, file and line ---------------------------------------------------

PROBLEMS = {
    "complex key": ("- id: loop-brake\n  config: {? [a, b] : 1}\n", 2, "a key here is a list"),
    "mapping key": ("- id: loop-brake\n  config:\n    ? {a: 1}\n    : 1\n", 3, "a key here"),
    "5,000 digits": (
        f"- id: loop-brake\n  config:\n    maxRepeats: {'9' * 5000}\n",
        3,
        "an integer of about 5,000 decimal digits is too large",
    ),
    "0x and 5,000 f": (
        f"- id: loop-brake\n  config:\n    maxRepeats: 0x{'f' * 5000}\n",
        3,
        "an integer of about 6,021 decimal digits is too large",
    ),
}


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("command", ["config", "replay"])
def test_every_yaml_problem_in_a_patch_is_one_line_with_file_and_line(
    run_cli: RunCli, home: Path, tmp_path: Path, problem: str, command: str
) -> None:
    text, line, fragment = PROBLEMS[problem]
    patch = write(tmp_path / "bad.yml", text)
    message = one_error(run_cli(command, "--home", str(home), "--patch", str(patch)))
    assert message.startswith(f"{patch}:{line}: "), message
    assert fragment in message


@pytest.mark.parametrize("problem", ["complex key", "0x and 5,000 f"])
def test_a_yaml_problem_in_profile_yml_is_one_line_too(
    run_cli: RunCli, tmp_path: Path, problem: str
) -> None:
    text = {
        "complex key": "bundles: [dsh-loop-brake]\n? [a, b]\n: 1\n",
        "0x and 5,000 f": f"bundles:\n  - dsh-loop-brake\n  - 0x{'f' * 5000}\n",
    }[problem]
    profile = write(tmp_path / "profiles" / "default" / "profile.yml", text)
    for command in ("install", "config"):
        message = one_error(run_cli(command, "--home", str(tmp_path)))
        assert message.startswith(f"{profile}:"), message


def test_the_boot_refuses_the_same_yaml_with_its_file_and_line(tmp_path: Path) -> None:
    patch = write(tmp_path / "bad.yml", PROBLEMS["0x and 5,000 f"][0])
    with pytest.raises(PatchError) as caught:
        Harness.boot(home=tmp_path / "home", patches=[patch])
    assert (caught.value.path, caught.value.line) == (str(patch), 3)


# --- a named pipe, a directory or a device is an error, never a hang --------------------------


def _run_briefly(
    cli_env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    # A short timeout: before the fix these commands blocked forever on the pipe.
    return subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", *args],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize(
    "where",
    ["cordis.patch.yml", "profiles/default/cordis.patch.yml", "profiles/default/profile.yml"],
)
@pytest.mark.parametrize("command", ["config", "replay"])
def test_a_named_pipe_at_a_layer_is_an_error_not_a_hang(
    cli_env: dict[str, str], tmp_path: Path, where: str, command: str
) -> None:
    home = tmp_path / "home"
    (home / "profiles" / "default").mkdir(parents=True)
    if where != "profiles/default/profile.yml":
        write(home / "profiles" / "default" / "profile.yml", "bundles: [dsh-loop-brake]\n")
    os.mkfifo(home / where)
    done = _run_briefly(cli_env, tmp_path, command, "--home", str(home))
    message = one_error(done)
    assert message.startswith(f"{home / where}: this is a named pipe, not a file"), message


@pytest.mark.parametrize("kind", ["a directory", "a device"])
def test_a_directory_or_a_device_at_a_layer_is_an_error(
    cli_env: dict[str, str], tmp_path: Path, kind: str
) -> None:
    home = tmp_path / "home"
    write(home / "profiles" / "default" / "profile.yml", "bundles: [dsh-loop-brake]\n")
    layer = home / "cordis.patch.yml"
    if kind == "a directory":
        layer.mkdir()
    else:
        layer.symlink_to("/dev/zero")
    message = one_error(_run_briefly(cli_env, tmp_path, "config", "--home", str(home)))
    assert message.startswith(f"{layer}: this is {kind}, not a file"), message


@pytest.mark.parametrize("target", ["missing", "itself"])
@pytest.mark.parametrize(
    "where",
    ["cordis.patch.yml", "profiles/default/cordis.patch.yml", "profiles/default/profile.yml"],
)
@pytest.mark.parametrize("command", ["config", "replay"])
def test_a_symbolic_link_to_nothing_at_a_layer_is_an_error_not_no_file(
    cli_env: dict[str, str], tmp_path: Path, where: str, command: str, target: str
) -> None:
    # A patch kept in a dotfiles repository that moved: silently composing without it would
    # give a brake with other teeth than the profile asks for.
    home = tmp_path / "home"
    (home / "profiles" / "default").mkdir(parents=True)
    if where != "profiles/default/profile.yml":
        write(home / "profiles" / "default" / "profile.yml", "bundles: [dsh-loop-brake]\n")
    layer = home / where
    layer.symlink_to(tmp_path / "moved.yml" if target == "missing" else layer)
    message = one_error(_run_briefly(cli_env, tmp_path, command, "--home", str(home)))
    assert message.startswith(f"{layer}: "), message
    assert "symbolic link" in message, message


# --- Harness.boot errors carry path and line --------------------------------------------------


def test_a_row_no_plugin_claims_is_located_at_its_insert(tmp_path: Path) -> None:
    patch = write(
        tmp_path / "rows.yml",
        "- insert:\n    - id: mystery\n      name: no-such-plugin\n",
    )
    with pytest.raises(BootError) as caught:
        Harness.boot(home=tmp_path / "home", patches=[patch])
    assert (caught.value.path, caught.value.line) == (str(patch), 3)
    assert str(caught.value).startswith(f"{patch}:3: no installed plugin claims rows named")


def test_a_bundle_that_is_not_installed_is_located_at_its_entry(tmp_path: Path) -> None:
    profile = write(
        tmp_path / "profiles" / "default" / "profile.yml",
        "bundles:\n  - dsh-loop-brake\n  - not-a-bundle\n",
    )
    with pytest.raises(ManifestError) as caught:
        Harness.boot(home=tmp_path)
    assert (caught.value.path, caught.value.line) == (str(profile), 3)
    assert str(caught.value).startswith(f"{profile}:3: the bundle 'not-a-bundle' is not installed")


def test_a_plugins_config_error_keeps_its_type_and_is_located_at_the_key(tmp_path: Path) -> None:
    patch = write(
        tmp_path / "p.yml",
        "- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n      config:\n"
        "        maxRepeats: 0\n",
    )
    with pytest.raises(LoopBrakeConfigError) as caught:
        Harness.boot(home=tmp_path / "home", patches=[patch])
    error = caught.value
    assert (error.path, error.line) == (str(patch), 5)  # type: ignore[attr-defined]
    assert str(error).startswith(f"{patch}:5: loop brake: maxRepeats must be an integer")


def test_a_circuit_breaker_typo_at_boot_names_the_file_and_the_line(tmp_path: Path) -> None:
    patch = write(
        tmp_path / "cb.yml",
        "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      config:\n        window: 50\n        duplicatelimit: 4\n",
    )
    with pytest.raises(LoopBrakeConfigError) as caught:
        Harness.boot(home=tmp_path / "home", patches=[patch])
    assert str(caught.value).startswith(f"{patch}:6: circuit breaker: unknown key 'duplicatelimit'")
