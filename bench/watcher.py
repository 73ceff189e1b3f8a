"""The watcher process's costs, side by side: what the root pays to start it, what it costs to run.

Usage (the interpreter must have wp-autotrace installed, e.g. the worktree's .venv):

    python bench/watcher.py [--rounds 40] [--duration 20] [--host 1000] [--compile 0]

1. Root start-up added: `python -c pass` traced with the watcher (WP_AUTOTRACE_SAMPLE_INTERVAL=0.1)
   vs traced without it (=0), alternating; wall and CPU from wait4 (the root plus the
   intermediate it reaps). The root's own CPU for `watcher.spawn()` is measured in-process
   (time.process_time: this process only), median of spaced calls.
2. Watcher CPU at 0.1 s: a traced root with 40 descendants (8 shells x 4 `sleep`), the host
   filled with `--host` sleeping processes outside the run (and, second row, the same number
   inside the run); the watcher's utime+stime from /proc/PID/stat over `--duration` s.
3. `--compile N`: N alternating rounds of bench/scenario/compile_run.py (cold torch.compile,
   caches off) untraced vs traced; median wall ratio.

Prints markdown rows; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from run_common import spawn_timed  # bench/ is sys.path[0] when a bench script runs

BENCH = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("WP_AUTOTRACE", "TORCHINDUCTOR_", "TORCH_WARM_POOL", "PYTHONPATH", "WP_BENCH_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, user+sys CPU s of the process and the children it reaped); the run must succeed."""
    wall, cpu, status = spawn_timed(argv, env)
    assert status == 0, status
    return wall, cpu


def startup(rounds: int, tmp: Path) -> dict[str, Any]:
    variants = {"watcher off": "0", "watcher on": "0.1"}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rounds):
        for name in (list(variants) if r % 2 else list(variants)[::-1]):
            log = tmp / f"s{r}-{variants[name]}.jsonl"
            w, c = timed([sys.executable, "-c", "pass"], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                                                                   WP_AUTOTRACE_SAMPLE_INTERVAL=variants[name]))
            wall[name].append(w)
            cpu[name].append(c)
            log.unlink()  # the watcher leaves at once when its log is gone
        time.sleep(0.05)
    return {"wall": {k: statistics.median(v) for k, v in wall.items()},
            "cpu": {k: statistics.median(v) for k, v in cpu.items()}, "rounds": rounds}


def spawn_self_cpu(n: int, tmp: Path) -> dict[str, float]:
    """watcher.spawn() in this process: its own CPU (process_time) and wall; the watchers then leave."""
    from wp_autotrace.runtime.spawn import spawn

    walls, cpus = [], []
    for i in range(n):
        log = tmp / f"spawn{i}.jsonl"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        time.sleep(0.3)  # let the previous watcher start up: it is not what is measured
        t0, c0 = time.perf_counter(), time.process_time()
        ok = spawn(fd, str(log), f"bench{i}", 0.0, 0.1, 0.0)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        assert ok
        os.close(fd)
        log.unlink()
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "n": n}


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # (14) utime, (15) stime, in clock ticks


def watcher_pid(log: Path) -> int:
    """The watcher's pid, from the log's watcher_start record, once it is there."""
    while True:
        for line in log.read_bytes().splitlines():
            if b'"watcher_start"' in line:
                return int(json.loads(line[line.find(b"{"):])["pid"])  # past a torn fragment, if any
        time.sleep(0.1)


def sleepers(n: int) -> list[subprocess.Popen[bytes]]:
    """n sleeping processes outside any traced run, in their own process group."""
    procs = [subprocess.Popen(["sleep", "600"], start_new_session=True, stdin=subprocess.DEVNULL)
             for _ in range(n)]
    return procs


ROOT = textwrap.dedent('''
    import subprocess, sys, time
    shell = "sleep 600 & sleep 600 & sleep 600 & sleep 600 & wait"
    kids = [subprocess.Popen(["sh", "-c", shell]) for _ in range(8)]
    kids += [subprocess.Popen(["sleep", "600"]) for _ in range(int(sys.argv[1]))]
    print("ready", flush=True)
    time.sleep(600)
''')


