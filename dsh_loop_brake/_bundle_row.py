"""The ``loop-brake`` row as this package's own bundle patch inserts it.

A profile without a ``loop-brake`` row is braked with this row by the hosts that always brake --
``Brakes.from_profile`` and ``replay`` -- so both give it the same defaults the harness would.
"""

from __future__ import annotations

from dsh_loop_brake._errors import PLUGIN_NAME
from dsh_loop_brake.harness import HarnessError, Row, compose_layers
from dsh_loop_brake.harness.manifest import bundle_layer
from dsh_loop_brake.plugin import ROW_ID

__all__ = ["loop_brake_bundle_row"]


def loop_brake_bundle_row() -> Row:
    """``loop-brake`` as the bundle patch inserts it (no config: the defaults)."""
    try:
        layer = bundle_layer(PLUGIN_NAME)
        if layer is not None:
            row = compose_layers([layer]).row(ROW_ID)
            if row is not None:
                return row
    except HarnessError:
        pass  # not installed as a distribution: the bundle patch says exactly this
    return Row(id=ROW_ID, name=PLUGIN_NAME, config=None)
