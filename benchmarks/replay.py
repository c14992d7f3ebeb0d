"""Replay throughput and memory: calls per second side by side with the floor of parsing the files.

    python benchmarks/replay.py [--calls N] [--repeats N] [--quick] [--big-mb MB]

Generates one corpus of N recorded tool calls (default 100,000) and writes it three times, once
per transcript format, as agents' tools write them:

* ``jsonl``: one call per line (``{"session", "tool", "args", "call_id"}``), 20 files with
  interleaved sessions: the smallest lines a call can have, so the hardest case for the ratio;
* ``claude-code``: Claude Code session logs (an assistant entry with the ``tool_use`` and a user
  entry with its ``tool_result`` per call, with the metadata Claude Code writes), one file per
  session;
* ``openai``: ``.json`` files, each a tau-bench-style list of sessions whose assistant messages
  carry ``tool_calls`` (arguments as JSON strings) followed by the tool results.

For each format it times, file by file and interleaved (so a shared machine's slow and fast spells
fall on all three alike and the ratios compare like with like):

* the floor: merely parsing the same files with the standard library -- ``json.loads`` of every
  line of a JSON Lines file (read as text), ``json.loads`` of a whole ``.json`` file;
* the readers alone (``open_transcript`` over every file: parsing plus finding the calls);
* the full replay: every call through the harness's tool registry (``ctx.tools.execute``) with the
  loop-brake plugin applied, stub tools, and the report's bookkeeping (``Replayer``, one event
  loop for the whole run).

Times are CPU time (user + system) of this process, medians over the repeats; target (issue 5):
replay <= 4x the parse floor. It also breaks one jsonl call's cost down by stage (parse, readers,
the brake alone, the harness without and with the plugin, the whole replay), so the ratio can be
traced to where the time goes. Memory: the peak of Python allocations (tracemalloc) during one
replay of each corpus, the bytes a session holds per distinct call, and the peak resident size of
``dsh-loop-brake replay`` processes on JSON Lines files of growing size, a fleet's calls and one
Claude Code session log -- flat, because a JSON Lines file is read line by line, a session keeps
one streak slot and its distinct-call set, and a Claude Code session only its recent
``tool_use`` ids. ``--big-mb 1024`` adds a 1 GB file to both series (takes minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_loop_brake import LoopBrake, LoopBrakeError
from dsh_loop_brake.harness import Agent, Harness, Row, ToolDefinition, ToolExecution, ToolResult
from dsh_loop_brake.replay import Replayer, open_transcript

REPO_ROOT = Path(__file__).resolve().parent.parent
FILES = 20
ROW = Row(id="loop-brake", name="dsh-loop-brake", config={"maxRepeats": 3})

# --------------------------------------------------------------------------------------------
# The corpus: sessions of realistic calls, a few of them stuck in a loop

_DIRS = ["src/api", "src/core", "src/db", "tests", "docs", "scripts", "src/ui/components"]
_WORDS = ["config", "session", "retry", "timeout", "parse", "cache", "user", "invoice", "token"]


def _call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    path = f"/home/dev/app/{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{rng.randrange(40)}.py"
    kind = rng.randrange(7)
    if kind == 0:
        return "Read", {"file_path": path, "offset": rng.randrange(0, 400, 20), "limit": 200}
    if kind == 1:
        pattern = f"def {rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
        return "Grep", {"pattern": pattern, "path": "src", "output_mode": "content", "-n": True}
    if kind == 2:
        test = f"tests/test_{rng.choice(_WORDS)}.py"
        return "Bash", {"command": f"pytest -q {test} -x", "description": "Run the tests"}
    if kind == 3:
        old = f"    return {rng.choice(_WORDS)}(value)"
        new = f"    return {rng.choice(_WORDS)}(value, strict=True)"
        return "Edit", {"file_path": path, "old_string": old, "new_string": new}
    if kind == 4:
        return "Glob", {"pattern": f"{rng.choice(_DIRS)}/**/*.py"}
    if kind == 5:
        query = f"python {rng.choice(_WORDS)} {rng.choice(_WORDS)} best practice"
        return "web_search", {"query": query, "num_results": 5}
    return "TodoWrite", {
        "todos": [
            {
                "content": f"check {rng.choice(_WORDS)}",
                "status": "pending",
                "id": str(rng.randrange(9)),
            }
        ]
    }


def corpus(calls: int, seed: int = 5) -> list[list[tuple[str, dict[str, Any]]]]:
    """Sessions of 40-400 calls summing to ``calls``; about one in twelve gets stuck for a while."""
    rng = random.Random(seed)
    sessions: list[list[tuple[str, dict[str, Any]]]] = []
    left = calls
    while left:
        size = min(left, rng.randrange(40, 400))
        session: list[tuple[str, dict[str, Any]]] = []
        while len(session) < size:
            call = _call(rng)
            repeat = rng.randrange(5, 30) if rng.random() < 0.01 else 1  # a loop
            session.extend([call] * min(repeat, size - len(session)))
        sessions.append(session)
        left -= size
    return sessions


def _result(rng: random.Random, tool: str) -> str:
    lines = rng.randrange(3, 30)
    return "\n".join(
        f"{n:>6}\t{rng.choice(_WORDS)} = {rng.choice(_WORDS)}({n})" for n in range(lines)
    )


def write_jsonl(sessions: list[list[tuple[str, Any]]], directory: Path) -> None:
    """The jsonl files: each holds a 20th of the sessions, their calls interleaved at random."""
    directory.mkdir(parents=True)
    rng = random.Random(1)
    serial = 0
    for number in range(FILES):
        group = sessions[number::FILES]
        pending = [(f"agent-{number:02d}-{i:03d}", iter(s)) for i, s in enumerate(group)]
        with open(directory / f"calls-{number:02d}.jsonl", "w", encoding="utf-8") as out:
            while pending:
                slot = rng.randrange(len(pending))
                name, stream = pending[slot]
                call = next(stream, None)
                if call is None:
                    pending.pop(slot)
                    continue
                serial += 1
                record = {"session": name, "tool": call[0], "args": call[1], "call_id": str(serial)}
                out.write(json.dumps(record) + "\n")


def write_claude_code(sessions: list[list[tuple[str, Any]]], directory: Path) -> None:
    directory.mkdir(parents=True)
    rng = random.Random(2)
    for number, session in enumerate(sessions):
        sid = f"{number:08x}-7425-40de-944b-e07fc1f90ae7"
        common = {
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/app",
            "sessionId": sid,
            "version": "1.0.98",
            "gitBranch": "main",
        }
        parent = None
        with open(directory / f"{sid}.jsonl", "w", encoding="utf-8") as out:
            for index, (tool, args) in enumerate(session):
                tool_id = f"toolu_01{number:06d}{index:06d}AbCdEfGh"
                uuid = f"{number:08x}-0000-4000-8000-{2 * index:012d}"
                entry = {
                    "parentUuid": parent,
                    **common,
                    "type": "assistant",
                    "message": {
                        "id": f"msg_01{number:06d}{index:06d}",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-20250514",
                        "content": [
                            {"type": "tool_use", "id": tool_id, "name": tool, "input": args}
                        ],
                        "stop_reason": "tool_use",
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": 4,
                            "cache_read_input_tokens": 20311,
                            "output_tokens": 112,
                            "service_tier": "standard",
                        },
                    },
                    "requestId": f"req_011C{number:06d}{index:06d}",
                    "uuid": uuid,
                    "timestamp": "2025-09-02T10:00:00.000Z",
                }
                result_uuid = f"{number:08x}-0000-4000-8000-{2 * index + 1:012d}"
                text = _result(rng, tool)
                result = {
                    "parentUuid": uuid,
                    **common,
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {"tool_use_id": tool_id, "type": "tool_result", "content": text}
                        ],
                    },
                    "uuid": result_uuid,
                    "timestamp": "2025-09-02T10:00:01.000Z",
                    "toolUseResult": {"stdout": text, "stderr": "", "interrupted": False},
                }
                parent = result_uuid
                out.write(json.dumps(entry, separators=(",", ":")) + "\n")
                out.write(json.dumps(result, separators=(",", ":")) + "\n")


def write_openai(sessions: list[list[tuple[str, Any]]], directory: Path) -> None:
    directory.mkdir(parents=True)
    rng = random.Random(3)
    for number in range(FILES):
        results = []
        for index, session in enumerate(sessions[number::FILES]):
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are a coding agent. Use the tools."},
                {"role": "user", "content": "Fix the failing test and explain the change."},
            ]
            for serial, (tool, args) in enumerate(session):
                call_id = f"call_{number:02d}{index:04d}{serial:05d}"
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": tool, "arguments": json.dumps(args)},
                            }
                        ],
                    }
                )
                messages.append(
                    {"role": "tool", "tool_call_id": call_id, "content": _result(rng, tool)}
                )
            results.append({"task_id": f"{number}-{index}", "reward": 1.0, "traj": messages})
        (directory / f"results-{number:02d}.json").write_text(json.dumps(results), "utf-8")


def write_corpus(sessions: list[list[tuple[str, Any]]], root: Path) -> dict[str, list[Path]]:
    write_jsonl(sessions, root / "jsonl")
    write_claude_code(sessions, root / "claude-code")
    write_openai(sessions, root / "openai")
    return {fmt: sorted((root / fmt).iterdir()) for fmt in ("jsonl", "claude-code", "openai")}


# --------------------------------------------------------------------------------------------
# What is timed


def parse_floor(files: list[Path]) -> int:
    """Merely parse the files with the standard library; returns the JSON values read."""
    values = 0
    loads = json.loads
    for path in files:
        if path.suffix == ".json":
            loads(path.read_bytes())
            values += 1
            continue
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                loads(line)
                values += 1
    return values


def read_only(files: list[Path]) -> int:
    """The readers alone: parse and find every call; returns the calls found."""
    calls = 0
    for path in files:
        for _ in open_transcript(path):
            calls += 1
    return calls


def replay(files: list[Path]) -> int:
    """The full replay through the harness; returns the calls the brake would deny."""

    async def run(replayer: Replayer) -> None:
        for path in files:
            await replayer.replay(open_transcript(path))

    with Replayer(ROW) as replayer:
        asyncio.run(run(replayer))
        return replayer.report().totals.denied


def timed(fn: Callable[[list[Path]], int], files: list[Path]) -> float:
    """CPU seconds (user + system) of one run: other jobs on a shared machine stay out of it."""
    gc.collect()
    start = time.process_time()
    fn(files)
    return time.process_time() - start


def side_by_side(files: list[Path]) -> tuple[float, float, float]:
    """CPU seconds of the floor, the readers and the full replay over ``files``, interleaved.

    The three are timed file by file, one after the other, so a shared machine's slow and fast
    spells fall on all three alike and the ratios compare like with like. The replay is one
    ``Replayer`` and one event loop for the whole run, as ``replay()`` has it; starting and
    stopping them is timed too.
    """
    gc.collect()
    floor = readers = full = 0.0
    clock = time.process_time
    start = clock()
    loop = asyncio.new_event_loop()
    replayer = Replayer(ROW)
    full += clock() - start
    try:
        for path in files:
            start = clock()
            parse_floor([path])
            floor += clock() - start
            start = clock()
            read_only([path])
            readers += clock() - start
            start = clock()
            loop.run_until_complete(replayer.replay(open_transcript(path)))
            full += clock() - start
        start = clock()
        replayer.report()
    finally:
        replayer.dispose()
        loop.close()
    full += clock() - start
    return floor, readers, full


def breakdown(files: list[Path], repeats: int) -> list[tuple[str, float]]:
    """Per-call CPU time of each stage of a replay, on the same calls (medians over repeats)."""
    calls = [call for path in files for call in open_transcript(path)]
    stubs = {tool for _, tool, _ in calls}

    sessions = [f"s{n}" for n in range(1 + max(call.session for call in calls))]

    def brake_only(_: list[Path]) -> int:
        brake = LoopBrake(3)
        check = brake.check
        for session, tool, arguments in calls:
            # Not contextlib.suppress: a context manager per call would be timed too.
            try:  # noqa: SIM105
                check(tool, arguments, session_id=sessions[session])
            except LoopBrakeError:
                pass
        return 0

    def harness_with(rows: list[Row]) -> Callable[[list[Path]], int]:
        def run(_: list[Path]) -> int:
            harness = Harness.from_rows(rows)
            for tool in stubs:
                harness.tools.register(ToolDefinition(tool, _stub))
            agents = [Agent(f"a{n}") for n in range(1 + max(c.session for c in calls))]

            async def drive() -> None:
                # As replay sends calls: into the registry the plugin patched; a denial is the
                # LoopBrakeError it raises.
                execute = harness.ctx.tools.execute
                for number, (session, tool, arguments) in enumerate(calls):
                    try:  # noqa: SIM105 - not contextlib.suppress: timed per call
                        await execute(ToolExecution(str(number), tool, arguments, agents[session]))
                    except LoopBrakeError:
                        pass

            asyncio.run(drive())
            harness.dispose()
            return 0

        return run

    stages: list[tuple[str, Callable[[list[Path]], int]]] = [
        ("parse floor (json.loads per line)", parse_floor),
        ("readers (open_transcript)", read_only),
        ("LoopBrake.check alone", brake_only),
        ("harness registry, no rows (lookup, stub)", harness_with([])),
        ("harness registry, loop-brake row applied", harness_with([ROW])),
        ("full replay (readers + harness + report)", replay),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in stages}
    for _ in range(repeats):
        for name, stage in stages:
            times[name].append(timed(stage, files))
    return [(name, statistics.median(times[name]) / len(calls)) for name, _ in stages]


_STUB_RESULT = ToolResult(content="")


def _stub(arguments: object, execution: object) -> ToolResult:
    return _STUB_RESULT


def peak_traced(fn: Callable[[list[Path]], int], files: list[Path]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn(files)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------------------------
# Resident memory of the command on growing JSON Lines files

_CHILD = """
import contextlib, os, resource, sys
sys.path.insert(0, {root!r})
from dsh_loop_brake.cli import main
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    code = main(["replay", "--json", "--max-repeats", "3", {path!r}])
peak = None
try:  # Linux: this process's own high-water mark (ru_maxrss would include the parent's, as
    # the kernel carries it across exec)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
