"""The log's descriptor, as a traced program sees its own descriptors (issue 34; issue 28 items 6, 15).

A process that records no hot calls holds no descriptor of the log between two records; one that does
holds it high, where the program's own open() never lands. A record never lands in a file of the
program's, and records lost to a full disk are counted in the log once it has room.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.runtime.held import HELD_FD_BELOW, HELD_FD_CEILING, hold
from wp_autotrace.runtime.sink import Sink

from .conftest import clean_env, events, read_log, run_python, tiny_tmpfs, wait_for_watcher

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a tmpfs mount)")

FD_VIEW = textwrap.dedent('''
    import os, subprocess, sys
    log = os.environ.get("WP_AUTOTRACE_LOG", "")

    def view(who):
        """This process's descriptors as a program sees them: numbers, whether one is the log, next open()."""
        fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
        links = []
        for fd in fds:
            try:
                links.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        first = os.open(os.devnull, os.O_RDONLY)
        os.close(first)
        print(who, fds, first, log != "" and log in links, flush=True)

    if sys.argv[1:] == ["child"]:
        view("child")
        sys.exit()
    view("root")
    r, w = os.pipe()
    # As CPython's test_pass_fds: a child started with close_fds and pass_fds lists what it holds.
    subprocess.run([sys.executable, __file__, "child"], close_fds=True, pass_fds=(w,), check=True)
    pid = os.fork()
    if pid == 0:
        view("forked")
        os._exit(0)
    os.waitpid(pid, 0)
