"""OpenTelemetry spans of a run, its processes and its calls: one shape and one id derivation for both exports.

``wp-autotrace export --format otlp`` (analysis/export/otlp.py, from the finished log)
and the watcher's live export (watcher/export.py, while the job runs) both
build their spans and resources here (process_span, call_span,
process_resource: plain values in, OTLP/JSON dicts out), so a span seen live
and the same span exported later have one id, one name and one set of
attributes, and a backend merges them. Stable: re-exporting a log gives the
same ids.

- trace id: one per run: the run id itself, zero-padded to 32 hex digits,
  when it is hex (a backend search for the run id finds the trace), else the
  first 16 bytes of its SHA-256;
- a process's span id: ``span_id(run, host, pid, start)``, start being
  process_start's ``create_time`` (else its ``ts``) as a float;
- a call's span id: ``span_id(process_span_id, "call", call_id)``, with the process's exec count before
  call_id once it has exec'd (``call_span_id``).

Stdlib only (the watcher runs with ``python -I -S``).
"""

from __future__ import annotations

import hashlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def trace_id(run: str) -> str:
    """16 bytes hex: the run id itself, zero-padded, when it is hex (so a backend search finds it)."""
    run = run.lower()
    if run and len(run) <= 32 and all(ch in "0123456789abcdef" for ch in run) and int(run, 16):
        return run.zfill(32)
    return hashlib.sha256(_bytes(run)).hexdigest()[:32]


def span_id(*parts: Any) -> str:
    """8 bytes hex, stable for the same process or call (re-exports give the same ids)."""
    return hashlib.sha256(_bytes("|".join(map(str, parts)))).hexdigest()[:16]


def _bytes(text: str) -> bytes:
    """text as UTF-8, lone surrogates included: a run id given as bytes that are not UTF-8 (Python holds each
    odd byte as a surrogate; the log keeps it escaped) hashes the same in the live and the finished export."""
    return text.encode("utf-8", "surrogatepass")


def process_span_id(run: str, host: str, pid: int, start: float) -> str:
    """A process's span: start is process_start's create_time (else ts), as a float."""
    return span_id(run, host, pid, float(start))


def call_span_id(process_span: str, call_id: int, gen: int = 0) -> str:
    """A traced call's span, under its process's. gen: the process's execs before the call (a new program
    numbers its calls from 1 again); the first program's ids are as they always were."""
    return span_id(process_span, "call", call_id) if not gen else span_id(process_span, "call", gen, call_id)


# -- OTLP/JSON encoding shared by both exports ---------------------------------------------

SPAN_KIND_INTERNAL = 1  # opentelemetry-proto's Span.SpanKind
STATUS_ERROR = 2  # opentelemetry-proto's Status.StatusCode


def nanos(ts: float) -> str:
    """A Unix time in seconds as OTLP/JSON's nanosecond string."""
    return str(int(round(float(ts) * 1e9)))


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP attributes: ints as intValue strings, the rest as stringValue; None and '' left out."""
    out = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            out.append({"key": key, "value": {"intValue": str(value)}})
        else:
            out.append({"key": key, "value": {"stringValue": str(value)}})
    return out


def process_resource(base: dict[str, str], host: str, pid: int, ppid: int | None, argv: list[str] | None,
                     executable: str | None) -> list[dict[str, Any]]:
    """A process's resource attributes: base (service.name, OTEL_RESOURCE_ATTRIBUTES) then the process's own."""
    return attributes({
        **base, "host.name": host, "process.pid": pid, "process.parent_pid": ppid,
        "process.command_line": " ".join(map(str, argv)) if argv else None,
        "process.executable.path": executable or None,
    })


def process_span(trace: str, span: str, parent: str | None, role: str, pid: int, run: str, rank: str | None,
                 start: float, end: float, exited: bool) -> dict[str, Any]:
    """A process's span, from its start to its end (never before its start)."""
    out: dict[str, Any] = {
        "traceId": trace, "spanId": span, "name": f"{role} {pid}",
        "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": nanos(start),
        "endTimeUnixNano": nanos(max(end, start)),
        "attributes": attributes({"wp.role": role, "wp.rank": rank, "wp.run": run,
                                  "wp.ended": "exited" if exited else "no process_exit"}),
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def call_span(trace: str, span: str, parent: str, target: str, start: float, end: float | None,
              caller: dict[str, Any] | None, tag: str | None, thread: str | None, blocked: bool,
              error: str | None, unfinished: bool = False) -> dict[str, Any]:
    """A traced call's span (parent: its enclosing call's span, else its process's). end None: a refused
    call, or one whose return is not known yet, ends where it starts; an unfinished one (never returned:
    killed, or running at the end) is marked so and ends where its caller says (never before its start)."""
    caller = caller or {}
    out: dict[str, Any] = {
        "traceId": trace, "spanId": span, "parentSpanId": parent,
        "name": target.rpartition(":")[2], "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": nanos(start), "endTimeUnixNano": nanos(start if end is None else max(end, start)),
        "attributes": attributes({"code.filepath": caller.get("file"), "code.lineno": caller.get("line"),
                                  "code.function": caller.get("func"), "wp.target": target,
                                  "wp.tag": tag, "wp.thread": thread,
                                  "wp.blocked": "refused by the guard" if blocked else None,
                                  "wp.unfinished": "true" if unfinished else None}),
    }
    if error:
        out["status"] = {"code": STATUS_ERROR, "message": str(error)}
    return out
