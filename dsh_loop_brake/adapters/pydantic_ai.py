"""The brakes in pydantic-ai agents: a capability with a ``wrap_tool_execute`` hook.

``Agent(model, tools=[...], capabilities=[loop_brake_capability()])`` — the capability's
``wrap_tool_execute`` runs around every function tool call the agent executes, after the model's
arguments were validated and before the tool's own lifecycle (``before_tool_execute``, the body,
``after_tool_execute``). It declares itself outermost, so a capability that runs a tool again
(a retry) runs inside it and the call is still counted once. A denied call never runs: the
model gets a failed tool result carrying the denial (``ToolFailed``: not a retry prompt, and it
does not use up the tool's retries), or with ``on_deny="raise"`` the ``ToolCallDenied`` leaves
the run.

The session is the run's ``conversation_id`` (``agent.run(..., conversation_id=...)``, else the
one on ``message_history``, else a fresh one per run — so a conversation continued with
``message_history=result.all_messages()`` keeps its streak). ``session=`` (a function of the
``RunContext``) overrides it.

The call's identity is the tool name and the arguments the model sent (``call.args``), not the
validated Python values, which may hold types JSON cannot show (dates, models) and would make
the call unidentifiable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake.adapters._common import OnDeny, SessionRule, Verdicts, missing_framework

try:
    from pydantic_ai import RunContext, ToolFailed
    from pydantic_ai.capabilities import (
        AbstractCapability,
        CapabilityOrdering,
        ValidatedToolArgs,
        WrapToolExecuteHandler,
    )
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import ToolDefinition
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(__name__, "pydantic-ai", "pydantic-ai", "pydantic_ai", error) from error

__all__ = ["LoopBrakeCapability", "loop_brake_capability"]

_WHERE = "loop_brake_capability"


class LoopBrakeCapability(AbstractCapability[Any]):
    """Deny the tool calls the brakes deny, before the tool runs (see ``loop_brake_capability``)."""

    def __init__(
        self,
        brakes: Brakes | None = None,
        *,
        session: Callable[[RunContext[Any]], object] | None = None,
        on_deny: OnDeny = "message",
    ) -> None:
        self._verdicts = Verdicts(brakes, on_deny, where=_WHERE)
        self._session_rule = SessionRule(session, _conversation_id, where=_WHERE)

    @property
    def brakes(self) -> Brakes:
        """The brakes this capability counts calls in."""
        return self._verdicts.brakes

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds live brakes: not something an agent spec file can describe

    def get_ordering(self) -> CapabilityOrdering:
        # Outermost: a capability that retries or repeats a tool's execution does it inside.
        return CapabilityOrdering(position="outermost")

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Execute the call through ``handler`` unless the brakes deny it."""
        session_id = self._session_rule.session_id(ctx)
        denial = self._verdicts.judge(call.tool_name, call.args or {}, session_id)
        if denial is None:
            return await handler(args)
        del ctx, call, tool_def, args, handler  # a raised denial leaves no frame with arguments
        if self._verdicts.raises:
            raise denial
        raise ToolFailed(str(denial))

    def __repr__(self) -> str:
        return f"LoopBrakeCapability({self._verdicts.brakes!r})"


def _conversation_id(ctx: RunContext[Any]) -> object:
    """The run's conversation (given, or carried on its message history), else the run itself."""
    return ctx.conversation_id or ctx.run_id


def loop_brake_capability(
    brakes: Brakes | None = None,
    *,
    session: Callable[[RunContext[Any]], object] | None = None,
    on_deny: OnDeny = "message",
) -> LoopBrakeCapability:
    """A capability for ``Agent(..., capabilities=[...])`` that brakes every tool call."""
    return LoopBrakeCapability(brakes, session=session, on_deny=on_deny)
