"""An independent reading of a traced run, for scoring the report against (docs/users.md).

Runs one user program (traced: `WP_AUTOTRACE=1 prog`, or `wp-autotrace run -- prog` with --via-run), and
samples its whole process tree itself, every TICK_S, with psutil and /proc/PID/smaps_rollup -- never the
tool's log. Each tick is one moment: the sums it records (all the program's processes, each pool) are sums at
once, unless a process of the program ended or turned zombie while the tick read them (a `torn` tick): PSS
moves to the co-sharers a process leaves, so a survivor read after its neighbours exited holds pages already
counted in their readings taken just before (a group SIGTERM: ~32 MiB twice in a 250 MiB pool). Torn ticks still
count who is alive, and their CPU; the at-once peaks (at_once) leave them out.

Processes are tracked by (pid, start time) from the moment they are first seen as a descendant, so an orphan
re-parented to pid 1 (or a subreaper) stays tracked. After the main process ends it keeps sampling
for --linger seconds (who is still alive, zombies, their PSS alone), then ends what is left, by pid and start
time, children first. Then it runs `wp-autotrace report LOG` (text and --json) and writes everything to --out.

    python bench/users/probe.py --out /tmp/u/case -- python bench/users/sidecar_killed.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

TICK_S = 0.25
MIB = 2**20
# A pool whose processes together used less CPU than this in one tick is idle in that tick.
IDLE_CPU_PER_TICK_S = 0.02
SIDECAR_MARK = "compile_worker/__main__.py"
AUTOTUNE_MARK = "__autotune_main__.py"
TOOL_MARKS = ("wp_autotrace", "wp-autotrace")
SENTINEL_MARK = "[signal sentinel]"  # how `wp-autotrace run` names its signal sentinel (cli/run/signals.py)
REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / ".venv" / "bin" / "wp-autotrace"


def smaps_pss(pid: int) -> int | None:
    """Pss in bytes from /proc/PID/smaps_rollup; None when unreadable (gone, zombie)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Tracked:
    def __init__(self, proc: psutil.Process, now: float) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.ctime = proc.create_time()
        try:
            self.cmd = " ".join(proc.cmdline())[:200]
            self.ppid = proc.ppid()
        except psutil.Error:
            self.cmd, self.ppid = "?", 0
        self.first_seen = now
        self.ended_at: float | None = None
        self.zombie_since: float | None = None
        self.zombie_parent: int | None = None
        self.role = "other"
        self.cpu = 0.0
        self.pss_alone_after_main: int | None = None
        self.sidecar: int | None = None  # a worker's pool: the sidecar it was first seen under
        self.max_threads = 0

    def alive(self) -> bool:
        return self.ended_at is None


def classify(t: Tracked, by_pid: dict[int, Tracked], main_pid: int, fork_pool: bool = False,
             now: float = 0.0) -> str:
    if any(m in t.cmd for m in TOOL_MARKS) and t.pid != main_pid:
        return "tool"
    if t.pid == main_pid:
        return "main"
    main = by_pid.get(main_pid)
    if fork_pool and main is not None and t.ppid == main_pid and t.cmd == main.cmd and now - t.first_seen >= 1.0:
        # --fork-pool: a fork of the main that has not exec'd for a second (its command line is still the main's:
        # not a subprocess between its fork and exec) is a worker of the main's fork pool (torch 2.1-2.3's
        # default); only for a program whose sole lasting forks are that pool's
        return "worker"
    if AUTOTUNE_MARK in t.cmd:
        return "autotune"
    if SIDECAR_MARK in t.cmd:
        parent = by_pid.get(t.ppid)
        return "worker" if parent is not None and parent.role == "sidecar" else "sidecar"
    return "other"


