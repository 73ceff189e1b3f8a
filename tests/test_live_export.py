"""Live export (watcher/export.py): the watcher streams spans over OTLP/HTTP JSON while the job runs.

A local receiver (127.0.0.1, its own thread, shut down by the test) validates
each request with the official opentelemetry-proto package. A receiver that is
down, slow, answering 500 or redirecting changes nothing for the job (exit
code, stdout, stderr) and nothing in the log but the unsent count.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.watcher import export as X

from .conftest import clean_env, needs_torch, wait_for_watcher, wait_until
from .test_otlp import parse

JOB_TIMEOUT_S = 60
WATCHER_WAIT_S = 30
SLOW_S = 20.0  # the slow receiver's wait before it answers: far past the POST deadline
SECRET = "tok-3f9a1c"  # a header value: never in the log, argv or an error text
# The job: a traced child that ends (its span can go out while the job runs), then, when asked, wait
# until the receiver has seen that span (the `seen` file), bounded; output on stdout and stderr; exit 3.
JOB = """
import os, subprocess, sys, time
subprocess.run([sys.executable, "-c", "print('child')"], check=True)
seen = sys.argv[1]
deadline = time.monotonic() + 30
while seen != "-" and not os.path.exists(seen) and time.monotonic() < deadline:
    time.sleep(0.05)
