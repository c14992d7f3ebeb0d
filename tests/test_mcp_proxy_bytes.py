"""mcp-proxy at the byte level: a fake "server" that echoes exactly what it read (and records
it) proves every line passes unchanged both ways, whatever it holds — junk, malformed JSON,
CRLF, invalid UTF-8, huge lines, batches — while a denied ``tools/call`` never reaches the
server and is answered with its own id. Then the process around it: exit statuses, signals,
servers that die or will not, and the mistakes a user can make on the command line.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.mcp_proxy_support import RawProxy, echo_server, proxy_argv, proxy_env

NOTE = "dsh-loop-brake mcp-proxy: "
LIMIT = 16 << 20  # the longest line judged as a message ...
TOO_LONG = LIMIT + (2 << 16)  # ... give or take the last read (64 KiB)


def call(request_id: object, q: str = "a", tool: str = "search") -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    message["params"] = {"name": tool, "arguments": {"q": q}}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def start(tmp_path: Path, *options: str, server: list[str] | None = None) -> RawProxy:
    home = tmp_path / "dsh-home"
    home.mkdir(exist_ok=True)
    argv = proxy_argv(*options, server=server or echo_server(tmp_path / "record"))
    return RawProxy(argv, proxy_env(home), tmp_path)


def recorded(tmp_path: Path) -> bytes:
    return (tmp_path / "record").read_bytes()


def denials(output: bytes) -> list[dict[str, object]]:
    """The proxy's own answers among the output lines (single or batched)."""
    found: list[dict[str, object]] = []
    for line in output.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and isinstance(item.get("result"), dict):
                found.append(item)
    return found


def without_denials(output: bytes) -> bytes:
    kept = [line for line in output.splitlines(keepends=True) if not denials(line)]
    return b"".join(kept)


# --- transparency -----------------------------------------------------------------------------


def test_every_line_passes_both_ways_byte_for_byte(tmp_path: Path) -> None:
    big = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
    payload = b"".join(
        [
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}\n',
            b'{ "jsonrpc" : "2.0", "method" : "notifications/initialized" }\r\n',
            b'{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}\n',  # an answer to the server
            b"not json at all\n",
            b'{"jsonrpc":"2.0","id":\n',
            b"\xff\xfe\x00 not UTF-8\n",
            b"\n",
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search",'
            b'"arguments":{"q":"\\u00e9\\ud83d\\ude00 caf\xc3\xa9 \\/","b":1.50,"a":[]}}}\n',
            b"[]\n",
            big + b"x" * (1 << 20) + b'"}}\n',  # 1 MiB, across many reads
            call(3, "y" * TOO_LONG),  # over the limit: passed on in pieces
            b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
        ]
    )
    proxy = start(tmp_path)
    proxy.send(payload)
    assert proxy.finish() == 0
    assert recorded(tmp_path) == payload  # what the server read
    assert proxy.output == payload  # what the client read back
    assert proxy.errors.splitlines() == [
        f"{NOTE}a message over 16 MiB was passed on without being judged"
        " (a tools/call that long is not braked)"
    ]


def test_a_denied_call_never_reaches_the_server_and_is_answered_with_its_id(
    tmp_path: Path,
) -> None:
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n'
    proxy = start(tmp_path, "--max-repeats", "2")
    proxy.send(call(1) + progress + call("two \u2603") + call(2**70) + call(4, "b"))
    assert proxy.finish() == 0
    assert recorded(tmp_path) == call(1) + progress + call(4, "b")
    assert without_denials(proxy.output) == recorded(tmp_path)
    answered = denials(proxy.output)
    assert [answer["id"] for answer in answered] == ["two \u2603", 2**70]
    for count, answer in zip((2, 3), answered, strict=True):
        result = answer["result"]
        assert isinstance(result, dict)
        assert result["isError"] is True and result["resultType"] == "complete"
        [block] = result["content"]
        assert block["type"] == "text"
        assert block["text"].startswith(f'loop brake: tool "search" called {count} times in a row')
    assert proxy.errors.count(f"{NOTE}denied a tools/call: loop brake: ") == 2


