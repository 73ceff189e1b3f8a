"""A compile pool in a container's CPU quota (watcher/cgroups.py reads the cpu controller; findings/quota.py tells
it): the quota and the throttling read from made cgroup trees (v1 and v2) against the files the test wrote, and the
finding only where the records show a quota below the pool's size and throttling during the run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.words.causes import symptom_of
from wp_autotrace.watcher.cgroups import CPU_KIND, Cgroups, least_limit

from .logs import AC, LogWriter, call, report, watcher
from .test_model import clean_run

CPU_CG = "/wp_users_cpu_1"


def _put(root: Path, rel: str, name: str, text: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / name).write_text(text + "\n")


V1_STAT = "nr_periods {p}\nnr_throttled {t}\nthrottled_time {ns}\nnr_bursts 0\nburst_time 0"
V2_STAT = ("usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods {p}\nnr_throttled {t}\nthrottled_usec {us}\n"
           "nr_bursts 0\nburst_usec 0")


def test_a_v1_quota_is_the_least_on_the_cgroup_or_above_with_its_quotas_throttled_periods(tmp_path: Path) -> None:
    """v1: cpu.cfs_quota_us / cpu.cfs_period_us, -1 none; the least ratio on the cgroup or above it (a pod's limit
    on its parent, a container's own); cpu.stat's counts read in the cgroup whose quota it is (each cgroup counts
    its own quota's periods), throttled_time ns as us; again at the end with `final`."""
    cg = tmp_path / "cg"
    _put(cg, "cpu/pod", "cpu.cfs_quota_us", "50000")  # 0.5 CPU per 100 ms
    _put(cg, "cpu/pod", "cpu.cfs_period_us", "100000")
    _put(cg, "cpu/pod", "cpu.stat", V1_STAT.format(p=10, t=4, ns=1_500_000_000))
    _put(cg, "cpu/pod/box", "cpu.cfs_quota_us", "-1")
    _put(cg, "cpu/pod/box", "cpu.cfs_period_us", "100000")
    _put(cg, "cpu/pod/box", "cpu.stat", V1_STAT.format(p=0, t=0, ns=0))
    _put(cg, "cpu", "cpu.cfs_quota_us", "-1")
    _put(cg, "cpu", "cpu.cfs_period_us", "100000")
    cpus = Cgroups(CPU_KIND, str(cg), mounts={})
    entry: dict[str, Any] = {"pid": 7}
    got = cpus.join(entry, b"3:cpu,cpuacct:/pod/box\n2:cpuacct:/other\n")
    assert entry["cpucg"] == "/pod/box", entry
    assert got == {"version": 1, "path": "/pod/box", "file": "cpu.cfs_quota_us", "limit": 0.5, "quota_us": 50000,
                   "period_us": 100000, "limit_path": "/pod", "member": 7, "periods": 10, "throttled": 4,
                   "throttled_us": 1_500_000}, got
    _put(cg, "cpu/pod/box", "cpu.cfs_quota_us", "20000")  # the container's own, tighter: the least
    assert (least_limit(1, "/pod/box", str(cg), CPU_KIND) or {}).get("limit") == 0.2
    _put(cg, "cpu/pod", "cpu.stat", V1_STAT.format(p=30, t=21, ns=4_000_000_123))
    (again,) = cpus.again()
    assert (again["final"], again["periods"], again["throttled"], again["throttled_us"]) == (True, 30, 21, 4_000_000)
    assert cpus.join({"pid": 8}, b"3:cpu,cpuacct:/pod/box\n") is None  # read once per cgroup


def test_a_co_mounted_v1_cpu_controller_is_read_at_its_mounts_root(tmp_path: Path) -> None:
    """v1 hosts co-mount cpu with cpuacct (/sys/fs/cgroup/cpu,cpuacct, `cpu` a symlink to it); a docker container
    without a cgroup namespace mounts its own cgroup there, which mountinfo names by the mount point: the quota at
    the mount's root is the container's own (/docker/abc), never named "/" (the symlink is looked up by its
    target)."""
    cg = tmp_path / "cg"
    _put(cg, "cpu,cpuacct", "cpu.cfs_quota_us", "20000")
    _put(cg, "cpu,cpuacct", "cpu.cfs_period_us", "100000")
    _put(cg, "cpu,cpuacct", "cpu.stat", V1_STAT.format(p=3, t=1, ns=5000))
    (cg / "cpu").symlink_to(cg / "cpu,cpuacct")
    got = Cgroups(CPU_KIND, str(cg), mounts={str(cg / "cpu,cpuacct"): "/docker/abc"}).join(
        {"pid": 5}, b"4:cpu,cpuacct:/docker/abc\n")
    assert got == {"version": 1, "path": "/docker/abc", "file": "cpu.cfs_quota_us", "limit": 0.2, "quota_us": 20000,
                   "period_us": 100000, "member": 5, "periods": 3, "throttled": 1, "throttled_us": 5}, got


def test_a_v2_quota_and_none(tmp_path: Path) -> None:
    """v2: cpu.max "QUOTA PERIOD", "max PERIOD" none; cpu.stat's throttled_usec; no quota anywhere: no limit,
    no counts (nothing read again); no cpu file at all: no record."""
    cg = tmp_path / "cg"
    _put(cg, "kubepods/pod1", "cpu.max", "25000 100000")
    _put(cg, "kubepods/pod1", "cpu.stat", V2_STAT.format(p=8, t=3, us=700_000))
    _put(cg, "kubepods/pod1/ctr", "cpu.max", "max 100000")
    _put(cg, "kubepods", "cpu.max", "max 100000")
    cpus = Cgroups(CPU_KIND, str(cg), mounts={})
    got = cpus.join({"pid": 9}, b"0::/kubepods/pod1/ctr\n")
    assert (got or {}).get("limit") == 0.25 and (got or {}).get("limit_path") == "/kubepods/pod1", got
    assert ((got or {})["periods"], (got or {})["throttled"], (got or {})["throttled_us"]) == (8, 3, 700_000)
    _put(cg, "free", "cpu.max", "max 100000")
    free = Cgroups(CPU_KIND, str(cg), mounts={})
    assert free.join({"pid": 10}, b"0::/free\n") == {"version": 2, "path": "/free", "file": "cpu.max",
                                                      "member": 10}
    assert free.again() == [] and Cgroups(CPU_KIND, str(tmp_path / "none"), mounts={}).join(
        {"pid": 11}, b"0::/free\n") is None


def _quota_run(limit: float, throttled: tuple[int, int], final: bool = True, workers: int = 2,
               asked: int | None = None) -> LogWriter:
    """clean_run (main 100's pool: sidecar 200, made at 1.0 s) with `workers` workers (the sidecar's --workers=`asked`,
    else `workers`), all in cpu cgroup CPU_CG whose quota `limit` CPUs (limit * 100000 us per 100000) the watcher
    read at 0.1 s with cpu.stat nr_throttled throttled[0] (of 5 periods) and again at 3.5 s (`final` unless not)
    with throttled[1] (of 100)."""
    w = clean_run()
    for r in w.lines:
        if r["pid"] == 200 and r["event"] == "process_start":
            r["argv"] = ["python", "-m", "torch._inductor.compile_worker", f"--workers={asked or workers}"]
    kids = [(300 + i, 200, "compile-worker") for i in range(workers)]
    watcher(w, 0.1, "cpucg", member=100, version=1, path=CPU_CG, file="cpu.cfs_quota_us", limit=limit,
            quota_us=int(limit * 100000), period_us=100000, periods=5, throttled=throttled[0], throttled_us=0)
    watcher(w, 1.3, "tree", count=2 + workers, started=[
        {"pid": pid, "ppid": ppid, "name": "python", "cmd": "python", "role": role, "via": "child", "cpucg": CPU_CG}
        for pid, ppid, role in ((100, 1, "main"), (200, 100, "compile-sidecar"), *kids)], ended=[])
    watcher(w, 3.5, "cpucg", member=100, version=1, path=CPU_CG, file="cpu.cfs_quota_us", limit=limit,
            quota_us=int(limit * 100000), period_us=100000, periods=100, throttled=throttled[1],
            throttled_us=(throttled[1] - throttled[0]) * 80_000, **({"final": True} if final else {}))
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_pool_larger_than_its_cpu_quota_throttled_in_the_run_is_told_with_the_quota_fix(tmp_path: Path) -> None:
    """The pool (sidecar 200 + 2 workers, compile_threads 2) ran in a 0.2 CPU quota whose cgroup the kernel
    throttled in 40 of the 95 periods between the watcher's reads: the Answer tells the quota, the pool's size,
    the throttled periods and time, and Fix first is TORCHINDUCTOR_COMPILE_THREADS=1."""
    rep = report(_quota_run(0.2, (2, 42)), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "cpu-quota-pool")
    answer = rep["answer"].replace("\n  ", " ").replace("\n", " ")
    assert ("Main 100's compile pool (sidecar 200 + 2 workers; compile_threads 2) ran inside a CPU quota of 0.2 CPU "
            f"(cpu.cfs_quota_us 20000 us per 100000 us, {CPU_CG}): a pool sized for 2 workers for 0.2 CPU"
            ) in f["text"], f
    assert f"ran inside a CPU quota of 0.2 CPU ({CPU_CG}); the kernel throttled" in answer, answer
    for said in ("the kernel throttled the cgroup in 40 of 95 periods between 0.1 s and 3.5 s",
                 "its tasks standing still 3.2 s in all"):
        assert said in f["text"] and said in answer, (said, answer)
    assert "Fix first: compile without a pool inside the quota: TORCHINDUCTOR_COMPILE_THREADS=1" in answer, answer
    assert f["cost"] == {"quota_cpus": 0.2, "pool_size": 2, "periods": 95, "throttled_periods": 40,
                         "throttled_s": 3.2}, f["cost"]


@pytest.mark.parametrize("case", ["no-throttling", "quota-as-large", "no-final-read"])
def test_a_cpu_quota_is_not_told_without_a_record_of_throttling_or_below_the_pools_size(tmp_path: Path,
                                                                                         case: str) -> None:
    """No rise in nr_throttled between the reads, a quota of as many CPUs as the pool's workers, or no read at the
    watcher's end: nothing is told (a quota is no finding by itself, and a slow compile is not its proof)."""
    w = {"no-throttling": lambda: _quota_run(0.2, (2, 2)), "quota-as-large": lambda: _quota_run(2.0, (2, 42)),
         "no-final-read": lambda: _quota_run(0.2, (2, 42), final=False)}[case]()
    rep = report(w, tmp_path)
    assert "cpu-quota-pool" not in {f["kind"] for f in rep["findings"]}, rep["findings"]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isfile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                    reason="needs root and a v1 cpu controller at /sys/fs/cgroup/cpu")
def test_a_real_v1_cpu_cgroups_quota_and_counts_are_read_as_the_kernel_keeps_them(tmp_path: Path) -> None:
    """A real cpu cgroup made by the test, its quota the least the kernel allows (1 ms per 100 ms: a spinning
    process spends it in every period however loaded the host): the watcher's reader gives the quota as the test
    wrote it, and at the end the counts the test reads from cpu.stat itself, risen since the join."""
    import subprocess
    import sys
    import time

    cg = Path(f"/sys/fs/cgroup/cpu/wp_test_cpu_{os.getpid()}")
    cg.mkdir()
    proc = None
    try:
        (cg / "cpu.cfs_period_us").write_text("100000")
        (cg / "cpu.cfs_quota_us").write_text("1000")
        cpus = Cgroups(CPU_KIND)
        # it moves itself in once started (its start outside the quota), then spins for a second of wall time
        spin = (f"import os, time\nopen({str(cg / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
                "t = time.monotonic()\nwhile time.monotonic() - t < 1.0: pass\n")
        proc = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while str(proc.pid) not in (cg / "cgroup.procs").read_text().split():
            assert time.monotonic() < deadline and proc.poll() is None, "the spinner never joined"
            time.sleep(0.005)
        got = cpus.join({"pid": proc.pid}, Path(f"/proc/{proc.pid}/cgroup").read_bytes()) or {}
        assert proc.wait(timeout=120) == 0
        (end,) = cpus.again()
        stat = dict(line.split() for line in (cg / "cpu.stat").read_text().splitlines())
        assert (got["limit"], got["quota_us"], got["period_us"], got["path"]) == (0.01, 1000, 100000, f"/{cg.name}")
        assert end["throttled"] == int(stat["nr_throttled"]) > got["throttled"], (got, end, stat)
        assert end["periods"] == int(stat["nr_periods"]) and end["throttled_us"] == int(stat["throttled_time"]) // 1000
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_a_pool_that_started_fewer_workers_than_asked_says_both(tmp_path: Path) -> None:
    """compile_threads 4 is the size torch asked for; the watcher saw 2 workers start: the finding says the size
    asked and the workers seen, never "a pool of 4 workers" as if 4 had run in the quota."""
    rep = report(_quota_run(0.2, (2, 42), workers=2, asked=4), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "cpu-quota-pool")
    assert "compile_threads 4) ran inside" in f["text"], f
    assert "a pool sized for 4 workers (2 seen) for 0.2 CPU" in f["text"], f


@pytest.mark.parametrize("late_read", [False, True], ids=["throttled-in-the-wait", "no-rise-across-the-wait"])
def test_a_slow_exit_wait_inside_the_quota_follows_from_it(late_read: bool, tmp_path: Path) -> None:
    """torch's shutdown at exit of a pool inside the quota took 6 s (3.4 -> 9.4 s), the cgroup throttled between
    the read inside it (3.5 s: 42) and the final one after it (9.5 s: 80): the quota leads the Answer with the
    wait under it, and Fix first is the quota's, not "shut the pool down sooner" (live: cpu_quota, the main waited
    5.9 s at exit). Where the reads show no throttled period across the wait (42 at 3.5 s and at 9.5 s), the wait
    is its own."""
    w = _quota_run(0.2, (2, 42), final=False)
    late = 42 if late_read else 80  # throttled periods read at 9.5 s, after the wait
    watcher(w, 9.5, "cpucg", member=100, version=1, path=CPU_CG, file="cpu.cfs_quota_us", limit=0.2,
            quota_us=20000, period_us=100000, periods=160, throttled=late, throttled_us=(late - 2) * 80_000, final=True)
    call(w, 3.4, 100, 1, "main", f"{AC}:shutdown_compile_workers", 9, 3.4 + 6.0)
    w.lines[-2].update(stack=[], caller=None)  # torch's atexit: no user frame
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    answer = rep["answer"]
    lead = answer.split("\n- ", 1)[0]
    if late_read:
        assert lead.startswith("- The main process waited 6.0 s in shutdown_compile_workers at exit"), answer
        assert "What follows from it:" not in answer, answer
        return
    assert "ran inside a CPU quota of 0.2 CPU" in lead and "What follows from it:" in lead, answer
    assert "waited 6.0 s in shutdown_compile_workers at exit" in answer.split("What follows from it:", 1)[1], answer
    assert "Fix first: compile without a pool inside the quota" in answer, answer


def test_a_slow_exit_wait_on_a_sidecars_exit_join_is_that_joins_not_the_quotas() -> None:
    """Where the main's wait at exit was on a sidecar's own exit join (its cost's waited_on), the join (exit-hang)
    is its cause even inside a quota."""
    quota = {"kind": "cpu-quota-pool", "pids": [100, 200, 300], "severity": "warning",
             "cost": {"exit_wait_throttled": True}}
    join = {"kind": "exit-hang", "pids": [200], "severity": "problem", "cost": {}}
    slow = {"kind": "slow-exit-wait", "pids": [100], "severity": "problem", "cost": {"waited_on": [200]}}
    rep: dict[str, Any] = {"pools": [], "findings": [quota, slow, join]}
    assert symptom_of(rep, slow, rep["findings"]) is join
    slow["cost"] = {}
    assert symptom_of(rep, slow, rep["findings"]) is quota
