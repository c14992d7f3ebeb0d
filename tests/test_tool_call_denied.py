"""ToolCallDenied: the one exception a host or adapter catches for every denial (SPEC §2)."""

from __future__ import annotations

import copy
import pickle

import pytest

import dsh_loop_brake
from dsh_loop_brake import LoopBrake, LoopBrakeError, ToolCallDenied, loop_brake

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def test_a_host_raises_its_own_with_the_defaults() -> None:
    error = ToolCallDenied("rm is not allowed in this workspace")
    assert str(error) == "rm is not allowed in this workspace"
    assert error.args == ("rm is not allowed in this workspace",)
    assert (error.code, error.tool_name, error.session_id) == ("DENIED", "", None)
    assert isinstance(error, Exception)


def test_code_tool_and_session_are_keywords_only() -> None:
    error = ToolCallDenied("no", code="POLICY", tool_name="rm", session_id="agent-7")
    assert (error.code, error.tool_name, error.session_id) == ("POLICY", "rm", "agent-7")
    with pytest.raises(TypeError):
        ToolCallDenied("no", "POLICY")  # type: ignore[misc]


def test_it_is_exported_from_the_core_and_the_package_root() -> None:
    assert loop_brake.ToolCallDenied is ToolCallDenied
    assert dsh_loop_brake.ToolCallDenied is ToolCallDenied
    assert "ToolCallDenied" in loop_brake.__all__ and "ToolCallDenied" in dsh_loop_brake.__all__


def test_one_except_clause_catches_the_loop_brakes_denial() -> None:
    brake = LoopBrake(2)
    brake.check("search", {"q": "x"})
    with pytest.raises(ToolCallDenied) as caught:
        brake.check("search", {"q": "x"})
    error = caught.value
    assert type(error) is LoopBrakeError
    assert (error.code, error.tool_name, error.session_id) == ("LOOP_BRAKE", "search", "default")
    assert error.args == (str(error),)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_it_pickles_with_every_attribute(protocol: int) -> None:
    error = ToolCallDenied("held for review", code="REVIEW", tool_name="deploy", session_id="s")
    restored = pickle.loads(pickle.dumps(error, protocol=protocol))
    assert type(restored) is ToolCallDenied
    assert (str(restored), restored.args) == (str(error), error.args)
    assert vars(restored) == vars(error)


class HostDenial(ToolCallDenied):
    """A host's own denial with a constructor of its own shape."""

    def __init__(self, tool_name: str, rule: str) -> None:
        self.rule = rule
        super().__init__(f"{tool_name} broke rule {rule}", code="HOST_POLICY", tool_name=tool_name)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_subclass_with_its_own_constructor_pickles_and_copies(protocol: int) -> None:
    error = HostDenial("deploy", "no-friday-deploys")
    for restored in (pickle.loads(pickle.dumps(error, protocol=protocol)), copy.deepcopy(error)):
        assert type(restored) is HostDenial
        assert str(restored) == "deploy broke rule no-friday-deploys"
        assert (restored.code, restored.tool_name, restored.rule) == (
            "HOST_POLICY",
            "deploy",
            "no-friday-deploys",
        )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_loop_brake_error_keeps_its_constructor_and_pickles_whole(protocol: int) -> None:
    error = LoopBrakeError("search", 4, 3, "0123456789abcdef", "agent-7")
    assert isinstance(error, ToolCallDenied)
    restored = pickle.loads(pickle.dumps(error, protocol=protocol))
    assert type(restored) is LoopBrakeError
    assert str(restored) == str(error)
    assert vars(restored) == vars(error)
    assert (restored.code, restored.plugin, restored.hash_prefix) == (
        "LOOP_BRAKE",
        "dsh-loop-brake",
        "0123456789ab",
    )
