"""benchmarks/adapters.py keeps running (a smoke run: it prints figures, nothing is timed here)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

FRAMEWORKS = ("langchain", "openai-agents", "pydantic-ai", "claude-agent-sdk", "llm", "google-adk")


def test_the_adapter_benchmark_runs_every_framework_and_times_each_hook_alone(
    cli_env: dict[str, str],
) -> None:
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "adapters.py")]
    command += ["--repeats", "1", "--calls", "3", "--hook-calls", "20"]
    completed = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=600, cwd=REPO_ROOT, env=cli_env
    )
    rows = {line.split()[0]: line for line in completed.stdout.splitlines() if line.strip()}
    for framework in FRAMEWORKS:
        # plain, empty hook, braked, braked - empty, hook alone, check: six figures in µs
        assert rows[framework].count("µs") == 6, rows.get(framework)