except OSError:
    pass
if peak is None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak *= 1 if sys.platform == "darwin" else 1024
print(code, peak)
"""


def peak_rss_of_replay(path: Path) -> tuple[int, float]:
    """(peak resident bytes, seconds) of one ``replay --json`` process on ``path``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(root=str(REPO_ROOT), path=str(path))],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    code, peak = done.stdout.split()
    assert code in ("0", "1"), done.stderr
    return int(peak), time.perf_counter() - start


def fleet_log(path: Path, megabytes: int, seed: int = 9) -> int:
    """A JSON Lines log of a fleet of 200 agents running for a long time, ``megabytes`` big.

    Each agent works on its own project, so its calls repeat the way real agents' do (the same
    files are read and searched again); the file grows, the distinct calls per agent level off.
    """
    rng = random.Random(seed)
    pools = []
    for agent in range(200):
        local = random.Random(seed * 1000 + agent)
        pools.append([_call(local) for _ in range(2000)])
    limit = megabytes * 1024 * 1024
    written = calls = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < limit:
            chunk = []
            for _ in range(10_000):
                agent = rng.randrange(200)
                tool, args = rng.choice(pools[agent])
                calls += 1
                chunk.append(
                    json.dumps(
                        {
                            "session": f"agent-{agent:03d}",
                            "tool": tool,
                            "args": args,
                            "call_id": str(calls),
                        }
                    )
                )
            text = "\n".join(chunk) + "\n"
            out.write(text)
            written += len(text)
    return calls


