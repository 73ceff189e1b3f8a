"""The reader and the report/export commands on hostile input: never a traceback, never stalled, never NaN."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wp_autotrace.analysis.read import schema
from wp_autotrace.analysis.read.logread import MAX_LINE_BYTES, read_logs
from wp_autotrace.cli.main import main

from .conftest import clean_env
from .logs import seed_log


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN/Infinity, as a strict consumer would."""
    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def run_cli(args: list[str], tmp_path: Path, shell_suffix: str = "", timeout: float = 30) -> Any:
    """The CLI in a fresh interpreter (bounded), with WP_AUTOTRACE off."""
    cmd = " ".join([sys.executable, "-m", "wp_autotrace", *args]) + shell_suffix
    return subprocess.run(["bash", "-c", cmd], env=clean_env(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_framing_blank_lines_torn_fragments_and_long_lines(tmp_path: Path) -> None:
    """Blank lines are skipped silently; `...torn{"v":1,...}` recovers the record; an over-long line is counted."""
    good = [json.dumps(r, separators=(",", ":")) for r in seed_log().lines]
    blob = "\n\n".join(good[:3]) + "\n\n" + '{"v":1,"event":"call","ts":17' + good[3] + "\n"
    blob += "x" * (MAX_LINE_BYTES + 10) + "\n" + "\n".join(good[4:]) + "\n"
    path = tmp_path / "log.jsonl"
    path.write_text(blob)
    data = read_logs([str(path)])
    assert len(data.records) == len(good)
    assert data.skipped == {"torn fragment": 1, "line over 1 MiB": 1}


def test_fields_checked_and_sanitised(tmp_path: Path) -> None:
    """Huge ints, NaN/Infinity and wrong types are dropped from records and counted, never printed."""
    w = seed_log()
    w.lines[0]["ts"] = 10 ** 400 if False else w.lines[0]["ts"]
    lines = [json.dumps(r) for r in w.lines]
    lines.append('{"v":1,"event":"tree","ts":1800000005,"pid":100,"count":NaN,"started":[{"pid":7,"rss":1e999}]}')
    lines.append('{"v":1,"event":"process_exit","ts":' + "9" * 401 + ',"pid":100}')
    lines.append('{"v":1,"event":"return","ts":1800000005,"pid":200,"call_id":2,"worker_pids":"nope",'
                 '"sidecar_pid":' + "9" * 30 + '}')
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    data = read_logs([str(path)])
    assert data.fixed["field of the wrong type or out of range"] == 3
    tree = [r for r in data.records if r["event"] == "tree" and r["ts"] == 1800000005][0]
    assert "count" not in tree and tree["started"] == [{"pid": 7}]


def test_missing_input_among_several(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or unreadable file among several: named on stderr and in input, exit 66."""
    good = seed_log().write(tmp_path / "a.jsonl")
    unreadable = tmp_path / "u.jsonl"
    unreadable.write_text("{}\n")
    unreadable.chmod(0)
    assert main(["report", "--json", str(good), str(tmp_path / "missing.jsonl")]) == 66
    out, err = capsys.readouterr()
    assert "missing.jsonl" in err
    assert any("missing.jsonl" in p for p in strict_json(out)["input"]["problems"])
    assert main(["report", str(good), str(tmp_path / "missing.jsonl")]) == 66
    assert "missing.jsonl" in capsys.readouterr().err


def test_fifo_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO is refused at once with a clear message (exit 2), never read."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    res = run_cli(["report", str(fifo)], tmp_path, timeout=20)
    assert res.returncode == 2 and "is a FIFO, not a log file" in res.stderr


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_device_refused(device: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/zero (endless) and other devices are refused before a byte is read."""
    assert main(["report", device]) == 2
    assert "is a device, not a log file" in capsys.readouterr().err
    assert main(["export", device, "-o", "-"]) == 2


@pytest.mark.parametrize("suffix,code", [(" >&-", 74), (" | head -c 10 >/dev/null", None)])
def test_closed_stdout_quiet_exit(suffix: str, code: int | None, tmp_path: Path) -> None:
    """stdout closed (or its reader gone): exit 74, nothing on stderr, no traceback."""
    log = seed_log().write(tmp_path / "a.jsonl")
    res = run_cli(["report", str(log)], tmp_path, suffix + "; echo rc=${PIPESTATUS[0]} >&2")
    assert "Traceback" not in res.stderr and "Exception" not in res.stderr
    if code is not None:
        assert f"rc={code}" in res.stderr


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_unencodable_strings_are_escaped_not_fatal(encoding: str, tmp_path: Path) -> None:
    """A non-UTF-8 argv (surrogates) or a strict stdout encoding: the report is printed, escaped, exit 0."""
    lines = seed_log().write(tmp_path / "a.jsonl").read_text().splitlines()
    start = json.loads(lines[0])
    assert start["event"] == "process_start"
    start["argv"] = ["python", "caf\udce9.py", "na\u00efve"]
    log = tmp_path / "b.jsonl"
    log.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", str(log)], env=clean_env(
        PYTHONIOENCODING=encoding), cwd=tmp_path, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert b"caf\\udce9.py" in res.stdout and b"== Answer" in res.stdout


def test_cli_leaves_no_log_of_its_own(tmp_path: Path) -> None:
    """With WP_AUTOTRACE=1 exported, `report` and `run` write no log of their own; the program run is traced."""
    log = seed_log().write(tmp_path / "a.jsonl")
    env = clean_env(WP_AUTOTRACE="1")
    for args in (["-m", "wp_autotrace", "report", str(log)], ["-X", "utf8", "-m", "wp_autotrace", "report", str(log)]):
        res = subprocess.run([sys.executable, *args], env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
    script = Path(sys.executable).with_name("wp-autotrace")
    if script.exists():
        subprocess.run([str(script), "report", str(log)], env=env, cwd=tmp_path, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert sorted(p.name for p in tmp_path.glob("wp_autotrace-*.jsonl")) == []
    run_log = tmp_path / "run.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(run_log), "--", sys.executable,
                          "-c", "pass"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.glob("wp_autotrace-*.jsonl")) == []
    starts = [json.loads(x) for x in run_log.read_text().split("\n") if x.strip()]
    assert [r["role"] for r in starts if r["event"] == "process_start"] == ["main"]


# Hostile values for any field: big ints, non-finite numbers, wrong types, nesting.
hostile = st.one_of(
    st.integers(), st.integers(min_value=10 ** 20, max_value=10 ** 300), st.floats(allow_nan=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308]), st.text(max_size=8), st.none(),
    st.booleans(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.dictionaries(st.sampled_from(["pid", "ppid", "rss", "create_time", "end", "file", "line"]),
                             st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=3)), max_size=4),
             max_size=3),
)
ALL_FIELDS = sorted({name for types in schema.FIELD_TYPES.values() for name in types})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.sampled_from(sorted(schema.KNOWN_EVENTS)), values=st.dictionaries(
    st.sampled_from(ALL_FIELDS), hostile, max_size=8), where=st.integers(0, 40))
