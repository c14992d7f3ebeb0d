"""Stub tool registries: the shapes real hosts come in, each as small as it can be.

Each stands for a kind of host the loop-brake plugin must count exactly once per call (one a
host's own docs would describe in a sentence): they differ only in what they do to the execution
and the tool body between ``execute(execution)`` and the body running. A test applies the plugin
to one (``plugin.apply(Context(host), config)``) and drives it through its public methods.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any


class Context:
    """A plugin context: ``tools`` and ``effect``; ``dispose()`` runs the disposers in reverse."""

    def __init__(self, tools: Any) -> None:
        self.tools = tools
        self.disposers: list[Callable[[], object]] = []

    def effect(self, callback: Callable[[], Callable[[], object]]) -> None:
        self.disposers.append(callback())

    def dispose(self) -> None:
        while self.disposers:
            self.disposers.pop()()


class Registry:
    """Definitions are mappings ``{"name", "execute"}``; ``get`` gives the live one."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: Any) -> Callable[[], None]:
        name = definition["name"]
        previous = self.defs.get(name)
        self.defs[name] = definition
        return lambda: self.defs.__setitem__(name, previous) if previous else self.defs.pop(name)

    def get(self, name: str) -> Any:
        return self.defs.get(name)


class SchemaDefaultsHost(Registry):
    """Fills the tool's schema defaults before the body runs: the body gets a rebuilt call."""

    def execute(self, execution: dict[str, Any]) -> Any:
        arguments = {"limit": 10, **execution["arguments"]}
        rebuilt = {**execution, "arguments": arguments}
        return self.defs[execution["name"]]["execute"](arguments, rebuilt)


class DeepCopyingHost(Registry):
    """Hands the body a deep copy of the execution, as a process pool or a queue would."""

    def execute(self, execution: dict[str, Any]) -> Any:
        sent = copy.deepcopy(execution)
        return self.defs[sent["name"]]["execute"](sent["arguments"], sent)


class QueueingHost(Registry):
    """``execute`` queues the call and returns a ticket; a worker thread runs the body later."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: queue.Queue[tuple[int, Any]] = queue.Queue()
        self.results: dict[int, tuple[bool, Any]] = {}
        self.done = threading.Condition()
        self.tickets = itertools.count(1)
        threading.Thread(target=self._work, daemon=True).start()

    def execute(self, execution: dict[str, Any]) -> int:
        ticket = next(self.tickets)
        self.jobs.put((ticket, execution))
        return ticket

    def result(self, ticket: int) -> Any:
        """The body's result, or raise what it raised (waiting for the worker)."""
        with self.done:
            self.done.wait_for(lambda: ticket in self.results, timeout=10)
            ok, value = self.results[ticket]
        if ok:
            return value
        raise value

    def close(self) -> None:
        """Stop the worker once the calls queued so far have run."""
        self.jobs.put((0, None))

    def _work(self) -> None:
        while True:
            ticket, execution = self.jobs.get()
            if execution is None:
                return
            try:
                body = self.defs[execution["name"]]["execute"]
                outcome = (True, body(execution["arguments"], execution))
            except Exception as error:
                outcome = (False, error)
            with self.done:
                self.results[ticket] = outcome
                self.done.notify_all()


class RegisterOnlyHost(Registry):
    """No ``execute``: the host runs ``get(name)["execute"](arguments, execution)`` itself."""

    def call(self, execution: dict[str, Any]) -> Any:
        return self.get(execution["name"])["execute"](execution["arguments"], execution)


class InlineHost(Registry):
    """``execute`` runs the live definition's body inline, with the execution it was given."""

    def execute(self, execution: dict[str, Any]) -> Any:
        return self.defs[execution["name"]]["execute"](execution["arguments"], execution)


class DictOnlyHost:
    """No ``get``: definitions in a dict, ``execute`` runs them inline."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def register(self, definition: Any) -> None:
        self.defs[definition["name"]] = definition

    def execute(self, execution: dict[str, Any]) -> Any:
        return self.defs[execution["name"]]["execute"](execution["arguments"], execution)


class AsyncHost(Registry):
    """``execute`` is a coroutine function; sync bodies run in a worker thread, async ones here."""

    async def execute(self, execution: dict[str, Any]) -> Any:
        body = self.defs[execution["name"]]["execute"]
        if asyncio.iscoroutinefunction(body):
            return await body(execution["arguments"], execution)
        return await asyncio.to_thread(body, execution["arguments"], execution)


class TaskHost(Registry):
    """A sync ``execute`` that starts the (async) body as an asyncio task and returns the task."""

    def execute(self, execution: dict[str, Any]) -> asyncio.Task[Any]:
        body = self.defs[execution["name"]]["execute"]
        return asyncio.get_running_loop().create_task(body(execution["arguments"], execution))


class HandingBackHost(Registry):
    """A sync ``execute`` that hands back what the body returns: for an async body, a coroutine
    the caller awaits."""

    def execute(self, execution: dict[str, Any]) -> Any:
        return self.defs[execution["name"]]["execute"](execution["arguments"], execution)


class RetryingHost(Registry):
    """Runs the body again when it raises, up to ``attempts`` runs in all, each with a fresh deep
    copy of the execution: a retry-with-backoff wrapper around the body's call, as a
    tenacity-style ``@retry`` gives a host (whose default retries on any exception)."""

    def __init__(self, attempts: int = 3, retry_on: tuple[type[BaseException], ...] = (Exception,)):
        super().__init__()
        self.attempts = attempts
        self.retry_on = retry_on

    def execute(self, execution: dict[str, Any]) -> Any:
        for attempt in range(1, self.attempts + 1):
            sent = copy.deepcopy(execution)
            try:
                return self.defs[sent["name"]]["execute"](sent["arguments"], sent)
            except self.retry_on:
                if attempt == self.attempts:
                    raise
        raise AssertionError("unreachable")


class AsyncRetryingHost(RetryingHost):
    """``RetryingHost`` with a coroutine ``execute``: async bodies are awaited here, sync ones
    run in a worker thread (``asyncio.to_thread``), each attempt after a backoff sleep."""

    async def execute(self, execution: dict[str, Any]) -> Any:  # type: ignore[override]
        for attempt in range(1, self.attempts + 1):
            sent = copy.deepcopy(execution)
            body = self.defs[sent["name"]]["execute"]
            try:
                if asyncio.iscoroutinefunction(body):
                    return await body(sent["arguments"], sent)
                return await asyncio.to_thread(body, sent["arguments"], sent)
            except self.retry_on:
                if attempt == self.attempts:
                    raise
                await asyncio.sleep(0)  # the backoff
        raise AssertionError("unreachable")


class RegisterOnlyRetryingHost(Registry):
    """No ``execute``: the host runs the live body itself and runs it again when it raises."""

    def __init__(self, attempts: int = 3, retry_on: tuple[type[BaseException], ...] = (Exception,)):
        super().__init__()
        self.attempts = attempts
        self.retry_on = retry_on

    def call(self, execution: dict[str, Any]) -> Any:
        for attempt in range(1, self.attempts + 1):
            try:
                return self.get(execution["name"])["execute"](execution["arguments"], execution)
            except self.retry_on:
                if attempt == self.attempts:
                    raise
        raise AssertionError("unreachable")
