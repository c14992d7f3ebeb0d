"""The server process and the two byte pumps between it and the client.

Three threads and the main one::

    client stdin ──[client pump]── ProxySession.from_client ──> server stdin
                                        └── a denial ──────────> client stdout
    server stdout ─[server pump]── ProxySession.from_server (watch only) ──> client stdout
    [reaper]  waits for the server to exit
    main      waits for one side to close, stops the server if need be, forwards signals

Either side closing ends the session. The server exiting (or closing its stdout): the rest of
its output is passed on, the proxy answers nothing further and exits with the server's status.
The client closing its stdin (or its stdout): the server's stdin is closed, the server gets
:data:`GRACE_SECONDS` to exit, then SIGTERM, then SIGKILL — the MCP stdio shutdown sequence.

Threads rather than asyncio: each pump is a blocking read-judge-write loop over raw file
descriptors, which a thread says in a few lines; the client pump may be left blocked reading
stdin when the server is gone, and a daemon thread in ``os.read`` holds no lock that would stop
the process from exiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Final

from dsh_loop_brake.mcp_proxy._lines import read_fd, segments
from dsh_loop_brake.mcp_proxy._session import ProxySession

__all__ = ["GRACE_SECONDS", "INSPECT_LIMIT", "Proxy", "exit_status"]

INSPECT_LIMIT: Final = 16 << 20
"""Longest line (bytes) the proxy reads as a message; a longer one passes through unjudged."""

GRACE_SECONDS: Final = 2.0
"""How long the server may take to exit once its stdin is closed, and again after SIGTERM."""

DRAIN_SECONDS: Final = 2.0
"""How long the server's last output may take to arrive once it has exited (a descendant
holding its stdout open must not keep the proxy alive)."""

FORWARDED_SIGNALS: Final = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals the proxy passes on to the server (its process group) instead of dying of them."""


_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
"""What ``signal.signal`` returns: the handler to put back."""