def test_any_field_any_value_never_crashes(tmp_path: Path, capsys: pytest.CaptureFixture[str], event: str,
                                          values: dict[str, Any], where: int) -> None:
    """Property: every field with big ints, NaN, wrong types -> valid strict JSON (exit 0) or a clean exit 2."""
    lines = [json.dumps(r) for r in seed_log().lines]
    bad = {"v": 1, "event": event, "ts": 1_800_000_005.0, "pid": 100, **values}
    lines.insert(min(where, len(lines)), json.dumps(bad))  # json.dumps writes NaN/Infinity as Python does
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code = main(["report", "--json", str(path)])
    out, err = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in err
    if code == 0:
        strict_json(out)
        assert main(["report", str(path)]) == 0
        capsys.readouterr()
        assert main(["export", str(path), "-o", "-"]) == 0
        strict_json(capsys.readouterr().out)


NUMERIC_FIELDS = sorted((event, name) for event, types in schema.FIELD_TYPES.items() for name, kind in types.items()
                        if kind in (schema.NUM, schema.UINT, schema.INT) and name not in ("v", "ts", "pid"))


@pytest.mark.parametrize("event,field", NUMERIC_FIELDS)
def test_every_numeric_field_rejects_nan_infinity_and_huge(event: str, field: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Every numeric field of every event, set to NaN, Infinity, 1e400 or a 401-digit int: strict JSON out."""
    lines = [json.dumps(r) for r in seed_log().lines]
    for bad in ("NaN", "Infinity", "-Infinity", "1e400", "9" * 401):
        lines.append(f'{{"v":1,"event":"{event}","ts":1800000005.5,"pid":100,"host":"h1","{field}":{bad}}}')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["report", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    strict_json(out)
    assert main(["export", str(path), "-o", "-"]) == 0
    strict_json(capsys.readouterr().out)
    data = read_logs([str(path)])
    assert all(field not in r for r in data.records if r["event"] == event and r["ts"] == 1800000005.5)


EVERY_FIELD = sorted((event, name, kind) for event, types in schema.FIELD_TYPES.items()
                     for name, kind in types.items() if name not in ("v", "event", "ts", "pid"))
# A value of the wrong type for each kind of field.
WRONG = {schema.STR: [1], schema.OPT_STR: {"a": 1}, schema.UINT: "x", schema.INT: 1.5, schema.NUM: "x",
         schema.BOOL: "yes", schema.DICT: [1], schema.ANY: {"n": float("nan")}, schema.INTS: [-1, "x", 10 ** 30],
         schema.STRS: "x", schema.FRAME: {"file": 3}, schema.FRAMES: [{"line": "x"}, 7],
         schema.PROCS: [{"pid": "x"}, {"pid": 5, "rss": -1, "cmd": 3}], schema.ENDED: [{"pid": 5, "end": "x"}],
         schema.RSS: [{"pid": -5}], schema.MEMS: [{"pid": 5, "pss": -1}, 3],
         schema.DEVS: [{"pid": 5, "paths": "x"}, {"pid": "x"}], schema.TIMES: {"a": [1, "x"], "b": 3},
         schema.ZOMBIES: [{"pid": 5, "since": "x", "status": -1}, "z"]}


@pytest.mark.parametrize("event,field,kind", EVERY_FIELD)
def test_every_field_of_the_wrong_type(event: str, field: str, kind: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Every field of every event, given a value of the wrong type: report, text and export still work."""
    lines = [json.dumps(r) for r in seed_log().lines]
    for pid in (100, 200, 777):  # a known process, a sidecar, and one never seen
        bad = {"v": 1, "event": event, "ts": 1_800_000_005.5, "pid": pid, "host": "h1", field: WRONG[kind]}
        lines.append(json.dumps(bad))
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["report", "--json", str(path)]) == 0
    strict_json(capsys.readouterr().out)
    assert main(["report", str(path)]) == 0
    capsys.readouterr()
    assert main(["export", str(path), "-o", "-"]) == 0
    strict_json(capsys.readouterr().out)


