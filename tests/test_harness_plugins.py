"""Third-party bundles: a plugin and its manifest found through the ``dsh`` entry-point group."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_loop_brake.harness import Agent, Harness, ToolExecution, compose, find_manifest

PLUGIN = textwrap.dedent(
    """\
    from dsh_loop_brake.harness import ToolDefinition, hookimpl

    @hookimpl
    def dsh_apply(ctx, row):
        if row.name != "acme-echo":
            return None
        ctx.tools.register(ToolDefinition("echo", lambda args, execution: args["say"]))
        return ("acme handle", row.config)
    """
)


@pytest.fixture
def acme_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution ``acme-echo`` on sys.path, as pip would lay it out (wheel-style)."""
    site = tmp_path / "site"
    package = site / "acme_echo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    (package / "plugin.toml").write_text(
        '[dsh]\nname = "acme-echo"\nid = "echo"\n[dsh.bundle]\npatch = "cordis.patch.yml"\n',
        encoding="utf-8",
    )
    (package / "cordis.patch.yml").write_text(
        "- insert:\n    - id: echo\n      name: acme-echo\n      config: {greeting: hi}\n",
        encoding="utf-8",
    )
    info = site / "acme_echo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-echo\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("[dsh]\nacme-echo = acme_echo\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "acme_echo", raising=False)
    return package


def test_a_third_party_bundle_is_found_loaded_and_braked(
    acme_installed: Path, dsh_home: Path
) -> None:
    manifest = find_manifest("acme-echo")
    assert manifest.path == acme_installed / "plugin.toml"
    profile = dsh_home / "profiles" / "default"
    profile.mkdir(parents=True)
    (profile / "profile.yml").write_text("bundles: [dsh-loop-brake, acme-echo]\n", encoding="utf-8")
    row = compose().row("echo")
    assert row is not None and row.sources["id"].layer.path == acme_installed / "cordis.patch.yml"

    with Harness.boot() as harness:
        assert harness.applied() == ["loop-brake", "echo"]
        assert harness.handle("echo") == ("acme handle", {"greeting": "hi"})
        agent = Agent("a")

        async def say_hi_three_times() -> list[object]:
            results = []
            for number in range(3):
                execution = ToolExecution(f"c{number}", "echo", {"say": "hi"}, agent)
                result = await harness.execute(execution)
                results.append(result.error["code"] if result.error else result.content)
            return results

        # The entry point's plugin registered its tool while the loop brake was live.
        assert asyncio.run(say_hi_three_times()) == ["hi", "hi", "LOOP_BRAKE"]
    assert harness.tools.get("echo") is None
