"""Shared fixtures: every test runs with a clean environment and a temporary home."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Before any test module imports an agent framework: their offline environment (fake keys,
# tracing off) and the guard that fails an adapter test reaching for the network.
import tests.adapter_support  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent

# A real redis-server for the store tests (fixtures redis_server, redis_url, make_redis_server).
pytest_plugins = ["_redis_server"]

# No timed tests: hypothesis's per-example deadline is a timing assertion, and on a shared
# machine a busy spell made examples of the reader fuzz tests overrun it (and fail as flaky).
settings.register_profile("dsh", deadline=None)
settings.load_profile("dsh")

# Variables that change what the brake, the harness, the hook or the hook installer does (where
# each host's settings live); never inherited from the developer. hooks_support.HOOK_ENV keeps
# them out of the hook processes the tests start, too.
_CONTROLLED = (
    "DSH_LOOP_BRAKE_MAX_REPEATS",
    "DSH_LOOP_BRAKE_STORE",
    "DSH_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No DSH_* or host-home variables from the developer's shell, and ``~`` is a fresh
    temporary directory."""
    for name in _CONTROLLED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """Threads for a host that runs tool bodies (or whole calls) off the event loop."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


# ---------------------------------------------------------------------------------------------
# The smallest host a plugin can be applied to

Guard = Callable[[Any], "str | None"]


class FakeTools:
    """A tool registry with only ``guard(fn) -> disposer`` (what the circuit breaker needs)."""

    def __init__(self) -> None:
        self.guards: list[Guard] = []

    def guard(self, fn: Guard) -> Callable[[], None]:
        self.guards.append(fn)
        return lambda: self.guards.remove(fn)


class FakeCtx:
    """The smallest host: ``tools.guard`` and a fiber ``effect``; ``dispose`` undoes the effects.

    ``effects`` holds what each effect callback returned (its disposer), in order.
    """

    def __init__(self) -> None:
        self.tools = FakeTools()
        self.effects: list[Any] = []

    def effect(self, fn: Callable[[], Any]) -> None:
        self.effects.append(fn())

    def dispose(self) -> None:
        effects, self.effects = self.effects, []
        for disposer in reversed(effects):
            if disposer is not None:
                disposer()


@pytest.fixture
def fake_ctx() -> Iterator[FakeCtx]:
    """A :class:`FakeCtx`, disposed after the test."""
    ctx = FakeCtx()
    yield ctx
    ctx.dispose()


@pytest.fixture
def dsh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$DSH_HOME`` (set in the environment) with no profiles yet."""
    home = tmp_path / "dsh-home"
    home.mkdir()
    monkeypatch.setenv("DSH_HOME", str(home))
    return home


@pytest.fixture
def cli_env() -> dict[str, str]:
    """The environment for a CLI subprocess: the test's own (already cleaned), repo importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["PYTHONIOENCODING"] = "utf-8"
    return env


RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def run_cli(cli_env: dict[str, str], tmp_path: Path) -> Iterator[RunCli]:
    """Run ``python -m dsh_loop_brake ARGS`` as a subprocess; returns the completed process."""

    def run(
        *args: str, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        merged = dict(cli_env)
        if env:
            merged.update(env)
        return subprocess.run(
            [sys.executable, "-m", "dsh_loop_brake", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=merged,
            cwd=tmp_path,
            input=stdin,
            timeout=120,
        )

    yield run


# ---------------------------------------------------------------------------------------------
# A virtualenv with the built wheel installed: the path a user takes (not an editable install)

_NOT_COPIED = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", ".venv", ".*_cache", ".hypothesis", "build", "dist"
)


@dataclass(frozen=True)
class InstalledVenv:
    """A new virtualenv holding the project's wheel; ``python`` and ``script`` run from it."""

    root: Path
    wheel: Path

    @property
    def bin(self) -> Path:
        return self.root / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> Path:
        return self.bin / ("python.exe" if os.name == "nt" else "python")

    @property
    def script(self) -> Path:
        """The ``dsh-loop-brake`` console script pip made from the wheel's entry point."""
        return self.bin / ("dsh-loop-brake.exe" if os.name == "nt" else "dsh-loop-brake")

    def env(self, home: Path) -> dict[str, str]:
        """The test's environment without PYTHONPATH (nothing from the checkout), HOME=home."""
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env["HOME"] = str(home)
        return env

    def run(
        self, *args: str | os.PathLike[str], cwd: Path, home: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a command of the venv (``args[0]``, e.g. ``venv.script``); it must succeed."""
        done = _checked([*args], cwd=cwd, env=self.env(home or cwd))
        return done


def _checked(
    command: list[str | os.PathLike[str]], *, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [os.fspath(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def _running_environment_paths() -> list[str]:
    """The site-packages directories this test run imports from (its venv's, not the base's)."""
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    paths += [entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    return [path for path in dict.fromkeys(paths) if Path(path).is_dir()]


@pytest.fixture(scope="session")
def installed_venv(tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """A new virtualenv with the project's wheel installed, built once for the whole run.

    The venv is made without ``--system-site-packages``: that option shows the *base*
    interpreter's packages, which a fresh ``python3 -m venv .venv`` does not have. Instead the
    venv sees the packages of the environment running the tests (pluggy, ruamel.yaml, pip,
    hatchling — whatever ``pip install -e ".[test]"`` put there) through a ``.pth`` file of
    plain directories, so no registry is needed. Plain directories only: the ``.pth`` files in
    them — among them the editable install of this checkout — are not processed, so the
    package itself comes from the wheel alone, and the source copy it was built from is
    removed before any test runs.
    """
    work = tmp_path_factory.mktemp("installed-venv")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    source = work / "source"  # a copy: building leaves artefacts behind
    shutil.copytree(REPO_ROOT, source, ignore=_NOT_COPIED)
    dist = work / "dist"
    _checked(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, source],
        cwd=work,
        env=env,
    )
    (wheel,) = dist.glob("dsh_loop_brake-*.whl")
    root = work / "venv"
    _checked([sys.executable, "-m", "venv", "--without-pip", root], cwd=work, env=env)
    venv = InstalledVenv(root, wheel)
    purelib = _checked(
        [venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=work,
        env=env,
    ).stdout.strip()
    (Path(purelib) / "_dsh_test_environment.pth").write_text(
        "".join(f"{path}\n" for path in _running_environment_paths()), encoding="utf-8"
    )
    _checked(
        [
            venv.python,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            # pip sees the editable install through the .pth: never uninstall it, add beside it.
            "--ignore-installed",
            "--disable-pip-version-check",
            "--quiet",
            wheel,
        ],
        cwd=work,
        env=env,
    )
    shutil.rmtree(source)  # nothing may be read from a source tree any more
    return venv
