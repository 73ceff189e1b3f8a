"""Findings about the tracer itself: the guard's refusals, the tracer's own errors, a cut log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..words.fmt import TEXT_PIDS, pid_text, site
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View

def guard_refused(v: View) -> Finding | None:
    if not v.blocked:
        return None
    pids = sorted({c.proc.pid for c in v.blocked})
    names = sorted({targets.short_label(c.target) for c in v.blocked})
    return Finding(
        "guard-refused", "info",
        f"Guard nested-pools refused {len(v.blocked)} call(s) in pids {pid_text(pids)} ({', '.join(names)}).",
        pids, [site(c.caller) for c in v.blocked[:TEXT_PIDS]], "", {"calls": len(v.blocked)})


def guard_idle(v: View) -> Finding | None:
    if v.blocked or not any(r.guard for r in v.runs):
        return None
    return Finding("guard-idle", "info", "Guard nested-pools was on and refused nothing.", [], [],
                   "", {})


def tracer_trouble(v: View) -> Finding | None:
    errors = [e for r in v.runs for e in r.tracer_errors]
    dropped = sum(r.dropped for r in v.runs)
    if not errors and not dropped:
        return None
    return Finding(
        "tracer-errors", "warning",
        f"The tracer reported {len(errors)} error(s) and dropped {dropped} record(s): this report may miss events.",
        [], errors[:TEXT_PIDS], "see the errors; a dropped record usually means the log's disk was full"
        + ("; an exit record lost to a full file table is said in that process's ending" if any(
            p.exit_unwritten is not None for p in v.procs) else ""),
        {"records_dropped": dropped})


def export_failed(v: View) -> Finding | None:
    """The live export could not send spans (receiver down, slow, refusing): said as an export failure with
    the receiver's answer, never as records lost (the log has them all)."""
    errors = [e for r in v.runs for e in r.export_errors]
    if not errors:
        return None
    unsent = sum(int(e.split(" ", 1)[0]) for e in errors if e.split(" ", 1)[0].isdigit())
    return Finding(
        "export-failed", "warning",
        f"The live export failed: {errors[0]}. The log is complete: only the live spans were not delivered.",
        [], errors[:TEXT_PIDS],
        "check the collector that OTEL_EXPORTER_OTLP_ENDPOINT names; send the run again from the log with "
        "`wp-autotrace export LOG --format otlp --endpoint URL`",
        {"spans_unsent": unsent})


def data_cut(v: View) -> Finding | None:
    cut = [c for r in v.runs for c in r.cut]
    if not cut:
        return None
    return Finding("log-cut", "warning", f"Parts of the log were cut: {'; '.join(sorted(set(cut))[:3])}.",
                   [], cut[:TEXT_PIDS], "counts above come from the records' own totals where they have them", {})
