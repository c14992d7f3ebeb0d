"""Newline-delimited messages read from a file descriptor, as the bytes that arrived.

The stdio transport puts one JSON-RPC message on each line. The proxy forwards what it reads
byte for byte, so a line is handed on with its own terminator (``\\n`` or ``\\r\\n``), and a last
line without one stays without one.

A line longer than the inspection limit is never held whole: it goes on in pieces as it
arrives (``whole=False``), so a huge message costs the proxy at most the limit in memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

__all__ = ["CHUNK_SIZE", "Segment", "read_fd", "segments"]

CHUNK_SIZE: Final = 1 << 16


class Segment(NamedTuple):
    """Bytes to pass on: one whole line (``whole``), or a piece of a line over the limit."""

    data: bytes
    whole: bool


def read_fd(fd: int) -> Callable[[int], bytes]:
    """``os.read`` on ``fd``, where a descriptor that is closed or broken reads as the end.

    Reading the descriptor directly, not through ``sys.stdin``, holds no buffer lock: a thread
    blocked here never stops the interpreter from exiting.
    """

    def read(size: int) -> bytes:
        try:
            return os.read(fd, size)
        except OSError:  # EBADF (stdin closed at start), EIO, a reset connection
            return b""

    return read


def segments(read: Callable[[int], bytes], limit: int) -> Iterator[Segment]:
    """The lines that ``read`` delivers, until it returns ``b""``.

    A line of at most ``limit`` bytes (plus the last chunk read with its end) comes whole; a
    longer one comes as pieces, each no larger than ``limit`` plus one chunk.
    """
    pending = bytearray()  # the start of a line whose end has not arrived yet
    oversized = False  # the line in progress was already passed on in part
    while True:
        chunk = read(CHUNK_SIZE)
        if not chunk:
            break
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            line = chunk[start : end + 1]
            if pending:
                pending += line
                line = bytes(pending)
                pending.clear()
            yield Segment(line, not oversized)
            oversized = False
            start = end + 1
            end = chunk.find(b"\n", start)
        if start < len(chunk):
            pending += chunk[start:] if start else chunk
            if len(pending) > limit:
                yield Segment(bytes(pending), False)
                pending.clear()
                oversized = True
    if pending:
        yield Segment(bytes(pending), not oversized)