class Probe:
    def __init__(self, root: psutil.Process, via_run: bool, fork_pool: bool = False) -> None:
        self.root = root
        self.via_run = via_run
        self.fork_pool = fork_pool
        self.t0 = time.monotonic()
        self.tracked: dict[tuple[int, float], Tracked] = {}
        self.main_pid = root.pid if not via_run else 0
        self.ticks: list[dict[str, Any]] = []
        self.main_end: float | None = None
        self.program = ""  # the program's last argument (its script), as its command line shows it

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def session_members(self) -> list[psutil.Process]:
        """Every process in the program's session (it was started in a new one): finds a child that was
        re-parented before any tick saw it under its parent (a fork pool's workers whose creator crashed)."""
        out = []
        for pid in psutil.pids():
            try:
                if os.getsid(pid) == self.root.pid:
                    out.append(psutil.Process(pid))
            except (OSError, psutil.Error):
                pass
        return out

    def discover(self, now: float) -> None:
        seeds = [self.root] + [t.proc for t in self.tracked.values() if t.alive()] + self.session_members()
        for seed in seeds:
            try:
                kids = [seed] + seed.children(recursive=True)
            except psutil.Error:
                continue
            for p in kids:
                try:
                    key = (p.pid, p.create_time())
                except psutil.Error:
                    continue
                if key not in self.tracked:
                    self.tracked[key] = Tracked(p, now)
        if self.via_run and not self.main_pid:
            for t in self.tracked.values():
                # run's child that runs the program: not run's signal sentinel (a fork of run named as the
                # program, plus SENTINEL_MARK), nor a fork of run before its exec (no command line yet)
                if (t.ppid == self.root.pid and not any(m in t.cmd for m in TOOL_MARKS)
                        and self.program in t.cmd and SENTINEL_MARK not in t.cmd and t.alive()):
                    self.main_pid = t.pid
        by_pid = {t.pid: t for t in self.tracked.values() if t.alive()}
        for t in sorted(self.tracked.values(), key=lambda x: x.first_seen):
            if t.role == "other" or t.role == "sidecar":
                if t.role == "other":  # first seen between fork and exec: its command line was its parent's
                    try:
                        t.cmd = " ".join(t.proc.cmdline())[:200] or t.cmd
                    except psutil.Error:
                        pass
                t.role = classify(t, by_pid, self.main_pid, self.fork_pool, now)
                if t.role == "worker":
                    t.sidecar = t.ppid  # a fork pool's: its creator's pid keys the pool

    def sample(self) -> None:
        now = self.now()
        self.discover(now)
        pools: dict[int, dict[str, float]] = {}
        total = 0
        alive = zombies = procs = threads = 0
        by_pid: dict[int, int] = {}  # each process's PSS this tick: sums over any set of pids, at once
        read: list[Tracked] = []
        torn = False  # a process ended (or turned zombie) while this tick read them: no moment at once
        for t in self.tracked.values():
            if not t.alive():
                continue
            try:
                status = t.proc.status()
                cpu = sum(t.proc.cpu_times()[:2])
                ppid = t.proc.ppid()
                nthreads = t.proc.num_threads()
            except psutil.NoSuchProcess:
                t.ended_at, torn = now, True
                continue
            except psutil.Error:
                continue
            if status == psutil.STATUS_ZOMBIE:
                if t.zombie_since is None:
                    t.zombie_since, t.zombie_parent, torn = now, ppid, True
                continue
            read.append(t)
            t.ppid = ppid
            pss = smaps_pss(t.pid) or 0
            dcpu, t.cpu = cpu - t.cpu, cpu
            alive += 1
            if t.role == "tool":
                continue
            t.max_threads = max(t.max_threads, nthreads)
            procs += 1
            threads += nthreads
            total += pss
            by_pid[t.pid] = pss
            if self.main_end is not None and t.pss_alone_after_main is None:
                t.pss_alone_after_main = pss
            sid = t.pid if t.role == "sidecar" else (t.sidecar if t.role == "worker" else None)
            if sid is not None:
                pool = pools.setdefault(sid, {"pss": 0, "cpu": 0.0, "n": 0})
                pool["pss"] += pss
                pool["cpu"] += dcpu
                pool["n"] += 1
        # read again after all of them: one that ended after its own read left its pages to those read later
        torn = torn or not all(_running(t) for t in read)
        zombies = sum(1 for t in self.tracked.values() if t.alive() and t.zombie_since is not None)
        self.ticks.append({"t": now, "total_pss": total, "pools": pools, "alive": alive, "zombies": zombies,
                           "procs": procs, "threads": threads, "pss_by_pid": by_pid, "torn": torn})

    def program_alive(self) -> list[Tracked]:
        return [t for t in self.tracked.values() if t.alive() and t.role != "tool" and t.zombie_since is None]


