"""Export a run as OpenTelemetry traces (OTLP/JSON ExportTraceServiceRequest).

One trace per run (trace id from the run id), one span per process (its own
resource: host.name, process.pid, ...), one child span per traced call.
Process spans nest as the processes did; a sidecar hangs under the
``SubprocPool.__init__`` call whose return named it (``sidecar_pid``).
OTLP/JSON differs from the standard protobuf JSON mapping in two ways kept
here: ids are hex strings, and enums are integers. The ids come from
common/otel_ids.py, shared with the watcher's live export (watcher/export.py):
a span streamed live and the same span exported later have one id.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .. import __version__
from ..common.otel_ids import span_id as _span_id
from ..common.otel_ids import trace_id
from ..common.vocab import WATCHER
from .labels import rank_value
from .logread import LogData

TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for traces
POST_TIMEOUT_S = 30.0
SPAN_KIND_INTERNAL = 1
STATUS_ERROR = 2
UNFINISHED = ""


def _nanos(ts: float) -> str:
    return str(int(round(float(ts) * 1e9)))


def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP attributes: ints as intValue strings, the rest as stringValue; None left out."""
    out = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            out.append({"key": key, "value": {"intValue": str(value)}})
        else:
            out.append({"key": key, "value": {"stringValue": str(value)}})
    return out


def _rank(start: dict[str, Any]) -> str | None:
    return rank_value(start.get("rank"))


class _Proc:
    """One process of a run, as the records show it."""

    def __init__(self, run: str, host: str, pid: int, ts: float) -> None:
        self.run, self.host, self.pid = run, host, pid
        self.start = ts
        self.end: float | None = None
        self.ppid: int | None = None
        self.info: dict[str, Any] = {}
        self.span_id = _span_id(run, host, pid, ts)
        self.parent_span: str | None = None


def _processes(data: LogData) -> tuple[dict[tuple[str, int], _Proc], list[_Proc], dict[str, float]]:
    """Processes by (host, pid) (the latest one of a reused pid), all of them in order, each run's end."""
    by_key: dict[tuple[str, int], _Proc] = {}
    order: list[_Proc] = []
    run_of: dict[tuple[str, int], str] = {}
    run_end: dict[str, float] = {}
    default_run = next((str(r["run"]) for r in data.records if isinstance(r.get("run"), str)), "")
    for r in data.records:
        key = (r["host"], r["pid"])
        if r["event"] == "process_start":
            run_of[key] = str(r.get("run") or default_run)
            p = _Proc(run_of[key], r["host"], r["pid"], float(r.get("create_time") or r["ts"]))
            p.ppid, p.info = r.get("ppid"), r
            by_key[key] = p
            order.append(p)
        elif key not in by_key and r.get("role") != WATCHER:
            p = _Proc(run_of.get(key, default_run), r["host"], r["pid"], float(r["ts"]))
            p.ppid, p.info = r.get("ppid"), {"role": r.get("role")}
            by_key[key] = p
            order.append(p)
        if r["event"] == "process_exit" and key in by_key:
            by_key[key].end = float(r["ts"])
        run = run_of.get(key, default_run)
        run_end[run] = max(run_end.get(run, 0.0), float(r["ts"]))
    return by_key, order, run_end


