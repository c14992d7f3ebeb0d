"""The MCP proxy section of docs/adapters.md says what the proxy does: its configurations are
valid JSON whose arguments the command line takes, and its denial is the proxy's, to the byte."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsh_loop_brake.cli import build_parser
from tests.conftest import REPO_ROOT
from tests.mcp_proxy_support import RawProxy, counting_server, proxy_argv, proxy_env

SECTION = (
    Path(REPO_ROOT, "docs", "adapters.md").read_text(encoding="utf-8").split("\n## MCP proxy\n")[1]
)
SECTION = SECTION.split("\n## ", 1)[0]
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", SECTION, re.DOTALL)


def configurations() -> list[dict[str, object]]:
    return [block for block in map(json.loads, JSON_BLOCKS) if "mcpServers" in block]


def test_the_section_shows_a_configuration_for_claude_desktop_and_for_cursor() -> None:
    assert "### Claude Desktop" in SECTION and "### Cursor" in SECTION
    assert len(configurations()) == 2


@pytest.mark.parametrize("index", [0, 1])
def test_each_configuration_starts_the_filesystem_server_behind_the_proxy(index: int) -> None:
    servers = configurations()[index]["mcpServers"]
    assert isinstance(servers, dict)
    entry = servers["filesystem"]
    assert entry["command"].endswith("/dsh-loop-brake")
    args = build_parser().parse_args(entry["args"])
    assert args.command == "mcp-proxy"
    assert args.server[:4] == ["--", "npx", "-y", "@modelcontextprotocol/server-filesystem"]


def test_the_denial_shown_is_the_one_the_proxy_writes(tmp_path: Path) -> None:
    [shown] = [block.strip() for block in JSON_BLOCKS if '"isError"' in block]
    runs = tmp_path / "runs.txt"
    proxy = RawProxy(proxy_argv(server=counting_server(runs)), proxy_env(tmp_path), tmp_path)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "docs", "version": "1"},
        },
    }
    proxy.send(json.dumps(initialize).encode() + b"\n")
    proxy.wait_for_lines(1)
    for request_id in (5, 6, 7):
        params = {"name": "search", "arguments": {"q": "weather"}}
        call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        proxy.send(json.dumps(call).encode() + b"\n")
    lines = proxy.wait_for_lines(4)
    assert proxy.finish() == 0
    [denial] = [line for line in lines if line.startswith(b'{"jsonrpc":"2.0","id":7,')]
    assert denial == shown.encode() + b"\n"
