"""What the fold keeps per call, how a one-pass command leaves its model, and what a finding walks per call: the
report's cost at a million records without a change in what it says (docs/scale.md, "Where the report's time
goes")."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.fold import Builder
from wp_autotrace.cli.main import main

from .logs import AC, LogWriter, call, start

T0 = 1_800_000_000.0


def _call(pid: int, call_id: int, ts: float, caller: dict[str, Any], thread: str) -> dict[str, Any]:
    return {"v": 1, "event": "call", "ts": T0 + ts, "pid": pid, "ppid": 1, "host": "h", "role": "main",
            "seq": call_id, "target": "".join(["m:", "f"]), "tag": "".join(["us", "er"]), "call_id": call_id,
            "thread": "".join(thread), "caller": caller}


def test_equal_call_sites_are_one_object_and_different_ones_stay_apart() -> None:
    """Calls from one site share its frame and strings (a long run's memory grows with its calls' count only);
    a frame with the same items in another order, one more item, or the same values under another key is its
    own (its JSON says it as logged)."""
    site = {"file": "/u/a.py", "line": 3, "func": "f"}
    frames = [dict(site), dict(site), {"line": 3, "file": "/u/a.py", "func": "f"},
              dict(site, rel="a.py"), {"file": "/u/a.py", "line": 4, "func": "f"},
              {"file": "/u/a.py", "line": 3, "src": "f"}]
    b = Builder()
    b.fold([_call(10, i + 1, i, frame, ["Main", "Thread"]) for i, frame in enumerate(frames)])
    calls = b.model.calls
    assert [c.caller for c in calls] == frames
    assert calls[0].caller is calls[1].caller
    assert len({id(c.caller) for c in calls}) == 5
    assert list(calls[2].caller) == ["line", "file", "func"]
    assert all(c.target is calls[0].target and c.tag is calls[0].tag and c.thread is calls[0].thread
               for c in calls)


def _log(tmp_path: Path) -> Path:
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for i in range(3):
        call(w, 1 + i, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", i + 1, 1.5 + i)
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    path = tmp_path / "log.jsonl"
    w.write(path)
    return path


def test_a_one_pass_command_leaves_its_model_to_the_exit(tmp_path: Path) -> None:
    """As the process's own command line, report runs without the cyclic collector and freezes what it made as
    it returns: the exit frees the model at once, never walked object by object (the same output)."""
    log = _log(tmp_path)
    probe = ("import gc, sys\n"
             "from wp_autotrace.cli.main import main\n"
             "sys.argv = ['wp-autotrace', 'report', '--json', sys.argv[1]]\n"
             "code = main()\n"
             "print(code, gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(log)], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.stderr.split()[-3:] == ["0", "False", "True"], done.stderr
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["report", "--json", str(log)]) == 0
    assert done.stdout == out.getvalue()


def test_a_callers_argv_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    """main(argv) runs the command alone: a process that goes on (a test, a tool) keeps its collector on and
    nothing frozen (freezing there would keep each report's garbage for the process's life)."""
    log = _log(tmp_path)
    frozen = gc.get_freeze_count()
    with redirect_stdout(io.StringIO()):
        assert main(["report", "--json", str(log)]) == 0
        assert main(["export", "-o", "-", str(log)]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_a_ready_wait_looks_for_a_pool_only_in_processes_that_made_one(tmp_path: Path, monkeypatch: Any) -> None:
    """The slow-ready-wait finding looks for the pool made inside each wait_pool_ready call: only in a process that
    made one (a long log's waits are mostly in processes that made none, each a walk for nothing); the report
    is the same."""
    from wp_autotrace.analysis.findings import waits

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.warm(0.5, 100, 1, "main", 200)
    for i in range(3):
        call(w, 1 + i, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 10 + i, 1.5 + i)
    start(w, 0.1, 101, 100, "child")
    for i in range(4):
        call(w, 1 + i, 101, 100, "child", f"{AC}:AsyncCompile.wait_pool_ready", i + 1, 1.5 + i)
    path = w.write(tmp_path / "log.jsonl")
    looked: list[int] = []
    real = waits._made_in

    def made_in(v: Any, c: Any) -> Any:
        looked.append(c.proc.pid)
        return real(v, c)

    with redirect_stdout(io.StringIO()) as plain:
        assert main(["report", "--json", str(path)]) == 0
    monkeypatch.setattr(waits, "_made_in", made_in)
    with redirect_stdout(io.StringIO()) as counted:
        assert main(["report", "--json", str(path)]) == 0
    assert looked == [100, 100, 100] and counted.getvalue() == plain.getvalue()


RARE = {"env": {"TORCH_WARM_POOL": "0"}, "action": "skip", "rss": 123456, "pending_jobs": 3}


def _calls_of_every_kind() -> tuple[Any, list[Any]]:
    """The fold of one call of each kind: plain; with each field few calls have; blocked; after an exec; a stop
    request from multiprocessing's exit handler, and one the interpreter made (atexit: no frame above it); one made
    as a spawned child re-imported its main script."""
    frame = {"file": "/u/a.py", "line": 3, "func": "f"}
    mp_exit = {"file": "/py/multiprocessing/util.py", "line": 300, "func": "_exit_function"}
    mp_main = {"file": "/py/multiprocessing/spawn.py", "line": 280, "func": "_fixup_main_from_path"}
    records: list[dict[str, Any]] = [
        {"v": 1, "event": "process_start", "ts": T0, "pid": 10, "ppid": 1, "host": "h", "role": "main",
         "seq": 0, "argv": ["python", "a.py"], "forked": False},
        {**_call(10, 1, 0.1, frame, ["Main"]), "stack": [frame]},
        *({**_call(10, 2 + i, 0.2 + i / 10, frame, ["Main"]), key: value}
          for i, (key, value) in enumerate(RARE.items())),
        {**_call(10, 9, 0.9, frame, ["Main"]), "event": "blocked"},
        {**_call(10, 10, 1.0, frame, ["Main"]), "target": "m:SubprocPool.shutdown", "stack": [mp_exit, frame]},
        {**_call(10, 11, 1.1, frame, ["Main"]), "target": "m:SubprocPool.shutdown", "stack": [frame]},
        {**_call(10, 12, 1.2, frame, ["Main"]), "target": "m:SubprocPool.shutdown", "stack": []},  # atexit's
        {"v": 1, "event": "process_start", "ts": T0 + 2, "pid": 11, "ppid": 10, "host": "h", "role": "child",
         "seq": 0, "argv": ["python", "-c", "x", "--multiprocessing-fork"], "forked": False},
        {**_call(11, 1, 2.1, frame, ["Main"]), "stack": [mp_main, frame]},
        {**_call(11, 2, 2.2, frame, ["Main"]), "stack": [frame]},
        {"v": 1, "event": "process_start", "ts": T0 + 3, "pid": 10, "ppid": 1, "host": "h", "role": "main",
         "seq": 0, "argv": ["python", "b.py"], "forked": False},  # an exec: the same process, its second program
        {**_call(10, 1, 3.1, frame, ["Main"]), "ppid": 1},
    ]
    for r in records:
        r["ppid"] = 1 if r["pid"] == 10 else 10
    b = Builder()
    b.fold(records)
    return b.model, b.model.calls


def test_a_plain_call_keeps_no_slot_for_what_few_calls_hold() -> None:
    """A call whose record holds none of the fields few calls have is a plain Call: 8 bytes less a field it does
    not hold (docs/scale.md, "Memory per call"), and it reads them as
    exactly what a RichCall made from the same record would hold: each reader reads both alike."""
    from wp_autotrace.analysis.fold.model import Call, RichCall

    _, calls = _calls_of_every_kind()
    plain = [c for c in calls if type(c) is Call]
    rich = [c for c in calls if type(c) is RichCall]
    # the plain ones: the first call, the stop request not from the exit handler, the spawned child's other call
    assert [(c.proc.pid, c.call_id) for c in plain] == [(10, 1), (10, 11), (11, 2)]
    assert len(rich) == len(calls) - 3
    assert sys.getsizeof(rich[0]) - sys.getsizeof(plain[0]) == 8 * len(RichCall.__slots__)
    for c in plain:
        assert (c.env, c.gen, c.blocked, c.action, c.at_call, c.rss, c.at_exit, c.by_interpreter, c.mp_main) == \
            ({}, 0, False, "", {}, None, False, False, False)
        assert not hasattr(c, "__dict__")


def test_each_field_few_calls_hold_is_kept_on_its_call() -> None:
    """Each field that makes a RichCall is the one its record gives, the others as a plain Call reads them."""
    model, calls = _calls_of_every_kind()
    by = {(c.proc.pid, c.gen, c.call_id): c for c in calls}
    assert by[(10, 0, 2)].env == RARE["env"] and by[(10, 0, 2)].action == ""
    assert by[(10, 0, 3)].action == "skip" and by[(10, 0, 3)].env == {}
    assert by[(10, 0, 4)].rss == 123456 and by[(10, 0, 4)].at_call == {}
    assert by[(10, 0, 5)].at_call == {"pending_jobs": 3} and by[(10, 0, 5)].rss is None
    blocked = by[(10, 0, 9)]
    assert blocked.blocked and blocked.action == "" and blocked.call_id not in blocked.proc.calls
    assert by[(10, 0, 10)].at_exit and not by[(10, 0, 11)].at_exit
    assert by[(10, 0, 12)].by_interpreter and not by[(10, 0, 11)].by_interpreter \
        and not by[(10, 0, 10)].by_interpreter and type(by[(10, 0, 12)]).__name__ == "RichCall"
    assert by[(11, 0, 1)].mp_main and not by[(11, 0, 2)].mp_main
    after = by[(10, 1, 1)]
    assert after.gen == 1 and after.proc is by[(10, 0, 1)].proc and after is not by[(10, 0, 1)]
    assert len(model.calls) == 12


def test_a_view_of_some_runs_keeps_their_calls_and_of_every_run_all_in_order() -> None:
    """The view's calls are its chosen processes' calls in the model's order: every call when every process is
    chosen (a copy: the findings' list is their own), only the chosen run's otherwise, never a process outside a
    run."""
    from wp_autotrace.analysis.derive.view import View

    frame = {"file": "/u/a.py", "line": 3, "func": "f"}
    records: list[dict[str, Any]] = []
    for pid, run in ((10, "r1"), (20, "r2")):
        records.append({"v": 1, "event": "process_start", "ts": T0 + pid / 100, "pid": pid, "ppid": 1, "host": "h",
                        "role": "main", "seq": 0, "argv": ["python", "a.py"], "forked": False, "run": run})
    records += [_call(10 if i % 2 else 20, i + 1, 1 + i / 10, frame, ["Main"]) for i in range(6)]
    records.append(_call(30, 1, 2.0, frame, ["Main"]))  # no process_start: the run "" (finish.py)
    model = Builder().fold(sorted(records, key=lambda r: r["ts"]))
    runs = {r.id: r for r in model.runs.values()}
    assert len(model.calls) == 7 and sorted(runs) == ["", "r1", "r2"]
    both = View(model, [runs["r1"], runs["r2"]], T0 + 3)
    assert both.calls == [c for c in model.calls if c.proc.pid != 30] and len(both.calls) == 6
    r2 = View(model, [runs["r2"]], T0 + 3)
    assert [c.proc.pid for c in r2.calls] == [20, 20, 20] and r2.calls == [c for c in model.calls if c.proc.pid == 20]
    every = View(model, list(runs.values()), T0 + 3)  # every process chosen: every call, in order, a list of its own
    assert every.calls == model.calls and every.calls is not model.calls
