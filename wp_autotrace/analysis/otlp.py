"""Export a run as OpenTelemetry traces (OTLP/JSON ExportTraceServiceRequest).

Built from the run model (model.py), the one fold of the log: one trace per
run (trace id from the run id), one span per process (its own resource:
host.name, process.pid, ...), one child span per traced call.
Process spans nest as the processes did; a sidecar hangs under the
``SubprocPool.__init__`` call whose return named it (``sidecar_pid``).
OTLP/JSON differs from the standard protobuf JSON mapping in two ways kept
here: ids are hex strings, and enums are integers. The ids come from
common/otel_ids.py, shared with the watcher's live export (watcher/export.py):
a span streamed live and the same span exported later have one id. Sending
it to a receiver is the CLI's (cli/post.py): this module never touches the
network.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..common.otel_ids import SPAN_KIND_INTERNAL, STATUS_ERROR, attributes, nanos, trace_id
from ..common.otel_ids import span_id as _span_id
from .labels import rank_value
from .logread import LogData, LogStream
from .model import Call, Model, Process, build

UNFINISHED = ""



def _process_span_id(p: Process) -> str:
    """Stable for the same process: its run, host, pid and start (create_time, else its first record's ts)."""
    start = p.create_time if p.create_time is not None else p.start
    return _span_id(p.run.id if p.run is not None else "", p.host, p.pid, float(start or 0.0))


def _wrote(p: Process) -> bool:
    """A process that wrote records (the watcher's subjects alone have no span)."""
    return p.traced or p.exited or p.last is not None


def _call_span(c: Call, trace: str, proc_span: str, span_ids: dict[int, str]) -> dict[str, Any]:
    caller = c.caller or {}
    span_id = _span_id(proc_span, "call", c.call_id)
    parent = span_ids.get(id(c.parent)) if c.parent is not None else None
    span: dict[str, Any] = {
        "traceId": trace, "spanId": span_id, "parentSpanId": parent or proc_span,
        "name": c.target.rpartition(":")[2], "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": nanos(c.ts), "endTimeUnixNano": nanos(c.end if c.end is not None else c.ts),
        "attributes": attributes({"code.filepath": caller.get("file"), "code.lineno": caller.get("line"),
                              "code.function": caller.get("func"), "wp.target": c.target,
                              "wp.tag": c.tag, "wp.thread": c.thread,
                              "wp.blocked": "refused by the guard" if c.blocked else None}),
    }
    if c.error:
        span["status"] = {"code": STATUS_ERROR, "message": c.error}
    return span


def _call_spans(model: Model, span_of: dict[int, str]) -> tuple[dict[int, list[dict[str, Any]]], dict[int, str]]:
    """Call spans per process (by id), and the span of each call by id(call)."""
    spans: dict[int, list[dict[str, Any]]] = {}
    span_ids: dict[int, str] = {}
    for c in model.calls:
        proc_span = span_of.get(id(c.proc))
        if proc_span is None or c.call_id is None:
            continue
        span = _call_span(c, trace_id(c.proc.run.id if c.proc.run else ""), proc_span, span_ids)
        if c.end is None and not c.blocked:  # never returned: killed, or still running at the end
            span["endTimeUnixNano"] = UNFINISHED  # its process's end, filled in by to_otlp
            span["attributes"] += attributes({"wp.unfinished": "true"})
        span_ids[id(c)] = span["spanId"]
        spans.setdefault(id(c.proc), []).append(span)
    return spans, span_ids


def to_otlp(data: LogData | LogStream) -> dict[str, Any]:
    """The ExportTraceServiceRequest as a dict ready for json.dump, from the run model (one identity rule:
    a record's process is (host, pid, create_time), so a reused pid, pid 1 of each container run, is its own)."""
    model = build(data.records)
    procs = [p for p in model.processes if _wrote(p)]
    span_of = {id(p): _process_span_id(p) for p in procs}
    calls, span_ids = _call_spans(model, span_of)
    started_by = {id(pool.sidecar): span_ids[id(pool.call)] for pool in model.pools
                  if pool.sidecar is not None and id(pool.call) in span_ids}
    resource_spans = []
    for p in procs:
        run = p.run.id if p.run is not None else ""
        parent = span_of.get(id(p.parent)) if p.parent is not None and p.parent is not p else None
        parent_span = started_by.get(id(p)) or parent
        start = float(p.create_time if p.create_time is not None else p.start or 0.0)
        end = p.end if p.end is not None else p.run.end if p.run is not None and p.run.end else start
        for span in calls.get(id(p), []):
            if span["endTimeUnixNano"] == UNFINISHED:
                span["endTimeUnixNano"] = nanos(max(end, int(span["startTimeUnixNano"]) / 1e9))
        resource = attributes({
            "service.name": "wp-autotrace", "host.name": p.host, "process.pid": p.pid,
            "process.parent_pid": p.ppid, "process.command_line": " ".join(p.argv) if p.argv else None,
            "process.executable.path": p.executable or None,
        })
        span = {
            "traceId": trace_id(run), "spanId": span_of[id(p)], "name": f"{p.role or 'child'} {p.pid}",
            "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": nanos(start),
            "endTimeUnixNano": nanos(max(end, start)),
            "attributes": attributes({"wp.role": p.role or "child", "wp.rank": rank_value(p.rank), "wp.run": run,
                                  "wp.ended": "exited" if p.exited else "no process_exit"}),
        }
        if parent_span:
            span["parentSpanId"] = parent_span
        scope = {"name": "wp-autotrace", "version": __version__}
        resource_spans.append({"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": scope, "spans": [span, *calls.get(id(p), [])]}]})
    return {"resourceSpans": resource_spans}
