"""A real OOM kill, in a memory cgroup of the test's own (docs/evidence.md, `oom-kill`): the only evidence the
report accepts for "killed by the OOM killer" is the cgroup's OOM kill count rising at a process's end (the
watcher's `oom` record). The kernel does the killing here: the test makes a memory cgroup below its own, sets
its limit, starts the traced program inside it and reads the cgroup's count itself; it needs root and a
writable memory controller (cgroup v1's memory.limit_in_bytes, or v2's memory.max), and skips otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.words.fmt import size_text
from wp_autotrace.watcher.cgroups import MEMORY_KIND, PIDS_KIND, Cgroups, memory_limit, parse_cgroup

from .conftest import WaitTimeout, clean_env, needs_torch, read_log, report_json, wait_for_watcher, wait_until
from .logs import T0, LogWriter, report
from .procs import kill_run
from .test_endings import COMPILE_MARK, _cmdline, _finish, _start, _stat, _tree

MIB = 2**20
CG_ROOT = "/sys/fs/cgroup"
LIMIT_MIB = 256  # the child below allocates 600 MiB: well over the limit, whatever the interpreter holds
HEADROOM_MIB = 384  # the pool scenario's limit: what the pool holds when ready, plus this (a worker asks 1 GiB)


class MemCgroup:
    """A memory cgroup below this process's own: v1 (memory controller) or v2 (unified, memory enabled)."""

    def __init__(self, path: str, v1: bool) -> None:
        self.path, self.v1 = path, v1

    def write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def limit(self, nbytes: int) -> None:
        self.write("memory.limit_in_bytes" if self.v1 else "memory.max", str(nbytes))

    def usage(self) -> int:
        return int(self.read("memory.usage_in_bytes" if self.v1 else "memory.current"))

    def oom_kills(self) -> int:
        """The kernel's count of OOM kills in this cgroup, read by the test itself."""
        text = self.read("memory.oom_control" if self.v1 else "memory.events")
        return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill "))

    def enter(self) -> str:
        """A shell prefix that moves the shell into the cgroup before it execs the program."""
        return f"echo $$ > {shlex.quote(os.path.join(self.path, 'cgroup.procs'))} && exec "


def _own_path(controller: str) -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(",") or (controller == "" and names == ""):
                return path
    return None


def _make_cgroup() -> MemCgroup | None:
    name = f"wp-autotrace-oom-{uuid.uuid4().hex[:8]}"
    v1 = _own_path("memory")
    if v1 is not None and os.path.isdir(os.path.join(CG_ROOT, "memory")):
        path = os.path.join(CG_ROOT, "memory", v1.lstrip("/"), name)
        try:
            os.mkdir(path)
            return MemCgroup(path, v1=True)
        except OSError:
            pass
    v2 = _own_path("")
    for base in (CG_ROOT, os.path.join(CG_ROOT, "unified")):
        parent = os.path.join(base, (v2 or "/").lstrip("/"))
        try:
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if "memory" not in f.read().split():
                    continue
            path = os.path.join(parent, name)
            os.mkdir(path)
            return MemCgroup(path, v1=False)
        except OSError:
            continue
    return None


@pytest.fixture
def cgroup() -> Iterator[MemCgroup]:
    if os.geteuid() != 0:
        pytest.skip("making a memory cgroup needs root")
    cg = _make_cgroup()
    if cg is None:
        pytest.skip("no writable memory cgroup controller here")
    try:
        yield cg
    finally:
        procs = cg.read("cgroup.procs").split()
        for pid in procs:  # what the test started and left there, by pid
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        wait_until(lambda: not cg.read("cgroup.procs").split(), timeout=30)
        os.rmdir(cg.path)


def test_the_least_memory_limit_over_a_cgroup_is_read_once_per_cgroup(tmp_path: Path) -> None:
    """The watcher's reading (watcher/limits.py) on a made /proc and /sys/fs/cgroup: a process's memory cgroup from
    its /proc/PID/cgroup (v1's memory line first, else v2's), then the least limit on it or above it, and which cgroup
    set it (SLURM limits the job, not its step); `max` and v1's unlimited number are no limit; no readable file is
    unknown (None, no record); a second process in a cgroup already read reads no limit again."""
    root = tmp_path / "cg"

    def put(rel: str, name: str, text: str) -> None:
        (root / rel).mkdir(parents=True, exist_ok=True)
        (root / rel / name).write_text(text + "\n")

    step, job = "/slurm/uid_1000/job_7/step_batch", "/slurm/uid_1000/job_7"
    for rel, value in ((step, "max"), (job, str(768 << 20)), ("/slurm", "max")):
        put(rel.lstrip("/"), "memory.max", value)
    assert memory_limit(2, step, str(root)) == {"version": 2, "path": step, "file": "memory.max",
                                                 "limit": 768 << 20, "limit_path": job}
    put(step.lstrip("/"), "memory.max", str(512 << 20))  # the step's own, tighter, wins
    assert memory_limit(2, step, str(root)) == {"version": 2, "path": step, "file": "memory.max", "limit": 512 << 20}
    put("other", "memory.max", "max")
    assert memory_limit(2, "/other", str(root)) == {"version": 2, "path": "/other", "file": "memory.max"}
    put("memory/api/x", "memory.limit_in_bytes", "9223372036854771712")  # v1's unlimited
    put("memory", "memory.limit_in_bytes", "9223372036854771712")
    assert "limit" not in (memory_limit(1, "/api/x", str(root)) or {"limit": 0})
    put("unified/box", "memory.max", str(64 << 20))  # a hybrid host's v2 hierarchy
    assert (memory_limit(2, "/box", str(root)) or {}).get("limit") == 64 << 20
    assert memory_limit(2, "/nowhere", str(tmp_path / "empty")) is None  # unknown: no memory controller there
    assert parse_cgroup(b"9:name=systemd:/\n4:memory:/api/x\n0::/\n") == (1, "/api/x")
    assert parse_cgroup(b"0::/user.slice/job\n") == (2, "/user.slice/job")
    assert parse_cgroup(b"0::/../outside\n") is None and parse_cgroup(None) is None
    cgroups = Cgroups(MEMORY_KIND, str(root))
    first, second = {"pid": 11}, {"pid": 12}
    own = f"0::{step}\n".encode()
    put(step.lstrip("/"), "memory.peak", str(300 << 20))  # the peak charge of the limit's cgroup, read with it
    assert (cgroups.join(first, own) or {}).get("limit") == 512 << 20 and cgroups.join(second, own) is None
    put(step.lstrip("/"), "memory.peak", str(512 << 20))
    assert [(r["path"], r["peak"], r["final"]) for r in cgroups.again()] == [(step, 512 << 20, True)]
    assert first["memcg"] == second["memcg"] == step and "pidcg" not in first
    assert cgroups.join({"pid": 13}, None) is None  # gone: no entry field, no record


