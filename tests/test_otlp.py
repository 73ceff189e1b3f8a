"""export --format otlp: parsed by the official opentelemetry-proto package; --endpoint POSTs it."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import clean_env, run_python

pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
json_format = pytest.importorskip("google.protobuf.json_format")

RUN = "99b70b9c407f"
SUBPROC_INIT = "torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__"


def _r(event: str, ts: float, pid: int, ppid: int, role: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": event, "ts": ts, "pid": pid, "ppid": ppid, "host": "h1", "role": role, "seq": 0, **fields}


def _caller(line: int) -> dict[str, Any]:
    return {"file": "/site/backend/__init__.py", "line": line, "func": "<module>"}


def write_log(path: Path) -> Path:
    """Main 100 calls warm_pool -> process_pool -> SubprocPool.__init__ (starts sidecar 200, which forks
    worker 201); the sidecar's own shutdown call never returns."""
    start = {"run": RUN, "root_pid": 100, "forked": False, "executable": "/usr/bin/python3"}
    records = [
        _r("process_start", 10.0, 100, 1, "main", argv=["python", "train.py"], rank={"RANK": "3"}, **start),
        _r("call", 11.0, 100, 1, "main", target="torch._inductor.async_compile:AsyncCompile.warm_pool", call_id=1,
           caller=_caller(3), thread="MainThread"),
        _r("call", 11.1, 100, 1, "main", target="torch._inductor.async_compile:AsyncCompile.process_pool", call_id=2,
           caller=_caller(3), parent_call=1),
        _r("call", 11.2, 100, 1, "main", target=SUBPROC_INIT, tag="pool-create", call_id=3, caller=_caller(3),
           parent_call=2),
        _r("process_start", 11.5, 200, 100, "compile-sidecar", argv=["python", "__main__.py"],
           **{**start, "forked": False}),
        _r("process_start", 11.8, 201, 200, "compile-worker", argv=["python", "__main__.py"],
           **{**start, "forked": True}),
        _r("return", 12.0, 100, 1, "main", call_id=3, duration_s=0.8, sidecar_pid=200),
        _r("return", 12.0, 100, 1, "main", call_id=2, duration_s=0.9),
        _r("return", 12.1, 100, 1, "main", call_id=1, duration_s=1.1),
        _r("call", 13.0, 200, 100, "compile-sidecar", target="torch._inductor.async_compile:shutdown_compile_workers",
           call_id=1, caller=None),
        _r("process_exit", 14.0, 100, 1, "main", how="exit", code=0),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def parse(text: str) -> Any:
    """OTLP/JSON -> ExportTraceServiceRequest. OTLP/JSON ids are hex, protobuf's JSON mapping wants base64."""
    data = json.loads(text)
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(data), pb.ExportTraceServiceRequest())


def attrs(kvs: Any) -> dict[str, Any]:
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


def test_otlp_file_parses_with_parent_links(tmp_path: Path) -> None:
    """One trace for the run; the sidecar under the call that started it, the worker under the sidecar,
    calls under their process or their enclosing call; resource and code attributes present."""
    log = write_log(tmp_path / "run.jsonl")
    out = tmp_path / "spans.json"
    res = run_python(["-m", "wp_autotrace", "export", str(log), "--format", "otlp", "-o", str(out)], clean_env())
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert '"startTimeUnixNano": "' in text  # times are strings of nanoseconds
    req = parse(text)
    spans = {}
    resources = {}
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                spans[span.name] = span
                resources[span.name] = attrs(rs.resource.attributes)
    assert {s.trace_id for s in spans.values()} == {bytes.fromhex(RUN.zfill(32))}
    assert all(len(s.span_id) == 8 for s in spans.values())
    main, sidecar, worker = spans["main 100"], spans["compile-sidecar 200"], spans["compile-worker 201"]
    assert main.parent_span_id == b""
    assert spans["AsyncCompile.warm_pool"].parent_span_id == main.span_id
    assert spans["AsyncCompile.process_pool"].parent_span_id == spans["AsyncCompile.warm_pool"].span_id
    assert spans["SubprocPool.__init__"].parent_span_id == spans["AsyncCompile.process_pool"].span_id
    assert sidecar.parent_span_id == spans["SubprocPool.__init__"].span_id
    assert worker.parent_span_id == sidecar.span_id
    assert spans["shutdown_compile_workers"].parent_span_id == sidecar.span_id
    assert resources["main 100"] == {"service.name": "wp-autotrace", "host.name": "h1", "process.pid": 100,
                                     "process.parent_pid": 1, "process.command_line": "python train.py",
                                     "process.executable.path": "/usr/bin/python3"}
    assert attrs(main.attributes)["wp.role"] == "main" and attrs(main.attributes)["wp.rank"] == "3"
    assert attrs(main.attributes)["wp.run"] == RUN
    code = attrs(spans["AsyncCompile.warm_pool"].attributes)
    assert (code["code.filepath"], code["code.lineno"], code["code.function"]) == (
        "/site/backend/__init__.py", 3, "<module>")
    warm = spans["AsyncCompile.warm_pool"]
    assert warm.end_time_unix_nano - warm.start_time_unix_nano == pytest.approx(1.1e9, rel=1e-6)
    unfinished = spans["shutdown_compile_workers"]
    assert attrs(unfinished.attributes)["wp.unfinished"] == "true"
    assert unfinished.end_time_unix_nano >= unfinished.start_time_unix_nano


