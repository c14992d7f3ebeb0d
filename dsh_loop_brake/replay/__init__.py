"""Replay recorded agent sessions through the loop brake and report what it would have stopped."""

from dsh_loop_brake.replay.errors import ReaderError, ReplayUsageError
from dsh_loop_brake.replay.readers import (
    FORMATS,
    TRANSCRIPT_SUFFIXES,
    RecordedCall,
    Transcript,
    open_transcript,
)
from dsh_loop_brake.replay.report import (
    FirstDenial,
    Report,
    SessionReport,
    SweepRow,
    Totals,
    render_json,
    render_table,
)
from dsh_loop_brake.replay.runner import Replayer

__all__ = [
    "FORMATS",
    "TRANSCRIPT_SUFFIXES",
    "FirstDenial",
    "ReaderError",
    "RecordedCall",
    "ReplayUsageError",
    "Replayer",
    "Report",
    "SessionReport",
    "SweepRow",
    "Totals",
    "Transcript",
    "open_transcript",
    "render_json",
    "render_table",
]
