"""Transcript readers: each format on fixtures shaped like real tools' logs, auto-detection,
session splitting, and garbage that never escapes as anything but ReaderError."""

from __future__ import annotations

import io
import itertools
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_loop_brake.replay import FORMATS, ReaderError, RecordedCall, open_transcript

FIXTURES = Path(__file__).parent / "fixtures" / "replay"
CLAUDE_SESSION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
CLAUDE_DIR = FIXTURES / "claude_code" / "-home-lee-proj"
CLAUDE_FILE = CLAUDE_DIR / f"{CLAUDE_SESSION}.jsonl"
CLAUDE_SUBAGENT = CLAUDE_DIR / CLAUDE_SESSION / "subagents" / "agent-9f01.jsonl"


def read(
    path: Path, format: str = "auto"
) -> tuple[str, list[str], list[tuple[str, str, Any]], list[str]]:
    """(detected format, session names, [(session name, tool, args)], problems) of one file."""
    problems: list[str] = []
    transcript = open_transcript(path, format, on_problem=problems.append)
    calls = list(transcript)
    named = [(transcript.sessions[c.session], c.tool, c.arguments) for c in calls]
    return transcript.format, list(transcript.sessions), named, problems


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


# --------------------------------------------------------------------------------------------
# OpenAI


def test_openai_chat_log_with_parallel_tool_calls() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "openai_parallel_tools.json")
    assert fmt == "openai"
    assert sessions == ["openai_parallel_tools.json"]  # an object with messages: the file
    paris = {"city": "Paris", "unit": "celsius"}
    assert [(tool, args) for _, tool, args in calls] == [
        # the three parallel calls of one assistant message, in their order
        ("get_weather", paris),
        ("get_weather", {"city": "Lyon", "unit": "celsius"}),
        ("get_time", {"tz": "Europe/Paris"}),
        ("get_weather", paris),  # keys in another order: decoded, so the same value
        ("get_weather", paris),  # arguments recorded as an object instead of a string
        ("get_weather", paris),  # pretty-printed JSON string
        ("search_places", '{"query": "cafe near Lou'),  # unparsable: kept as the raw string
        ("search_places", '{"query": "cafe near Lou'),
        ("list_favorites", {}),  # no arguments at all
    ]
    assert problems == []


def test_openai_tau_bench_list_of_sessions_with_traj() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "tau_bench_results.json")
    assert fmt == "openai"
    # task ids name the sessions (two trials of task 12 stay two sessions), a session without
    # an id is "#<index>", and a session without tool calls is still listed
    assert sessions == ["12", "12", "7", "#4"]
    per_session = [sum(1 for name, *_ in calls if name == s) for s in ("12", "7", "#4")]
    assert per_session == [8, 0, 1]
    assert calls[1] == ("12", "get_order_details", {"order_id": "#W2378156"})
    assert calls[-1] == (
        "#4",
        "cancel_pending_order",
        {"order_id": "#W5", "reason": "no longer needed"},
    )
    assert problems == [
        f"{FIXTURES / 'tau_bench_results.json'}: session #5: not an object with a messages or "
        "traj list; skipped"
    ]


def test_openai_sessions_are_indexed_not_merged_by_name() -> None:
    transcript = open_transcript(FIXTURES / "tau_bench_results.json")
    calls = list(transcript)
    # both trials are named "12" but are separate sessions (indices 0 and 1)
    assert [c.session for c in calls] == [0, 0, 0, 0, 0, 1, 1, 1, 3]


def test_openai_jsonl_of_messages_and_responses_items() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "openai_messages.jsonl")
    assert fmt == "openai"
    assert sessions == ["openai_messages.jsonl"]
    assert calls == [
        ("openai_messages.jsonl", "list_issues", {"state": "open"}),
        ("openai_messages.jsonl", "list_issues", {"state": "open"}),  # Responses API item
    ]
    assert problems == []


_MESSAGES: list[Any] = [
    {"role": "user", "content": "add one"},
    {
        "role": "assistant",
        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "a", "content": "1"},
]


@pytest.mark.parametrize(
    ("document", "session"),
    [
        (_MESSAGES, "log.json"),
        ({"model": "gpt-4o", "messages": _MESSAGES}, "log.json"),
        ([{"id": "run-1", "messages": _MESSAGES}], "run-1"),
        ([{"session_id": "s-9", "traj": _MESSAGES}], "s-9"),
    ],
    ids=["list of messages", "object with messages", "sessions with id", "traj with session_id"],
)
def test_openai_containers(tmp_path: Path, document: Any, session: str) -> None:
    fmt, sessions, calls, _ = read(write(tmp_path, "log.json", json.dumps(document)))
    assert (fmt, sessions) == ("openai", [session])
    assert calls == [(session, "f", {})]


