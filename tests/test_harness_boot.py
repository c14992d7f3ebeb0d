"""Boot: compose, load plugins, apply rows in order each in its own fiber; never half-booted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_loop_brake import LoopBrake, LoopBrakeConfigError
from dsh_loop_brake.harness import (
    Agent,
    BootError,
    Context,
    Harness,
    Row,
    ToolDefinition,
    ToolExecution,
    hookimpl,
)


class Recorder:
    """A test plugin claiming one row name: registers a tool per row and records apply/dispose."""

    def __init__(self, name: str, log: list[str], fail_on: str | None = None) -> None:
        self.name = name
        self.log = log
        self.fail_on = fail_on

    @hookimpl
    def dsh_apply(self, ctx: Context, row: Row) -> Any:
        if row.name != self.name:
            return None
        self.log.append(f"apply {row.id}")
        ctx.tools.register(ToolDefinition(f"tool-{row.id}", lambda args, execution: row.id))
        ctx.effect(lambda: lambda: self.log.append(f"dispose {row.id}"))
        if row.id == self.fail_on:
            raise RuntimeError(f"{row.id} cannot start")
        return {"row": row.id, "config": row.config}


def rows(*ids: str, name: str = "recorder") -> list[Row]:
    return [Row(row_id, name) for row_id in ids]


def test_rows_are_applied_in_order_and_disposed_in_reverse() -> None:
    log: list[str] = []
    harness = Harness.from_rows(
        rows("a", "b", "c"), plugins={"recorder": Recorder("recorder", log)}
    )
    assert log == ["apply a", "apply b", "apply c"]
    assert harness.applied() == ["a", "b", "c"]
    assert harness.handle("b") == {"row": "b", "config": None}
    assert harness.ctx.tools.get("tool-b") is not None
    harness.dispose()
    harness.dispose()
    assert log[3:] == ["dispose c", "dispose b", "dispose a"]
    assert harness.ctx.tools.names() == []
    assert harness.disposed


def test_a_plugin_that_raises_in_apply_leaves_nothing_applied() -> None:
    log: list[str] = []
    plugin = Recorder("recorder", log, fail_on="c")
    with pytest.raises(RuntimeError, match="c cannot start"):
        Harness.from_rows(rows("a", "b", "c", "d"), plugins={"recorder": plugin})
    # c's own partial effects are undone too, then b, then a; d was never applied.
    assert log == ["apply a", "apply b", "apply c", "dispose c", "dispose b", "dispose a"]


def test_roll_back_removes_every_tool_the_applied_rows_registered() -> None:
    log: list[str] = []
    seen: dict[str, Any] = {}

    class Spy:
        @hookimpl
        def dsh_apply(self, ctx: Context, row: Row) -> Any:
            seen["tools"] = ctx.tools
            raise ValueError("bad config")

    with pytest.raises(ValueError):
        Harness.from_rows(
            [*rows("a", "b"), Row("spy", "spy")],
            plugins={"recorder": Recorder("recorder", log), "spy": Spy()},
        )
    assert seen["tools"].names() == []


def test_a_config_error_from_the_real_plugin_rolls_back_and_propagates_unchanged() -> None:
    log: list[str] = []
    with pytest.raises(LoopBrakeConfigError, match="maxRepeats"):
        Harness.from_rows(
            [Row("a", "recorder"), Row("loop-brake", "dsh-loop-brake", {"maxRepeats": 0})],
            plugins={"recorder": Recorder("recorder", log)},
        )
    assert log == ["apply a", "dispose a"]


def test_a_row_no_plugin_claims_stops_the_boot_before_anything_is_applied() -> None:
    log: list[str] = []
    with pytest.raises(BootError, match="no-such-plugin"):
        Harness.from_rows(
            [Row("a", "recorder"), Row("x", "no-such-plugin")],
            plugins={"recorder": Recorder("recorder", log)},
        )
    assert log == []


def test_a_plugin_that_does_not_apply_its_row_stops_the_boot() -> None:
    log: list[str] = []
    with pytest.raises(BootError, match="not applied"):
        Harness.from_rows(
            [Row("a", "recorder"), Row("b", "other")],
            plugins={"recorder": Recorder("recorder", log), "other": Recorder("elsewhere", log)},
        )
    assert log == ["apply a", "dispose a"]


def test_a_plugin_without_dsh_apply_is_refused() -> None:
    class Empty:
        pass

    with pytest.raises(BootError, match="no dsh_apply"):
        Harness.from_rows([Row("a", "empty")], plugins={"empty": Empty()})


def test_disabled_rows_are_not_applied_and_need_no_plugin() -> None:
    log: list[str] = []
    harness = Harness.from_rows(
        [Row("a", "recorder"), Row("b", "not-installed", disabled=True)],
        plugins={"recorder": Recorder("recorder", log)},
    )
    try:
        assert harness.applied() == ["a"]
        with pytest.raises(KeyError, match="'b' is not applied"):
            harness.handle("b")
    finally:
        harness.dispose()


def test_duplicate_row_ids_are_refused() -> None:
    with pytest.raises(BootError, match="twice"):
        Harness.from_rows(rows("a", "a"), plugins={"recorder": Recorder("recorder", [])})


def test_one_plugin_may_claim_several_row_names() -> None:
    log: list[str] = []

    class Both:
        @hookimpl
        def dsh_apply(self, ctx: Context, row: Row) -> Any:
            log.append(row.id)
            return row.name

    both = Both()
    harness = Harness.from_rows(
        [Row("x", "first"), Row("y", "second")], plugins={"first": both, "second": both}
    )
    assert [harness.handle("x"), harness.handle("y")] == ["first", "second"]
    harness.dispose()


def test_the_real_loop_brake_plugin_through_from_rows() -> None:
    with Harness.from_rows([Row("loop-brake", "dsh-loop-brake", {"maxRepeats": 2})]) as harness:
        brake = harness.handle("loop-brake")
        assert isinstance(brake, LoopBrake) and brake.max_repeats == 2
        ran: list[Any] = []
        harness.ctx.tools.register(ToolDefinition("search", lambda args, execution: ran.append(1)))
        agent = Agent("agent")

        async def calls() -> list[bool]:
            return [
                (await harness.execute(ToolExecution(f"c{i}", "search", {"q": 1}, agent))).is_error
                for i in range(3)
            ]

        assert asyncio.run(calls()) == [False, True, True]
        assert ran == [1]
    assert harness.ctx.tools.get("search") is None


def test_boot_composes_the_profile_and_applies_it(dsh_home: Path) -> None:
    profile = dsh_home / "profiles" / "work"
    profile.mkdir(parents=True)
    (profile / "profile.yml").write_text("bundles:\n  - dsh-loop-brake\n", encoding="utf-8")
    (profile / "cordis.patch.yml").write_text(
        "- insert:\n    - id: rec\n      name: recorder\n      config: {x: 1}\n", encoding="utf-8"
    )
    extra = dsh_home / "extra.yml"
    extra.write_text("- id: loop-brake\n  config: {maxRepeats: 9}\n", encoding="utf-8")
    log: list[str] = []
    harness = Harness.boot("work", patches=[extra], plugins={"recorder": Recorder("recorder", log)})
    try:
        assert [row.id for row in harness.rows] == ["loop-brake", "rec"]
        assert harness.handle("loop-brake").max_repeats == 9
        assert harness.handle("rec") == {"row": "rec", "config": {"x": 1}}
        assert harness.composition is not None
        assert harness.composition.row("loop-brake") is not None
    finally:
        harness.dispose()
    assert log == ["apply rec", "dispose rec"]


def test_boot_of_a_missing_profile_is_an_empty_harness(dsh_home: Path) -> None:
    with Harness.boot("nobody-made-this") as harness:
        assert harness.rows == () and harness.applied() == []


def test_boot_with_a_malformed_patch_names_file_and_line(dsh_home: Path) -> None:
    bad = dsh_home / "cordis.patch.yml"
    bad.write_text("- insert:\n    - id: a\n      name: [unclosed\n", encoding="utf-8")
    with pytest.raises(Exception, match=rf"{bad}:\d+: malformed YAML"):
        Harness.boot()