def _rec(ts: float, pid: int, seq: int, event: str = "import") -> dict[str, Any]:
    return {"v": 1, "event": event, "ts": ts, "pid": pid, "ppid": 1, "host": "h", "role": "child", "seq": seq,
            "module": "m"}


def test_stream_is_the_sorted_read_in_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stream_logs yields what read_logs sorts, in the same order (writers interleaved within a file, two
    files, equal timestamps), holding at most REORDER_MAX records per file; a record later than the window
    comes late and is counted; the report of either reader is the same; nothing usable raises at the end."""
    from wp_autotrace.analysis.read import logread
    from wp_autotrace.analysis.read.logread import NoUsableLog, stream_logs
    from wp_autotrace.analysis.report import analyze

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # Two writers whose appends landed out of time order by up to 0.3 s, and a tie on ts.
    lines_a = [_rec(10.0 + i * 0.1 - (0.35 if i % 7 == 3 else 0), 100 + i % 3, i) for i in range(200)]
    lines_a.insert(6, _rec(10.5, 100, 1000))
    lines_b = [_rec(10.05 + i * 0.2, 200, i) for i in range(100)]
    lines_b.insert(3, _rec(10.5, 201, 0))
    a.write_text("\n".join(json.dumps(r) for r in lines_a) + "\n")
    b.write_text("\n\n".join(json.dumps(r) for r in lines_b) + "\n")
    want = read_logs([str(a), str(b)]).records
    stream = stream_logs([str(a), str(b)])
    assert list(stream) == want and stream.record_count == len(want) and stream.late == 0
    assert list(stream.records) == want  # a second pass reads again
    monkeypatch.setattr(logread, "REORDER_MAX", 1)  # a full buffer releases its oldest: late, and counted
    got = list(stream)
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, want)) and got != want and stream.late > 0
    monkeypatch.undo()
    seed = tmp_path / "seed.jsonl"
    seed_log().write(seed)
    assert analyze(stream_logs([str(seed)])) == analyze(read_logs([str(seed)]))
    (tmp_path / "empty.jsonl").write_text("not a record\n")
    empty = stream_logs([str(tmp_path / "empty.jsonl"), str(tmp_path / "missing.jsonl")])
    with pytest.raises(NoUsableLog, match="missing.jsonl"):
        list(empty)
    assert empty.skipped == {"not JSON": 1}



def test_one_files_stream_counts_what_it_releases(tmp_path: Path) -> None:
    """One file's stream counts the records it released and those released after a later one (late) itself, also
    where its reader stops early; the test counts both from what it was given."""
    from wp_autotrace.analysis.read.logread import REORDER_WINDOW_S, stream_logs

    step = REORDER_WINDOW_S * 2  # each record past the window of the one before: the late ones come late
    ts = [1.0, 1 + step, 1 + 2 * step, 2.0, 1 + 3 * step, 3.0, 1 + 3 * step]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(_rec(t, 100, i)) + "\n" for i, t in enumerate(ts)))
    stream = stream_logs([str(path)])
    got = [r["ts"] for r in stream]
    assert sorted(got) == sorted(ts) and stream.record_count == len(ts)
    assert stream.late == sum(t < max(got[:i], default=t) for i, t in enumerate(got)) == 2
    taken = iter(stream)
    first = [next(taken)["ts"] for _ in range(3)]
    taken.close()  # type: ignore[attr-defined]
    assert first == got[:3] and stream.record_count == 3


# -- the same records given twice (review 1 #21) -------------------------------------------------

def _dup_reports(tmp_path: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    from tests.logs import seed_log
    from wp_autotrace.analysis.read.logread import stream_logs
    from wp_autotrace.analysis.report import analyze

    log = seed_log().write(tmp_path / "a.jsonl")
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(log.read_bytes())
    one = analyze(stream_logs([str(log)]))
    twice = analyze(stream_logs([str(log), str(log)]))
    copied = analyze(read_logs([str(log), str(copy)]))
    return one, twice, copied


def _shape(rep: dict[str, Any]) -> Any:
    return ([(p["sidecar_pid"], p["creator_pid"]) for p in rep["pools"]], sorted(f["kind"] for f in rep["findings"]),
            rep["processes_started"], rep["leftover_pids"], rep["input"]["records"])


def test_same_log_twice_or_a_copy_is_read_once(tmp_path: Any) -> None:
    """A log given twice, or a copy beside it, forges nothing (no phantom pool, no unreturned calls)."""
    one, twice, copied = _dup_reports(tmp_path)
    assert _shape(twice) == _shape(one)
    assert _shape(copied) == _shape(one)
    assert any("same file" in n and "read once" in n for n in twice["input"]["notes"])
    assert any("more than one input" in n for n in copied["input"]["notes"])
    assert one["input"]["notes"] == []


def test_once_memory_is_bounded() -> None:
    from wp_autotrace.analysis.read.logread import Once

    once = Once(recent=3)
    recs = [{"host": "h", "pid": 1, "seq": i, "ts": float(i), "event": "call"} for i in range(10)]
    assert all(once.first(r) for r in recs)
    assert len(once.seen) == 3
    assert not once.first(dict(recs[-1]))
    assert once.repeated == 1


def test_stream_holds_a_bounded_number_of_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream keeps no list of the records: while a 5,000-record log (all within the reorder window)
    is read, at most REORDER_MAX + 1 records are alive at once, whatever the log's length."""
    import weakref

    from wp_autotrace.analysis.read import logread, records

    log = tmp_path / "big.jsonl"
    log.write_text("\n".join(json.dumps(_rec(10.0 + i * 1e-4, 100 + i % 7, i)) for i in range(5000)) + "\n")
    monkeypatch.setattr(logread, "REORDER_MAX", 100)
    alive = [0, 0]  # now, most

    class Tracked(dict):  # type: ignore[type-arg]
        __slots__ = ("__weakref__",)

    def gone() -> None:
        alive[0] -= 1

    real = records.parse_line

    def parse(raw: bytes, skip: Any, fixed: dict[str, int]) -> Any:
        record = real(raw, skip, fixed)
        if record is None:
            return None
        tracked = Tracked(record)
        weakref.finalize(tracked, gone)
        alive[0] += 1
        alive[1] = max(alive[1], alive[0])
        return tracked

    monkeypatch.setattr(records, "parse_line", parse)
    count = sum(1 for _ in logread.stream_logs([str(log)]))
    assert count == 5000 and alive[1] <= 100 + 2, alive


