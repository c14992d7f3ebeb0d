"""Finding plugins: the ``dsh`` entry-point group, by entry-point name (= the row ``name``)."""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import EntryPoint, entry_points

from dsh_loop_brake.harness.errors import BootError
from dsh_loop_brake.harness.hookspecs import PROJECT

__all__ = ["ENTRY_POINT_GROUP", "find_entry_point", "load_plugin"]

ENTRY_POINT_GROUP = PROJECT

logger = logging.getLogger("dsh_loop_brake.harness")

# This distribution's own plugins, used only when the package runs from a source checkout
# that was never installed (so no entry points exist); an installed plugin always wins.
_OWN_PLUGINS = {
    "dsh-loop-brake": "dsh_loop_brake.plugin",
    "dsh-circuit-breaker": "dsh_loop_brake.circuit_breaker",
}


def find_entry_point(name: str) -> EntryPoint | None:
    """The entry point called ``name`` in the ``dsh`` group, or None (the first one wins)."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if len(found) > 1:
        logger.warning(
            "%d installed distributions declare the dsh plugin %r; using %s",
            len(found),
            name,
            found[0].value,
        )
    return found[0] if found else None


def plugin_module_name(name: str) -> str | None:
    """The module that provides the plugin ``name``: its entry point's, else our own, else None."""
    entry_point = find_entry_point(name)
    if entry_point is not None:
        return entry_point.module
    return _OWN_PLUGINS.get(name)


def load_plugin(name: str) -> object:
    """Import the plugin module registered under ``name``; a clear error when there is none."""
    entry_point = find_entry_point(name)
    try:
        if entry_point is not None:
            return entry_point.load()
        if name in _OWN_PLUGINS:
            return importlib.import_module(_OWN_PLUGINS[name])
    except Exception as exc:
        raise BootError(
            f"the dsh plugin {name!r} could not be loaded ({type(exc).__name__}: {exc}); "
            "reinstall the package that provides it"
        ) from exc
    raise BootError(
        f"no installed plugin claims rows named {name!r} (no entry point {name!r} in the "
        f"{ENTRY_POINT_GROUP!r} group); install the package that provides it, or disable the row"
    )
