"""The ``config`` subcommand: both plugins' rows, every resolved key and where it came from.

``add_arguments(parser)`` adds its options, ``run(args)`` composes the profile exactly as a boot
would (without applying anything), validates both rows as the plugins would at apply, and prints
them — as text, or with ``--json`` as one object with stable keys. An unusable configuration is
one ``error:`` line naming the file and line that supplied the value, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, TextIO

from dsh_loop_brake._config import ENV_VAR, Source
from dsh_loop_brake.circuit_breaker import PLUGIN_NAME as BREAKER_PLUGIN
from dsh_loop_brake.exits import EXIT_OK
from dsh_loop_brake.harness.profiles import default_home, profile_dir, resolve_home
from dsh_loop_brake.harness.types import Origin, Row
from dsh_loop_brake.profile_options import (
    CIRCUIT_BREAKER_ROW,
    LOOP_BRAKE_ROW,
    CircuitBreakerSetting,
    LoopBrakeSetting,
    add_profile_options,
    add_strict_option,
    compose_profile,
    resolve_circuit_breaker,
    resolve_loop_brake,
)
from dsh_loop_brake.stores import redact_url
from dsh_loop_brake.stores._settings import STORE_ENV_VAR, StoreSetting
from dsh_loop_brake.stores._url import sqlite_path

__all__ = ["add_arguments", "run"]

PROG: Final = "dsh-loop-brake"
_PLAIN: Final = re.compile(r"[A-Za-z0-9._:/@+=-]*\Z")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``config`` options to ``parser``."""
    add_profile_options(parser)
    add_strict_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Show (and validate) the profile's ``loop-brake`` and ``circuit-breaker`` rows."""
    home = resolve_home(args.home)
    composition = compose_profile(args.profile, home, args.patches)
    brake = resolve_loop_brake(composition)
    breaker = resolve_circuit_breaker(composition)
    if args.json:
        document = _as_json(brake, breaker)
        # default=str: a YAML date (which JSON has no type for) in a row is shown as its text.
        print(json.dumps(document, indent=2, ensure_ascii=not _utf8(sys.stdout), default=str))
        if brake.row is None:  # stdout is for the JSON; the person still needs the hint
            sys.stderr.write(_install_hint(args.profile, home))
    else:
        _print_text(brake, breaker, args.profile, home, sys.stdout)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# --json


def _as_json(brake: LoopBrakeSetting, breaker: CircuitBreakerSetting | None) -> dict[str, Any]:
    resolved = brake.max_repeats
    return {
        "row": None if brake.row is None else _row_json(brake.row),
        "maxRepeats": None if resolved is None else resolved.value,
        "source": None if resolved is None else resolved.source.label,
        "skipped": [entry.as_dict() for entry in brake.composition.skipped],
        "circuitBreaker": None if breaker is None else _breaker_json(breaker),
        "store": brake.store,
        "ignoredEnv": _ignored_env(brake, breaker),
    }


def _ignored_env(brake: LoopBrakeSetting, breaker: CircuitBreakerSetting | None) -> list[str]:
    """Every environment variable set but losing to a row, once, in the order first met."""
    names = brake.ignored_env + (() if breaker is None else breaker.ignored_env)
    return list(dict.fromkeys(names))


def _breaker_json(breaker: CircuitBreakerSetting) -> dict[str, Any]:
    return {
        "row": _row_json(breaker.row),
        "config": breaker.config,
        "sources": {
            key: "default"
            if origin is None
            else origin.label
            if isinstance(origin, Source)
            else str(origin)
            for key, origin in breaker.sources.items()
        },
    }


# ---------------------------------------------------------------------------------------------
# Text


def _print_text(
    brake: LoopBrakeSetting,
    breaker: CircuitBreakerSetting | None,
    profile: str,
    home: Path,
    out: TextIO,
) -> None:
    row = brake.row
    out.write(f"profile: {profile} ({profile_dir(home, profile)})\n")
    if row is None:
        out.write(f"profile {profile!r} has no {LOOP_BRAKE_ROW} row.\n")
        out.write(_install_hint(profile, home))
    else:
        out.write(f"row: {row.id} (plugin {row.name}), inserted by {row.sources.get('id')}\n")
        out.write(f"state: {_state(row, 'the brake is off')}\n")
        out.write(f"config: {_config_line(row)}\n")
        if brake.max_repeats is None:
            out.write(f"maxRepeats: unusable ({brake.problem})\n")
        else:
            resolved = brake.max_repeats
            notes = [_max_repeats_source(row, resolved.source)]
            notes += [f"{name}={_shown_env(name)} is ignored" for name in resolved.ignored_env]
            out.write(f"maxRepeats: {resolved.value} ({'; '.join(notes)})\n")
        _print_store(brake.store_setting, row, home, out)
    _print_breaker(breaker, out)
    skipped = brake.composition.skipped
    if not skipped:
        out.write("skipped: none\n")
    else:
        out.write(f"skipped: {len(skipped)} patch{'es' if len(skipped) != 1 else ''}\n")
        for entry in skipped:
            out.write(f"  {entry}\n")


