"""Typed records (analysis/read/fastread.py typed_decoders): the fold's hot events read as Structs hold what the dict
records hold, a line they cannot hold stays a dict, and the fold makes the same model and report of either.

The report's own equality (typed stream against the json path, text and JSON) is tests/test_fastread.py's: the
command reads a typed stream. Here: each record, each hostile line, and the fold's sets held to TYPED_FIELDS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.fold import calls, fold, model
from wp_autotrace.analysis.read import fastread, logread, records
from wp_autotrace.analysis.read.logread import stream_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.common import targets, vocab

from . import test_fastread as fr
from .logs import TAGS, seed_log

pytest.importorskip("msgspec")
if not fastread.typed_decoders():
    pytest.skip("no typed records before Python 3.11 (typing.Required)", allow_module_level=True)


def as_dict(r: Any) -> str:
    """A record as the fold reads it, either kind: its fields but those None (dict.get's None either way), sorted."""
    items = r.items() if type(r) is dict else ((k, getattr(r, k)) for k in r.__struct_fields__)
    return json.dumps({k: v for k, v in items if v is not None}, sort_keys=True)


def read_typed_and_not(path: Path) -> tuple[list[Any], list[Any]]:
    """The stream's records typed and not, and each pass's counts (skipped, fixed, late, record_count)."""
    out: list[Any] = []
    for typed in (True, False):
        stream = stream_logs([str(path)], typed=typed)
        try:
            records = list(stream)
        except logread.NoUsableLog:
            records = []
        out.append((records, (stream.skipped, stream.fixed, stream.late, stream.record_count)))
    return out[0], out[1]


def test_the_folds_sets_hold_to_the_typed_fields() -> None:
    """A typed call has none of the fields its Call is made rich by (read by their presence), a typed return none
    that the return captured (kept as items, in the line's order), and each field is the event's."""
    assert calls._RARE_FIELDS.isdisjoint(fastread.TYPED_FIELDS[vocab.CALL])
    assert set(fastread.TYPED_FIELDS[vocab.RETURN]) <= fold._RETURN_OWN
    assert set(fold.Builder()._plain) == set(fastread.TYPED_FIELDS)  # each typed event folded where it is plain
    for event, keys in fastread.TYPED_FIELDS.items():
        assert set(keys) <= set(fr.schema.FIELD_TYPES[event]), event


@pytest.mark.parametrize("name", sorted(fr.LOGS))
def test_typed_records_hold_what_the_dicts_hold(name: str, tmp_path: Path) -> None:
    """The suite's logs: each record typed or not holds the same values, and the typed path is taken."""
    path = tmp_path / "log.jsonl"
    path.write_text(fr.compact(fr.LOGS[name]()))
    (typed, counts), (plain, plain_counts) = read_typed_and_not(path)
    assert counts == plain_counts
    assert [as_dict(r) for r in typed] == [as_dict(r) for r in plain]
    taken = [r for r in typed if type(r) is not dict]
    assert taken and {r.event for r in taken} <= set(fastread.TYPED_FIELDS)


def calls_of(records: list[Any]) -> list[tuple[Any, ...]]:
    """Every Call the fold makes of the records, as the findings read it."""
    return [(c.proc.pid, c.call_id, c.ts, c.target, c.tag, c.thread, c.caller, c.parent and c.parent.call_id,
             c.end, c.error, c.ret, type(c).__name__, c.at_call, c.env, c.rss) for c in fold.build(records).calls]


def test_typed_calls_fold_to_the_same_calls(tmp_path: Path) -> None:
    """The suite's logs and nested, failed, unreturned and rare-field calls: the same Calls from typed records."""
    w = seed_log()
    call = {k: v for k, v in fr.CALL.items() if k not in ("v", "event", "ts", "pid", "ppid", "host", "role", "seq")}
    w.add(5, 100, 1, "main", "call", **{**call, "call_id": 50})
    w.add(5.1, 100, 1, "main", "call", **{**call, "call_id": 51, "parent_call": 50, "thread": "T2"})
    w.add(5.2, 100, 1, "main", "call", **{**call, "call_id": 52, "parent_call": 51, "rss": 7})
    w.add(5.3, 100, 1, "main", "return", call_id=52, duration_s=0.1, error="RuntimeError: x")
    w.add(5.4, 100, 1, "main", "return", call_id=51, duration_s=0.3)
    w.add(5.5, 100, 1, "main", "return", call_id=99, duration_s=0.3)
    for name, log in [("extra", w), *((name, make()) for name, make in sorted(fr.LOGS.items()))]:
        path = tmp_path / f"{name}.jsonl"
        path.write_text(fr.compact(log))
        typed = list(stream_logs([str(path)], typed=True))
        assert any(type(r) is not dict for r in typed)
        assert calls_of(typed) == calls_of(list(stream_logs([str(path)]))), name



SHUTDOWN = next(label for label, tag in TAGS.items() if tag == targets.SIDECAR_SHUTDOWN)


def test_calls_the_plain_path_hands_on_fold_alike(tmp_path: Path) -> None:
    """The fold takes a typed call or return in one step only where its writer and its Call are plain
    (fold.Builder._plain_call, _plain_return): each record here is one it must hand to the general visit (a role
    the record first names, no target or "?", no tag, a stop request, a spawned child's, an exec'd process's, a
    failed exec's, a pool's creation, an unknown writer's, a watcher's, a cut record's, a return of no call or
    again) or one it takes (a run's first and last record, late ones): the same Calls, processes' last records,
    roles and runs' spans as from the dicts."""
    w = seed_log()
    call = {"call_id": 1, "thread": "T", "stack": [{"file": "/a.py", "line": 3, "func": "g"}],
            "caller": {"file": "/a.py", "line": 3, "func": "g"}}
    spawned = {"file": "/usr/lib/python3.11/multiprocessing/spawn.py", "line": 9, "func": "_fixup_main_from_path"}
    w.add(12, 100, 1, "main", "process_start", argv=["-c", vocab.SPAWNED_ARG], forked=True, run="r2")
    w.add(12.1, 100, 1, "main", "call", **{**call, "stack": [spawned, *call["stack"]]}, target="m:f")
    w.add(12.15, 450, 1, "", "call", **call, target="m:f")  # a writer never started (then: one of no run)
    w.add(12.16, 450, 1, "", "call", **{**call, "call_id": 2}, target="m:f")
    w.add(12.2, 500, 1, "worker", "process_start", argv=["w.py"], forked=False, run="r2")
    w.add(12.3, 550, 1, "", "process_start", argv=["v.py"], forked=False, run="r2")
    w.add(12.35, 550, 1, "worker", "call", **call, target="m:f")  # the role its process first names
    for i, fields in enumerate(({"target": "?"}, {"target": "", "tag": ""}, {"target": "m:f", "tag": ""},
                                {"target": "m:Pool.shutdown", "stack": []}, {"target": "m:f", "truncated": 100},
                                {"target": "m:f", "role": vocab.WATCHER}, {"target": "m:f", "parent_call": 1})):
        role = fields.pop("role", "worker")
        w.add(12.4 + i / 100, 500, 1, role, "call", **{**call, "call_id": 2 + i, **fields})
    w.add(12.5, 901, 1, "child", "process_start", argv=["x.py"], forked=False, run="r2")
    w.add(12.55, 901, 1, "child", "call", **{**call, "call_id": 2}, target="m:f")
    w.add(12.6, 901, 1, vocab.WATCHER, "watcher_start", interval=0.1, linger=60.0, run="r2")  # its pid: a watcher's
    w.add(12.7, 901, 1, "child", "call", **call, target="m:f")
    w.add(12.72, 901, 1, "child", "return", call_id=2, duration_s=0.1)
    w.add(13, 600, 1, "child", "process_start", argv=["a.py"], forked=False, run="r2")
    w.add(13.1, 600, 1, "child", "exec", executable="/bin/python", argv=["b.py"])
    w.add(13.2, 600, 1, "child", "call", **call, target="m:f")  # the exec failed
    w.add(13.3, 700, 1, "child", "process_start", argv=["a.py"], forked=False, run="r2")
    w.add(13.4, 700, 1, "child", "process_start", argv=["b.py"], forked=False, run="r2")  # an exec'd image
    w.add(13.5, 700, 1, "child", "call", **call, target="m:f")
    w.add(12.17, 450, 1, "", "return", call_id=1, duration_s=0.1)
    w.add(12.36, 550, 1, "", "call", **{**call, "call_id": 2}, target="m:f")
    w.add(12.37, 560, 1, "", "process_start", argv=["v.py"], forked=False, run="r2")
    w.add(12.38, 560, 1, "", "call", **call, target="m:f")
    w.add(12.39, 560, 1, "worker", "return", call_id=1, duration_s=0.1)  # the role its process first names
    w.add(12.75, 901, 1, "child", "return", call_id=1, duration_s=0.1)
    w.add(13.25, 600, 1, "child", "exec", executable="/bin/python", argv=["c.py"])
    w.add(13.26, 600, 1, "child", "return", call_id=1, duration_s=0.1)  # the exec failed
    w.add(13.55, 700, 1, "child", "return", call_id=1, duration_s=0.1, error="OSError: x")
    w.add(40, 500, 1, "worker", "call", **{**call, "call_id": 20}, target="m:f")
    w.add(40.5, 500, 1, "worker", "return", call_id=20, duration_s=0.5, error="RuntimeError: x")
    w.add(40.6, 500, 1, "worker", "return", call_id=20, duration_s=0.6)  # again
    w.add(40.7, 500, 1, "worker", "return", call_id=99, duration_s=0.7)  # of no call
    w.add(40.8, 500, 1, "worker", "call", **{**call, "call_id": 23}, target="m:f")
    w.add(40.9, 500, 1, vocab.WATCHER, "return", call_id=23, duration_s=0.1)
    w.add(41, 500, 1, "worker", "call", **{**call, "call_id": 24}, target=SHUTDOWN)
    w.add(41.1, 500, 1, "worker", "return", call_id=24, duration_s=0.1)  # a return visit_return folds further
    w.add(1, 500, 1, "worker", "call", **{**call, "call_id": 21}, target="m:f")  # late: the run's first
    w.add(60, 500, 1, "worker", "call", **{**call, "call_id": 22}, target="m:f")
    w.add(61, 500, 1, "worker", "return", call_id=22, duration_s=1)  # the run's last record
    w.add(62, 800, 1, "child", "process_start", argv=["y.py"], forked=False, run="r3")
    w.add(63, 800, 1, "child", "call", **call, target="m:f")  # its run's last record
    w.add(0.5, 500, 1, "worker", "return", call_id=21, duration_s=0.1)  # late again, and earlier still
    path = tmp_path / "log.jsonl"
    path.write_text(fr.compact(w))
    typed = list(stream_logs([str(path)], typed=True))
    plain = list(stream_logs([str(path)]))
    assert sum(type(r) is not dict and r.event == vocab.CALL for r in typed) > 10
    assert calls_of(typed) == calls_of(plain)
    models = [fold.build(records) for records in (typed, plain)]
    assert [[(p.pid, p.role, model.last_seen(p), p.exec_into, p.served) for p in m.processes] for m in models] == \
        [[(p.pid, p.role, model.last_seen(p), p.exec_into, p.served) for p in models[1].processes]] * 2
    assert [[(r.id, r.start, r.end, r.cut) for r in m.runs.values()] for m in models] == \
        [[(r.id, r.start, r.end, r.cut) for r in models[1].runs.values()]] * 2
    reports = [json.dumps(analyze(stream_logs([str(path)], typed=t)), default=str) for t in (True, False)]
    assert reports[0] == reports[1]


def test_a_refused_typed_line_takes_the_dict_decode_not_the_json_path(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A hot line with a field the typed record has not is decoded by the dict decode in C, as an untyped reader's:
    only what that refuses too goes to the json path."""
    taken: list[bytes] = []
    json_path = records._parse_json
    monkeypatch.setattr(records, "_parse_json", lambda raw, *a: taken.append(raw) or json_path(raw, *a))
    path = tmp_path / "log.jsonl"
    path.write_text("".join(fr.dumps(r) + "\n" for r in RARE))
    assert len(list(stream_logs([str(path)], typed=True))) == len(RARE) and taken == []


def test_hostile_lines_typed_alike(tmp_path: Path) -> None:
    """Every hostile line of test_fastread among good ones: the same records (or none), skips and fixes."""
    good = fr.compact(seed_log()).encode().splitlines()
    body = b"\n".join(good[:5] + [x.encode() for x in fr.HOSTILE_LINES] + fr.BYTE_LINES + good[5:]) + b"\n"
    path = tmp_path / "log.jsonl"
    path.write_bytes(body)
    (typed, counts), (plain, plain_counts) = read_typed_and_not(path)
    assert counts == plain_counts
    assert [as_dict(r) for r in typed] == [as_dict(r) for r in plain]


RARE = [{**fr.CALL, "rss": 5}, {**fr.CALL, "env": {"A": "1"}}, {**fr.CALL, "pending_jobs": [1]},
        {**fr.RETURN, "worker_pids": [8]}, {**fr.RETURN, "truncated": 3}, {**fr.CALL, "zz": 1}]


@pytest.mark.parametrize("r", RARE, ids=[next(iter(set(r) - set(fr.CALL) - {"duration_s"}), "") for r in RARE])
def test_a_line_with_another_field_stays_a_dict(r: dict[str, Any], tmp_path: Path) -> None:
    """A call with a rare field, a return with a captured one or `truncated`, a field unknown here: a dict, as
    the untyped reader reads it (the typed decode refuses it; the dict decode decides)."""
    path = tmp_path / "log.jsonl"
    path.write_text(fr.dumps(r) + "\n")
    (typed, _), (plain, _) = read_typed_and_not(path)
    assert [type(x) for x in typed] == [dict] and typed == plain


def test_get_and_item_read_as_a_dicts() -> None:
    """The readers that take either kind (logread.Once, the fold's cold reads) read a typed record as a dict."""
    line = fr.dumps({k: v for k, v in fr.RETURN.items() if k not in ("worker_pids", "sidecar_pid", "seq")})
    r = fastread.typed_decoders()[fastread.head(line.encode())](line.encode())
    assert type(r) is not dict
    assert (r["ts"], r.get("seq", 0), r.get("seq"), r.get("signal"), r.get("call_id", -1)) == (1_800_000_002, 0,
                                                                                                 None, None, 2)
    assert (r.target, r.signal, r.truncated) == (None, None, None)
    with pytest.raises(KeyError):
        r["seq"]


def test_the_report_of_a_typed_stream_is_the_untyped_ones(tmp_path: Path) -> None:
    """The fold and the report, as analyze makes them: a typed stream's JSON is the untyped stream's (two copies
    of a log: the multi-file merge and its once-only filter read typed records too)."""
    text = fr.compact(seed_log())
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(text)
    for paths in ([tmp_path / "a.jsonl"], [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]):
        reports = [json.dumps(analyze(stream_logs([str(p) for p in paths], typed=typed)), default=str)
                   for typed in (True, False)]
        assert reports[0] == reports[1]


def test_typed_records_released_in_ts_then_seq_order(tmp_path: Path) -> None:
    """Writers' records of one moment land out of their seq order: the reorder buffer releases typed records in
    (ts, seq) order as it does dicts, a line without seq as seq 0."""
    lines = [{**fr.RETURN, "seq": seq, "call_id": seq, "ts": ts} for ts, seq in ((5, 3), (5, 1), (4, 9), (5, 2))]
    lines = [{k: v for k, v in r.items() if k not in ("worker_pids", "sidecar_pid")} for r in lines]
    lines.append({k: v for k, v in lines[0].items() if k != "seq"} | {"call_id": 0})
    path = tmp_path / "log.jsonl"
    path.write_text("".join(fr.dumps(r) + "\n" for r in lines))
    (typed, _), (plain, _) = read_typed_and_not(path)
    assert all(type(r) is not dict for r in typed)
    assert [r.call_id for r in typed] == [r["call_id"] for r in plain] == [9, 0, 1, 2, 3]


def test_typed_jobs_fold_to_the_same_spans(tmp_path: Path) -> None:
    """Pool workers' job records, typed: the same spans (an end lost, an end of another job, fn and arg kept)."""
    w = seed_log()
    for i, (pid, state, work_id) in enumerate([(201, "start", 1), (202, "start", 2), (201, "end", 1),
                                               (201, "start", 3), (202, "end", 7), (201, "start", 4),
                                               (202, "end", 2), (201, "end", 4)]):
        extra = {"fn": "m:compile", "arg": f"k{work_id}"} if state == "start" else {}
        w.add(1 + i / 10, pid, 200, "compile-worker", "job", state=state, work_id=work_id, **extra)
    path = tmp_path / "log.jsonl"
    path.write_text(fr.compact(w))
    spans = []
    for typed in (True, False):
        records = list(stream_logs([str(path)], typed=typed))
        assert sum(type(r) is not dict and r.event == vocab.JOB for r in records) == (8 if typed else 0)
        spans.append([(p.pid, [(j.work_id, j.fn, j.arg, j.start, j.end) for j in p.jobs_run])
                      for p in fold.build(records).processes])
    assert spans[0] == spans[1]
    assert [len(jobs) for pid, jobs in spans[0] if pid in (201, 202)] == [3, 1]


def test_a_namespaced_writers_records_are_typed_and_fold_alike(tmp_path: Path) -> None:
    """A writer outside the host's first pid namespace (a container) puts pidns in every record: its calls, returns
    and jobs are typed records too, and the fold files them under the namespace's host as it
    files the dicts: the same processes, Calls, job spans and report."""
    w = seed_log()
    for i, state in enumerate(("start", "end")):
        w.add(9.6 + i / 10, 400, 300, "compile-sidecar", "job", state=state, work_id=1,
              **({"fn": "m:compile"} if state == "start" else {}))
    ns = 4026532000
    for r in w.lines:
        if r["pid"] in (200, 300, 400):  # the sidecars, started in a container: their own records
            r["pidns"] = ns
    path = tmp_path / "log.jsonl"
    path.write_text(fr.compact(w))
    (typed, counts), (plain, plain_counts) = read_typed_and_not(path)
    assert counts == plain_counts and [as_dict(r) for r in typed] == [as_dict(r) for r in plain]
    # every namespaced line a typed record can hold is one (a return that captured a pid stays a dict)
    fits = [r for r in w.lines if "pidns" in r and set(r) <= set(fastread.TYPED_FIELDS.get(r["event"], ()))]
    namespaced = [r for r in typed if type(r) is not dict and r.pidns == ns]
    assert len(namespaced) == len(fits) and {r.event for r in namespaced} == {vocab.CALL, vocab.RETURN, vocab.JOB}
    models = [fold.build(list(stream_logs([str(path)], typed=t))) for t in (True, False)]
    hosts = [sorted((p.host, p.pid, [(j.work_id, j.fn, j.end) for j in p.jobs_run]) for p in m.processes)
             for m in models]
    assert hosts[0] == hosts[1] and any("pid namespace" in host for host, _, _ in hosts[0])
    assert calls_of(typed) == calls_of(plain)
    reports = [json.dumps(analyze(stream_logs([str(path)], typed=t)), default=str) for t in (True, False)]
    assert reports[0] == reports[1]
