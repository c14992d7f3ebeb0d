"""Docs a newcomer can paste: every fenced example in README.md and docs/*.md runs as written.

Every ``docs/*.md`` is picked up by itself (a new page needs no change here):

* a ```` ```python ```` block runs alone in a fresh interpreter (``python -c``), as if pasted; when
  the block is followed by a line ``prints`` and a plain block, its output must be exactly that;
* a ```` ```sh ```` (or ``bash``/``shell``/``console``) block's ``dsh-loop-brake ...`` lines run
  (also when spelled as a path to it, ``~/.venvs/dsh/bin/dsh-loop-brake``), with the block's
  ``export`` lines, and must exit 0 (or 1 for ``--fail-on-denial``). Lines that
  need the network or take minutes — ``pip``, ``python`` (benchmarks, the test suite) and
  anything else — are left out; ``pip install . && dsh-loop-brake replay`` runs its second half;
* an example that cannot run here says so on the line above its fence, invisibly in the
  rendered page: ``<!-- not run: needs a Redis server -->``;
* an example whose import needs an optional extra that is not installed is skipped, naming it.

Every example runs in a sandbox: a fresh ``HOME`` in which ``dsh-loop-brake install`` has
been run, with the package's example transcripts in the places the docs name (``~/agent-logs/``,
``runs/``, ``transcripts/``, a Claude Code project directory). A failure names the file and the
line of the example. User docs also never cite the project's own bookkeeping ("SPEC §",
"issue 5", "this round"): the reader has none of it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

EXAMPLES_DIR = REPO_ROOT / "dsh_loop_brake" / "replay" / "examples"
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.*?)\s*-->")
_SHELLS = {"sh", "bash", "shell", "console"}


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    output: str | None  # the "prints" block after a python block
    not_run: str | None  # the reason given in <!-- not run: ... -->

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO_ROOT)}:{self.line}"


def read_examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = len(opening["indent"])
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        language = (opening["info"].split() or [""])[0].lower()
        before = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = _NOT_RUN.search(before)
        output, after = _printed(lines, end + 1)
        found.append(
            Example(page, index + 1, language, body, output, marker["reason"] if marker else None)
        )
        index = after
    return found


def _printed(lines: list[str], start: int) -> tuple[str | None, int]:
    """The output block after ``prints`` (and where scanning goes on), if there is one."""
    at = start
    while at < len(lines) and not lines[at].strip():
        at += 1
    if at >= len(lines) or lines[at].strip() != "prints":
        return None, start
    at += 1
    while at < len(lines) and not lines[at].strip():
        at += 1
    if at >= len(lines) or lines[at].strip() != "```":
        return None, start
    end = at + 1
    while end < len(lines) and lines[end].strip() != "```":
        end += 1
    return "\n".join(lines[at + 1 : end]) + "\n", end + 1


EXAMPLES = [example for page in PAGES for example in read_examples(page)]
PYTHON = [example for example in EXAMPLES if example.language == "python"]
SHELL = [example for example in EXAMPLES if example.language in _SHELLS]


# --- the sandbox ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sandbox_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A newcomer's machine after ``dsh-loop-brake install``, with transcripts to replay."""
    root = tmp_path_factory.mktemp("docs-sandbox")
    home, work = root / "home", root / "work"
    work.mkdir()
    env = _sandbox_env(home)
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "install"],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shutil.copytree(EXAMPLES_DIR, home / "agent-logs")
    claude = home / ".claude" / "projects" / "-home-me-app"
    claude.mkdir(parents=True)
    for path in EXAMPLES_DIR.glob("claude-code-*.jsonl"):
        shutil.copy(path, claude)
    shutil.copytree(EXAMPLES_DIR, work / "transcripts")
    runs = work / "runs"
    runs.mkdir()
    shutil.copy(EXAMPLES_DIR / "support-agents.jsonl", runs / "a.jsonl")
    shutil.copy(EXAMPLES_DIR / "openai-research-stuck.json", runs / "b.json")
    return root