def test_openai_arguments_that_are_json_but_not_objects(tmp_path: Path) -> None:
    messages = [
        {"role": "assistant", "tool_calls": [_tool_call("1", "[1, 2]"), _tool_call("2", '"q"')]},
        {"role": "assistant", "tool_calls": [_tool_call("3", ""), _tool_call("4", "NaN")]},
    ]
    path = write(tmp_path, "log.json", json.dumps(messages))
    _, _, calls, _ = read(path)
    args = [a for *_, a in calls]
    assert args[:3] == [[1, 2], "q", ""]  # "" is not JSON: kept as the raw string
    assert args[3] != args[3]  # NaN, as json.loads reads it (the brake hashes it as null)


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=_JSONISH,
    before=st.sampled_from(["", " ", "\n\t", "\ufeff"]),
    after=st.sampled_from(["", " ", "\r\n", "x", "}", ", 1"]),
)
def test_openai_arguments_decode_exactly_as_json_loads(
    tmp_path: Path, value: Any, before: str, after: str
) -> None:
    text = before + json.dumps(value) + after
    messages = [{"role": "assistant", "tool_calls": [_tool_call("1", text)]}]
    path = write(tmp_path, "log.json", json.dumps(messages))
    _, _, [(_, _, arguments)], _ = read(path)
    try:
        expected = json.loads(text)
    except ValueError:
        expected = text  # not JSON: kept as the raw string
    # Compared as JSON text: NaN is not equal to itself, and 1 == 1.0 == True would hide types.
    assert json.dumps(arguments) == json.dumps(expected)
    assert type(arguments) is type(expected)


def test_openai_malformed_tool_calls_are_reported_not_fatal(tmp_path: Path) -> None:
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}, 7]},
        {"role": "assistant", "tool_calls": [_tool_call("ok", "{}")]},
        "not a message",
    ]
    path = write(tmp_path, "log.json", json.dumps(messages))
    _, _, calls, problems = read(path, "openai")
    assert [tool for _, tool, _ in calls] == ["f"]
    assert len(problems) == 3
    assert all(p.startswith(f"{path}: message #") for p in problems)


# --------------------------------------------------------------------------------------------
# OpenAI API response logs


def _completion(tool: str, arguments: str, call_id: str) -> dict[str, Any]:
    """A Chat Completions response object whose first choice asks for one tool call."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
        ],
        "refusal": None,
    }
    return {
        "id": f"chatcmpl-{call_id}",
        "object": "chat.completion",
        "created": 1748496646,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 91, "completion_tokens": 14, "total_tokens": 105},
    }


def _request(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The request body that produced a response: the whole conversation so far, and tools."""
    tools = [{"type": "function", "function": {"name": "get_ticket", "parameters": {}}}]
    return {"model": "gpt-4o", "messages": history, "tools": tools, "tool_choice": "auto"}


