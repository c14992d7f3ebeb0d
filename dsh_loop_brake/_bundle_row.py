"""The ``loop-brake`` row as this package's own bundle patch inserts it.

A profile without a ``loop-brake`` row is braked with this row by the hosts that always brake --
``Brakes.from_profile`` and ``replay`` -- so both give it the same defaults the harness would.
"""

from __future__ import annotations

from dsh_loop_brake._errors import PLUGIN_NAME
from dsh_loop_brake.harness import HarnessError, Layer, Row, compose_layers, find_manifest
from dsh_loop_brake.plugin import ROW_ID

__all__ = ["loop_brake_bundle_row"]


def loop_brake_bundle_row() -> Row:
    """``loop-brake`` as the bundle patch inserts it (no config: the defaults)."""
    try:
        manifest = find_manifest(PLUGIN_NAME)
        if manifest.patch is not None:
            layer = Layer("bundle", manifest.patch, f"bundle {PLUGIN_NAME}")
            row = compose_layers([layer]).row(ROW_ID)
            if row is not None:
                return row
    except HarnessError:
        pass  # not installed as a distribution: the bundle patch says exactly this
    return Row(id=ROW_ID, name=PLUGIN_NAME, config=None)
