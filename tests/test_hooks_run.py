"""``dsh-loop-brake hook HOST``: realistic events of each host in, the host's decision out."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hooks_support import (
    HOST_FIXTURES,
    denial_of,
    failed_open,
    fixture,
    hook_env,
    loop_brake_patch,
    run_hook,
    write_patch,
)

from dsh_loop_brake import call_hash
from dsh_loop_brake.harness.profiles import default_home

ALL_FIXTURES = [(host, name) for host, names in HOST_FIXTURES.items() for name in names]


@pytest.mark.parametrize(("host", "name"), ALL_FIXTURES)
def test_the_third_identical_call_is_denied_with_the_hosts_deny_json(
    host: str, name: str, tmp_path: Path
) -> None:
    event = fixture(name)
    first = run_hook(host, event, home=tmp_path)
    second = run_hook(host, event, home=tmp_path)
    third = run_hook(host, event, home=tmp_path)
    assert denial_of(host, first) is None
    assert denial_of(host, second) is None
    reason = denial_of(host, third)
    prefix = call_hash(event["tool_name"], event["tool_input"])[:12]
    assert reason == (
        f"loop brake: tool {json.dumps(event['tool_name'])} called 3 times in a row with "
        f"identical arguments (call {prefix}\u2026, limit 3); the call was denied before it ran. "
        "Change the arguments, call a different tool, or stop."
    )
    # A denied call stays in the streak: the next identical one is denied again, with count 4.
    fourth = denial_of(host, run_hook(host, event, home=tmp_path))
    assert fourth is not None and "called 4 times in a row" in fourth


@pytest.mark.parametrize("host", sorted(HOST_FIXTURES))
def test_a_different_call_ends_the_streak(host: str, tmp_path: Path) -> None:
    event = fixture(HOST_FIXTURES[host][0])
    other = fixture(HOST_FIXTURES[host][0])
    other["tool_input"]["command"] = "git status"
    for current in (event, event, other, event, event):
        assert denial_of(host, run_hook(host, current, home=tmp_path)) is None


def test_allowed_output_is_nothing_at_all_never_an_allow(tmp_path: Path) -> None:
    done = run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_a_subagent_never_shares_a_streak_with_its_parent(tmp_path: Path) -> None:
    parent = fixture("claude-code-bash.json")
    child = dict(parent, agent_id="agent-abc123", agent_type="Explore")
    for event in (parent, child, parent, child):
        assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    assert denial_of("claude-code", run_hook("claude-code", child, home=tmp_path)) is not None


def test_two_sessions_never_share_a_count(tmp_path: Path) -> None:
    one = fixture("codex-bash.json")
    two = dict(one, session_id="another-thread")
    for event in (one, two, one, two):
        assert denial_of("codex", run_hook("codex", event, home=tmp_path)) is None


def test_max_repeats_from_the_profile_row(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 2}"),
    )
    event = fixture("gemini-shell.json")
    assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is None
    reason = denial_of("gemini", run_hook("gemini", event, home=tmp_path))
    assert reason is not None and "(call " in reason and "limit 2)" in reason


def test_max_repeats_from_the_environment_when_the_row_has_none(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    env = {"DSH_LOOP_BRAKE_MAX_REPEATS": "1"}
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path, env=env))
    assert reason is not None and "limit 1)" in reason


def test_the_row_beats_the_environment(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 5}"),
    )
    env = {"DSH_LOOP_BRAKE_MAX_REPEATS": "1"}
    event = fixture("claude-code-bash.json")
    for _ in range(4):
        done = run_hook("claude-code", event, home=tmp_path, env=env)
        assert denial_of("claude-code", done) is None


def test_a_disabled_row_brakes_nothing(tmp_path: Path) -> None:
    profile = tmp_path / "profiles" / "default"
    profile.mkdir(parents=True)
    (profile / "profile.yml").write_text("bundles: [dsh-loop-brake]\n", encoding="utf-8")
    write_patch(tmp_path, "- id: loop-brake\n  disabled: true\n")
    event = fixture("claude-code-bash.json")
    for _ in range(4):
        assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    assert not (tmp_path / "state" / "brakes.sqlite3").exists()


def test_a_changed_profile_is_read_again_on_the_next_call(tmp_path: Path) -> None:
    event = fixture("claude-code-bash.json")
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    # The cached composition is stale once the patch file exists: the next call reads it.
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 2}"),
    )
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is not None and "limit 2)" in reason
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 9}"),
    )
    reason = denial_of("claude-code", run_hook("claude-code", event, home=tmp_path))
    assert reason is None


def test_a_profile_with_a_bad_row_fails_open_naming_the_file_and_line(tmp_path: Path) -> None:
    patch = write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 0}"),
    )
    line = failed_open(run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path))
    assert f"{patch}:" in line and "maxRepeats must be an integer of at least 1" in line


def test_a_bad_environment_value_fails_open_naming_the_variable(tmp_path: Path) -> None:
    env = {"DSH_LOOP_BRAKE_MAX_REPEATS": "lots"}
    done = run_hook("codex", fixture("codex-bash.json"), home=tmp_path, env=env)
    assert "DSH_LOOP_BRAKE_MAX_REPEATS" in failed_open(done)


def test_a_memory_store_is_a_configuration_error(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        "- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n"
        "      config: {store: 'memory:'}\n",
    )
    line = failed_open(run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path))
    assert "memory:" in line and "keeps nothing between the hook's processes" in line


def test_the_store_from_the_environment(tmp_path: Path) -> None:
    state = tmp_path / "elsewhere" / "counts.sqlite3"
    env = {"DSH_LOOP_BRAKE_STORE": f"sqlite:{state}"}
    event = fixture("claude-code-bash.json")
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path, env=env)) is None
    assert state.is_file()
    assert not (tmp_path / "state" / "brakes.sqlite3").exists()


def test_state_files_are_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert denial_of("codex", run_hook("codex", fixture("codex-bash.json"), home=home)) is None
    state = home / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in state.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_the_home_is_found_as_the_command_line_finds_it(tmp_path: Path) -> None:
    # No --home: $DSH_HOME, else ~/.dsh, exactly as harness.profiles.default_home says.
    home = tmp_path / "from-env"
    env = {"DSH_HOME": str(home)}
    event = fixture("claude-code-bash.json")
    assert denial_of("claude-code", run_hook("claude-code", event, env=env)) is None
    assert (home / "state" / "brakes.sqlite3").is_file()
    assert default_home(env) == home
    user = tmp_path / "user"
    user.mkdir()
    env = {"HOME": str(user), "DSH_HOME": "   "}  # blank counts as not set
    assert denial_of("claude-code", run_hook("claude-code", event, env=env)) is None
    assert (user / ".dsh" / "state" / "brakes.sqlite3").is_file()
    assert default_home({"DSH_HOME": "   "}) == Path.home() / ".dsh"


def test_a_named_profile(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        loop_brake_patch("{maxRepeats: 1}"),
        profile="strict",
    )
    event = fixture("claude-code-bash.json")
    done = run_hook("claude-code", event, "--profile", "strict", home=tmp_path)
    assert denial_of("claude-code", done) is not None
    done = run_hook("claude-code", event, "--profile=default", home=tmp_path)
    assert denial_of("claude-code", done) is None


def test_the_circuit_breaker_sees_the_bash_loop_with_a_new_description(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      config: {duplicateLimit: 3}\n",
    )
    event = fixture("claude-code-bash.json")
    verdicts = []
    for attempt in range(4):
        event["tool_input"]["description"] = f"Run the test suite, attempt {attempt + 1}"
        verdicts.append(denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)))
    assert verdicts[:2] == [None, None]
    assert verdicts[2] is not None and verdicts[2].startswith("circuit breaker: this call to Bash")
    assert "(count 3, limit 3)" in verdicts[2]
    assert verdicts[3] is not None and "(count 3, limit 3)" in verdicts[3]  # denials not recorded


def test_the_circuit_breakers_call_cap(tmp_path: Path) -> None:
    write_patch(
        tmp_path,
        "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n"
        "      config: {maxCallsPerAgent: 2, denyMessage: 'stop {tool} at {count}/{limit}'}\n",
    )
    verdicts = []
    for number in range(3):
        event = fixture("gemini-shell.json")
        event["tool_input"]["command"] = f"ls {number}"
        verdicts.append(denial_of("gemini", run_hook("gemini", event, home=tmp_path)))
    assert verdicts == [None, None, "stop run_shell_command at 2/2"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["claud"],
        ["claude-code", "--max-repeats", "3"],
        ["claude-code", "--profile"],
        ["claude-code", "--profile", "../etc"],
        ["claude-code", "--home", ""],
        ["claude-code", "extra"],
    ],
)
def test_usage_errors_of_the_hook_exit_1_never_2(argv: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "hook", *argv],
        input=json.dumps(fixture("claude-code-bash.json")).encode(),
        capture_output=True,
        env=hook_env({"DSH_HOME": str(tmp_path)}),
        timeout=60,
        check=False,
    )
    failed_open(done)


def test_the_console_script_runs_the_hook(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "dsh-loop-brake"
    if not script.exists():
        pytest.skip("the package is not installed with its console script in this interpreter")
    event = json.dumps(fixture("claude-code-bash.json")).encode()
    for expected in (False, False, True):
        done = subprocess.run(
            [str(script), "hook", "claude-code", "--home", str(tmp_path)],
            input=event,
            capture_output=True,
            env=hook_env(),
            timeout=60,
            check=False,
        )
        assert (denial_of("claude-code", done) is not None) is expected


def test_a_skipped_patch_leaves_stderr_empty(tmp_path: Path) -> None:
    # gemini-cli shows text on stderr as a message even with exit 0: the hook keeps quiet.
    write_patch(tmp_path, "- id: no-such-row\n  disabled: true\n")
    done = run_hook("gemini", fixture("gemini-shell.json"), home=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_help_after_the_host_is_for_a_person(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "hook", "codex", "--help"],
        capture_output=True,
        env=hook_env({"DSH_HOME": str(tmp_path)}),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith(b"usage: dsh-loop-brake hook ")
    assert not (tmp_path / "state").exists()  # nothing was read or counted