def _logged_turns(wrap: Any) -> str:
    """Three turns of one agent as a request-and-response log, each line made by ``wrap``."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Why is T-4821 still open?"}]
    lines = []
    for turn in range(3):
        response = _completion("get_ticket", '{"ticket_id":"T-4821"}', f"call_{turn}")
        lines.append(json.dumps(wrap(_request(list(history)), response, turn)))
        message = response["choices"][0]["message"]
        history += [message, {"role": "tool", "tool_call_id": f"call_{turn}", "content": "{}"}]
    return "\n".join(lines) + "\n"


def test_openai_chat_completion_responses_one_per_line() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "openai_chat_completions.jsonl")
    assert (fmt, sessions, problems) == ("openai", ["openai_chat_completions.jsonl"], [])
    ticket = ("openai_chat_completions.jsonl", "get_ticket", {"ticket_id": "T-4821"})
    assert calls == [ticket] * 5
    assert read(FIXTURES / "openai_chat_completions.jsonl", "openai")[2] == calls


def test_openai_responses_api_objects_in_a_list() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "openai_responses.json")
    assert (fmt, sessions, problems) == ("openai", ["openai_responses.json"], [])
    assert [(tool, args) for _, tool, args in calls] == [
        ("search_docs", {"query": "rotate API keys"}),
        ("get_page", {"path": "/security/api-keys"}),  # two parallel calls of one response
        ("get_page", {"path": "/security/key-rotation"}),
        ("search_docs", {"query": "rotate API keys"}),
        # the last response answers with a message: no call; the tools it lists are no calls
    ]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda request, response, turn: {"request": request, "response": response},
        # LiteLLM's logging payload: the request's messages at the top, then the response
        lambda request, response, turn: {
            "id": f"litellm-{turn}",
            "call_type": "acompletion",
            "messages": request["messages"],
            "response": response,
        },
        # OpenPipe's export
        lambda request, response, turn: {"input": request, "output": response, "tags": {}},
        # the Batch API's output file
        lambda request, response, turn: {
            "id": f"batch_req_{turn}",
            "custom_id": f"task-{turn}",
            "response": {"status_code": 200, "request_id": f"req_{turn}", "body": response},
            "error": None,
        },
    ],
    ids=["request-response", "litellm", "openpipe", "batch-output"],
)
@pytest.mark.parametrize("format", ["auto", "openai"])
def test_a_logged_request_and_its_response_count_the_response_only(
    tmp_path: Path, wrap: Any, format: str
) -> None:
    # Each request repeats the conversation so far, tool calls included: reading it too
    # would count turn 1's call three times.
    path = write(tmp_path, "requests.jsonl", _logged_turns(wrap))
    fmt, sessions, calls, problems = read(path, format)
    assert (fmt, sessions, problems) == ("openai", ["requests.jsonl"], [])
    assert calls == [("requests.jsonl", "get_ticket", {"ticket_id": "T-4821"})] * 3


def test_one_response_object_and_a_list_of_them_are_documents(tmp_path: Path) -> None:
    one = _completion("search", '{"q": "weather"}', "call_1")
    assert read(write(tmp_path, "one.json", json.dumps(one)))[1:3] == (
        ["one.json"],
        [("one.json", "search", {"q": "weather"})],
    )
    pair = [{"request": _request([]), "response": one}] * 2
    assert len(read(write(tmp_path, "pair.json", json.dumps(pair)))[2]) == 2


def test_only_the_first_choice_of_a_completion_is_a_call_made(tmp_path: Path) -> None:
    response = _completion("a", "{}", "call_1")
    other = {"index": 1, "message": _completion("b", "{}", "call_2")["choices"][0]["message"]}
    response["choices"].append(other)  # n=2: an alternative the agent did not act on
    path = write(tmp_path, "n2.jsonl", json.dumps(response) + "\n")
    assert [tool for _, tool, _ in read(path)[2]] == ["a"]


def test_a_final_answer_is_a_response_without_calls(tmp_path: Path) -> None:
    answer = _completion("x", "{}", "call_1")
    answer["choices"][0]["message"] = {"role": "assistant", "content": "Done.", "refusal": None}
    lines = [_completion("search", "{}", "call_0"), answer]
    path = write(tmp_path, "log.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    assert [tool for _, tool, _ in read(path)[2]] == ["search"]


def test_response_logs_are_no_anthropic_transcript() -> None:
    path = FIXTURES / "openai_chat_completions.jsonl"
    with pytest.raises(ReaderError, match="no entry of format anthropic was found"):
        list(open_transcript(path, "anthropic"))


def test_streamed_chunks_are_not_taken_for_responses(tmp_path: Path) -> None:
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"delta": {}}]}
    path = write(tmp_path, "stream.jsonl", json.dumps(chunk) + "\n")
    with pytest.raises(ReaderError, match="not a recognised transcript"):
        list(open_transcript(path))
    with pytest.raises(ReaderError, match="no entry of format openai was found"):
        list(open_transcript(path, "openai"))


# --------------------------------------------------------------------------------------------
# Anthropic


def test_anthropic_conversation_tool_use_blocks() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "anthropic_conversation.json")
    assert fmt == "anthropic"
    assert sessions == ["anthropic_conversation.json"]
    assert [(tool, args) for _, tool, args in calls] == [
        ("list_directory", {"path": "src"}),
        ("read_file", {"path": "src/app.py"}),  # two tool_use blocks in one message
        ("read_file", {"path": "src/app.py"}),
        ("read_file", {"path": "src/app.py"}),
        ("run_tests", {"path": "tests"}),
        ("git_status", {}),  # a block without input
    ]
    assert problems == []


def test_format_option_restricts_what_is_read(tmp_path: Path) -> None:
    both = [
        {"role": "assistant", "tool_calls": [_tool_call("1", "{}")]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "g", "input": {}}],
        },
    ]
    path = write(tmp_path, "mixed.json", json.dumps(both))
    assert [t for _, t, _ in read(path, "openai")[2]] == ["f"]
    assert [t for _, t, _ in read(path, "anthropic")[2]] == ["g"]
    assert [t for _, t, _ in read(path, "auto")[2]] == ["f", "g"]


# --------------------------------------------------------------------------------------------
# Claude Code


def test_claude_code_session_with_duplicates_split_entries_and_inline_sidechain() -> None:
    fmt, sessions, calls, problems = read(CLAUDE_FILE)
    assert fmt == "claude-code"
    main, side = CLAUDE_SESSION, f"{CLAUDE_SESSION}/5d2e"
    assert sessions == [main, side]
    assert [(s, tool) for s, tool, _ in calls] == [
        (main, "Bash"),  # logged twice, one call
        (main, "Grep"),  # one message split over two entries
        (main, "Read"),
        (main, "Task"),
        (side, "Glob"),  # the subagent's calls are its own session
        (side, "Glob"),  # logged twice, one call
        (side, "Glob"),
        (main, "Grep"),
    ]
    # the last line was cut off mid-write: reported with its line number, the rest is kept
    assert len(problems) == 1
    assert problems[0].startswith(f"{CLAUDE_FILE}:22: not JSON")


def test_claude_code_subagent_file_is_its_own_session() -> None:
    fmt, sessions, calls, _ = read(CLAUDE_SUBAGENT)
    assert fmt == "claude-code"
    assert sessions == [f"{CLAUDE_SESSION}/9f01"]
    assert [tool for _, tool, _ in calls] == ["Bash", "Read"]


def test_claude_code_without_session_id_uses_the_file_name(tmp_path: Path) -> None:
    entry = {
        "type": "assistant",
        "uuid": "u1",
        "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
    }
    path = write(tmp_path, "old.jsonl", json.dumps(entry) + "\n" + json.dumps(entry) + "\n")
    fmt, sessions, calls, _ = read(path)
    assert (fmt, sessions, len(calls)) == ("claude-code", ["old.jsonl"], 1)


def _claude_entry(tool_id: str, command: str) -> str:
    block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
    entry = {
        "type": "assistant",
        "sessionId": "s",
        "uuid": tool_id,
        "message": {"content": [block]},
    }
    return json.dumps(entry) + "\n"


def test_claude_code_an_entry_logged_again_soon_after_is_one_call(tmp_path: Path) -> None:
    lines = [_claude_entry("toolu_first", "make")]
    lines += [_claude_entry(f"toolu_{n}", f"ls {n}") for n in range(1_000)]
    lines += [_claude_entry("toolu_first", "make")]  # logged again, a thousand calls later
    _, _, calls, _ = read(write(tmp_path, "s.jsonl", "".join(lines)))
    assert len(calls) == 1_001


def test_claude_code_memory_does_not_grow_with_the_session(tmp_path: Path) -> None:
    """A long session's tool_use ids are not all remembered: duplicates are logged soon."""

    def peak(entries: int) -> int:
        path = write(
            tmp_path,
            f"s{entries}.jsonl",
            "".join(_claude_entry(f"toolu_01{n:020d}", "pytest -q") for n in range(entries)),
        )
        tracemalloc.start()
        try:
            assert sum(1 for _ in open_transcript(path)) == entries
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(50_000) < peak(5_000) + 256 * 1024  # 45,000 more ids would be 4 MB or so