def _running(t: Tracked) -> bool:
    """The same process (pid and start time) still running, and no zombie."""
    try:
        return t.proc.is_running() and t.proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def at_once(ticks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ticks that are moments at once: not torn. Ticks saved before a tick knew it was torn (no "torn" key)
    are judged from what they hold: one in which a process the tick before read is missing saw a death."""
    out, before = [], None
    for tk in ticks:
        now = tk.get("pss_by_pid") or {}
        torn = tk.get("torn")
        if torn is None:
            torn = before is not None and bool(set(before) - set(now))
        before = now
        if not torn:
            out.append(tk)
    return out


def peaks_at_once(ticks: list[dict[str, Any]]) -> dict[str, Any]:
    """The program's and its pools' largest PSS sums at one moment (MiB), over the ticks at once."""
    good = at_once(ticks)
    return {"peak_total_pss_mib_at_once": round(max((tk["total_pss"] for tk in good), default=0) / MIB, 1),
            "peak_pools_pss_mib_at_once": round(max((sum(p["pss"] for p in tk["pools"].values()) for tk in good),
                                                    default=0) / MIB, 1),
            "torn_ticks": len(ticks) - len(good)}


def pool_summary(probe: Probe) -> list[dict[str, Any]]:
    """Per pool (by sidecar pid): peak PSS at once, first/last tick seen, and its longest idle stretch (ticks
    in which the pool's processes together used under IDLE_CPU_PER_TICK_S of CPU) with the median of its PSS
    sums over that stretch."""
    out = []
    sids = sorted({s for tk in probe.ticks for s in tk["pools"]})
    good = at_once(probe.ticks)
    for sid in sids:
        rows = [(tk["t"], tk["pools"][sid]) for tk in probe.ticks if sid in tk["pools"]]
        peak = max((tk["pools"][sid]["pss"] for tk in good if sid in tk["pools"]), default=0)
        best: list[tuple[float, dict[str, float]]] = []
        run: list[tuple[float, dict[str, float]]] = []
        for t, p in rows[1:]:
            if p["cpu"] <= IDLE_CPU_PER_TICK_S:
                run.append((t, p))
                if len(run) > len(best):
                    best = list(run)
            else:
                run = []
        idle = sorted(p["pss"] for _, p in best)
        out.append({
            "sidecar": sid, "first": rows[0][0], "last_seen": rows[-1][0],
            "idle_from": best[0][0] if best else None, "idle_to": best[-1][0] if best else None,
            "idle_s": round(best[-1][0] - best[0][0], 2) if best else 0.0,
            "peak_pss_mib": round(peak / MIB, 1),
            "idle_pss_mib": round(idle[len(idle) // 2] / MIB, 1) if idle else None,
            "max_processes": max(p["n"] for _, p in rows),
        })
    return out


def end_leftovers(probe: Probe) -> list[int]:
    """SIGTERM, then SIGKILL, what the program left, children before parents, each re-checked by start time."""
    left = sorted(probe.program_alive(), key=lambda t: -t.first_seen)
    killed = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for t in left:
            try:
                if t.proc.is_running():
                    os.kill(t.pid, sig)
                    killed.append(t.pid)
            except (OSError, psutil.Error):
                pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(t.proc.is_running() and t.proc.status() != "zombie"
                                                   for t in left if _exists(t)):
            time.sleep(0.1)
    return sorted(set(killed))


def _exists(t: Tracked) -> bool:
    try:
        return t.proc.is_running()
    except psutil.Error:
        return False


def build_env(args: argparse.Namespace, log: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WP_AUTOTRACE", "TORCHINDUCTOR_", "TORCH_WARM_POOL", "PYTEST_"))}
    env.update(TORCHINDUCTOR_COMPILE_THREADS="2", TORCHINDUCTOR_CACHE_DIR=str(log.parent / "cache"))
    if not args.untraced:
        env.update(WP_AUTOTRACE_LOG=str(log))
        if not args.via_run:
            env["WP_AUTOTRACE"] = "1"
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def run_report(log: Path, out: Path) -> None:
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if log.exists() and b'"event":"watcher_exit"' in log.read_bytes():
            break
        time.sleep(0.3)
    for name, extra in (("report.txt", []), ("report.json", ["--json"])):
        res = subprocess.run([str(TOOL), "report", str(log), *extra], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "COLUMNS": "100"})
        (out / name).write_text(res.stdout + res.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--via-run", action="store_true", help="run it under `wp-autotrace run --`")
    ap.add_argument("--untraced", action="store_true")
    ap.add_argument("--linger", type=float, default=6.0, help="seconds to watch leftovers after the main ends")
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--keep", action="store_true", help="leave what the program left (for trying `cleanup`);"
                    " its pids are in probe.json's alive_after_linger")
    ap.add_argument("--env", action="append", default=[], help="K=V for the program")
    ap.add_argument("--fork-pool", action="store_true", help="the main's forks that never exec are its fork pool's"
                    " workers (torch 2.1-2.3's default pool; a program with no other forks)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.jsonl"
    if log.exists():
        log.unlink()
    argv = [str(TOOL), "run", "--log", str(log), "--", *cmd] if args.via_run else cmd
    with open(out / "stdout.txt", "w") as so, open(out / "stderr.txt", "w") as se:
        # A probe run from a background job inherits SIGINT ignored; the program must get the default, as
        # it would from a terminal, or a Ctrl-C case cannot be told from one that ignores it.
        proc = subprocess.Popen(argv, env=build_env(args, log), stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(out),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        probe = Probe(psutil.Process(proc.pid), args.via_run, args.fork_pool)
        probe.program = cmd[-1]
        rc = None
        start = time.monotonic()
        while rc is None and time.monotonic() - start < args.timeout:
            probe.sample()
            rc = proc.poll()
            if probe.via_run and probe.main_end is None and probe.main_pid:
                mains = [t for t in probe.tracked.values() if t.pid == probe.main_pid]
                if mains and not mains[0].alive():
                    probe.main_end = probe.now()
            time.sleep(TICK_S)
        if rc is None:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
        if probe.main_end is None:
            probe.main_end = probe.now()
        linger_end = time.monotonic() + args.linger
        while time.monotonic() < linger_end and probe.program_alive():
            probe.sample()
            time.sleep(TICK_S)
        probe.sample()
    leftovers_at_main_end = [t for t in probe.tracked.values() if t.role != "tool" and
                             (t.ended_at is None or t.ended_at > probe.main_end)]
    still = probe.program_alive()
    zombies = [t for t in probe.tracked.values() if t.zombie_since is not None]
    result = {
        "cmd": cmd, "rc": rc, "main_pid": probe.main_pid, "main_end_s": probe.main_end,
        "timed_out": time.monotonic() - start >= args.timeout,
        **peaks_at_once(probe.ticks),
        "max_pools_at_once": max((len(tk["pools"]) for tk in probe.ticks), default=0),
        "max_procs_at_once": max((tk.get("procs", 0) for tk in probe.ticks), default=0),
        "max_threads_at_once": max((tk.get("threads", 0) for tk in probe.ticks), default=0),
        "max_compile_procs_at_once": max((sum(p["n"] for p in tk["pools"].values()) for tk in probe.ticks),
                                         default=0),
        "pools": pool_summary(probe),
        "processes": [{"pid": t.pid, "role": t.role, "ppid": t.ppid, "first_seen": t.first_seen,
                       "ended_at": t.ended_at, "zombie_since": t.zombie_since, "zombie_parent": t.zombie_parent,
                       "max_threads": t.max_threads, "cpu_s": round(t.cpu, 2),
                       "pss_alone_after_main_mib": None if t.pss_alone_after_main is None
                       else round(t.pss_alone_after_main / MIB, 1), "cmd": t.cmd}
                      for t in sorted(probe.tracked.values(), key=lambda x: x.first_seen)],
        "alive_after_main": [t.pid for t in leftovers_at_main_end if t.pid != probe.main_pid],
        "alive_after_linger": [t.pid for t in still],
        "zombies": [t.pid for t in zombies],
    }
    result["ended_by_probe"] = [] if args.keep else end_leftovers(probe)
    (out / "probe.json").write_text(json.dumps(result, indent=1))
    (out / "ticks.json").write_text(json.dumps(probe.ticks))
    if not args.untraced:
        run_report(log, out)
    brief = {k: result[k] for k in ("rc", "main_end_s", "peak_total_pss_mib_at_once", "peak_pools_pss_mib_at_once",
                                    "torn_ticks", "max_pools_at_once", "max_procs_at_once", "max_threads_at_once",
                                    "max_compile_procs_at_once", "alive_after_main",
                                    "alive_after_linger", "zombies", "ended_by_probe")}
    print(json.dumps(brief, indent=1))
    print(json.dumps(result["pools"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