def test_a_pids_limit_and_its_refusals_are_read_where_the_kernel_counts_them(tmp_path: Path) -> None:
    """A container's pids cgroup (watcher/cgroups.py on a made /sys/fs/cgroup): pids.max, least over the cgroup and
    those above it, and pids.events' `max` count of refused forks and thread starts, read as the cgroup's first
    process joins and again at the watcher's end (again(): `final`). v1 counts in the forking task's own cgroup, read
    there; v2 before Linux 6.13 there too, from 6.13 in the one whose limit refused: with the limit above, both are
    read (`refused_own` the task's own). A cgroup with no limit has no count to read again."""
    root = tmp_path / "cg"

    def put(rel: str, name: str, text: str) -> None:
        (root / rel).mkdir(parents=True, exist_ok=True)
        (root / rel / name).write_text(text + "\n")

    put("pids/box", "pids.max", "24")  # v1: the container's limit, its task's own counts
    put("pids/box", "pids.events", "max 0")
    put("ctr", "pids.max", "32")  # v2: the limit one level up, the count there
    put("ctr", "pids.events", "max 2")
    put("ctr/step", "pids.max", "max")
    put("ctr/step", "pids.events", "max 0")
    put("free", "pids.max", "max")
    put("free", "pids.events", "max 0")
    cgroups = Cgroups(PIDS_KIND, str(root))
    v1, v2, free = {"pid": 21}, {"pid": 22}, {"pid": 23}
    assert cgroups.join(v1, b"12:pids:/box\n0::/\n") == {"version": 1, "path": "/box", "file": "pids.max",
                                                           "limit": 24, "refused": 0, "member": 21}
    assert cgroups.join(v2, b"0::/ctr/step\n") == {"version": 2, "path": "/ctr/step", "file": "pids.max",
                                                     "limit": 32, "limit_path": "/ctr", "refused": 2, "refused_own": 0,
                                                     "member": 22}
    assert cgroups.join(free, b"0::/free\n") == {"version": 2, "path": "/free", "file": "pids.max", "member": 23}
    assert v1["pidcg"] == "/box" and v2["pidcg"] == "/ctr/step"
    put("pids/box", "pids.events", "max 4")
    put("ctr", "pids.events", "max 3")
    again = [(r["path"], r["refused"], r.get("refused_own"), r["final"]) for r in cgroups.again()]
    assert again == [("/box", 4, None, True), ("/ctr/step", 3, 0, True)], again


def _pids_cgroup() -> str | None:
    """A pids cgroup below this process's own (v1's pids hierarchy, else v2 with pids enabled), made; None where
    none can be."""
    name = f"wp-autotrace-pids-{uuid.uuid4().hex[:8]}"
    v1, v2 = _own_path("pids"), _own_path("")
    places = [os.path.join(CG_ROOT, "pids", v1.lstrip("/"))] if v1 is not None else []
    for base in (CG_ROOT, os.path.join(CG_ROOT, "unified")):
        parent = os.path.join(base, (v2 or "/").lstrip("/"))
        try:
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if "pids" in f.read().split():
                    places.append(parent)
        except OSError:
            continue
    for parent in places:
        try:
            os.mkdir(os.path.join(parent, name))
            return os.path.join(parent, name)
        except OSError:
            continue
    return None