def test_claude_code_tool_use_without_id_counts_every_time(tmp_path: Path) -> None:
    block = {"type": "tool_use", "name": "Bash", "input": {"command": "make"}}
    entry = {"type": "assistant", "sessionId": "s", "message": {"content": [block, block]}}
    path = write(tmp_path, "s.jsonl", json.dumps(entry) + "\n")
    assert len(read(path)[2]) == 2


# --------------------------------------------------------------------------------------------
# jsonl


def test_jsonl_calls_sessions_and_bad_lines() -> None:
    fmt, sessions, calls, problems = read(FIXTURES / "calls.jsonl")
    assert fmt == "jsonl"
    # "session" names a session, else "agent" (a string or an object's id), else the file
    assert sessions == ["s1", "s2", "calls.jsonl"]
    weather = {"q": "weather"}
    assert calls == [
        ("s1", "search", weather),
        ("s1", "search", weather),  # "name" and "arguments" spellings
        ("s2", "search", weather),
        ("s1", "search", weather),
        ("calls.jsonl", "fetch", {"url": "https://example.com/forecast"}),
        ("s2", "search", weather),
    ]
    path = FIXTURES / "calls.jsonl"
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:4", f"{path}:7", f"{path}:8"]
    assert all(p.endswith("; skipped") for p in problems)


