"""``hook install`` and ``hook uninstall``: the hook's entry in a host's JSON settings file.

The three hosts keep their hooks in the same nesting: ``hooks`` → the event → a list of matcher
groups ``{"matcher": ..., "hooks": [handler, ...]}``, each handler ``{"type": "command",
"command": ...}``. The hook is installed as one group of its own, matcher ``*`` (every tool),
whose one handler runs this installation's ``dsh-loop-brake`` by absolute path:

- Claude Code: ``~/.claude/settings.json`` (user; ``$CLAUDE_CONFIG_DIR`` instead of
  ``~/.claude`` when set), ``.claude/settings.json`` (project), ``.claude/settings.local.json``
  (local), event ``PreToolUse``, ``timeout`` in seconds;
- Codex CLI: ``~/.codex/hooks.json`` (user; ``$CODEX_HOME`` when set), ``.codex/hooks.json``
  (project), event ``PreToolUse``, ``timeout`` in seconds;
- gemini-cli: ``~/.gemini/settings.json`` (user; ``$GEMINI_CLI_HOME/.gemini`` when set),
  ``.gemini/settings.json`` (project), event ``BeforeTool``, ``timeout`` in milliseconds, and a
  ``name`` (``/hooks disable dsh-loop-brake`` works).

An edit keeps every other key, group and handler, and the file's key order, indentation and
line endings; it is written only when something changes (installing twice writes nothing), and
atomically with the file's mode kept. The hook's own handlers are recognised by their command
(``.../dsh-loop-brake hook HOST`` or ``... -m dsh_loop_brake hook HOST``), so uninstall removes
exactly those, whichever installation or profile they were written for.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from dsh_loop_brake.hooks._hosts import Host

__all__ = [
    "HANDLER_TIMEOUT_SECONDS",
    "SCOPES",
    "SettingsChange",
    "SettingsError",
    "hook_command",
    "install_hook",
    "is_our_handler",
    "load_settings",
    "settings_path",
    "uninstall_hook",
]

SCOPES = ("user", "project", "local")
#: How long a host waits for the hook before running the call anyway (the hook needs ~0.02 s;
#: this only bounds a stuck one: a timed-out hook blocks nothing in any of the three hosts).
HANDLER_TIMEOUT_SECONDS = 10
SCRIPT_NAME = "dsh-loop-brake"
MODULE_NAME = "dsh_loop_brake"
GEMINI_HOOK_NAME = "dsh-loop-brake"
_SCRIPT_FILES = (SCRIPT_NAME, f"{SCRIPT_NAME}.exe")


class SettingsError(Exception):
    """A settings file that cannot be edited: it was left untouched; the message names it."""


class SettingsChange:
    """What an install or uninstall did to one settings file."""

    __slots__ = ("changed", "count", "created", "path")

    def __init__(self, path: Path, changed: bool, *, created: bool = False, count: int = 0):
        self.path = path
        self.changed = changed
        self.created = created
        self.count = count  # uninstall: how many handlers were removed


def settings_path(
    host: Host,
    scope: str,
    *,
    cwd: str | os.PathLike[str] | None = None,
    environ: dict[str, str] | None = None,
) -> Path:
    """The settings file of ``host`` for ``scope``; ``~`` is the user's home (``$HOME``)."""
    env = os.environ if environ is None else environ
    project = Path(os.getcwd() if cwd is None else cwd)
    if scope == "local" and host.name != "claude-code":
        raise SettingsError(
            f"--scope local exists for Claude Code only; {host.title} has user and project"
        )
    if host.name == "claude-code":
        if scope == "user":
            return _home_dir(env, "CLAUDE_CONFIG_DIR", ".claude") / "settings.json"
        name = "settings.local.json" if scope == "local" else "settings.json"
        return project / ".claude" / name
    if host.name == "codex":
        if scope == "user":
            return _home_dir(env, "CODEX_HOME", ".codex") / "hooks.json"
        return project / ".codex" / "hooks.json"
    if scope == "user":
        base = env.get("GEMINI_CLI_HOME", "")
        root = Path(base).expanduser() if base.strip() else Path.home()
        return root / ".gemini" / "settings.json"
    return project / ".gemini" / "settings.json"


def _home_dir(env: Any, variable: str, default: str) -> Path:
    value = env.get(variable, "")
    return Path(value).expanduser() if value.strip() else Path.home() / default


def hook_command(host: Host, *, profile: str | None = None, home: str | None = None) -> str:
    """The shell command the host runs: this installation's entry point by absolute path.

    ``--profile`` and ``--home`` are written only when given, so the hook otherwise follows
    ``$DSH_HOME`` (or ``~/.dsh``) and the ``default`` profile as the command line does.
    """
    parts = [*_entry_point(), "hook", host.name]
    if profile is not None:
        parts += ["--profile", profile]
    if home is not None:
        parts += ["--home", os.path.abspath(os.path.expanduser(home))]
    return " ".join(shlex.quote(part) for part in parts)


