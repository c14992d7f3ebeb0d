"""What the mcp-proxy tests share: the servers they run behind the proxy, and how to start it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mcp_proxy"
COUNTING_SERVER = FIXTURES / "counting_server.py"
ECHO_SERVER = FIXTURES / "echo_server.py"

HANG_GUARD_SECONDS = 60
"""Not a timing assertion: how long a test waits before calling a hung proxy a failure."""


def proxy_argv(*options: str, server: Sequence[str]) -> list[str]:
    """``python -m dsh_loop_brake mcp-proxy OPTIONS -- SERVER...``."""
    return [sys.executable, "-m", "dsh_loop_brake", "mcp-proxy", *options, "--", *server]


def counting_server(runs: Path, pidfile: Path | None = None) -> list[str]:
    return [sys.executable, str(COUNTING_SERVER), str(runs), *([str(pidfile)] if pidfile else [])]


def echo_server(record: Path, status: int = 0) -> list[str]:
    return [sys.executable, str(ECHO_SERVER), str(record), str(status)]


def proxy_env(dsh_home: Path) -> dict[str, str]:
    """The test's environment (already cleaned by conftest), this checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["DSH_HOME"] = str(dsh_home)
    return env


def runs_of(runs: Path) -> list[str]:
    """The lines a counting server's tool bodies wrote: one per run."""
    return runs.read_text(encoding="utf-8").splitlines() if runs.exists() else []


class RawProxy:
    """The proxy as a subprocess with pipes, for tests that speak bytes to it.

    ``send`` writes from a thread of its own (a huge write must not wait on the test reading
    the output); ``finish`` closes the proxy's stdin, reads all its output and waits for it.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self._output = bytearray()
        self._errors = bytearray()
        self._readers = [
            threading.Thread(target=self._drain, args=(self.process.stdout, self._output)),
            threading.Thread(target=self._drain, args=(self.process.stderr, self._errors)),
        ]
        for reader in self._readers:
            reader.start()
        self._writers: list[threading.Thread] = []

    @staticmethod
    def _drain(stream: object, into: bytearray) -> None:
        read = stream.read1  # type: ignore[attr-defined]
        while chunk := read(1 << 16):
            into += chunk

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        stdin = self.process.stdin

        def write() -> None:
            with contextlib.suppress(BrokenPipeError):
                stdin.write(data)
                stdin.flush()

        for writer in self._writers:
            writer.join()  # in order
        writer = threading.Thread(target=write)
        writer.start()
        self._writers.append(writer)

    def close_stdin(self) -> None:
        for writer in self._writers:
            writer.join(HANG_GUARD_SECONDS)
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()

    def wait(self) -> int:
        code = self.process.wait(HANG_GUARD_SECONDS)
        for reader in self._readers:
            reader.join(HANG_GUARD_SECONDS)
        return code

    def finish(self) -> int:
        self.close_stdin()
        return self.wait()

    @property
    def output(self) -> bytes:
        return bytes(self._output)

    @property
    def errors(self) -> str:
        return self._errors.decode("utf-8", "replace")

    def wait_for_lines(self, count: int) -> list[bytes]:
        """Block until the proxy has written ``count`` whole lines; those lines."""
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while self._output.count(b"\n") < count:
            if self.process.poll() is not None:
                for reader in self._readers:
                    reader.join(HANG_GUARD_SECONDS)
                if self._output.count(b"\n") >= count:
                    break
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"expected {count} lines, got {bytes(self._output)!r}")
            time.sleep(0.01)
        return bytes(self._output).splitlines(keepends=True)[:count]
