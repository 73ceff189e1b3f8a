"""torch 2.13's vendored quack compile workers, run for real on a CPU host with stand-ins for its GPU imports."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, events, needs_torch, read_log, report_json, wait_for_watcher
from .procs import PROBE_PRELUDE, run_until

MIB = 2**20
QUACK = Path(__file__).resolve().parent / "fixtures" / "quack"
ROUND_S = 0.0005  # the report rounds its times to the ms


def _quack_files() -> bool:
    """torch's vendored quack autotuner and compile worker, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    where = Path(spec.origin).parent / "_vendor" / "quack"
    return (where / "autotuner.py").is_file() and (where / "_compile_worker.py").is_file()


pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow,
              pytest.mark.skipif(not _quack_files(), reason="torch without _vendor/quack (2.13+)")]

SCRIPT = PROBE_PRELUDE + textwrap.dedent('''
    from torch._vendor.quack.autotuner import Autotuner, AutotuneConfig
    from wp_quack_user import tune

    def probe():
        """The compile workers as ps lists them under this process, with each one's smaps_rollup PSS."""
        kids = [c for c in psutil.Process().children(recursive=True) if "_compile_worker" in " ".join(c.cmdline())]
        return {"pids": sorted(c.pid for c in kids), "cmd": {c.pid: c.cmdline() for c in kids},
                "ppid": {c.pid: c.ppid() for c in kids}, "pss": {c.pid: pss(c.pid) for c in kids},
                "main": os.getpid()}

    tuner = Autotuner(tune, key=["n"], configs=[AutotuneConfig(block=b) for b in (1, 2)])
    handle = tuner._precompile(8, configs=tuner.configs)  # precompile line
    for i in range(len(tuner.configs)):
        handle.wait_for(i, timeout=120)
    done = time.time()
    # the workers idle now: until the watcher has read both, the probe; until it has read them again, the probe
    pool = probe()["pids"]
    wait(lambda: read_all(pool, done), limit=120)
    before, at = probe(), time.time()
    wait(lambda: read_all(pool, at), limit=120)
    after = probe()
    asked = time.time()
    handle.shutdown()  # shutdown line
    returned = time.time()
    left = [c.pid for c in psutil.Process().children(recursive=True)]
    with open(sys.argv[1], "w") as f:
        json.dump({"before": before, "after": after, "asked": asked, "returned": returned, "left": left,
                   "codes": {w.pid: w.returncode for w in handle._workers},
                   "failed": [handle.is_failed(i) for i in range(len(tuner.configs))]}, f)
''')


def _line(script: str, marker: str) -> int:
    return next(i for i, x in enumerate(script.splitlines(), 1) if marker in x)