def test_a_batch_loses_only_its_denied_calls_which_are_answered_as_a_batch(
    tmp_path: Path,
) -> None:
    """JSON-RPC batches (protocol 2025-03-26): the other members keep their bytes."""
    notification = b'{ "jsonrpc": "2.0", "method": "notifications/roots/list_changed" }'
    other = call(3, "b").strip()
    proxy = start(tmp_path, "--max-repeats", "2")
    proxy.send(call(1))
    proxy.send(b"[" + call(2).strip() + b",  " + notification + b" ,\t" + other + b"]\n")
    proxy.send(b"[" + call(4, "b").strip() + b"," + call(5, "b").strip() + b"]\n")  # both denied
    assert proxy.finish() == 0
    assert recorded(tmp_path) == call(1) + b"[" + notification + b"," + other + b"]\n"
    answers = [json.loads(line) for line in proxy.output.splitlines() if line.startswith(b'[{"j')]
    assert [[answer["id"] for answer in batch] for batch in answers] == [[2], [4, 5]]


def test_a_call_too_long_to_judge_is_passed_on(tmp_path: Path) -> None:
    huge = call(1, "z" * TOO_LONG)
    proxy = start(tmp_path, "--max-repeats", "1")  # every call it judges is denied
    proxy.send(huge + huge + call(2))
    assert proxy.finish() == 0
    assert recorded(tmp_path) == huge + huge
    assert [answer["id"] for answer in denials(proxy.output)] == [2]
    assert proxy.errors.count("passed on without being judged") == 1  # said once


# --- the process ------------------------------------------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_proxy_exits_with_the_servers_status(tmp_path: Path) -> None:
    proxy = start(tmp_path, server=echo_server(tmp_path / "record", status=3))
    proxy.send(call(1))
    assert proxy.finish() == 3
    assert proxy.output == call(1)


def test_a_server_that_dies_ends_the_proxy_though_the_client_stays(tmp_path: Path) -> None:
    dies = python("import sys; sys.stdin.readline(); print('last words', flush=True); sys.exit(9)")
    proxy = start(tmp_path, server=dies)
    proxy.send(call(1))
    assert proxy.wait() == 9  # stdin still open: the client has not gone anywhere
    assert proxy.output == b"last words\n"  # the server's last output still reached the client


def test_a_server_that_does_not_exit_when_its_stdin_closes_is_terminated(tmp_path: Path) -> None:
    proxy = start(tmp_path, server=python("print('up', flush=True); import time; time.sleep(600)"))
    proxy.wait_for_lines(1)
    assert proxy.finish() == 128 + signal.SIGTERM


def test_a_server_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print('up', flush=True); time.sleep(600)"
    )
    proxy = start(tmp_path, server=python(stubborn))
    proxy.wait_for_lines(1)
    assert proxy.finish() == 128 + signal.SIGKILL


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_proxy_is_passed_to_the_server(tmp_path: Path, signum: int) -> None:
    proxy = start(tmp_path)
    proxy.send(call(1))
    proxy.wait_for_lines(1)  # the server is up and reading
    proxy.process.send_signal(signum)
    assert proxy.wait() == 128 + signum  # the echo server died of it; the proxy did not


def test_the_servers_stderr_is_the_proxys_and_stdout_carries_only_its_output(
    tmp_path: Path,
) -> None:
    chatty = python(
        "import sys; sys.stderr.write('server: starting\\n'); sys.stderr.flush();"
        " sys.stdout.write(sys.stdin.readline())"
    )
    proxy = start(tmp_path, server=chatty)
    proxy.send(call(1))
    assert proxy.finish() == 0
    assert proxy.output == call(1)
    assert proxy.errors == "server: starting\n"