def claude_code_log(path: Path, megabytes: int, seed: int = 11) -> int:
    """One Claude Code session log, ``megabytes`` big: a long-running agent and its subagents.

    As Claude Code writes it: an assistant entry with the ``tool_use`` and a user entry with its
    ``tool_result`` per call, with the metadata Claude Code writes; every ``tool_use`` id is new,
    about one assistant entry in fifty is logged twice in a row, and a subagent's calls are
    sidechain entries with their own ``agentId`` now and then. The agent's calls come from its
    own 2,000 distinct calls (it re-reads and re-searches the same things, and loops a little),
    so what grows with the file is the file, not the distinct calls.
    """
    rng = random.Random(seed)
    pool = [_call(random.Random(seed * 1000 + n)) for n in range(2000)]
    sid = "3f2a9c4e-7425-40de-944b-e07fc1f90ae7"
    common = {
        "userType": "external",
        "cwd": "/home/dev/app",
        "sessionId": sid,
        "version": "1.0.98",
        "gitBranch": "main",
    }
    limit = megabytes * 1024 * 1024
    written = calls = 0
    parent = None
    loop: list[tuple[str, Any]] = []
    with open(path, "w", encoding="utf-8") as out:
        while written < limit:
            chunk = []
            for _ in range(100):
                if not loop and rng.random() < 0.01:  # now and then the agent gets stuck
                    loop = [rng.choice(pool)] * rng.randrange(5, 30)
                tool, args = loop.pop() if loop else rng.choice(pool)
                calls += 1
                side = {"isSidechain": True, "agentId": f"a{calls // 5000 % 7:07x}"}
                where = side if calls % 5000 < 300 else {"isSidechain": False}
                tool_id = f"toolu_01{calls:012d}AbCdEfGhJk"
                uuid = f"{calls:08x}-0000-4000-8000-000000000000"
                entry = {
                    "parentUuid": parent,
                    **where,
                    **common,
                    "type": "assistant",
                    "message": {
                        "id": f"msg_01{calls:012d}",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-20250514",
                        "content": [
                            {"type": "tool_use", "id": tool_id, "name": tool, "input": args}
                        ],
                        "stop_reason": "tool_use",
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": 4,
                            "cache_read_input_tokens": 20311,
                            "output_tokens": 112,
                            "service_tier": "standard",
                        },
                    },
                    "requestId": f"req_011C{calls:012d}",
                    "uuid": uuid,
                    "timestamp": "2025-09-02T10:00:00.000Z",
                }
                text = _result(rng, tool)
                result_uuid = f"{calls:08x}-0000-4000-8000-000000000001"
                result = {
                    "parentUuid": uuid,
                    **where,
                    **common,
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {"tool_use_id": tool_id, "type": "tool_result", "content": text}
                        ],
                    },
                    "uuid": result_uuid,
                    "timestamp": "2025-09-02T10:00:01.000Z",
                    "toolUseResult": {"stdout": text, "stderr": "", "interrupted": False},
                }
                parent = result_uuid
                line = json.dumps(entry, separators=(",", ":"))
                chunk.append(line)
                if rng.random() < 0.02:
                    chunk.append(line)  # the same entry logged twice: one call
                chunk.append(json.dumps(result, separators=(",", ":")))
            text_block = "\n".join(chunk) + "\n"
            out.write(text_block)
            written += len(text_block)
    return calls


