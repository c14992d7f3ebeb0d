"""The hook's lean path: what a hook process imports, and that the identity it counts is the same.

A hook process is started for every tool call, so its speed is mostly the modules it imports
(``benchmarks/hook.py``, docs/performance.md). It hashes a small call with CPython's own
SHA-256 instead of loading OpenSSL, reads SQLite through its C module without the sqlite3
package's date adapters, and compiles no regular expression it does not use. These tests hold
it to that, untimed, and hold its hashes to the ones ``call_hash`` gives in any other process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hooks_support import REPO_ROOT, denial_of, fixture, hook_env, run_hook

from dsh_loop_brake import call_hash

# Modules a hook call does without; each was once on its path or is one import away from it.
NOT_ON_THE_HOOK_PATH = {
    "typing",  # type checkers only (dsh_loop_brake._no_typing)
    "hashlib",  # OpenSSL: a small call is hashed by CPython's own SHA-256 (_digest)
    "_hashlib",
    "sqlite3",  # the package's date adapters import datetime; the store takes _sqlite3
    "datetime",
    "contextlib",
    "weakref",
    "encodings.utf_16_be",  # codecs looked up by name import a module at their first use
    "encodings.utf_16_le",
    "argparse",  # the command line's, not the hook's
    "asyncio",
    "logging",
    "importlib.metadata",
    "pluggy",
    "ruamel.yaml",
}


def _imports_of_one_call(event: dict[str, Any], home: Path) -> set[str]:
    """The modules one hook process imports (``python -X importtime``), started as the console
    script starts it (no ``-m``, whose runpy imports modules of its own)."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "from dsh_loop_brake._entry import main; main()",
            "hook",
            "claude-code",
            "--home",
            str(home),
        ],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=hook_env(),
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    lines = done.stderr.decode().splitlines()
    assert all(line.startswith("import time:") for line in lines), lines  # nothing else said
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}


def _write_event(content: str) -> dict[str, Any]:
    event = fixture("claude-code-subagent-write.json")
    event["tool_input"]["content"] = content
    return event


def test_an_allowed_call_imports_none_of_what_the_hook_does_without(tmp_path: Path) -> None:
    run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path)  # the cache is made
    imported = _imports_of_one_call(fixture("claude-code-bash.json"), tmp_path)
    assert {"dsh_loop_brake.stores._sqlite", "_sqlite3", "json"} <= imported  # it did count
    assert not imported & NOT_ON_THE_HOOK_PATH


def test_a_call_of_a_mebibyte_or_more_is_hashed_by_openssl(tmp_path: Path) -> None:
    run_hook("claude-code", fixture("claude-code-bash.json"), home=tmp_path)
    imported = _imports_of_one_call(_write_event("x" * (1024 * 1024)), tmp_path)
    assert "_hashlib" in imported


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("print('hello')\n", id="small"),
        pytest.param("caf\u00e9 \U0001f600 lone \ud800 end", id="surrogates-and-astral"),
        pytest.param("\u00e9" * 70_000, id="two-pieces-below-1-MiB"),
        pytest.param("x" * (1024 * 1024), id="1-MiB-by-openssl"),
        pytest.param("\ud83d\ude00\udfff" * 200_000, id="surrogates-over-1-MiB"),
    ],
)
def test_the_hook_counts_a_call_under_the_hash_call_hash_gives(
    content: str, tmp_path: Path
) -> None:
    event = _write_event(content)
    answers = [
        denial_of("claude-code", run_hook("claude-code", event, home=tmp_path)) for _ in "123"
    ]
    assert answers[:2] == [None, None]
    prefix = call_hash(event["tool_name"], event["tool_input"])[:12]
    assert answers[2] is not None and f"(call {prefix}\u2026, limit 3)" in answers[2]


def test_a_cpython_sha256_that_refuses_to_hash_leaves_the_hook_braking(tmp_path: Path) -> None:
    # Some builds in FIPS mode have CPython's own SHA-256 and refuse to use it (ValueError):
    # the hook then hashes with OpenSSL's, and still counts.
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    marker = tmp_path / "stand-in-imported"
    module = "_sha2" if sys.version_info >= (3, 12) else "_sha256"
    (stand_in / f"{module}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "def sha256(data=b''):\n"
        "    raise ValueError('[digital envelope routines] unsupported: not in FIPS mode')\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(stand_in)])}
    event = fixture("claude-code-bash.json")
    done = [run_hook("claude-code", event, home=tmp_path / "home", env=env) for _ in "123"]
    assert marker.exists()  # the stand-in was the module the hook found
    assert [d.stderr for d in done] == [b"", b"", b""]
    assert [denial_of("claude-code", d) is None for d in done] == [True, True, False]