def _entry_point() -> list[str]:
    """This installation's ``dsh-loop-brake`` script, else its interpreter with ``-m``.

    The host runs the command in the agent's project directory, a directory the agent (or
    whoever wrote the repository) controls. ``python -m`` puts the working directory first on
    ``sys.path``, so a ``dsh_loop_brake/`` or ``json.py`` there would run in place of the hook
    (and could answer "allow", skipping the user's permission rules). The console script is
    safe (its ``sys.path[0]`` is its own ``bin`` directory), so it is looked for in every
    scheme pip installs to, the user's (``pip install --user``) included; the ``-m`` fallback
    runs with ``-P`` (Python 3.11+: no unsafe first path entry), or ``-I`` before 3.11.
    """
    import sysconfig

    candidates = []
    if os.path.basename(sys.argv[0]) == SCRIPT_NAME:
        candidates.append(os.path.abspath(sys.argv[0]))  # the script running this install
    for scheme in (sysconfig.get_default_scheme(), f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme)
        except KeyError:  # a platform without a user scheme
            continue
        if scripts:
            candidates.append(os.path.join(scripts, SCRIPT_NAME))
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return [candidate]
    safe_path = "-P" if sys.version_info >= (3, 11) else "-I"
    # Not abspath(realpath): a venv's python is a symlink, and only its own path is the venv.
    return [os.path.abspath(sys.executable), safe_path, "-m", MODULE_NAME]


def handler_for(host: Host, command: str) -> dict[str, object]:
    """The handler the hook is installed as, in the host's own field names and units."""
    if host.name == "gemini":
        return {
            "name": GEMINI_HOOK_NAME,
            "type": "command",
            "command": command,
            "timeout": HANDLER_TIMEOUT_SECONDS * 1000,  # gemini-cli counts milliseconds
            "description": "dsh-loop-brake: deny a tool call repeated too often (runaway loops)",
        }
    return {"type": "command", "command": command, "timeout": HANDLER_TIMEOUT_SECONDS}


