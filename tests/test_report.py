"""The report and export on synthetic logs, and on bad input (no torch needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wp_autotrace.analysis.export.chrome import to_chrome_trace
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import NoUsableLog, read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.cli.main import main

from .conftest import ROOT
from .logs import PLUGIN, T0, LogWriter, check_chrome_trace, seed_log


def test_seed_answers(tmp_path: Path) -> None:
    """Report answers the seed scenario's questions from a synthetic log."""
    rep = analyze(read_logs([str(seed_log().write(tmp_path / "a.jsonl"))]))
    assert rep["warm_pool_pids"] == [100, 200, 300]
    assert rep["distinct_warm_pool_pids"] == 3
    assert rep["max_sidecar_depth"] == 3
    assert rep["leftover_pids"] == [300, 400]
    assert 300 in rep["reparented_pids"]
    assert rep["max_concurrent_processes"] == 4
    callers = {c["pid"]: c for c in rep["warm_pool_callers"]}
    assert callers[300]["depth"] == 2 and callers[300]["ppid"] == 200 and callers[300]["calls"] == 1
    assert callers[100]["caller"]["file"] == PLUGIN["file"]
    assert [p["sidecar_pid"] for p in rep["pools"]] == [200, 300, 400]
    assert rep["pools"][1]["creator_role"] == "compile-sidecar"
    findings = " ".join(f["text"] for f in rep["findings"])
    assert "Nested compile pools" in findings and "TORCH_WARM_POOL=0" in findings
    assert "2 process(es) outlived the main process" in findings
    assert "never served their pool (pids 200)" in findings  # sidecar 200 never served
    assert {f["kind"] for f in rep["findings"]} >= {"nested-pools", "warm-pool-bypass", "leftovers",
                                                   "sidecar-never-served"}
    text = render_text(rep, {})
    assert "== warm_pool callers: 3 distinct PID(s) [100, 200, 300]" in text
    assert "/site/plugin/_inductor/__init__.py:5 (<module>)" in text


def test_logs_merge_by_host_and_pid(tmp_path: Path) -> None:
    """Logs of several hosts merge by (host, pid)."""
    a = seed_log().write(tmp_path / "a.jsonl")
    other = seed_log()
    for r in other.lines:
        r["host"] = "h2"
    b = other.write(tmp_path / "b.jsonl")
    rep = analyze(read_logs([str(a), str(b)]))
    assert rep["distinct_warm_pool_pids"] == 6
    assert rep["warm_pool_pids"] == [100, 200, 300]
    assert sorted({h for r in rep["runs"] for h in r["hosts"]}) == ["h1", "h2"]