def test_the_refusals_of_a_real_pids_limit_are_counted_by_the_watcher(tmp_path: Path) -> None:
    """A real pids cgroup (a container's --pids-limit) with room for the traced main, its watcher and a few threads:
    the main waits until the watcher has read the cgroup, then starts threads until the kernel refuses them. The
    watcher's pidcg records (at the main's join, and `final` at its end) give the limit the test set and a rise of
    the kernel's count equal to the test's own reading of pids.events, and to the refusals the main saw."""
    if os.geteuid() != 0:
        pytest.skip("making a pids cgroup needs root")
    cg = _pids_cgroup()
    if cg is None:
        pytest.skip("no writable pids cgroup controller here")
    log = tmp_path / "log.jsonl"
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(f'''
        import threading, time
        deadline = time.monotonic() + 60
        while '"pidcg"' not in open({str(log)!r}).read() and time.monotonic() < deadline:
            time.sleep(0.05)
        go, started, refused = threading.Event(), [], 0
        for _ in range(40):
            t = threading.Thread(target=go.wait)
            try:
                t.start()
                started.append(t)
            except RuntimeError:
                refused += 1
        go.set()
        [t.join() for t in started]
        print("refused", refused, flush=True)
    '''))
    try:
        with open(os.path.join(cg, "pids.max"), "w") as f:
            f.write("16")
        with open(os.path.join(cg, "pids.events")) as f:
            before = int(f.read().split()[1])
        env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="1")
        res = subprocess.run(["sh", "-c", f"echo $$ > {shlex.quote(os.path.join(cg, 'cgroup.procs'))} && exec "
                              f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        seen = int(res.stdout.split()[-1]) if res.stdout.startswith("refused") else 0
        wait_for_watcher(log, timeout=60)
        with open(os.path.join(cg, "pids.events")) as f:
            after = int(f.read().split()[1])
    finally:
        procs = Path(cg, "cgroup.procs")
        for pid in procs.read_text().split():  # what the test started, by pid
            os.kill(int(pid), 9)
        wait_until(lambda: not procs.read_text().split(), timeout=30)
        os.rmdir(cg)
    assert res.returncode == 0 and seen > 0, (res.stdout, res.stderr[-2000:])
    recs = [r for r in read_log(log) if r["event"] == "pidcg"]
    assert [(r["limit"], r.get("final", False)) for r in recs] == [(16, False), (16, True)], recs
    assert recs[1]["refused"] - recs[0]["refused"] == after - before == seen, (recs, before, after, seen)


def _ending(rep: dict[str, Any], pid: int) -> dict[str, Any]:
    return next(p for p in rep["processes"] if p["pid"] == pid)["ending"]


def test_a_process_the_oom_killer_ends_is_named_with_its_record(tmp_path: Path, cgroup: MemCgroup) -> None:
    """A traced child asks for more than its cgroup allows; the kernel kills it. The report names it as the
    OOM killer's (the Answer first, the oom-killed finding), never as 'ended unseen', and the main process,
    which exited, as exited."""
    cgroup.limit(LIMIT_MIB * MIB)
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent('''
        import subprocess, sys
        r = subprocess.run([sys.executable, "child.py"])
        print("child", r.returncode, flush=True)
    '''))
    # the child asks for the memory once the watcher has listed it (its OOM kill count then rises as the child
    # ends: the evidence); under load a child quicker than the watcher's first look left no such record
    (tmp_path / "child.py").write_text(textwrap.dedent('''
        import os, time
        me, end = b'"pid":%d,' % os.getpid(), time.time() + 60
        while time.time() < end and not any(b'"event":"tree"' in x and me in x
                                            for x in open(os.environ["WP_AUTOTRACE_LOG"], "rb")):
            time.sleep(0.05)
        b = b"\\x01" * (600 << 20)
    '''))
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="2")
    before = cgroup.oom_kills()
    res = subprocess.run(["sh", "-c", cgroup.enter() + f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert res.returncode == 0 and "child -9" in res.stdout, (res.stdout, res.stderr[-2000:])
    assert cgroup.oom_kills() == before + 1  # the kernel's own count: one OOM kill, the child
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    child = next(p for p in rep["processes"] if p["role"] == "child")
    assert child["ending"]["kind"] == "oom-kill", child["ending"]
    main = next(p for p in rep["processes"] if p["role"] == "main")
    assert main["ending"]["kind"] == "exit"
    found = [f for f in rep["findings"] if f["kind"] == "oom-killed"]
    assert found and found[0]["pids"] == [child["pid"]] and found[0]["cost"]["oom_kills"] == 1
    assert child["pid"] not in rep["no_exit_pids"]
    assert "OOM killer ended child" in rep["answer"]
    # the limit the kernel enforced, read by the watcher once for the cgroup, against the test's own read of it
    limit = int(cgroup.read("memory.limit_in_bytes" if cgroup.v1 else "memory.max"))
    memcgs = [r for r in read_log(log) if r["event"] == "memcg"]
    own = os.path.basename(cgroup.path)
    assert [(r["path"].rsplit("/", 1)[-1], r["limit"], r.get("final")) for r in memcgs] == [
        (own, limit, None), (own, limit, True)], memcgs
    # and its peak charge: read at the join and at the watcher's end, against the test's own read after the run
    peak = int(cgroup.read("memory.max_usage_in_bytes" if cgroup.v1 else "memory.peak"))
    assert memcgs[1]["peak"] == peak and memcgs[0]["peak"] < peak, (memcgs, peak)
    whose = f"the charge of {memcgs[0]['path']} (every process in it counts, the run's or not)"
    reached = (f"{whose} reached it during the run (peak {size_text(peak)})" if peak >= limit * 0.99 else
               f"{whose} peaked at {size_text(peak)} during the run, under it")
    said = f"Its memory cgroup's limit was {LIMIT_MIB} MiB ({memcgs[0]['file']} of {memcgs[0]['path']}); {reached}."
    assert said in found[0]["text"], found[0]["text"]


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
def test_a_compile_worker_the_oom_killer_ends(tmp_path: Path, cgroup: MemCgroup) -> None:
    """FBGEMM#5930's shape: a compile worker asks for more than the job's cgroup has left and the kernel
    kills it. The report says that worker was the OOM killer's, that pool processes were alive then, and
    leads with the setting (TORCHINDUCTOR_COMPILE_THREADS=1); no other process is called the OOM killer's."""
    go = tmp_path / "go"
    body = f'''
        import operator, sys
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        pool = AsyncCompile.process_pool()
        print("sidecar", pool.process.pid, flush=True)
        idle(1)
        print("ready", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        try:
            pool.submit(operator.mul, b"\\x01", 1 << 30).result(timeout=120)  # a job that needs 1 GiB
        except Exception as exc:
            print("job:", type(exc).__name__, flush=True)
        idle(1)
    '''
    argv = ["sh", "-c", cgroup.enter() + f"{shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'train.py'))}"]
    proc, script, log = _start(tmp_path, body, argv=argv)
    assert proc.stdout is not None
    try:
        side = int(proc.stdout.readline().split()[1])
        assert proc.stdout.readline().strip() == "ready"
        workers = [p for p in _tree(side) if COMPILE_MARK in _cmdline(p)]
        assert workers
        cgroup.limit(cgroup.usage() + HEADROOM_MIB * MIB)
        before = cgroup.oom_kills()
        go.touch()
        wait_until(lambda: cgroup.oom_kills() > before, timeout=120)
        # the test's own look: the first worker(s) seen gone once the kernel counted the kill
        gone = wait_until(lambda: [w for w in workers if (st := _stat(w)) is None or st[0] == "Z"], timeout=60,
                          interval=0.005)
        out, err = _finish(proc, log)
        assert proc.returncode == 0, err[-3000:]
        wait_for_watcher(log, timeout=60)
    finally:
        kill_run(log)
    killed = cgroup.oom_kills() - before
    rep = report_json(log)
    sure = [p["pid"] for p in rep["processes"] if p["ending"]["kind"] == "oom-kill"]
    maybe = [p["pid"] for p in rep["processes"] if p["ending"]["kind"] == "oom-among"]
    print(f"oom kills {killed}, workers first seen gone {gone} of {workers}; the report's OOM-killed {sure}, "
          f"one of {maybe}; job: {out.strip().splitlines()[-1:]}")
    assert killed >= 1 and gone
    assert len(sure) <= killed  # never more named than the kernel killed: the pool terminated the others
    f = next(f for f in rep["findings"] if f["kind"] == "oom-killed")
    # the processes the finding names (sure, or 'one of'; a worker seen defunct with SIGKILL's status keeps
    # that as its ending, and is still one of the group): workers only, the first one gone among them
    named = set(f["pids"])
    assert set(sure) | set(maybe) <= named <= set(workers) and set(gone) & named, (sure, maybe, named, gone)
    assert _ending(rep, side)["kind"] not in ("oom-kill", "oom-among")
    assert f["cost"]["oom_kills"] == killed
    assert "compile pool process(es) were alive then" in f["text"] or not set(workers) - set(sure) - set(maybe)
    assert "TORCHINDUCTOR_COMPILE_THREADS=1" in rep["answer"]
    assert rep["answer"].index("OOM killer") < rep["answer"].index("TORCHINDUCTOR_COMPILE_THREADS=1")


def _children_log(rise: int, exited: tuple[int, ...] = (), records: tuple[tuple[float, int], ...] = (),
                  zombies: tuple[tuple[int, int], ...] = ()) -> LogWriter:
    """main 100 starts children 101 and 102 (traced); both end at about 2 s, and the watcher's `oom` record
    says the cgroup's count rose by `rise` then; the children in `exited` wrote their process_exit."""
    w = LogWriter()
    run = {"run": "r1", "root_pid": 100}
    w.add(0, 100, 1, "main", "process_start", argv=["train.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, oom_kill=3, **run)
    for pid in (101, 102):
        w.add(0.5, pid, 100, "child", "process_start", argv=["-c", "work()"], python="3.11.7", forked=False,
              env={}, **run)
    w.add(0.6, 900, 100, "watcher", "tree", count=3, started=[
        {"pid": p, "ppid": pp, "rss": 10 << 20, "via": "root" if p == 100 else "child"}
        for p, pp in ((100, 1), (101, 100), (102, 100))], ended=[], **run)
    for pid in exited:
        w.add(1.95, pid, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(2.1, 900, 100, "watcher", "tree", count=1, started=[],
          ended=[{"pid": 101, "end": T0 + 2.0}, {"pid": 102, "end": T0 + 2.05}], **run)
    if zombies:  # (pid, wait status) the watcher read while each was defunct
        w.add(2.11, 900, 100, "watcher", "tree", count=1, started=[], ended=[], zombies=[
            {"pid": pid, "ppid": 100, "since": T0 + 2.05, "status": status} for pid, status in zombies], **run)
    count = 3
    for t, up in records or ((2.06, rise),):  # (when, how much the count rose; read a tick before: t - 0.1)
        w.add(t, 900, 100, "watcher", "oom", before=count, oom_kill=count + up, since=T0 + t - 0.1, **run)
        count += up
    w.add(3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.add(3.2, 900, 100, "watcher", "leftover", how="root-exit", count=0, pids=[], procs=[], **run)
    return w


@pytest.mark.parametrize(("rise", "exited", "sure", "maybe"), [
    (2, (), [101, 102], []),  # two kills, two ends: each is the OOM killer's
    (1, (), [], [101, 102]),  # one kill, two ends: one of them, not known which
    (1, (102,), [101], []),  # one kill; 102 exited by itself: 101 is the OOM killer's
])
def test_an_oom_record_names_no_more_processes_than_it_counts(tmp_path: Path, rise: int, exited: tuple[int, ...],
                                                             sure: list[int], maybe: list[int]) -> None:
    """The cgroup counts kills, not whom: a record that rose by K is one process's only where K processes ended
    unexplained around it; more, and each is 'one of' (a pool terminates its other workers right after the
    kernel kills one). The finding counts the kernel's kills, and the Answer leads with it."""
    rep = report(_children_log(rise, exited), tmp_path)
    kinds = {p["pid"]: p["ending"]["kind"] for p in rep["processes"]}
    assert [pid for pid, k in sorted(kinds.items()) if k == "oom-kill"] == sure
    assert [pid for pid, k in sorted(kinds.items()) if k == "oom-among"] == maybe
    assert kinds[100] == "exit"
    f = next(f for f in rep["findings"] if f["kind"] == "oom-killed")
    assert f["cost"]["oom_kills"] == rise and f["pids"] == sorted(sure + maybe)
    assert rep["answer"].lstrip("- ").startswith("The OOM killer ended")
    assert not set(sure + maybe) & set(rep["no_exit_pids"])


def test_oom_records_close_together_count_together(tmp_path: Path) -> None:
    """Two records (3 -> 4, 4 -> 5) around two ends: two kills for two processes, both the OOM killer's (each
    record alone would have said '1 of 2' twice)."""
    rep = report(_children_log(0, records=((2.02, 1), (2.1, 1))), tmp_path)
    assert {p["pid"]: p["ending"]["kind"] for p in rep["processes"] if p["pid"] != 100} == {
        101: "oom-kill", 102: "oom-kill"}
    f = next(f for f in rep["findings"] if f["kind"] == "oom-killed")
    assert f["cost"]["oom_kills"] == 2 and f["pids"] == [101, 102]


def test_an_exit_status_is_no_oom_candidate(tmp_path: Path) -> None:
    """102 was seen defunct with exit code 1 (wait status 256): it ended by itself, so the one kill is 101's."""
    rep = report(_children_log(1, zombies=((102, 256),)), tmp_path)
    kinds = {p["pid"]: p["ending"]["kind"] for p in rep["processes"]}
    assert kinds[101] == "oom-kill" and kinds[102] != "oom-among" and kinds[102] != "oom-kill"
    assert next(f for f in rep["findings"] if f["kind"] == "oom-killed")["pids"] == [101]


def test_a_sigkill_status_keeps_its_signal_and_stays_in_the_group(tmp_path: Path) -> None:
    """101 seen defunct with SIGKILL's status, 102 with none, one kill: 101 says 'killed by SIGKILL' (with the
    oom record as evidence), 102 'one of', and the finding names both (the kernel's victim is one of them)."""
    rep = report(_children_log(1, zombies=((101, 9),)), tmp_path)
    ends = {p["pid"]: p["ending"] for p in rep["processes"]}
    assert ends[101]["kind"] == "signal" and ends[101]["signal"] == "SIGKILL"
    assert any(e.startswith("oom:") for e in ends[101]["evidence"]) and ends[102]["kind"] == "oom-among"
    f = next(f for f in rep["findings"] if f["kind"] == "oom-killed")
    assert f["pids"] == [101, 102] and f["cost"]["oom_kills"] == 1


def test_no_oom_record_no_oom_words(tmp_path: Path) -> None:
    """The same two ends without an `oom` record: nobody is the OOM killer's."""
    w = _children_log(1)
    w.lines = [r for r in w.lines if r["event"] != "oom"]
    rep = report(w, tmp_path)
    assert not [p for p in rep["processes"] if p["ending"]["kind"] in ("oom-kill", "oom-among")]
    assert "oom-killed" not in {f["kind"] for f in rep["findings"]} and "OOM" not in rep["answer"]


# How long after the outsider's kill the run's process ends: the case was 2.6 s; what matters is that it
# is more than a dying process's time (ooms.DYING_S, 1 s before the last sample that saw it alive), with room.
APART_S = 2.5


def test_an_oom_kill_outside_the_run_is_not_pinned_on_a_later_end(tmp_path: Path, cgroup: MemCgroup) -> None:
    """A container's usual case: the run shares its cgroup with other processes. One of them (not the run's) asks
    for more than the cgroup allows and the kernel kills it; later an untraced child of the run (`head`) exits 0.
    The report never says the OOM killer ended that child: it says the cgroup counted an OOM kill, when (the
    watcher's read interval around it, checked against the test's own clock), in a process it cannot name."""
    cgroup.limit(LIMIT_MIB * MIB)
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent('''
        import subprocess, sys
        p = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        print("started", p.pid, flush=True)
        sys.stdin.readline()  # the test says go
        p.stdin.write(b"x"); p.stdin.close()
        print("head", p.wait(), flush=True)
    '''))
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="2")
    proc = subprocess.Popen(["sh", "-c", cgroup.enter() + f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"],
                            env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        head = int(proc.stdout.readline().split()[1])
        before = cgroup.oom_kills()
        t_before = time.time()
        outsider = subprocess.run(["sh", "-c", cgroup.enter() + f"{shlex.quote(sys.executable)} -c "
                                   + shlex.quote("b = b'\\x01' * (600 << 20)")], env=clean_env(),
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        t_after = time.time()
        assert outsider.returncode == -9 and cgroup.oom_kills() == before + 1  # the kernel's own count
        # the watcher reads the count every tick: its record comes within a few (an older one wrote none until an
        # end; the wait then runs out and the end below still comes later)
        try:
            wait_until(lambda: [r for r in read_log(log, partial=True) if r["event"] == "oom"], timeout=10)
        except WaitTimeout:
            pass
        wait_until(lambda: time.time() >= t_after + APART_S, timeout=APART_S + 1)  # the scenario: a later end
        proc.stdin.write("go\n")
        proc.stdin.close()
        out = proc.stdout.read()
        assert proc.wait(timeout=60) == 0 and "head 0" in out, out
        wait_for_watcher(log, timeout=60)
    finally:
        kill_run(log)
    rep = report_json(log)
    assert _ending(rep, head)["kind"] not in ("oom-kill", "oom-among"), _ending(rep, head)
    assert "oom-killed" not in {f["kind"] for f in rep["findings"]} and "OOM killer ended" not in rep["answer"]
    f = next(f for f in rep["findings"] if f["kind"] == "oom-in-cgroup")
    assert f["cost"]["oom_kills_unnamed"] == 1 and not f["pids"]
    # the record's interval holds the kill, by the test's own clock
    rec = next(r for r in read_log(log) if r["event"] == "oom")
    assert rec["since"] < t_after and rec["ts"] > t_before, (rec, t_before, t_after)


def test_an_oom_on_another_host_names_no_process_of_this_one(tmp_path: Path) -> None:
    """One run on two hosts (its environment carried there by srun or mpirun, a main that is pid 1 in its
    container on each), each with its watcher, one log: a cgroup's count is its host's. A rise host h2's
    watcher read names no process of host h1, even one that ended unexplained in that very tick."""
    w = _children_log(1)
    w.lines.insert(2, dict(w.lines[1], host="h2", ts=T0 + 0.06))  # h2's watcher_start
    rec = next(r for r in w.lines if r["event"] == "oom")
    rec["host"] = "h2"
    rep = report(w, tmp_path)
    assert not [p for p in rep["processes"] if p["ending"]["kind"] in ("oom-kill", "oom-among")], rep["processes"]
    f = next(f for f in rep["findings"] if f["kind"] == "oom-in-cgroup")
    assert f["cost"]["oom_kills_unnamed"] == 1 and not f["pids"]


@pytest.mark.parametrize("since", [T0 + 0.3, None])
def test_a_rise_at_no_end_names_no_process(tmp_path: Path, since: float | None) -> None:
    """The count rose in (since, 0.4 s], long before the children's ends at about 2 s: nobody of the run is the
    OOM killer's; the report says when the cgroup counted it (between since and the record). A record without
    `since` (an older watcher, which read the count only at ends) bounds nothing: it names nobody either, and
    says only 'before' its time."""
    w = _children_log(1)
    rec = next(r for r in w.lines if r["event"] == "oom")
    rec["ts"] = T0 + 0.4 if since is not None else T0 + 2.06
    if since is None:
        del rec["since"]
    else:
        rec["since"] = since
    rep = report(w, tmp_path)
    assert not [p for p in rep["processes"] if p["ending"]["kind"] in ("oom-kill", "oom-among")]
    assert "oom-killed" not in {f["kind"] for f in rep["findings"]} and "OOM killer ended" not in rep["answer"]
    f = next(f for f in rep["findings"] if f["kind"] == "oom-in-cgroup")
    assert f["cost"]["oom_kills_unnamed"] == 1 and not f["pids"]
    assert ("between 0.3 s and 0.4 s" if since is not None else "before 2.1 s") in f["text"], f["text"]


STEP_CG = "/slurm/uid_1000/job_7/step_batch"


def _killed_main_log(oom: bool, memory: bool = False, memcg: dict[str, Any] | None = None,
                     peak_after: int = 768 << 20) -> LogWriter:
    """main 100 made a pool (sidecar 101) and ended at 2.0 s with no process_exit, the sidecar left; the cgroup's
    OOM count rose by one then where `oom`; `memory`: one sweep at 1.5 s read main 400 MiB and the sidecar 250 MiB;
    `memcg`: both joined in memory cgroup STEP_CG, whose memcg record has these fields; with a `peak`, the
    watcher's `final` one at its end read `peak_after`."""
    w = LogWriter()
    run = {"run": "r1", "root_pid": 100}
    w.add(0, 100, 1, "main", "process_start", argv=["train.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, oom_kill=0, **run)
    w.warm(0.3, 100, 1, "main", 101)
    w.add(0.5, 101, 100, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py"],
          python="3.11.7", forked=False, env={"TORCH_WARM_POOL": "0"}, **run)
    if memcg is not None:
        fields = {"member": 100, "version": 2, "path": STEP_CG, "file": "memory.max", **memcg, **run}
        w.add(0.6, 900, 100, "watcher", "memcg", **fields)
        if "peak" in memcg:  # the watcher's end: the peak read again
            w.add(2.4, 900, 100, "watcher", "memcg", **{**fields, "peak": peak_after, "final": True})
    w.add(0.6, 900, 100, "watcher", "tree", count=2, started=[
        {"pid": p, "ppid": pp, "rss": 10 << 20, "via": "root" if p == 100 else "child",
         **({"memcg": STEP_CG} if memcg is not None else {})} for p, pp in ((100, 1), (101, 100))], ended=[], **run)
    if memory:
        w.add(1.5, 900, 100, "watcher", "memory", procs=[{"pid": 100, "pss": 400 << 20, "uss": 1 << 20, "threads": 3},
                                                         {"pid": 101, "pss": 250 << 20, "uss": 1 << 20, "threads": 4}],
              **run)
    if oom:
        w.add(2.06, 900, 100, "watcher", "oom", before=0, oom_kill=1, since=T0 + 1.96, **run)
    w.add(2.1, 900, 100, "watcher", "tree", count=1, started=[], ended=[{"pid": 100, "end": T0 + 2.0}], **run)
    w.add(2.5, 900, 100, "watcher", "leftover", how="root-killed", count=1, pids=[101],
          procs=[{"pid": 101, "ppid": 1, "rss": 10 << 20}], **run)
    return w


def test_a_main_the_oom_killer_ended_is_told_so_in_every_sentence(tmp_path: Path) -> None:
    """A main ended by the OOM killer (the cgroup's count rose by one as it alone ended; no `run` waited for it) that
    left its pool's sidecar: every sentence of its ending says the OOM killer. Not 'killed, or os._exit' in the
    Answer, nor 'whether the OOM killer did is not in the log' beside the finding that says it did (a real batch
    step's memory cgroup gave both). Control: the same log without the `oom` record keeps 'killed, or
    os._exit'."""
    rep = report(_killed_main_log(True), tmp_path)
    assert _ending(rep, 100)["kind"] == "oom-kill"
    texts = {f["kind"]: f["text"] + " " + f["advice"] for f in rep["findings"]}
    assert "The OOM killer ended main 100" in texts["oom-killed"]
    assert "by the OOM killer" in texts["root-killed"] and "not in the log" not in texts["root-killed"]
    assert "by the OOM killer" in texts["leftovers"], texts["leftovers"]
    assert "os._exit" not in rep["answer"] and "not in the log" not in rep["answer"], rep["answer"]
    (tmp_path / "plain").mkdir()
    plain = report(_killed_main_log(False), tmp_path / "plain")
    assert _ending(plain, 100)["kind"] != "oom-kill"
    assert "(killed, or os._exit)" in plain["answer"] and "killed by the OOM killer" not in plain["answer"]


def test_what_held_the_memory_when_the_oom_killer_ended_the_main_is_summed_at_one_moment(tmp_path: Path) -> None:
    """The user asks what held the memory: the Answer gives the main's last reading (400 MiB at 1.5 s) and what its
    compile pool held beside it at that same moment (250 MiB), together 650 MiB (a real batch step's main was told
    with its own 401 MiB alone, the pool's 252 MiB nowhere). Control: the main unread, no sum is made up."""
    rep = report(_killed_main_log(True, memory=True), tmp_path)
    said = ("The OOM killer ended main 100 (train.py) at 2.0 s. At its last memory reading (1.5 s) it held 400 MiB; "
            "its compile pool's 1 process held 250 MiB beside it then: 650 MiB together (PSS).")
    assert said in rep["answer"].replace("\n  ", " "), rep["answer"]
    (tmp_path / "unread").mkdir()
    plain = report(_killed_main_log(True), tmp_path / "unread")
    assert "together" not in next(f["text"] for f in plain["findings"] if f["kind"] == "oom-killed")


def test_the_memory_limit_the_oom_killer_enforced_is_told_beside_what_held_the_memory(tmp_path: Path) -> None:
    """The user asks how far over its limit the job was: the Answer gives the limit of the killed main's memory
    cgroup as the watcher read it (memory.max 768 MiB) beside the 650 MiB its processes held at one moment, and
    names the cgroup that set it where that is one above the main's own (SLURM sets the job's, not the step's),
    and its peak charge where the kernel's count at the watcher's end is above the one at the join. Controls: a
    cgroup whose limit reads `max` (no limit), and a log with no memcg record (an older watcher, no /proc), say
    nothing of a limit."""
    rep = report(_killed_main_log(True, memory=True, memcg={"limit": 768 << 20}), tmp_path)
    said = ("650 MiB together (PSS). Its memory cgroup's limit was 768 MiB (memory.max of "
            f"{STEP_CG}); whether the run reached it, no record shows.")
    assert said in rep["answer"].replace("\n  ", " "), rep["answer"]
    assert said.split(". ", 1)[1] in next(f["text"] for f in rep["findings"] if f["kind"] == "oom-killed")
    (tmp_path / "above").mkdir()
    above = report(_killed_main_log(True, memcg={"limit": 768 << 20, "limit_path": "/slurm/uid_1000/job_7"}),
                   tmp_path / "above")
    assert (f"Its memory cgroup's limit was 768 MiB (memory.max of /slurm/uid_1000/job_7, above its own {STEP_CG});"
            in above["answer"].replace("\n  ", " ")), above["answer"]
    (tmp_path / "peak").mkdir()
    peaked = report(_killed_main_log(True, memcg={"limit": 768 << 20, "peak": 100 << 20}), tmp_path / "peak")
    assert (f"(memory.max of {STEP_CG}); the charge of {STEP_CG} (every process in it counts, the run's or not) "
            "reached it during the run (peak 768 MiB)." in peaked["answer"].replace("\n  ", " ")), peaked["answer"]
    # the peak is the limit's cgroup's (the SLURM job's, all its steps), named as such, not the step's
    (tmp_path / "job-peak").mkdir()
    job = report(_killed_main_log(True, memcg={"limit": 768 << 20, "peak": 100 << 20,
                                               "limit_path": "/slurm/uid_1000/job_7"}), tmp_path / "job-peak")
    assert ("the charge of /slurm/uid_1000/job_7 (every process in it counts, the run's or not) reached it during "
            "the run (peak 768 MiB)." in job["answer"].replace("\n  ", " ")), job["answer"]
    # a peak that rose in the run but stayed under the limit: a kill the cgroup counted, not the limit's
    (tmp_path / "under").mkdir()
    under = report(_killed_main_log(True, memcg={"limit": 768 << 20, "peak": 100 << 20}, peak_after=700 << 20),
                   tmp_path / "under")
    assert (f"the charge of {STEP_CG} (every process in it counts, the run's or not) peaked at 700 MiB during the "
            "run, under it." in under["answer"].replace("\n  ", " ")
            and "reached it" not in under["answer"]), under["answer"]
    (tmp_path / "old-peak").mkdir()  # the peak at the end no higher than at the join: reached before the run
    old = report(_killed_main_log(True, memcg={"limit": 768 << 20, "peak": 768 << 20}), tmp_path / "old-peak")
    assert "limit was 768 MiB" in old["answer"] and "peaked" not in old["answer"], old["answer"]
    assert "whether the run reached it, no record shows" in old["answer"].replace("\n  ", " "), old["answer"]
    for name, memcg in (("max", {}), ("none", None)):
        (tmp_path / name).mkdir()
        plain = report(_killed_main_log(True, memory=True, memcg=memcg), tmp_path / name)
        assert "650 MiB together (PSS)." in plain["answer"].replace("\n  ", " ")
        assert "limit was" not in plain["answer"] and "memory.max" not in json.dumps(plain["findings"])


def test_a_sigkilled_process_seen_dead_a_moment_after_the_rise_is_the_oom_killers(tmp_path: Path) -> None:
    """The kernel's OOM kill is a SIGKILL, and a process killed while it holds hundreds of MiB takes a moment to
    die (its memory torn down) before the watcher sees it gone: a real batch step's main (600 MiB, load 20) was
    seen ended 0.30 s after the watcher read the rise, 2 ms past the tick-and-a-moment bar, and the kill was told
    as 'in a process the log cannot name' while its own wait status said SIGKILL. Seen defunct with SIGKILL's
    status, it is the OOM killer's within a second of the rise; with no status the bar stays a tick and a moment
    (control: unnamed)."""
    rep = report(_children_log(0, exited=(102,), records=((1.65, 1),), zombies=((101, 9),)), tmp_path)
    assert _ending(rep, 101)["kind"] == "oom-kill", _ending(rep, 101)
    assert "oom-in-cgroup" not in {f["kind"] for f in rep["findings"]}
    assert rep["answer"].lstrip("- ").startswith("The OOM killer ended"), rep["answer"]
    (tmp_path / "nostatus").mkdir()
    plain = report(_children_log(0, exited=(102,), records=((1.65, 1),)), tmp_path / "nostatus")
    assert _ending(plain, 101)["kind"] not in ("oom-kill", "oom-among")
    assert "oom-in-cgroup" in {f["kind"] for f in plain["findings"]}


def test_a_process_another_process_signalled_is_no_oom_candidate(tmp_path: Path) -> None:
    """One kill; 101 seen defunct with SIGKILL's status; 102 ended on a SIGTERM that main 100 recorded sending it
    (a sidecar terminating its workers as its main died): 102's end is explained, so the kill is 101's alone.
    A real batch step's main (SIGKILL status) shared the rise with the two workers its sidecar SIGTERMed; the
    kill was then 'as 3 processes ended' in the main's evidence and told in no finding at all."""
    w = _children_log(1, zombies=((101, 9),))
    w.add(1.95, 100, 1, "main", "signal_sent", how="kill", target=102, signal=15, frames=[])
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    assert _ending(rep, 101)["kind"] == "oom-kill", _ending(rep, 101)
    assert "SIGTERM" in _ending(rep, 102)["words"], _ending(rep, 102)
    f = next(f for f in rep["findings"] if f["kind"] == "oom-killed")
    assert f["pids"] == [101] and f["cost"]["oom_kills"] == 1, f


def test_a_process_seen_alive_after_the_rise_dies_of_it(tmp_path: Path) -> None:
    """An OOM victim dies only once it runs and its memory is torn down: at load 17 a 250 MiB child was still
    alive in the two samples after the watcher read the rise (ticks 0.1 s apart; rise read at 2.27 s, last seen
    alive 2.52 s, seen gone 2.62 s), with no wait status read (its parent reaped it first), and the kill was told
    as in a process the log cannot name (1 run in 2-6 of the real OOM test under load). The `ended` entry's
    `seen` (the last sample that saw it alive) bounds it: killed by the read, alive at `seen`, it is the OOM
    killer's where the read is within DYING_S before `seen`. Controls: a rise read well before (0.4 s) names
    nobody, and an older log without `seen` keeps the tick-and-a-moment bar before the end (unnamed)."""
    def log(read_at: float, seen: float | None) -> LogWriter:
        w = _children_log(0, exited=(102,), records=((read_at, 1),))
        rec = next(r for r in w.lines if r["event"] == "oom")
        rec["since"] = T0 + read_at - 0.15
        ended = next(r for r in w.lines if r["event"] == "tree" and r.get("ended"))["ended"]
        ended[0] = {"pid": 101, "end": T0 + 2.0} | ({"seen": T0 + seen} if seen is not None else {})
        return w

    rep = report(log(1.65, 1.9), tmp_path)
    assert _ending(rep, 101)["kind"] == "oom-kill", _ending(rep, 101)
    assert "oom-in-cgroup" not in {f["kind"] for f in rep["findings"]}
    for name, (read_at, seen) in {"early": (0.4, 1.9), "old": (1.65, None)}.items():
        (tmp_path / name).mkdir()
        plain = report(log(read_at, seen), tmp_path / name)
        assert _ending(plain, 101)["kind"] not in ("oom-kill", "oom-among"), (name, _ending(plain, 101))
        f = next(f for f in plain["findings"] if f["kind"] == "oom-in-cgroup")
        assert f["cost"]["oom_kills_unnamed"] == 1 and not f["pids"], name