def test_jsonl_arguments_are_taken_as_they_are(tmp_path: Path) -> None:
    lines = [
        {"tool": "t", "args": '{"a": 1}'},  # a string stays a string in this format
        {"tool": "t"},  # no arguments: {}
        {"tool": "t", "args": None},
        {"tool": "t", "session": 7},
    ]
    path = write(tmp_path, "c.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    _, sessions, calls, _ = read(path)
    assert [a for *_, a in calls] == ['{"a": 1}', {}, None, {}]
    assert sessions == ["c.jsonl", "7"]


def test_problems_are_capped_per_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.jsonl", '{"tool": "t"}\n' + "oops\n" * 40)
    _, _, calls, problems = read(path)
    assert len(calls) == 1
    assert len(problems) == 6
    assert problems[-1] == f"{path}: 35 more problems like these; skipped"


def test_json_array_of_calls(tmp_path: Path) -> None:
    path = write(tmp_path, "calls.json", json.dumps([{"tool": "a", "args": {}}, {"tool": "b"}]))
    fmt, _, calls, _ = read(path)
    assert fmt == "jsonl"
    assert [t for _, t, _ in calls] == ["a", "b"]


# --------------------------------------------------------------------------------------------
# Auto-detection


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai_parallel_tools.json", "openai"),
        ("tau_bench_results.json", "openai"),
        ("openai_messages.jsonl", "openai"),
        ("anthropic_conversation.json", "anthropic"),
        ("openai_chat_completions.jsonl", "openai"),
        ("openai_responses.json", "openai"),
        ("calls.jsonl", "jsonl"),
        (f"claude_code/-home-lee-proj/{CLAUDE_SESSION}.jsonl", "claude-code"),
        (f"claude_code/-home-lee-proj/{CLAUDE_SESSION}/subagents/agent-9f01.jsonl", "claude-code"),
    ],
)
def test_auto_detection_per_file(name: str, expected: str) -> None:
    assert open_transcript(FIXTURES / name).format == expected


def test_auto_detection_does_not_depend_on_the_file_name(tmp_path: Path) -> None:
    # JSON Lines saved as .json, and a JSON document saved as .jsonl-less name
    lines = (FIXTURES / "calls.jsonl").read_text()
    assert read(write(tmp_path, "calls.json", lines))[0] == "jsonl"
    claude = CLAUDE_SUBAGENT.read_text()
    fmt, _sessions, calls, _ = read(write(tmp_path, "session.json", claude))
    assert (fmt, len(calls)) == ("claude-code", 2)
    doc = (FIXTURES / "anthropic_conversation.json").read_text()
    assert read(write(tmp_path, "conversation.txt", doc))[0] == "anthropic"


def test_auto_detection_looks_past_lines_that_decide_nothing(tmp_path: Path) -> None:
    head = '{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}\n'
    body = CLAUDE_SUBAGENT.read_text()
    assert read(write(tmp_path, "s.jsonl", head + body))[0] == "claude-code"
    plain = '{"role": "user", "content": "hi"}\n' * 3
    tool_use = {"role": "assistant", "content": [{"type": "tool_use", "name": "x", "id": "1"}]}
    fmt, _, calls, _ = read(write(tmp_path, "a.jsonl", plain + json.dumps(tool_use) + "\n"))
    assert (fmt, len(calls)) == ("anthropic", 1)


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    # a jsonl line with a "type" and "uuid" looks like Claude Code; --format jsonl reads calls
    line = {"type": "tool_call", "uuid": "1", "name": "search", "arguments": {"q": 1}}
    path = write(tmp_path, "own-log.jsonl", json.dumps(line) + "\n")
    assert read(path, "jsonl")[2] == [("own-log.jsonl", "search", {"q": 1})]


def test_every_format_name_is_accepted_and_no_other() -> None:
    assert FORMATS == ("auto", "jsonl", "openai", "anthropic", "claude-code")
    with pytest.raises(ValueError, match="unknown transcript format"):
        open_transcript(FIXTURES / "calls.jsonl", "csv")


# --------------------------------------------------------------------------------------------
# Files that are not transcripts


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("random.json", os.urandom(512) + b"\xff", "not JSON"),
        ("random.jsonl", b"\x00\x81\xfe garbage\n\xff\xfe\n", "not JSON Lines"),
        ("truncated.json", b'{"messages": [{"role": "user", "content": "hi"', "not JSON"),
        ("number.json", b"42", "not a transcript: the file holds a JSON number"),
        ("other.json", b'{"name": "my-package", "version": "1.0.0"}', "not a recognised"),
        ("ints.json", b"[1, 2, 3]", "not a recognised transcript (an array of numbers)"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
        ("strings.jsonl", b'"a"\n"b"\n', "not a recognised transcript"),
        ("latin1.json", '{"x": "caf\xe9"}'.encode("latin-1"), "not JSON"),
    ],
)
def test_garbage_files_raise_reader_error_naming_the_path(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(ReaderError) as caught:
        list(open_transcript(path))
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert reason in caught.value.reason
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("c.json", b'{"tool": "a\x01"}', "not JSON (Invalid control character at line 1 column 12"),
        ("c.json", b'{"tool": "a', "not JSON (Unterminated string starting at line 1 column 10)"),
        ("c.json", b'{"tool": }', "not JSON (Expecting value at line 1 column 10)"),
    ],
)
def test_json_errors_are_worded_once(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    # json's own messages end in "at" before the position ("Invalid control character at")
    with pytest.raises(ReaderError) as caught:
        open_transcript(write(tmp_path, name, content))
    assert caught.value.reason.startswith(reason)
    assert " at at " not in caught.value.reason


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match="cannot read the file"):
        open_transcript(tmp_path / "nope.jsonl")
    with pytest.raises(ReaderError, match="cannot read the file"):
        open_transcript(tmp_path)


