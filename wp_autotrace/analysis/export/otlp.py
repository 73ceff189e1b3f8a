"""Export a run as OpenTelemetry traces (OTLP/JSON ExportTraceServiceRequest).

Built from the run model (model.py, by fold.py, the one fold of the log): one trace per
run (trace id from the run id), one span per process (its own resource:
host.name, process.pid, ...), one child span per traced call.
Process spans nest as the processes did; a sidecar hangs under the
``SubprocPool.__init__`` call whose return named it (``sidecar_pid``).
OTLP/JSON differs from the standard protobuf JSON mapping in two ways kept
here: ids are hex strings, and enums are integers. The spans, resources and
ids are built by common/otel.py, shared with the watcher's live export
(watcher/export.py): a span streamed live and the same span exported later
have one id and one shape. Sending it to a receiver is the CLI's
(cli/post.py): this module never touches the network.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, Callable

from ... import __version__
from ...common.otel import (
    attributes,
    call_span,
    call_span_id,
    process_resource,
    process_span,
    process_span_id,
    trace_id,
)
from ...common.targets import rank_value
from ..fold.fold import build
from ..fold.model import Call, Model, Process, in_namespace
from ..read.logread import LogData, LogStream
from .jsonout import Chunks, dumps

SERVICE = {"service.name": "wp-autotrace"}
SCOPE = {"name": "wp-autotrace", "version": __version__}
# A process whose pids are a pid namespace's that no reading joined to the host's (docs/export.md).
NAMESPACE_ATTR = "wp.pid_namespace"
NAMESPACE_WORDS = "its pid and parent pid are its pid namespace's; its host pid is not known"
MAY_BE_ATTR = "wp.host_pid_may_be"


def _span_of(p: Process) -> str:
    """Stable for the same process: its run, host, pid and start (create_time, else its first record's ts)."""
    start = p.create_time if p.create_time is not None else p.start
    return process_span_id(p.run_id, p.host, p.pid, float(start or 0.0))


def _wrote(p: Process) -> bool:
    """A process that wrote records (the watcher's subjects alone have no span)."""
    return p.traced or p.exited or p.last is not None


def _has_span(c: Call) -> bool:
    return c.call_id is not None and _wrote(c.proc)


def _call_span(c: Call, trace: str, proc_span: str, end: float) -> dict[str, Any]:
    """c's span; a call that never returned (killed, or still running at the end) ends at end."""
    parent = c.parent if c.parent is not None and _has_span(c.parent) else None
    unfinished = c.end is None and not c.blocked
    return call_span(trace, call_span_id(proc_span, c.call_id or 0, c.gen),
                     call_span_id(_span_of(parent.proc), parent.call_id or 0, parent.gen) if parent is not None
                     else proc_span,
                     c.target, c.ts, end if unfinished else c.end, c.caller, c.tag, c.thread, c.blocked, c.error,
                     unfinished)


def _processes(model: Model) -> Iterator[tuple[list[dict[str, Any]], Iterator[dict[str, Any]]]]:
    """Per process that wrote records: its resource's attributes, and its spans (its own, then its
    calls'), made one at a time."""
    calls: dict[int, list[Call]] = {}
    for c in model.calls:
        if _has_span(c):
            calls.setdefault(id(c.proc), []).append(c)
    started_by = {id(pool.sidecar): call_span_id(_span_of(pool.creator), pool.call.call_id or 0, pool.call.gen)
                  for pool in model.pools if pool.sidecar is not None and _has_span(pool.call)}
    for p in model.processes:
        if _wrote(p):
            resource = process_resource(SERVICE, p.host, p.pid, p.ppid, p.argv, p.executable) + _unjoined(p)
            yield resource, _spans(p, calls.get(id(p), []), started_by.get(id(p)))


def _unjoined(p: Process) -> list[dict[str, Any]]:
    """A process of a pid namespace no reading joined to a host process (fold/pidns.py): its process.pid and parent
    are its namespace's, said so, with the host pids it may be (the same namespace pid and start: not proven)."""
    if not in_namespace(p):
        return []
    may = p.may_be
    return attributes({NAMESPACE_ATTR: NAMESPACE_WORDS, MAY_BE_ATTR: ", ".join(map(str, may))})


def _spans(p: Process, calls: list[Call], started_by: str | None) -> Iterator[dict[str, Any]]:
    run, span = p.run_id, _span_of(p)
    trace = trace_id(run)
    parent = _span_of(p.parent) if p.parent is not None and p.parent is not p and _wrote(p.parent) else None
    start = float(p.create_time if p.create_time is not None else p.start or 0.0)
    ended = p.ended_at  # the one end rule: the watcher's end, never before the process_exit record
    end = ended if ended is not None else p.run.end if p.run is not None and p.run.end else start
    yield process_span(trace, span, started_by or parent, p.role or "child", p.pid, run, rank_value(p.rank),
                       start, end, p.exited)
    for c in calls:
        yield _call_span(c, trace, span, end)


def write_otlp(data: LogData | LogStream, write: Callable[[str], Any]) -> int:
    """The ExportTraceServiceRequest as OTLP/JSON text, handed to write in pieces as its spans are made
    (memory: the run model and one chunk, never the document); how many spans it holds. One identity
    rule: a record's process is (host, pid, create_time), so a reused pid, pid 1 of each container run,
    is its own."""
    out = Chunks(write)
    out.add('{"resourceSpans": [')
    count = 0
    for i, (resource, spans) in enumerate(_processes(build(data.records))):
        out.add((", " if i else "") + '{"resource": {"attributes": ' + dumps(resource) + '}, "scopeSpans": [')
        out.add('{"scope": ' + dumps(SCOPE) + ', "spans": ')
        count += out.array(spans)
        out.add("}]}")
    out.add("]}")
    out.flush()
    return count


def to_otlp(data: LogData | LogStream) -> dict[str, Any]:
    """The ExportTraceServiceRequest as a dict (write_otlp's text, parsed: for tests and small logs)."""
    text = io.StringIO()
    write_otlp(data, text.write)
    return json.loads(text.getvalue())  # type: ignore[no-any-return]
