"""The brakes in Google's Agent Development Kit: a ``Runner`` plugin.

``App(name=..., root_agent=agent, plugins=[LoopBrakePlugin()])``, run by ``Runner(app=app, ...)``
(the older ``Runner(..., plugins=[...])`` works too) — ADK runs the plugin's
``before_tool_callback`` before every tool call of every agent of the app. A denied call never
runs: the callback answers for the tool, so the tool's response the model reads is
``{"error": MESSAGE}``. With ``on_deny="raise"`` the run stops with the denial: ADK wraps what a
plugin raises in a ``RuntimeError`` (naming the plugin), so the ``ToolCallDenied`` is that
error's ``__cause__``.

The session is ADK's session (``tool_context.session.id``); ``session=`` (a function of the
``ToolContext``) overrides it — for example to give each agent of a multi-agent session its
own streak: ``session=lambda ctx: f"{ctx.session.id}/{ctx.agent_name}"``.

ADK runs one turn's function calls concurrently; each is counted once. A call that asked for
confirmation (``require_confirmation``, or ``tool_context.request_confirmation()``) is presented
again once confirmed: it was counted when first presented, so it is not counted again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake.adapters._common import OnDeny, SessionRule, Verdicts, missing_framework

try:
    from google.adk.plugins import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(__name__, "Google ADK", "google-adk", "google.adk", error) from error

__all__ = ["LoopBrakePlugin"]

PLUGIN_NAME: Final = "dsh_loop_brake"

_WHERE = "LoopBrakePlugin"


class LoopBrakePlugin(BasePlugin):
    """Deny the tool calls the brakes deny, before the tool runs."""

    def __init__(
        self,
        brakes: Brakes | None = None,
        *,
        session: Callable[[ToolContext], object] | None = None,
        on_deny: OnDeny = "message",
        name: str = PLUGIN_NAME,
    ) -> None:
        super().__init__(name=name)
        self._verdicts = Verdicts(brakes, on_deny, where=_WHERE)
        self._session_rule = SessionRule(session, _adk_session, where=_WHERE)

    @property
    def brakes(self) -> Brakes:
        """The brakes this plugin counts calls in."""
        return self._verdicts.brakes

    async def before_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
    ) -> dict[str, Any] | None:
        """``None`` to let the call run, or the denial as the tool's response."""
        if tool_context.tool_confirmation is not None:
            return None  # a confirmed call presented again: it was counted when first presented
        session_id = self._session_rule.session_id(tool_context)
        denial = self._verdicts.judge(tool.name, tool_args, session_id)
        del tool, tool_args, tool_context  # a raised denial leaves no frame with the arguments
        if denial is None:
            return None
        if self._verdicts.raises:
            raise denial
        return {"error": str(denial)}


def _adk_session(tool_context: ToolContext) -> object:
    """ADK's own session: the one the tool context belongs to."""
    return tool_context.session.id
