"""The ``mcp-proxy`` subcommand: its options (``add_arguments``) and what it does (``run``).

``dsh-loop-brake mcp-proxy [--profile NAME] [--home DIR] [--max-repeats N] -- COMMAND [ARG...]``
starts COMMAND, a stdio MCP server, and stands between it and the MCP client that started the
proxy. Exit status: the server's (128 + N when a signal N ended it); 2 for a usage or
configuration mistake, found before the server is started; 127 when COMMAND is not found, 126
when it cannot be run (as ``env`` and ``timeout`` do).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Final

from dsh_loop_brake._short_repr import json_literal
from dsh_loop_brake.exits import EXIT_USAGE, error_line, one_line, write_line
from dsh_loop_brake.loop_brake import normalize_max_repeats
from dsh_loop_brake.profile_options import add_profile_options

__all__ = ["NOTE_PREFIX", "add_arguments", "run"]

NOTE_PREFIX: Final = "dsh-loop-brake mcp-proxy: "
"""How each line the proxy writes while it runs starts (the server's stderr is mixed in)."""

EXIT_CANNOT_RUN: Final = 126
EXIT_NOT_FOUND: Final = 127


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``mcp-proxy`` options to ``parser``."""
    parser.usage = "%(prog)s [--profile NAME] [--home DIR] [--max-repeats N] -- COMMAND [ARG...]"
    add_profile_options(parser, patches=False)
    parser.add_argument(
        "--max-repeats",
        metavar="N",
        default=None,
        help="deny the Nth identical call in a row (overrides the profile's loop-brake row)",
    )
    parser.add_argument(
        "server",  # not "command": the command line keeps the subcommand's name there
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARG...]",
        help="the stdio MCP server to start and brake",
    )


def run(args: argparse.Namespace) -> int:
    """Proxy one MCP session; the server's exit status."""
    from dsh_loop_brake import Brakes, LoopBrake
    from dsh_loop_brake.mcp_proxy._pump import Proxy
    from dsh_loop_brake.mcp_proxy._session import ProxySession

    command = list(args.server)
    if command[:1] == ["--"]:
        del command[0]
    if not command:
        _error("no server to start: give its command after --, e.g. -- npx -y SERVER")
        return EXIT_USAGE
    max_repeats = (
        None
        if args.max_repeats is None
        else normalize_max_repeats(args.max_repeats, source="--max-repeats")
    )
    with Brakes.from_profile(args.profile, home=args.home) as brakes:
        if max_repeats is not None:
            # Other teeth, the same memory: the row's store (and with it its session TTL).
            replaced = brakes.loop_brake
            store = None if replaced is None else replaced.store
            brakes.loop_brake = LoopBrake(max_repeats, store=store)
        # One proxy process is one session: its own id, so proxies sharing a store never
        # share a streak or a breaker's count.
        note = _notes()
        session = ProxySession(brakes, f"mcp-proxy/{uuid.uuid4().hex}", note)
        try:
            protocol_out = _claim_stdout()
        except OSError:
            _error("standard output is closed, so no client could hear the server; start it open")
            return EXIT_USAGE
        try:
            proxy = Proxy(command, session, note, client_in=0, client_out=protocol_out)
            try:
                return proxy.run()
            except OSError as error:
                _error(f"cannot start {json_literal(command[0])}: {error.strerror or error}")
                return EXIT_NOT_FOUND if isinstance(error, FileNotFoundError) else EXIT_CANNOT_RUN
        finally:
            _release_stdout(protocol_out)


def _error(message: str) -> None:
    """A mistake found before the session starts: ``error: ...``, as every command says it."""
    write_line(error_line(message), sys.stderr)


def _notes() -> Callable[[str], None]:
    """What the proxy says while it runs: one line on stderr per call, whole, from any thread."""
    lock = threading.Lock()

    def note(text: str) -> None:
        with lock:
            write_line(NOTE_PREFIX + one_line(text), sys.stderr)

    return note


def _claim_stdout() -> int:
    """A descriptor onto the real stdout, for protocol only; fd 1 then points at stderr.

    Whatever else writes to ``sys.stdout`` or fd 1 by mistake (a library's print) lands on
    stderr instead of corrupting the client's stream.
    """
    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    return protocol


def _release_stdout(protocol: int) -> None:
    try:
        sys.stdout.flush()
        os.dup2(protocol, 1)
    except (OSError, ValueError):
        pass
    finally:
        os.close(protocol)
