"""``dsh-loop-brake replay`` as a user runs it: a subprocess on real files and directories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli

FIXTURES = Path(__file__).parent / "fixtures" / "replay"


def report_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode in (0, 1), result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The whole stderr of a failed run: exactly one line, no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    """A copy of the fixtures, plus things a directory search must skip."""
    directory = tmp_path / "transcripts"
    shutil.copytree(FIXTURES, directory)
    (directory / ".hidden").mkdir()
    (directory / ".hidden" / "stuck.jsonl").write_text('{"tool": "x"}\n' * 10)
    (directory / ".stuck.jsonl").write_text('{"tool": "x"}\n' * 10)
    (directory / "notes.txt").write_text('{"tool": "x"}\n' * 10)
    (directory / "nested" / "deeper").mkdir(parents=True)
    (directory / "nested" / "deeper" / "late.NDJSON").write_text(
        '{"tool": "fetch", "args": {"url": "a"}, "session": "late"}\n'
    )
    return directory


# --------------------------------------------------------------------------------------------
# The main job: no PATH replays the shipped examples


def test_no_path_replays_the_shipped_examples_and_shows_a_denial(run_cli: RunCli) -> None:
    result = run_cli("replay")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "openai-research-stuck.json" in out
    assert "call 6: web_search (" in out  # the stuck search's first denial
    assert "anthropic-deploy-watch.json" in out  # the A-B-A-B poll: never denied
    assert "the brake would deny 12 calls in 2 sessions" in out
    assert "example transcripts shipped with dsh-loop-brake" in result.stderr
    assert "Traceback" not in result.stderr


def test_examples_cover_the_formats_and_the_three_stories(run_cli: RunCli) -> None:
    report = report_of(run_cli("replay", "--json"))
    by_name = {Path(s["source"]).name + ":" + s["session"]: s for s in report["sessions"]}
    stuck = by_name["openai-research-stuck.json:openai-research-stuck.json"]
    assert stuck["denied"] > 0 and stuck["firstDenial"]["tool"] == "web_search"
    alternating = by_name["anthropic-deploy-watch.json:anthropic-deploy-watch.json"]
    assert (alternating["longestStreak"], alternating["denied"]) == (1, 0)
    assert (
        alternating["distinctCalls"] < alternating["calls"] // 2
    )  # the same two calls, over and over
    healthy = [s for s in report["sessions"] if s["source"].endswith("claude-code-fix-test.jsonl")]
    assert healthy and healthy[0]["denied"] == 0
    suffixes = {Path(s["source"]).suffix for s in report["sessions"]}
    assert suffixes == {".json", ".jsonl"}


def test_fail_on_denial_exit_codes(run_cli: RunCli) -> None:
    assert run_cli("replay", "--fail-on-denial").returncode == 1
    healthy = FIXTURES / "claude_code" / "-home-lee-proj" / "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    result = run_cli("replay", "--fail-on-denial", str(healthy))
    assert result.returncode == 0, result.stderr
    assert "the brake would deny no call" in result.stdout


# --------------------------------------------------------------------------------------------
# Files and directories


def test_directory_is_searched_recursively_skipping_hidden_and_other_files(
    run_cli: RunCli, transcripts: Path
) -> None:
    report = report_of(run_cli("replay", "--json", str(transcripts)))
    sources = sorted(
        {Path(s["source"]).relative_to(transcripts).as_posix() for s in report["sessions"]}
    )
    assert sources == [
        "anthropic_conversation.json",
        "calls.jsonl",
        "claude_code/-home-lee-proj/7c9e6679-7425-40de-944b-e07fc1f90ae7.jsonl",
        "claude_code/-home-lee-proj/7c9e6679-7425-40de-944b-e07fc1f90ae7/subagents/agent-9f01.jsonl",
        "nested/deeper/late.NDJSON",
        "openai_chat_completions.jsonl",
        "openai_messages.jsonl",
        "openai_parallel_tools.json",
        "openai_responses.json",
        "tau_bench_results.json",
    ]
    assert report["totals"]["sessions"] == 16


def test_json_report_is_exactly_the_spec_s_shape(run_cli: RunCli) -> None:
    result = run_cli("replay", "--json", str(FIXTURES / "calls.jsonl"))
    assert result.returncode == 0
    assert result.stdout.isascii()
    report = json.loads(result.stdout)
    assert report == {
        "maxRepeats": 3,
        "maxRepeatsSource": "default",
        "sessions": [
            {
                "source": str(FIXTURES / "calls.jsonl"),
                "session": "s1",
                "calls": 3,
                "distinctCalls": 1,
                "longestStreak": 3,
                "denied": 1,
                "firstDenial": {
                    "call": 3,
                    "tool": "search",
                    "count": 3,
                    "hashPrefix": report["sessions"][0]["firstDenial"]["hashPrefix"],
                },
            },
            {
                "source": str(FIXTURES / "calls.jsonl"),
                "session": "s2",
                "calls": 2,
                "distinctCalls": 1,
                "longestStreak": 2,
                "denied": 0,
                "firstDenial": None,
            },
            {
                "source": str(FIXTURES / "calls.jsonl"),
                "session": "calls.jsonl",
                "calls": 1,
                "distinctCalls": 1,
                "longestStreak": 1,
                "denied": 0,
                "firstDenial": None,
            },
        ],
        "totals": {"sessions": 3, "calls": 6, "denied": 1, "sessionsWithDenials": 1},
    }
    from dsh_loop_brake import call_hash

    expected_prefix = call_hash("search", {"q": "weather"})[:12]
    assert report["sessions"][0]["firstDenial"]["hashPrefix"] == expected_prefix
    assert list(report) == ["maxRepeats", "maxRepeatsSource", "sessions", "totals"]
    # the bad lines of the file are warnings with path and line, and the run goes on
    assert f"{FIXTURES / 'calls.jsonl'}:4: not JSON" in result.stderr


def test_bad_files_are_reported_and_the_rest_still_replays(run_cli: RunCli, tmp_path: Path) -> None:
    directory = tmp_path / "mixed"
    directory.mkdir()
    (directory / "random.json").write_bytes(os.urandom(256) + b"\xff")
    (directory / "random.jsonl").write_bytes(b"\x00\xff\xfe\x81\n" * 20)
    (directory / "truncated.json").write_text('[{"role": "assistant", "tool_calls": [')
    (directory / "package.json").write_text('{"name": "web", "version": "1.0.0"}')
    (directory / "numbers.json").write_text("[1, 2, 3]")
    shutil.copy(FIXTURES / "calls.jsonl", directory / "zz-good.jsonl")
    result = run_cli("replay", "--json", str(directory))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {Path(s["source"]).name for s in report["sessions"]} == {"zz-good.jsonl"}
    warnings = [line for line in result.stderr.splitlines() if "the file was skipped" in line]
    assert sorted(Path(line.split(": ")[1]).name for line in warnings) == [
        "numbers.json",
        "package.json",
        "random.json",
        "random.jsonl",
        "truncated.json",
    ]
    assert "Traceback" not in result.stderr


def test_exit_2_only_when_nothing_at_all_could_be_read(run_cli: RunCli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run_cli("replay", "--max-repeats=3", str(bad), str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "profile 'default' does not exist" in lines.pop(0)  # the home has no profile
    assert len(lines) == 3  # one warning per file, then the error
    assert f"{bad}: not JSON" in lines[0]
    assert f"{tmp_path / 'missing.jsonl'}: cannot read the file (no such file" in lines[1]
    assert "nothing could be read" in lines[2]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    # one readable file among them is enough for exit 0
    good = run_cli("replay", str(bad), str(FIXTURES / "calls.jsonl"))
    assert good.returncode == 0


def test_a_directory_without_transcripts_is_a_usage_error(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli("replay", str(tmp_path / "empty"))
    assert result.returncode == 2
    assert "no transcript to replay" in result.stderr
    assert "Traceback" not in result.stderr


def test_explicit_format(run_cli: RunCli) -> None:
    openai = str(FIXTURES / "openai_parallel_tools.json")
    anthropic = str(FIXTURES / "anthropic_conversation.json")
    as_openai = run_cli("replay", "--json", "--format", "openai", openai, anthropic)
    assert report_of(as_openai)["totals"]["calls"] == 9
    # asked for OpenAI tool calls, the Anthropic file has none: it is said, and the rest replays
    assert f"warning: {anthropic}: no entry of format openai was found" in as_openai.stderr
    result = run_cli("replay", "--format", "csv", openai)
    assert result.returncode == 2 and "invalid choice" in result.stderr


@pytest.mark.parametrize(
    ("name", "format"),
    [
        ("calls.jsonl", "claude-code"),
        ("anthropic_conversation.json", "openai"),
        ("openai_parallel_tools.json", "anthropic"),
        ("tau_bench_results.json", "jsonl"),
    ],
)
def test_a_file_of_another_format_is_unreadable_never_zero_calls(
    run_cli: RunCli, name: str, format: str
) -> None:
    # A CI gate must not pass a loop because replay read the log as something it is not.
    path = str(FIXTURES / name)
    result = run_cli("replay", "--format", format, "--max-repeats=3", "--fail-on-denial", path)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    warning, error = result.stderr.strip().splitlines()[-2:]  # after the missing profile's
    assert warning.startswith(f"warning: {path}: no entry of format {format} was found (")
    assert warning.endswith("; the file was skipped")
    assert "nothing could be read" in error


def test_a_log_of_chat_completion_responses_is_replayed(run_cli: RunCli) -> None:
    # Five identical get_ticket responses: a loop the brake stops at the third call.
    path = str(FIXTURES / "openai_chat_completions.jsonl")
    for options in ([], ["--format", "openai"]):
        result = run_cli("replay", "--json", "--fail-on-denial", *options, path)
        assert result.returncode == 1, result.stderr
        [session] = json.loads(result.stdout)["sessions"]
        assert (session["calls"], session["longestStreak"], session["denied"]) == (5, 5, 3)
        assert session["firstDenial"]["tool"] == "get_ticket"
        assert path not in result.stderr  # read without a word about the file


def test_an_empty_file_is_said_not_replayed_as_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    empty = tmp_path / "agent.jsonl"
    empty.write_text("")
    result = run_cli("replay", "--max-repeats=3", "--fail-on-denial", str(empty))
    assert result.returncode == 2
    assert f"{empty}: no entry of any format was found (the file is empty)" in result.stderr


def test_long_names_and_paths_are_whole_when_stdout_is_not_a_terminal(
    run_cli: RunCli, tmp_path: Path
) -> None:
    directory = tmp_path / ("a-directory-with-a-long-name-" * 3)
    directory.mkdir()
    session = "support-agent-" + "0123456789" * 6
    tool = "lookup_customer_order_history_by_email_address"
    lines = [{"tool": tool, "args": {"email": "a@example.com"}, "session": session}] * 3
    path = directory / ("a-transcript-file-with-a-long-name-" * 2 + ".jsonl")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    other = directory / "other.jsonl"
    other.write_text(json.dumps({"tool": "t", "session": "s"}) + "\n")
    result = run_cli("replay", "--max-repeats=3", str(path), str(other))  # stdout is a pipe
    assert result.returncode == 0, result.stderr
    assert "\u2026" not in result.stdout
    assert f"transcripts in {directory}" in result.stdout
    assert path.name in result.stdout
    assert f"  {session}  " in result.stdout
    assert f"call 3: {tool} (" in result.stdout


def test_hostile_names_stay_on_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "evil.jsonl"
    session = "s\n\x1b[31mFAKE: all clear\x1b[0m"
    lines = [{"tool": "t\nx", "args": {}, "session": session}] * 3
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_cli("replay", str(path))
    assert result.returncode == 0
    assert "\x1b" not in result.stdout
    table_lines = [line for line in result.stdout.splitlines() if "FAKE" in line]
    assert len(table_lines) == 1
    assert "s\\x0a\\x1b[31mFAKE" in table_lines[0]
    assert "call 3: t\\x0ax (" in table_lines[0]


# --------------------------------------------------------------------------------------------
# The sweep


def test_sweep_rows_equal_replays_at_each_value(run_cli: RunCli, transcripts: Path) -> None:
    swept = report_of(run_cli("replay", "--json", "--sweep", "1..5", str(transcripts)))
    assert [row["maxRepeats"] for row in swept["sweep"]] == [1, 2, 3, 4, 5]
    assert list(swept["sweep"][0]) == ["maxRepeats", "denied", "sessionsWithDenials"]
    for row in swept["sweep"]:
        alone = report_of(
            run_cli("replay", "--json", "--max-repeats", str(row["maxRepeats"]), str(transcripts))
        )
        assert alone["maxRepeats"] == row["maxRepeats"]
        assert (row["denied"], row["sessionsWithDenials"]) == (
            alone["totals"]["denied"],
            alone["totals"]["sessionsWithDenials"],
        )
    denied = [row["denied"] for row in swept["sweep"]]
    assert denied == sorted(denied, reverse=True)  # a looser brake never denies more


def test_sweep_table(run_cli: RunCli) -> None:
    result = run_cli("replay", "--sweep", "2..4")
    assert result.returncode == 0
    assert "Sweep: what each maxRepeats would deny" in result.stdout
    assert "<- this report" in result.stdout


@pytest.mark.parametrize("value", ["5..2", "0..3", "abc", "2-5", "1..1000", ""])
def test_bad_sweep_is_one_line(run_cli: RunCli, value: str) -> None:
    line = one_line_error(run_cli("replay", "--sweep", value))
    assert "--sweep" in line


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", "true"])
def test_bad_max_repeats_is_one_line(run_cli: RunCli, value: str) -> None:
    line = one_line_error(run_cli("replay", f"--max-repeats={value}"))
    assert "maxRepeats must be an integer of at least 1" in line
    assert "(from --max-repeats)" in line


# --------------------------------------------------------------------------------------------
# The profile's loop-brake row


def _patch(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_profile_row_sets_max_repeats_and_max_repeats_overrides_it(
    run_cli: RunCli, tmp_path: Path
) -> None:
    home = tmp_path / "dsh"
    assert run_cli("install", "--home", str(home)).returncode == 0
    patch = _patch(home / "cordis.patch.yml", "- id: loop-brake\n  config:\n    maxRepeats: 5\n")
    stuck = str(FIXTURES / "tau_bench_results.json")  # a streak of 4: denied at 3, not at 5
    at_five = run_cli("replay", "--home", str(home), "--json", stuck)
    assert report_of(at_five)["maxRepeats"] == 5
    assert report_of(at_five)["totals"]["denied"] == 0
    assert "note:" not in at_five.stderr  # the row exists and is enabled: nothing to say
    table = run_cli("replay", "--home", str(home), stuck)
    assert f"at maxRepeats 5 (from {patch}" in table.stdout
    overridden = run_cli("replay", "--home", str(home), "--max-repeats", "3", "--json", stuck)
    assert report_of(overridden)["maxRepeats"] == 3
    assert report_of(overridden)["totals"]["denied"] == 2
    # the row beats the environment; --max-repeats beats both
    env = {"DSH_LOOP_BRAKE_MAX_REPEATS": "2"}
    assert (
        report_of(run_cli("replay", "--home", str(home), "--json", stuck, env=env))["maxRepeats"]
        == 5
    )
    assert (
        report_of(
            run_cli("replay", "--home", str(home), "--max-repeats", "4", "--json", stuck, env=env)
        )["maxRepeats"]
        == 4
    )


def test_json_says_where_max_repeats_came_from_as_config_does(
    run_cli: RunCli, tmp_path: Path
) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    calls = str(FIXTURES / "calls.jsonl")
    patch = _patch(tmp_path / "p5.yml", "- id: loop-brake\n  config:\n    maxRepeats: 5\n")
    env = {"DSH_LOOP_BRAKE_MAX_REPEATS": "4"}
    for options, environ, expected in [
        ((), None, "default"),
        ((), env, "env DSH_LOOP_BRAKE_MAX_REPEATS"),
        (("--patch", str(patch)), env, str(patch)),
    ]:
        replayed = report_of(
            run_cli("replay", "--home", str(home), *options, "--json", calls, env=environ)
        )
        shown = json.loads(
            run_cli("config", "--home", str(home), *options, "--json", env=environ).stdout
        )
        assert replayed["maxRepeatsSource"] == shown["source"] == expected
        assert replayed["maxRepeats"] == shown["maxRepeats"]
    overridden = run_cli(
        "replay", "--home", str(home), "--max-repeats", "2", "--json", calls, env=env
    )
    assert report_of(overridden)["maxRepeatsSource"] == "--max-repeats"


def test_environment_applies_when_the_row_has_no_max_repeats(
    run_cli: RunCli, tmp_path: Path
) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    result = run_cli(
        "replay",
        "--home",
        str(home),
        str(FIXTURES / "calls.jsonl"),
        env={"DSH_LOOP_BRAKE_MAX_REPEATS": "2"},
    )
    assert "at maxRepeats 2 (from $DSH_LOOP_BRAKE_MAX_REPEATS)" in result.stdout
    bad = run_cli("replay", "--home", str(home), env={"DSH_LOOP_BRAKE_MAX_REPEATS": "zero"})
    assert "environment variable DSH_LOOP_BRAKE_MAX_REPEATS" in one_line_error(bad)


def test_profile_without_the_row_uses_the_bundle_row_and_says_so(
    run_cli: RunCli, tmp_path: Path
) -> None:
    result = run_cli("replay", "--home", str(tmp_path / "nowhere"), str(FIXTURES / "calls.jsonl"))
    assert result.returncode == 0
    assert "at maxRepeats 3 (the default)" in result.stdout
    assert "profile 'default' has no loop-brake row" in result.stderr
    assert "dsh-loop-brake install" in result.stderr
    quiet = run_cli(
        "replay",
        "--home",
        str(tmp_path / "nowhere"),
        "--max-repeats",
        "3",
        str(FIXTURES / "calls.jsonl"),
    )
    assert quiet.stderr.count("note:") == 0 and quiet.returncode == 0


def test_disabled_row_is_replayed_as_enabled_and_said_so(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    patch = _patch(
        home / "cordis.patch.yml",
        "- id: loop-brake\n  disabled: true\n  config:\n    maxRepeats: 2\n",
    )
    result = run_cli("replay", "--home", str(home), "--json", str(FIXTURES / "calls.jsonl"))
    report = report_of(result)
    assert report["maxRepeats"] == 2  # with the row's own config
    assert report["totals"]["denied"] == 3
    assert "row is disabled by " + str(patch) in result.stderr
    assert "replaying as if it were enabled" in result.stderr


def test_invalid_row_config_names_the_patch_file(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    patch = _patch(home / "cordis.patch.yml", "- id: loop-brake\n  config:\n    maxRepeats: 0\n")
    line = one_line_error(run_cli("replay", "--home", str(home)))
    assert str(patch) in line
    assert "maxRepeats must be an integer of at least 1, got 0" in line
    typo = _patch(tmp_path / "typo.yml", "- id: loop-brake\n  disable: true\n")
    line = one_line_error(run_cli("replay", "--home", str(home), "--patch", str(typo)))
    assert str(typo) in line


def test_replay_applies_the_loop_brake_row_only(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    incidents = tmp_path / "incidents.jsonl"
    breaker = _patch(
        tmp_path / "breaker.yml",
        "- insert:\n"
        "    - id: circuit-breaker\n"
        "      name: dsh-circuit-breaker\n"
        "      config:\n"
        "        duplicateLimit: 2\n"
        f"        incidentLog: {json.dumps(str(incidents))}\n",
    )
    stuck = str(FIXTURES / "tau_bench_results.json")
    with_breaker = report_of(
        run_cli("replay", "--home", str(home), "--patch", str(breaker), "--json", stuck)
    )
    without = report_of(run_cli("replay", "--home", str(home), "--json", stuck))
    assert with_breaker == without  # the breaker would deny at 2; it was not applied
    assert not incidents.exists()  # and it had no side effect


# --------------------------------------------------------------------------------------------
# --strict


def test_strict_makes_any_warning_exit_2(run_cli: RunCli, tmp_path: Path) -> None:
    good = str(FIXTURES / "tau_bench_results.json")  # a skipped session: one warning
    clean = str(FIXTURES / "openai_chat_completions.jsonl")
    unreadable = tmp_path / "broken.json"
    unreadable.write_text("{")
    for paths in ([good], [clean, str(unreadable)], [str(FIXTURES / "calls.jsonl")]):
        loose = run_cli("replay", "--max-repeats=3", "--json", *paths)
        strict = run_cli("replay", "--max-repeats=3", "--json", "--strict", *paths)
        assert loose.returncode == 0 and "warning:" in loose.stderr
        assert strict.returncode == 2
        assert json.loads(strict.stdout) == json.loads(loose.stdout)  # the report still shown
        assert strict.stderr.splitlines()[-1].startswith("error: --strict: ")
    # a profile that does not exist is a warning too (the test's home has none)
    missing = run_cli("replay", "--max-repeats=3", "--strict", clean)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    quiet = run_cli(
        "replay", "--home", str(home), "--max-repeats=3", "--strict", "--fail-on-denial", clean
    )
    assert quiet.returncode == 1 and "warning" not in quiet.stderr  # no warning: as without


def test_strict_counts_a_skipped_patch(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    run_cli("install", "--home", str(home))
    typo = _patch(tmp_path / "typo.yml", "- id: loop-brakes\n  config:\n    maxRepeats: 5\n")
    clean = str(FIXTURES / "openai_chat_completions.jsonl")
    args = ("replay", "--home", str(home), "--patch", str(typo), clean)
    loose = run_cli(*args)
    assert loose.returncode == 0 and "loop-brakes" in loose.stderr  # warned, and skipped
    assert run_cli(*args, "--strict").returncode == 2


# --------------------------------------------------------------------------------------------
# Progress


def test_no_progress_when_stderr_is_not_a_terminal(run_cli: RunCli) -> None:
    result = run_cli("replay")
    assert "\r" not in result.stderr and "replaying 1/" not in result.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a pty")
def test_progress_on_a_terminal(cli_env: dict[str, str], tmp_path: Path) -> None:
    import pty

    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_loop_brake", "replay", "--json"],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=cli_env,
            cwd=tmp_path,
        )
        os.close(terminal)
        captured = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                break
            if not chunk:
                break
            captured += chunk
        assert process.stdout is not None
        out = process.stdout.read()
        assert process.wait(timeout=120) == 0
    finally:
        os.close(controller)
    assert b"replaying 1/5 " in captured
    assert b"\r\x1b[K" in captured  # the progress line is cleared again
    assert json.loads(out)["totals"]["sessions"] == 6  # stdout stays clean JSON


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a pty")
def test_on_a_terminal_long_names_are_cut_to_their_column(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    import pty

    session = "support-agent-" + "0123456789" * 6
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"tool": "t", "session": session}) + "\n")
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_loop_brake", "replay", "--max-repeats=3", str(path)],
            stdout=terminal,
            stderr=subprocess.DEVNULL,
            env=cli_env,
            cwd=tmp_path,
        )
        os.close(terminal)
        captured = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                break
            if not chunk:
                break
            captured += chunk
        assert process.wait(timeout=120) == 0
    finally:
        os.close(controller)
    shown = captured.decode()
    assert session not in shown
    [line] = [line for line in shown.splitlines() if line.startswith("  support-")]
    head, tail = line.split()[0].split("\u2026")  # cut in the middle: both ends readable
    assert session.startswith(head) and session.endswith(tail) and len(head) > 10


# --------------------------------------------------------------------------------------------
# Streams and odd paths a user hands over


@pytest.mark.skipif(not os.path.exists("/dev/stdin"), reason="needs /dev/stdin")
def test_json_lines_piped_in_replay_like_a_file(run_cli: RunCli) -> None:
    # `cat calls.jsonl | dsh-loop-brake replay /dev/stdin`, or `replay <(zcat log.jsonl.gz)`:
    # a pipe has no suffix and cannot be rewound, and is still a transcript.
    lines = [{"tool": "search", "args": {"q": "weather"}, "session": "s"}] * 4
    piped = "".join(json.dumps(line) + "\n" for line in lines)
    result = run_cli("replay", "--json", "/dev/stdin", stdin=piped)
    report = report_of(result)
    assert [(s["session"], s["calls"], s["denied"]) for s in report["sessions"]] == [("s", 4, 2)]


@pytest.mark.parametrize(
    ("name", "session", "calls"),
    [
        ("calls.jsonl", "s1", 3),
        ("openai_chat_completions.jsonl", "<stdin>", 5),
        ("tau_bench_results.json", "12", 5),
        ("claude_code/-home-lee-proj/7c9e6679-7425-40de-944b-e07fc1f90ae7.jsonl", None, 8),
    ],
)
def test_a_dash_reads_standard_input_in_its_own_format(
    run_cli: RunCli, name: str, session: str | None, calls: int
) -> None:
    piped = (FIXTURES / name).read_text(encoding="utf-8")
    result = run_cli("replay", "--json", "-", "-", stdin=piped)  # named twice: read once
    report = report_of(result)
    assert {s["source"] for s in report["sessions"]} == {"<stdin>"}
    if session is not None:
        first = report["sessions"][0]
        assert (first["session"], first["calls"]) == (session, calls)
    else:
        assert sum(s["calls"] for s in report["sessions"]) == calls


def test_a_dash_among_files(run_cli: RunCli) -> None:
    piped = (FIXTURES / "calls.jsonl").read_text(encoding="utf-8")
    result = run_cli(
        "replay", "--json", str(FIXTURES / "anthropic_conversation.json"), "-", stdin=piped
    )
    sources = [Path(s["source"]).name for s in report_of(result)["sessions"]]
    assert sources == ["anthropic_conversation.json", "<stdin>", "<stdin>", "<stdin>"]
    assert "<stdin>:4: not JSON" in result.stderr  # its bad lines are named after it


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_in_a_directory_is_not_waited_on(run_cli: RunCli, tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    os.mkfifo(directory / "live.jsonl")  # nobody writes it: opening it would block for good
    shutil.copy(FIXTURES / "calls.jsonl", directory / "calls.jsonl")
    report = report_of(run_cli("replay", "--json", str(directory)))
    assert {Path(s["source"]).name for s in report["sessions"]} == {"calls.jsonl"}


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_path_is_a_usage_error_not_the_current_directory(
    run_cli: RunCli, tmp_path: Path, path: str
) -> None:
    # `replay "$LOG_DIR"` with the variable unset must not replay whatever is in the cwd.
    shutil.copy(FIXTURES / "calls.jsonl", tmp_path / "stray.jsonl")
    result = run_cli("replay", path)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr
    # an argparse usage error, like an empty --home: one line
    assert "argument PATH: a PATH is empty" in result.stderr
    assert len(result.stderr.splitlines()) == 1
