"""The replay report: what the brake would have denied, per session; as JSON or a table."""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "FirstDenial",
    "Report",
    "SessionReport",
    "SweepRow",
    "Totals",
    "printable",
    "render_json",
    "render_table",
]

_NAME_WIDTH: Final = 48
_TOOL_WIDTH: Final = 28


@dataclass(frozen=True)
class FirstDenial:
    """The first call of a session the brake would deny: its 1-based index, tool, streak, hash."""

    call: int
    tool: str
    count: int
    hash_prefix: str

    def as_dict(self) -> dict[str, Any]:
        """``{"call", "tool", "count", "hashPrefix"}``, as ``--json`` prints it."""
        return {
            "call": self.call,
            "tool": self.tool,
            "count": self.count,
            "hashPrefix": self.hash_prefix,
        }


@dataclass(frozen=True)
class SessionReport:
    """One replayed session: where it came from and what the brake made of it."""

    source: str
    session: str
    calls: int
    distinct_calls: int
    longest_streak: int
    denied: int
    first_denial: FirstDenial | None = None

    def as_dict(self) -> dict[str, Any]:
        """The session as ``--json`` prints it, keys in the order of the spec."""
        return {
            "source": self.source,
            "session": self.session,
            "calls": self.calls,
            "distinctCalls": self.distinct_calls,
            "longestStreak": self.longest_streak,
            "denied": self.denied,
            "firstDenial": None if self.first_denial is None else self.first_denial.as_dict(),
        }


@dataclass(frozen=True)
class Totals:
    """Sums over every replayed session."""

    sessions: int
    calls: int
    denied: int
    sessions_with_denials: int

    def as_dict(self) -> dict[str, Any]:
        """``{"sessions", "calls", "denied", "sessionsWithDenials"}``."""
        return {
            "sessions": self.sessions,
            "calls": self.calls,
            "denied": self.denied,
            "sessionsWithDenials": self.sessions_with_denials,
        }

    @classmethod
    def of(cls, sessions: Sequence[SessionReport]) -> Totals:
        """The totals of these sessions."""
        return cls(
            sessions=len(sessions),
            calls=sum(session.calls for session in sessions),
            denied=sum(session.denied for session in sessions),
            sessions_with_denials=sum(1 for session in sessions if session.denied),
        )


@dataclass(frozen=True)
class SweepRow:
    """What a replay at one ``maxRepeats`` reports, in brief."""

    max_repeats: int
    denied: int
    sessions_with_denials: int

    def as_dict(self) -> dict[str, Any]:
        """``{"maxRepeats", "denied", "sessionsWithDenials"}``."""
        return {
            "maxRepeats": self.max_repeats,
            "denied": self.denied,
            "sessionsWithDenials": self.sessions_with_denials,
        }


@dataclass(frozen=True)
class Report:
    """A whole replay: the setting, every session in reading order, and the optional sweep.

    ``max_repeats_source`` says where the setting came from, in the words ``config --json``
    uses for its ``source``: ``"default"``, ``"env DSH_LOOP_BRAKE_MAX_REPEATS"``, the path of the
    patch file that set it, or ``"--max-repeats"`` (None: not known).
    """

    max_repeats: int
    sessions: Sequence[SessionReport] = field(default_factory=tuple)
    sweep: Sequence[SweepRow] | None = None
    max_repeats_source: str | None = None

    @property
    def totals(self) -> Totals:
        """Sums over every session."""
        return Totals.of(self.sessions)

    def as_dict(self) -> dict[str, Any]:
        """The report as ``--json`` prints it (stable keys, in the order of the spec)."""
        document: dict[str, Any] = {
            "maxRepeats": self.max_repeats,
            "maxRepeatsSource": self.max_repeats_source,
            "sessions": [session.as_dict() for session in self.sessions],
            "totals": self.totals.as_dict(),
        }
        if self.sweep is not None:
            document["sweep"] = [row.as_dict() for row in self.sweep]
        return document


def render_json(report: Report) -> str:
    """The ``--json`` text: indented, ASCII only (names with odd characters stay intact)."""
    return json.dumps(report.as_dict(), indent=2, ensure_ascii=True) + "\n"


