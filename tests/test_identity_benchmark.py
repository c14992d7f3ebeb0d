"""benchmarks/identity.py keeps running (a smoke run: it prints figures, nothing is timed here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_identity_benchmark_runs_and_reports_every_figure() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "identity.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
    out = completed.stdout
    for figure in ("floor (json.dumps + sha256)", "call_hash", "LoopBrake.check", "vs floor"):
        assert figure in out
    assert out.count("bytes/session") == 2
    for large in ("10,000 small objects", "embedding of 1,536 floats", "all below 1e-7"):
        assert large in out
    assert "call_hash is exact" in out
