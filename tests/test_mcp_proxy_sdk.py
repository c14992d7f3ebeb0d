"""mcp-proxy in front of a real MCP server (the ``mcp`` SDK's MCPServer), driven by the SDK's
real stdio client: the body of a looping call runs maxRepeats - 1 times and the client is handed
the denial as a failed tool result; everything else passes as it would without the proxy.

Both protocol eras the SDK speaks are driven: the ``initialize`` handshake (2025-11-25, with
server-to-client requests) and ``server/discover`` (2026-07-28, per-request metadata, results
with ``resultType``, multi round-trip requests).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp_proxy_support import (
    HANG_GUARD_SECONDS,
    RawProxy,
    counting_server,
    proxy_argv,
    proxy_env,
    runs_of,
)

ERAS = ("2025-11-25", "2026-07-28")
"""The protocol version each era's test negotiates (handshake, then discover)."""

DENIED = 'loop brake: tool "search" called {count} times in a row with identical arguments'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    directory = tmp_path / "dsh-home"
    directory.mkdir()
    return directory


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs.txt"


@pytest.fixture
def errlog(tmp_path: Path) -> TextIO:
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as stream:
        yield stream  # type: ignore[misc]


def parameters(argv: list[str], home: Path) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=proxy_env(home))


def proxied(
    home: Path, runs: Path, *options: str, pidfile: Path | None = None
) -> StdioServerParameters:
    return parameters(proxy_argv(*options, server=counting_server(runs, pidfile)), home)


def direct(home: Path, runs: Path) -> StdioServerParameters:
    return parameters(counting_server(runs), home)


@asynccontextmanager
async def session(
    server: StdioServerParameters, era: str, errlog: TextIO, **callbacks: Any
) -> AsyncIterator[ClientSession]:
    """The SDK's stdio client and ClientSession, connected in ``era``."""
    async with (
        stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write, **callbacks) as client,
    ):
        if era == "2026-07-28":
            await client.discover()
        else:
            await client.initialize()
        assert client.protocol_version == era
        yield client


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(HANG_GUARD_SECONDS):
            await test()

    anyio.run(guarded)


def text_of(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


# --- the brake --------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_a_looping_call_runs_max_repeats_minus_one_times_and_the_client_gets_the_denial(
    era: str, home: Path, runs: Path, errlog: TextIO
) -> None:
    results: list[types.CallToolResult] = []

    async def test() -> None:
        async with session(proxied(home, runs, "--max-repeats", "3"), era, errlog) as client:
            for _ in range(5):
                results.append(await client.call_tool("search", {"q": "weather"}))

    run(test)
    assert runs_of(runs) == ['search {"q": "weather"}'] * 2
    assert [result.is_error for result in results] == [False, False, True, True, True]
    assert text_of(results[0]) == "results for weather"
    for count, result in zip((3, 4, 5), results[2:], strict=True):
        message = text_of(result)
        assert message.startswith(DENIED.format(count=count))
        assert "limit 3" in message and "weather" not in message
        assert result.result_type == "complete"  # from 2026-07-28 the result must say so


@pytest.mark.parametrize("era", ERAS)
def test_other_tools_and_other_arguments_pass(
    era: str, home: Path, runs: Path, errlog: TextIO
) -> None:
    async def test() -> None:
        async with session(proxied(home, runs, "--max-repeats", "2"), era, errlog) as client:
            assert not (await client.call_tool("search", {"q": "a"})).is_error
            assert (await client.call_tool("search", {"q": "a"})).is_error
            assert not (await client.call_tool("search", {"q": "b"})).is_error  # other arguments
            assert not (await client.call_tool("slow", {"steps": 1})).is_error  # another tool
            assert not (await client.call_tool("search", {"q": "b"})).is_error  # streak broken

    run(test)
    assert runs_of(runs) == [
        'search {"q": "a"}',
        'search {"q": "b"}',
        'slow {"steps": 1}',
        'search {"q": "b"}',
    ]


# --- transparency -----------------------------------------------------------------------------


def test_tool_lists_progress_and_log_messages_arrive_as_without_the_proxy(
    home: Path, runs: Path, errlog: TextIO
) -> None:
    seen: dict[str, Any] = {}

    async def observe(server: StdioServerParameters, key: str) -> None:
        progress: list[tuple[float, float | None, str | None]] = []
        logs: list[Any] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params.model_dump())

        async with session(server, "2025-11-25", errlog, logging_callback=on_log) as client:
            listed = await client.list_tools()
            result = await client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
        seen[key] = (listed.model_dump(), result.model_dump(), progress, logs)

    async def test() -> None:
        await observe(direct(home, runs), "direct")
        await observe(proxied(home, runs), "proxied")

    run(test)
    assert seen["proxied"] == seen["direct"]
    listed, _, progress, logs = seen["proxied"]
    assert {tool["name"] for tool in listed["tools"]} == {"search", "slow", "confirm", "die"}
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [log["data"] for log in logs] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