print("done", os.path.exists(seen))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that answers as `mode` says; requests kept, parsed."""

    def __init__(self, mode: str, seen: Path) -> None:
        self.mode, self.seen = mode, seen
        self.requests: list[tuple[float, Any, dict[str, str]]] = []
        self.errors: list[str] = []
        self.redirected = 0
        self.stop = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                receiver.handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        if h.path != "/v1/traces":
            self.redirected += 1
        elif self.mode == "ok":
            try:
                req = parse(body.decode())
            except Exception as exc:  # noqa: BLE001 (kept for the assertion)
                self.errors.append(repr(exc))
                req = None
            self.requests.append((time.time(), req, dict(h.headers)))
            if req is not None and any(s.name.startswith("child ") for rs in req.resource_spans
                                       for ss in rs.scope_spans for s in ss.spans):
                self.seen.touch()
        elif self.mode == "slow":
            self.stop.wait(SLOW_S)
        code = {"ok": 200, "500": 500, "redirect": 307, "slow": 200}[self.mode]
        h.send_response(code)
        if code == 307:
            h.send_header("Location", f"http://127.0.0.1:{self.port}/elsewhere")
        h.send_header("Content-Length", "0")
        h.end_headers()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(tmp_path: Path, name: str, port: int | None, seen: str = "-") -> tuple[subprocess.CompletedProcess[str],
                                                                                      list[dict[str, Any]]]:
    log = tmp_path / f"{name}.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    for k in [k for k in env if k.startswith("OTEL_")]:
        del env[k]
    if port is not None:
        env.update(WP_AUTOTRACE_EXPORT="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://user:pw@127.0.0.1:{port}",
                   OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer%20{SECRET}", OTEL_SERVICE_NAME="trainer",
                   OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test,team=ml")
    proc = subprocess.run([sys.executable, "-c", JOB, seen], env=env, capture_output=True, text=True,
                          timeout=JOB_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return proc, wait_for_watcher(log, timeout=WATCHER_WAIT_S)


def _spans(req: Any) -> list[tuple[Any, Any]]:
    return [(rs, s) for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]


def test_live_spans_reach_a_receiver_before_the_job_ends_with_the_export_ids(tmp_path: Path) -> None:
    rx = Receiver("ok", tmp_path / "seen")
    try:
        proc, recs = run_job(tmp_path, "live", rx.port, seen=str(tmp_path / "seen"))
        wait_until(lambda: any(s.name.startswith("main ") for _, r, _ in rx.requests if r for _, s in _spans(r)),
                   WATCHER_WAIT_S, what="the main process's span at the receiver")
    finally:
        rx.close()
    assert proc.returncode == 3 and proc.stdout == "child\ndone True\n" and proc.stderr == "to stderr\n"
    assert not rx.errors and rx.requests
    root_exit = next(r["ts"] for r in recs if r["event"] == "process_exit" and r["role"] == "main")
    first = rx.requests[0]
    assert first[0] < root_exit, "no span reached the receiver while the job ran"
    assert first[2]["authorization"] == f"Bearer {SECRET}" and first[2]["Content-Type"] == "application/json"
    live = {s.span_id.hex(): (s, rs) for _, r, _ in rx.requests for rs, s in _spans(r)}
    out = tmp_path / "export.json"
    subprocess.run([sys.executable, "-m", "wp_autotrace", "export", "--format", "otlp", str(tmp_path / "live.jsonl"),
                    "-o", str(out)], check=True, capture_output=True, timeout=60)
    exported = {s.span_id.hex(): s for rs, s in _spans(parse(out.read_text()))}
    assert set(live) == set(exported)  # no torch here: process spans only, the same ids
    for sid, (s, rs) in live.items():
        assert s.trace_id == exported[sid].trace_id and s.parent_span_id == exported[sid].parent_span_id
        attrs = {kv.key: kv.value.string_value or kv.value.int_value for kv in rs.resource.attributes}
        assert attrs["service.name"] == "trainer" and attrs["team"] == "ml" and attrs["host.name"]
    assert not [r for r in recs if r["event"] == "tracer_error"]
    assert recs[-1]["event"] == "watcher_exit" and recs[-1]["unsent"] == 0 and recs[-1]["exported"] == len(live)
    text = json.dumps(recs)
    assert SECRET not in text and "user:pw" not in text


# Records the watcher writes only where its listing caught a process alive: a cgroup's limits are read as a
# process joins (watcher/cgroups.py), and this job's main can end before the watcher's first listing.
SAMPLED = {"memcg", "pidcg", "cpucg"}


def _shape(recs: list[dict[str, Any]]) -> tuple[set[tuple[str, str]], Counter[str]]:
    """The log's kinds of record (event, writer role), the export's own error and the records of what a listing
    caught (SAMPLED) left out, and how many of those that do not depend on sampling times (tree records do:
    heartbeats)."""
    kept = [r for r in recs if not (r["event"] == "tracer_error" and r.get("where") == X.WHERE)
            and r["event"] not in SAMPLED]
    return ({(r["event"], r["role"]) for r in kept},
            Counter(r["event"] for r in kept if r["event"] != "tree"))


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["down", "slow", "500", "redirect"])
def test_a_bad_receiver_changes_nothing_for_the_job_or_the_log(tmp_path: Path, mode: str) -> None:
    base, base_recs = run_job(tmp_path, "base", None)
    rx = None if mode == "down" else Receiver(mode, tmp_path / "seen")
    try:
        port = _closed_port() if rx is None else rx.port
        proc, recs = run_job(tmp_path, mode, port)
    finally:
        if rx is not None:
            rx.close()
    assert (proc.returncode, proc.stdout, proc.stderr) == (base.returncode, base.stdout, base.stderr)
    assert _shape(recs) == _shape(base_recs)
    (err,) = [r for r in recs if r["event"] == "tracer_error"]
    assert err["where"] == X.WHERE and " span(s) not sent to http://127.0.0.1:" in err["error"]
    assert SECRET not in json.dumps(recs) and "user:pw" not in err["error"]
    assert recs[-1]["event"] == "watcher_exit" and recs[-1]["reason"] == base_recs[-1]["reason"]
    assert recs[-1]["unsent"] >= 2 and recs[-1]["exported"] == 0 and "unsent" not in base_recs[-1]
    root_exit = next(r["ts"] for r in recs if r["event"] == "process_exit" and r["role"] == "main")
    leftover = next(r["ts"] for r in recs if r["event"] == "leftover")
    assert leftover - root_exit < 2.0, "the receiver delayed the watcher's sampling"
    # On the records' clocks, not the test's: the watcher ended within its flush budget of the root's end,
    # never after the slow receiver's SLOW_S (it was `took < SLOW_S` over the whole job, on the test's clock).
    assert recs[-1]["ts"] - root_exit < X.FLUSH_S + 3.0
    if rx is not None and mode == "redirect":
        assert rx.redirected == 0


def test_config_from_the_standard_variables() -> None:
    c = X.config_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:p@collector:4318/base/?k=s",
                           "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%3Db, x = y ,bad",
                           "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,k8s.pod.name=p%201",
                           "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"})
    assert c.url == "https://u:p@collector:4318/base/v1/traces?k=s"
    assert c.shown_url.startswith("https://collector:4318/") and "u:p" not in c.shown_url and "k=s" not in c.shown_url
    assert c.headers["api-key"] == "a=b" and c.headers["x"] == "y" and "bad" not in c.headers
    assert c.resource == {"service.name": "from-attrs", "k8s.pod.name": "p 1"} and c.deadline == 2.5
    c = X.config_from_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:9/custom", "OTEL_SERVICE_NAME": "svc",
                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:1"})
    assert c.url == "http://h:9/custom" and c.resource["service.name"] == "svc" and c.deadline == X.POST_DEADLINE_S
    assert X.config_from_env({}).url == "http://localhost:4318/v1/traces"
    with pytest.raises(ValueError, match="not an http"):
        X.config_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://h:4317"})
    # a header no POST could send is told at the start, naming its variable, never its text (it may be a key)
    for name, text in (("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret%0D%0AX-Evil: 1"),
                       ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "bad%20name=s3cret"),
                       ("OTEL_EXPORTER_OTLP_HEADERS", "k=s3cret%00")):
        exporter, why = X.start("r", "h", "otlp", {name: text})
        assert exporter is None and f"a header in {name} is not valid" in why and "s3cret" not in why, why
    assert X.config_from_env({"OTEL_EXPORTER_OTLP_HEADERS": "k=a%20b"}).headers["k"] == "a b"  # a space in a value
    assert X.start("r", "h", "zipkin", {})[0] is None and "not known" in X.start("r", "h", "zipkin", {})[1]
    off = X.start("r", "h", "otlp", {"OTEL_SDK_DISABLED": "true"})
    assert off == (None, "OTEL_SDK_DISABLED=true: nothing is exported")


STUCK_S = 20  # how long the stuck receiver holds a POST: 100 times close's budget


def test_queue_is_bounded_and_unsent_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A receiver that never answers in time: the queue stays bounded, and every span is counted."""
    monkeypatch.setattr(X, "MAX_QUEUED", 10)
    release, entered, returned = threading.Event(), threading.Event(), threading.Event()

    def stuck(body: bytes) -> int:
        entered.set()
        try:
            release.wait(STUCK_S)
            raise OSError("timed out")
        finally:
            returned.set()

    s = X.Sender(X.config_from_env({}), post=stuck)
    for i in range(25):
        s.put(("h", 1), [], {"spanId": str(i)})
    assert len(s.queue) <= 10
    s.close(budget=0.2)
    # close kept its budget: it returned while a POST was still stuck (a close that waited for it would take
    # STUCK_S and find it returned). An order of events, not a duration on the test's clock.
    assert entered.is_set() and not returned.is_set()
    release.set()
    assert s.sent == 0 and s.unsent == 25


