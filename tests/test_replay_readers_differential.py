"""The restructured readers read every file exactly as the reader they replace did.

A differential test: the previous reader (a frozen copy in ``tests/replay_old_readers.py``)
and the current one read the same generated files, in every format option, and must agree on
everything they report: the format, the sessions, every call, every problem, every error.

One difference is deliberate and not generated here: a JSON document's format is now decided
as a JSON Lines file's always was, from its first entry on. The old reader also searched the
objects before a document's first entry for a chat API's mark (an object with a ``tool_calls``
key but no ``role``), which could change the format it showed (never a call it read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_loop_brake.replay import FORMATS, ReaderError, open_transcript
from tests import replay_old_readers as old

_TEXT = st.sampled_from(["", "a", "search", "Bash", "s1", "s2", "7", "x y", "caf\u00e9"])
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_MAYBE = st.just(None)


def _optional(**fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with each field present or not."""
    return st.fixed_dictionaries({}, optional=fields)


_SESSION = st.one_of(_TEXT, st.integers(0, 3), st.just({"id": "s1"}), st.just([1]), _MAYBE)
_CALL = _optional(
    tool=st.one_of(_TEXT, st.integers()),
    name=_TEXT,
    args=_JSONISH,
    arguments=_JSONISH,
    session=_SESSION,
    agent=_SESSION,
    call_id=_TEXT,
)
_ARGUMENTS = st.one_of(
    _JSONISH.map(json.dumps), _JSONISH, st.sampled_from(['{"q": 1', "", "NaN", " {} "])
)
_FUNCTION = _optional(name=_TEXT, arguments=_ARGUMENTS)
_TOOL_CALL = st.one_of(_optional(id=_TEXT, type=st.just("function"), function=_FUNCTION), _TEXT)
_BLOCK = st.one_of(
    _optional(
        type=st.sampled_from(["tool_use", "text", "tool_result"]),
        id=st.sampled_from(["toolu_1", "toolu_2", "toolu_3"]),
        name=_TEXT,
        input=_JSONISH,
    ),
    _TEXT,
)
_MESSAGE = _optional(
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    content=st.one_of(_TEXT, st.lists(_BLOCK, max_size=3), _MAYBE),
    tool_calls=st.one_of(st.lists(_TOOL_CALL, max_size=3), _MAYBE),
    function_call=st.one_of(_FUNCTION, _MAYBE),
    type=st.sampled_from(["function_call", "function_call_output", "message", "reasoning"]),
    name=_TEXT,
    arguments=_ARGUMENTS,
)
_SESSION_OBJECT = _optional(
    id=st.one_of(_TEXT, st.integers(0, 3)),
    task_id=st.one_of(_TEXT, st.integers(0, 3)),
    messages=st.lists(_MESSAGE, max_size=3),
    traj=st.lists(_MESSAGE, max_size=3),
)
_CLAUDE = _optional(
    type=st.sampled_from(["assistant", "user", "summary", "system", "file-history-snapshot"]),
    sessionId=st.one_of(_TEXT, _MAYBE),
    parentUuid=st.one_of(_TEXT, _MAYBE),
    uuid=_TEXT,
    isSidechain=st.booleans(),
    agentId=_TEXT,
    message=st.one_of(_optional(role=_TEXT, content=st.lists(_BLOCK, max_size=3)), _TEXT),
)
# The same families, well formed: enough of every file holds calls of its format.
_NAME = st.sampled_from(["Bash", "Read", "search"])
_TOOL_USE = st.fixed_dictionaries(
    {"type": st.just("tool_use"), "name": _NAME, "input": _JSONISH},
    optional={"id": st.sampled_from(["toolu_1", "toolu_2", "toolu_3"])},
)
_GOOD_CALL = st.fixed_dictionaries(
    {"tool": _NAME, "args": _JSONISH}, optional={"session": st.sampled_from(["s1", "s2"])}
)
_GOOD_OPENAI = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": _TEXT,
                    "function": st.fixed_dictionaries(
                        {"name": _NAME}, optional={"arguments": _ARGUMENTS}
                    ),
                }
            ),
            min_size=1,
            max_size=2,
        ),
    }
)
_GOOD_ANTHROPIC = st.fixed_dictionaries(
    {"role": st.just("assistant"), "content": st.lists(_TOOL_USE, min_size=1, max_size=2)}
)
_GOOD_SESSION = st.fixed_dictionaries(
    {"messages": st.lists(st.one_of(_GOOD_OPENAI, _GOOD_ANTHROPIC, _MESSAGE), max_size=4)},
    optional={"task_id": st.integers(0, 2)},
)
_GOOD_CLAUDE = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["assistant", "assistant", "user", "summary"]),
        "sessionId": st.sampled_from(["s", "t"]),
        "uuid": st.just("u"),
        "message": st.fixed_dictionaries({"content": st.lists(_TOOL_USE, max_size=2)}),
    },
    optional={"isSidechain": st.booleans(), "agentId": st.sampled_from(["a1", "a2"])},
)
_VALUE = st.one_of(_CALL, _MESSAGE, _SESSION_OBJECT, _CLAUDE, _JSONISH)
_FAMILIES = [
    _CALL,
    _MESSAGE,
    _SESSION_OBJECT,
    _CLAUDE,
    _VALUE,
    _GOOD_CALL,
    _GOOD_OPENAI,
    _GOOD_ANTHROPIC,
    st.one_of(_GOOD_OPENAI, _GOOD_ANTHROPIC, _MESSAGE),
    _GOOD_SESSION,
    _GOOD_CLAUDE,
]
_BAD_LINES = st.sampled_from(["not json", '{"tool": "a"', "[1, 2", "\ufeff{}", "   ", ""])


@st.composite
def _files(draw: st.DrawFn) -> tuple[str, bytes]:
    """(file name, content): JSON Lines (with bad lines) or one document, in any format."""
    family = draw(st.sampled_from(_FAMILIES))
    values = draw(st.lists(st.one_of(family, _VALUE) if draw(st.booleans()) else family))
    if draw(st.booleans()):  # JSON Lines
        lines = [json.dumps(value) for value in values]
        for _ in range(draw(st.integers(0, 2))):
            lines.insert(draw(st.integers(0, len(lines))), draw(_BAD_LINES))
        end = draw(st.sampled_from(["\n", "\r\n"]))
        suffix = draw(st.sampled_from([".jsonl", ".ndjson", ".json", ".log"]))
        return f"t{suffix}", end.join(lines).encode() + draw(st.sampled_from([b"", b"\n"]))
    document = values[0] if values and draw(st.booleans()) else values
    suffix = draw(st.sampled_from([".json", ".log"]))
    return f"t{suffix}", json.dumps(document, indent=draw(st.sampled_from([None, 1]))).encode()


def _outcome(open_: Any, path: Path, format: str) -> tuple[Any, ...]:
    problems: list[str] = []
    try:
        transcript = open_(path, format, on_problem=problems.append)
        calls = [(c.session, c.tool, json.dumps(c.arguments)) for c in transcript]
    except (ReaderError, old.ReaderError) as error:
        return ("error", str(error), problems)
    return (transcript.format, list(transcript.sessions), calls, problems)


@settings(max_examples=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=_files(), format=st.sampled_from(FORMATS))
def test_the_readers_read_every_file_as_before(
    tmp_path: Path, file: tuple[str, bytes], format: str
) -> None:
    name, content = file
    path = tmp_path / name
    path.write_bytes(content)
    assert _outcome(open_transcript, path, format) == _outcome(old.open_transcript, path, format)
