"""The harness: compose the layers, load plugins, apply each enabled row in its own fiber.

Every error of a boot says where the fix goes: a :class:`HarnessError` carries the patch file
and line (``path``, ``line``; ``str(error)`` starts with ``path:line:``), and a plugin's
configuration error keeps its type and is located at the config key that supplied the value,
as ``dsh-loop-brake config`` shows it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pluggy

from dsh_loop_brake.harness import hookspecs
from dsh_loop_brake.harness.context import Context
from dsh_loop_brake.harness.errors import BootError, HarnessError, locate
from dsh_loop_brake.harness.fibers import Fiber
from dsh_loop_brake.harness.plugins import load_plugin
from dsh_loop_brake.harness.tools import ToolRegistry
from dsh_loop_brake.harness.types import Origin, Row, ToolExecution, ToolResult
from dsh_loop_brake.loop_brake import LoopBrakeConfigError, ToolCallDenied
from dsh_loop_brake.stores import StoreError

if TYPE_CHECKING:
    from dsh_loop_brake.harness.patches import Composition

__all__ = ["Harness"]


@final
class Harness:
    """A booted harness: ``ctx`` (the root context), ``handle(row_id)``, ``execute``, ``dispose``.

    Never half-booted: if any row fails to apply, the rows applied so far are disposed in
    reverse and the error propagates (a plugin's own exception unchanged).
    """

    __slots__ = ("_disposed", "_fibers", "_handles", "composition", "ctx", "rows")

    def __init__(
        self,
        rows: Sequence[Row],
        composition: Composition | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
    ) -> None:
        """Create an empty harness; use :meth:`boot` or :meth:`from_rows` to apply rows.

        ``home`` is the dsh home the plugins see as ``ctx.home`` (relative store paths).
        """
        root = Fiber("root")
        self.ctx = Context(ToolRegistry(root), root, None if home is None else Path(home))
        self.rows: tuple[Row, ...] = tuple(rows)
        self.composition = composition
        self._fibers: list[Fiber] = []
        self._handles: dict[str, Any] = {}
        self._disposed = False

    @classmethod
    def boot(
        cls,
        profile: str = "default",
        home: str | os.PathLike[str] | None = None,
        patches: Iterable[str | os.PathLike[str]] = (),
        *,
        plugins: Mapping[str, object] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Harness:
        """Compose the layers (bundles → profile → ``$DSH_HOME`` → ``patches``) and apply them.

        ``plugins`` maps row names to plugin objects used instead of the ``dsh`` entry points
        (for tests and embedding hosts); ``environ`` stands in for ``os.environ`` (``DSH_HOME``).
        """
        from dsh_loop_brake.harness.layers import compose
        from dsh_loop_brake.harness.profiles import resolve_home

        composition = compose(profile, home, [Path(p) for p in patches], environ=environ)
        harness = cls(composition.rows, composition, home=resolve_home(home, environ))
        harness._apply(plugins)
        return harness

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Row],
        *,
        plugins: Mapping[str, object] | None = None,
        home: str | os.PathLike[str] | None = None,
    ) -> Harness:
        """Apply exactly these rows, in order (disabled ones are skipped); used by replay.

        ``home`` is the dsh home the plugins see as ``ctx.home`` (``None``: ``$DSH_HOME``).
        """
        harness = cls(tuple(rows), home=home)
        harness._apply(plugins)
        return harness

    def __repr__(self) -> str:
        state = "disposed" if self._disposed else f"{len(self._handles)} rows applied"
        return f"<Harness {state}>"

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dispose()

    @property
    def tools(self) -> ToolRegistry:
        """The tool registry shared by every row (``ctx.tools``)."""
        return self.ctx.tools

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has run."""
        return self._disposed

    def applied(self) -> list[str]:
        """The ids of the rows that were applied, in order."""
        return list(self._handles)

    def handle(self, row_id: str) -> Any:
        """What the row's ``dsh_apply`` returned (for ``loop-brake``: its ``LoopBrake``)."""
        try:
            return self._handles[row_id]
        except KeyError:
            raise KeyError(
                f"row {row_id!r} is not applied in this harness (applied: "
                f"{', '.join(self._handles) or 'none'})"
            ) from None

    def dispose(self) -> None:
        """Dispose every row's fiber in reverse order, then the root fiber; idempotent."""
        if self._disposed:
            return
        self._disposed = True
        fibers, self._fibers = self._fibers, []
        for fiber in reversed(fibers):
            fiber.dispose()
        self.ctx.fiber.dispose()
        self._handles.clear()

    async def execute(self, execution: ToolExecution) -> ToolResult:
        """Run one agent call via ``ctx.tools.execute``; a denial it raises becomes a result.

        A patched seam raises its denial (a ``ToolCallDenied``: the loop brake's
        ``LoopBrakeError``, or any other) out of ``ctx.tools.execute``; the agent gets it here as
        an error result with the denial's code and message, as it gets a guard's denial.
        """
        try:
            result: Any = self.ctx.tools.execute(execution)
            if inspect.isawaitable(result):
                result = await result
        except ToolCallDenied as err:
            message = str(err)
            code = err.code if isinstance(err.code, str) and err.code else "DENIED"
            return ToolResult(
                content=message, is_error=True, error={"code": code, "message": message}
            )
        return result  # type: ignore[no-any-return]

    def _apply(self, plugins: Mapping[str, object] | None) -> None:
        seen: set[str] = set()
        for row in self.rows:
            if row.id in seen:
                raise _at_row(
                    BootError(f"row id {row.id!r} appears twice; row ids must be unique"), row
                )
            seen.add(row.id)
        enabled = [row for row in self.rows if not row.disabled]
        try:
            manager = self._load_plugins(enabled, plugins or {})
            for row in enabled:
                fiber = Fiber(f"row {row.id}")
                # Kept before applying, so a plugin that fails halfway is undone too.
                self._fibers.append(fiber)
                try:
                    with fiber.activate():
                        ctx = Context(self.ctx.tools, fiber, self.ctx.home)
                        handle = manager.hook.dsh_apply(ctx=ctx, row=row)
                except (LoopBrakeConfigError, StoreError) as error:
                    # The fix is in the patch that supplied the value (or the store the row
                    # names): say which file and line.
                    origin = row.config_origin(error.key)
                    raise locate(error, *_where(origin)) from None
                if handle is None:
                    raise _at_row(
                        BootError(
                            f"row {row.id!r} was not applied: the plugin {row.name!r} returned "
                            "nothing from dsh_apply for it"
                        ),
                        row,
                    )
                self._handles[row.id] = handle
        except BaseException:
            self.dispose()
            raise

    @staticmethod
    def _load_plugins(rows: Sequence[Row], given: Mapping[str, object]) -> pluggy.PluginManager:
        manager = pluggy.PluginManager(hookspecs.PROJECT)
        manager.add_hookspecs(hookspecs)
        first_row = {row.name: row for row in reversed(rows)}  # the row to point at, per name
        for name in dict.fromkeys(row.name for row in rows):
            row = first_row[name]
            try:
                plugin = given[name] if name in given else load_plugin(name)
            except BootError as error:
                raise _at_row(error, row) from error.__cause__
            if manager.is_registered(plugin):
                continue  # one module may provide several row names
            try:
                manager.register(plugin, name=name)
            except (ValueError, pluggy.PluginValidationError) as exc:
                raise _at_row(
                    BootError(f"the dsh plugin {name!r} cannot be registered: {exc}"), row
                ) from exc
            callers = manager.get_hookcallers(plugin) or []
            if not any(caller.name == "dsh_apply" for caller in callers):
                raise _at_row(
                    BootError(
                        f"the dsh plugin {name!r} implements no dsh_apply hook, so it cannot "
                        "apply rows"
                    ),
                    row,
                )
        return manager


def _where(origin: Origin | None) -> tuple[str | None, int | None]:
    return (None, None) if origin is None else (origin.path, origin.line)


def _at_row(error: HarnessError, row: Row) -> HarnessError:
    """``error`` located at the patch that inserted ``row`` (or named its plugin)."""
    if error.path is not None:
        return error
    path, line = _where(row.sources.get("name") or row.sources.get("id"))
    if path is None:
        return error
    return type(error)(error.message, path, line)