POOL_JOB = """
from torch._inductor.async_compile import AsyncCompile
AsyncCompile.warm_pool()
print("ok")
"""


@needs_torch
@pytest.mark.torch
def test_call_and_sidecar_spans_live_match_the_export(tmp_path: Path) -> None:
    """A real pool (warm_pool -> SubprocPool -> sidecar, torch's shutdown at exit): every span streamed
    live has the export's trace id, span id and parent, the sidecar under SubprocPool.__init__."""
    rx = Receiver("ok", tmp_path / "seen")
    log = tmp_path / "pool.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_EXPORT="otlp",
                    OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{rx.port}", TORCHINDUCTOR_COMPILE_THREADS="2")
    try:
        proc = subprocess.run([sys.executable, "-c", POOL_JOB], env=env, capture_output=True, text=True,
                              timeout=JOB_TIMEOUT_S, stdin=subprocess.DEVNULL)
        recs = wait_for_watcher(log, timeout=WATCHER_WAIT_S)
    finally:
        rx.close()
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    assert recs[-1]["event"] == "watcher_exit" and recs[-1]["unsent"] == 0 and not rx.errors
    live = {(s.trace_id, s.span_id, s.parent_span_id, s.name) for _, r, _ in rx.requests for _, s in _spans(r)}
    out = tmp_path / "export.json"
    subprocess.run([sys.executable, "-m", "wp_autotrace", "export", "--format", "otlp", str(log), "-o", str(out)],
                   check=True, capture_output=True, timeout=60)
    exported = {(s.trace_id, s.span_id, s.parent_span_id, s.name) for _, s in _spans(parse(out.read_text()))}
    assert live == exported
    names = {n for *_, n in live}
    assert {"AsyncCompile.warm_pool", "SubprocPool.__init__"} <= names
    init = next(sid for _, sid, _, n in live if n == "SubprocPool.__init__")
    assert any(n.startswith("compile-sidecar ") and parent == init for _, _, parent, n in live)
