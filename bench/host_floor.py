"""The host path against its floor, old tree against new, side by side in one run (issue 41).

Start-up: ``python -c pass`` in pip-less venvs (bench/startup_cost.py's), rounds alternating and
rotating; each figure is the median of the per-round paired differences of child CPU (user+sys from
``os.wait4``'s rusage), with its p25-p75:

- installed, WP_AUTOTRACE unset, over not installed (new, old); its floor: a venv with one .pth file whose
  line is ``import os`` (what site pays for reading any .pth line);
- a traced child of a traced root (WP_AUTOTRACE=1, the run's root pid another's) over installed-off
  (new, old);
- the floor: a one-module prototype (bench/floor_start.py: a finder holding the target module names,
  a process_start and a process_exit, the at-fork and atexit hooks) over installed-off.

Per call: two long-lived children (old tree, new tree) each trace torch's real
``AsyncCompile.warm_pool`` row (its environment read and recorded; TORCHINDUCTOR_COMPILE_THREADS=1, so
the call itself returns at once) through the tree's own .pth line, as a traced child of a run; the
parent drives rounds over a pipe, alternating; each loop is timed with the child's CPU clock
(rusage of itself). Beside it, in the new child: the untraced call and the floor, two preformatted
records of the real sizes and two os.write on the log's file, and the fused prototype (FUSED, below: both
records made per call with every check a record keeps, in one Python function) over the untraced call; and a
plain row, ``AsyncCompile.wakeup``
(no environment, no capture; it returns at once without a process pool), traced and untraced in both.

Usage: python bench/host_floor.py [--rounds N] [--call-rounds N] [--ref REF] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
import startup_cost  # noqa: E402

WARMUP = 5
CALLS = 2000  # calls per timed loop in the per-call children

# The fused prototype (the second floor): warm_pool's two records made and written by one function
# with every check a record keeps, in Python: the busy flag on a thread-local, the environment read live
# (six lookups in os.environ's dict, its JSON kept by their values), the call site's stack kept by its
# frame's (code, offset), the log's mark read (F_GETSIG) before each record, ts, seq and the duration made
# per record. Left out, as in the prototype: the recursion limit's moves, the open calls, the slow
# paths (a mark that does not read back, an oversized body) and the thread's name (its JSON is fixed here).
FUSED = r'''
import fcntl, itertools, json, threading
def fused_prototype(fd, raw, real_call):
    from wp_autotrace.common.env import POOL_ENV
    getsig, fcntl_ = fcntl.F_GETSIG, fcntl.fcntl
    fcntl_(fd, fcntl.F_SETSIG, 9)  # this bench's own description (its os.open), not the tracer's
    head, rest = real_call.split('"ts":', 1)
    middle = rest[rest.index(","):rest.index('"seq":') + 6]
    body = rest[rest.index('"seq":') + 6:]
    prefix = body[body.index(",") + 1:body.index('"call_id":') + 10]
    stack_text = body[body.index('"stack":'):body.index(',"env":')]
    call_head, return_head = head + '"ts":', head.replace('"call"', '"return"') + '"ts":'
    data, keys = os.environ._data, [os.environ.encodekey(k) for k in POOL_ENV]
    local, envs, stacks = threading.local(), {}, {}
    seq, ids = itertools.count(1), itertools.count(1)
    time_ns, perf_ns, write, getframe = time.time_ns, time.perf_counter_ns, os.write, sys._getframe
    def fused():
        d = local.__dict__
        if d.get("busy"):
            return raw()
        d["busy"] = True
        a, b, c, e, f, g = keys
        key = data.get(a), data.get(b), data.get(c), data.get(e), data.get(f), data.get(g)
        env = envs.get(key)
        if env is None:
            env = envs[key] = ',"env":' + json.dumps({n: os.environ[n] for n in POOL_ENV if n in os.environ},
                                                     separators=(",", ":"))
        frame = getframe(1)
        site = id(frame.f_code), frame.f_lasti
        stack = stacks.get(site) or stacks.setdefault(site, stack_text)
        cid = str(next(ids))
        if fcntl_(fd, getsig) != 9:
            raise OSError("not the log")
        write(fd, f'\n{call_head}{time_ns()}e-9{middle}{next(seq)},{prefix}{cid},"thread":"MainThread",'
                  f'{stack}{env}}}\n'.encode())
        d["busy"] = False
        start = perf_ns()
        result = raw()
        d["busy"] = True
        us = (perf_ns() - start + 500) // 1000
        if fcntl_(fd, getsig) != 9:
            raise OSError("not the log")
        write(fd, f'\n{return_head}{time_ns()}e-9{middle}{next(seq)},"call_id":{cid},"duration_s":{us / 1e6}}}\n'
                  .encode())
        d["busy"] = False
        return result
    return fused
'''

# The per-call child: reads "VARIANT N" lines, answers the loop's CPU seconds (process_time).
CHILD = FUSED + r'''
import os, sys, time
for k, v in [kv.split("=", 1) for kv in sys.argv[2:]]:
    os.environ[k] = v  # set here, not at exec: the venv's own .pth must not start the other tree
line = open(sys.argv[1]).read().splitlines()[0]
exec(line)  # the tree's own .pth line, as site runs it
import torch._inductor.async_compile as ac
AC = ac.AsyncCompile
traced = AC.warm_pool
raw = AC.__dict__["warm_pool"].__func__
raw = getattr(raw, "__wrapped__", raw).__get__(AC)
assert traced.__func__ is not getattr(raw, "__func__", raw), "warm_pool is not traced"
log = os.environ["WP_AUTOTRACE_LOG"]
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
size = os.path.getsize(log)
traced()
lines = open(log, "rb").read()[size:].split(b"\n")
call = next(b"\n" + l for l in lines if b'"event":"call"' in l)
ret = next(b"\n" + l for l in lines if b'"event":"return"' in l)
def floor():
    os.write(fd, call)
    os.write(fd, ret)
fused = fused_prototype(fd, raw, call.decode().strip())
plain = AC.wakeup  # a plain row: no environment, no capture (returns at once: no process pool)
plain_raw = AC.__dict__["wakeup"].__func__
plain_raw = getattr(plain_raw, "__wrapped__", plain_raw).__get__(AC)
variants = {"traced": traced, "untraced": raw, "floor": floor, "fused": fused, "plain": plain,
            "plain untraced": plain_raw}
print("ready", len(call), len(ret), flush=True)
for cmd in sys.stdin:
    name, _, n = cmd.rpartition(" ")
    fn = variants[name]
    loops = range(int(n))
    t0 = time.process_time()
    for _ in loops:
        fn()
    print(time.process_time() - t0, flush=True)
'''


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """Median and p25-p75 of a[i] - b[i], in ms (inputs in s)."""
    diffs = [(x - y) * 1e3 for x, y in zip(a, b)]
    q = statistics.quantiles(diffs, n=4)
    return {"median": round(statistics.median(diffs), 3), "p25": round(q[0], 3), "p75": round(q[2], 3)}


def startup(tmp: Path, ref: str, rounds: int) -> dict[str, Any]:
    log = tmp / "log.jsonl"
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    base = sys.executable
    mk = startup_cost.make_venv
    venvs = {"bare": mk(tmp, "bare", base, None), "new": mk(tmp, "new", base, REPO / "wp_autotrace"),
             "old": mk(tmp, "old", base, startup_cost.export_ref(ref, tmp / "ref")),
             "floor": mk(tmp, "floor", base, None), "pth": mk(tmp, "pth", base, None)}
    # The off row's floor: site reading one .pth file whose line imports nothing new (`import os`).
    (next((venvs["pth"] / "lib").glob("python3*/site-packages")) / "wp_pth_floor.pth").write_text("import os\n")
    site = next((venvs["floor"] / "lib").glob("python3*/site-packages"))
    shutil.copy(BENCH / "floor_start.py", site / "wp_floor.py")
    sys.path.insert(0, str(BENCH))
    from floor_start import FLOOR_PTH

    (site / "wp_floor.pth").write_text(FLOOR_PTH)
    clean = startup_cost._clean
    on = {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_RUN": "x", "WP_AUTOTRACE_ROOT_PID": "1"}
    variants = {"bare": ("bare", clean()), "pth floor": ("pth", clean()), "off new": ("new", clean()),
                "off old": ("old", clean()),
                "child new": ("new", clean(**on)), "child old": ("old", clean(**on)),
                "floor": ("floor", clean(**on))}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds + WARMUP):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            venv, env = variants[name]
            _, c = startup_cost.timed([str(venvs[venv] / "bin" / "python"), "-c", "pass"], env)
            if r >= WARMUP:
                cpu[name].append(c)
            if name == "floor" or name.startswith("child"):
                log.write_bytes(b"")  # keep the log small: appends cost the same from empty
    return {
        "rounds": rounds,
        "cpu_median_ms": {k: round(statistics.median(v) * 1e3, 3) for k, v in cpu.items()},
        "off_over_bare_new": paired(cpu["off new"], cpu["bare"]),
        "off_over_bare_old": paired(cpu["off old"], cpu["bare"]),
        "pth_floor_over_bare": paired(cpu["pth floor"], cpu["bare"]),
        "child_over_off_new": paired(cpu["child new"], cpu["off new"]),
        "child_over_off_old": paired(cpu["child old"], cpu["off old"]),
        "floor_over_off": paired(cpu["floor"], cpu["off new"]),
    }


def _child(python: str, tree: Path, log: Path, tmp: Path, tag: str) -> subprocess.Popen[str]:
    script = tmp / "call_child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WP_AUTOTRACE", "PYTHON", "TORCH"))}
    env.update(PYTHONPATH=str(tree), TORCHINDUCTOR_COMPILE_THREADS="1")
    on = [f"WP_AUTOTRACE={1}", f"WP_AUTOTRACE_LOG={log}", f"WP_AUTOTRACE_RUN=x{tag}", "WP_AUTOTRACE_ROOT_PID=1",
          "WP_AUTOTRACE_SAMPLE_INTERVAL=0"]
    proc = subprocess.Popen([python, str(script), str(tree / "wp_autotrace" / "_bootstrap.pth"), *on], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(tmp))
    assert proc.stdout is not None
    head = proc.stdout.readline().split()
    if not head or head[0] != "ready":
        raise RuntimeError(f"{tag} child did not start")
    return proc


def _ask(proc: subprocess.Popen[str], name: str, n: int) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{name} {n}\n")
    proc.stdin.flush()
    return float(proc.stdout.readline()) / n


def per_call(tmp: Path, ref: str, rounds: int) -> dict[str, Any]:
    python = str(REPO / ".venv" / "bin" / "python")
    old_tree = tmp / "oldtree"
    startup_cost.export_ref(ref, old_tree)
    logs = {k: tmp / f"call-{k}.jsonl" for k in ("new", "old")}
    for log in logs.values():
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    kids = {"new": _child(python, REPO, logs["new"], tmp, "new"),
            "old": _child(python, old_tree, logs["old"], tmp, "old")}
    plan = [("new", "traced"), ("new", "untraced"), ("new", "floor"), ("new", "fused"), ("old", "traced"),
            ("old", "untraced"),
            ("new", "plain"), ("new", "plain untraced"), ("old", "plain"), ("old", "plain untraced")]
    got: dict[tuple[str, str], list[float]] = {p: [] for p in plan}
    try:
        for r in range(rounds + 2):
            k = r % len(plan)
            for who, name in plan[k:] + plan[:k]:
                t = _ask(kids[who], name, CALLS)
                if r >= 2:
                    got[(who, name)].append(t)
            for log in logs.values():
                os.truncate(log, 0)
    finally:
        for proc in kids.values():
            proc.kill()
            proc.wait()

    def us(a: list[float], b: list[float] | None = None) -> dict[str, float]:
        diffs = [(x - (b[i] if b else 0)) * 1e6 for i, x in enumerate(a)]
        q = statistics.quantiles(diffs, n=4)
        return {"median": round(statistics.median(diffs), 2), "p25": round(q[0], 2), "p75": round(q[2], 2)}

    return {"rounds": rounds, "calls_per_loop": CALLS,
            "traced_over_untraced_new_us": us(got[("new", "traced")], got[("new", "untraced")]),
            "traced_over_untraced_old_us": us(got[("old", "traced")], got[("old", "untraced")]),
            "floor_two_writes_us": us(got[("new", "floor")]),
            "fused_prototype_over_untraced_us": us(got[("new", "fused")], got[("new", "untraced")]),
            "plain_wakeup_over_untraced_new_us": us(got[("new", "plain")], got[("new", "plain untraced")]),
            "plain_wakeup_over_untraced_old_us": us(got[("old", "plain")], got[("old", "plain untraced")])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--call-rounds", type=int, default=40)
    parser.add_argument("--ref", default="main")
    parser.add_argument("--skip", choices=("startup", "call"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-floor-"))
    try:
        out: dict[str, Any] = {"ref": args.ref, "load_start": os.getloadavg()}
        if args.skip != "startup":
            out["startup"] = startup(tmp, args.ref, args.rounds)
        if args.skip != "call":
            out["call"] = per_call(tmp, args.ref, args.call_rounds)
        out["load_end"] = os.getloadavg()
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
