"""``config`` for both plugins: the circuit breaker's keys and sources, ignored env, overrides.

Every test runs the real command line as a subprocess on real files.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake.circuit_breaker import DEFAULT_DENY_MESSAGE

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]
ENV = "DSH_LOOP_BRAKE_MAX_REPEATS"

BREAKER = (
    "- insert:\n"
    "    - id: circuit-breaker\n"
    "      name: dsh-circuit-breaker\n"
    "      config:\n"
    "        duplicateLimit: 4\n"
    "        exempt: [todo_write]\n"
)


@pytest.fixture
def home(run_cli: RunCli, tmp_path: Path) -> Path:
    path = tmp_path / "home"
    assert run_cli("install", "--home", str(path)).returncode == 0
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def shown_json(run_cli: RunCli, *args: str, **env: str) -> dict[str, Any]:
    done = run_cli("config", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_the_breaker_row_is_shown_with_every_key_and_its_source(
    run_cli: RunCli, home: Path
) -> None:
    patch = write(home / "profiles" / "default" / "cordis.patch.yml", BREAKER)
    breaker = shown_json(run_cli, "--home", str(home))["circuitBreaker"]
    assert breaker["row"] == {
        "id": "circuit-breaker",
        "name": "dsh-circuit-breaker",
        "config": {"duplicateLimit": 4, "exempt": ["todo_write"]},
        "disabled": False,
    }
    assert breaker["config"] == {
        "enabled": True,
        "duplicateLimit": 4,
        "window": 200,
        "maxCallsPerAgent": 300,
        "exempt": ["todo_write"],
        "only": [],
        "ignoreArgs": ["description", "explanation", "reason", "thought", "purpose"],
        "denyMessage": DEFAULT_DENY_MESSAGE,
        "incidentLog": "",
        "store": "memory:",
        "sessionTtl": 86400,
    }
    assert breaker["sources"] == {
        "enabled": "default",
        "duplicateLimit": f"{patch}:5",
        "window": "default",
        "maxCallsPerAgent": "default",
        "exempt": f"{patch}:6",
        "only": "default",
        "ignoreArgs": "default",
        "denyMessage": "default",
        "incidentLog": "default",
        "store": "default",
        "sessionTtl": "default",
    }
    text = run_cli("config", "--home", str(home)).stdout
    assert f"circuit-breaker: plugin dsh-circuit-breaker, inserted by {patch}:2; enabled\n" in text
    assert f"  duplicateLimit: 4 (from {patch}:5)\n" in text
    assert "  window: 200 (default)\n" in text


def test_no_breaker_row_is_null_in_json_and_said_in_text(run_cli: RunCli, home: Path) -> None:
    assert shown_json(run_cli, "--home", str(home))["circuitBreaker"] is None
    assert "\ncircuit-breaker: none " in run_cli("config", "--home", str(home)).stdout


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        (["window: 50", "duplicatelimit: 4"], 6, "circuit breaker: unknown key 'duplicatelimit'"),
        (["duplicateLimit: 4", "window: 3"], 6, "circuit breaker: window must be at least"),
        (["maxCallsPerAgent: -1"], 5, "circuit breaker: maxCallsPerAgent must be an integer"),
        (["denyMessage: 'stop {who}'"], 5, "circuit breaker: denyMessage may only use"),
    ],
)
def test_an_unusable_breaker_config_exits_2_with_file_and_line(
    run_cli: RunCli, home: Path, tmp_path: Path, lines: list[str], line: int, message: str
) -> None:
    body = "".join(f"        {entry}\n" for entry in lines)
    patch = write(
        tmp_path / "cb.yml",
        "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        f"      config:\n{body}",
    )
    for extra in ((), ("--json",)):
        done = run_cli("config", "--home", str(home), "--patch", str(patch), *extra)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stdout == ""
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"error: {patch}:{line}: {message}"), done.stderr
        assert done.stderr.count("\n") == 1


def test_a_disabled_breaker_with_a_bad_config_is_shown_not_refused(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    patch = write(
        tmp_path / "cb.yml",
        "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      disabled: true\n      config: {window: 3}\n",
    )
    done = run_cli("config", "--home", str(home), "--patch", str(patch))
    assert done.returncode == 0, done.stderr
    assert f"disabled by {patch}:4: the breaker is off" in done.stdout
    assert f"config: unusable ({patch}:5: circuit breaker: window must be" in done.stdout
    breaker = shown_json(run_cli, "--home", str(home), "--patch", str(patch))["circuitBreaker"]
    assert (breaker["row"]["disabled"], breaker["config"]) == (True, None)


def test_an_env_var_that_loses_to_the_row_is_named(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    write(tmp_path / "p5.yml", "- id: loop-brake\n  config:\n    maxRepeats: 5\n")
    done = run_cli("config", "--home", str(home), "--patch", "p5.yml", env={ENV: "7"})
    assert done.returncode == 0, done.stderr
    assert "\nmaxRepeats: 5 (from p5.yml:3; DSH_LOOP_BRAKE_MAX_REPEATS=7 is ignored)\n" in (
        done.stdout
    )
    shown = shown_json(run_cli, "--home", str(home), "--patch", "p5.yml", **{ENV: "7"})
    assert shown["ignoredEnv"] == [ENV]
    # set but not losing (the row has no maxRepeats), or not set: nothing is ignored
    assert shown_json(run_cli, "--home", str(home), **{ENV: "7"})["ignoredEnv"] == []
    assert shown_json(run_cli, "--home", str(home), "--patch", "p5.yml")["ignoredEnv"] == []


def test_a_key_a_later_layer_overrides_names_both_layers(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    profile = write(
        home / "profiles" / "default" / "cordis.patch.yml",
        "- id: loop-brake\n  config:\n    maxRepeats: 4\n" + BREAKER,
    )
    overlay = write(
        tmp_path / "overlay.yml",
        "- id: loop-brake\n  config:\n    maxRepeats: 6\n"
        "- id: circuit-breaker\n  config:\n    exempt: []\n",
    )
    out = run_cli("config", "--home", str(home), "--patch", str(overlay)).stdout
    assert f"\nmaxRepeats: 6 (from {overlay}:3, overriding {profile}:3)\n" in out
    assert f"set by {overlay}:2 (replacing the config set by {profile}:2)\n" in out
    assert f"  exempt: [] (from {overlay}:6, overriding {profile}:9)\n" in out
    # the overlay's config: replaced the profile's, so duplicateLimit is back to its default
    assert (
        f"  duplicateLimit: 6 (default; {overlay}:5 replaced the config that set it at "
        f"{profile}:8)\n"
    ) in out


def test_a_dropped_max_repeats_names_the_layer_that_dropped_it(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    profile = write(
        home / "profiles" / "default" / "cordis.patch.yml",
        "- id: loop-brake\n  config:\n    maxRepeats: 4\n",
    )
    overlay = write(tmp_path / "overlay.yml", "- id: loop-brake\n  config: {}\n")
    out = run_cli("config", "--home", str(home), "--patch", str(overlay)).stdout
    assert (
        f"\nmaxRepeats: 3 (the default; neither the row nor the environment sets it; "
        f"{overlay}:2 replaced the config that set it at {profile}:3)\n"
    ) in out


def test_skipped_entries_carry_their_line(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    overlay = write(tmp_path / "o.yml", "# a typo below\n- id: loop-brak\n  disabled: true\n")
    done = run_cli("config", "--home", str(home), "--json", "--patch", str(overlay))
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["skipped"]
    assert (entry["layer"], entry["line"], entry["id"]) == (str(overlay), 2, "loop-brak")


def test_the_store_is_memory_when_none_is_configured(run_cli: RunCli, home: Path) -> None:
    assert shown_json(run_cli, "--home", str(home))["store"] == "memory:"
    assert "\nstore: memory: " in run_cli("config", "--home", str(home)).stdout


def test_strict_turns_every_warning_into_exit_2(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    overlay = write(tmp_path / "o.yml", "- id: loop-brak\n  disabled: true\n")
    loose = run_cli("config", "--home", str(home), "--patch", str(overlay))
    assert loose.returncode == 0
    strict = run_cli("config", "--home", str(home), "--patch", str(overlay), "--strict")
    assert strict.returncode == 2
    assert strict.stderr.splitlines()[0].startswith(f"warning: {overlay}:1: patch for row")
    assert strict.stderr.splitlines()[-1].startswith("error: --strict: 1 warning above")
    assert strict.stdout == loose.stdout  # the report is still printed
    clean = run_cli("config", "--home", str(home), "--strict")
    assert clean.returncode == 0 and clean.stderr == ""


def test_a_value_json_has_no_type_for_is_shown_not_a_traceback(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    # A disabled row is not validated, so its config reaches the output as YAML loaded it.
    patch = write(
        tmp_path / "off.yml",
        "- id: loop-brake\n  disabled: true\n  config: {maxRepeats: 2024-01-01}\n",
    )
    shown = shown_json(run_cli, "--home", str(home), "--patch", str(patch))
    assert shown["row"]["config"] == {"maxRepeats": "2024-01-01"} and shown["maxRepeats"] is None
    text = run_cli("config", "--home", str(home), "--patch", str(patch))
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert 'config: {"maxRepeats": "2024-01-01"}' in text.stdout