''')


def test_a_traced_program_finds_no_log_among_its_descriptors(tmp_path: Path) -> None:
    """Root, a started child (close_fds, pass_fds) and a forked child list /proc/self/fd: the same
    numbers as untraced, none of them the log, and the next open() gets the untraced number
    (fails on the sink that held the log's fd in every process)."""
    script, log = tmp_path / "fds.py", tmp_path / "run.jsonl"
    script.write_text(FD_VIEW)
    plain = run_python([str(script)], clean_env(), timeout=60)
    traced = run_python([str(script)], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), timeout=60)
    assert plain.returncode == 0 and traced.returncode == 0, (plain.stderr, traced.stderr)
    assert [line.endswith("False") for line in traced.stdout.splitlines()] == [True] * 3, traced.stdout
    assert traced.stdout == plain.stdout
    assert len(events(read_log(log), "process_start")) == 3


HOLDER = textwrap.dedent('''
    import json, os
    json.dumps([1])                            # a traced target: this process records calls
    log = os.environ["WP_AUTOTRACE_LOG"]
    held = [int(n) for n in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{n}") == log]
    first = os.open(os.devnull, os.O_RDONLY)
    print(held, first)
''')


def test_a_process_recording_calls_holds_the_log_high(tmp_path: Path) -> None:
    """A process that records calls holds one descriptor, near the ceiling: its open() numbers are the
    untraced ones (fails where the held fd takes the lowest free number)."""
    script, log = tmp_path / "h.py", tmp_path / "run.jsonl"
    script.write_text(HOLDER)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_TARGETS="json:dumps",
                    WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python([str(script)], env, timeout=60)
    plain = run_python([str(script)], clean_env(WP_AUTOTRACE_LOG=str(log)), timeout=60)
    assert res.returncode == 0, res.stderr
    held, first = res.stdout.rsplit(" ", 1)
    (fd,) = eval(held)
    soft = int(subprocess.run(["sh", "-c", "ulimit -n"], capture_output=True, text=True).stdout.strip() or 0)
    ceiling = min(soft, HELD_FD_CEILING) if soft else HELD_FD_CEILING
    assert ceiling - HELD_FD_BELOW <= fd < ceiling
    assert first == plain.stdout.rsplit(" ", 1)[1]
    assert [r["event"] for r in read_log(log) if r["event"] in ("call", "return")] == ["call", "return"]



@pytest.mark.parametrize(("soft", "watched"), [(16, False), (67, False), (20, True)])
def test_a_low_descriptor_limit_leaves_the_recording_process_released(tmp_path: Path, soft: int,
                                                                      watched: bool) -> None:
    """A soft RLIMIT_NOFILE under 2 * HELD_FD_BELOW leaves no number above the program's first ones to hold the
    log at, so the process stays released and its open() numbers are the untraced ones (fails where the
    descriptor the start opened, a low one, was kept as the held one: the program's first open() got the
    next). Its watcher still starts, from the descriptor the root lends it (fails where the spawn was handed
    the released sink's -1: "could not start the process-tree watcher" on the program's stderr)."""
    script, log = tmp_path / "h.py", tmp_path / "run.jsonl"
    script.write_text(HOLDER)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_TARGETS="json:dumps",
                    **({} if watched else {"WP_AUTOTRACE_SAMPLE_INTERVAL": "0"}))
    # The shell is not traced: the limit is the root's own from its start, as `ulimit -n` in a job script.
    limited = ["-c", f'ulimit -n {soft} && exec "$0" "$1"', sys.executable, str(script)]
    res = run_python(limited, env, timeout=60, python="/bin/sh")
    plain = run_python(limited, clean_env(WP_AUTOTRACE_LOG=str(log)), timeout=60, python="/bin/sh")
    assert (res.returncode, res.stderr, plain.returncode) == (0, "", 0), res.stderr + plain.stderr
    assert res.stdout == plain.stdout == f"[] {plain.stdout.split()[-1]}\n"
    records = wait_for_watcher(log) if watched else read_log(log)
    assert [r["event"] for r in records if r["event"] in ("call", "return")] == ["call", "return"]
    if watched:
        assert events(records, "watcher_start") and events(records, "tree")


REUSE = textwrap.dedent('''
    import os, sys
    log, mine = os.environ["WP_AUTOTRACE_LOG"], sys.argv[1]
    was_log = [int(n) for n in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{n}") == log]
    os.unlink(log)
    os.closerange(3, 4096)                    # as daemons do: the log's inode is free now
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)   # ext4 hands the inode out again
    for old in was_log:                       # and the daemon puts its file where the log's fd was
        os.dup2(fd, old)
    os.write(fd, b"mine\\n")
    print("done")
''')


def test_closerange_then_a_new_file_never_receives_a_record(tmp_path: Path) -> None:
    """The log removed, every descriptor closed, a new file at the old number (on ext4 even with the
    log's inode number): that file never receives the exit record (fails on the sink that trusted a held
    fd's device and inode)."""
    script, log, mine = tmp_path / "r.py", tmp_path / "run.jsonl", tmp_path / "mine.txt"
    script.write_text(REUSE)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python([str(script), str(mine)], env, timeout=60)
    assert (res.returncode, res.stdout) == (0, "done\n"), res.stderr
    assert mine.read_bytes() == b"mine\n"
    assert res.stderr == ""  # the log gone: its records are lost silently, as ever


def test_released_sink_follows_the_path_and_never_another_file(tmp_path: Path) -> None:
    """Released, each record opens the path: the log replaced by another file gets nothing (counted as
    dropped); the same file put back takes records again."""
    log = tmp_path / "run.jsonl"
    sink = Sink(str(log), "h", "main")
    sink.release()
    assert not sink.held
    sink.emit("a")
    os.rename(log, tmp_path / "kept.jsonl")
    log.write_bytes(b"")
    log.chmod(0o600)
    sink.emit("b")
    assert sink.dropped == 1 and log.read_bytes() == b""
    os.replace(tmp_path / "kept.jsonl", log)
    sink.emit("c")
    assert [r["event"] for r in read_log(log)] == ["a", "c"]
    hold(sink)
    assert sink.held and sink.fd >= min(HELD_FD_CEILING, 64) - HELD_FD_BELOW
    sink.emit("d")
    assert [r["event"] for r in read_log(log)] == ["a", "c", "d"]


@needs_root
@pytest.mark.parametrize("mode", ["released", "held"])
def test_records_lost_to_a_full_disk_are_counted_in_the_log(tmp_path: Path, mode: str) -> None:
    """A 64 KiB tmpfs fills: once space returns, the next record that lands is followed by a
    tracer_error with the count lost so far (fails where the count waited for process_exit)."""
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        log = mnt / "full.jsonl"
        sink = Sink(str(log), "h", "main")
        sink.say_drops = True
        if mode == "released":
            sink.release()
        with open(mnt / "filler", "wb") as f:
            f.write(b"x" * (60 * 1024))
        for i in range(10):
            sink.emit("call", call_id=i, big="y" * 3000)
        lost = sink.dropped
        assert lost >= 8
        (mnt / "filler").unlink()
        sink.emit("return", call_id=100)
        sink.emit("return", call_id=101)
        tail = [r for r in _records(log) if r["event"] in ("return", "tracer_error")]
        assert [(r["event"], r.get("dropped")) for r in tail] == [
            ("return", None), ("tracer_error", lost), ("return", None)]
        assert tail[1]["seq"] == tail[0]["seq"] + 1 == tail[2]["seq"] - 1


def _records(log: Path) -> list[dict[str, Any]]:
    """The log's records; a fragment a full disk cut short is skipped, as readers do."""
    found = []
    for line in log.read_bytes().split(b"\n"):
        try:
            found.append(json.loads(line))
        except ValueError:
            pass
    return found


EMFILE = textwrap.dedent('''
    import os, resource, sys
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    fds = []
    try:
        while True:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    pid = os.fork()                           # a traced record (the child's process_start) at EMFILE
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    if "wp_autotrace.runtime.bootstrap" in sys.modules:   # traced: a record of the main's own, due now
        sys.modules["wp_autotrace.runtime.bootstrap"]._runtime.sink.emit("role", role="main")
    for fd in fds:
        os.close(fd)
    print(len(fds))
''')


def test_as_many_files_before_emfile_and_nothing_said_there(tmp_path: Path) -> None:
    """RLIMIT_NOFILE 64: a traced program opens as many files as untraced before EMFILE; a record due
    while it holds them all is lost silently (counted), never a line on its stderr (fails on the sink that
    held the log's fd: one file fewer)."""
    script, log = tmp_path / "e.py", tmp_path / "run.jsonl"
    script.write_text(EMFILE)
    plain = run_python([str(script)], clean_env(), timeout=60)
    traced = run_python([str(script)], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), timeout=60)
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 0 and int(plain.stdout) > 50
    (end,) = [r for r in events(read_log(log), "process_exit") if r["role"] == "main"]
    assert end["dropped"] == 1  # the record due at EMFILE: lost, counted


FILL = textwrap.dedent('''
    import json, os, sys
    mnt, then = sys.argv[1], sys.argv[2]
    try:
        with open(os.path.join(mnt, "filler"), "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
    except OSError:
        pass
    for i in range(300):
        json.dumps([i])                       # traced: call and return records the full disk refuses
    if then.startswith("free"):
        os.unlink(os.path.join(mnt, "filler"))
        json.dumps(["after"])
    print("done", flush=True)
    if then == "free-os-exit":
        os._exit(0)                           # no process_exit: the count said when space returned is all
''')


def _full_disk_run(tmp_path: Path, then: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A traced main fills its log's 64 KiB tmpfs, loses its records, then frees the space (then="free")
    or exits with the disk still full (the space returns after its end); its log's records, and the report."""
    from .conftest import report_json

    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        log, script = mnt / "run.jsonl", tmp_path / "fill.py"
        script.write_text(FILL)
        env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_TARGETS="json:dumps",
                        WP_AUTOTRACE_SAMPLE_INTERVAL="0.02")
        res = run_python([str(script), str(mnt), then], env, timeout=60)
        assert (res.returncode, res.stdout) == (0, "done\n"), res.stderr
        if (mnt / "filler").exists():
            # The space returns after the main's end, once the watcher has tried to write (the main's end
            # seen: its tree record is refused, and retried each tick); then it catches up.
            (run,) = {r["run"] for r in _records(log) if r["event"] == "process_start"}
            watcher = _watcher_pid(run)
            before = _write_calls(watcher)
            deadline = time.monotonic() + 10
            while _write_calls(watcher) == before and time.monotonic() < deadline:
                time.sleep(0.01)
            (mnt / "filler").unlink()
        deadline = time.monotonic() + 20
        while not any(r["event"] == "watcher_exit" for r in _records(log)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return _records(log), report_json(log)


@needs_root
@pytest.mark.parametrize("then", ["free", "free-os-exit"])
def test_full_disk_the_main_counts_its_lost_records_when_space_returns(tmp_path: Path, then: str) -> None:
    """The main loses ~600 records to a full disk, then frees it: a tracer_error with the count lands
    right after its next record, and the report counts them once (not once per saying), also when no
    process_exit follows (os._exit; fails where only process_exit's count was read)."""
    records, report = _full_disk_run(tmp_path, then)
    main = [r for r in records if r.get("role") == "main"]
    said = [r["dropped"] for r in main if r["event"] == "tracer_error" and r.get("where") == "log"]
    ends = [r["dropped"] for r in main if r["event"] == "process_exit"]
    assert said and said[0] >= 500 and ends == ([said[-1]] if then == "free" else []), (said, ends)
    (finding,) = [f for f in report["findings"] if f["kind"] == "tracer-errors"]
    assert finding["cost"]["records_dropped"] == said[-1], finding


@needs_root
def test_full_disk_at_exit_is_not_called_a_kill(tmp_path: Path) -> None:
    """The main exits cleanly while its log's disk is full: its process_exit is lost. The report must not
    say it was killed or that its exit handlers did not run (issue 28 item 6); it says records were lost."""
    records, report = _full_disk_run(tmp_path, "kept")
    assert not [r for r in records if r.get("role") == "main" and r["event"] == "process_exit"]
    assert any(r["event"] == "watcher_exit" for r in records), "the watcher never caught up"
    text = " ".join(f["text"] + " " + f["advice"] for f in report["findings"])
    assert "did not run" not in text and "OOM" not in text and "(killed, or os._exit)" not in text, text
    assert "its process_exit may be one of them" in text, text
    (killed,) = [f for f in report["findings"] if f["kind"] == "root-killed"]
    assert killed["severity"] == "warning"
    from wp_autotrace.analysis.present.render import render_text

    assert "(killed, or os._exit" not in render_text(report, {})
    assert report["runs"][0]["records_lost"] >= 1


def _watcher_pid(run: str) -> int:
    """The pid of the run's watcher (``wp-autotrace-watch RUN`` in its argv)."""
    mark = f"wp-autotrace-watch\0{run}\0".encode()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark in Path(f"/proc/{name}/cmdline").read_bytes():
                return int(name)
        except OSError:
            pass
    raise AssertionError(f"no watcher for run {run}")


def _write_calls(pid: int) -> int:
    """write() calls the process made so far, failed ones included (/proc/PID/io syscw); -1 once it ended."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return -1
    return int(text.split("syscw:")[1].split()[0])


# A program that ends with every descriptor it may have in use (it opened files until EMFILE).
FULL_TABLE = textwrap.dedent('''
    import os
    fds = []
    try:
        while True:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        print("full", exc.errno, flush=True)
''')
# Starts FULL_TABLE traced (the root of its run) under a soft descriptor limit of 64: an untraced launcher
# sets the limit and execs, so the program itself never loads `resource`.
FULL_LAUNCHER = ("import os, resource, sys\n"
                 "resource.setrlimit(resource.RLIMIT_NOFILE, (64, int(sys.argv[2])))\n"
                 "env = dict(os.environ, WP_AUTOTRACE='1')\n"
                 "os.execve(sys.executable, [sys.executable, '-c', sys.argv[1]], env)\n")


@pytest.mark.parametrize("room", [True, False], ids=["hard-limit-above", "hard-limit-reached"])
def test_a_program_that_exits_with_its_table_full_keeps_its_stderr_and_its_exit(tmp_path: Path, room: bool) -> None:
    """Nothing is imported at exit (an import opens a file: with the table full it failed, printed a
    `wp-autotrace: exit: OSError` line on the program's stderr and lost process_exit). Where the hard limit
    leaves room, the exit record takes one descriptor above the soft limit for its write, and lands."""
    import resource

    log = tmp_path / "run.jsonl"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if room else 64
    if room and hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip("the hard descriptor limit leaves no room above 64")
    env = clean_env(WP_AUTOTRACE="0", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-c", FULL_LAUNCHER, FULL_TABLE, str(hard)], env, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "full 24\n", res.stderr
    assert res.stderr == ""
    recs = read_log(log)
    assert [r["event"] for r in recs][0] == "process_start"
    exits = events(recs, "process_exit")
    if room:
        assert len(exits) == 1 and exits[0]["how"] == "exit" and exits[0]["dropped"] == 0
    else:  # nowhere to write it: lost (docs/guarantees.md says what a reader makes of that)
        assert exits == []


# FULL_TABLE's program with its EMFILE uncaught: Python prints the traceback, sets sys.last_value, then runs the
# exit handlers (the tracer's reads the exception for process_exit's `error`).
FULL_TABLE_UNCAUGHT = textwrap.dedent('''
    import os
    fds = []
    while True:
        fds.append(os.open(os.devnull, os.O_RDONLY))
''')


@pytest.mark.parametrize("room", [True, False], ids=["hard-limit-above", "hard-limit-reached"])
def test_a_program_an_uncaught_emfile_ends_keeps_its_stderr_and_its_exit(tmp_path: Path, room: bool) -> None:
    """The exit of a program an uncaught exception ends imports runtime/reads for process_exit's `error`: with the
    table full that import found no descriptor, printed `wp-autotrace: exit: OSError ... reads.py` under the
    program's own traceback and lost the exit record (and, at the hard limit, the note that says it was lost:
    the report then said "killed, or os._exit"). The error is best effort; the exit record, or its note, is not."""
    import resource

    from .conftest import wait_for_watcher

    log = tmp_path / "run.jsonl"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if room else 64
    if room and hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip("the hard descriptor limit leaves no room above 64")
    env = clean_env(WP_AUTOTRACE="0", WP_AUTOTRACE_LOG=str(log))
    res = run_python(["-c", FULL_LAUNCHER, FULL_TABLE_UNCAUGHT, str(hard)], env, cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.rstrip().endswith("OSError: [Errno 24] Too many open files: "
                                                                 f"{os.devnull!r}"), res.stderr
    assert "wp-autotrace" not in res.stderr, res.stderr
    recs = wait_for_watcher(log, timeout=60)
    (start,) = [r for r in events(recs, "process_start") if r["role"] == "main"]
    if room:
        (done,) = events(recs, "process_exit")
        assert done["pid"] == start["pid"] and done["how"] == "exit", done
    else:  # nowhere to write it: the note says it was lost, never a kill
        (lost,) = events(recs, "exit_unwritten")
        assert lost["exited_pid"] == start["pid"] and lost["how"] == "exit", lost


@pytest.mark.parametrize("room", [True, False], ids=["hard-limit-above", "hard-limit-reached"])
def test_an_exit_with_the_table_full_keeps_its_record_where_no_start_pack_is_written(tmp_path: Path,
                                                                                      room: bool) -> None:
    """PYTHONDONTWRITEBYTECODE (-B; set in many container images) never writes the start pack, and here no pack is
    found (an empty pycache prefix): the sink's rare exit path (a descriptor above the soft limit, or the note that
    says the record was lost) is a LATER module, whose code must be in memory before the table fills: read at its
    first need it found no descriptor free, and the exit record (or the note) was lost, said "killed" then."""
    import resource

    from .conftest import wait_for_watcher

    log = tmp_path / "run.jsonl"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if room else 64
    if room and hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip("the hard descriptor limit leaves no room above 64")
    env = clean_env(WP_AUTOTRACE="0", WP_AUTOTRACE_LOG=str(log), PYTHONDONTWRITEBYTECODE="1",
                    PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    res = run_python(["-c", FULL_LAUNCHER, FULL_TABLE, str(hard)], env, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "full 24\n" and res.stderr == "", res.stderr
    recs = wait_for_watcher(log, timeout=60)
    (start,) = [r for r in events(recs, "process_start") if r["role"] == "main"]
    if room:
        (done,) = events(recs, "process_exit")
        assert done["pid"] == start["pid"] and done["how"] == "exit", done
    else:
        (lost,) = events(recs, "exit_unwritten")
        assert lost["exited_pid"] == start["pid"] and lost["how"] == "exit", lost
    assert not list((tmp_path / "pycache").rglob("_startpack*"))  # none written: the case under test


def test_an_exit_record_no_descriptor_could_hold_is_counted_lost_not_a_kill(tmp_path: Path) -> None:
    """Soft and hard NOFILE limits equal (64) and the table full at exit: process_exit has no descriptor to be
    written with, not even one above the soft limit. The program leaves a note (a symlink: no descriptor
    needed), the watcher turns it into an exit_unwritten record when it sees the program end, and the report
    counts the record lost: the main process is never said killed, nor to have skipped its exit handlers."""
    from .conftest import report_json, wait_for_watcher

    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="0", WP_AUTOTRACE_LOG=str(log))
    res = run_python(["-c", FULL_LAUNCHER, FULL_TABLE, "64"], env, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "full 24\n" and res.stderr == "", res.stderr
    recs = wait_for_watcher(log, timeout=60)
    (start,) = [r for r in events(recs, "process_start") if r["role"] == "main"]
    assert events(recs, "process_exit") == []
    (lost,) = events(recs, "exit_unwritten")
    assert lost["exited_pid"] == start["pid"] and lost["how"] == "exit" and lost["dropped"] >= 1, lost
    assert not list(tmp_path.glob("run.jsonl.exit-unwritten.*"))  # the watcher removed the note it read
    rep = report_json(log)
    (run,) = rep["runs"]
    assert run["state"] != "killed" and run["records_lost"] >= 1, run
    main = next(p for p in rep["processes"] if p["pid"] == start["pid"])
    text = json.dumps(main["ending"]) + rep["answer"] + json.dumps(rep["findings"])
    for word in ("killed", "os._exit", "exit handlers did not run", "SIGKILL"):
        assert word not in text, (word, main["ending"], rep["answer"])


def test_a_childs_exit_record_lost_to_a_full_table_is_its_ending_not_a_kill(tmp_path: Path) -> None:
    """A traced child (not the main) whose process_exit found no descriptor: the watcher's exit_unwritten makes
    its ending "exited; ... no descriptor free", its record counted lost; one naming the same pid from another
    run's watcher says nothing of it."""
    from .logs import T0, LogWriter, report, start, watcher

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    start(w, 1, 101, 100, "child")
    watcher(w, 1.1, "tree", count=2, ended=[], started=[{"pid": 101, "ppid": 100, "rss": 5 << 20, "via": "child",
                                                          "create_time": T0 + 1}])
    watcher(w, 3.0, "tree", count=1, started=[], ended=[{"pid": 101, "create_time": T0 + 1, "end": T0 + 3.0}])
    w.add(3.0, 900, 100, "watcher", "exit_unwritten", run="other", root_pid=100, exited_pid=101,
          create_time=T0 + 1, how="exit", dropped=5)
    plain = report(w, tmp_path)
    (child,) = [p for p in plain["processes"] if p["pid"] == 101]
    assert "descriptor" not in child["ending"]["words"] and plain["runs"][0]["records_lost"] == 0, plain["runs"]
    watcher(w, 3.0, "exit_unwritten", exited_pid=101, create_time=T0 + 1, noted=T0 + 2.9, how="exit", dropped=1)
    w.add(4, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    rep = report(w, tmp_path)
    (child,) = [p for p in rep["processes"] if p["pid"] == 101]
    assert child["ending"]["kind"] == "exit" and "no descriptor free" in child["ending"]["words"], child["ending"]
    assert rep["runs"][0]["records_lost"] == 1 and 101 not in rep["no_exit_pids"], rep["runs"][0]


def test_a_held_descriptor_is_known_by_its_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A held descriptor carries the log's mark (held.mark: its description's I/O signal), so each record's check
    is one fcntl and no fstat; a file the program puts at that number (dup2) carries none: the record goes to
    the log, reopened, never into that file (fails where every record's check was fstat's st_dev/st_ino)."""
    from wp_autotrace.runtime import sink as sink_module

    log, mine = tmp_path / "run.jsonl", tmp_path / "mine.txt"
    sink = Sink(str(log), "h", "main")
    hold(sink)
    if sink._mark is None:
        pytest.skip("no F_SETSIG mark here (not Linux)")
    looked: list[int] = []
    real = sink_module._fstat
    monkeypatch.setattr(sink_module, "_fstat", lambda fd: looked.append(fd) or real(fd))
    for event in ("a", "b", "c"):
        sink.emit(event)
    assert looked == []
    held = sink.fd
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGIO)  # a file of the program's own asynchronous I/O
    os.dup2(fd, held)  # the program's own file at the log's number
    sink.emit("d")
    assert looked and sink.fd != held  # the mark missing: st_dev/st_ino looked at, and the log reopened
    sink.emit("e")
    os.write(held, b"mine\n")
    assert mine.read_bytes() == b"mine\n"
    assert [r["event"] for r in read_log(log)] == ["a", "b", "c", "d", "e"]
    for n in (fd, held):
        os.close(n)
