"""Brakes: the loop brake, then the circuit breaker, for hosts other than the harness (SPEC §10),
and Brakes.from_profile on real profile files."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

import dsh_loop_brake
from dsh_loop_brake import (
    Brakes,
    CircuitBreakerError,
    InvalidMaxRepeatsError,
    LoopBrake,
    LoopBrakeError,
    ToolCallDenied,
)
from dsh_loop_brake.circuit_breaker import (
    CircuitBreaker,
    CircuitBreakerConfigError,
    resolve_config,
)
from dsh_loop_brake.harness import PatchError

CANARY = "sk-CANARY-90d2e1"


def breaker(**config: Any) -> CircuitBreaker:
    return CircuitBreaker(resolve_config(config))


def denied(brakes: Brakes, tool: str, args: Any, session: str | None) -> ToolCallDenied:
    with pytest.raises(ToolCallDenied) as caught:
        brakes.check(tool, args, session_id=session)
    return caught.value


# --- the library ------------------------------------------------------------------------------


def test_by_default_it_is_a_default_loop_brake_alone() -> None:
    brakes = Brakes()
    assert isinstance(brakes.loop_brake, LoopBrake) and brakes.loop_brake.max_repeats == 3
    assert brakes.circuit_breaker is None
    brakes.check("search", {"q": "x"}, session_id="s1")
    brakes.check("search", {"q": "x"}, session_id="s1")
    brakes.check("search", {"q": "x"}, session_id="s2")  # another session: its own streak
    error = denied(brakes, "search", {"q": "x"}, "s1")
    assert type(error) is LoopBrakeError and error.session_id == "s1"
    assert dsh_loop_brake.Brakes is Brakes


def test_the_loop_brake_judges_first_and_a_call_it_denies_never_reaches_the_breaker() -> None:
    cb = breaker(duplicateLimit=5, window=10)
    brakes = Brakes(LoopBrake(2), cb)
    brakes.check("read", {"path": "a"}, session_id="agent-1")
    for _ in range(3):
        assert type(denied(brakes, "read", {"path": "a"}, "agent-1")) is LoopBrakeError
    assert cb.calls("agent-1") == 1  # only the allowed call was recorded


def test_the_breaker_catches_what_the_streak_cannot_see() -> None:
    brakes = Brakes(LoopBrake(3), breaker(duplicateLimit=3, window=10))
    for _ in range(2):
        brakes.check("search", {"q": "news"}, session_id="agent-1")
        brakes.check("search", {"q": "sports"}, session_id="agent-1")
    error = denied(brakes, "search", {"q": "news"}, "agent-1")
    assert isinstance(error, CircuitBreakerError)
    assert (error.code, error.kind, error.count, error.session_id) == (
        "CIRCUIT_BREAKER",
        "duplicate",
        3,
        "agent-1",
    )
    brakes.check("search", {"q": "news"}, session_id="agent-2")  # the breaker's agents are apart


def test_the_session_is_the_breakers_agent() -> None:
    cb = breaker(maxCallsPerAgent=2)
    brakes = Brakes(LoopBrake(10), cb)
    for n in range(2):
        brakes.check("t", n, session_id="a")
    brakes.check("t", 0, session_id="b")
    assert (cb.calls("a"), cb.calls("b")) == (2, 1)
    assert denied(brakes, "t", 9, "a").code == "CIRCUIT_BREAKER"


def our_frames(error: BaseException) -> list[str]:
    package = str(Path(dsh_loop_brake.__file__).parent)
    exception = traceback.TracebackException(
        type(error), error, error.__traceback__, capture_locals=True
    )
    return [f"{f.name} {f.locals}" for f in exception.stack if f.filename.startswith(package)]


def frames_of_a_denial(which: str) -> list[str]:
    brakes = Brakes(LoopBrake(2 if which == "loop-brake" else 10), breaker(duplicateLimit=2))
    secret = {"headers": {"Authorization": f"Bearer {CANARY}"}}
    brakes.check("http_get", secret, session_id="s")
    try:
        brakes.check("http_get", secret, session_id="s")
    except ToolCallDenied as error:
        assert error.code == which.upper().replace("-", "_")
        frames = our_frames(error)
    else:
        pytest.fail("the repeat was not denied")
    assert any(frame.startswith("check {'self'") for frame in frames)  # Brakes.check's
    return frames


@pytest.mark.parametrize(
    "which",
    [
        "loop-brake",
        "circuit-breaker",
    ],
)
def test_a_denial_leaves_no_frame_of_ours_holding_the_arguments(which: str) -> None:
    for frame in frames_of_a_denial(which):
        assert CANARY not in frame


@pytest.mark.parametrize("which", ["loop-brake", "circuit-breaker"])
def test_the_brakes_own_frame_lets_go_of_the_arguments(which: str) -> None:
    (frame,) = [f for f in frames_of_a_denial(which) if "Brakes" in f.split(",")[0]]
    assert CANARY not in frame


# --- from_profile -----------------------------------------------------------------------------

BREAKER_ROW = """\
- insert:
    - id: circuit-breaker
      name: dsh-circuit-breaker
      config:
        duplicateLimit: 3
        window: 10
