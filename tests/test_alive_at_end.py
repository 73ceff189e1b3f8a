"""A process or pool no record saw end is "still running at the end of the log" (with a "holding" figure, and
`cleanup` first in the Fix) only where a record shows it alive then: its run's watcher still writing within its
own pace of the log's last record (derive/alive.py; docs/evidence.md, "Alive at the end"). Where the watcher
stopped writing long before (killed with the program's group, stalled, the log cut), the ending says when it was
last seen and that no record shows more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .logs import SP, LogWriter, call, start, watcher
from .test_floors import _flat, _mem, _outputs, killed_run_then_a_later_run

MIB = 2**20
DYNAMO = "torch._dynamo.eval_frame:_TorchDynamoContext.__call__"


def _killed_run(w: LogWriter, read_until: float | None = None) -> None:
    """Main 100 makes a pool (sidecar 200) read at 1.0 s (100 MiB); its calls go on to 30.1 s; no end of anything.
    read_until: the watcher goes on reading the sidecar every 2 s up to then (it stayed)."""
    start(w, 0, 100, 1, "main")
    call(w, 0.5, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 0.6, sidecar_pid=200)
    start(w, 0.55, 200, 100, "compile-sidecar")
    _mem(w, 1.0, p200=100)
    t = 3.0
    while read_until is not None and t <= read_until:
        _mem(w, t, p200=100)
        t += 2.0
    for k in range(10):
        call(w, 3 + 3 * k, 100, 1, "main", DYNAMO, 10 + k, 3.1 + 3 * k)


def _process(rep: dict[str, Any], pid: int) -> dict[str, Any]:
    return next(p for p in rep["processes"] if p["pid"] == pid)


def test_a_pool_its_stopped_watcher_last_read_is_not_told_running(tmp_path: Path) -> None:
    w = LogWriter()
    _killed_run(w)
    rep, text, page = _outputs(w, tmp_path)
    pool = rep["pools"][0]
    assert pool["ending"]["kind"] == "end-unseen" and pool["ending"]["last_seen"] == 1.0
    assert "last seen at 1.0 s; no watcher record after 1.0 s: whether it still runs, no record shows" \
        in pool["ending"]["words"]
    assert _process(rep, 200)["ending"]["kind"] == "end-unseen"
    assert pool["alive_at_end"] is False and pool["idle_to"] == 1.0 and pool["sidecar_exit"] == "end not seen"
    answer = _flat(rep["answer"])
    assert "still running at the end of the log" not in answer and "holding" not in answer
    assert "peak 100 MiB real memory (PSS); last seen at 1.0 s" in answer
    assert "check with `ps` whether they still run" in answer and "end what is left" not in answer
    assert "still running at the end of the log" not in text and "still running" not in page


def test_a_killed_runs_pool_is_not_running_at_a_later_runs_end(tmp_path: Path) -> None:
    # run r0's pool read at 1.0 s, then everything SIGKILLed: no ends; run r1 100 s later shuts its own down
    rep, text, _ = _outputs(killed_run_then_a_later_run((101, 50)), tmp_path)
    by_side = {p["sidecar_pid"]: p for p in rep["pools"]}
    assert by_side[60]["ending"]["kind"] == "end-unseen" and by_side[60]["ending"]["last_seen"] == 1.0
    assert by_side[200]["ending"]["kind"] == "shutdown-completed"
    assert "still running at the end of the log" not in text


def test_a_pool_its_watcher_read_to_the_end_is_still_running(tmp_path: Path) -> None:
    w = LogWriter()
    _killed_run(w, read_until=30.0)
    rep, _, _ = _outputs(w, tmp_path)
    pool = rep["pools"][0]
    assert pool["ending"]["kind"] == "running" and "last_seen" not in pool["ending"]
    assert pool["alive_at_end"] is True and pool["sidecar_exit"] == "still running"
    answer = _flat(rep["answer"])
    # said once, by its ending's words after what it held (its lifespan's words had said it too)
    assert "holding 100 MiB real memory (PSS); still running at the end of the log" in answer
    assert answer.count("still running at the end of the log") == 1, answer
    assert "end what is left with `wp-autotrace cleanup LOG`" in answer


def _child_run(w: LogWriter, keepalive: float | None) -> None:
    """Main 100 and a plain child 300 the watcher listed at 1.0 s (no memory of it read: a keep-alive's pace);
    main's records go on to 100 s; the watcher's keep-alive tree record at `keepalive` (None: none)."""
    start(w, 0, 100, 1, "main")
    watcher(w, 1.0, "tree", count=2, final=False, started=[
        {"pid": 100, "ppid": 1, "name": "python", "cmd": "python main.py", "create_time": 1.0, "rss": MIB},
        {"pid": 300, "ppid": 100, "name": "sleep", "cmd": "sleep 1000", "create_time": 1.5, "rss": MIB}])
    if keepalive is not None:
        watcher(w, keepalive, "tree", count=2, final=False, rss=[{"pid": 100, "create_time": 1.0, "rss": MIB},
                                                                  {"pid": 300, "create_time": 1.5, "rss": MIB}])
    for k in range(10):
        call(w, 10 + 10 * k, 100, 1, "main", DYNAMO, 10 + k, 10.1 + 10 * k)


def test_a_plain_child_is_running_only_within_the_watchers_keepalive(tmp_path: Path) -> None:
    w = LogWriter()
    _child_run(w, None)
    rep, _, _ = _outputs(w, tmp_path)
    ending = _process(rep, 300)["ending"]
    assert ending["kind"] == "end-unseen" and "no watcher record after 1.0 s" in ending["words"]
    w = LogWriter()
    _child_run(w, 61.0)  # the keep-alive 60 s after: the watcher wrote within its pace of the log's end
    rep, _, _ = _outputs(w, tmp_path)
    assert _process(rep, 300)["ending"]["kind"] == "running"


def test_a_real_child_left_running_is_told_running_at_the_end(tmp_path: Path) -> None:
    """A traced run leaves a child running (its own session); the watcher writes its verdict, lingers and exits:
    its records reach the log's end, so the child is still running at the end of the log, as psutil sees it."""
    import os
    import signal
    import subprocess
    import sys

    import psutil

    from .conftest import clean_env, report_json, wait_for_watcher

    log = tmp_path / "run.jsonl"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
            "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); "
            "print(p.pid)")
    root = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="2"))
    pid = int(root.stdout)
    try:
        wait_for_watcher(log, 60)  # its watcher_exit: the verdict written, the linger over
        assert psutil.Process(pid).is_running()  # the test's own look: alive as the report is read
        rep = report_json(log)
        assert pid in rep["leftover_pids"], rep["leftover_pids"]
        assert _process(rep, pid)["ending"]["kind"] == "running", _process(rep, pid)["ending"]
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_main_the_reader_finds_alive_is_running_whatever_its_watcher_wrote(tmp_path: Path) -> None:
    """The run's main, its watcher's last record at 1.0 s and its child's calls to 100 s: read on its host with its
    pid and create time alive (this test's own process), it is running at the end of the log (the reader's look
    is the record); read elsewhere, whether it still runs no record shows."""
    import os

    from wp_autotrace.analysis.fold.verdict import Reader, this_host
    from wp_autotrace.common.procfs import own_create_time

    from .logs import T0, report

    def log() -> LogWriter:
        w = LogWriter(host=this_host())
        pid = os.getpid()
        w.add(0, pid, 1, "main", "process_start", argv=["python", "main.py"], python="3.11.7", forked=False, env={},
              run="r1", root_pid=pid, create_time=own_create_time())
        w.add(1.0, 900, pid, "watcher", "tree", run="r1", root_pid=pid, count=1, final=False, started=[
            {"pid": pid, "ppid": 1, "name": "python", "cmd": "python main.py", "create_time": own_create_time(),
             "rss": MIB, "role": "main", "via": "root"}], ended=[])
        w.add(1.5, 300, pid, "child", "process_start", argv=["python", "child.py"], python="3.11.7", forked=False,
              env={}, run="r1", root_pid=pid)
        for k in range(10):  # its child writes on to 100 s: the main's own last record stays at 0 s
            call(w, 10 + 10 * k, 300, pid, "child", DYNAMO, 10 + k, 10.1 + 10 * k)
        return w

    here = report(log(), tmp_path, reader=Reader(T0 + 200, this_host()))
    assert here["runs"][0]["alive_now"] is True, here["runs"][0]
    assert _process(here, os.getpid())["ending"]["kind"] == "running"
    away = report(log(), tmp_path, reader=Reader(T0 + 200, "another-host"))  # this host's pids say nothing there
    assert _process(away, os.getpid())["ending"]["kind"] == "end-unseen"