def exit_status(returncode: int) -> int:
    """A process's exit status as a shell reports it: a signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Proxy:
    """``command`` as a child process, with ``session`` judging the client's lines.

    ``client_in``/``client_out`` are the client's side (stdin and a descriptor onto the real
    stdout); ``note`` writes one line of diagnostics to stderr.
    """

    def __init__(
        self,
        command: Sequence[str],
        session: ProxySession,
        note: Callable[[str], None],
        *,
        client_in: int,
        client_out: int,
    ) -> None:
        self._command = list(command)
        self._session = session
        self._note = note
        self._client_in = client_in
        self._client_out = client_out
        self._changed = threading.Condition()
        self._client_closed = False  # stdin ended, or stdout cannot be written
        self._server_closed = False  # the server's stdout ended
        self._exited = False
        self._answering = True  # the proxy may still write its own answers
        self._output_broken = False
        self._out_lock = threading.Lock()
        self._oversized_said = False
        self._process: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        """Start the server, pump until a side closes; the server's exit status.

        Raises ``OSError`` when the command cannot be started.
        """
        process = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            # Its own process group: a signal the proxy forwards reaches the server's children
            # too (npx starts node), and a terminal's Ctrl-C is not delivered twice.
            start_new_session=True,
        )
        self._process = process
        previous = self._forward_signals()
        try:
            threads = [
                threading.Thread(target=self._pump_client, name="mcp-proxy client", daemon=True),
                threading.Thread(target=self._pump_server, name="mcp-proxy server", daemon=True),
                threading.Thread(target=self._reap, name="mcp-proxy reaper", daemon=True),
            ]
            for thread in threads:
                thread.start()
            self._wait_for_a_side()
            # A side has closed: the proxy answers nothing further. (Not under _out_lock: the
            # server pump may hold it for a long line a descendant of the server never ends.)
            self._answering = False
            if not self._exited:
                self._stop_server()
            threads[1].join(DRAIN_SECONDS)  # the server's last output still reaches the client
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return exit_status(process.wait())

    # -----------------------------------------------------------------------------------------
    # the main thread

    def _wait_for_a_side(self) -> None:
        with self._changed:
            while not (self._exited or self._server_closed or self._client_closed):
                self._changed.wait(0.5)  # a timeout keeps signal handlers running promptly

    def _stop_server(self) -> None:
        """A side closed and the server still runs: let it exit, else end it.

        The client pump owns the server's stdin (closing it under a write could send the bytes
        to whatever file reuses the number): it closes it when the client's stdin ends, which
        is how a server learns it should exit. A server that closed its stdout is on its way
        out; a client that stopped reading is usually a client that is gone.
        """
        if self._wait_exit(GRACE_SECONDS):
            return
        self._signal_server(signal.SIGTERM)
        if self._wait_exit(GRACE_SECONDS):
            return
        self._signal_server(getattr(signal, "SIGKILL", signal.SIGTERM))
        self._wait_exit(None)

    def _wait_exit(self, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._exited, timeout)

    def _forward_signals(self) -> dict[int, _Handler]:
        previous: dict[int, _Handler] = {}
        if threading.current_thread() is not threading.main_thread():
            return previous  # signal handlers can only be set there (run from a test thread)
        for signum in FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signal_server(signum)

    def _signal_server(self, signum: int) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        try:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, signum)
            else:  # Windows: no process groups to signal
                process.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass  # already gone (or a member we may not signal): the reaper will tell

    def _set(self, flag: str) -> None:
        with self._changed:
            setattr(self, flag, True)
            self._changed.notify_all()

    # -----------------------------------------------------------------------------------------
    # the threads

    def _reap(self) -> None:
        assert self._process is not None
        self._process.wait()
        self._set("_exited")

    def _pump_client(self) -> None:
        """Client lines to the server, judged; the proxy's own answers to the client."""
        assert self._process is not None and self._process.stdin is not None
        server_in = self._process.stdin.fileno()
        server_alive = True
        for segment in segments(read_fd(self._client_in), INSPECT_LIMIT):
            if segment.whole:
                to_server, to_client = self._session.from_client(segment.data)
            else:
                to_server, to_client = segment.data, None
                self._say_oversized()
            if to_client is not None:
                self._answer(to_client)
            if to_server is not None and server_alive:
                try:
                    _write_all(server_in, to_server)
                except OSError:  # the server closed its stdin or died: the reaper will tell
                    server_alive = False
        with contextlib.suppress(OSError):
            self._process.stdin.close()  # the server's cue to exit (the spec's shutdown)
        self._set("_client_closed")

    def _pump_server(self) -> None:
        """Server lines to the client, as they came; responses watched when the session waits.

        A line too long to hold goes on in pieces; the output stays claimed from its first
        piece to its last, so no answer of the proxy's lands in the middle of it.
        """
        assert self._process is not None and self._process.stdout is not None
        session = self._session
        claimed = False
        try:
            for segment in segments(read_fd(self._process.stdout.fileno()), INSPECT_LIMIT):
                if segment.whole and session.watching:
                    session.from_server(segment.data)
                if not claimed:
                    self._out_lock.acquire()
                    claimed = True
                self._write_out(segment.data)
                if segment.data.endswith(b"\n"):  # between lines the proxy may answer
                    self._out_lock.release()
                    claimed = False
        finally:
            if claimed:
                self._out_lock.release()
        self._set("_server_closed")

    def _answer(self, data: bytes) -> None:
        """The proxy's own response, between two of the server's lines, while it may answer."""
        with self._out_lock:
            if self._answering:
                self._write_out(data)

    def _write_out(self, data: bytes) -> None:
        """Write to the client (``_out_lock`` held); a client that stopped reading is gone."""
        if self._output_broken:
            return  # keep draining the server, so it never blocks on a full pipe
        try:
            _write_all(self._client_out, data)
        except OSError:
            self._output_broken = True
            self._set("_client_closed")  # lock order: _out_lock, then _changed; never back

    def _say_oversized(self) -> None:
        if not self._oversized_said:
            self._oversized_said = True
            self._note(
                f"a message over {INSPECT_LIMIT >> 20} MiB was passed on without being judged"
                " (a tools/call that long is not braked)"
            )