"""


def profile(
    home: Path, patch: str = "", *, name: str = "default", bundles: str = "[dsh-loop-brake]"
) -> Path:
    directory = home / "profiles" / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profile.yml").write_text(f"bundles: {bundles}\n", encoding="utf-8")
    path = directory / "cordis.patch.yml"
    if patch:
        path.write_text(patch, encoding="utf-8")
    return path


def test_from_profile_builds_both_from_the_profiles_rows(dsh_home: Path) -> None:
    profile(dsh_home, "- id: loop-brake\n  config:\n    maxRepeats: 2\n" + BREAKER_ROW)
    with Brakes.from_profile() as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 2
        assert brakes.circuit_breaker is not None
        assert brakes.circuit_breaker.config.duplicate_limit == 3
        brakes.check("bash", {"command": "ls"}, session_id="s")
        assert type(denied(brakes, "bash", {"command": "ls"}, "s")) is LoopBrakeError
        brakes.check("a", 1, session_id="t")
        brakes.check("b", 1, session_id="t")
        brakes.check("a", 1, session_id="t")
        brakes.check("b", 1, session_id="t")
        assert type(denied(brakes, "a", 1, "t")) is CircuitBreakerError


def test_the_environment_fills_in_only_what_the_row_leaves_out(
    dsh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "7")
    profile(dsh_home)
    with Brakes.from_profile() as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 7
    profile(dsh_home, "- id: loop-brake\n  config:\n    maxRepeats: 2\n")
    with Brakes.from_profile() as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 2


def test_every_layer_composes_in_order_and_a_later_one_can_switch_a_row_off(
    tmp_path: Path, dsh_home: Path
) -> None:
    profile(dsh_home, BREAKER_ROW, name="work")
    (dsh_home / "cordis.patch.yml").write_text(
        "- id: loop-brake\n  config:\n    maxRepeats: 5\n", encoding="utf-8"
    )
    override = tmp_path / "ci.yml"
    override.write_text("- id: circuit-breaker\n  disabled: true\n", encoding="utf-8")
    with Brakes.from_profile("work") as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 5
        assert brakes.circuit_breaker is not None
    with Brakes.from_profile("work", patches=[override]) as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 5
        assert brakes.circuit_breaker is None


def test_home_may_be_given_instead_of_the_environment(tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    profile(home, "- id: loop-brake\n  config:\n    maxRepeats: 6\n")
    with Brakes.from_profile(home=home) as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 6


def test_a_profile_without_a_loop_brake_row_gets_the_bundles_defaults(dsh_home: Path) -> None:
    with Brakes.from_profile("does-not-exist") as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 3
        assert brakes.circuit_breaker is None
    profile(dsh_home, BREAKER_ROW, bundles="[]")
    with Brakes.from_profile() as brakes:
        assert brakes.loop_brake is not None and brakes.loop_brake.max_repeats == 3
        assert brakes.circuit_breaker is not None


def test_a_disabled_loop_brake_row_brakes_nothing(dsh_home: Path) -> None:
    profile(dsh_home, "- id: loop-brake\n  disabled: true\n")
    with Brakes.from_profile() as brakes:
        assert brakes.loop_brake is None and brakes.circuit_breaker is None
        for _ in range(20):
            brakes.check("search", {"q": "x"}, session_id="s")


def test_a_bad_loop_brake_value_names_its_file_and_line(dsh_home: Path) -> None:
    path = profile(dsh_home, "# tuned for CI\n- id: loop-brake\n  config:\n    maxRepeats: 0\n")
    with pytest.raises(InvalidMaxRepeatsError) as caught:
        Brakes.from_profile()
    error = caught.value
    assert str(error).startswith(f"{path}:4: loop brake: maxRepeats must be an integer")
    assert (error.path, error.line, error.value) == (str(path), 4, 0)


@pytest.mark.parametrize(
    ("config", "line", "fragment"),
    [
        ("        duplicateLimit: 3\n        window: 2\n", 6, "window must be at least"),
        ("        duplicatelimit: 3\n", 5, "unknown key 'duplicatelimit'"),
        ("        enabled: sometimes\n", 5, "enabled must be true or false"),
    ],
)
def test_a_bad_breaker_value_names_its_file_and_line(
    dsh_home: Path, config: str, line: int, fragment: str
) -> None:
    patch = "- insert:\n    - id: circuit-breaker\n      name: dsh-circuit-breaker\n      config:\n"
    path = profile(dsh_home, patch + config)
    with pytest.raises(CircuitBreakerConfigError) as caught:
        Brakes.from_profile()
    assert str(caught.value).startswith(f"{path}:{line}: circuit breaker: ")
    assert fragment in str(caught.value)


def test_a_bad_environment_value_is_named_as_such(
    dsh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_LOOP_BRAKE_MAX_REPEATS", "many")
    profile(dsh_home)
    with pytest.raises(InvalidMaxRepeatsError, match="environment variable") as caught:
        Brakes.from_profile()
    assert caught.value.path is None


def test_a_malformed_patch_file_is_the_harness_error_with_its_line(dsh_home: Path) -> None:
    path = profile(dsh_home, "- id: loop-brake\n  disable: true\n")
    with pytest.raises(PatchError) as caught:
        Brakes.from_profile()
    assert str(caught.value).startswith(f"{path}:")


def test_close_disposes_what_was_applied(dsh_home: Path) -> None:
    profile(dsh_home, BREAKER_ROW)
    brakes = Brakes.from_profile()
    assert brakes.loop_brake is not None and brakes.circuit_breaker is not None
    brakes.check("t", 1, session_id="s")
    assert len(brakes.loop_brake) == 1 and brakes.circuit_breaker.calls("s") == 1
    brakes.close()
    brakes.close()  # idempotent
    assert len(brakes.loop_brake) == 0 and brakes.circuit_breaker.calls("s") == 0
