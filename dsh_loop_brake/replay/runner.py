"""The replay runner: recorded calls, in order, through a real harness with the brake applied.

One :class:`Replayer` holds one harness per ``maxRepeats`` setting it replays at (the report's
own, plus each value of a sweep); every recorded call is read once and fed to each of them, so
every sweep row is what an actual replay at that value reports. Each replayed session gets its
own :class:`~dsh_loop_brake.harness.Agent` with a unique id, so two sessions never share a
streak. Stub tools stand in for the recorded ones: they are registered on first sight of a tool
name and do nothing, because the question is only whether the brake lets the call reach them.

Calls go into the harness's tool registry (``ctx.tools.execute``, which the plugin patched) as a
host's agent loop would send them. A call is denied when the brake raises ``LoopBrakeError`` out
of it (``Harness.execute`` would turn that into an error result for an agent to read); each
call's streak count and hash prefix are read from the live brake right after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Final, final

from dsh_loop_brake._canonical import HASH_PREFIX_LENGTH
from dsh_loop_brake.harness import Agent, Harness, Row, ToolDefinition, ToolExecution, ToolResult
from dsh_loop_brake.loop_brake import LoopBrake, LoopBrakeError
from dsh_loop_brake.plugin import ROW_ID
from dsh_loop_brake.replay.readers import RecordedCall, Transcript
from dsh_loop_brake.replay.report import FirstDenial, Report, SessionReport, SweepRow, Totals

__all__ = ["PROGRESS_EVERY", "Replayer"]

# Calls read ahead and then fed to every lane in one loop: enough to spare a sweep one coroutine
# per call and lane, few enough that the calls are still in the CPU cache when the lanes run.
_CHUNK: Final = 64
PROGRESS_EVERY: Final = 16384
"""How many calls pass between two progress callbacks (at most one per chunk)."""

# A call's hash prefix is the first 12 hex digits of its digest: 6 bytes.
_PREFIX_BYTES: Final = HASH_PREFIX_LENGTH // 2

_STUB_RESULT: Final = ToolResult(content="(replayed call: the recorded tool is not run again)")


def _stub(arguments: object, execution: object) -> ToolResult:
    """The body every replayed tool gets: the brake decides before it would run."""
    return _STUB_RESULT


@final
class _Tally:
    """One session as one lane saw it (plain counters; the distinct calls by hash prefix)."""

    __slots__ = ("agent", "calls", "denied", "distinct", "first_denial", "longest")

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.calls = 0
        self.denied = 0
        self.longest = 0
        self.distinct: set[bytes] = set()  # hash prefixes: 6 bytes are a third of their hex
        self.first_denial: FirstDenial | None = None


def _in_memory(row: Row) -> Row:
    """``row`` with its streaks in a fresh memory store, whatever store it names.

    Replay answers "what would the brake have denied in these transcripts": a shared store would
    mix in (and keep) counts of live agents, and the replay's own would reach theirs.
    """
    config = row.config
    if config is None:
        config = {}
    elif not isinstance(config, Mapping):
        return row  # the plugin refuses it, saying why
    return dataclasses.replace(row, config={**config, "store": "memory:"})


@final
class _Lane:
    """One harness with the loop-brake row at one setting, and the sessions it replayed."""

    __slots__ = (
        "_agents",
        "_execute",
        "_register",
        "_registered",
        "_streak",
        "brake",
        "harness",
        "max_repeats",
        "sessions",
        "tallies",
    )

    def __init__(self, row: Row, plugins: Mapping[str, object] | None) -> None:
        self.harness = Harness.from_rows([_in_memory(row)], plugins=plugins)
        try:
            brake = self.harness.handle(row.id)
            if not isinstance(brake, LoopBrake):
                raise TypeError(
                    f"the plugin {row.name!r} returned {type(brake).__name__} for row "
                    f"{row.id!r}, not a LoopBrake; replay needs the dsh-loop-brake plugin"
                )
        except BaseException:
            self.harness.dispose()
            raise
        self.brake = brake
        self.max_repeats = brake.max_repeats
        # The harness's registry, as the plugin patched it: a denial is the LoopBrakeError it
        # raises (Harness.execute would turn it into a result for an agent to read).
        self._execute = self.harness.ctx.tools.execute
        # The brake's streak after every call, read from its store as the whole digest
        # (streak() would format its hex; streak_digest() is one more call around this one).
        self._streak = brake.store.read_streak
        self._register = self.harness.tools.register
        self._registered: set[str] = set()
        self._agents = 0
        self.tallies: list[_Tally] = []  # the current transcript's sessions
        self.sessions: list[SessionReport] = []  # every finished session, in reading order

    async def feed(self, calls: Sequence[RecordedCall], numbered_from: int) -> None:
        """Run recorded calls through the harness, in order, and count what happened to each.

        ``numbered_from`` is how many calls came before these (their call ids follow it).
        """
        tallies = self.tallies
        registered = self._registered
        execute = self._execute
        streak = self._streak
        number = numbered_from
        for session, tool, arguments in calls:
            number += 1
            if session >= len(tallies):
                self._open(session)
            tally = tallies[session]
            if tool not in registered:
                registered.add(tool)
                self._register(ToolDefinition(tool, _stub))
            tally.calls += 1
            try:
                await execute(ToolExecution(str(number), tool, arguments, tally.agent))
            except LoopBrakeError:
                denied = True
            else:
                denied = False
            current = streak(tally.agent.id)
            if current is None:
                continue  # arguments the brake could not identify: allowed, not counted
            digest, count = current
            prefix = digest[:_PREFIX_BYTES]
            tally.distinct.add(prefix)
            if count > tally.longest:
                tally.longest = count
            if denied:
                tally.denied += 1
                if tally.first_denial is None:
                    tally.first_denial = FirstDenial(tally.calls, tool, count, prefix.hex())

    def _open(self, session: int) -> None:
        while len(self.tallies) <= session:
            self._agents += 1
            self.tallies.append(_Tally(Agent(f"replay-{self._agents}")))

    def finish(self, source: str, names: Sequence[str]) -> None:
        """Turn the transcript's tallies into session reports and forget its streaks."""
        if len(names) > len(self.tallies):
            self._open(len(names) - 1)
        for name, tally in zip(names, self.tallies, strict=True):
            self.sessions.append(
                SessionReport(
                    source=source,
                    session=name,
                    calls=tally.calls,
                    distinct_calls=len(tally.distinct),
                    longest_streak=tally.longest,
                    denied=tally.denied,
                    first_denial=tally.first_denial,
                )
            )
        self.abandon()

    def abandon(self) -> None:
        """Drop the current transcript's sessions (read failed half way) and their streaks."""
        for tally in self.tallies:
            self.brake.reset(tally.agent.id)
        self.tallies = []


