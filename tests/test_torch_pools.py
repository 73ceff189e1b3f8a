"""The pools outside _pool_set, and spawn-mode pools, on torch 2.13 (CPU)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.derive.callers import BY_POOL_ATEXIT
from wp_autotrace.analysis.findings.idle import IDLE_POOL_S

from .conftest import (
    WaitTimeout,
    clean_env,
    events,
    needs_torch,
    read_log,
    report_json,
    run_python,
    wait_for_watcher,
    wait_until,
)
from .procs import PROBE_PRELUDE, run_until

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

MIB = 2**20
SERVING = Path(__file__).resolve().parent / "fixtures" / "serving"
SLACK_S = 2.0  # a job's end record against the script's clock: written after the result went back, descheduled
ROUND_S = 0.0005  # the report rounds its times to the ms (a shutdown 0.05 ms after the last reading read as before)
FX = PROBE_PRELUDE + textwrap.dedent('''
    import torch
    from wp_fx_serve.fxstep import warm

    def probe():
        """What ps and smaps_rollup show under this process now: every descendant (the FX sidecar, the worker it
        spawned, multiprocessing's resource tracker beside that worker), by its command line, with its PSS and
        threads; and this process's own."""
        me = psutil.Process()
        kids = me.children(recursive=True)
        return {"pids": sorted(c.pid for c in kids), "cmd": {c.pid: " ".join(c.cmdline()) for c in kids},
                "ppid": {c.pid: c.ppid() for c in kids}, "pss": {c.pid: pss(c.pid) for c in kids},
                "threads": {c.pid: c.num_threads() for c in kids}, "main": os.getpid(),
                "main_pss": pss(os.getpid()), "main_threads": me.num_threads()}

    sent = time.time()  # the script's own clock (the log's too): the compile job starts after it, ends before done
    warm(32)
    done = time.time()
    # the pool idles now: until the watcher has read its processes (the resource tracker beside its worker too),
    # the probe, until it has read them all again, the probe again; the pool idles until the exit shuts it down
    first = probe()  # as the compile returned: where the pool's last busy reading (often its peak) falls
    pool = first["pids"]
    wait(lambda: read_all(pool, done), limit=120)
    before, at = probe(), time.time()
    wait(lambda: read_all(pool, at), limit=120)
    after = probe()
    wait(lambda: time.time() - done >= float(sys.argv[2]), limit=60)  # a server idles on: past the idle-pool bar
    with open(sys.argv[1], "w") as f:
        json.dump({"first": first, "before": before, "after": after, "sent": sent, "done": done,
                   "idled_to": time.time()}, f)
''')


def test_fx_subprocess_compile_pool_tells_its_whole_story(tmp_path: Path) -> None:
    """TORCHINDUCTOR_FX_COMPILE_MODE=subprocess: an installed library's first compile makes torch's FX-subprocess
    compile pool (a SubprocPool(1, kind=SPAWN) sidecar, its one spawned worker, multiprocessing's resource tracker
    beside it). Its story, against the script's own readings while the pool idled (psutil's descendants of the
    main, each one's smaps_rollup PSS and threads, the script's clock) and the test's own psutil look as the main
    ended: who made it (the library's line, the distribution named), its processes as ps lists them, its memory
    at once, its busy and idle span, how it ended (torch's atexit shut it down), and that nothing was left.
    torch 2.13 may hang at exit in this mode: the run is bounded (run_until) and a hang fails the test saying so."""
    import psutil

    script, out, log = tmp_path / "serve.py", tmp_path / "probe.json", tmp_path / "log.jsonl"
    script.write_text(FX)
    rel = "wp_fx_serve/fxstep.py"
    lib = SERVING / rel
    line = next(i for i, x in enumerate(lib.read_text().splitlines(), 1) if "# first compile" in x)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_FX_COMPILE_MODE="subprocess",
                    TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"),
                    PYTHONPATH=os.pathsep.join(filter(None, (str(SERVING), os.environ.get("PYTHONPATH")))))
    left: dict[str, Any] = {}

    def main_ended(recs: list[dict[str, Any]]) -> bool:
        """The main ended by itself (a zombie until run_until reaps it): its process_exit record alone comes
        before the interpreter's own teardown, which an interrupt then would cut short (SIGINT, rc -2)."""
        main = next((r["pid"] for r in recs if r["event"] == "process_start" and r["role"] == "main"), None)
        try:
            return main is not None and psutil.Process(main).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def look() -> None:
        """As the main has ended: which of the probe's processes still run (psutil, a zombie is not running), and
        which of them still do after a bound (ending just then is not being left), with their PSS."""
        pids = json.loads(out.read_text())["after"]["pids"] if out.exists() else []

        def running() -> dict[int, int]:
            alive = {}
            for pid in pids:
                try:
                    if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                        alive[pid] = psutil.Process(pid).memory_full_info().pss
                except psutil.NoSuchProcess:
                    pass
            return alive

        left["at_end"] = sorted(running())
        try:
            wait_until(lambda: not running(), 10)
        except WaitTimeout:
            pass
        left["after"] = running()

    idles = IDLE_POOL_S + 3.0  # the scenario's length, far from the idle-pool finding's bar (which gives Fix first)
    res, reached = run_until([sys.executable, str(script), str(out), str(idles)], env, log, main_ended, timeout=240,
                             cwd=tmp_path, on_exit=look)
    assert reached and res.returncode == 0, f"torch hung at exit (or failed): {res.stderr[-3000:]}"
    wait_for_watcher(log, timeout=60)
    probe = json.loads(out.read_text())
    before, after = probe["before"], probe["after"]
    cmd = before["cmd"]
    (side,) = [int(p) for p, c in cmd.items() if "compile_worker" in c]
    (worker,) = [int(p) for p, c in cmd.items() if c.endswith("--multiprocessing-fork")]
    (tracker,) = [int(p) for p, c in cmd.items() if "resource_tracker" in c]
    assert before["pids"] == after["pids"] == sorted((side, worker, tracker)), probe  # the probe's own count
    assert "--kind=spawn" in cmd[str(side)] and before["ppid"][str(side)] == before["main"]
    assert before["ppid"][str(worker)] == before["ppid"][str(tracker)] == side
    recs = read_log(log)
    assert not events(recs, "tracer_error")
    roles = {r["pid"]: r["role"] for r in events(recs, "process_start")}
    roles.update({r["pid"]: r["role"] for r in events(recs, "role")})
    assert (roles[side], roles[worker], roles[tracker]) == ("fx-compile-sidecar", "compile-worker",
                                                            "resource-tracker")
    rep = report_json(log)
    (pool,) = rep["pools"]
    # who made it: the library's line, its distribution named (a setting is the user's fix, not a change there)
    assert pool["fx_subprocess"] and pool["kind"] == "subproc" and pool["creator_pid"] == before["main"]
    assert pool["caller"]["file"] == str(lib) and pool["caller"]["line"] == line, pool["caller"]
    assert (pool["made_in"]["dist"], pool["made_in"]["version"]) == ("wp-fx-serve", "0.1"), pool["made_in"]
    # its processes as ps lists them: the sidecar and its worker; with the resource tracker, every descendant
    assert pool["sidecar_pid"] == side and pool["worker_pids"] == [worker] and pool["processes"] == 2
    counts = pool["counts"]
    assert counts["pids"] == before["pids"] and counts["processes"] == 3 and counts["read"] == 3, counts
    for pid in (side, worker, tracker):  # threads as ps's NLWP: between the probe's two readings
        low, high = sorted((before["threads"][str(pid)], after["threads"][str(pid)]))
        assert low <= counts["threads"][str(pid)] <= high, (counts, before["threads"], after["threads"])
    # busy and idle against the script's clock: the compile job ran between sent and done; the pool then idled
    # at least until the script's last reading, and was shut down after it (the exit)
    t0 = rep["t0"]
    assert pool["jobs"] == 1 and probe["sent"] <= t0 + pool["first_job"] + ROUND_S, (pool, probe)
    assert probe["sent"] <= t0 + pool["busy_until"] + ROUND_S <= probe["done"] + SLACK_S, (pool, probe)
    assert pool["idle_s"] >= probe["idled_to"] - probe["done"] - SLACK_S, (pool, probe)
    assert probe["idled_to"] - probe["done"] >= idles, probe
    assert t0 + pool["shutdown_at"] + ROUND_S >= probe["idled_to"], (pool, probe)
    # its memory at once while it idled, against the probe's smaps_rollup sum of all three (PSS moves a little
    # as pages are touched: the probe's two readings bound it, 5 % either way): the resource tracker beside the
    # worker is read in the pool's sweeps, so the figure is whole ("3 of 3"), never "at least"
    sums = [sum(p["pss"][str(pid)] for pid in (side, worker, tracker)) for p in (before, after)]
    low, high = sorted(sums)
    assert low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool["held_pss_bytes"], sums)
    assert (pool["held_read"], pool["held_processes"]) == (3, 3), pool
    # the main's own is read at the counts' moment, the pool's peak: at its last busy reading as often as in its
    # idle (a CI run: 360 MB at the compile's return, 334 MB idle), so the script's reading as the compile
    # returned bounds it too
    own = counts["creator_pss_bytes"]
    mains = [probe[k]["main_pss"] for k in ("first", "before", "after")]
    assert min(mains) * 0.95 <= own <= max(mains) * 1.05, (own, probe)
    # how it ended: the atexit handler _SubprocessFxCompile.process_pool registers called its shutdown, which
    # returned once the sidecar had ended
    ending = pool["ending"]
    assert ending["kind"] == "shutdown-completed" and pool["shutdown_outcome"] == "returned", ending
    assert pool["shutdown_by"] == BY_POOL_ATEXIT, pool["shutdown_by"]
    # what was left: nothing, by the report and by psutil (whatever ran as the main ended, ended within 10 s)
    assert rep["leftover_pids"] == [] and left["after"] == {}, (rep["leftover_pids"], left)
    answer = " ".join(rep["answer"].split())
    made = f"made an FX-subprocess compile pool (sidecar {side} + 1 worker) at wp-fx-serve 0.1: {rel}:{line} (warm)"
    assert made in answer, answer
    assert f"holding {round(pool['held_pss_bytes'] / MIB)} MiB real memory (PSS)" in answer, answer
    assert "holding at least" not in answer and "processes read" not in answer, answer
    # its idle MiB·s too: the tracker never read made every moment of the span unread (idle_unread_s the whole
    # idle_s); read now, the span is read from the script's whole reading on (a watcher stalled under load may
    # still leave a stretch unread, told "(read for N of M s)": that is its floor, not the tracker's)
    assert pool["idle_unread_s"] < pool["idle_s"] - 1.0, pool
    assert f"{BY_POOL_ATEXIT} shut it down" in answer, answer
    # the fix is this pool's setting (compile_threads=1 does not stop it), the library named
    fix = answer.split("Fix first: ")[1]
    assert fix.startswith("unset TORCHINDUCTOR_FX_COMPILE_MODE") and f"wp-fx-serve 0.1 ({rel}:{line})" in fix, fix
    # its one job was pending from the script's call until it returned: no idle stretch lies inside that
    assert all(t0 + g["to_s"] <= probe["sent"] or t0 + g["from_s"] >= probe["done"] for g in pool["idle_gaps"]), \
        (pool["idle_gaps"], probe)
    # no setting on this pool was changed late: its one worker is torch's fixed size, not compile_threads
    assert "setting-too-late" not in {f["kind"] for f in rep["findings"]}, answer


SPAWN = textwrap.dedent('''
    import torch._inductor.config as c
    from torch._inductor.async_compile import AsyncCompile
    if __name__ == "__main__":
        c.worker_start_method = "spawn"
        print(AsyncCompile.process_pool().submit(abs, -3).result(timeout=120))
''')


def test_spawn_mode_pool_works_traced(tmp_path: Path, log: Path) -> None:
    """Spawn pickles the (wrapped) worker initializer: tracing must not break it."""
    script = tmp_path / "spawn.py"
    script.write_text(SPAWN)
    env = clean_env(TORCHINDUCTOR_COMPILE_THREADS="2")
    plain = run_python([str(script)], env, timeout=180)
    traced = run_python([str(script)], {**env, "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log)}, timeout=180)
    assert traced.returncode == plain.returncode == 0, traced.stderr[-3000:]
    assert traced.stdout == plain.stdout == "3\n"
    recs = read_log(log)
    assert not events(recs, "tracer_error")
    roles = {s["role"] for s in events(recs, "process_start")} | {r["role"] for r in events(recs, "role")}
    assert {"main", "compile-worker", "resource-tracker"} <= roles
    assert report_json(log)["leftover_pids"] == []
