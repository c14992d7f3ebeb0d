"""docs/stores.md stays true: every ``python`` block runs as a program, and shown output is real."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "stores.md"

# A python block, optionally followed by "prints" and a plain block with its exact output.
_BLOCK = re.compile(
    r"```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```\n)?", re.DOTALL
)
EXAMPLES = [(m["code"], m["output"]) for m in _BLOCK.finditer(PAGE.read_text("utf-8"))]


def test_the_page_has_its_examples() -> None:
    assert len(EXAMPLES) >= 2
    assert all(output is not None for _, output in EXAMPLES)
    assert any("ProcessPoolExecutor" in code for code, _ in EXAMPLES)


@pytest.mark.parametrize(
    ("code", "output"), EXAMPLES, ids=[f"block{i}" for i in range(len(EXAMPLES))]
)
def test_example_runs_as_written(
    code: str, output: str | None, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    program = tmp_path / "example.py"
    program.write_text(code, encoding="utf-8")
    env = {**cli_env, "DSH_HOME": str(tmp_path / "dsh-home")}
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == output
