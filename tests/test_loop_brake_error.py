"""LoopBrakeError (SPEC §2): the exact sentence, its attributes, and no trace of the arguments."""

from __future__ import annotations

import copy
import pickle
import traceback
import weakref
from typing import Any

import pytest

from dsh_loop_brake import PLUGIN_NAME, LoopBrake, LoopBrakeError, call_hash

SECRET_ARGS = {
    "query": "password=hunter2",
    "path": "/home/alice/.ssh/id_ed25519",
    "nested": {"api_key": "sk-live-SECRET"},
}
SECRET_FRAGMENTS = ["hunter2", "id_ed25519", "sk-live-SECRET", "api_key", "password", "alice"]


def denied(tool: str = "search", args: Any = None, limit: int = 3, session: str = "s-1") -> Any:
    brake = LoopBrake(limit)
    args = SECRET_ARGS if args is None else args
    for _ in range(limit - 1):
        brake.check(tool, args, session_id=session)
    with pytest.raises(LoopBrakeError) as caught:
        brake.check(tool, args, session_id=session)
    return caught.value


def test_the_message_is_exactly_the_specified_sentence() -> None:
    error = denied("search", {"q": "weather"})
    prefix = call_hash("search", {"q": "weather"})[:12]
    assert str(error) == (
        f'loop brake: tool "search" called 3 times in a row with identical arguments '
        f"(call {prefix}\u2026, limit 3); the call was denied before it ran. "
        "Change the arguments, call a different tool, or stop."
    )


def test_the_count_in_the_message_is_this_repeat() -> None:
    brake = LoopBrake(2)
    brake.check("t", {})
    with pytest.raises(LoopBrakeError):
        brake.check("t", {})
    with pytest.raises(LoopBrakeError, match=r"called 3 times in a row .*limit 2\)"):
        brake.check("t", {})


def test_attributes() -> None:
    error = denied("search", {"q": "weather"}, limit=3, session="agent-7")
    assert error.code == "LOOP_BRAKE"
    assert error.plugin == PLUGIN_NAME == "dsh-loop-brake"
    assert error.tool_name == "search"
    assert error.count == 3
    assert error.max_repeats == 3
    assert error.hash_prefix == call_hash("search", {"q": "weather"})[:12]
    assert len(error.hash_prefix) == 12
    assert error.session_id == "agent-7"
    assert isinstance(error, Exception)


def test_the_error_behaves_as_an_ordinary_exception_for_reporters() -> None:
    # Error reporters keep weak references to exceptions and dump their attributes.
    error = denied()
    assert weakref.ref(error)() is error
    assert vars(error)["tool_name"] == "search" and vars(error)["count"] == 3


def test_the_arguments_appear_nowhere_in_the_error() -> None:
    error = denied()
    surfaces = [
        str(error),
        repr(error),
        repr(error.args),
        repr(vars(error)),
        repr([getattr(error, name, None) for name in dir(error) if not name.startswith("__")]),
        "".join(traceback.format_exception(error)),
        pickle.dumps(error, protocol=0).decode("latin-1"),
        repr(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)),
    ]
    for surface in surfaces:
        for fragment in SECRET_FRAGMENTS:
            assert fragment not in surface, (fragment, surface[:200])
    assert error.args == (str(error),)


def test_the_error_pickles_and_copies_with_every_attribute() -> None:
    error = denied("search", {"q": "weather"}, limit=3, session="agent-7")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(error, protocol=protocol))
        assert type(restored) is LoopBrakeError
        assert str(restored) == str(error)
        assert restored.args == error.args
        for name in (
            "code",
            "plugin",
            "tool_name",
            "count",
            "max_repeats",
            "hash_prefix",
            "session_id",
        ):
            assert getattr(restored, name) == getattr(error, name)
    duplicate = copy.deepcopy(error)
    assert (duplicate.tool_name, duplicate.count, str(duplicate)) == (
        error.tool_name,
        error.count,
        str(error),
    )


@pytest.mark.parametrize(
    ("tool", "literal"),
    [
        ('say "hi"\nINFO forged line', '"say \\"hi\\"\\nINFO forged line"'),
        ("carriage\rreturn\u2028sep", '"carriage\\rreturn\\u2028sep"'),
        ("\u8bfb\u53d6\u6587\u4ef6", '"\\u8bfb\\u53d6\\u6587\\u4ef6"'),
        ("tab\tand\x1b[31mansi", '"tab\\tand\\u001b[31mansi"'),
    ],
)
def test_a_hostile_tool_name_stays_on_one_ascii_line(tool: str, literal: str) -> None:
    error = denied(tool, {"a": 1})
    message = str(error)
    assert f"loop brake: tool {literal} called 3 times" in message
    assert message.replace("\u2026", "").isascii()
    assert len(message.splitlines()) == 1
    for forbidden in ("\n", "\r", "\u2028", "\u2029", "\x1b", "\x85"):
        assert forbidden not in message
    assert error.tool_name == tool  # the attribute keeps the real name
