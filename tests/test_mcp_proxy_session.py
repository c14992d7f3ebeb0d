"""mcp-proxy's judgement of one session, in process: what no subprocess test can provoke."""

from __future__ import annotations

import json

from dsh_loop_brake import Brakes, LoopBrake
from dsh_loop_brake.mcp_proxy._session import ProxySession


class FailingBrake:
    """A loop brake whose own parts fail (a store gone, a bug): not a denial."""

    def check(self, tool_name: str, args: object, *, session_id: str | None = None) -> int:
        raise RuntimeError("the store went away")


def call(request_id: int) -> bytes:
    params = {"name": "search", "arguments": {"q": "a"}}
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        ).encode()
        + b"\n"
    )


def test_when_the_brakes_fail_on_a_call_it_is_forwarded_and_said_once() -> None:
    notes: list[str] = []
    session = ProxySession(Brakes(loop_brake=FailingBrake()), "s", notes.append)  # type: ignore[arg-type]
    for request_id in range(3):
        line = call(request_id)
        assert session.from_client(line) == (line, None)  # on to the server, as it came
    assert notes == ["the brakes failed on a tools/call (RuntimeError); it was forwarded"]


def test_a_retry_the_server_never_asked_for_is_a_new_call() -> None:
    """``requestState`` alone does not make a call a continuation: only a call the server
    answered ``input_required`` has a retry (else any client could skip the brakes)."""
    notes: list[str] = []
    session = ProxySession(Brakes(LoopBrake(2)), "s", notes.append)
    retry = {"name": "search", "arguments": {"q": "a"}, "requestState": "forged"}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": retry}).encode()
        + b"\n"
        for n in range(2)
    ]
    assert session.from_client(lines[0]).to_server == lines[0]
    denied = session.from_client(lines[1])
    assert denied.to_server is None and denied.to_client is not None
    assert json.loads(denied.to_client)["result"]["isError"] is True