def is_our_handler(handler: object, host: Host) -> bool:
    """Whether ``handler`` runs this package's hook for ``host`` (any installation, profile)."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    while words and "=" in words[0] and not words[0].startswith(("=", "/", ".")):
        words.pop(0)  # leading VAR=value assignments
    for index in range(len(words) - 1):
        if words[index] == "hook" and words[index + 1] == host.name:
            if not _only_our_options(words[index + 2 :]):
                return False  # a command of the user's own (a pipe, a redirect...): theirs
            entry = words[:index]
            if len(entry) == 1 and os.path.basename(entry[0]) in _SCRIPT_FILES:
                return True
            return len(entry) >= 3 and entry[-2:] == ["-m", MODULE_NAME]
    return False


def _only_our_options(words: list[str]) -> bool:
    """Whether ``words`` are only ``--profile NAME`` and ``--home DIR``, as the installer writes."""
    rest = list(words)
    while rest:
        key, equals, _ = rest.pop(0).partition("=")
        if key not in ("--profile", "--home"):
            return False
        if not equals:
            if not rest:
                return False
            rest.pop(0)
    return True


# ---------------------------------------------------------------------------------------------
# reading and writing a settings file


class Settings:
    """A settings file's JSON object and how the file was written (to write it back the same)."""

    __slots__ = ("bom", "crlf", "data", "existed", "final_newline", "indent", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        self.existed = False
        self.bom = False
        self.crlf = False
        self.final_newline = True
        self.indent: int | str = 2

    def text(self) -> str:
        """The file's new text."""
        text = json.dumps(self.data, indent=self.indent, ensure_ascii=False)
        if self.final_newline:
            text += "\n"
        if self.crlf:
            text = text.replace("\n", "\r\n")
        return ("\ufeff" if self.bom else "") + text


def load_settings(path: Path) -> Settings:
    """Read ``path`` (absent: an empty object); refuse anything that is not a JSON object."""
    settings = Settings(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return settings
    except IsADirectoryError:
        raise SettingsError(f"{path}: is a directory, not a settings file") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    settings.existed = True
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(
            f"{path}: is not UTF-8 (an invalid byte at offset {exc.start}); it was left untouched"
        ) from None
    if text.startswith("\ufeff"):
        settings.bom, text = True, text[1:]
    if not text.strip():
        return settings  # an empty file: an empty object, as the hosts read it
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ""
        if "//" in text or "/*" in text:
            hint = " (comments are not JSON: remove them, or add the hook by hand)"
        raise SettingsError(
            f"{path}:{exc.lineno}:{exc.colno}: is not valid JSON ({exc.msg}){hint}; "
            "it was left untouched"
        ) from None
    except (ValueError, RecursionError):
        raise SettingsError(
            f"{path}: is not JSON this installer can read; it was left untouched"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(
            f"{path}: holds a JSON {_kind(data)}, not the object of settings the host reads; "
            "it was left untouched"
        )
    settings.data = data
    settings.crlf = "\r\n" in text
    settings.final_newline = text.endswith("\n")
    settings.indent = _indentation(text)
    return settings


def _indentation(text: str) -> int | str:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def save_settings(settings: Settings) -> None:
    """Replace the file atomically, keeping its mode (a new file: 0666 less the umask)."""
    from dsh_loop_brake.harness.profiles import atomic_write

    atomic_write(settings.path, settings.text().encode("utf-8"))


def _events(settings: Settings, host: Host, *, create: bool) -> list[Any] | None:
    """The host's list of matcher groups for the hook's event, checked for shape."""
    data = settings.data
    hooks = data.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise SettingsError(
            f'{settings.path}: "hooks" is a JSON {_kind(hooks)}, not an object of hook events; '
            "it was left untouched"
        )
    groups = hooks.get(host.event)
    if groups is None:
        if not create:
            return None
        groups = hooks[host.event] = []
    if not isinstance(groups, list):
        raise SettingsError(
            f'{settings.path}: "hooks".{json.dumps(host.event)} is a JSON {_kind(groups)}, '
            "not a list of matcher groups; it was left untouched"
        )
    return groups


def install_hook(path: Path, host: Host, command: str) -> SettingsChange:
    """Make ``path`` run ``command`` on every tool call of ``host``, once; idempotent."""
    settings = load_settings(path)
    groups = _events(settings, host, create=True)
    assert groups is not None
    wanted_handler = handler_for(host, command)
    wanted = {"matcher": "*", "hooks": [wanted_handler]}
    ours = [
        (index, group)
        for index, group in enumerate(groups)
        if isinstance(group, dict)
        and isinstance(group.get("hooks"), list)
        and any(is_our_handler(handler, host) for handler in group["hooks"])
    ]
    if len(ours) == 1 and ours[0][1] == wanted:
        return SettingsChange(path, changed=False)
    position = None
    for index, group in reversed(ours):
        handlers = group["hooks"]
        if all(is_our_handler(handler, host) for handler in handlers):
            del groups[index]
            position = index  # an earlier group of ours: take its place
        else:  # a group of the user's that also holds ours: leave theirs where they are
            handlers[:] = [handler for handler in handlers if not is_our_handler(handler, host)]
    if position is None:
        groups.append(wanted)
    else:
        groups.insert(position, wanted)
    save_settings(settings)
    return SettingsChange(path, changed=True, created=not settings.existed)


def uninstall_hook(path: Path, host: Host) -> SettingsChange:
    """Remove every handler of this package's hook for ``host`` from ``path``; nothing else."""
    settings = load_settings(path)
    if not settings.existed:
        return SettingsChange(path, changed=False)
    groups = _events(settings, host, create=False)
    if not groups:
        return SettingsChange(path, changed=False)
    removed = 0
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            continue
        handlers = group["hooks"]
        kept = [handler for handler in handlers if not is_our_handler(handler, host)]
        if len(kept) == len(handlers):
            continue
        removed += len(handlers) - len(kept)
        if kept:
            handlers[:] = kept
        else:
            del groups[index]
    if not removed:
        return SettingsChange(path, changed=False)
    hooks = settings.data["hooks"]
    if not groups:  # emptied by us: leave no empty event (or empty "hooks") behind
        del hooks[host.event]
        if not hooks:
            del settings.data["hooks"]
    save_settings(settings)
    return SettingsChange(path, changed=True, count=removed)


def hooks_switched_off(path: Path, host: Host) -> str | None:
    """Why the host would not run the hook even though ``path`` now has it, or ``None``."""
    try:
        data = load_settings(path).data
    except SettingsError:
        return None
    if host.name == "claude-code" and data.get("disableAllHooks") is True:
        return f'{path} has "disableAllHooks": true, so Claude Code runs no hook'
    if host.name == "gemini":
        config = data.get("hooksConfig")
        if isinstance(config, dict):
            if config.get("enabled") is False:
                return f'{path} has "hooksConfig": {{"enabled": false}}, so gemini-cli runs no hook'
            disabled = config.get("disabled")
            if isinstance(disabled, list) and GEMINI_HOOK_NAME in disabled:
                return f'{path} lists "{GEMINI_HOOK_NAME}" in "hooksConfig.disabled"'
    return None


def installed_elsewhere(host: Host, scope: str, command: str, **where: Any) -> list[Path]:
    """Other scopes' settings files of ``host`` that run the hook with another command.

    The hosts run every scope's hooks: two different commands would count each call twice.
    (Claude Code and gemini-cli run an identical command only once -- gemini-cli keys its hooks
    by name and command -- so identical ones are not reported for them.)
    """
    found = []
    for other in SCOPES:
        if other == scope or (other == "local" and host.name != "claude-code"):
            continue
        path = settings_path(host, other, **where)
        try:
            settings = load_settings(path)
            groups = _events(settings, host, create=False) or []
        except SettingsError:
            continue
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for handler in group["hooks"]:
                if is_our_handler(handler, host) and not (
                    host.name in ("claude-code", "gemini") and handler.get("command") == command
                ):
                    found.append(path)
    return list(dict.fromkeys(found))


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"