@pytest.fixture
def sandbox(sandbox_template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "sandbox"
    shutil.copytree(sandbox_template, root, symlinks=True)
    return root


def _sandbox_env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env["PYTHONIOENCODING"] = "utf-8"
    # `dsh-loop-brake` is the console script of the interpreter running the tests.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _skip_if_not_run(example: Example) -> None:
    if example.not_run is not None:
        assert example.not_run, f"{example.where}: say why the example is not run"
        pytest.skip(f"{example.where}: not run: {example.not_run}")


# --- python examples --------------------------------------------------------------------------


@pytest.mark.parametrize("example", PYTHON, ids=[example.where for example in PYTHON])
def test_a_python_example_runs_as_pasted(example: Example, sandbox: Path) -> None:
    _skip_if_not_run(example)
    done = subprocess.run(
        [sys.executable, "-c", example.code],
        capture_output=True,
        text=True,
        env=_sandbox_env(sandbox / "home"),
        cwd=sandbox / "work",
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    missing = re.search(r"ModuleNotFoundError: No module named '([^'.]+)", done.stderr)
    if done.returncode != 0 and missing and missing[1] != "dsh_loop_brake":
        pytest.skip(f"{example.where}: needs {missing[1]}, which is not installed")
    assert done.returncode == 0, f"{example.where}: the example fails as written:\n{done.stderr}"
    if example.output is not None:
        assert done.stdout == example.output, (
            f"{example.where}: the example prints something else than the page says:\n{done.stdout}"
        )


# --- shell examples ---------------------------------------------------------------------------


def _commands(code: str) -> tuple[list[str], list[str]]:
    """The block's ``export`` lines and its ``dsh-loop-brake`` commands, as the shell reads them."""
    exports: list[str] = []
    commands: list[str] = []
    for raw in code.splitlines():
        line = raw.strip().removeprefix("$ ")
        for part in (segment.strip() for segment in line.split("&&")):
            words = shlex.split(part, comments=True) if part else []
            if not words:
                continue
            if words[0] == "export":
                exports.append(part)
            elif Path(words[0]).name == "dsh-loop-brake":
                # `~/.venvs/dsh/bin/dsh-loop-brake ...` is the sandbox's own dsh-loop-brake;
                # bash expands `~` and globs in the rest, and drops a trailing comment.
                commands.append(
                    "dsh-loop-brake " + part.split(None, 1)[1]
                    if len(words) > 1
                    else "dsh-loop-brake"
                )
    return exports, commands


@pytest.mark.parametrize("example", SHELL, ids=[example.where for example in SHELL])
def test_a_shell_example_runs_offline(example: Example, sandbox: Path) -> None:
    _skip_if_not_run(example)
    exports, commands = _commands(example.code)
    if not commands:
        pytest.skip(f"{example.where}: nothing here runs offline in seconds")
    home = sandbox / "home"
    for command in commands:
        # `~` and globs as a shell expands them, with the sandbox's HOME.
        script = "\n".join([*exports, command])
        done = subprocess.run(
            ["bash", "-c", script],
            capture_output=True,
            text=True,
            env=_sandbox_env(home),
            cwd=sandbox / "work",
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        allowed = {0, 1} if "--fail-on-denial" in command else {0}
        assert done.returncode in allowed, (
            f"{example.where}: `{command}` exits {done.returncode}:\n{done.stderr}"
        )
        assert "Traceback" not in done.stderr, f"{example.where}: `{command}`:\n{done.stderr}"


# --- the pages themselves ---------------------------------------------------------------------

_BOOKKEEPING = re.compile(
    r"\bSPEC\b|§|\b[Ii]ssue \d+|\b(?i:this|previous|last|later|earlier) rounds?\b"
)


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO_ROOT)) for page in PAGES])
def test_user_docs_cite_no_project_bookkeeping(page: Path) -> None:
    found = [
        f"{page.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if _BOOKKEEPING.search(line)
    ]
    assert not found, "the reader has no spec, issue or round to look up:\n" + "\n".join(found)


def test_the_readme_example_shows_the_real_hash_prefix() -> None:
    from dsh_loop_brake import call_hash, hash_prefix

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    real = hash_prefix(call_hash("search", {"q": "weather"}))
    assert f"(call {real}\u2026, limit 3)" in readme
    assert "9f2c1a7b3e04" not in readme


def test_every_page_was_read() -> None:
    assert (REPO_ROOT / "README.md") in PAGES and len(PAGES) >= 8
    assert len(PYTHON) >= 15 and len(SHELL) >= 5
    assert any(example.output is not None for example in PYTHON if example.page.name == "README.md")