def test_a_wrong_shape_for_the_format_given_is_no_entry_of_it(tmp_path: Path) -> None:
    path = write(tmp_path, "x.json", '{"tool": "search"}')
    with pytest.raises(ReaderError, match="no entry of format openai was found"):
        list(open_transcript(path, "openai"))


@pytest.mark.parametrize(
    ("name", "format", "looks_like"),
    [
        ("calls.jsonl", "claude-code", "jsonl"),
        ("calls.jsonl", "openai", "jsonl"),
        ("anthropic_conversation.json", "openai", "anthropic"),
        ("openai_parallel_tools.json", "anthropic", "openai"),
        ("openai_messages.jsonl", "anthropic", "openai"),
        ("openai_messages.jsonl", "claude-code", "openai"),
        ("tau_bench_results.json", "jsonl", "openai"),
        (f"claude_code/-home-lee-proj/{CLAUDE_SESSION}.jsonl", "jsonl", "claude-code"),
        (f"claude_code/-home-lee-proj/{CLAUDE_SESSION}.jsonl", "openai", "claude-code"),
    ],
)
def test_a_file_with_no_entry_of_the_format_it_is_read_as_is_unreadable(
    name: str, format: str, looks_like: str
) -> None:
    path = FIXTURES / name
    problems: list[str] = []
    with pytest.raises(ReaderError) as caught:
        list(open_transcript(path, format, on_problem=problems.append))
    assert str(caught.value) == (
        f"{path}: no entry of format {format} was found "
        f"(it looks like {looks_like}: try --format {looks_like})"
    )
    assert problems == []  # one error for the file, not every line of it "skipped" first


def test_a_file_with_no_usable_entry_of_the_detected_format_is_unreadable(tmp_path: Path) -> None:
    path = write(tmp_path, "c.jsonl", '{"tool": "", "args": {}}\n' * 3)
    with pytest.raises(ReaderError, match=r"c\.jsonl: no entry of format jsonl was found$"):
        list(open_transcript(path))


def test_a_chat_without_tool_calls_is_still_a_chat_of_either_format(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = write(tmp_path, "chat.json", json.dumps(chat))
    for format in ("auto", "openai", "anthropic"):
        assert read(path, format)[1:] == (["chat.json"], [], [])


def test_a_summary_only_claude_code_file_is_claude_code(tmp_path: Path) -> None:
    line = {"type": "summary", "summary": "Fix the test", "leafUuid": "0b7d5c2e"}
    path = write(tmp_path, "s.jsonl", json.dumps(line) + "\n")
    assert read(path, "claude-code")[1:] == ([], [], [])


def test_problems_before_the_first_call_come_in_order_once_the_file_shows_its_format(
    tmp_path: Path,
) -> None:
    lines = ["oops", '{"tool": "a"}', "[1]", '{"tool": "b"}']
    path = write(tmp_path, "c.jsonl", "\n".join(lines) + "\n")
    _, _, calls, problems = read(path, "jsonl")
    assert [tool for _, tool, _ in calls] == ["a", "b"]
    assert [p.split(": ")[0] for p in problems] == [f"{path}:1", f"{path}:3"]


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("e.json", b"", "the file is empty"),
        ("e.jsonl", b"", "the file is empty"),
        ("e.json", b"\n  \n", "the file is empty"),
        ("e.ndjson", b"\n\n", "the file is empty"),
        ("e.json", b"[]", "the file holds an empty array"),
    ],
)
@pytest.mark.parametrize("format", ["auto", "jsonl", "claude-code"])
def test_empty_files_are_unreadable(
    tmp_path: Path, name: str, content: bytes, why: str, format: str
) -> None:
    # An empty log is no evidence that the agent did not loop: it is said, not "0 calls".
    path = write(tmp_path, name, content)
    of = "any format" if format == "auto" else f"format {format}"
    if content == b"[]" and format != "auto":
        why = ""  # read as the format asked for, whose reader finds nothing in it
    with pytest.raises(ReaderError) as caught:
        list(open_transcript(path, format))
    assert str(caught.value) == f"{path}: no entry of {of} was found" + (f" ({why})" if why else "")


