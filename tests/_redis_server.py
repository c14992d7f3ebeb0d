"""A real ``redis-server`` for the tests (a pytest plugin, loaded by conftest.py).

Each server runs on a free loopback port with persistence off (``--save "" --appendonly no``) in
a temporary directory of its own, and is stopped when its fixture ends. ``redis_server`` is one
server for the whole session (tests keep apart by flushing it or by key prefix);
``make_redis_server`` starts servers of a test's own, for tests that kill, restart or configure
one (a password, a unix socket).

Under CI (``CI`` set) a missing ``redis-server`` binary or ``redis`` package fails the tests that
need them; on a developer's machine it skips them, saying what to install.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

#: How long a server may take to answer its first PING before the test fails (a bounded wait,
#: not a timing assertion: a server that never comes up must not hang the suite).
_START_WAIT = 20.0


def _require(what: str, hint: str) -> None:
    message = f"{what} is needed for the store tests: {hint}"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def redis_server_binary() -> str:
    """The path of ``redis-server``; fails under CI, skips elsewhere, when it is missing."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None
    )
    if found is None:
        _require("redis-server", "install it (Debian: apt-get install -y redis-server)")
        raise AssertionError("unreachable")
    return found


def require_redis_package() -> None:
    """Fail under CI, skip elsewhere, when the ``redis`` client package is missing."""
    try:
        import redis  # noqa: F401
    except ImportError:
        _require("the redis package", 'install the test extra: pip install -e ".[test]"')


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process: its port, its directory, and ways to stop it."""

    def __init__(self, directory: Path, *extra: str) -> None:
        self.directory = directory
        self.extra = extra
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.password: str | None = None
        if "--requirepass" in extra:
            self.password = extra[extra.index("--requirepass") + 1]
        self.unix_socket: str | None = None
        if "--unixsocket" in extra:
            self.unix_socket = extra[extra.index("--unixsocket") + 1]

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (on its old port when restarted) and wait until it answers."""
        binary = redis_server_binary()
        for attempt in range(5):
            if not self.port or attempt:
                self.port = _free_port()
            log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the server keeps it
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.directory),
                    "--daemonize",
                    "no",
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            log.close()
            if self._wait_until_ready():
                return
            self.stop()  # most likely the port was taken in between: another one
        pytest.fail(f"redis-server did not start; see {self.directory / 'redis.log'}")

    def _wait_until_ready(self) -> bool:
        deadline = time.monotonic() + _START_WAIT
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    answer = conn.recv(64)
                if answer.startswith((b"+PONG", b"-NOAUTH")):
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None


MakeRedisServer = Callable[..., RedisServer]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session's tests."""
    require_redis_package()
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, its database emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url


@pytest.fixture
def make_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeRedisServer]:
    """Start servers of this test's own: ``make_redis_server("--requirepass", "pw")``."""
    require_redis_package()
    servers: list[RedisServer] = []

    def make(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("redis-own"), *extra)
        servers.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()
