"""Fibers: the unit of lifetime; effects run now and are undone in reverse on dispose."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import final

from dsh_loop_brake.harness.errors import HarnessError

__all__ = ["Disposer", "Fiber", "current_fiber"]

Disposer = Callable[[], object]
"""Undoes one effect; its return value is ignored."""

logger = logging.getLogger("dsh_loop_brake.harness")

_current: ContextVar[Fiber | None] = ContextVar("dsh_current_fiber", default=None)


def current_fiber() -> Fiber | None:
    """The fiber whose row is being applied right now in this thread or task, if any."""
    return _current.get()


@final
class Fiber:
    """Owns the disposers of the effects run on it and runs them in reverse, exactly once."""

    __slots__ = ("_disposed", "_disposers", "_lock", "name")

    def __init__(self, name: str = "root") -> None:
        self.name = name
        self._disposers: list[Disposer] = []
        self._disposed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "disposed" if self._disposed else f"{len(self._disposers)} effects"
        return f"<Fiber {self.name!r} {state}>"

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has run."""
        return self._disposed

    def effect(self, fn: Callable[[], Disposer | None]) -> Callable[[], None]:
        """Run ``fn`` now and keep the disposer it returns (``None``: nothing to undo).

        Returns a function that undoes this one effect early (at most once).
        """
        self._check_alive()
        disposer = fn()
        if disposer is None:
            return _noop
        return self.adopt(disposer)

    def adopt(self, disposer: Disposer) -> Callable[[], None]:
        """Keep ``disposer`` to run on dispose; return a function that runs it early, once."""
        if not callable(disposer):
            raise TypeError(f"a disposer must be callable, got {type(disposer).__name__}")
        with self._lock:
            self._check_alive()
            self._disposers.append(disposer)

        def dispose_early() -> None:
            with self._lock:
                try:
                    self._disposers.remove(disposer)
                except ValueError:
                    return  # already run, by this function or by the fiber's dispose
            _run(self, disposer)

        return dispose_early

    def dispose(self) -> None:
        """Run every kept disposer in reverse order; a failing one is logged, not fatal."""
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            disposers, self._disposers = self._disposers, []
        for disposer in reversed(disposers):
            _run(self, disposer)

    @contextmanager
    def activate(self) -> Iterator[Fiber]:
        """Make this the current fiber while the block runs (registrations then belong to it)."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    def _check_alive(self) -> None:
        if self._disposed:
            raise HarnessError(f"fiber {self.name!r} is disposed; it cannot take new effects")


def _run(fiber: Fiber, disposer: Disposer) -> None:
    # One broken plugin must not keep the others' patches in place: log and go on.
    try:
        disposer()
    except Exception:
        logger.exception("a disposer of fiber %r failed; the remaining ones still run", fiber.name)


def _noop() -> None:
    return None
