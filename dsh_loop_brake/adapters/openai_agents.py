"""The brakes in the OpenAI Agents SDK: a tool input guardrail.

``brake_agent(agent)`` attaches one ``loop_brake_guardrail()`` to every function tool of the agent
(and to the tools of its MCP servers); ``FunctionTool(..., tool_input_guardrails=[guardrail])``
or ``@function_tool(tool_input_guardrails=[guardrail])`` attach it to one tool. The SDK runs the
guardrail before the tool's body; a denied call never runs, and the model reads the guardrail's
reject content — the denial's message — as the call's output. With ``on_deny="raise"`` the
denial leaves ``Runner.run`` as itself: it is raised as a ``ToolCallDenied`` that also is the
SDK's ``AgentsException`` (``AgentsLoopBrakeError`` for a loop-brake denial, which still is a
``LoopBrakeError``; ``AgentsCircuitBreakerError``; ``AgentsToolCallDenied`` for any other). Its
``run_data`` is always ``None``: the SDK's run transcript holds every call's arguments, and a
denial never does.

The session is one ``Runner.run``: a run and every handoff inside it share one streak; an agent
run as a tool (``agent.as_tool``) is a run of its own. A run resumed from a ``RunState`` is a new
run. ``session=`` (a function of the ``ToolContext``) chooses the session instead, e.g. a
conversation id from your run context.

The SDK runs one turn's function calls as concurrent tasks; the guardrail judges each call
without awaiting anything, so each is counted once. With ``RunConfig(tool_execution=
ToolExecutionConfig(pre_approval_tool_input_guardrails=True))`` the SDK runs a guardrail both
before asking for an approval and when the approved call runs: the second time the call is
answered with the first verdict, not counted again.

Exceptions::

    ToolCallDenied                 AgentsException (agents)
    │                              └── _WithoutRunData (run_data is always None)
    ├── LoopBrakeError                 │
    │   └── AgentsLoopBrakeError ──────┤
    ├── CircuitBreakerError            │
    │   └── AgentsCircuitBreakerError ─┤
    └── AgentsToolCallDenied ──────────┘
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake._breaker import CircuitBreakerError
from dsh_loop_brake._errors import LoopBrakeError, ToolCallDenied
from dsh_loop_brake.adapters._common import OnDeny, SessionRule, Verdicts, missing_framework

try:
    from agents import (
        Agent,
        AgentsException,
        FunctionTool,
        RunErrorDetails,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
    )
    from agents.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(
        __name__, "the OpenAI Agents SDK", "openai-agents", "agents", error
    ) from error

__all__ = [
    "AgentsCircuitBreakerError",
    "AgentsLoopBrakeError",
    "AgentsToolCallDenied",
    "brake_agent",
    "loop_brake_guardrail",
]

GUARDRAIL_NAME: Final = "dsh_loop_brake"

# Runs whose session this process remembers; the oldest is forgotten (and its streak with it).
_RUNS_LIMIT: Final = 4096


class _WithoutRunData(AgentsException):
    """An ``AgentsException`` that never holds the SDK's ``run_data``.

    ``Runner.run`` assigns ``run_data`` (a ``RunErrorDetails``: the run's input, items, raw model
    responses and context, every tool call's arguments included) to the ``AgentsException`` it
    lets out. A denial must never carry a call's arguments, and it is the likeliest thing to be
    logged or sent to an error tracker, so here the assignment is accepted and dropped: reading
    ``run_data`` always gives ``None``. The SDK only writes it, for the caller to read.
    """

    @property
    def run_data(self) -> RunErrorDetails | None:
        return None

    @run_data.setter
    def run_data(self, value: RunErrorDetails | None) -> None:
        del value  # dropped: the run's transcript holds the arguments this error must not hold


class AgentsLoopBrakeError(LoopBrakeError, _WithoutRunData):
    """A loop-brake denial raised out of ``Runner.run`` (``on_deny="raise"``)."""


class AgentsCircuitBreakerError(CircuitBreakerError, _WithoutRunData):
    """A circuit-breaker denial raised out of ``Runner.run`` (``on_deny="raise"``)."""


class AgentsToolCallDenied(ToolCallDenied, _WithoutRunData):
    """Any other denial raised out of ``Runner.run`` (``on_deny="raise"``)."""


def _as_agents_exception(denial: ToolCallDenied) -> ToolCallDenied:
    """The same denial (class, attributes, message) as an ``AgentsException`` too, which the SDK
    lets out of ``Runner.run`` as it is (anything else from a guardrail it wraps in a
    ``UserError``)."""
    if isinstance(denial, AgentsException):
        return denial
    raised = ToolCallDenied.__new__(_agents_kind(denial))
    raised.__dict__.update(vars(denial))
    raised.args = denial.args
    return raised


def _agents_kind(denial: ToolCallDenied) -> type[ToolCallDenied]:
    if isinstance(denial, LoopBrakeError):
        return AgentsLoopBrakeError
    if isinstance(denial, CircuitBreakerError):
        return AgentsCircuitBreakerError
    return AgentsToolCallDenied


class _Runs:
    """One session id per ``Runner.run``, told apart by the run's own tool-call bookkeeping.

    The SDK gives each run one context wrapper and shares that wrapper's record of tool
    invocations with every ``ToolContext`` it derives for the run's calls (an agent run as a tool
    gets a fresh one; a handoff keeps the run's). That record is what identifies the run here
    (falling back to the run's ``usage`` object, which nested runs share, should an SDK version
    not have it). Remembered strongly, so an ``id`` is never reused while it is held; bounded,
    the oldest forgotten together with its streak in the loop brake.
    """

    __slots__ = ("_lock", "_runs")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: OrderedDict[int, tuple[object, str]] = OrderedDict()

    def session(self, context: ToolContext[Any], brakes: Brakes) -> str:
        run = getattr(context, "_tool_invocations", None)
        if not isinstance(run, dict):
            run = context.usage
        key = id(run)
        forgotten: str | None = None
        with self._lock:
            held = self._runs.get(key)
            if held is not None and held[0] is run:
                self._runs.move_to_end(key)
                return held[1]
            session_id = f"run-{uuid.uuid4().hex}"
            self._runs[key] = (run, session_id)
            if len(self._runs) > _RUNS_LIMIT:
                forgotten = self._runs.popitem(last=False)[1][1]
        if forgotten is not None and brakes.loop_brake is not None:
            brakes.loop_brake.reset(forgotten)
        return session_id


def loop_brake_guardrail(
    brakes: Brakes | None = None,
    *,
    session: Callable[[ToolContext[Any]], object] | None = None,
    on_deny: OnDeny = "message",
) -> ToolInputGuardrail[Any]:
    """A tool input guardrail that denies the calls the brakes deny, before the tool runs."""
    where = "loop_brake_guardrail"
    verdicts = Verdicts(brakes, on_deny, where=where)
    runs = _Runs()
    session_rule = SessionRule(
        session, lambda context: runs.session(context, verdicts.brakes), where=where
    )

    def dsh_loop_brake(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        session_id = session_rule.session_id(context)
        name, arguments = context.tool_name, context.tool_arguments
        if _checks_before_approval(context):
            # The SDK may run this guardrail for one call twice: before the approval and again
            # when the approved call runs.
            key = (session_id, context.tool_call_id)
            denial = verdicts.judge_once(key, name, arguments, session_id)
        else:
            denial = verdicts.judge(name, arguments, session_id)
        del data, context, arguments  # a raised denial leaves no frame holding the arguments
        if denial is None:
            return ToolGuardrailFunctionOutput.allow()
        if verdicts.raises:
            raise _as_agents_exception(denial)
        return ToolGuardrailFunctionOutput.reject_content(str(denial), output_info=denial)

    return ToolInputGuardrail(guardrail_function=dsh_loop_brake, name=GUARDRAIL_NAME)


def brake_agent(
    agent: Agent[Any],
    brakes: Brakes | None = None,
    *,
    session: Callable[[ToolContext[Any]], object] | None = None,
    on_deny: OnDeny = "message",
    guardrail: ToolInputGuardrail[Any] | None = None,
) -> Agent[Any]:
    """Attach one loop-brake guardrail to every function tool of ``agent`` and its MCP servers.

    The agent is changed in place and returned: its function tools are replaced by copies that
    carry the guardrail (first in their list), so a tool object shared with another agent is
    left as it was; each MCP server of the agent gets the guardrail on the server itself. A
    loop-brake guardrail attached before is replaced, so braking an agent twice leaves one.
    ``guardrail`` reuses one made by ``loop_brake_guardrail`` (to brake several agents with one
    set of brakes and one session rule); otherwise one is made from the other arguments.
    """
    if guardrail is None:
        guardrail = loop_brake_guardrail(brakes, session=session, on_deny=on_deny)
    elif brakes is not None or session is not None or on_deny != "message":
        raise TypeError(
            "brake_agent: pass either guardrail= or brakes=/session=/on_deny=, not both"
        )
    tools: list[Any] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            tool = copy.copy(tool)
            tool.tool_input_guardrails = _with(tool.tool_input_guardrails, guardrail)
        tools.append(tool)
    agent.tools = tools
    for server in agent.mcp_servers:
        server.tool_input_guardrails = _with(server.tool_input_guardrails, guardrail)
    return agent


def _with(
    guardrails: list[ToolInputGuardrail[Any]] | None, guardrail: ToolInputGuardrail[Any]
) -> list[ToolInputGuardrail[Any]]:
    others = [g for g in guardrails or () if g.name != GUARDRAIL_NAME]
    # First: every call the model makes is counted, also one another guardrail goes on to reject.
    return [guardrail, *others]


def _checks_before_approval(context: ToolContext[Any]) -> bool:
    execution = getattr(context.run_config, "tool_execution", None)
    return bool(getattr(execution, "pre_approval_tool_input_guardrails", False))
