"""What the core exports and what it imports (SPEC §2 exports, §7 dependencies)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import dsh_loop_brake
from dsh_loop_brake import loop_brake

SPEC_EXPORTS = {
    "LoopBrake",
    "LoopBrakeError",
    "ToolCallDenied",
    "InvalidMaxRepeatsError",
    "LoopBrakeConfigError",
    "wrap_execute",
    "decorate_tool",
    "call_hash",
    "canonical_json",
    "hash_prefix",
    "session_key",
    "normalize_max_repeats",
    "resolve_max_repeats",
    "DEFAULT_MAX_REPEATS",
    "ENV_VAR",
    "PLUGIN_NAME",
}


def test_the_core_exports_exactly_the_specified_names() -> None:
    assert set(loop_brake.__all__) == SPEC_EXPORTS
    assert (loop_brake.DEFAULT_MAX_REPEATS, loop_brake.ENV_VAR, loop_brake.PLUGIN_NAME) == (
        3,
        "DSH_LOOP_BRAKE_MAX_REPEATS",
        "dsh-loop-brake",
    )


def test_the_package_root_re_exports_the_same_objects() -> None:
    assert set(dsh_loop_brake.__all__) >= SPEC_EXPORTS
    for name in SPEC_EXPORTS:
        assert getattr(dsh_loop_brake, name) is getattr(loop_brake, name), name


@pytest.mark.parametrize("start", ["loop_brake", "_store"])
def test_the_core_imports_the_standard_library_only(start: str) -> None:
    # Any host can vendor or import the core without pulling in pluggy, ruamel.yaml or the harness.
    # The core is loop_brake.py and the private modules it is built from, followed transitively;
    # _store.py (the stores' part of it, which the stores package builds on) is walked on its own.
    package = Path(loop_brake.__file__).parent
    pending, seen = [start], set()
    imported: set[str] = set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        tree = ast.parse((package / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, "a relative import reaches into the package"
                name = node.module or ""
                if name.startswith("dsh_loop_brake."):
                    inner = name.removeprefix("dsh_loop_brake.")
                    assert "." not in inner and inner.startswith("_"), (module, name)
                    pending.append(inner)
                else:
                    imported.add(name.split(".")[0])
    assert len(seen) > 1, f"the walk from {start} found none of the core's private modules"
    assert imported, "the parse found no imports at all"
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported
