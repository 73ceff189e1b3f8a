"""Live export: the watcher streams the run's spans over OTLP/HTTP (JSON) while the job runs.

On with ``WP_AUTOTRACE_EXPORT=otlp`` (the root passes the word in the
watcher's argv, runtime/spawn.py). Only the watcher exports, never a host
process. Where to: the standard OpenTelemetry variables, which the watcher
inherits with the rest of the root's environment (readable by the same user
only, as the root's own; never put in argv, which ps shows):
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL) or
``OTEL_EXPORTER_OTLP_ENDPOINT`` (+ ``/v1/traces``), default
``http://localhost:4318/v1/traces``; ``OTEL_EXPORTER_OTLP_(TRACES_)HEADERS``;
``OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`` (milliseconds, capped at POST_DEADLINE_S);
``OTEL_SERVICE_NAME``; ``OTEL_RESOURCE_ATTRIBUTES``.

What is sent, and when (the same spans and ids as ``wp-autotrace export
--format otlp`` of the finished log, common/otel.py): a call's span when
its return is in the log (a refused call at once); a process's span, in a
resource of its own, when the watcher saw it end (its span ends at the later of
that end and its process_exit record: the run model's one end rule, Process.ended_at),
or, gone without a process_exit, once the log was read past that end; at the
watcher's end, what is still open, ended then (at its process_exit when it wrote one).

Invariants:
- Never blocks the watcher's sampling: spans go to a bounded queue
  (MAX_QUEUED; beyond it they are counted, not kept); a thread of the watcher
  (the watcher is our own process) batches them every BATCH_S and POSTs.
- Each POST has a total deadline: a socket timeout, and the watcher's tick
  shuts the socket of a POST older than its deadline (a receiver trickling
  bytes cannot hold it). Redirects are never followed (a 3xx is a failure).
  A failed batch is retried after a backoff (doubling to MAX_BACKOFF_S) up to
  ATTEMPTS times, then counted as unsent.
- At its end the watcher gives the sender at most FLUSH_S more; what is left is
  counted. The log is written by the watcher's own thread only, as without
  export; what could not be sent is one ``tracer_error`` record
  (where ``live-export``) with the counts. Header values never reach the log
  or an error text; the URL is shown without user info or query.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from urllib.parse import unquote, urlsplit, urlunsplit

from ..common.otel import call_span, call_span_id, process_resource, process_span, process_span_id, trace_id
from ..common.procfs import same_process
from ..common.targets import rank_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

EXPORT_OTLP = "otlp"  # the one WP_AUTOTRACE_EXPORT value
DEFAULT_ENDPOINT = "http://localhost:4318"  # an OpenTelemetry Collector's OTLP/HTTP receiver
TRACES_PATH = "/v1/traces"
SERVICE_NAME = "wp-autotrace"
BATCH_S = 2.0  # a span waits at most this long for its batch
BATCH_SPANS = 512  # a batch is sent as soon as it holds this many
MAX_QUEUED = 4096  # spans waiting; more are counted unsent (bounded memory whatever the receiver does)
POST_DEADLINE_S = 5.0  # one POST, connect to last byte of the answer
ATTEMPTS = 3  # per batch
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
FLUSH_S = 2.0  # at the watcher's end: what the sender still gets
MAX_ANSWER = 64 * 1024  # bytes of a receiver's answer read (and ignored)
RETRY_STATUS = (429, 502, 503, 504)  # OTLP/HTTP: retryable answers
CALL_EVENTS = ("call", "blocked")
WHERE = "live-export"  # tracer_error's `where` for what was not sent


class ExportConfig:
    """Where and how to send, from the OpenTelemetry variables."""

    def __init__(self, url: str, headers: dict[str, str], resource: dict[str, str], deadline: float) -> None:
        self.url = url
        self.headers = headers
        self.resource = resource
        self.deadline = deadline

    @property
    def shown_url(self) -> str:
        """The URL without user info or query (either may hold a secret)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{parts.port}" if parts.port else ""
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _pairs(text: str) -> dict[str, str]:
    """`k=v,k2=v2` (W3C baggage style, values percent-encoded), as the OTEL_* lists are written."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[unquote(key.strip())] = unquote(value.strip())
    return out


def _headers(env: Any, name: str) -> dict[str, str]:
    """The headers the variable `name` lists; ValueError naming the variable, never its text (a header may hold a
    key), where one could not be sent: a control character (a line break: http.client refuses it at every POST,
    told then only as "ValueError"), or a ':' or white space in a header's name."""
    headers = _pairs(env.get(name) or "")
    for key, value in headers.items():
        if not (key + value).isprintable() or any(c == ":" or c.isspace() for c in key):
            raise ValueError(f"a header in {name} is not valid (a control character or line break, or a ':' or "
                             "space in its name; its text is not shown: it may hold a secret)")
    return headers


