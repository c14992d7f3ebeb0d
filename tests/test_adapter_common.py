"""What every adapter shares: imported only with its framework, a missing framework names its
extra, the options are checked, and JSON-string arguments are parsed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dsh_loop_brake import Brakes, LoopBrake
from dsh_loop_brake.adapters._common import Verdicts, parse_arguments

# adapter module -> (the extra that installs its framework, the framework's import name)
ADAPTERS = {
    "langchain": ("langchain", "langchain"),
    "openai_agents": ("openai-agents", "agents"),
    "pydantic_ai": ("pydantic-ai", "pydantic_ai"),
    "claude_agent_sdk": ("claude-agent-sdk", "claude_agent_sdk"),
    "llm": ("llm", "llm"),
    "google_adk": ("google-adk", "google.adk"),
}
FRAMEWORK_PACKAGES = ("langchain", "agents", "pydantic_ai", "claude_agent_sdk", "llm", "google")


def python(code: str, cli_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, timeout=300
    )


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_missing_framework_is_an_import_error_naming_the_extra(
    adapter: str, cli_env: dict[str, str]
) -> None:
    extra, package = ADAPTERS[adapter]
    # A None in sys.modules is how Python spells "this module cannot be imported".
    code = f"""
import sys
sys.modules[{package!r}] = None
try:
    import dsh_loop_brake.adapters.{adapter}
except ImportError as error:
    print(error)
else:
    print("imported")
"""
    shown = python(code, cli_env).stdout.strip()
    assert shown.startswith(f"dsh_loop_brake.adapters.{adapter} needs ")
    assert shown.endswith(f', which is not installed: pip install -U "dsh-loop-brake[{extra}]"')


def test_the_adapters_package_imports_no_framework(cli_env: dict[str, str]) -> None:
    code = f"""
import sys
import dsh_loop_brake, dsh_loop_brake.adapters, dsh_loop_brake.adapters._common
print([p for p in {FRAMEWORK_PACKAGES!r} if p in sys.modules])
"""
    assert python(code, cli_env).stdout.strip() == "[]"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_an_adapter_imports_no_other_adapter(adapter: str, cli_env: dict[str, str]) -> None:
    code = f"""
import sys
import dsh_loop_brake.adapters.{adapter}
print(sorted(m for m in sys.modules if m.startswith("dsh_loop_brake.adapters.")))
"""
    expected = sorted({"dsh_loop_brake.adapters._common", f"dsh_loop_brake.adapters.{adapter}"})
    assert python(code, cli_env).stdout.strip() == repr(expected)


def test_the_options_are_checked_when_an_adapter_is_made() -> None:
    with pytest.raises(ValueError, match='on_deny must be "message" or "raise", got \'stop\''):
        Verdicts(None, "stop", where="X")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"brakes must be a dsh_loop_brake.Brakes.*got LoopBrake"):
        Verdicts(LoopBrake(), "message", where="X")  # type: ignore[arg-type]
    from dsh_loop_brake.adapters.llm import loop_brake_before_call

    with pytest.raises(TypeError, match="session must be a function"):
        loop_brake_before_call(session=5)  # type: ignore[arg-type]
    assert isinstance(Verdicts(None, "raise", where="X").brakes, Brakes)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"q": "weather", "n": 1}', {"q": "weather", "n": 1}),
        ("[1, 2]", [1, 2]),
        ("not json", "not json"),
        ("", ""),
        ("[" * 100_000, "[" * 100_000),  # too deep for the parser: the raw string
        ({"q": "as given"}, {"q": "as given"}),
        (None, None),
    ],
)
def test_json_string_arguments_are_parsed_and_unparsable_ones_stay_raw(
    raw: object, parsed: object
) -> None:
    assert parse_arguments(raw) == parsed


def test_a_parsed_call_is_the_same_call_as_its_json_value() -> None:
    verdicts = Verdicts(Brakes(LoopBrake(2)), "message", where="X")
    assert verdicts.judge("t", json.dumps({"b": 1, "a": 2}), "s") is None
    denial = verdicts.judge("t", {"a": 2, "b": 1}, "s")
    assert denial is not None and denial.__traceback__ is None
