"""Where the hook's files are: the dsh home, a profile, the state directory, the config cache.

The same rules as :mod:`dsh_loop_brake.harness.profiles` (``$DSH_HOME`` when set to a non-blank
value, else ``~/.dsh``; a profile name is a plain file name), written again here because that
module imports ruamel.yaml, which costs the hook process more than all its own work.
tests/test_hooks_run.py holds the two to the same answers.
"""

from __future__ import annotations

import os

from dsh_loop_brake.hooks._errors import HookUsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_STATE_FILE",
    "HOME_ENV",
    "STATE_DIR",
    "cache_file",
    "check_profile_name",
    "home_directory",
    "json_shown",
]

HOME_ENV = "DSH_HOME"
STATE_DIR = "state"
#: Where a row without ``store`` keeps its counts, relative to the dsh home.
DEFAULT_STATE_FILE = "state/brakes.sqlite3"

_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def home_directory(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``--home`` (``~`` expanded) when given, else ``$DSH_HOME`` when non-blank, else ~/.dsh."""
    if given is not None:
        return os.path.abspath(os.path.expanduser(given))
    value = (os.environ if environ is None else environ).get(HOME_ENV, "")
    chosen = value if value.strip() else "~/.dsh"
    return os.path.abspath(os.path.expanduser(chosen))


def check_profile_name(profile: str) -> str:
    """``profile`` when it is a plain file name (letters, digits, ``.``, ``_``, ``-``)."""
    if profile and profile[0] not in "._-" and _NAME_CHARACTERS.issuperset(profile):
        return profile
    raise HookUsageError(
        f"invalid profile name {json_shown(profile)}: use letters, digits, '.', '_' and '-', "
        "starting with a letter or digit"
    )


def cache_file(home: str, profile: str) -> str:
    """The file holding the profile's composed rows for the hook (see ``_profile``)."""
    return os.path.join(home, STATE_DIR, f"hook-profile-{profile}.json")


def json_shown(text: str) -> str:
    """``text`` cut to 64 characters as an escaped JSON string: safe on one line of a message."""
    import json

    return json.dumps(text[:64])
