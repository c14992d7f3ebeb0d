"""The circuit breaker through the reference harness: a user's insert patch, beside the brake."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake
from dsh_loop_brake.circuit_breaker import CircuitBreaker, CircuitBreakerConfigError, dsh_apply
from dsh_loop_brake.harness import (
    Agent,
    Context,
    Fiber,
    Harness,
    Row,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    compose,
)
from dsh_loop_brake.harness.plugins import load_plugin

_ids = itertools.count(1)

USER_PATCH = """\
# My own circuit breaker, next to the loop brake this package installs.
- insert:
    - id: circuit-breaker
      name: dsh-circuit-breaker
      config:
        duplicateLimit: 4
        window: 50
        maxCallsPerAgent: 30
        incidentLog: {log}
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A DSH home whose default profile has this package installed, by the real command line."""
    home = tmp_path / "dsh-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "install", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return home


@pytest.fixture
def user_patch(home: Path, tmp_path: Path) -> Path:
    """The user's profile patch inserting the circuit-breaker row."""
    patch = home / "profiles" / "default" / "cordis.patch.yml"
    patch.write_text(USER_PATCH.format(log=json.dumps(str(tmp_path / "incidents.jsonl"))))
    return patch


class Bodies:
    """Tool bodies that record what ran."""

    def __init__(self, harness: Harness, *names: str) -> None:
        self.ran: list[tuple[str, Any]] = []
        for name in names:
            harness.ctx.tools.register(ToolDefinition(name, self._body(name)))

    def _body(self, name: str) -> Any:
        def body(arguments: Any, execution: Any) -> str:
            self.ran.append((name, arguments))
            return "ok"

        return body


def run(harness: Harness, name: str, arguments: Any, agent: Agent | None) -> ToolResult:
    execution = ToolExecution(f"call_{next(_ids)}", name, arguments, agent)
    return asyncio.run(harness.execute(execution))


def code(result: ToolResult) -> str | None:
    return result.error["code"] if result.error else None


def test_the_bundle_patch_does_not_insert_the_circuit_breaker(home: Path) -> None:
    assert [row.id for row in compose("default", home).rows] == ["loop-brake"]


def test_the_entry_point_name_loads_this_module() -> None:
    import dsh_loop_brake.circuit_breaker as module

    assert load_plugin("dsh-circuit-breaker") is module


def test_a_users_insert_patch_adds_the_row_next_to_the_loop_brake(
    home: Path, user_patch: Path
) -> None:
    composed = compose("default", home).rows
    assert [(row.id, row.name) for row in composed] == [
        ("loop-brake", "dsh-loop-brake"),
        ("circuit-breaker", "dsh-circuit-breaker"),
    ]
    with Harness.boot("default", home=home) as harness:
        assert harness.applied() == ["loop-brake", "circuit-breaker"]
        assert isinstance(harness.handle("loop-brake"), LoopBrake)
        breaker = harness.handle("circuit-breaker")
        assert isinstance(breaker, CircuitBreaker)
        assert breaker.config.duplicate_limit == 4
        assert breaker.config.max_calls_per_agent == 30
        assert breaker.config.exempt == ("todo_write", "ask_user_question", "exit_plan_mode")


