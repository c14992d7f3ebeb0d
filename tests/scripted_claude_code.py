"""Claude Code's side of the Claude Agent SDK's connection, scripted: a ``Transport``.

Claude Code (the CLI the SDK drives) needs an account, so offline it is played by this class: a
``Transport`` (the SDK's public seam for reaching Claude Code some other way) that answers the
SDK's ``initialize``, then for each user message plays a scripted model's turns — before each
tool call it sends the ``hook_callback`` requests Claude Code sends to the SDK, and runs the
call only when no hook denied it. Used by the adapter tests and by ``benchmarks/adapters.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from claude_agent_sdk import PreToolUseHookInput, Transport

SESSION = "5f1c2a9e-session"  # the session id Claude Code puts in every message and hook input


def pre_tool_use(
    tool_input: dict[str, Any],
    *,
    tool_name: str = "Bash",
    session_id: str = SESSION,
    agent_id: str | None = None,
    tool_use_id: str = "toolu_01",
) -> PreToolUseHookInput:
    """A PreToolUse input as Claude Code sends it."""
    event = PreToolUseHookInput(
        session_id=session_id,
        transcript_path=f"/home/dev/.claude/projects/app/{session_id}.jsonl",
        cwd="/home/dev/app",
        permission_mode="default",
        hook_event_name="PreToolUse",
        tool_name=tool_name,
        tool_input=tool_input,
        tool_use_id=tool_use_id,
    )
    if agent_id is not None:
        event["agent_id"] = agent_id
        event["agent_type"] = "general-purpose"
    return event


Call = tuple[str, dict[str, Any]]  # (tool name, tool input) as the model asks for it


class ScriptedClaudeCode(Transport):
    """Claude Code's side of the SDK's stdio protocol, with a scripted model and tools.

    ``prompts`` holds, for each user message the SDK writes, the model's turns: each turn is the
    tool calls it makes at once. Before running a call it asks every registered ``PreToolUse``
    hook (all of one turn's calls at once), as Claude Code does; a call a hook denies does not
    run and the model gets the reason as the tool's error result; a hook answering
    ``"continue": false`` ends the run after that turn. Everything the SDK writes back is kept
    as it arrived on the wire (``answers``).
    """

    def __init__(
        self, prompts: Sequence[Sequence[Sequence[Call]]], *, agent_id: str | None = None
    ) -> None:
        self.prompts = list(prompts)
        self.agent_id = agent_id
        self.ran: list[dict[str, Any]] = []  # the inputs of the calls the CLI ran
        self.answers: list[dict[str, Any]] = []  # every hook answer, as written by the SDK
        self.stopped_with: str | None = None
        self._hooks: list[str] = []
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count()
        self._outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._runs: list[asyncio.Task[None]] = []

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def write(self, data: str) -> None:
        message = json.loads(data)
        if message["type"] == "control_request":
            request = message["request"]
            assert request["subtype"] == "initialize", request
            for matcher in (request.get("hooks") or {}).get("PreToolUse", []):
                assert matcher["matcher"] is None  # every tool
                self._hooks += matcher["hookCallbackIds"]
            self._reply(message["request_id"], {"commands": []})
        elif message["type"] == "control_response":
            response = message["response"]
            self._pending.pop(response["request_id"]).set_result(response)
        elif message["type"] == "user":
            self._runs.append(asyncio.ensure_future(self._run(self.prompts.pop(0))))

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self._outbox.get()) is not None:
            yield message

    async def end_input(self) -> None:
        # stdin closed: the CLI finishes the run under way, then exits (its stdout ends).
        runs = list(self._runs)

        async def finish() -> None:
            await asyncio.gather(*runs)
            self._outbox.put_nowait(None)

        self._runs.append(asyncio.ensure_future(finish()))

    async def close(self) -> None:
        for run in self._runs:
            run.cancel()
        self._outbox.put_nowait(None)

    # -- the CLI's side --

    def _send(self, message: dict[str, Any]) -> None:
        self._outbox.put_nowait({**message, "session_id": SESSION})

    def _reply(self, request_id: str, response: dict[str, Any]) -> None:
        self._outbox.put_nowait(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    async def _run(self, turns: Sequence[Sequence[Call]]) -> None:
        for turn in turns:
            uses = [
                {"type": "tool_use", "id": f"toolu_{next(self._ids)}", "name": name, "input": args}
                for name, args in turn
            ]
            self._send(
                {
                    "type": "assistant",
                    "message": {"role": "assistant", "model": "claude-scripted", "content": uses},
                    "parent_tool_use_id": None,
                }
            )
            answers = await asyncio.gather(*(self._ask_hooks(use) for use in uses))
            results = [
                self._result(use, of_hooks) for use, of_hooks in zip(uses, answers, strict=True)
            ]
            self._send(
                {
                    "type": "user",
                    "message": {"role": "user", "content": results},
                    "parent_tool_use_id": None,
                }
            )
            if self.stopped_with is not None:
                break
        else:
            self._send(
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "model": "claude-scripted",
                        "content": [{"type": "text", "text": "done"}],
                    },
                    "parent_tool_use_id": None,
                }
            )
        self._send(
            {
                "type": "result",
                "subtype": "success",
                "duration_ms": 1,
                "duration_api_ms": 1,
                "is_error": False,
                "num_turns": len(turns),
                "result": "done",
            }
        )

    async def _ask_hooks(self, use: dict[str, Any]) -> list[dict[str, Any]]:
        event = pre_tool_use(
            use["input"], tool_name=use["name"], tool_use_id=use["id"], agent_id=self.agent_id
        )
        answers = []
        for callback_id in self._hooks:
            request_id = f"cli-{next(self._ids)}"
            self._pending[request_id] = asyncio.get_running_loop().create_future()
            self._outbox.put_nowait(
                {
                    "type": "control_request",
                    "request_id": request_id,
                    "request": {
                        "subtype": "hook_callback",
                        "callback_id": callback_id,
                        "input": dict(event),
                        "tool_use_id": use["id"],
                    },
                }
            )
            response = await self._pending[request_id]
            assert response["subtype"] == "success", response
            answers.append(response["response"])
        self.answers += answers
        return answers

    def _result(self, use: dict[str, Any], answers: list[dict[str, Any]]) -> dict[str, Any]:
        reasons = [
            a["hookSpecificOutput"]["permissionDecisionReason"]
            for a in answers
            if a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"
        ]
        for answer in answers:
            if answer.get("continue") is False:
                self.stopped_with = answer.get("stopReason", "")
        if reasons:
            return {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "content": reasons[0],
                "is_error": True,
            }
        self.ran.append(use["input"])
        return {"type": "tool_result", "tool_use_id": use["id"], "content": "ok"}
