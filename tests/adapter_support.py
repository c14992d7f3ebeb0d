"""What the framework-adapter tests share: an offline environment, a tool body that counts its
runs, the check that a raised denial leaves no argument in any frame of ours, and a profile whose
patch rows configure both brakes.

Importing this module first sets the frameworks' environment so that none of them tries the
network: fake API keys, tracing and telemetry off. While a test runs, a connection to anything
but the loopback interface fails the test (an audit hook), so "offline" is checked, not hoped.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dsh_loop_brake

_OFFLINE_ENV = {
    "OPENAI_API_KEY": "sk-test-offline",
    "ANTHROPIC_API_KEY": "sk-ant-test-offline",
    "GOOGLE_API_KEY": "test-offline",
    "GEMINI_API_KEY": "test-offline",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "OTEL_SDK_DISABLED": "true",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "DO_NOT_TRACK": "1",
}
for _name, _value in _OFFLINE_ENV.items():
    os.environ[_name] = _value

PACKAGE_DIR = str(Path(dsh_loop_brake.__file__).resolve().parent)

CANARY = "sk-CANARY-adapter-5be1"

_blocked: list[str] = []


def _loopback(address: object) -> bool:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        host = address[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, (str, bytes))  # a Unix socket path: local


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _OFFLINE_GUARD["on"]:
        return
    if event == "socket.connect" and not _loopback(args[1]):
        _blocked.append(f"{event} {args[1]!r}")
        raise ConnectionRefusedError(f"adapter tests are offline: {args[1]!r}")
    if event == "socket.getaddrinfo" and args[0] not in ("localhost", "127.0.0.1", "::1", None):
        _blocked.append(f"{event} {args[0]!r}")
        raise ConnectionRefusedError(f"adapter tests are offline: {args[0]!r}")


_OFFLINE_GUARD = {"on": False}
sys.addaudithook(_audit)


@pytest.fixture(autouse=True)
def offline() -> Iterator[None]:
    """Fail the test if a framework tried to reach the network while it ran."""
    _blocked.clear()
    _OFFLINE_GUARD["on"] = True
    try:
        yield
    finally:
        _OFFLINE_GUARD["on"] = False
    assert not _blocked, f"a framework tried the network: {_blocked}"


class Runs:
    """A tool body's run counter (thread-safe: some frameworks run bodies in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Any] = []

    def record(self, value: Any) -> None:
        with self._lock:
            self.calls.append(value)

    def __len__(self) -> int:
        return len(self.calls)


def assert_no_arguments_in_our_frames(error: BaseException, secret: str = CANARY) -> None:
    """No frame of this package in the error's traceback (or its causes') holds ``secret``."""
    rendered = traceback.TracebackException(
        type(error), error, error.__traceback__, capture_locals=True
    )
    seen = 0
    for exception in _chain(rendered):
        for frame in exception.stack:
            if frame.filename.startswith(PACKAGE_DIR):
                seen += 1
                assert secret not in repr(frame.locals), (frame.filename, frame.name)
    assert secret not in str(error)
    assert seen, "the traceback has no frame of ours to check"


def _chain(rendered: traceback.TracebackException) -> Iterator[traceback.TracebackException]:
    current: traceback.TracebackException | None = rendered
    while current is not None:
        yield current
        current = current.__cause__ or current.__context__


# --- Brakes.from_profile: a profile's rows, honoured by every adapter ---------------------------

# The patch a user writes into $DSH_HOME/profiles/default/cordis.patch.yml: a stricter loop
# brake than the default 3, and the circuit breaker.
PROFILE_PATCH = """\
- id: loop-brake
  config:
    maxRepeats: 2
- insert:
    - id: circuit-breaker
      name: dsh-circuit-breaker
      config:
        duplicateLimit: 3
        window: 10
"""

WEATHER, NEWS = {"q": "weather"}, {"q": "news"}

# The model's calls, one per turn. maxRepeats 2 denies the second (the default 3 would not);
# the alternating calls never make a streak, so it is the breaker that denies the sixth: the
# third identical call in its window of allowed calls (the denied second is not in it).
PROFILE_CALLS = (WEATHER, WEATHER, NEWS, WEATHER, NEWS, WEATHER)
PROFILE_RUNS = ["weather", "news", "weather", "news"]  # what the tool body ran with


def write_profile(home: Path) -> None:
    """The default profile under ``home`` (the test's ``$DSH_HOME``), with this package's bundle
    and ``PROFILE_PATCH``: real files, composed by ``Brakes.from_profile`` as the harness does."""
    directory = home / "profiles" / "default"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profile.yml").write_text("bundles: [dsh-loop-brake]\n", encoding="utf-8")
    (directory / "cordis.patch.yml").write_text(PROFILE_PATCH, encoding="utf-8")


@pytest.fixture
def profile_brakes(dsh_home: Path) -> Iterator[dsh_loop_brake.Brakes]:
    """``Brakes.from_profile()`` for the default profile written under a fresh ``$DSH_HOME``."""
    write_profile(dsh_home)
    with dsh_loop_brake.Brakes.from_profile() as brakes:
        yield brakes


def assert_profile_verdicts(handed: list[str]) -> None:
    """What the model was handed for ``PROFILE_CALLS``: the profile's two rows, each denying."""
    assert len(handed) == len(PROFILE_CALLS), handed
    assert handed[1].startswith('loop brake: tool "search" called 2 times in a row'), handed[1]
    assert "limit 2)" in handed[1]
    assert handed[5].startswith("circuit breaker: this call to search was denied"), handed[5]
    assert "(count 3, limit 3)" in handed[5]
    for allowed in (0, 2, 3, 4):
        assert not handed[allowed].startswith(("loop brake:", "circuit breaker:"))
