"""What the proxy reads in a JSON-RPC line, and the answer it gives a denied ``tools/call``.

Only the few fields the proxy acts on are read: ``method``, ``id``, ``params.name``,
``params.arguments``, the continuation fields of a multi round-trip retry, the protocol version
(from ``initialize``'s result, or per request in ``params._meta`` from 2026-07-28 on) and a
result's ``resultType``. Everything else is the peers' business and passes on as it came.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = [
    "CONTINUATION_KEYS",
    "HANDSHAKE_VERSIONS",
    "NOT_JSON",
    "PROTOCOL_VERSION_META_KEY",
    "array_items",
    "denial",
    "encode",
    "id_key",
    "parse",
    "request_version",
]

HANDSHAKE_VERSIONS: Final = frozenset(("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"))
"""Protocol revisions negotiated by ``initialize``, whose results carry no ``resultType``.

From 2026-07-28 on every result must say ``"resultType"``; a version the proxy does not know
is taken to be one of those (the field is harmless to an older peer, its absence is not to a
newer one).
"""

PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
"""Where a 2026-07-28 request names its protocol version, inside ``params._meta``."""

CONTINUATION_KEYS: Final = ("inputResponses", "requestState")
"""The fields a client adds when it retries a request the server answered ``input_required``."""

NOT_JSON: Final = object()
"""What :func:`parse` returns for a line that is not one JSON value."""


def parse(line: bytes) -> Any:
    """The JSON value on ``line`` (UTF-8), or :data:`NOT_JSON`."""
    try:
        return json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return NOT_JSON


def id_key(value: object) -> tuple[bool, object] | None:
    """A request id as a dict key that keeps ``1`` and ``"1"`` apart; ``None`` if not an id."""
    if isinstance(value, str):
        return (True, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (False, value)
    return None


def request_version(params: dict[str, Any]) -> str | None:
    """The protocol version a 2026-07-28 request names in its ``_meta``, if it names one."""
    meta = params.get("_meta")
    if isinstance(meta, dict):
        version = meta.get(PROTOCOL_VERSION_META_KEY)
        if isinstance(version, str):
            return version
    return None


def denial(request_id: object, message: str, version: str | None) -> dict[str, Any]:
    """The response to a denied ``tools/call``: a tool result that failed, carrying ``message``.

    It is a result, not a JSON-RPC error, so the client hands it to the model as the tool's
    output (an error would read as a broken server).
    """
    result: dict[str, Any] = {"content": [{"type": "text", "text": message}], "isError": True}
    if version not in HANDSHAKE_VERSIONS:
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def encode(message: object) -> bytes:
    """One line of JSON, ASCII only: a tool name with a lone surrogate still encodes."""
    return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def array_items(line: bytes) -> list[bytes]:
    """The bytes of each element of the JSON array on ``line`` (already known to parse)."""
    text = line.decode("utf-8")
    decoder = json.JSONDecoder()
    items: list[bytes] = []
    index = _skip_space(text, 0) + 1  # past "["
    while True:
        index = _skip_space(text, index)
        if text[index] == "]":
            return items
        _, end = decoder.raw_decode(text, index)
        items.append(text[index:end].encode("utf-8"))
        index = _skip_space(text, end)
        if text[index] == ",":
            index += 1


def _skip_space(text: str, index: int) -> int:
    while text[index] in " \t\r\n":
        index += 1
    return index
