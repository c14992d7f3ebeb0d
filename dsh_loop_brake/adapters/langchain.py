"""The brakes in LangChain v1 agents: ``LoopBrakeMiddleware``, an ``AgentMiddleware``.

``create_agent(model, tools, middleware=[LoopBrakeMiddleware()])`` — its ``wrap_tool_call`` and
``awrap_tool_call`` run around every tool call the agent's ``ToolNode`` executes (they also serve
a bare ``ToolNode(tools, wrap_tool_call=m.wrap_tool_call, awrap_tool_call=m.awrap_tool_call)``).
A denied call never reaches the tool: the model gets ``ToolMessage(status="error")`` carrying
the denial, or with ``on_deny="raise"`` the ``ToolCallDenied`` leaves ``invoke``/``ainvoke``.

The session is the run's ``thread_id`` (``config={"configurable": {"thread_id": ...}}``), else
``"default"``; ``session=`` (a function of the ``ToolCallRequest``) overrides it.

A ``ToolNode`` runs one turn's tool calls concurrently (threads for ``invoke``, tasks for
``ainvoke``); each is counted once, as the brakes are thread-safe. A middleware that calls its
handler again (a retry) presents the same call again: it is answered with the first verdict and
not counted twice. Put this middleware first in the list, so that it is the outermost and a
retry middleware never sees its denial as a failure to retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake._errors import ToolCallDenied
from dsh_loop_brake.adapters._common import OnDeny, SessionRule, Verdicts, missing_framework

try:
    from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
    from langchain_core.messages import ToolMessage
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(__name__, "LangChain v1", "langchain", "langchain", error) from error

if TYPE_CHECKING:
    from langgraph.types import Command

__all__ = ["LoopBrakeMiddleware"]

_WHERE = "LoopBrakeMiddleware"


class LoopBrakeMiddleware(AgentMiddleware):
    """Deny the tool calls the brakes deny, before the tool runs."""

    def __init__(
        self,
        brakes: Brakes | None = None,
        *,
        session: Callable[[ToolCallRequest], object] | None = None,
        on_deny: OnDeny = "message",
    ) -> None:
        super().__init__()
        self._verdicts = Verdicts(brakes, on_deny, where=_WHERE)
        self._session_rule = SessionRule(session, _thread_id, where=_WHERE)

    @property
    def brakes(self) -> Brakes:
        """The brakes this middleware counts calls in."""
        return self._verdicts.brakes

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through ``handler`` unless the brakes deny it."""
        denial = self._judge(request)
        if denial is None:
            return handler(request)
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        del request, handler  # a raised denial leaves no frame of ours holding the arguments
        return self._denied(denial, name, call_id)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Await the call through ``handler`` unless the brakes deny it."""
        denial = self._judge(request)
        if denial is None:
            return await handler(request)
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        del request, handler
        return self._denied(denial, name, call_id)

    def _judge(self, request: ToolCallRequest) -> ToolCallDenied | None:
        call = request.tool_call
        name, arguments = call["name"], call.get("args")
        runtime = request.runtime
        session_id = self._session_rule.session_id(request)
        if runtime is None:  # outside a graph: nothing tells one presentation from another
            return self._verdicts.judge(name, arguments, session_id)
        # The ToolNode makes one runtime per call it executes; a handler called again (a retry
        # around this middleware) presents that same runtime, and that is not a new call.
        return self._verdicts.judge_once(
            ("runtime", id(runtime)), name, arguments, session_id, anchor=runtime
        )

    def _denied(self, denial: ToolCallDenied, name: str, call_id: str | None) -> ToolMessage:
        if self._verdicts.raises:
            raise denial
        return ToolMessage(content=str(denial), name=name, tool_call_id=call_id, status="error")

    def __repr__(self) -> str:
        return f"LoopBrakeMiddleware({self._verdicts.brakes!r})"


def _thread_id(request: ToolCallRequest) -> object:
    """The run's ``configurable.thread_id``, or ``None``."""
    config = getattr(request.runtime, "config", None)
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return configurable.get("thread_id") if isinstance(configurable, dict) else None