def test_both_run_each_catching_its_own_kind_of_loop(
    home: Path, user_patch: Path, tmp_path: Path
) -> None:
    with Harness.boot("default", home=home) as harness:
        bodies = Bodies(harness, "search", "bash")
        agent = Agent("agent-007")

        # Three identical calls in a row: the loop brake's streak stops the third.
        assert code(run(harness, "search", {"q": "weather"}, agent)) is None
        assert code(run(harness, "search", {"q": "weather"}, agent)) is None
        assert code(run(harness, "search", {"q": "weather"}, agent)) == "LOOP_BRAKE"

        # A loop that alternates never makes a streak; the breaker's window sees the repeats.
        verdicts = []
        for _ in range(4):
            verdicts.append(code(run(harness, "search", {"q": "news"}, agent)))
            verdicts.append(code(run(harness, "search", {"q": "sports"}, agent)))
        assert verdicts[:6] == [None] * 6
        assert verdicts[6:] == ["CIRCUIT_BREAKER"] * 2  # each query's 4th time in the window

        # The seed's probe: the model rewrites "description", so no two calls are identical to
        # the loop brake; ignoreArgs makes them identical to the breaker.
        results = [
            run(harness, "bash", {"command": "echo cbprobe4", "description": f"step {i}"}, agent)
            for i in range(1, 11)
        ]
        assert [code(r) for r in results] == [None] * 3 + ["CIRCUIT_BREAKER"] * 7
        denial = results[3]
        assert denial.is_error and denial.content == denial.error["message"]  # type: ignore[index]
        assert "call to bash was denied" in denial.content and "cbprobe4" not in denial.content
        assert (
            bodies.ran.count(("bash", {"command": "echo cbprobe4", "description": "step 1"})) == 1
        )
        assert sum(1 for name, _ in bodies.ran if name == "bash") == 3  # denied bodies never ran

    records = [json.loads(line) for line in (tmp_path / "incidents.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["tool"], r["agent"]) for r in records] == [
        ("duplicate", "search", "agent-007")  # the first duplicate denial; bash's is not first
    ]


def test_the_cap_stops_a_varying_loop_and_leaves_other_agents_alone(
    home: Path, user_patch: Path, tmp_path: Path
) -> None:
    with Harness.boot("default", home=home) as harness:
        Bodies(harness, "search")
        runaway, healthy = Agent("runaway"), Agent("healthy")
        results = [run(harness, "search", {"q": f"query {i}"}, runaway) for i in range(40)]
        assert [code(r) for r in results] == [None] * 30 + ["CIRCUIT_BREAKER"] * 10
        assert code(run(harness, "search", {"q": "query 0"}, healthy)) is None
        assert harness.handle("circuit-breaker").calls(runaway) == 30
    (record,) = [json.loads(x) for x in (tmp_path / "incidents.jsonl").read_text().splitlines()]
    assert (record["kind"], record["count"], record["limit"], record["agent"]) == (
        "cap",
        30,
        30,
        "runaway",
    )


def test_dispose_forgets_all_state(home: Path, user_patch: Path) -> None:
    harness = Harness.boot("default", home=home)
    Bodies(harness, "search")
    breaker: CircuitBreaker = harness.handle("circuit-breaker")
    agent = Agent("a")
    for query in "abababa":
        run(harness, "search", {"q": query}, agent)
    assert code(run(harness, "search", {"q": "b"}, agent)) == "CIRCUIT_BREAKER"
    assert breaker.calls(agent) == 6 and len(breaker) == 1

    harness.dispose()
    assert len(breaker) == 0 and breaker.calls(agent) == 0
    # A guard some host kept calling after dispose would judge nothing and remember nothing.
    assert breaker.check(ToolExecution("x", "search", {"q": "b"}, agent)) is None
    assert breaker.calls(agent) == 0


def test_disposing_the_rows_fiber_removes_the_guard_from_the_registry() -> None:
    registry = ToolRegistry()
    ran: list[Any] = []
    registry.register(ToolDefinition("search", lambda arguments, execution: ran.append(1)))
    fiber = Fiber("row circuit-breaker")
    row = Row("circuit-breaker", "dsh-circuit-breaker", {"duplicateLimit": 2, "window": 2})
    with fiber.activate():
        breaker = dsh_apply(Context(registry, fiber), row)
    assert isinstance(breaker, CircuitBreaker)
    agent = Agent("a")

    def execute() -> ToolResult:
        return asyncio.run(registry.execute(ToolExecution("c", "search", {"q": 1}, agent)))

    assert code(execute()) is None
    assert code(execute()) == "CIRCUIT_BREAKER"
    fiber.dispose()
    assert [code(execute()) for _ in range(5)] == [None] * 5
    assert len(ran) == 6


def test_booting_again_starts_fresh(home: Path, user_patch: Path) -> None:
    agent = Agent("a")
    for _ in range(2):
        with Harness.boot("default", home=home) as harness:
            Bodies(harness, "search")
            verdicts = [code(run(harness, "search", {"q": q}, agent)) for q in "xyxyxyxy"]
            assert verdicts == [None] * 6 + ["CIRCUIT_BREAKER"] * 2


def test_a_bad_row_stops_the_boot_with_the_breakers_own_error(home: Path) -> None:
    (home / "profiles" / "default" / "cordis.patch.yml").write_text(
        "- insert:\n"
        "    - id: circuit-breaker\n"
        "      name: dsh-circuit-breaker\n"
        "      config: {duplicateLimit: 10, window: 5}\n"
    )
    with pytest.raises(CircuitBreakerConfigError, match=r"window must be at least duplicateLimit"):
        Harness.boot("default", home=home)


def test_a_later_layer_can_retune_or_disable_the_row(home: Path, user_patch: Path) -> None:
    (home / "cordis.patch.yml").write_text(
        "- id: circuit-breaker\n  config:\n    duplicateLimit: 2\n    window: 2\n"
    )
    with Harness.boot("default", home=home) as harness:
        config = harness.handle("circuit-breaker").config
        # config replaces the whole row config: everything else is back to its default.
        assert (config.duplicate_limit, config.window, config.max_calls_per_agent) == (2, 2, 300)
        assert config.incident_log == ""
    (home / "cordis.patch.yml").write_text("- id: circuit-breaker\n  disabled: true\n")
    with Harness.boot("default", home=home) as harness:
        assert harness.applied() == ["loop-brake"]


def test_from_rows_applies_the_breaker_alone() -> None:
    row = Row("circuit-breaker", "dsh-circuit-breaker", {"duplicateLimit": 2, "window": 2})
    with Harness.from_rows([row]) as harness:
        Bodies(harness, "search")
        agent = Agent("a")
        assert code(run(harness, "search", {"q": 1}, agent)) is None
        assert code(run(harness, "search", {"q": 1}, agent)) == "CIRCUIT_BREAKER"
        assert code(run(harness, "search", {"q": 1}, None)) is None  # the host-level state


def test_dsh_apply_leaves_other_rows_alone() -> None:
    registry = ToolRegistry()
    fiber = Fiber("row loop-brake")
    with fiber.activate():
        assert dsh_apply(Context(registry, fiber), Row("loop-brake", "dsh-loop-brake")) is None
        # The row id is the user's choice; the name is what the plugin claims.
        other = dsh_apply(Context(registry, fiber), Row("my-breaker", "dsh-circuit-breaker"))
    assert isinstance(other, CircuitBreaker)
    assert repr(registry).endswith("1 guards>")
    fiber.dispose()
    assert repr(registry).endswith("0 guards>")