def config_from_env(env: Any) -> ExportConfig:
    """The export's settings; ValueError (its text shows no secret) when the endpoint is not http(s)."""
    url = (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
    if not url:  # a base URL: the signal's path goes after its own path, before its query
        base = urlsplit((env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT).strip())
        url = urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + TRACES_PATH, base.query, ""))
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the OTLP endpoint is not an http(s) URL")
    headers = _headers(env, "OTEL_EXPORTER_OTLP_HEADERS")
    headers.update(_headers(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
    headers["Content-Type"] = "application/json"
    resource = _pairs(env.get("OTEL_RESOURCE_ATTRIBUTES") or "")
    resource["service.name"] = (env.get("OTEL_SERVICE_NAME") or "").strip() or resource.get("service.name") \
        or SERVICE_NAME
    deadline = POST_DEADLINE_S
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    try:
        if raw and float(raw) > 0:
            deadline = min(deadline, float(raw) / 1000.0)
    except ValueError:
        pass
    return ExportConfig(url, headers, resource, deadline)


# -- spans from the log's records -------------------------------------------------------

class _Proc:
    """One traced process of the run, while its span is open: (host, pid, create_time), as the run model's."""

    __slots__ = ("key", "run", "pid", "ppid", "create_time", "start", "span_id", "parent_span", "info",
                 "open_calls", "left_calls", "gone", "exited_at", "execs")

    def __init__(self, run: str, rec: dict[str, Any], parent_span: str | None) -> None:
        self.key = (rec["host"], rec["pid"])
        self.run, self.pid, self.ppid = run, rec["pid"], rec.get("ppid")
        ct = rec.get("create_time")
        # Rounded as the model rounds it (fold/identities.py, Registry.set_create_time): one span id for both exports.
        self.create_time = round(ct, 2) if isinstance(ct, float) else None
        self.start = float(self.create_time if self.create_time is not None else rec["ts"])
        self.span_id = process_span_id(run, rec["host"], rec["pid"], self.start)
        self.parent_span = parent_span  # its parent's span when it started (its parent may end first)
        self.info = rec
        # call_id -> (parent span, its call record, its own span id)
        self.open_calls: dict[int, tuple[str, dict[str, Any], str]] = {}
        self.left_calls: list[tuple[str, dict[str, Any], str]] = []  # open when it exec'd: they never return
        self.gone: float | None = None  # when the watcher saw it end
        self.exited_at: float | None = None  # its process_exit record's time
        self.execs = 0  # its execs so far: a new program numbers its calls from 1 again (call_span_id's gen)

    def ended_at(self, otherwise: float) -> float:
        """The run model's end rule (fold/model.py Process.ended_at): the watcher's end, never before the
        process_exit record; otherwise when neither is known."""
        ends = [t for t in (self.gone, self.exited_at) if t is not None]
        return max(ends) if ends else otherwise

    def is_same(self, rec: dict[str, Any]) -> bool:
        """Whether a process_start for this (host, pid) is this process again (an exec), not a reused pid:
        the run model's rule (fold/identities.py, Registry.is_new_start): the same create_time (procfs.same_process),
        else, without one, a non-forked start with the same ppid."""
        ct = rec.get("create_time")
        if isinstance(ct, float) and self.create_time is not None:
            return same_process(self.create_time, ct)
        return not rec.get("forked") and rec.get("ppid") == self.ppid


class LiveSpans:
    """Folds the run's records, as the watcher reads them, into finished spans (common/otel.py's shapes,
    as analysis/export/otlp.py's)."""

    def __init__(self, run: str, host: str, resource: dict[str, str], out: Callable[[Any, Any, Any], None]) -> None:
        self.run, self.host = run, host
        self.resource = resource
        self.out = out  # (resource key, resource attributes, span)
        self.procs: dict[tuple[str, int], _Proc] = {}
        self.started_by: dict[tuple[str, int], str] = {}  # (host, sidecar pid) -> span of the call that made it

    def record(self, rec: dict[str, Any]) -> None:
        event = rec.get("event")
        if rec.get("host") != self.host or not isinstance(rec.get("pid"), int) or not isinstance(rec.get("ts"), float):
            return
        key = (rec["host"], rec["pid"])
        if event == "process_start":
            if rec.get("run") != self.run or rec.get("role") == "watcher":
                return
            self.started(key, rec)
            return
        p = self.procs.get(key)
        if p is None:
            return
        if event in CALL_EVENTS:
            self.call(p, rec)
        elif event == "return":
            self.returned(p, rec)
        elif event == "process_exit":
            # Its span waits for the watcher to see it go (the real end, after the interpreter's teardown).
            p.exited_at = rec["ts"] if p.exited_at is None else p.exited_at
            if p.gone is not None:
                del self.procs[key]
                self.end_process(p, p.ended_at(rec["ts"]), exited=True)

    def started(self, key: tuple[str, int], rec: dict[str, Any]) -> None:
        """A process_start: a new process (a reused pid's earlier span ends here), or an exec of an open one
        (one process, one span: its calls still open never return and end with it)."""
        old = self.procs.get(key)
        if old is not None and old.is_same(rec):
            old.info = rec  # its new program's argv, role, ... (the model keeps the latest)
            old.left_calls += old.open_calls.values()
            old.open_calls.clear()
            old.execs += 1
            return
        if old is not None:  # a reused pid: the earlier process ended (at its process_exit, if it wrote one)
            del self.procs[key]
            self.end_process(old, old.ended_at(rec["ts"]), exited=old.exited_at is not None)
        ppid = rec.get("ppid")
        parent = self.procs.get((key[0], ppid)) if isinstance(ppid, int) and ppid != key[1] else None
        self.procs[key] = _Proc(self.run, rec, parent.span_id if parent is not None else None)

    def call(self, p: _Proc, r: dict[str, Any]) -> None:
        cid = r.get("call_id")
        if not isinstance(cid, int):
            return
        pcid = r.get("parent_call")
        opened = p.open_calls.get(pcid) if isinstance(pcid, int) else None
        parent = opened[2] if opened is not None else p.span_id
        span = call_span_id(p.span_id, cid, p.execs)
        if r["event"] == "blocked":
            self.out(p.key, self.process_resource(p), self.span_of_call(p, span, parent, r, None))
        else:
            p.open_calls[cid] = (parent, r, span)

    @staticmethod
    def span_of_call(p: _Proc, span: str, parent: str, r: dict[str, Any], ret: dict[str, Any] | None,
                     end: float | None = None) -> dict[str, Any]:
        """The span of call record r, ended by its return record ret (else at end: unfinished)."""
        caller = r["caller"] if isinstance(r.get("caller"), dict) else None
        return call_span(trace_id(p.run), span, parent, str(r.get("target") or "?"),
                         r["ts"], ret["ts"] if ret is not None else end, caller, r.get("tag"), r.get("thread"),
                         r["event"] == "blocked", ret.get("error") if ret is not None else None,
                         unfinished=ret is None and end is not None)

    def returned(self, p: _Proc, r: dict[str, Any]) -> None:
        cid = r.get("call_id")
        opened = p.open_calls.pop(cid, None) if isinstance(cid, int) else None
        if opened is None or not isinstance(cid, int):
            return
        span = self.span_of_call(p, opened[2], opened[0], opened[1], r)
        if isinstance(r.get("sidecar_pid"), int):
            self.started_by.setdefault((r["host"], r["sidecar_pid"]), span["spanId"])
        self.out(p.key, self.process_resource(p), span)

    def gone(self, pid: int, when: float, create_time: float | None = None) -> None:
        """The watcher saw this process end: after its process_exit, its span ends now (ended_at); without one,
        at the next settle unless its process_exit comes. A create_time that is not the open process's names
        another process (a reused pid): ignored."""
        p = self.procs.get((self.host, pid))
        if p is None or p.gone is not None:
            return
        if create_time is None or p.create_time is None or same_process(p.create_time, create_time):
            p.gone = when
            if p.exited_at is not None:
                del self.procs[p.key]
                self.end_process(p, p.ended_at(when), exited=True)

    def settle(self, before: float) -> None:
        """End the spans of processes gone (no process_exit) before `before`: the log was read since."""
        for key, p in list(self.procs.items()):
            if p.gone is not None and p.gone < before:
                del self.procs[key]
                self.end_process(p, p.ended_at(p.gone), exited=p.exited_at is not None)

    def close(self, now: float) -> None:
        """The watcher's end: every span still open ends now (or when its process was seen gone, or at its
        process_exit when the watcher did not see it go)."""
        for key, p in list(self.procs.items()):
            del self.procs[key]
            self.end_process(p, p.ended_at(now), exited=p.exited_at is not None)

    def end_process(self, p: _Proc, end: float, exited: bool) -> None:
        resource = self.process_resource(p)
        open_calls = [*p.left_calls, *p.open_calls.values()]
        for parent, r, own in sorted(open_calls, key=lambda c: c[1]["ts"]):  # never returned: killed, running
            self.out(p.key, resource, self.span_of_call(p, own, parent, r, None, end))
        p.open_calls.clear()
        p.left_calls.clear()
        parent_proc = self.procs.get((p.key[0], p.ppid)) if isinstance(p.ppid, int) else None
        parent_span = self.started_by.get(p.key) or p.parent_span or (
            parent_proc.span_id if parent_proc is not None else None)
        span = process_span(trace_id(p.run), p.span_id, parent_span, p.info.get("role") or "child", p.pid, p.run,
                            rank_value(p.info.get("rank")), p.start, end, exited)
        self.out(p.key, resource, span)

    def process_resource(self, p: _Proc) -> list[dict[str, Any]]:
        argv = p.info.get("argv")
        return process_resource(self.resource, p.key[0], p.pid, p.ppid if isinstance(p.ppid, int) else None,
                                argv if isinstance(argv, list) else None, p.info.get("executable"))


# -- the sender ---------------------------------------------------------------------------

class Sender:
    """A bounded queue of spans and the watcher thread that POSTs them in batches."""

    def __init__(self, config: ExportConfig, post: Callable[[bytes], int] | None = None) -> None:
        self.config = config
        self.post = post or self.http_post
        self.queue: deque[tuple[Any, Any, Any]] = deque()
        self.cond = threading.Condition()
        self.sent = 0
        self.unsent = 0
        self.pending = 0  # spans of the batch being sent
        self.last_error = ""
        self.closing_at: float | None = None  # monotonic deadline once closing
        self.closed = False  # counts are final: a late answer changes nothing
        self.inflight: tuple[Any, float] | None = None  # (connection, monotonic start) of the POST under way
        self.thread = threading.Thread(target=self.loop, name="wp-autotrace-export", daemon=True)
        self.thread.start()

    def put(self, key: Any, resource: Any, span: Any) -> None:
        """Queue one span (the watcher's thread): never waits; beyond MAX_QUEUED it is counted unsent."""
        with self.cond:
            if len(self.queue) >= MAX_QUEUED or self.closed:
                self.unsent += 1
                return
            self.queue.append((key, resource, span))
            if len(self.queue) >= BATCH_SPANS:
                self.cond.notify()

    def watchdog(self) -> None:
        """From the watcher's tick: a POST past its deadline has its socket shut (its recv returns)."""
        inflight = self.inflight
        if inflight is not None and time.monotonic() - inflight[1] > self.config.deadline:
            _shut(inflight[0])

    def close(self, budget: float = FLUSH_S) -> None:
        """Send what is queued within budget seconds; then count what is left (the thread is a daemon)."""
        with self.cond:
            deadline = self.closing_at = time.monotonic() + budget
            self.cond.notify()
        while self.thread.is_alive() and time.monotonic() < deadline:
            self.watchdog()
            self.thread.join(min(0.05, max(0.0, deadline - time.monotonic())))
        inflight = self.inflight
        if inflight is not None:
            _shut(inflight[0])
        with self.cond:
            self.unsent += len(self.queue) + self.pending
            self.queue.clear()
            self.pending = 0
            self.closed = True

    def _take(self) -> list[tuple[Any, Any, Any]] | None:
        """The next batch: when BATCH_SPANS are queued, BATCH_S passed, or closing; None to stop."""
        with self.cond:
            if self.closing_at is None and len(self.queue) < BATCH_SPANS:
                self.cond.wait(BATCH_S)
            if self.closed or (not self.queue and self.closing_at is not None):
                return None
            batch = [self.queue.popleft() for _ in range(min(BATCH_SPANS, len(self.queue)))]
            self.pending = len(batch)
            return batch

    def _settle(self, n: int, delivered: bool) -> None:
        with self.cond:
            if self.closed:
                return
            if delivered:
                self.sent += n
            else:
                self.unsent += n
            self.pending = 0

    def loop(self) -> None:
        backoff = FIRST_BACKOFF_S
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            for attempt in range(1, ATTEMPTS + 1):
                ok, retry = self.send(batch)
                if ok:
                    backoff = FIRST_BACKOFF_S
                    break
                if not retry or attempt == ATTEMPTS or not self._back_off(backoff):
                    break
                backoff = min(backoff * 2, MAX_BACKOFF_S)
            self._settle(len(batch), ok)

    def _back_off(self, seconds: float) -> bool:
        """Wait before a retry; False when closing (no time for retries then)."""
        with self.cond:
            if self.closing_at is None:
                self.cond.wait(seconds)
            return self.closing_at is None

    def send(self, batch: list[tuple[Any, Any, Any]]) -> tuple[bool, bool]:
        """POST one batch: (delivered, worth retrying)."""
        body = json.dumps(request_of(batch), separators=(",", ":")).encode()
        try:
            status = self.post(body)
        except Exception as exc:  # noqa: BLE001 (any failure of the receiver is only counted)
            self.last_error = f"{self.config.shown_url}: {type(exc).__name__}"
            return False, True
        if 200 <= status < 300:
            return True, False
        self.last_error = f"{self.config.shown_url} answered HTTP {status}" + (
            " (redirects are not followed)" if 300 <= status < 400 else "")
        return False, status in RETRY_STATUS

    def http_post(self, body: bytes) -> int:
        """One POST, never following a redirect; the status. Bounded by the deadline (see watchdog)."""
        import http.client

        parts = urlsplit(self.config.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname or "", parts.port, timeout=self.config.deadline)
        self.inflight = (conn, time.monotonic())
        try:
            path = urlunsplit(("", "", parts.path or "/", parts.query, ""))
            conn.request("POST", path, body=body, headers=self.config.headers)
            answer = conn.getresponse()
            answer.read(MAX_ANSWER)
            return int(answer.status)
        finally:
            self.inflight = None
            conn.close()


def _shut(conn: Any) -> None:
    import socket

    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def request_of(batch: list[tuple[Any, Any, Any]]) -> dict[str, Any]:
    """An ExportTraceServiceRequest: the batch's spans grouped by their process's resource."""
    by_key: dict[Any, dict[str, Any]] = {}
    for key, resource, span in batch:
        entry = by_key.get(key)
        if entry is None:
            entry = by_key[key] = {"resource": {"attributes": resource},
                                   "scopeSpans": [{"scope": {"name": SERVICE_NAME}, "spans": []}]}
        entry["scopeSpans"][0]["spans"].append(span)
    return {"resourceSpans": list(by_key.values())}


# -- what the watcher holds -----------------------------------------------------------------

class LiveExport:
    """The watcher's live export: records in, spans out, counts at the end."""

    def __init__(self, run: str, host: str, config: ExportConfig, post: Callable[[bytes], int] | None = None) -> None:
        self.sender = Sender(config, post)
        self.spans = LiveSpans(run, host, config.resource, self.sender.put)
        self.last_tick = time.time()

    def record(self, rec: dict[str, Any]) -> None:
        self.spans.record(rec)

    def tick(self, ended: list[dict[str, Any]], now: float) -> None:
        """After a watcher tick: end the spans of processes gone since the tick before, note the new ones."""
        self.spans.settle(self.last_tick)
        for e in ended:
            self.spans.gone(e["pid"], e.get("end", now), e.get("create_time"))
        self.last_tick = now
        self.sender.watchdog()

    def close(self, budget: float = FLUSH_S) -> dict[str, Any] | None:
        """Flush within budget; the tracer_error fields when something was not sent, else None."""
        self.spans.close(time.time())
        self.sender.close(budget)
        s = self.sender
        if not s.unsent:
            return None
        return {"where": WHERE, "error": f"{s.unsent} span(s) not sent to {s.config.shown_url}, {s.sent} sent"
                                         + (f"; last failure: {s.last_error}" if s.last_error else "")}


def start(run: str, host: str, word: str, env: Any = None) -> tuple[LiveExport | None, str]:
    """The live export the watcher was asked for (WP_AUTOTRACE_EXPORT's word), or None and why not."""
    word = word.strip().lower()
    if not word:
        return None, ""
    if word != EXPORT_OTLP:
        return None, f"WP_AUTOTRACE_EXPORT={word[:20]!r} is not known (only {EXPORT_OTLP}); nothing is exported"
    env = os.environ if env is None else env
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None, "OTEL_SDK_DISABLED=true: nothing is exported"
    try:
        config = config_from_env(env)
    except ValueError as exc:
        return None, f"{exc}; nothing is exported"
    return LiveExport(run, host, config), ""