@final
class Replayer:
    """Replays transcripts through the loop-brake ``row`` and, for a sweep, other settings.

    ``row`` is the loop-brake row to apply (id ``loop-brake``, name ``dsh-loop-brake``, its
    config); ``sweep`` lists further ``maxRepeats`` values to replay at. Use as a context
    manager, or call :meth:`dispose`, to take the harnesses down.
    """

    __slots__ = ("_calls", "_lanes", "_main", "_sweep", "on_progress")

    def __init__(
        self,
        row: Row,
        sweep: Iterable[int] = (),
        *,
        plugins: Mapping[str, object] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self._lanes: list[_Lane] = []
        self._calls = 0
        self.on_progress = on_progress
        try:
            self._main = _Lane(row, plugins)
            self._lanes.append(self._main)
            by_value = {self._main.max_repeats: self._main}
            self._sweep: list[_Lane] = []
            for value in sweep:
                lane = by_value.get(value)
                if lane is None:
                    config = {"maxRepeats": value}
                    swept = Row(id=row.id or ROW_ID, name=row.name, config=config)
                    lane = by_value[value] = _Lane(swept, plugins)
                    self._lanes.append(lane)
                self._sweep.append(lane)
        except BaseException:
            self.dispose()
            raise

    @property
    def max_repeats(self) -> int:
        """The setting the report is made at (the row's, resolved like the plugin does)."""
        return self._main.max_repeats

    @property
    def calls(self) -> int:
        """How many recorded calls have been replayed so far."""
        return self._calls

    async def replay(self, transcript: Transcript) -> None:
        """Feed every call of ``transcript``, in order; its sessions join the report.

        A ``ReaderError`` raised half way through propagates and the transcript's sessions are
        left out of the report (a half-read file would report streaks that are not there).
        """
        lanes = self._lanes
        calls = iter(transcript)
        try:
            while chunk := list(islice(calls, _CHUNK)):
                await self._feed(chunk)
        except BaseException:
            for lane in lanes:
                lane.abandon()
            raise
        for lane in lanes:
            lane.finish(transcript.path, transcript.sessions)

    async def _feed(self, chunk: list[RecordedCall]) -> None:
        # Each lane runs its own tight loop over the chunk: no coroutine per call and lane.
        for lane in self._lanes:
            await lane.feed(chunk, self._calls)
        before = self._calls
        self._calls += len(chunk)
        if (
            self.on_progress is not None
            and self._calls // PROGRESS_EVERY > before // PROGRESS_EVERY
        ):
            self.on_progress(self._calls)

    def report(self) -> Report:
        """The report so far: every finished session, and the sweep rows if a sweep was asked."""
        sweep = None
        if self._sweep:
            sweep = []
            for lane in self._sweep:
                totals = Totals.of(lane.sessions)
                sweep.append(
                    SweepRow(lane.max_repeats, totals.denied, totals.sessions_with_denials)
                )
        return Report(self._main.max_repeats, tuple(self._main.sessions), sweep)

    def dispose(self) -> None:
        """Dispose every harness (idempotent)."""
        for lane in self._lanes:
            lane.harness.dispose()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dispose()