def _call_spans(data: LogData, procs: dict[tuple[str, int], _Proc]) -> tuple[
        dict[tuple[str, int], list[dict[str, Any]]], dict[tuple[str, int], str]]:
    """Call spans per process, and (host, sidecar pid) -> the span of the call that started it."""
    spans: dict[tuple[str, int], list[dict[str, Any]]] = {}
    open_calls: dict[tuple[str, int, int], dict[str, Any]] = {}
    started_by: dict[tuple[str, int], str] = {}
    for r in data.records:
        key = (r["host"], r["pid"])
        proc = procs.get(key)
        if proc is None:
            continue
        cid = r.get("call_id")
        if r["event"] in ("call", "blocked") and isinstance(cid, int):
            caller: dict[str, Any] = r["caller"] if isinstance(r.get("caller"), dict) else {}
            pcid = r.get("parent_call")
            parent = open_calls.get((key[0], key[1], pcid)) if isinstance(pcid, int) else None
            span: dict[str, Any] = {
                "traceId": trace_id(proc.run), "spanId": _span_id(proc.span_id, "call", cid),
                "parentSpanId": parent["spanId"] if parent else proc.span_id,
                "name": str(r.get("target", "?")).rpartition(":")[2], "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": _nanos(r["ts"]), "endTimeUnixNano": _nanos(r["ts"]),
                "attributes": _attrs({"code.filepath": caller.get("file"), "code.lineno": caller.get("line"),
                                      "code.function": caller.get("func"), "wp.target": r.get("target"),
                                      "wp.tag": r.get("tag"), "wp.thread": r.get("thread"),
                                      "wp.blocked": "refused by the guard" if r["event"] == "blocked" else None}),
            }
            spans.setdefault(key, []).append(span)
            if r["event"] == "call":
                open_calls[(key[0], key[1], cid)] = span
        elif r["event"] == "return" and isinstance(cid, int):
            done = open_calls.pop((key[0], key[1], cid), None)
            if done is None:
                continue
            span = done
            span["endTimeUnixNano"] = _nanos(r["ts"])
            if r.get("error"):
                span["status"] = {"code": STATUS_ERROR, "message": str(r["error"])}
            if isinstance(r.get("sidecar_pid"), int):
                started_by.setdefault((r["host"], r["sidecar_pid"]), span["spanId"])
    for span in open_calls.values():  # never returned: killed, or still running at the end
        span["endTimeUnixNano"] = UNFINISHED  # its process's end, filled in by to_otlp
        span["attributes"] += _attrs({"wp.unfinished": "true"})
    return spans, started_by


def to_otlp(data: LogData) -> dict[str, Any]:
    """The ExportTraceServiceRequest as a dict ready for json.dump."""
    by_key, order, run_end = _processes(data)
    calls, started_by = _call_spans(data, by_key)
    resource_spans = []
    for p in order:
        key = (p.host, p.pid)
        parent = by_key.get((p.host, p.ppid)) if p.ppid is not None else None
        p.parent_span = started_by.get(key) or (parent.span_id if parent is not None and parent is not p else None)
        end = p.end or run_end.get(p.run, p.start)
        for span in calls.get(key, []):
            if span["endTimeUnixNano"] == UNFINISHED:
                span["endTimeUnixNano"] = _nanos(max(end, int(span["startTimeUnixNano"]) / 1e9))
        argv = p.info.get("argv")
        resource = _attrs({
            "service.name": "wp-autotrace", "host.name": p.host, "process.pid": p.pid,
            "process.parent_pid": p.ppid if isinstance(p.ppid, int) else None,
            "process.command_line": " ".join(map(str, argv)) if isinstance(argv, list) else None,
            "process.executable.path": p.info.get("executable"),
        })
        span = {
            "traceId": trace_id(p.run), "spanId": p.span_id, "name": f"{p.info.get('role') or 'child'} {p.pid}",
            "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": _nanos(p.start),
            "endTimeUnixNano": _nanos(max(end, p.start)),
            "attributes": _attrs({"wp.role": p.info.get("role") or "child", "wp.rank": _rank(p.info),
                                  "wp.run": p.run, "wp.ended": "exited" if p.end else "no process_exit"}),
        }
        if p.parent_span:
            span["parentSpanId"] = p.parent_span
        scope = {"name": "wp-autotrace", "version": __version__}
        resource_spans.append({"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": scope, "spans": [span, *calls.get(key, [])]}]})
    return {"resourceSpans": resource_spans}


def traces_url(endpoint: str) -> str:
    """The endpoint with OTLP/HTTP's /v1/traces path appended when missing."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {endpoint!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def post(request: dict[str, Any], endpoint: str, timeout: float = POST_TIMEOUT_S) -> str:
    """POST the request to an OTLP/HTTP receiver (JSON encoding); the URL used.

    Raises OSError with a message in user terms when it cannot be delivered.
    """
    url = traces_url(endpoint)
    body = json.dumps(request).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (the user's own endpoint)
            resp.read()
    except urllib.error.HTTPError as exc:
        raise OSError(f"{url} answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise OSError(f"cannot reach {url}: {exc.reason}") from None
    except (TimeoutError, OSError) as exc:
        raise OSError(f"cannot reach {url}: {exc}") from None
    return url
