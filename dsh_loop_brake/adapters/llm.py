"""The brakes in Simon Willison's ``llm``: a ``before_call`` hook for tool chains.

``model.chain(prompt, tools=[...], before_call=loop_brake_before_call())`` (also
``conversation.chain``, and the async models' chains: the hook is synchronous, which both
accept). llm calls it before each tool call; a denied call never runs: the hook raises
``llm.CancelToolCall`` with the denial, which llm hands the model as the call's result
(``"Cancelled: " + message``). With ``on_deny="raise"`` the ``ToolCallDenied`` leaves the chain.

llm does not tell the hook which conversation a call belongs to, so **one hook object is one
session**: make one per conversation (or per chain). ``session=`` chooses instead: a string (a
fixed session id, e.g. the conversation's id) or a function of ``(tool, tool_call)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, final

from dsh_loop_brake._brakes import Brakes
from dsh_loop_brake.adapters._common import (
    OnDeny,
    Verdicts,
    check_session,
    missing_framework,
    session_of,
)

try:
    import llm
except ImportError as error:  # pragma: no cover - exercised by the missing-extra test
    raise missing_framework(__name__, "llm", "llm", "llm", error) from error

__all__ = ["LoopBrakeBeforeCall", "loop_brake_before_call"]

_WHERE = "loop_brake_before_call"

SessionRule = str | Callable[[Any, Any], object]


@final
class LoopBrakeBeforeCall:
    """A ``before_call`` hook: ``hook(tool, tool_call)`` raises ``llm.CancelToolCall`` to deny."""

    __slots__ = ("_session", "_verdicts", "session_id")

    def __init__(
        self,
        brakes: Brakes | None = None,
        *,
        session: SessionRule | None = None,
        on_deny: OnDeny = "message",
    ) -> None:
        self._verdicts = Verdicts(brakes, on_deny, where=_WHERE)
        if isinstance(session, str):
            #: The session this hook counts its calls in (``None`` when ``session`` is a function).
            self.session_id: str | None = session_of(session)
            self._session: Callable[[Any, Any], object] | None = None
        else:
            self._session = check_session(session, _WHERE)
            self.session_id = f"llm-{uuid.uuid4().hex}" if session is None else None

    @property
    def brakes(self) -> Brakes:
        """The brakes this hook counts calls in."""
        return self._verdicts.brakes

    def __call__(self, tool: llm.Tool | None, tool_call: llm.ToolCall) -> None:
        session_id = self.session_id
        if session_id is None:
            assert self._session is not None
            session_id = session_of(self._session(tool, tool_call))
        denial = self._verdicts.judge(tool_call.name, tool_call.arguments, session_id)
        del tool, tool_call  # a raised denial leaves no frame holding the arguments
        if denial is None:
            return
        if self._verdicts.raises:
            raise denial
        raise llm.CancelToolCall(str(denial))

    def __repr__(self) -> str:
        return f"LoopBrakeBeforeCall({self._verdicts.brakes!r}, session_id={self.session_id!r})"


def loop_brake_before_call(
    brakes: Brakes | None = None,
    *,
    session: SessionRule | None = None,
    on_deny: OnDeny = "message",
) -> LoopBrakeBeforeCall:
    """A ``before_call`` hook for ``chain(...)``; one hook is one session unless ``session=``."""
    return LoopBrakeBeforeCall(brakes, session=session, on_deny=on_deny)
