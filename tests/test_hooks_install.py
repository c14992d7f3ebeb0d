"""``hook install`` / ``hook uninstall`` on real settings files in a temporary HOME."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hooks_support import REPO_ROOT, denial_of, fixture, hook_env

from dsh_loop_brake.harness import compose

SETTINGS = {
    ("claude-code", "user"): ".claude/settings.json",
    ("claude-code", "project"): ".claude/settings.json",
    ("claude-code", "local"): ".claude/settings.local.json",
    ("codex", "user"): ".codex/hooks.json",
    ("codex", "project"): ".codex/hooks.json",
    ("gemini", "user"): ".gemini/settings.json",
    ("gemini", "project"): ".gemini/settings.json",
}
EVENT = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
FIXTURE = {
    "claude-code": "claude-code-bash.json",
    "codex": "codex-bash.json",
    "gemini": "gemini-shell.json",
}


class Installer:
    """Runs ``python -m dsh_loop_brake hook ...`` with its own HOME, project directory, dsh home."""

    def __init__(self, root: Path) -> None:
        self.home = root / "user-home"
        self.project = root / "project"
        self.dsh = root / "dsh-home"
        for directory in (self.home, self.project):
            directory.mkdir()

    def env(self) -> dict[str, str]:
        return hook_env({"HOME": str(self.home), "DSH_HOME": str(self.dsh)})

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dsh_loop_brake", "hook", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=self.env(),
            cwd=self.project,
            timeout=120,
            check=False,
        )

    def settings(self, host: str, scope: str) -> Path:
        base = self.home if scope == "user" else self.project
        return base / SETTINGS[(host, scope)]


@pytest.fixture
def installer(tmp_path: Path) -> Installer:
    return Installer(tmp_path)


def _ours(data: dict[str, Any], host: str) -> list[dict[str, Any]]:
    return [
        handler
        for group in data.get("hooks", {}).get(EVENT[host], [])
        for handler in group.get("hooks", [])
        if " hook " in handler.get("command", "") and "dsh" in handler.get("command", "")
    ]


@pytest.mark.parametrize(("host", "scope"), sorted(SETTINGS))
def test_install_creates_the_settings_file(installer: Installer, host: str, scope: str) -> None:
    done = installer.run("install", host, "--scope", scope)
    assert done.returncode == 0, done.stderr
    path = installer.settings(host, scope)
    data = json.loads(path.read_text(encoding="utf-8"))
    groups = data["hooks"][EVENT[host]]
    assert len(groups) == 1 and groups[0]["matcher"] == "*"
    (handler,) = groups[0]["hooks"]
    assert handler["type"] == "command"
    assert handler["timeout"] == (10_000 if host == "gemini" else 10)
    words = shlex.split(handler["command"])
    assert os.path.isabs(words[0])
    assert words[-2:] == ["hook", host]
    assert str(path) in done.stdout and f"({scope} scope)" in done.stdout


@pytest.mark.parametrize("host", sorted(EVENT))
def test_the_installed_command_works_from_anywhere_without_the_venv(
    installer: Installer, host: str, tmp_path: Path
) -> None:
    assert installer.run("install", host).returncode == 0
    data = json.loads(installer.settings(host, "user").read_text(encoding="utf-8"))
    (handler,) = _ours(data, host)
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    # What the host does: the command string through a shell, its own cwd, a minimal PATH and
    # no virtual environment (nor PYTHONPATH) activated.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(installer.home), "DSH_HOME": str(installer.dsh)}
    outputs = _three_calls_through_sh(handler["command"], host, elsewhere, env)
    verdicts = [denial_of(host, done) for done in outputs]
    assert verdicts[:2] == [None, None] and verdicts[2] is not None
    assert (installer.dsh / "state" / "brakes.sqlite3").is_file()


def _three_calls_through_sh(
    command: str, host: str, cwd: Path, env: dict[str, str]
) -> list[subprocess.CompletedProcess[bytes]]:
    """The same call three times, as the host makes it: the command string through a shell."""
    event = json.dumps(fixture(FIXTURE[host])).encode()
    return [
        subprocess.run(
            ["/bin/sh", "-c", command],
            input=event,
            capture_output=True,
            cwd=cwd,
            env=env,
            timeout=120,
            check=False,
        )
        for _ in range(3)
    ]


def test_install_keeps_every_other_key_hook_and_the_order(installer: Installer) -> None:
    path = installer.settings("claude-code", "user")
    path.parent.mkdir(parents=True)
    original = {
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "model": "claude-sonnet-4-5",
        "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(./.env)"]},
        "hooks": {
            "PostToolUse": [
                {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "lint.sh"}]}
            ],
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [{"type": "command", "command": "$CLAUDE_PROJECT_DIR/guard.sh"}],
                }
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
        "env": {"FOO": "1"},
        "statusLine": {"type": "command", "command": "status.sh"},
        "ünïcode": "kept as it is: ✓",
    }
    path.write_text(json.dumps(original, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
    assert installer.run("install", "claude-code").returncode == 0
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == list(original)
    assert list(data["hooks"]) == list(original["hooks"])
    pre = data["hooks"]["PreToolUse"]
    assert pre[0] == original["hooks"]["PreToolUse"][0]  # the user's own hook, first as before
    assert len(pre) == 2 and pre[1]["matcher"] == "*"
    for key in original:
        if key != "hooks":
            assert data[key] == original[key]
    assert data["hooks"]["PostToolUse"] == original["hooks"]["PostToolUse"]
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n    "$schema"') and "✓" in text  # indentation and UTF-8 kept


def test_installing_twice_changes_nothing(installer: Installer) -> None:
    assert installer.run("install", "codex").returncode == 0
    path = installer.settings("codex", "user")
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino)
    again = installer.run("install", "codex")
    assert again.returncode == 0 and "already installed" in again.stdout
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino) == before


def test_install_keeps_the_files_mode_and_replaces_it_atomically(installer: Installer) -> None:
    path = installer.settings("gemini", "user")
    path.parent.mkdir(parents=True)
    path.write_text('{"theme": "Dracula"}\n', encoding="utf-8")
    path.chmod(0o600)
    inode = path.stat().st_ino
    assert installer.run("install", "gemini").returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != inode  # a new file renamed over the old one
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp file left


def test_install_writes_through_a_symlinked_settings_file(installer: Installer) -> None:
    real = installer.home / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n', encoding="utf-8")
    link = installer.settings("claude-code", "user")
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert installer.run("install", "claude-code").returncode == 0
    assert link.is_symlink()
    assert _ours(json.loads(real.read_text(encoding="utf-8")), "claude-code")


def test_crlf_and_tab_indentation_survive(installer: Installer) -> None:
    path = installer.settings("claude-code", "project")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{\r\n\t"model": "sonnet",\r\n\t"hooks": {}\r\n}\r\n')
    assert installer.run("install", "claude-code", "--scope", "project").returncode == 0
    raw = path.read_bytes()
    assert b'\r\n\t"model": "sonnet",\r\n' in raw and b"\n" not in raw.replace(b"\r\n", b"")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"model": "opus",}', "is not valid JSON"),
        (b'{\n  // my settings\n  "model": "opus"\n}\n', "comments are not JSON"),
        (b"[1, 2, 3]", "holds a JSON array"),
        (b'"just a string"', "holds a JSON string"),
        (b'{"hooks": []}', '"hooks" is a JSON array'),
        (b'{"hooks": {"PreToolUse": {"matcher": "*"}}}', "is a JSON object, not a list"),
        (b'{"model": "\xff"}', "is not UTF-8"),
    ],
)
def test_a_malformed_settings_file_is_refused_untouched(
    installer: Installer, content: bytes, why: str
) -> None:
    path = installer.settings("claude-code", "user")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    before = path.stat().st_mtime_ns
    for action in ("install", "uninstall"):
        done = installer.run(action, "claude-code")
        assert done.returncode == 2, done
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1 and str(path) in done.stderr and why in done.stderr
        assert "Traceback" not in done.stderr
        assert path.read_bytes() == content and path.stat().st_mtime_ns == before


def test_a_malformed_settings_file_is_refused_before_the_patch_file_is_touched(
    installer: Installer,
) -> None:
    path = installer.settings("claude-code", "user")
    path.parent.mkdir(parents=True)
    path.write_text("{oops", encoding="utf-8")
    done = installer.run("install", "claude-code", "--with-circuit-breaker")
    assert done.returncode == 2
    assert not (installer.dsh / "profiles").exists()


def test_an_empty_settings_file_is_an_empty_object(installer: Installer) -> None:
    path = installer.settings("codex", "project")
    path.parent.mkdir(parents=True)
    path.write_text("", encoding="utf-8")
    assert installer.run("install", "codex", "--scope", "project").returncode == 0
    assert _ours(json.loads(path.read_text(encoding="utf-8")), "codex")


def test_local_scope_exists_for_claude_code_only(installer: Installer) -> None:
    for host in ("codex", "gemini"):
        done = installer.run("install", host, "--scope", "local")
        assert done.returncode == 2 and "Claude Code only" in done.stderr


def test_uninstall_removes_only_our_entries(installer: Installer) -> None:
    path = installer.settings("gemini", "project")
    path.parent.mkdir(parents=True)
    theirs = {"name": "secrets", "type": "command", "command": "scan.sh", "timeout": 5000}
    original = {
        "general": {"vimMode": True},
        "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [theirs]}]},
    }
    path.write_text(json.dumps(original, indent=2) + "\n", encoding="utf-8")
    assert installer.run("install", "gemini", "--scope", "project").returncode == 0
    done = installer.run("uninstall", "gemini", "--scope", "project")
    assert done.returncode == 0 and "removed" in done.stdout
    assert json.loads(path.read_text(encoding="utf-8")) == original
    again = installer.run("uninstall", "gemini", "--scope", "project")
    assert again.returncode == 0 and "not installed" in again.stdout


def test_uninstall_leaves_no_empty_hooks_behind_and_keeps_the_rest(installer: Installer) -> None:
    path = installer.settings("claude-code", "local")
    path.parent.mkdir(parents=True)
    path.write_text('{"model": "haiku"}\n', encoding="utf-8")
    assert installer.run("install", "claude-code", "--scope", "local").returncode == 0
    assert installer.run("uninstall", "claude-code", "--scope", "local").returncode == 0
    assert path.read_text(encoding="utf-8") == '{\n  "model": "haiku"\n}\n'


def test_uninstall_recognises_every_form_of_our_command(installer: Installer) -> None:
    path = installer.settings("claude-code", "user")
    path.parent.mkdir(parents=True)
    mine = [
        "/opt/old-venv/bin/dsh-loop-brake hook claude-code --profile work",
        "'/home/me/with space/bin/python3' -m dsh_loop_brake hook claude-code",
        "/usr/bin/python3 -P -m dsh_loop_brake hook claude-code --home /srv/dsh",
        "DSH_HOME=/srv/dsh /usr/local/bin/dsh-loop-brake hook claude-code",
    ]
    theirs = [
        "echo dsh-loop-brake hook claude-code",
        "/opt/venv/bin/dsh-loop-brake hook codex",  # another host's, in the wrong file
        # the user's own command around our hook: a pipe, a redirect (theirs to keep)
        "/opt/venv/bin/dsh-loop-brake hook claude-code --profile strict 2>>/tmp/h.log | tee x",
        "my-guard.sh",
    ]
    data = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "*", "hooks": [{"type": "command", "command": c} for c in mine]},
                {"matcher": "Bash", "hooks": [{"type": "command", "command": c} for c in theirs]},
            ]
        }
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    assert installer.run("uninstall", "claude-code").returncode == 0
    left = json.loads(path.read_text(encoding="utf-8"))["hooks"]["PreToolUse"]
    assert [h["command"] for group in left for h in group["hooks"]] == theirs


def test_reinstalling_with_another_profile_replaces_our_entry_in_place(
    installer: Installer,
) -> None:
    path = installer.settings("codex", "user")
    path.parent.mkdir(parents=True)
    first = {"matcher": "Bash", "hooks": [{"type": "command", "command": "first.sh"}]}
    last = {"matcher": "*", "hooks": [{"type": "command", "command": "last.sh"}]}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [first, last]}}), encoding="utf-8")
    assert installer.run("install", "codex").returncode == 0
    assert installer.run("install", "codex", "--profile", "work").returncode == 0
    groups = json.loads(path.read_text(encoding="utf-8"))["hooks"]["PreToolUse"]
    assert groups[0] == first and groups[1] == last and len(groups) == 3
    (ours,) = groups[2]["hooks"]
    assert shlex.split(ours["command"])[-4:] == ["hook", "codex", "--profile", "work"]


def test_the_profile_and_home_are_written_into_the_command(
    installer: Installer, tmp_path: Path
) -> None:
    home = tmp_path / "other-dsh"
    done = installer.run("install", "gemini", "--profile", "ci", "--home", str(home))
    assert done.returncode == 0, done.stderr
    (handler,) = _ours(json.loads(installer.settings("gemini", "user").read_text()), "gemini")
    assert shlex.split(handler["command"])[-6:] == [
        "hook",
        "gemini",
        "--profile",
        "ci",
        "--home",
        str(home),
    ]
    assert handler["name"] == "dsh-loop-brake"


def test_install_says_what_the_loop_brake_cannot_see(installer: Installer) -> None:
    done = installer.run("install", "claude-code")
    assert "description" in done.stdout and "--with-circuit-breaker" in done.stdout


def test_with_circuit_breaker_adds_the_row_once_and_stops_the_description_loop(
    installer: Installer, tmp_path: Path
) -> None:
    done = installer.run("install", "claude-code", "--with-circuit-breaker")
    assert done.returncode == 0, done.stderr
    patch = installer.dsh / "profiles" / "default" / "cordis.patch.yml"
    row = compose("default", installer.dsh).row("circuit-breaker")
    assert row is not None and row.name == "dsh-circuit-breaker"
    assert row.config is not None and "description" in row.config["ignoreArgs"]
    text = patch.read_text(encoding="utf-8")
    again = installer.run("install", "claude-code", "--with-circuit-breaker")
    assert again.returncode == 0 and "already has a circuit-breaker row" in again.stdout
    assert patch.read_text(encoding="utf-8") == text
    # The installed command now denies the same Bash command under ever new descriptions.
    (handler,) = _ours(
        json.loads(installer.settings("claude-code", "user").read_text()), "claude-code"
    )
    event = fixture("claude-code-bash.json")
    verdicts = []
    for attempt in range(7):
        event["tool_input"]["description"] = f"Run the tests (try {attempt})"
        done = subprocess.run(
            ["/bin/sh", "-c", handler["command"]],
            input=json.dumps(event).encode(),
            capture_output=True,
            env={"PATH": "/usr/bin:/bin", "DSH_HOME": str(installer.dsh)},
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        verdicts.append(denial_of("claude-code", done))
    assert verdicts[:5] == [None] * 5
    assert verdicts[5] is not None and verdicts[5].startswith("circuit breaker:")


def test_with_circuit_breaker_keeps_the_patch_files_comments_and_rows(
    installer: Installer,
) -> None:
    patch = installer.dsh / "profiles" / "default" / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    original = textwrap.dedent(
        """\
        # my overrides: keep this comment
        - insert:
            - id: loop-brake
              name: dsh-loop-brake
              config:
                maxRepeats: 4   # four, not three
        """
    )
    patch.write_text(original, encoding="utf-8")
    patch.chmod(0o640)
    assert installer.run("install", "gemini", "--with-circuit-breaker").returncode == 0
    text = patch.read_text(encoding="utf-8")
    assert text.startswith("# my overrides: keep this comment\n- insert:\n    - id: loop-brake\n")
    assert "# four, not three" in text
    assert stat.S_IMODE(patch.stat().st_mode) == 0o640
    rows = compose("default", installer.dsh).rows
    assert [row.id for row in rows] == ["loop-brake", "circuit-breaker"]
    assert rows[0].config == {"maxRepeats": 4}


def test_two_scopes_with_different_commands_are_warned_about(installer: Installer) -> None:
    assert installer.run("install", "claude-code").returncode == 0
    done = installer.run("install", "claude-code", "--scope", "project", "--profile", "other")
    assert done.returncode == 0
    assert "counted twice" in done.stderr and str(installer.settings("claude-code", "user")) in (
        done.stderr
    )


def test_the_hosts_own_home_variables_are_honoured(installer: Installer, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    env = dict(installer.env(), CODEX_HOME=str(codex_home))
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "hook", "install", "codex"],
        capture_output=True,
        text=True,
        env=env,
        cwd=installer.project,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (codex_home / "hooks.json").is_file()
    assert not (installer.home / ".codex").exists()


def test_help_lists_the_hosts_and_the_actions() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_loop_brake", "hook", "--help"],
        capture_output=True,
        text=True,
        env=hook_env(),
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    for word in ("claude-code", "codex", "gemini", "install", "uninstall", "reset"):
        assert word in done.stdout


@pytest.mark.parametrize(
    ("host", "settings", "why"),
    [
        ("claude-code", {"disableAllHooks": True}, "disableAllHooks"),
        ("gemini", {"hooksConfig": {"enabled": False}}, '"enabled": false'),
        ("gemini", {"hooksConfig": {"disabled": ["dsh-loop-brake"]}}, "hooksConfig.disabled"),
    ],
)
def test_install_warns_when_the_host_would_not_run_it(
    installer: Installer, host: str, settings: dict[str, Any], why: str
) -> None:
    path = installer.settings(host, "user")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(settings), encoding="utf-8")
    done = installer.run("install", host)
    assert done.returncode == 0 and why in done.stderr and "will not run" in done.stderr


def test_install_keeps_a_users_own_command_around_the_hook(installer: Installer) -> None:
    path = installer.settings("claude-code", "user")
    path.parent.mkdir(parents=True)
    theirs = "DEBUG=1 /opt/tools/dsh-loop-brake hook claude-code --profile strict | tee -a d.log"
    group = {"matcher": "Bash", "hooks": [{"type": "command", "command": theirs}]}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}), encoding="utf-8")
    assert installer.run("install", "claude-code").returncode == 0
    groups = json.loads(path.read_text(encoding="utf-8"))["hooks"]["PreToolUse"]
    assert groups[0] == group  # kept, matcher and pipeline and all
    assert installer.run("uninstall", "claude-code").returncode == 0
    assert json.loads(path.read_text(encoding="utf-8"))["hooks"]["PreToolUse"] == [group]


def test_the_python_m_form_runs_our_hook_not_a_package_in_the_projects_directory(
    tmp_path: Path,
) -> None:
    # The form `hook install` writes when it finds no console script: the host runs it in the
    # agent's project, which may hold a package of the same name (or a json.py) to shadow ours.
    project = tmp_path / "project"
    (project / "dsh_loop_brake").mkdir(parents=True)
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    planted = f"print({json.dumps(json.dumps(allow))})\n"
    (project / "dsh_loop_brake" / "__init__.py").write_text("", encoding="utf-8")
    (project / "dsh_loop_brake" / "__main__.py").write_text(planted, encoding="utf-8")
    (project / "json.py").write_text(planted, encoding="utf-8")
    safe = "-P" if sys.version_info >= (3, 11) else "-I"
    command = shlex.join([sys.executable, safe, "-m", "dsh_loop_brake", "hook", "claude-code"])
    env = hook_env({"DSH_HOME": str(tmp_path / "dsh"), "HOME": str(tmp_path)})
    outputs = _three_calls_through_sh(command, "claude-code", project, env)
    assert [done.returncode for done in outputs] == [0, 0, 0]
    assert outputs[0].stdout == outputs[1].stdout == b""
    assert b'"deny"' in outputs[2].stdout and b"allow" not in outputs[2].stdout
