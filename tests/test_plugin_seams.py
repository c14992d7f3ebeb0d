"""The plugin's two seams on hosts of other shapes (SPEC §3): executions given as mappings,
bodies handed a copy of the execution, and executes that return futures."""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dsh_loop_brake import LoopBrakeError
from dsh_loop_brake import plugin as loop_brake_plugin

_ids = itertools.count()


class Context:
    def __init__(self, tools: Any) -> None:
        self.tools = tools
        self.disposers: list[Callable[[], object]] = []

    def effect(self, callback: Callable[[], Callable[[], object]]) -> None:
        self.disposers.append(callback())


class Body:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, args: Any, execution: Any = None) -> str:
        self.calls += 1
        return "ok"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_LOOP_BRAKE_MAX_REPEATS", raising=False)


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


class CopyingTools:
    """Executions are JSON-shaped mappings (``callId``); each body gets its own copy of one."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: dict[str, Any]) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: dict[str, Any]) -> Any:
        body = self.defs[execution["name"]]["execute"]
        return body(execution["arguments"], dict(execution))


def mapping_call(agent: str = "agent-1") -> dict[str, Any]:
    return {
        "callId": f"toolu_{next(_ids)}",
        "name": "search",
        "arguments": {"q": "weather"},
        "agent": {"id": agent},
    }


def test_mapping_executions_are_read_by_key_and_counted_once_by_their_call_id() -> None:
    tools = CopyingTools()
    brake = loop_brake_plugin.apply(Context(tools), {"maxRepeats": 4})
    body = Body()
    tools.register({"name": "search", "execute": body})

    for index in range(1, 4):
        assert tools.execute(mapping_call()) == "ok", index
    with pytest.raises(LoopBrakeError) as denied:
        tools.execute(mapping_call())

    assert body.calls == 3  # counted once per call, though the body saw another object
    assert denied.value.count == 4
    assert denied.value.session_id == "agent-1"  # the agent's id, read by key
    assert brake.streak("agent-1") is not None and brake.streak("default") is None