def distinct_call_bytes(root: Path, calls: int = 50_000) -> float:
    """Extra bytes one session holds per distinct call: all-distinct minus all-identical calls."""
    peaks = []
    for name, vary in (("same", False), ("distinct", True)):
        path = root / f"one-session-{name}.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            for n in range(calls):
                args = {"query": f"weather in city {n if vary else 0}"}
                out.write(json.dumps({"session": "s", "tool": "search", "args": args}) + "\n")
        peaks.append(peak_traced(replay, [path]))
        path.unlink()
    return (peaks[1] - peaks[0]) / calls


# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 calls, 2 repeats")
    parser.add_argument("--big-mb", type=int, default=0, help="add a JSONL file this big")
    options = parser.parse_args()
    if options.quick:
        options.calls, options.repeats = 20_000, 2

    print(f"Python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs")
    sessions = corpus(options.calls)
    with tempfile.TemporaryDirectory(prefix="dsh-replay-bench-") as temp:
        root = Path(temp)
        files = write_corpus(sessions, root)
        print(
            f"corpus: {options.calls:,} calls in {len(sessions)} sessions; "
            f"{options.repeats} repeats, medians\n"
        )
        header = (
            f"{'format':<12} {'files':>5} {'MB':>7} {'floor calls/s':>14} "
            f"{'readers':>10} {'replay calls/s':>15} {'replay/floor':>13} {'peak MB':>8}"
        )
        print(header)
        print("-" * len(header))
        for fmt, paths in files.items():
            found = read_only(paths)
            assert found == options.calls, (fmt, found)
            runs = [side_by_side(paths) for _ in range(options.repeats)]
            f, _, p = (statistics.median(stage) for stage in zip(*runs, strict=True))
            # Ratios are taken within each run (same spell of the machine), then the median.
            readers = statistics.median(r / floor for floor, r, _ in runs)
            ratio = statistics.median(full / floor for floor, _, full in runs)
            size = sum(path.stat().st_size for path in paths) / 1e6
            peak = peak_traced(replay, paths) / 1e6
            n = options.calls
            print(
                f"{fmt:<12} {len(paths):>5} {size:>7.1f} {n / f:>14,.0f} "
                f"{f'{readers:.2f}x':>10} {n / p:>15,.0f} {f'{ratio:.2f}x':>13} {peak:>8.1f}"
            )
        print(
            "\nreaders: the readers' time over the floor; replay/floor: the full replay's "
            "(each the median of the runs' own ratios)."
        )

        print("\nWhere a jsonl call's time goes (CPU per call, medians):")
        stages = breakdown(files["jsonl"], options.repeats)
        floor_per_call = stages[0][1]
        for name, per_call in stages:
            print(f"  {name:<44} {per_call * 1e6:7.2f} us  {per_call / floor_per_call:5.2f}x")

        held = distinct_call_bytes(root)
        print(f"\nA session holds about {held:.0f} bytes per distinct call (for distinctCalls).")

        sizes = [10, 100] + ([options.big_mb] if options.big_mb else [])
        for name, write in (
            ("JSON Lines file of calls (200 agents)", fleet_log),
            ("Claude Code session log", claude_code_log),
        ):
            print(f"\nPeak resident memory of `replay --json` on one growing {name}:")
            peaks = []
            for megabytes in sizes:
                path = root / f"growing-{megabytes}.jsonl"
                calls = write(path, megabytes)
                peak, seconds = peak_rss_of_replay(path)
                peaks.append(peak)
                print(
                    f"  {megabytes:>5} MB, {calls:>10,} calls: peak RSS {peak / 1e6:6.1f} MB "
                    f"({calls / seconds:,.0f} calls/s end to end)"
                )
                path.unlink()
            if len(peaks) > 2:
                print(
                    f"  peak at {sizes[-1]} MB / peak at 100 MB: {peaks[-1] / peaks[1]:.2f}x "
                    "(target: at most 1.25x)"
                )


if __name__ == "__main__":
    main()
