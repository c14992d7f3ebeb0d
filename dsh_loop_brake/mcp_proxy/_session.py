"""One proxied MCP session: which client lines go on to the server, and which the proxy answers.

The client's lines are judged here; the server's lines are only watched, for the three things
the judging needs to know:

* the protocol version ``initialize`` negotiated (a denial's result is shaped for it; from
  2026-07-28 on, each request names its version itself);
* which ``tools/call`` the server answered ``"resultType": "input_required"``: the client's
  retry of such a call, carrying ``inputResponses``/``requestState``, continues it and is not a
  new call for the brakes (the multi round-trip requests of 2026-07-28);
* nothing else — a line is passed on as the bytes that came, whatever it holds.

No I/O happens here: :mod:`._pump` moves the bytes, this module decides.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from dsh_loop_brake import Brakes, ToolCallDenied
from dsh_loop_brake.loop_brake import call_hash
from dsh_loop_brake.mcp_proxy._messages import (
    CONTINUATION_KEYS,
    array_items,
    denial,
    encode,
    id_key,
    parse,
    request_version,
)

__all__ = ["ProxySession", "Routing"]

MAX_PENDING: Final = 4096
"""Requests awaiting the server's response that are remembered (a client that never hears back
from some cannot grow the proxy without bound; the oldest is forgotten first)."""

MAX_OPEN_CONTINUATIONS: Final = 1024
"""Calls answered ``input_required`` whose retry is still awaited, remembered at most."""

_IdKey = tuple[bool, object]


class Routing(NamedTuple):
    """Where one client line goes: on to the server, back to the client as the proxy's answer."""

    to_server: bytes | None
    to_client: bytes | None


class _Pending(NamedTuple):
    """A forwarded request whose response the session needs to see."""

    method: str
    tool: str = ""
    arguments: Any = None


class ProxySession:
    """The brakes, one session, and what the server's responses have said so far.

    ``from_client`` runs on the client's reading thread, ``from_server`` on the server's; they
    share the pending requests under one lock. ``note`` takes one line of diagnostics (never an
    argument: it gets denial messages, which carry none, and exception type names).
    """

    def __init__(self, brakes: Brakes, session_id: str, note: Callable[[str], None]) -> None:
        self._brakes = brakes
        self._session_id = session_id
        self._note = note
        self._lock = threading.Lock()
        self._pending: OrderedDict[_IdKey, _Pending] = OrderedDict()
        self._open: OrderedDict[str, int] = OrderedDict()  # call hash -> retries awaited
        self._version: str | None = None  # what initialize negotiated
        self._failures: set[str] = set()  # exception types the brakes failed with, said once

    @property
    def watching(self) -> bool:
        """Whether a server line may answer a request the session waits on (else: skip it)."""
        return bool(self._pending)

    # -----------------------------------------------------------------------------------------
    # client -> server

    def from_client(self, line: bytes) -> Routing:
        """Judge one whole line from the client."""
        message = parse(line)
        if isinstance(message, dict):
            answer = self._judge(message)
            return Routing(None, encode(answer)) if answer is not None else Routing(line, None)
        if isinstance(message, list) and message:
            return self._judge_batch(line, message)
        return Routing(line, None)  # not JSON-RPC: the server's to refuse

    def _judge_batch(self, line: bytes, batch: list[Any]) -> Routing:
        """A JSON-RPC batch (2025-03-26): denied calls answered together, the rest sent on."""
        answers = [self._judge(item) if isinstance(item, dict) else None for item in batch]
        if not any(answers):
            return Routing(line, None)
        items = zip(array_items(line), answers, strict=True)
        kept = [item for item, answer in items if answer is None]
        to_server = b"[" + b",".join(kept) + b"]\n" if kept else None
        return Routing(to_server, encode([answer for answer in answers if answer is not None]))

    def _judge(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The proxy's answer to a request it does not forward, or ``None`` to forward it."""
        method = message.get("method")
        key = id_key(message.get("id"))
        if method == "tools/call" and key is not None:
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                return self._tool_call(key, message["id"], params)
        elif method == "initialize" and key is not None:
            self._expect(key, _Pending("initialize"))
        elif method == "notifications/cancelled":
            params = message.get("params")
            cancelled = id_key(params.get("requestId")) if isinstance(params, dict) else None
            if cancelled is not None:
                with self._lock:
                    self._pending.pop(cancelled, None)
        return None

    def _tool_call(
        self, key: _IdKey, request_id: object, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        name: str = params["name"]
        arguments = params.get("arguments")
        if any(field in params for field in CONTINUATION_KEYS) and self._continues(name, arguments):
            self._expect(key, _Pending("tools/call", name, arguments))
            return None  # the retry of a call already counted
        version = request_version(params) or self._version
        try:
            self._brakes.check(name, arguments, session_id=self._session_id)
        except ToolCallDenied as denied:
            message = str(denied)  # never an argument: the brakes promise it
            self._note(f"denied a tools/call: {message}")
            return denial(request_id, message, version)
        except Exception as error:  # the brakes' own failure: fail open, say so once per type
            kind = type(error).__name__
            if kind not in self._failures:
                self._failures.add(kind)
                self._note(f"the brakes failed on a tools/call ({kind}); it was forwarded")
        self._expect(key, _Pending("tools/call", name, arguments))
        return None

    def _continues(self, name: str, arguments: Any) -> bool:
        """Whether this call retries one the server answered ``input_required`` (consumes it)."""
        digest = _call_digest(name, arguments)
        if digest is None:
            return False
        with self._lock:
            waiting = self._open.get(digest, 0)
            if not waiting:
                return False
            if waiting == 1:
                del self._open[digest]
            else:
                self._open[digest] = waiting - 1
            return True

    def _expect(self, key: _IdKey, pending: _Pending) -> None:
        with self._lock:
            self._pending[key] = pending
            self._pending.move_to_end(key)
            if len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)

    # -----------------------------------------------------------------------------------------
    # server -> client

    def from_server(self, line: bytes) -> None:
        """Watch one whole line from the server (it is forwarded as it is, whatever it says)."""
        message = parse(line)
        if isinstance(message, dict):
            self._observe(message)
        elif isinstance(message, list):
            for item in message:
                if isinstance(item, dict):
                    self._observe(item)

    def _observe(self, message: dict[str, Any]) -> None:
        if "method" in message:
            return  # a server request or notification: its id is the server's own
        key = id_key(message.get("id"))
        if key is None:
            return
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            return
        result = message.get("result")
        if not isinstance(result, dict):
            return  # an error response: nothing to continue
        if pending.method == "initialize":
            version = result.get("protocolVersion")
            if isinstance(version, str):
                self._version = version
        elif result.get("resultType") == "input_required":
            digest = _call_digest(pending.tool, pending.arguments)
            if digest is not None:
                with self._lock:
                    self._open[digest] = self._open.get(digest, 0) + 1
                    self._open.move_to_end(digest)
                    if len(self._open) > MAX_OPEN_CONTINUATIONS:
                        self._open.popitem(last=False)


def _call_digest(name: str, arguments: Any) -> str | None:
    try:
        return call_hash(name, arguments)
    except (TypeError, ValueError):  # JSON from the wire always hashes; be safe anyway
        return None
