"""A compile pool made inside a pid namespace (`unshare -p -f --mount-proc python`, bwrap, nsjail): its creator
records the sidecar by its pid there (pool-create's sidecar_pid 2), the sidecar its workers (worker_pids [5, 7]).
Once the namespace's processes are shown by their host pids, those pids read on the host named nothing (the
report said "sidecar 2", "its sidecar was not seen", "workers none"); they are the pool's own processes' host
pids now.

Truth: the fixture test reads the watcher's tree entries (each host pid with its namespace pid) and the creator's
own records itself; the end-to-end test reads the host pids and namespace pids with psutil and /proc/PID/status
while the pool runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, needs_torch, report_json, wait_for_watcher

POOL = Path(__file__).resolve().parent / "fixtures" / "odd" / "pidns_pool.jsonl"


def test_a_pool_made_in_a_pid_namespace_names_its_processes_by_host_pid() -> None:
    """A real log (the end-to-end test's program on torch 2.13, CPU)."""
    lines = [json.loads(x) for x in POOL.read_text().splitlines() if x.strip()]
    host_of = {e["nspid"]: e["pid"] for r in lines if r["event"] == "tree" for e in r.get("started", ())
               if "nspid" in e}
    side_ns = next(r["sidecar_pid"] for r in lines if r["event"] == "return" and r.get("sidecar_pid"))
    workers_ns = next(r["worker_pids"] for r in lines if r["event"] == "return" and r.get("worker_pids"))
    assert side_ns == 2 and len(workers_ns) == 2 and {side_ns, *workers_ns} <= set(host_of), host_of
    rep = report_json(POOL)
    [pool] = rep["pools"]
    assert pool["sidecar_pid"] == host_of[side_ns] and pool["sidecar_start"] is not None, pool
    assert sorted(pool["worker_pids"]) == sorted(host_of[n] for n in workers_ns), pool
    answer = " ".join(rep["answer"].split())
    assert f"(sidecar {host_of[side_ns]} + 2 workers)" in answer and "sidecar was not seen" not in answer, answer


def test_a_namespaced_sidecar_the_watcher_never_saw_is_its_namespace_row(tmp_path: Path) -> None:
    """The same log with every watcher reading of the sidecar taken out (one that ended between two samples): its
    own records stay under its namespace (pid 2 there, no host pid known), its creator took its host pid, and the
    pool's sidecar is that namespace row, never "not seen" nor the host's process 2."""
    lines = [json.loads(x) for x in POOL.read_text().splitlines() if x.strip()]
    sidecar = next(e["pid"] for r in lines if r["event"] == "tree" for e in r.get("started", ()) if e.get("nspid") == 2)
    for r in lines:
        if r["event"] in ("tree", "memory"):
            for key, value in list(r.items()):
                if isinstance(value, list):
                    r[key] = [e for e in value if not (isinstance(e, dict) and e.get("pid") == sidecar)]
    log = tmp_path / "unseen.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert f'"pid": {sidecar},' not in log.read_text()  # named only as its workers' parent now
    rep = report_json(log)
    [pool] = rep["pools"]
    row = next(p for p in rep["processes"] if p["role"] == "compile-sidecar")
    assert row["pid"] == 2 and row["host"] != lines[0]["host"] and row["traced"], row  # its namespace's row
    assert pool["sidecar_pid"] == 2 and pool["sidecar_start"] is not None, pool
    assert "sidecar was not seen" not in " ".join(rep["answer"].split()), rep["answer"]


INNER = textwrap.dedent('''
    import os, sys, time
    from torch._inductor.async_compile import AsyncCompile

    if __name__ == "__main__":
        AsyncCompile.wait_pool_ready()  # first Triton kernel: the pool's sidecar and its workers
        pool = AsyncCompile.process_pool()
        for job in [pool.submit(time.sleep, 0.3) for _ in range(2)]:
            job.result(timeout=120)
        open(sys.argv[1] + ".ready", "w").close()
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.05)
''')
# The main, outside the namespace, reads the pool's processes (host pid, namespace pid, parent) once it is ready,
# waits for the watcher to have sampled each, then lets the namespaced python end.
OUTER = textwrap.dedent('''
    import json, os, subprocess, sys, time
    import psutil
    flag, inner = sys.argv[1], sys.argv[2]
    ns = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", sys.executable, inner, flag])
    def nspid(pid):
        with open(f"/proc/{pid}/status") as f:
            return next(int(x.split()[-1]) for x in f if x.startswith("NSpid:"))
    end, truth = time.monotonic() + 240, {}
    while time.monotonic() < end and ns.poll() is None and not truth:
        if os.path.exists(flag + ".ready"):
            kids = [c for c in psutil.Process(ns.pid).children(recursive=True) if c.name().startswith("python")]
            truth = {c.pid: {"nspid": nspid(c.pid), "ppid": c.ppid()} for c in kids}
        time.sleep(0.05)
    print(json.dumps(truth), flush=True)
    while time.monotonic() < end:
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as log:
            text = log.read()
        if all(f'"nspid":{t["nspid"]}'.encode() in text for t in truth.values()):
            break
        time.sleep(0.05)
    open(flag, "w").close()
    print("rc", ns.wait())
''')


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_pool_made_in_a_real_pid_namespace_is_told_by_host_pid(tmp_path: Path) -> None:
    inner, outer, log, flag = tmp_path / "inner.py", tmp_path / "outer.py", tmp_path / "run.jsonl", tmp_path / "go"
    inner.write_text(INNER)
    outer.write_text(OUTER)
    done = subprocess.run([sys.executable, str(outer), str(flag), str(inner)], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                                        TORCHINDUCTOR_COMPILE_THREADS="2"))
    assert done.returncode == 0 and done.stdout.endswith("rc 0\n"), done.stdout + done.stderr
    truth = {int(pid): t for pid, t in json.loads(done.stdout.splitlines()[0]).items()}
    creator = next(pid for pid, t in truth.items() if t["nspid"] == 1)
    sidecar = next(pid for pid, t in truth.items() if t["ppid"] == creator)
    workers = sorted(pid for pid, t in truth.items() if t["ppid"] == sidecar)
    assert len(workers) == 2, truth
    wait_for_watcher(log, timeout=60)
    [pool] = report_json(log)["pools"]
    assert pool["creator_pid"] == creator and pool["sidecar_pid"] == sidecar, (pool, truth)
    assert sorted(pool["worker_pids"]) == workers, (pool, truth)