def test_quacks_real_compile_workers_are_a_pool(tmp_path: Path) -> None:
    """torch's own Autotuner._precompile (the first config took over quack's 0.5 s bar, the cache on) Popens its
    real `-m torch._vendor.quack._compile_worker` workers, and _PrecompileHandle.shutdown stops them: the report's
    quack pool against the script's own readings while they idled (psutil's children, each one's smaps_rollup
    PSS) and as shutdown returned (the workers' exit codes, nothing left under the main): who made it at which
    line, its workers as ps lists them, its memory at once, how it ended. Stand-ins replace cutlass, cuda,
    tvm_ffi and triton (tests/fixtures/quack/README.md): no CUDA compile work is exercised."""
    script, out, log = tmp_path / "tune.py", tmp_path / "probe.json", tmp_path / "log.jsonl"
    script.write_text(SCRIPT)
    roots = (str(QUACK / "stand_ins"), str(QUACK), os.environ.get("PYTHONPATH"))
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), QUACK_CACHE_ENABLED="1",
                    QUACK_CACHE_DIR=str(tmp_path / "quack-cache"), QUACK_COMPILE_WORKERS="2",
                    PYTHONPATH=os.pathsep.join(filter(None, roots)))
    res, reached = run_until([sys.executable, str(script), str(out)], env, log, lambda recs: False, timeout=300,
                             cwd=tmp_path)
    assert res.returncode == 0 and out.exists(), f"the scenario failed or was cut off: {res.stderr[-3000:]}"
    wait_for_watcher(log, timeout=60)
    probe = json.loads(out.read_text())
    before, after = probe["before"], probe["after"]
    workers = before["pids"]
    assert len(workers) == 2 and after["pids"] == workers, probe  # QUACK_COMPILE_WORKERS=2, both alive to the end
    assert all(before["cmd"][str(p)][1:] == ["-m", "torch._vendor.quack._compile_worker"] for p in workers), probe
    assert all(before["ppid"][str(p)] == before["main"] for p in workers), probe
    assert probe["failed"] == [False, False], probe  # each worker imported the user's function and ran its config
    recs = read_log(log)
    assert not events(recs, "tracer_error")
    roles = {r["pid"]: r["role"] for r in events(recs, "process_start")}
    roles.update({r["pid"]: r["role"] for r in events(recs, "role")})
    assert [roles[p] for p in workers] == ["quack-worker", "quack-worker"], roles
    rep = report_json(log)
    (pool,) = rep["pools"]
    # who made it: the main, at the script's _precompile line
    assert pool["kind"] == "quack" and pool["creator_pid"] == before["main"], pool
    assert pool["caller"]["file"] == str(script) and pool["caller"]["line"] == _line(SCRIPT, "# precompile line")
    # its workers as ps lists them
    assert pool["worker_pids"] == workers and pool["processes"] == 2 and pool["sidecar_pid"] is None, pool
    assert pool["counts"]["pids"] == workers, pool["counts"]
    # its memory at once, against the script's smaps_rollup sum of both workers (its two readings bound it, 5 %
    # either way: PSS moves as pages are touched and shared)
    sums = [sum(p["pss"][str(pid)] for pid in workers) for p in (before, after)]
    low, high = sorted(sums)
    assert low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool["held_pss_bytes"], sums)
    assert (pool["held_read"], pool["held_processes"]) == (2, 2), pool
    # how it ended: the script's shutdown call stopped it, none left under the main. shutdown closes each
    # worker's stdin and waits 5 s for it, then SIGKILLs it: a torch process's teardown under load outlasts
    # that (seen at load 17, untraced too), so each worker's ending is checked against its own wait status
    assert probe["left"] == [] and sorted(int(p) for p in probe["codes"]) == workers, probe
    procs = {p["pid"]: p for p in rep["processes"]}
    for pid, code in probe["codes"].items():
        ending = procs[int(pid)]["ending"]
        if code == 0:
            assert ending["kind"] == "exit" and ending["code"] in (0, None), ending  # None: status unread
        else:
            assert code == -9, probe  # shutdown's w.kill(), nothing else signals them
            assert (ending["signal"], ending["sender"]) == ("SIGKILL", before["main"]), ending
            assert "in shutdown" in ending["words"], ending
    assert pool["ending"]["kind"] == "shutdown-completed" and pool["shutdown_outcome"] == "returned", pool["ending"]
    assert pool["shutdown_by"] == "user code" and pool["shutdown_calls"] == 1, pool
    assert pool["shutdown_caller"]["line"] == _line(SCRIPT, "# shutdown line"), pool["shutdown_caller"]
    t0 = rep["t0"]
    assert probe["asked"] <= t0 + pool["shutdown_at"] + ROUND_S <= probe["returned"] + ROUND_S, (pool, probe)
    assert rep["leftover_pids"] == [], rep["leftover_pids"]
    answer = " ".join(rep["answer"].split())
    made = (f"made a quack compile pool (torch._vendor.quack's precompile) (2 quack compile workers, no sidecar) "
            f"at {script}:{_line(SCRIPT, '# precompile line')}")
    assert made in answer, answer
    assert f"holding {round(pool['held_pss_bytes'] / MIB)} MiB real memory (PSS)" in answer, answer
    assert "user code shut it down" in answer, answer
