"""A canary secret in tool arguments never reaches an error, a log, an incident line or the CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeError, call_hash, decorate_tool
from dsh_loop_brake import circuit_breaker as circuit_breaker_plugin
from dsh_loop_brake import plugin as loop_brake_plugin
from dsh_loop_brake.harness import (
    Agent,
    Context,
    Fiber,
    Harness,
    Row,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
)

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]

CANARY = "sk-CANARY-7f3a9c"
SECRET_ARGS: dict[str, Any] = {
    "path": f"/home/ops/.aws/{CANARY}",
    "headers": {"Authorization": f"Bearer {CANARY}"},
    "query": f"password={CANARY}",
}
# The same secret inside values the core cannot identify (it fails open on them).
UNIDENTIFIABLE: list[Any] = [
    {"token": CANARY.encode()},
    {"tokens": {CANARY}},
    {1: CANARY},
    {"nested": [CANARY, object()]},
]


def assert_clean(*texts: object) -> None:
    for text in texts:
        assert CANARY not in str(text)
        assert CANARY.encode() not in (text if isinstance(text, bytes) else str(text).encode())


def every_form_of(error: BaseException) -> list[object]:
    return [
        str(error),
        repr(error),
        repr(error.args),
        repr(vars(error)),
        pickle.dumps(error),
        "".join(traceback.format_exception(error)),
    ]


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def test_the_loop_brake_error_never_carries_the_arguments(
    all_logs: pytest.LogCaptureFixture,
) -> None:
    brake = LoopBrake(max_repeats=2)
    brake.check("read_file", SECRET_ARGS)
    with pytest.raises(LoopBrakeError) as denied:
        brake.check("read_file", SECRET_ARGS)
    assert_clean(*every_form_of(denied.value), all_logs.text)
    assert denied.value.hash_prefix == call_hash("read_file", SECRET_ARGS)[:12]


@pytest.mark.parametrize("args", UNIDENTIFIABLE, ids=["bytes", "set", "int-key", "object"])
def test_failing_open_logs_the_type_never_the_value(
    all_logs: pytest.LogCaptureFixture, args: Any
) -> None:
    assert LoopBrake().check(f"tool-{id(args)}", args) == 0
    assert all_logs.records, "failing open must warn"
    assert_clean(all_logs.text, *(record.getMessage() for record in all_logs.records))


def test_braked_definitions_and_both_seams_keep_errors_clean(
    all_logs: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    loop_brake_plugin.apply(Context(registry, Fiber("row")), {"maxRepeats": 2})
    registry.register(ToolDefinition("http_get", lambda args, execution: "200 OK"))
    agent = Agent("agent-canary")
    asyncio.run(registry.execute(ToolExecution("c1", "http_get", dict(SECRET_ARGS), agent)))
    with pytest.raises(LoopBrakeError) as denied:
        asyncio.run(registry.execute(ToolExecution("c2", "http_get", dict(SECRET_ARGS), agent)))
    assert_clean(*every_form_of(denied.value), all_logs.text)

    direct = decorate_tool(ToolDefinition("http_get", lambda args, execution: None), LoopBrake(1))
    with pytest.raises(LoopBrakeError) as denied_directly:
        direct.execute(dict(SECRET_ARGS), None)
    assert_clean(*every_form_of(denied_directly.value))


def test_harness_results_for_denials_carry_no_arguments(all_logs: pytest.LogCaptureFixture) -> None:
    harness = Harness.from_rows(
        [
            Row("loop-brake", "dsh-loop-brake", {"maxRepeats": 2}),
            Row("circuit-breaker", "dsh-circuit-breaker", {"duplicateLimit": 3, "window": 10}),
        ]
    )
    harness.tools.register(ToolDefinition("http_get", lambda args, execution: "200 OK"))

    async def calls() -> list[Any]:
        results = []
        for n in range(4):
            # Four identical calls: the brake denies at 2, the breaker's window would at 3.
            execution = ToolExecution(f"c{n}", "http_get", dict(SECRET_ARGS), Agent("a"))
            results.append(await harness.execute(execution))
        return results

    results = asyncio.run(calls())
    harness.dispose()
    assert any(result.is_error for result in results)
    assert_clean(*(repr(result) for result in results), all_logs.text)


def test_incident_lines_carry_no_arguments(tmp_path: Path) -> None:
    incidents = tmp_path / "incidents.jsonl"
    registry = ToolRegistry()
    circuit_breaker_plugin.apply(
        Context(registry, Fiber("row")),
        {"duplicateLimit": 2, "maxCallsPerAgent": 3, "incidentLog": str(incidents)},
    )
    registry.register(ToolDefinition("http_get", lambda args, execution: "200 OK"))
    agent = Agent("agent-canary")

    async def calls() -> None:
        for n in range(6):
            args = dict(SECRET_ARGS, page=n // 2)  # repeats, then a cap
            await registry.execute(ToolExecution(f"c{n}", "http_get", args, agent))

    asyncio.run(calls())
    lines = incidents.read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["kind"] for line in lines} == {"duplicate", "cap"}
    assert_clean(*lines)


def write_transcripts(directory: Path) -> None:
    directory.mkdir()
    calls = [{"tool": "http_get", "args": SECRET_ARGS, "session": "s1"}] * 5
    (directory / "calls.jsonl").write_text(
        "\n".join(json.dumps(call) for call in calls) + "\n" + f"not json {CANARY}\n",
        encoding="utf-8",
    )
    openai = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "http_get", "arguments": json.dumps(SECRET_ARGS)},
                    }
                ],
            }
            for n in range(4)
        ]
    }
    (directory / "chat.json").write_text(json.dumps(openai), encoding="utf-8")
    (directory / "broken.json").write_text('{"messages": [' + f'"{CANARY}', encoding="utf-8")
    (directory / "garbage.jsonl").write_bytes(b"\xff\xfe" + CANARY.encode() + b"\x00\n")


@pytest.mark.parametrize(
    "options", [[], ["--json"], ["--sweep", "2..6"], ["--fail-on-denial", "--json"]]
)
def test_replay_output_carries_no_arguments(
    run_cli: RunCli, tmp_path: Path, options: list[str]
) -> None:
    transcripts = tmp_path / "transcripts"
    write_transcripts(transcripts)
    done = run_cli("replay", str(transcripts), *options)
    assert done.returncode in (0, 1), done.stderr
    if "--json" in options:
        assert json.loads(done.stdout)["totals"]["denied"] > 0
    else:
        assert "the brake would deny" in done.stdout
    assert "calls.jsonl:6" in done.stderr  # the bad line is reported by place, not by content
    assert_clean(done.stdout, done.stderr)