def _print_breaker(breaker: CircuitBreakerSetting | None, out: TextIO) -> None:
    if breaker is None:
        out.write(
            f"{CIRCUIT_BREAKER_ROW}: none (add one with an insert patch naming {BREAKER_PLUGIN})\n"
        )
        return
    row = breaker.row
    out.write(
        f"{CIRCUIT_BREAKER_ROW}: plugin {row.name}, inserted by {row.sources.get('id')}; "
        f"{_state(row, 'the breaker is off')}\n"
    )
    if breaker.config is None:
        out.write(f"  config: unusable ({breaker.problem})\n")
        return
    for key, value in breaker.config.items():
        origin = breaker.sources.get(key)
        earlier = row.overridden(f"config.{key}")
        if isinstance(origin, Source):  # the environment (store only)
            where = f"from {origin}; the row does not set it"
        elif origin is None:
            where = "default"
            if earlier:
                where += f"; {_replaced_by(row)} replaced the config that set it at " + _list(
                    earlier
                )
        else:
            where = f"from {origin}{_overriding(earlier)}"
        out.write(f"  {key}: {json.dumps(value, ensure_ascii=False, default=str)} ({where})\n")


def _state(row: Row, off: str) -> str:
    where = row.sources.get("disabled")
    earlier = _overriding(row.overridden("disabled"))
    if row.disabled:
        return f"disabled by {where}{earlier}: {off}"
    if where is not None:
        return f"enabled (disabled: false at {where}{earlier})"
    return "enabled"


def _row_json(row: Row) -> dict[str, Any]:
    document = row.as_dict()
    document["config"] = _shown_config(row.config)
    return document


def _shown_config(config: object) -> object:
    """A row's config as it may be shown: a ``store`` URL with its password as ``***``."""
    if isinstance(config, Mapping) and isinstance(config.get("store"), str):
        return {**config, "store": redact_url(config["store"])}
    return config


def _config_line(row: Row) -> str:
    if row.config is None:
        shown = "none (the defaults)"
    else:
        shown = json.dumps(_shown_config(row.config), ensure_ascii=False, default=str)
    where = row.sources.get("config")
    if where is None:
        return shown
    earlier = row.overridden("config")
    replacing = f" (replacing the config set by {_list(earlier)})" if earlier else ""
    return f"{shown}, set by {where}{replacing}"


def _max_repeats_source(row: Row, source: Source) -> str:
    earlier = row.overridden("config.maxRepeats")
    if source.kind == "row":
        return f"from {source}{_overriding(earlier)}"
    if source.kind == "env":
        text = f"from the environment variable {ENV_VAR}; the row does not set it"
    else:
        text = "the default; neither the row nor the environment sets it"
    if earlier:
        text += f"; {_replaced_by(row)} replaced the config that set it at {_list(earlier)}"
    return text


def _replaced_by(row: Row) -> str:
    return str(row.sources.get("config", "a later layer"))


def _overriding(earlier: Iterable[Origin]) -> str:
    listed = _list(earlier)
    return f", overriding {listed}" if listed else ""


def _list(origins: Iterable[Origin]) -> str:
    return ", ".join(str(origin) for origin in origins)


def _shown_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    value = (os.environ if environ is None else environ).get(name, "")
    if name == STORE_ENV_VAR:
        value = redact_url(value.strip())  # a store URL's password is never printed
    return value if _PLAIN.match(value) else json.dumps(value)


def _print_store(setting: StoreSetting | None, row: Row, home: Path, out: TextIO) -> None:
    """``store:`` (password as ``***``) and where it came from; ``sessionTtl:`` when it
    matters (a shared store, or a row that sets it)."""
    if setting is None:
        return  # a disabled row whose config is unusable: the maxRepeats line says why
    source = setting.source
    if source.kind == "default":
        note = _MEMORY_NOTE
    else:
        if source.kind == "row":
            notes = [f"from {source}{_overriding(row.overridden('config.store'))}"]
        else:
            notes = [f"from the environment variable {STORE_ENV_VAR}; the row does not set it"]
        notes += [f"{name}={_shown_env(name)} is ignored" for name in setting.ignored_env]
        if setting.url.startswith("sqlite:"):
            notes.append(f"the file {_sqlite_file(setting.url, home)}")
        note = f" ({'; '.join(notes)})"
    out.write(f"store: {setting.shown}{note}\n")
    if not setting.is_memory or setting.ttl_source.kind != "default":
        ttl = setting.ttl_source
        where = "the default" if ttl.kind == "default" else f"from {ttl}"
        if setting.is_memory:
            where += "; the memory store never forgets"
        out.write(f"sessionTtl: {setting.session_ttl} ({where})\n")


_MEMORY_NOTE: Final = " (the default: the brake's counts live in this process's memory)"


def _sqlite_file(url: str, home: Path) -> str:
    """Where a ``sqlite:`` store's file is (a relative path is under the dsh home)."""
    try:
        return sqlite_path(url, home)
    except Exception:  # already refused by the resolution; nothing more to say here
        return url


def _install_hint(profile: str, home: Path) -> str:
    # A command to paste: --home only when the default home would be another one.
    home_option = f" --home {shlex.quote(str(home))}" if home != _default_home() else ""
    return f"hint: add it with `{PROG} install --profile {profile}{home_option}`\n"


def _default_home() -> Path | None:
    try:
        return default_home()
    except Exception:  # no home directory to be found: the hint then names --home
        return None


def _utf8(stream: TextIO) -> bool:
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
    return encoding in ("utf-8", "utf8", "utf-8-sig")