def test_otlp_to_stdout(tmp_path: Path) -> None:
    """-o - writes the same JSON to stdout."""
    log = write_log(tmp_path / "run.jsonl")
    res = run_python(["-m", "wp_autotrace", "export", str(log), "--format", "otlp", "-o", "-"], clean_env(),
                     cwd=tmp_path)
    assert res.returncode == 0 and len(parse(res.stdout).resource_spans) == 3
    assert not (tmp_path / "spans.json").exists()


class _Receiver(http.server.BaseHTTPRequestHandler):
    got: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    got: list[tuple[str, str, bytes]] = []
    _Receiver.got = got
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_endpoint_receives_the_post(tmp_path: Path, receiver: tuple[str, list[tuple[str, str, bytes]]]) -> None:
    """--endpoint POSTs OTLP/JSON to <url>/v1/traces; no file is written unless -o is given."""
    url, got = receiver
    log = write_log(tmp_path / "run.jsonl")
    res = run_python(["-m", "wp_autotrace", "export", str(log), "--format", "otlp", "--endpoint", url], clean_env(),
                     cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"sent 7 spans to {url}/v1/traces" in res.stderr
    ((path, ctype, body),) = got
    assert path == "/v1/traces" and ctype == "application/json"
    assert len(parse(body.decode()).resource_spans) == 3
    assert not (tmp_path / "spans.json").exists()


def test_unreachable_endpoint_is_a_clear_error(tmp_path: Path) -> None:
    """Nothing listening: one line saying so, exit 69."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = write_log(tmp_path / "run.jsonl")
    res = run_python(["-m", "wp_autotrace", "export", str(log), "--format", "otlp", "--endpoint",
                      f"http://127.0.0.1:{port}/otlp/"], clean_env(), cwd=tmp_path)
    assert res.returncode == 69
    assert f"spans not sent: cannot reach http://127.0.0.1:{port}/otlp/v1/traces" in res.stderr
    assert "Traceback" not in res.stderr


def test_two_container_runs_with_pid_1_keep_their_own_spans(tmp_path: Path) -> None:
    """Two runs in one log whose main is pid 1 (containers): run A's calls stay under run A's process span,
    once, in run A's trace; run B's process has none (it was run A's, twice, under run B's trace)."""
    from wp_autotrace.analysis.export.otlp import to_otlp
    from wp_autotrace.analysis.read.logread import read_logs

    records = []
    for run, t0, warm in (("a" * 12, 10.0, True), ("b" * 12, 100.0, False)):
        start = {"run": run, "root_pid": 1, "forked": False, "create_time": t0}
        records.append(_r("process_start", t0, 1, 0, "main", argv=["python", f"{run[0]}.py"], **start))
        if warm:
            records += [
                _r("call", t0 + 1, 1, 0, "main", target="torch._inductor.async_compile:AsyncCompile.warm_pool",
                   tag="warm-pool", call_id=1, caller=_caller(3)),
                _r("call", t0 + 1.1, 1, 0, "main", target=SUBPROC_INIT, tag="pool-create", call_id=2,
                   parent_call=1, caller=_caller(3)),
                _r("return", t0 + 1.2, 1, 0, "main", call_id=2, duration_s=0.1, sidecar_pid=20),
                _r("return", t0 + 1.3, 1, 0, "main", call_id=1, duration_s=0.3),
            ]
        records.append(_r("process_exit", t0 + 2, 1, 0, "main", how="exit", code=0))
    log = tmp_path / "two.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    request = to_otlp(read_logs([str(log)]))
    by_run = {}
    for rs in request["resourceSpans"]:
        spans = rs["scopeSpans"][0]["spans"]
        process, calls = spans[0], spans[1:]
        run = next(a["value"]["stringValue"] for a in process["attributes"] if a["key"] == "wp.run")
        by_run[run] = (process, calls)
    a_proc, a_calls = by_run["a" * 12]
    b_proc, b_calls = by_run["b" * 12]
    assert [c["name"] for c in a_calls] == ["AsyncCompile.warm_pool", "SubprocPool.__init__"]
    assert {c["traceId"] for c in a_calls} == {a_proc["traceId"]} != {b_proc["traceId"]}
    assert b_calls == []
    all_ids = [s["spanId"] for rs in request["resourceSpans"] for s in rs["scopeSpans"][0]["spans"]]
    assert len(all_ids) == len(set(all_ids))
