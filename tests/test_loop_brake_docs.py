"""docs/library.md stays runnable: every ``python`` block runs, and shown output is real."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parent.parent / "docs" / "library.md"

# A python block, optionally followed by "prints" and a plain block with its exact output.
_BLOCK = re.compile(
    r"```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```\n)?", re.DOTALL
)


def _examples() -> list[tuple[str, str | None]]:
    return [(m["code"], m["output"]) for m in _BLOCK.finditer(LIBRARY.read_text("utf-8"))]


EXAMPLES = _examples()


def test_the_page_has_its_examples() -> None:
    assert len(EXAMPLES) >= 10
    assert sum(output is not None for _, output in EXAMPLES) >= 2
    assert any("asyncio.run(" in code for code, _ in EXAMPLES)


@pytest.mark.parametrize(
    ("code", "output"), EXAMPLES, ids=[f"block{i}" for i in range(len(EXAMPLES))]
)
def test_example_runs_as_written(code: str, output: str | None) -> None:
    # A real module, so dataclasses and pickle can find what the example defines.
    module = types.ModuleType("library_md_example")
    sys.modules[module.__name__] = module
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(LIBRARY), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    if output is not None:
        assert printed.getvalue() == output