# --- the user's mistakes ----------------------------------------------------------------------


def test_no_command_is_a_usage_error(tmp_path: Path) -> None:
    home = tmp_path / "dsh-home"
    home.mkdir()
    argv = [sys.executable, "-m", "dsh_loop_brake", "mcp-proxy", "--max-repeats", "2"]
    proxy = RawProxy(argv, proxy_env(home), tmp_path)
    assert proxy.finish() == 2
    assert proxy.output == b""
    assert (
        proxy.errors
        == "error: no server to start: give its command after --, e.g. -- npx -y SERVER\n"
    )


def test_a_command_that_is_not_there_exits_127(tmp_path: Path) -> None:
    proxy = start(tmp_path, server=["no-such-mcp-server-here", "--token", "s3cret"])
    assert proxy.finish() == 127
    assert proxy.output == b""
    [line] = proxy.errors.splitlines()
    assert line.startswith('error: cannot start "no-such-mcp-server-here": ')
    assert "s3cret" not in line


def test_a_command_that_cannot_run_exits_126(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o644)
    proxy = start(tmp_path, server=[str(script)])
    assert proxy.finish() == 126
    assert proxy.output == b"" and proxy.errors.count("\n") == 1


def test_a_bad_max_repeats_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    proxy = start(tmp_path, "--max-repeats", "0")
    assert proxy.finish() == 2
    assert proxy.output == b""
    assert "--max-repeats" in proxy.errors and proxy.errors.count("\n") == 1
    assert not (tmp_path / "record").exists()


def test_a_bad_profile_is_refused_with_its_file_and_line_before_the_server_starts(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "dsh-home" / "profiles" / "default"
    profile.mkdir(parents=True)
    (profile / "profile.yml").write_text("bundles: [dsh-loop-brake]\n", encoding="utf-8")
    patch = profile / "cordis.patch.yml"
    patch.write_text("- id: loop-brake\n  config:\n    maxRepeats: 0\n", encoding="utf-8")
    proxy = start(tmp_path)
    assert proxy.finish() == 2
    assert proxy.output == b""
    [line] = proxy.errors.splitlines()
    assert f"{patch}:3" in line and "maxRepeats" in line
    assert not (tmp_path / "record").exists()


# --- lines, however the bytes arrive -----------------------------------------------------------

_LINE_BYTES = st.sampled_from([b"a", b"\n", b"\r", b"{", b"\xff", b"\x00", b" "])


@given(
    data=st.lists(_LINE_BYTES, max_size=400).map(b"".join),
    reads=st.lists(st.integers(1, 50), min_size=1, max_size=40),
    limit=st.integers(1, 30),
)
def test_lines_are_the_bytes_as_they_came_whole_up_to_the_limit(
    data: bytes, reads: list[int], limit: int
) -> None:
    """However the pipe splits what arrives, the pieces put together are the bytes sent; a line
    no longer than the limit comes whole, and one longer than the limit plus a read never does."""
    from dsh_loop_brake.mcp_proxy._lines import segments

    position = 0
    sizes = iter(reads * 100)

    def read(size: int) -> bytes:
        nonlocal position
        piece = data[position : position + min(size, next(sizes, size))]
        position += len(piece)
        return piece

    pieces = list(segments(read, limit))
    assert b"".join(piece.data for piece in pieces) == data
    assert all(piece.data for piece in pieces)
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]  # the last has no end
    lines = [line for line in lines if line]
    whole = [piece.data for piece in pieces if piece.whole]
    assert all(line in lines for line in whole)
    for line in lines:
        if len(line) <= limit:
            assert line in whole
        if len(line) > limit + max(reads):
            assert line not in whole
    for piece in pieces:
        if piece.whole:
            assert piece.data.count(b"\n") <= 1 and piece.data.find(b"\n") in (
                -1,
                len(piece.data) - 1,
            )