def test_a_server_to_client_request_passes_both_ways(
    home: Path, runs: Path, errlog: TextIO
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def test() -> None:
        server = proxied(home, runs, "--max-repeats", "3")
        async with session(server, "2025-11-25", errlog, elicitation_callback=elicit) as client:
            result = await client.call_tool("confirm", {"q": "deploy"})
            assert text_of(result) == "deploy: confirmed True"

    run(test)
    assert asked == ["go ahead with deploy?"]  # elicitation/create reached the client ...
    assert runs_of(runs) == ['confirm {"q": "deploy"}']  # ... and its answer the server


def test_a_multi_round_trip_retry_continues_its_call_and_is_not_counted_again(
    home: Path, runs: Path, errlog: TextIO
) -> None:
    asked: list[str] = []
    results: list[types.CallToolResult] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def test() -> None:
        # The SDK's own Client drives the 2026-07-28 loop: tools/call, input_required, the
        # elicitation answered, then the same call again with inputResponses and requestState.
        server = proxied(home, runs, "--max-repeats", "2")
        async with Client(server, elicitation_callback=elicit) as client:
            assert client.session.protocol_version == "2026-07-28"
            for _ in range(3):
                results.append(await client.call_tool("confirm", {"q": "deploy"}))

    run(test)
    # Counted per call, not per round trip: had the retry counted, the first call's body would
    # never have run (its retry would have been the second identical call).
    assert runs_of(runs) == ['confirm {"q": "deploy"}']
    assert asked == ["go ahead with deploy?"]
    assert [result.is_error for result in results] == [False, True, True]
    assert text_of(results[0]) == "deploy: confirmed True"
    assert text_of(results[1]).startswith(
        'loop brake: tool "confirm" called 2 times in a row with identical arguments'
    )


# --- configuration ----------------------------------------------------------------------------


def write_profile(home: Path, name: str, patch: str) -> None:
    directory = home / "profiles" / name
    directory.mkdir(parents=True)
    (directory / "profile.yml").write_text("bundles: [dsh-loop-brake]\n", encoding="utf-8")
    (directory / "cordis.patch.yml").write_text(patch, encoding="utf-8")


PROFILE = """\
- id: loop-brake
  config:
    maxRepeats: 2
- insert:
    - id: circuit-breaker
      name: dsh-circuit-breaker
      config:
        maxCallsPerAgent: 3
"""


def test_the_profiles_loop_brake_and_circuit_breaker_rows_are_honoured(
    home: Path, runs: Path, errlog: TextIO
) -> None:
    write_profile(home, "tight", PROFILE)
    results: list[types.CallToolResult] = []

    async def test() -> None:
        server = proxied(home, runs, "--profile", "tight")
        async with session(server, "2026-07-28", errlog) as client:
            for q in ("a", "a", "b", "c", "d"):
                results.append(await client.call_tool("search", {"q": q}))

    run(test)
    assert runs_of(runs) == ['search {"q": "a"}', 'search {"q": "b"}', 'search {"q": "c"}']
    assert [result.is_error for result in results] == [False, True, False, False, True]
    assert text_of(results[1]).startswith(DENIED.format(count=2))  # maxRepeats: 2
    assert "search" in text_of(results[4]) and "loop brake" not in text_of(results[4])  # the cap


def test_max_repeats_on_the_command_line_overrides_the_profile(
    home: Path, runs: Path, errlog: TextIO
) -> None:
    write_profile(home, "tight", PROFILE)

    async def test() -> None:
        server = proxied(home, runs, "--profile", "tight", "--max-repeats", "3")
        async with session(server, "2025-11-25", errlog) as client:
            assert not (await client.call_tool("search", {"q": "a"})).is_error
            assert not (await client.call_tool("search", {"q": "a"})).is_error
            assert (await client.call_tool("search", {"q": "a"})).is_error

    run(test)
    assert len(runs_of(runs)) == 2


def test_home_selects_the_dsh_home(tmp_path: Path, runs: Path, errlog: TextIO) -> None:
    other = tmp_path / "other-home"
    write_profile(other, "default", PROFILE)

    async def test() -> None:
        elsewhere = tmp_path / "unused-home"
        elsewhere.mkdir()
        server = proxied(elsewhere, runs, "--home", str(other))
        async with session(server, "2025-11-25", errlog) as client:
            assert not (await client.call_tool("search", {"q": "a"})).is_error
            assert (await client.call_tool("search", {"q": "a"})).is_error  # maxRepeats: 2

    run(test)


# --- lifecycle --------------------------------------------------------------------------------


def with_status(argv: list[str], status: Path) -> list[str]:
    """``argv`` run by a shell that writes its exit status to ``status`` when it ends."""
    return ["sh", "-c", f'"$@"; echo $? > {status}', "sh", *argv]


def test_the_server_dying_mid_session_ends_the_proxy_with_its_status(
    tmp_path: Path, home: Path, runs: Path, errlog: TextIO
) -> None:
    status = tmp_path / "status"
    argv = with_status(proxy_argv(server=counting_server(runs)), status)

    async def test() -> None:
        async with session(parameters(argv, home), "2025-11-25", errlog) as client:
            assert not (await client.call_tool("search", {"q": "a"})).is_error
            with pytest.raises(Exception):  # noqa: B017 - the connection closing, as the SDK says it
                await client.call_tool("die", {"code": 5})

    run(test)
    assert status.read_text().strip() == "5"
    assert runs_of(runs) == ['search {"q": "a"}', 'die {"code": 5}']


def test_a_client_that_closes_stops_the_server(
    tmp_path: Path, home: Path, runs: Path, errlog: TextIO
) -> None:
    pidfile = tmp_path / "server.pid"
    status = tmp_path / "status"
    argv = with_status(proxy_argv(server=counting_server(runs, pidfile)), status)

    async def test() -> None:
        async with session(parameters(argv, home), "2025-11-25", errlog) as client:
            assert not (await client.call_tool("search", {"q": "a"})).is_error

    run(test)  # leaving the client closes the proxy's stdin
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while process_exists(pid):  # the server is the proxy's child, in a session of its own:
        assert time.monotonic() < deadline, "the server outlived its client"  # only the
        time.sleep(0.05)  # proxy can have stopped it
    assert status.read_text().strip() == "0"  # it exited of itself once its stdin closed


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- secrets ----------------------------------------------------------------------------------

CANARY = "sk-canary-7f3a9c1e-do-not-print"


def test_a_secret_in_the_arguments_never_reaches_stderr(
    tmp_path: Path, home: Path, runs: Path, errlog: TextIO
) -> None:
    write_profile(home, "default", PROFILE)
    texts: list[str] = []

    async def test() -> None:
        async with session(proxied(home, runs), "2025-11-25", errlog) as client:
            for arguments in ({"q": CANARY}, {"q": CANARY}, {"q": CANARY + "2"}, {"q": "x"}):
                texts.append(text_of(await client.call_tool("search", arguments)))
            texts.append(text_of(await client.call_tool("search", {"q": CANARY + "3"})))

    run(test)
    errlog.seek(0)
    stderr = errlog.read()
    assert stderr.count("dsh-loop-brake mcp-proxy: denied a tools/call: ") == 2  # both brakes
    assert CANARY not in stderr
    assert not any(CANARY in text for text in texts if "results for" not in text)


# --- the messages themselves ------------------------------------------------------------------


def test_a_denial_keeps_the_request_id_and_says_what_the_version_needs(
    home: Path, runs: Path
) -> None:
    """Byte level, against the real server: the id as the client wrote it, ``resultType`` only
    from 2026-07-28 on (a 2025 client is not handed a field its schema does not have)."""
    proxy = RawProxy(
        proxy_argv("--max-repeats", "1", server=counting_server(runs)), proxy_env(home), home
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    proxy.send(json.dumps(initialize).encode() + b"\n")
    [answer] = proxy.wait_for_lines(1)
    assert json.loads(answer)["result"]["protocolVersion"] == "2025-06-18"
    proxy.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proxy.send(
        b'{"jsonrpc":"2.0","id":"call \\u2603 1","method":"tools/call",'
        b'"params":{"name":"search","arguments":{"q":"a"}}}\n'
    )
    modern = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    proxy.send(
        b'{"jsonrpc":"2.0","id":123456789012345678901,"method":"tools/call","params":'
        + json.dumps({"name": "search", "arguments": {"q": "a"}, **modern}).encode()
        + b"}\n"
    )
    lines = proxy.wait_for_lines(3)
    assert proxy.finish() == 0
    legacy, new = (json.loads(line) for line in lines[1:])
    assert legacy["id"] == "call \u2603 1" and new["id"] == 123456789012345678901
    assert set(legacy) == {"jsonrpc", "id", "result"}
    assert legacy["result"].keys() == {"content", "isError"}
    assert legacy["result"]["isError"] is True
    assert new["result"].keys() == {"content", "isError", "resultType"}
    assert new["result"]["resultType"] == "complete" and new["result"]["isError"] is True
    [block] = legacy["result"]["content"]
    assert block["type"] == "text"
    assert block["text"].startswith(DENIED.format(count=1)) and "limit 1)" in block["text"]
    assert runs_of(runs) == []


def test_signals_reach_the_server(tmp_path: Path, home: Path, runs: Path) -> None:
    pidfile = tmp_path / "server.pid"
    proxy = RawProxy(proxy_argv(server=counting_server(runs, pidfile)), proxy_env(home), home)
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proxy.process.send_signal(signal.SIGTERM)
    assert proxy.wait() == 128 + signal.SIGTERM  # the server died of it; the proxy says so
    assert not process_exists(int(pidfile.read_text()))
