"""The replay runner: recorded calls through the real harness and plugin, and every report field
held against an independent model of the brake's counting."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_loop_brake import call_hash, hash_prefix
from dsh_loop_brake.harness import Row
from dsh_loop_brake.replay import (
    FirstDenial,
    ReaderError,
    RecordedCall,
    Replayer,
    Report,
    SessionReport,
    Transcript,
    open_transcript,
)
from dsh_loop_brake.replay.runner import PROGRESS_EVERY

FIXTURES = Path(__file__).parent / "fixtures" / "replay"
CLAUDE_SESSION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def row(max_repeats: int | None = None) -> Row:
    config = None if max_repeats is None else {"maxRepeats": max_repeats}
    return Row(id="loop-brake", name="dsh-loop-brake", config=config)


def replay(
    paths: Sequence[Path | Transcript], max_repeats: int | None = 3, sweep: Sequence[int] = ()
) -> Report:
    async def run(replayer: Replayer) -> None:
        for path in paths:
            transcript = path if isinstance(path, Transcript) else open_transcript(path)
            await replayer.replay(transcript)

    with Replayer(row(max_repeats), sweep) as replayer:
        asyncio.run(run(replayer))
        return replayer.report()


def jsonl(tmp_path: Path, name: str, calls: Sequence[tuple[str, str, Any]]) -> Path:
    """A jsonl transcript of (session, tool, args) calls."""
    path = tmp_path / name
    lines = (json.dumps({"session": s, "tool": t, "args": a}) + "\n" for s, t, a in calls)
    path.write_text("".join(lines))
    return path


def first(tool: str, args: Any, call: int, count: int) -> FirstDenial:
    return FirstDenial(call, tool, count, hash_prefix(call_hash(tool, args)))


# --------------------------------------------------------------------------------------------
# Every report field, on the fixtures


def test_openai_fixture_report() -> None:
    path = FIXTURES / "openai_parallel_tools.json"
    (session,) = replay([path]).sessions
    paris = {"city": "Paris", "unit": "celsius"}
    assert session == SessionReport(
        source=str(path),
        session="openai_parallel_tools.json",
        calls=9,
        distinct_calls=5,  # Paris (in 4 spellings), Lyon, time, the raw string, favourites
        longest_streak=3,
        denied=1,
        first_denial=first("get_weather", paris, call=6, count=3),
    )


def test_tau_bench_fixture_report_sessions_with_one_name_do_not_share_a_streak() -> None:
    path = FIXTURES / "tau_bench_results.json"
    sessions = replay([path]).sessions
    order = {"order_id": "#W2378156"}
    assert [
        (s.session, s.calls, s.distinct_calls, s.longest_streak, s.denied) for s in sessions
    ] == [
        ("12", 5, 2, 4, 2),
        # trial 1 of task 12 starts with the call trial 0 ended on: a new streak, not a fifth
        ("12", 3, 3, 1, 0),
        ("7", 0, 0, 0, 0),
        ("#4", 1, 1, 1, 0),
    ]
    assert sessions[0].first_denial == first("get_order_details", order, call=4, count=3)
    assert all(s.first_denial is None for s in sessions[1:])


def test_anthropic_fixture_report() -> None:
    (session,) = replay([FIXTURES / "anthropic_conversation.json"]).sessions
    assert (session.calls, session.distinct_calls, session.longest_streak, session.denied) == (
        6,
        4,
        3,
        1,
    )
    assert session.first_denial == first("read_file", {"path": "src/app.py"}, call=4, count=3)


def test_claude_code_fixture_report() -> None:
    directory = FIXTURES / "claude_code" / "-home-lee-proj"
    main_file = directory / f"{CLAUDE_SESSION}.jsonl"
    sub_file = directory / CLAUDE_SESSION / "subagents" / "agent-9f01.jsonl"
    report = replay([main_file, sub_file])
    summary = [
        (s.source, s.session, s.calls, s.distinct_calls, s.longest_streak, s.denied)
        for s in report.sessions
    ]
    assert summary == [
        (str(main_file), CLAUDE_SESSION, 5, 4, 1, 0),
        (str(main_file), f"{CLAUDE_SESSION}/5d2e", 3, 1, 3, 1),  # duplicate entry counted once
        (str(sub_file), f"{CLAUDE_SESSION}/9f01", 2, 2, 1, 0),
    ]
    assert report.sessions[1].first_denial == first("Glob", {"pattern": "**/*.py"}, 3, 3)


def test_jsonl_fixture_report_and_totals() -> None:
    report = replay([FIXTURES / "calls.jsonl"])
    assert [(s.session, s.calls, s.longest_streak, s.denied) for s in report.sessions] == [
        ("s1", 3, 3, 1),
        ("s2", 2, 2, 0),  # interleaved with s1 in the file, counted apart
        ("calls.jsonl", 1, 1, 0),
    ]
    assert report.as_dict()["totals"] == {
        "sessions": 3,
        "calls": 6,
        "denied": 1,
        "sessionsWithDenials": 1,
    }


def test_json_report_keys_are_the_spec_s_in_its_order() -> None:
    document = replay([FIXTURES / "calls.jsonl"], sweep=[2, 3]).as_dict()
    assert list(document) == ["maxRepeats", "maxRepeatsSource", "sessions", "totals", "sweep"]
    assert document["maxRepeatsSource"] is None  # a Replayer does not know where it came from
    assert list(document["sessions"][0]) == [
        "source",
        "session",
        "calls",
        "distinctCalls",
        "longestStreak",
        "denied",
        "firstDenial",
    ]
    assert list(document["sessions"][0]["firstDenial"]) == ["call", "tool", "count", "hashPrefix"]
    assert list(document["totals"]) == ["sessions", "calls", "denied", "sessionsWithDenials"]
    assert list(document["sweep"][0]) == ["maxRepeats", "denied", "sessionsWithDenials"]
    assert "sweep" not in replay([FIXTURES / "calls.jsonl"]).as_dict()


# --------------------------------------------------------------------------------------------
# Counting semantics, through the real harness


def test_denied_counts_every_call_an_agent_ignoring_denials_would_make(tmp_path: Path) -> None:
    a, b = {"q": "weather"}, {"q": "news"}
    calls = [("s", "search", a)] * 5 + [("s", "search", b)] + [("s", "search", a)] * 2
    (session,) = replay([jsonl(tmp_path, "t.jsonl", calls)]).sessions
    # A x5: the 3rd, 4th and 5th are denied (a denied call stays in the streak); B resets
    assert (session.calls, session.denied, session.longest_streak) == (8, 3, 5)
    assert session.first_denial == first("search", a, call=3, count=3)


def test_alternating_calls_are_never_denied(tmp_path: Path) -> None:
    a, b = {"service": "api"}, {"seconds": 30}
    calls = [("s", "status", a), ("s", "wait", b)] * 20
    (session,) = replay([jsonl(tmp_path, "t.jsonl", calls)], max_repeats=2).sessions
    assert (session.calls, session.distinct_calls, session.longest_streak, session.denied) == (
        40,
        2,
        1,
        0,
    )


def test_max_repeats_one_denies_every_call(tmp_path: Path) -> None:
    calls = [("s", "a", {}), ("s", "b", {}), ("s", "b", {})]
    (session,) = replay([jsonl(tmp_path, "t.jsonl", calls)], max_repeats=1).sessions
    assert session.denied == 3
    assert session.first_denial == first("a", {}, call=1, count=1)


def test_sessions_of_different_files_never_share_a_streak(tmp_path: Path) -> None:
    # both files' sessions are "#1" (no ids) and both jsonl sessions are "s1"
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    tool_call = {"function": {"name": "search", "arguments": '{"q": "x"}'}}
    one.write_text(
        json.dumps([{"messages": [{"role": "assistant", "tool_calls": [tool_call] * 2}]}])
    )
    two.write_text(json.dumps([{"messages": [{"role": "assistant", "tool_calls": [tool_call]}]}]))
    three = jsonl(tmp_path, "three.jsonl", [("s1", "search", {"q": "x"})] * 2)
    four = jsonl(tmp_path, "four.jsonl", [("s1", "search", {"q": "x"})])
    report = replay([one, two, three, four])
    assert [s.session for s in report.sessions] == ["#1", "#1", "s1", "s1"]
    assert report.totals.denied == 0


def test_the_brake_is_the_plugin_s_and_row_config_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "7")
    with Replayer(row(None)) as replayer:
        assert replayer.max_repeats == 7  # no maxRepeats in the row: the environment
    with Replayer(row(4)) as replayer:
        assert replayer.max_repeats == 4  # the row's value wins over the environment


def test_an_invalid_row_is_refused_when_the_replayer_is_made() -> None:
    from dsh_loop_brake import LoopBrakeConfigError

    with pytest.raises(LoopBrakeConfigError, match="maxRepeats must be an integer"):
        Replayer(Row(id="loop-brake", name="dsh-loop-brake", config={"maxRepeats": 0}))
    with pytest.raises(LoopBrakeConfigError, match="maxRepeat"):
        Replayer(Row(id="loop-brake", name="dsh-loop-brake", config={"maxRepeat": 5}))


def test_a_file_that_fails_half_way_is_left_out(tmp_path: Path) -> None:
    def failing() -> Iterator[RecordedCall]:
        yield RecordedCall(0, "search", {"q": "x"})
        yield RecordedCall(0, "search", {"q": "x"})
        raise ReaderError("broken.jsonl", "cannot read the file (input/output error)")

    broken = Transcript("broken.jsonl", "jsonl", ["s1"], failing())
    good = jsonl(tmp_path, "good.jsonl", [("s1", "search", {"q": "x"})])

    async def run(replayer: Replayer) -> None:
        with pytest.raises(ReaderError):
            await replayer.replay(broken)
        await replayer.replay(open_transcript(good))

    with Replayer(row(2)) as replayer:
        asyncio.run(run(replayer))
        report = replayer.report()
    # the broken file's two calls neither appear nor leave a streak behind
    assert [(s.source, s.calls, s.denied) for s in report.sessions] == [(str(good), 1, 0)]


def test_progress_is_reported_every_so_many_calls(tmp_path: Path) -> None:
    path = jsonl(tmp_path, "t.jsonl", [("s", "t", {"n": i}) for i in range(PROGRESS_EVERY * 2 + 5)])
    seen: list[int] = []

    async def run(replayer: Replayer) -> None:
        await replayer.replay(open_transcript(path))

    with Replayer(row(3), on_progress=seen.append) as replayer:
        asyncio.run(run(replayer))
        assert replayer.calls == PROGRESS_EVERY * 2 + 5
    assert seen == [PROGRESS_EVERY, PROGRESS_EVERY * 2]


# --------------------------------------------------------------------------------------------
# Against an independent model of the brake


def model(calls: Sequence[tuple[str, str, Any]], max_repeats: int) -> list[dict[str, Any]]:
    """What the report must say, computed directly from the spec's counting rules."""
    sessions: dict[str, dict[str, Any]] = {}
    for name, tool, args in calls:
        s = sessions.setdefault(
            name,
            {
                "calls": 0,
                "hashes": set(),
                "last": None,
                "count": 0,
                "longest": 0,
                "denied": 0,
                "first": None,
            },
        )
        h = call_hash(tool, args)
        s["calls"] += 1
        s["hashes"].add(h)
        s["count"] = s["count"] + 1 if s["last"] == h else 1
        s["last"] = h
        s["longest"] = max(s["longest"], s["count"])
        if s["count"] >= max_repeats:
            s["denied"] += 1
            if s["first"] is None:
                s["first"] = {
                    "call": s["calls"],
                    "tool": tool,
                    "count": s["count"],
                    "hashPrefix": h[:12],
                }
    return [
        {
            "session": name,
            "calls": s["calls"],
            "distinctCalls": len(s["hashes"]),
            "longestStreak": s["longest"],
            "denied": s["denied"],
            "firstDenial": s["first"],
        }
        for name, s in sessions.items()
    ]