@pytest.mark.parametrize("value", [1, "x", {"var": "A"}, None])
def test_a_config_whose_env_changed_is_not_a_list_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          value: Any) -> None:
    """env_changed is kept as written (ANY): a crafted value of another type gives no change, never a crash."""
    lines = [json.dumps(r) for r in seed_log().lines]
    lines.insert(0, json.dumps({"v": 1, "event": "config", "ts": 1_800_000_005.0, "pid": 100, "env_changed": value}))
    path = tmp_path / "config.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["report", "--json", str(path)]) == 0
    strict_json(capsys.readouterr().out)


_LINES = [b'{"v":1,"event":"call","ts":1.5}', b'{"v":1,"event":"call","ts":1.5}\n', b' {"a":1}', b'{"a":1} ',
          b'{"a":1}\r\n', b'{"a":1}\n\n', b'{"a":1}{"b":2}', b'{"a":1} x', b'', b'\n', b'   ', b'[1, 2]', b'7',
          b'"s"\n', b'null', b'{"a":NaN}', b'{"a":Infinity}\n', b'{"a":', b'{"a":1', b'x{"a":1}', b'\xff{"a":1}',
          b'{"a":"\xc3\xa9"}', b'{"a":"\t"}', b'{"a":1}\x0b', b'{"a":1}\xc2\xa0', b'[' * 100_000, b'{"a":1}\n ']


