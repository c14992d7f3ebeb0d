"""The command line's house: no command imports another, one source type, one error style."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import dsh_loop_brake
from dsh_loop_brake._config import Source, resolve_max_repeats_with_source
from dsh_loop_brake.harness import compose_layers
from dsh_loop_brake.harness.types import Layer
from dsh_loop_brake.loop_brake import ENV_VAR, LoopBrakeConfigError
from dsh_loop_brake.profile_options import row_max_repeats

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]
PACKAGE = Path(dsh_loop_brake.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_subcommand_module_imports_the_command_line_module() -> None:
    # The cycle cli.py <-> replay/command.py was broken with function-local imports; the shared
    # options and resolution now live in profile_options.py, which imports neither.
    for path in sorted((PACKAGE / "replay").glob("*.py")):
        assert "dsh_loop_brake.cli" not in _imports(path), path
    for neutral in ("profile_options.py", "exits.py"):
        imported = _imports(PACKAGE / neutral)
        assert not any(name.startswith("dsh_loop_brake.cli") for name in imported), neutral
        assert not any(name.startswith("dsh_loop_brake.replay") for name in imported), neutral


def test_the_core_says_where_max_repeats_came_from_as_a_typed_value() -> None:
    row = resolve_max_repeats_with_source({"maxRepeats": 5}, {ENV_VAR: "7"})
    assert (row.value, row.source.kind, row.ignored_env) == (5, "row", (ENV_VAR,))
    env = resolve_max_repeats_with_source({}, {ENV_VAR: "7"})
    assert (env.value, env.source) == (7, Source("env", ENV_VAR))
    assert env.source.label == f"env {ENV_VAR}" and env.ignored_env == ()
    default = resolve_max_repeats_with_source(None, {ENV_VAR: "  "})
    assert (default.value, default.source.label, str(default.source)) == (
        3,
        "default",
        "the default",
    )


def test_a_rows_source_carries_the_patch_file_and_line(tmp_path: Path) -> None:
    patch = tmp_path / "p5.yml"
    patch.write_text(
        "- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n      config:\n"
        "        maxRepeats: 5\n",
        encoding="utf-8",
    )
    row = compose_layers([Layer("patch", patch, "--patch")]).row("loop-brake")
    assert row is not None
    resolved = row_max_repeats(row, {})
    assert resolved.source == Source("row", path=str(patch), line=5)
    assert (resolved.source.label, str(resolved.source)) == (str(patch), f"{patch}:5")


def test_a_bad_row_value_is_an_error_located_at_its_key(tmp_path: Path) -> None:
    patch = tmp_path / "bad.yml"
    patch.write_text(
        "- insert:\n    - id: loop-brake\n      name: dsh-loop-brake\n      config:\n"
        "        maxRepeat: 5\n",
        encoding="utf-8",
    )
    row = compose_layers([Layer("patch", patch, "--patch")]).row("loop-brake")
    assert row is not None
    with pytest.raises(LoopBrakeConfigError) as caught:
        row_max_repeats(row, {})
    assert str(caught.value).startswith(f"{patch}:5: loop brake: unknown config key 'maxRepeat'")
    assert (caught.value.key, caught.value.path, caught.value.line) == (  # type: ignore[attr-defined]
        "maxRepeat",
        str(patch),
        5,
    )


def test_config_and_replay_word_the_same_error_the_same_way(
    run_cli: RunCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    assert run_cli("install", "--home", str(home)).returncode == 0
    bad = tmp_path / "bad.yml"
    bad.write_text("- id: loop-brake\n  config: {maxRepeats: 0}\n", encoding="utf-8")
    shown = run_cli("config", "--home", str(home), "--patch", str(bad))
    replayed = run_cli("replay", "--home", str(home), "--patch", str(bad))
    assert shown.returncode == replayed.returncode == 2
    expected = (
        f"error: {bad}:2: loop brake: maxRepeats must be an integer of at least 1, got 0 "
        "(from the loop-brake patch row)\n"
    )
    assert shown.stderr == replayed.stderr == expected


def test_usage_errors_of_every_command_share_the_style(run_cli: RunCli) -> None:
    for argv in (("config", "--bogus"), ("replay", "--bogus"), ("install", "--bogus")):
        done = run_cli(*argv)
        assert done.returncode == 2
        assert done.stderr.startswith("error: unrecognized arguments: --bogus; see ")
        assert done.stderr.endswith(f"`dsh-loop-brake {argv[0]} --help`\n")