def test_reader_error_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(ReaderError("a.json", "not JSON")))
    assert (error.path, error.reason, str(error)) == ("a.json", "not JSON", "a.json: not JSON")


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=2048),
    suffix=st.sampled_from([".json", ".jsonl", ".ndjson", ".log"]),
    format=st.sampled_from(FORMATS),
)
def test_arbitrary_bytes_only_ever_raise_reader_error(
    tmp_path: Path, data: bytes, suffix: str, format: str
) -> None:
    path = tmp_path / f"t{suffix}"
    path.write_bytes(data)
    try:
        for call in open_transcript(path, format, on_problem=lambda message: None):
            assert isinstance(call, RecordedCall)
            assert isinstance(call.tool, str) and call.tool
    except ReaderError:
        pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "type",
                    "id",
                    "input",
                    "messages",
                    "traj",
                    "tool",
                    "args",
                    "session",
                    "agent",
                    "sessionId",
                    "agentId",
                    "isSidechain",
                    "message",
                    "uuid",
                    "task_id",
                ]
            )
            | st.text(max_size=4),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_JSON, max_size=6),
    as_lines=st.booleans(),
    format=st.sampled_from(FORMATS),
)
def test_arbitrary_json_of_transcript_shape_never_crashes(
    tmp_path: Path, values: list[Any], as_lines: bool, format: str
) -> None:
    if as_lines:
        path = tmp_path / "t.jsonl"
        path.write_text("".join(json.dumps(v) + "\n" for v in values))
    else:
        path = tmp_path / "t.json"
        path.write_text(json.dumps(values))
    try:
        transcript = open_transcript(path, format, on_problem=lambda message: None)
        calls = list(transcript)
    except ReaderError:
        return
    for call in calls:
        assert 0 <= call.session < len(transcript.sessions)
        assert isinstance(call.tool, str) and call.tool


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_JSON, max_size=6),
    as_lines=st.booleans(),
    blank=st.sampled_from(["", "\n", " \n\n"]),
    format=st.sampled_from(FORMATS),
)
def test_a_stream_is_read_as_the_same_bytes_in_a_file(
    tmp_path: Path, values: list[Any], as_lines: bool, blank: str, format: str
) -> None:
    """Standard input, a pipe: read from the stream as they would be from a file."""
    if as_lines:
        content = blank + "".join(json.dumps(v) + "\n" for v in values)
    else:
        content = blank + json.dumps(values, indent=1)
    path = write(tmp_path, "t.json", content)

    def outcome(stream: Any) -> Any:
        problems: list[str] = []
        try:
            transcript = open_transcript(path, format, on_problem=problems.append, stream=stream)
            calls = [(c.session, c.tool, json.dumps(c.arguments)) for c in transcript]
        except ReaderError as error:
            return str(error), problems
        return transcript.format, transcript.sessions, calls, problems

    stream = io.BytesIO(content.encode())
    assert outcome(stream) == outcome(None)
    assert not stream.closed  # the caller's


def test_json_lines_on_a_stream_are_streamed_not_loaded() -> None:
    line = json.dumps({"tool": "search", "args": {"q": "x" * 200}, "session": "s"}) + "\n"
    content = (line * 40_000).encode()  # about 9 MB, no file name to say it is JSON Lines
    stream = io.BytesIO(content)
    tracemalloc.start()
    try:
        count = sum(1 for _ in open_transcript("<stdin>", stream=stream))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 40_000
    assert peak < len(content) // 10


@pytest.mark.parametrize("name", ["calls.jsonl", "calls.json"])
def test_an_error_of_the_problem_callback_is_its_own_not_the_files(
    tmp_path: Path, name: str
) -> None:
    """An OSError raised by on_problem (a closed pipe, a full disk) is not "cannot read"."""
    full = OSError(28, "No space left on device")

    def on_problem(message: str) -> None:
        raise full

    records = [{"tool": "a"}, 7, {"tool": "b"}]  # 7 is no call: a problem to report
    if name.endswith(".jsonl"):
        path = write(tmp_path, name, "".join(json.dumps(r) + "\n" for r in records))
    else:
        path = write(tmp_path, name, json.dumps(records))  # one JSON document
    transcript = open_transcript(path, "jsonl", on_problem=on_problem)
    with pytest.raises(OSError) as raised:
        list(transcript)
    assert raised.value is full


# --------------------------------------------------------------------------------------------
# Streaming


def test_jsonl_is_streamed_not_loaded(tmp_path: Path) -> None:
    """Memory while reading a JSON Lines file does not grow with the file."""
    line = json.dumps({"tool": "search", "args": {"q": "x" * 200}, "session": "s"}) + "\n"
    small = write(tmp_path, "small.jsonl", line * 2_000)
    large = write(tmp_path, "large.jsonl", line * 40_000)  # about 9 MB

    def peak(path: Path) -> int:
        tracemalloc.start()
        try:
            count = sum(1 for _ in open_transcript(path))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert count > 0

    assert peak(large) < 2 * peak(small) + 256 * 1024
    assert peak(large) < large.stat().st_size // 10


