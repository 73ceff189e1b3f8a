"""OpenTelemetry trace and span ids of a run, its processes and its calls: one derivation for both exports.

``wp-autotrace export --format otlp`` (analysis/otlp.py, from the finished log)
and the watcher's live export (watcher/export.py, while the job runs) both use
these, so a span seen live and the same span exported later have one id and
a backend merges them. Stable: re-exporting a log gives the same ids.

- trace id: one per run: the run id itself, zero-padded to 32 hex digits,
  when it is hex (a backend search for the run id finds the trace), else the
  first 16 bytes of its SHA-256;
- a process's span id: ``span_id(run, host, pid, start)``, start being
  process_start's ``create_time`` (else its ``ts``) as a float;
- a call's span id: ``span_id(process_span_id, "call", call_id)``.

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
    return hashlib.sha256(run.encode()).hexdigest()[:32]


def span_id(*parts: Any) -> str:
    """8 bytes hex, stable for the same process or call (re-exports give the same ids)."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def process_span_id(run: str, host: str, pid: int, start: float) -> str:
    """A process's span: start is process_start's create_time (else ts), as a float."""
    return span_id(run, host, pid, float(start))


def call_span_id(process_span: str, call_id: int) -> str:
    """A traced call's span, under its process's."""
    return span_id(process_span, "call", call_id)


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