@pytest.mark.parametrize("raw", _LINES)
def test_the_line_decoder_gives_what_json_decode_gives(raw: bytes) -> None:
    """A line is decoded to what JSONDecoder.decode gives it (strict: NaN/Infinity as null), or refused where
    decode refuses it: whatever spacing, extra data or bytes it holds."""
    from wp_autotrace.analysis.read import records

    decoder = json.JSONDecoder(parse_constant=lambda _name: None)
    try:
        want: Any = decoder.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        want = records._MISSING  # noqa: SLF001 - the reader's own "not JSON"
    assert records._decode(raw) == want  # noqa: SLF001


def test_a_writers_line_is_scanned_once_on_the_json_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the json path a line as the writer writes it (a value up to its end or its newline) costs one scan,
    never JSONDecoder.decode's whitespace matches around it (a quarter of the decode at a million records)."""
    from wp_autotrace.analysis.read import records

    class Counted(json.JSONDecoder):
        decoded = 0

        def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
            Counted.decoded += 1
            return super().decode(s, *args, **kwargs)

    counted = Counted(parse_constant=lambda _name: None)
    monkeypatch.setattr(records, "_DECODER", counted)
    monkeypatch.setattr(records, "_SCAN", counted.scan_once, raising=False)
    lines = [b'{"v":1,"event":"call","ts":1.5,"pid":3}', b'{"v":1,"event":"return","ts":2,"pid":3}\n']
    assert [records._decode(raw) for raw in lines] == [json.loads(raw) for raw in lines]  # noqa: SLF001
    assert Counted.decoded == 0
    assert records._decode(b' {"a":1}') == {"a": 1} and Counted.decoded == 1  # noqa: SLF001 - decode decides