_CALL = st.tuples(
    st.sampled_from(["s1", "s2", "s3"]),
    st.sampled_from(["search", "read"]),
    st.sampled_from([{"q": 1}, {"q": 2}, {"q": "1"}, {}, [1], "raw"]),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(_CALL, min_size=1, max_size=40), max_repeats=st.integers(1, 5))
def test_report_matches_the_model(
    tmp_path: Path, calls: list[tuple[str, str, Any]], max_repeats: int
) -> None:
    path = jsonl(tmp_path, "t.jsonl", calls)
    report = replay([path], max_repeats=max_repeats).as_dict()
    got = [{k: v for k, v in s.items() if k != "source"} for s in report["sessions"]]
    assert got == model(calls, max_repeats)
    assert report["maxRepeats"] == max_repeats


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(_CALL, min_size=1, max_size=40), low=st.integers(1, 4), width=st.integers(0, 4)
)
def test_each_sweep_row_equals_a_replay_at_that_value(
    tmp_path: Path, calls: list[tuple[str, str, Any]], low: int, width: int
) -> None:
    path = jsonl(tmp_path, "t.jsonl", calls)
    values = range(low, low + width + 1)
    swept = replay([path], max_repeats=3, sweep=values)
    assert swept.sweep is not None
    assert [r.max_repeats for r in swept.sweep] == list(values)
    for sweep_row in swept.sweep:
        alone = replay([path], max_repeats=sweep_row.max_repeats).totals
        assert (sweep_row.denied, sweep_row.sessions_with_denials) == (
            alone.denied,
            alone.sessions_with_denials,
        )
    # and the report's own sessions are those of a plain replay at its own setting
    assert swept.sessions == replay([path], max_repeats=3).sessions