def render_table(report: Report, *, setting: str | None = None, cut: bool = False) -> str:
    """The readable report: a line per session, the totals, and the sweep when there is one.

    ``setting`` says where ``maxRepeats`` came from (shown next to it). With ``cut``, names of
    transcripts, sessions and tools longer than their column are cut in the middle to keep the
    table narrow (for a terminal); without it every name is whole, for the file or the program
    the report goes to.
    """
    lines: list[str] = []
    origin = f" ({setting})" if setting else ""
    lines.append(f"Replay through the loop brake at maxRepeats {report.max_repeats}{origin}")
    sessions = report.sessions
    base = _common_directory([session.source for session in sessions])
    if base:
        lines.append(f"transcripts in {printable(base)}")
    lines.append("")
    if sessions:
        header = ("transcript / session", "calls", "distinct", "longest", "denied", "first denial")
        rows = _session_rows(sessions, base, cut)
        lines.extend(_columns(header, rows, right=(1, 2, 3, 4)))
        lines.append("")
    lines.append(_summary(report))
    if report.sweep is not None:
        lines.append("")
        lines.append("Sweep: what each maxRepeats would deny in these sessions")
        sweep_header = ("maxRepeats", "denied", "sessions with denials", "")
        sweep_rows = [
            (
                str(row.max_repeats),
                str(row.denied),
                str(row.sessions_with_denials),
                "<- this report" if row.max_repeats == report.max_repeats else "",
            )
            for row in report.sweep
        ]
        table = _columns(sweep_header, sweep_rows, right=(0, 1, 2))
        lines.extend("  " + line for line in table)
        lines.append(
            "A denial in a session you know was healthy means that maxRepeats is too tight "
            "for this agent."
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _session_rows(sessions: Sequence[SessionReport], base: str, cut: bool) -> list[tuple[str, ...]]:
    """A line per transcript, then a line per session; a file that is one session is one line."""
    fit = _fit if cut else _whole
    rows: list[tuple[str, ...]] = []
    index = 0
    while index < len(sessions):
        source = sessions[index].source
        end = index
        while end < len(sessions) and sessions[end].source == source:
            end += 1
        group = sessions[index:end]
        name = fit(printable(_relative(source, base)), _NAME_WIDTH)
        if len(group) == 1 and group[0].session == os.path.basename(source):
            rows.append((name, *_numbers(group[0], fit)))
        else:
            rows.append((name, "", "", "", "", ""))
            for session in group:
                label = "  " + fit(printable(session.session), _NAME_WIDTH - 2)
                rows.append((label, *_numbers(session, fit)))
        index = end
    return rows


def _numbers(session: SessionReport, fit: _Fit) -> tuple[str, ...]:
    return (
        str(session.calls),
        str(session.distinct_calls),
        str(session.longest_streak),
        str(session.denied),
        _first_denial(session.first_denial, fit),
    )


def _summary(report: Report) -> str:
    totals = report.totals
    calls = _plural(totals.calls, "call")
    sessions = _plural(totals.sessions, "session")
    if not totals.sessions:
        return "No session with a tool call was found."
    if not totals.denied:
        return f"{sessions}, {calls}: the brake would deny no call."
    return (
        f"{sessions}, {calls}: the brake would deny {_plural(totals.denied, 'call')} "
        f"in {_plural(totals.sessions_with_denials, 'session')}."
    )


def _first_denial(first: FirstDenial | None, fit: _Fit) -> str:
    if first is None:
        return ""
    # Its streak count is maxRepeats by definition, so the table leaves it out (--json has it).
    tool = fit(printable(first.tool), _TOOL_WIDTH)
    return f"call {first.call}: {tool} ({first.hash_prefix})"


def _columns(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int]
) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts)

    return [line(header), *(line(row) for row in rows)]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


_Fit = Callable[[str, int], str]


def _whole(text: str, width: int) -> str:
    """``text`` as it is, however long."""
    return text


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, so both ends stay readable."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + "\u2026" + text[-tail:]


def _common_directory(sources: Sequence[str]) -> str:
    """The directory all sources share, when there are several files and they share one."""
    if len(set(sources)) < 2:
        return ""
    try:
        base = os.path.commonpath([os.path.dirname(source) for source in sources])
    except ValueError:
        return ""  # relative and absolute mixed, or different drives
    return "" if base in ("", os.sep, ".") else base


def _relative(source: str, base: str) -> str:
    if not base:
        return source
    return os.path.relpath(source, base)


def printable(text: str) -> str:
    """``text`` safe for one terminal line: control and unpaired surrogate characters escaped."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif unicodedata.category(char) == "Zs":
            out.append(" ")
        else:
            code = ord(char)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    return "".join(out)