def test_bad_lines_skipped_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Garbage and torn lines are skipped and counted."""
    path = seed_log().write(tmp_path / "a.jsonl")
    with open(path, "ab") as f:
        f.write(b"garbage\n\xff\xfe not utf8\n")
        f.write(b'{"v": 99, "event": "call", "ts": 1, "pid": 1}\n')
        f.write(b'{"v": 1, "event": "mystery", "ts": 1, "pid": 1}\n')
        f.write(b'[1, 2]\n{"v": 1, "event": "call", "ts": 1, "pid": 5, "call_id": "x", "caller": 7, "env": 3}\n')
        f.write(b'{"v": 1, "event": "tree", "ts": 1, "pid": 1, "procs": "nope"}\n')
        f.write(b'{"v": 1, "event": "process_st')  # truncated last line
    assert main(["report", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "== warm_pool callers: 3 distinct" in out
    assert ("skipped 6 line(s): 1 newer schema (v99), 2 not JSON, 1 not a record, 1 truncated last line, "
            "1 unknown event") in out


@pytest.mark.parametrize("content", [None, b"", b"\n\n", b"not json at all\n", b'{"v": 1}\n'])
def test_nothing_usable_is_a_clear_error(content: bytes | None, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Missing, empty or recordless log: one clear error, non-zero exit, no traceback."""
    path = tmp_path / "log.jsonl"
    if content is not None:
        path.write_bytes(content)
    assert main(["report", str(path)]) == 2
    assert main(["export", str(path), "-o", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wp-autotrace: nothing to report:") and "Traceback" not in err


def test_the_peak_with_no_watcher_sample_is_not_known(tmp_path: Path) -> None:
    """No watcher ran (no tree record): nothing counted the processes at once, so the peak is not known (null;
    "unknown" in the Timeline), never 0, though three processes' own start and exit records overlap."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "main.py"], forked=False, run="r1", root_pid=100)
    for pid in (101, 102):
        w.add(0.5, pid, 100, "child", "process_start", argv=["python", "main.py"], forked=True, run="r1",
              root_pid=100)
        w.add(0.9, pid, 100, "child", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(1.3, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    rep = analyze(read_logs([str(w.write(tmp_path / "log.jsonl"))]))
    assert rep["processes_started"] == 3 and rep["max_concurrent_processes"] is None, rep["max_concurrent_processes"]
    assert "peak concurrent unknown (no watcher sample)" in render_text(rep, {})


# Every documented top-level --json key (docs/report.md) and its type.
JSON_KEYS: dict[str, Any] = {
    "runs": list, "all_runs": int, "warm_pool_pids": list, "distinct_warm_pool_pids": int,
    "warm_pool_callers": list, "pools": list, "processes": list, "max_concurrent_processes": (int, type(None)),
    "processes_started": int, "processes_exited": int, "max_sidecar_depth": int, "leftover_pids": list,
    "leftover_count": (int, type(None)), "leftover_unlisted": int, "leftover_rss_bytes": (int, type(None)),
    "leftover_checked": bool, "reparented_pids": list,
    "no_exit_pids": list, "blocked": list, "tracer_errors": list, "findings": list, "input": dict,
    "ranks": list, "costs": dict, "running_pids": list, "answer": str, "jobs": list, "verdict_pending": bool,
    "possible": list, "t0": float, "pools_across": (dict, type(None)), "compiling": list,
    "no_pool_why": (dict, type(None)), "untraced_pools": list,
}
RUN_KEYS = {"id": str, "command": str, "root_pid": int, "hosts": list, "start": float, "end": float, "state": str,
            "memory_at_once": list}
FINDING_KEYS = {"kind": str, "severity": str, "text": str, "pids": list, "evidence": list, "advice": str,
                "cost": dict}


def test_json_has_stable_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json output has every documented key, with its type; docs/report.md lists the same keys."""
    path = seed_log().write(tmp_path / "a.jsonl")
    assert main(["report", "--json", str(path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep) == set(JSON_KEYS)
    for key, kind in JSON_KEYS.items():
        assert isinstance(rep[key], kind), key
    for r in rep["runs"]:
        for key, kind in RUN_KEYS.items():
            assert isinstance(r[key], kind), key
    for f in rep["findings"]:
        assert {k: type(f[k]) for k in FINDING_KEYS} == FINDING_KEYS
    assert all(isinstance(p["run"], str) for p in rep["processes"] + rep["pools"] + rep["warm_pool_callers"])
    root = Path(__file__).resolve().parent.parent
    # docs/report.md, or the docs/ page of the feature (docs/jobs.md: `jobs`)
    docs = "".join(p.read_text() for p in sorted((root / "docs").glob("*.md")))
    for key in JSON_KEYS:
        assert f"`{key}`" in docs, f"no page under docs/ documents --json key {key}"


def test_export_chrome(tmp_path: Path) -> None:
    """The Chrome trace export is well-formed."""
    path = seed_log().write(tmp_path / "a.jsonl")
    out = tmp_path / "trace.json"
    assert main(["export", str(path), "--format", "chrome", "-o", str(out)]) == 0
    trace = json.loads(out.read_text())
    check_chrome_trace(trace)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {"main 100", "compile-sidecar 200", "compile-sidecar 300"} <= names
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {"AsyncCompile.warm_pool", "SubprocPool.__init__"} <= {e["name"] for e in slices}
    assert any(e["ph"] == "C" and e["args"].get("count") == 4 for e in trace["traceEvents"])


def test_export_loads_in_a_real_trace_reader(tmp_path: Path) -> None:
    """The export loads in a real trace reader."""
    tp = pytest.importorskip("perfetto.trace_processor", reason="perfetto's trace processor is not installed")
    path = seed_log().write(tmp_path / "a.jsonl")
    out = tmp_path / "trace.json"
    assert main(["export", str(path), "-o", str(out)]) == 0
    try:
        processor = tp.TraceProcessor(trace=str(out))
    except Exception as exc:  # its binary is downloaded on first use; offline there is none
        pytest.skip(f"trace processor unavailable: {exc}")
    rows = list(processor.query("select count(*) as n from slice"))
    assert rows[0].n >= 6


line_strategy = st.one_of(
    st.binary(max_size=80),
    st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(
        st.sampled_from(["v", "event", "ts", "pid", "ppid", "host", "role", "call_id", "target", "procs", "caller",
                         "sidecar_pid", "parent_call", "env", "settings", "argv", "forked", "pids"]),
        st.one_of(st.integers(-3, 3), st.sampled_from(["call", "return", "tree", "process_start", "process_exit",
                                                        "leftover", "config", "blocked", "x:y.warm_pool"]),
                  st.floats(allow_nan=False), st.none(), st.lists(st.integers(0, 5), max_size=3),
                  st.dictionaries(st.sampled_from(["pid", "file", "line"]), st.integers(0, 5), max_size=3)),
        max_size=12)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line_strategy, max_size=25), keep=st.integers(0, 5000), shuffle=st.randoms())
def test_report_never_raises(tmp_path: Path, lines: list[bytes], keep: int, shuffle: Any) -> None:
    """Property-based: any mix of valid, cut, shuffled and garbage lines never makes the report raise."""
    good = [json.dumps(r).encode() for r in seed_log().lines]
    mixed = good + lines
    shuffle.shuffle(mixed)
    blob = b"\n".join(mixed)[:keep]
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(blob)
    try:
        data = read_logs([str(path)])
    except NoUsableLog:
        return
    rep = analyze(data)
    render_text(rep, data.skipped)
    json.dumps(rep, default=str)
    check_chrome_trace(to_chrome_trace(data))


def test_chrome_trace_gives_a_reused_pid_its_own_track(tmp_path: Path) -> None:
    """Two container runs whose main is pid 1: two tracks, each with its own calls (they were merged)."""
    w = LogWriter()
    w.add(0, 1, 0, "main", "process_start", argv=["python", "a.py"], forked=False, run="A", root_pid=1,
          create_time=T0)
    w.warm(1, 1, 0, "main", 20)
    w.add(2, 1, 0, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.add(100, 1, 0, "main", "process_start", argv=["python", "b.py"], forked=False, run="B", root_pid=1,
          create_time=T0 + 100)
    w.add(101, 1, 0, "main", "process_exit", how="exit", counts={}, dropped=0)
    trace = to_chrome_trace(read_logs([str(w.write(tmp_path / "two.jsonl"))]))
    tracks = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert len(tracks) == 2
    slices = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    starts = sorted((e["ts"], e["pid"]) for e in trace["traceEvents"] if e.get("name") == "process_start")
    assert slices == {starts[0][1]} and starts[0][1] != starts[1][1]


# Maps keyed by what the log holds (settings, launcher variables, skip reasons): their keys are data.
FREE_FORM = (".runs[].inductor.", ".processes[].rank.", ".input.skipped.", ".input.fixed.")


def _key_paths(value: Any, path: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            if not any(here.startswith(free) for free in FREE_FORM):
                out.setdefault(here, key)
                _key_paths(item, here, out)
    elif isinstance(value, list):
        for item in value:
            _key_paths(item, path + "[]", out)


def test_every_json_key_is_documented(tmp_path: Path) -> None:
    """Review 1 #15: every key of `report --json`, entry objects included (pools[], processes[],
    warm_pool_callers[], ranks[], costs, findings[].cost, …), on the test logs, is named in
    docs/report.md (docs/jobs.md for `jobs`): the list cannot drift from the report."""
    from .test_jobs import node_log
    from .test_pools import idle_pool
    from .test_report_text import example_shape

    logs = [w.write(tmp_path / f"{i}.jsonl") for i, w in enumerate((seed_log(), idle_pool(), example_shape(3)))]
    reports = [analyze(read_logs([str(log)])) for log in logs]
    nodes = [node_log(tmp_path, "n0", 0, leftover_sidecar=True), node_log(tmp_path, "n1", 1, t=0.4)]
    reports.append(analyze(read_logs([str(n) for n in nodes])))
    paths: dict[str, str] = {}
    for rep in reports:
        _key_paths(rep, "", paths)
    docs = ROOT / "docs"
    report_doc, jobs_doc = (docs / "report.md").read_text(), (docs / "jobs.md").read_text()
    missing = sorted(path for path, key in paths.items()
                     if f"`{key}`" not in report_doc + (jobs_doc if path.startswith(".jobs[]") else ""))
    assert not missing, missing
    assert ".pools[].shutdown_outcome" in paths and ".processes[].held_bytes" in paths  # the walk reaches entries