def watcher_cpu(host: int, in_run: int, duration: float, tmp: Path) -> dict[str, Any]:
    """The watcher's CPU % of one core at 0.1 s, with `host` processes outside the run and `in_run` inside."""
    outside = sleepers(host)
    script, log = tmp / "root.py", tmp / f"cpu-{host}-{in_run}.jsonl"
    script.write_text(ROOT)
    root = subprocess.Popen([sys.executable, str(script), str(in_run)], stdout=subprocess.PIPE,
                            env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), start_new_session=True)
    try:
        assert root.stdout is not None and root.stdout.readline() == b"ready\n"
        wpid = watcher_pid(log)
        time.sleep(2.5)  # past the first samples (every process new) and a heartbeat
        c0, t0 = proc_cpu(wpid), time.perf_counter()
        time.sleep(duration)
        c1, t1 = proc_cpu(wpid), time.perf_counter()
        trees = sum(1 for line in log.read_bytes().splitlines() if b'"event":"tree"' in line)
        run = max(json.loads(line)["count"] for line in log.read_bytes().splitlines() if b'"event":"tree"' in line)
        return {"host": sum(1 for n in os.listdir("/proc") if n.isdigit()), "run": run,
                "pct": (c1 - c0) / (t1 - t0) * 100, "duration": t1 - t0, "trees": trees}
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()
        for p in outside:
            p.kill()
        for p in outside:
            p.wait()
        log.unlink(missing_ok=True)


def compile_rounds(n: int, tmp: Path) -> dict[str, Any]:
    """Cold torch.compile (bench/scenario), untraced vs traced, n alternating rounds."""
    walls: dict[str, list[float]] = {"untraced": [], "traced": []}
    cpu: list[float | None] = []
    for r in range(n):
        for name in (["untraced", "traced"] if r % 2 == 0 else ["traced", "untraced"]):
            d = tmp / f"c{r}{name}"
            d.mkdir()
            env = clean_env(TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=str(d / "cache"),
                            PYTHONPATH=str(BENCH / "scenario"), WP_BENCH_CHAIN_MARKER=str(d / "chain-done"),
                            WP_BENCH_CHAIN_TIMEOUT="120")
            if name == "traced":
                env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(d / "log.jsonl"))
            p = subprocess.Popen([sys.executable, str(BENCH / "scenario" / "compile_run.py")], env=env, cwd=d,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            t0 = time.perf_counter()
            p.wait(600)
            walls[name].append(time.perf_counter() - t0)
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the sidecar chain it leaves behind
            except ProcessLookupError:
                pass
            if name == "traced":
                cpu.append(_watcher_cpu_s(d / "log.jsonl"))
            print(f"  compile {name}: {walls[name][-1]:.1f} s", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {"median": med, "ratio": med["traced"] / med["untraced"], "rounds": n, "watcher_cpu_s": cpu,
            "walls": walls}


def _watcher_cpu_s(log: Path, timeout: float = 10) -> float | None:
    """The watcher's own CPU seconds, from its watcher_exit record (it leaves once the run is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_bytes().splitlines() if log.exists() else []:
            if b'"watcher_exit"' in line:
                return float(json.loads(line)["cpu_s"])
        time.sleep(0.2)
    return None


def walls_text(r: dict[str, Any]) -> str:
    return "; ".join(f"{k} " + ", ".join(f"{w:.1f}" for w in v) for k, v in r["walls"].items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--spawns", type=int, default=15)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--host", type=int, default=1000)
    ap.add_argument("--compile", type=int, default=0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-watcher-"))
    print(f"load {os.getloadavg()}", flush=True)
    s = startup(args.rounds, tmp)
    on, off = s["wall"]["watcher on"], s["wall"]["watcher off"]
    print(f"| root start-up added by the watcher (`python -c pass`, median of {s['rounds']} alternating) | "
          f"+{(on - off) * 1e3:.1f} ms wall, +{(s['cpu']['watcher on'] - s['cpu']['watcher off']) * 1e3:.1f} ms "
          f"CPU (root + intermediate) | ≤ 20 ms wall |", flush=True)
    sp = spawn_self_cpu(args.spawns, tmp)
    print(f"| `watcher.spawn()` in the root (median of {sp['n']}) | {sp['wall'] * 1e3:.1f} ms wall, "
          f"{sp['cpu'] * 1e3:.2f} ms CPU in the root itself | ≤ 20 ms wall, ≤ 5 ms CPU |", flush=True)
    for in_run in (0, args.host):
        c = watcher_cpu(args.host, in_run, args.duration, tmp)
        print(f"| watcher CPU at 0.1 s, {c['run']} run processes, {c['host']} host processes | "
              f"{c['pct']:.2f}% of one core ({c['duration']:.0f} s, {c['trees']} tree records) | "
              "≤ 1% of one core |", flush=True)
    if args.compile:
        r = compile_rounds(args.compile, tmp)
        print(f"| cold torch.compile traced / untraced (median of {r['rounds']} alternating) | {r['ratio']:.3f}× "
              f"({r['median']['traced']:.1f} s / {r['median']['untraced']:.1f} s; runs {walls_text(r)}; watcher CPU "
              f"{r['watcher_cpu_s']} s) | ≤ 1.02 |", flush=True)
    print(f"load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
