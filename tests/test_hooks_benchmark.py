"""benchmarks/hook.py keeps running (a smoke run: it prints figures, nothing is timed here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_hook_benchmark_runs_and_reports_every_figure() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hook.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=ROOT,
    )
    out = completed.stdout
    for figure in (
        "python -c pass",
        "import re, json, _sha",
        "hook claude-code",
        "python -m dsh_loop_brake hook claude-code",
        "first call after the profile changed",
        "hook vs python -c pass:",
        "this package's share",
        "python -X importtime",
    ):
        assert figure in out, figure
