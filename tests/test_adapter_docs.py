"""Every example in docs/adapters.md runs as written, with the framework's scripted model in place
of the line marked ``# your model`` (the one line that needs an account)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.adapter_support import offline as offline  # the autouse network guard
from tests.conftest import REPO_ROOT

DOC = Path(REPO_ROOT, "docs", "adapters.md").read_text(encoding="utf-8")
MODEL_LINE = re.compile(r"^(\s*)(\w+) = .*# your model$", re.MULTILINE)


def example(heading: str) -> str:
    section = DOC.split(f"\n### {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def scripted(framework: str) -> Any:
    if framework == "LangChain":
        from tests.test_adapter_langchain import ScriptedChatModel, repeating

        return ScriptedChatModel(messages=repeating(3, {"q": "Lisbon"}))
    if framework == "OpenAI Agents SDK":
        from tests.test_adapter_openai_agents import repeating as openai_repeating

        return openai_repeating(3, {"q": "Lisbon"})
    if framework == "pydantic-ai":
        from pydantic_ai.models.function import FunctionModel

        from tests.test_adapter_pydantic_ai import Repeating

        return FunctionModel(Repeating(3, {"q": "Lisbon"}))
    if framework == "llm":
        from tests.test_adapter_llm import Repeating as LlmRepeating

        return LlmRepeating(3, {"q": "Lisbon"})
    if framework == "Google ADK":
        from tests.test_adapter_google_adk import repeating as adk_repeating

        return adk_repeating(3, {"q": "Lisbon"})
    raise AssertionError(framework)


@pytest.mark.parametrize(
    "framework", ["LangChain", "OpenAI Agents SDK", "pydantic-ai", "llm", "Google ADK"]
)
def test_the_example_runs_and_its_third_identical_call_is_denied(framework: str) -> None:
    code, replaced = MODEL_LINE.subn(r"\1\2 = SCRIPTED", example(framework))
    assert replaced == 1
    model = scripted(framework)
    namespace: dict[str, Any] = {"SCRIPTED": model, "__name__": "example"}
    exec(compile(code, f"docs/adapters.md ({framework})", "exec"), namespace)
    # What the run handed the model (or recorded) holds the denial of the third call.
    handed = {
        "LangChain": lambda: namespace["state"]["messages"],
        "OpenAI Agents SDK": lambda: namespace["result"].to_input_list(),
        "pydantic-ai": lambda: namespace["result"].all_messages(),
        "llm": lambda: model.received,
        "Google ADK": lambda: namespace["events"],
    }[framework]()
    assert "called 3 times in a row with identical arguments" in repr(handed)


def test_the_claude_example_runs_against_a_scripted_claude_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Claude Code needs an account: the example's query() is given the transport that plays
    # Claude Code's side (the one public parameter the example leaves out), nothing else.
    import claude_agent_sdk

    from tests.scripted_claude_code import ScriptedClaudeCode

    cli = ScriptedClaudeCode([[[("Bash", {"command": "npm test"})]] * 3])
    real_query = claude_agent_sdk.query
    monkeypatch.setattr(claude_agent_sdk, "query", lambda **kw: real_query(**kw, transport=cli))
    namespace: dict[str, Any] = {"__name__": "example"}
    exec(compile(example("Claude Agent SDK"), "docs/adapters.md (Claude)", "exec"), namespace)
    assert len(cli.ran) == 2
    assert "called 3 times in a row with identical arguments" in capsys.readouterr().out


def test_the_brakes_example_runs() -> None:
    code = DOC.split("## Tuning the brakes", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "example"}
    exec(compile(code, "docs/adapters.md (brakes)", "exec"), namespace)
    assert namespace["middleware"].brakes.loop_brake.max_repeats == 5


def test_the_profile_example_honours_the_rows_it_shows(dsh_home: Path, run_cli: Any) -> None:
    # What the section tells a user to do, on real files: install, write the YAML it shows into
    # the profile's patch file, then run its Python.
    section = DOC.split("### From a profile", 1)[1].split("\n## ", 1)[0]
    assert run_cli("install", env={"DSH_HOME": str(dsh_home)}).returncode == 0
    rows = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (dsh_home / "profiles" / "default" / "cordis.patch.yml").write_text(rows, encoding="utf-8")
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "example"}
    exec(compile(code, "docs/adapters.md (from_profile)", "exec"), namespace)
    brakes = namespace["brakes"]
    try:
        assert namespace["middleware"].brakes is brakes
        assert brakes.loop_brake.max_repeats == 2
        assert brakes.circuit_breaker.config.duplicate_limit == 3
        assert brakes.circuit_breaker.config.window == 10
    finally:
        brakes.close()