def test_lines_read_to_detect_the_format_are_let_go(tmp_path: Path) -> None:
    """The lines auto-detection reads first are not held until the end of the file."""
    big = json.dumps({"role": "user", "content": "x" * 200_000}) + "\n"
    call = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
    path = write(tmp_path, "chat.jsonl", big * 30 + (json.dumps(call) + "\n") * 2_000)
    tracemalloc.start()
    try:
        calls = iter(open_transcript(path))
        for _ in itertools.islice(calls, 1_000):
            pass
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert sum(1 for _ in calls) == 1_000
    assert held < 2_000_000  # the 30 user lines are 6 MB


@pytest.mark.parametrize("read_first", [0, 1, 3])
def test_close_releases_the_file_however_far_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_first: int
) -> None:
    """Closing a transcript closes its file, also before the first call was read."""
    from dsh_loop_brake.replay import readers

    opened: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        file = open(*args, **kwargs)  # noqa: SIM115 - the reader under test must close it
        opened.append(file)
        return file

    monkeypatch.setattr(readers, "open", spy, raising=False)
    path = write(tmp_path, "c.jsonl", '{"tool": "a"}\n' * 5)
    transcript = open_transcript(path)
    assert [call.tool for call in itertools.islice(transcript, read_first)] == ["a"] * read_first
    [file] = opened
    assert not file.closed
    transcript.close()
    assert file.closed


def test_overlong_line_is_skipped_without_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_loop_brake.replay import _jsonlines

    monkeypatch.setattr(_jsonlines, "MAX_LINE_BYTES", 1024)
    path = write(
        tmp_path,
        "c.jsonl",
        '{"tool": "a"}\n' + '{"tool": "b", "args": "' + "x" * 5000 + '"}\n' + '{"tool": "c"}\n',
    )
    _, _, calls, problems = read(path)
    assert [t for _, t, _ in calls] == ["a", "c"]
    assert problems == [f"{path}:2: longer than the line limit of 1 KiB; skipped"]


# Lines that test the block reader: every one is read as it would be on its own.
_ODD_LINES = [
    b'{"tool": "a", "session": "s"}',
    b"",
    b'  {"tool": "leading spaces"}',
    b'{"tool": "crlf"}\r',
    b'{"tool": "form feed after"}\x0c',
    b'{"tool": "nul after"}\x00',
    b'{"tool": "nul \x00 inside"}',
    b'{"tool": "not utf-8 \xff"}',
    b'{"tool": "caf\xc3\xa9"}',
    b'{"tool": "spans",',  # a value over two lines is two bad lines, not one value
    b'"session": "s"}',
    b'{"tool": "x"} {"tool": "y"}',
    b"[1, 2",
    b"3]",
    b'{"tool": "last, without a newline"}',
]


@pytest.mark.parametrize("block", [1, 5, 23, 64, 1 << 16])
def test_lines_read_in_blocks_read_as_each_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    from dsh_loop_brake.replay import _jsonlines

    monkeypatch.setattr(_jsonlines, "BLOCK_BYTES", block)
    path = write(tmp_path, "c.jsonl", b"\n".join(_ODD_LINES))
    _, sessions, calls, problems = read(path, "jsonl")
    assert sessions == ["s", "c.jsonl"]
    assert [tool for _, tool, _ in calls] == [
        "a",
        "leading spaces",
        "crlf",
        "form feed after",
        "café",
        "last, without a newline",
    ]
    # bad lines in line order, numbered as lines (the blank line 2 counts), worded as before
    assert problems == [
        f"{path}:6: not JSON (Extra data at column 22); skipped",
        f"{path}:7: not JSON (Invalid control character at column 15); skipped",
        f"{path}:8: not UTF-8 text; skipped",
        f"{path}:10: not JSON (Expecting property name enclosed in double quotes at column 1); "
        "skipped",
        f"{path}:11: not JSON (Extra data at column 10); skipped",
        f"{path}: 3 more problems like these; skipped",  # lines 12, 13 and 14
    ]


@pytest.mark.parametrize("block", [1, 13, 1 << 16])
def test_carriage_returns_end_a_line_only_when_the_newline_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    from dsh_loop_brake.replay import _jsonlines

    monkeypatch.setattr(_jsonlines, "BLOCK_BYTES", block)
    lines = [b'{"tool": "a"}\r', b'{"tool": "b"}\r ', b'{"tool": "c"}\r\r', b'{"tool": "d"}\rx']
    path = write(tmp_path, "c.jsonl", b"\n".join(lines) + b"\r\n")
    _, _, calls, problems = read(path, "jsonl")
    # as json.loads has each line: whitespace after the value is fine, anything else is not
    assert [tool for _, tool, _ in calls] == ["a", "b", "c"]
    assert problems == [f"{path}:4: not JSON (Extra data at column 15); skipped"]


def _tool_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}
