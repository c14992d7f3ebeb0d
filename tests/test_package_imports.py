"""The package root re-exports its names lazily (PEP 562): importing a module of the package costs
only what that module needs — a coding-agent hook is a new process for every tool call."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import dsh_loop_brake
from dsh_loop_brake import _brakes, circuit_breaker, loop_brake
from tests.conftest import REPO_ROOT


def imported_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement`` that it did not hold before."""
    code = (
        "import sys; before = set(sys.modules)\n"
        f"{statement}\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))  # this tree's package, however installed
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return set(done.stdout.split())


HEAVY = {"pluggy", "ruamel", "dataclasses", "inspect", "asyncio", "importlib.metadata"}


def test_every_exported_name_is_the_same_object_as_at_its_public_home() -> None:
    homes = {"Brakes": _brakes, "CircuitBreakerError": circuit_breaker}
    assert set(dsh_loop_brake.__all__) == {*loop_brake.__all__, *homes}
    for name in dsh_loop_brake.__all__:
        assert getattr(dsh_loop_brake, name) is getattr(homes.get(name, loop_brake), name), name


def test_the_names_are_listed_and_an_unknown_one_is_an_attribute_error() -> None:
    assert set(dsh_loop_brake.__all__) <= set(dir(dsh_loop_brake))
    with pytest.raises(AttributeError, match="no attribute 'LoopBreak'"):
        dsh_loop_brake.LoopBreak  # noqa: B018
    namespace: dict[str, object] = {}
    exec("from dsh_loop_brake import *", namespace)
    assert set(dsh_loop_brake.__all__) <= set(namespace)


def test_importing_the_package_imports_none_of_its_modules() -> None:
    assert {m for m in imported_by("import dsh_loop_brake") if m.startswith("dsh_loop_brake")} == {
        "dsh_loop_brake"
    }


def test_a_name_imports_only_what_it_needs() -> None:
    modules = imported_by("from dsh_loop_brake import Brakes, CircuitBreakerError, LoopBrake")
    assert "dsh_loop_brake._brake" in modules
    assert not {"dsh_loop_brake.loop_brake", "dsh_loop_brake._wrapping"} & modules
    assert not {"dsh_loop_brake.harness", "dsh_loop_brake.circuit_breaker"} & modules
    assert not {m.split(".")[0] for m in modules} & {"pluggy", "ruamel"}


@pytest.mark.parametrize("module", ["dsh_loop_brake._breaker", "dsh_loop_brake._brakes"])
def test_the_breaker_and_brakes_import_without_pluggy_or_the_harness(module: str) -> None:
    modules = imported_by(f"import {module}")
    assert not {m for m in modules if m.startswith("dsh_loop_brake.harness")}
    assert "dsh_loop_brake.loop_brake" not in modules and "dsh_loop_brake.plugin" not in modules
    assert not (modules & HEAVY or {m.split(".")[0] for m in modules} & HEAVY), modules & HEAVY


def test_the_breaker_imports_no_logging_until_it_warns() -> None:
    assert "logging" not in imported_by("import dsh_loop_brake._breaker")
