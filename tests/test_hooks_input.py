"""Bad input of every kind fails open (exit 1, one stderr line, empty stdout), and a secret in
``tool_input`` never reaches any output or the state files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hooks_support import CANARY, denial_of, failed_open, fixture, run_hook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MIB = 1024 * 1024


def _event(**changes: Any) -> dict[str, Any]:
    event = fixture("claude-code-bash.json")
    for key, value in changes.items():
        if value is _DROP:
            del event[key]
        else:
            event[key] = value
    return event


_DROP = object()

BAD_INPUTS: dict[str, bytes] = {
    "empty": b"",
    "only whitespace": b" \n\t ",
    "not JSON": b"PreToolUse Bash npm test",
    "truncated JSON": json.dumps(_event()).encode()[:-5],
    "a JSON array": json.dumps([_event()]).encode(),
    "a JSON string": b'"PreToolUse"',
    "a JSON number": b"3",
    "null": b"null",
    "invalid UTF-8": json.dumps(_event()).encode().replace(b"npm test", b"npm \xff\xfe test"),
    "UTF-16": json.dumps(_event()).encode("utf-16"),
    "nested too deeply": b'{"tool_input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "a number too long to convert": b'{"session_id": ' + b"9" * 5000 + b"}",
    "two JSON objects": json.dumps(_event()).encode() * 2,
    "missing hook_event_name": json.dumps(_event(hook_event_name=_DROP)).encode(),
    "another event": json.dumps(_event(hook_event_name="PostToolUse")).encode(),
    "gemini's event name": json.dumps(_event(hook_event_name="BeforeTool")).encode(),
    "hook_event_name a number": json.dumps(_event(hook_event_name=7)).encode(),
    "missing session_id": json.dumps(_event(session_id=_DROP)).encode(),
    "empty session_id": json.dumps(_event(session_id="")).encode(),
    "session_id a number": json.dumps(_event(session_id=12)).encode(),
    "session_id an object": json.dumps(_event(session_id={"id": "x"})).encode(),
    "session_id too long": json.dumps(_event(session_id="s" * 5000)).encode(),
    "session_id an unpaired surrogate": json.dumps(_event(session_id="\ud800")).encode(),
    "agent_id a number": json.dumps(_event(agent_id=3)).encode(),
    "agent_id empty": json.dumps(_event(agent_id="")).encode(),
    "missing tool_name": json.dumps(_event(tool_name=_DROP)).encode(),
    "tool_name null": json.dumps(_event(tool_name=None)).encode(),
    "tool_name a list": json.dumps(_event(tool_name=["Bash"])).encode(),
    "missing tool_input": json.dumps(_event(tool_input=_DROP)).encode(),
    "tool_input a string": json.dumps(_event(tool_input="npm test")).encode(),
    "tool_input an array": json.dumps(_event(tool_input=["npm", "test"])).encode(),
    "tool_input null": json.dumps(_event(tool_input=None)).encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_fails_open(name: str, tmp_path: Path) -> None:
    failed_open(run_hook("claude-code", BAD_INPUTS[name], home=tmp_path))


def test_more_than_16_mib_is_refused_without_being_read_on(tmp_path: Path) -> None:
    event = json.dumps(_event()).encode()
    padded = event + b" " * (16 * MIB + 1 - len(event))
    assert len(padded) == 16 * MIB + 1
    line = failed_open(run_hook("claude-code", padded, home=tmp_path))
    assert "more than 16 MiB" in line


def test_an_event_of_exactly_16_mib_is_read(tmp_path: Path) -> None:
    event = json.dumps(_event()).encode()
    padded = event + b" " * (16 * MIB - len(event))
    done = run_hook("claude-code", padded, home=tmp_path)
    assert denial_of("claude-code", done) is None


def test_a_large_tool_input_is_counted(tmp_path: Path) -> None:
    event = _event()
    event["tool_input"] = {"content": "x" * (8 * MIB), "file_path": "/tmp/big.txt"}
    for _ in range(2):
        assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is None
    assert denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) is not None


def test_a_corrupt_state_file_fails_open(tmp_path: Path) -> None:
    state = tmp_path / "state" / "brakes.sqlite3"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"this is not a database, it is a text file\n" * 200)
    line = failed_open(run_hook("claude-code", _event(), home=tmp_path))
    assert str(state) in line and "not a usable SQLite database" in line
    assert state.read_bytes().startswith(b"this is not a database")  # left as it was


def test_a_state_path_that_is_a_directory_fails_open(tmp_path: Path) -> None:
    (tmp_path / "state" / "brakes.sqlite3").mkdir(parents=True)
    failed_open(run_hook("codex", fixture("codex-bash.json"), home=tmp_path))


def test_a_damaged_cache_is_composed_again(tmp_path: Path) -> None:
    event = fixture("gemini-shell.json")
    for _ in range(2):
        assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is None
    cache = tmp_path / "state" / "hook-profile-default.json"
    for damage in (b"{not json", b"[]", b'{"format": 1, "files": "x"}', b'{"format": 99}'):
        cache.write_bytes(damage)
        assert denial_of("gemini", run_hook("gemini", event, home=tmp_path)) is not None


def _canary_event(host_fixture: str) -> dict[str, Any]:
    event = fixture(host_fixture)
    event["tool_input"] = dict(event["tool_input"], token=CANARY, env={"API_KEY": CANARY})
    return event


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("claude-code", "claude-code-bash.json"),
        ("codex", "codex-bash.json"),
        ("gemini", "gemini-shell.json"),
    ],
)
def test_a_secret_in_tool_input_is_never_in_any_output_or_file(
    host: str, name: str, tmp_path: Path
) -> None:
    event = _canary_event(name)
    outputs = [run_hook(host, event, home=tmp_path) for _ in range(4)]
    assert denial_of(host, outputs[-1]) is not None
    # And on the failure paths: a wrong event name, a wrong type elsewhere in the event.
    outputs.append(run_hook(host, dict(event, hook_event_name="Elsewhere"), home=tmp_path))
    outputs.append(run_hook(host, dict(event, session_id=[CANARY]), home=tmp_path))
    outputs.append(run_hook(host, dict(event, tool_name={"name": CANARY}), home=tmp_path))
    outputs.append(run_hook(host, json.dumps(event).encode()[:-3], home=tmp_path))
    for done in outputs:
        assert CANARY.encode() not in done.stdout + done.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
EVENT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "hook_event_name": st.sampled_from(["PreToolUse", "BeforeTool"]) | JSON_VALUES,
        "session_id": st.text(max_size=10) | JSON_VALUES,
        "agent_id": st.text(max_size=10) | JSON_VALUES,
        "tool_name": st.sampled_from(["Bash", "Write"]) | JSON_VALUES,
        "tool_input": st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3) | JSON_VALUES,
    },
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=EVENT_FIELDS | JSON_VALUES)
def test_any_json_gets_an_answer_the_host_can_read(event: object, tmp_path: Path) -> None:
    done = run_hook("claude-code", json.dumps(event).encode(), home=tmp_path)
    assert done.returncode in (0, 1)
    if done.returncode == 0:
        denial_of("claude-code", done)  # nothing, or exactly the deny JSON
    else:
        failed_open(done)
