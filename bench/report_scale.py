"""Time `wp-autotrace report` and `export` on a synthetic run at scale, and record it in BENCHMARKS.md.

Usage: python bench/report_scale.py [--repeats 3] [--out BENCHMARKS.md] [--no-write]

The run: 20 ranks under one launcher, each rank with a compile sidecar and
its workers (2,000 processes in all, each with a thread of its own name),
watcher tree records as processes come and go, and call/return pairs up to
200,000 records. It is timed at full size and at half size: linear code
takes about twice as long for twice the input (the ratio column). Medians of
--repeats runs of the real command (a fresh interpreter each time). Nothing
here asserts a time; the targets are 5 s each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000.0
TARGET_S = 5.0
START, END = "<!-- report-scale:start -->", "<!-- report-scale:end -->"
SP = "torch._inductor.compile_worker.subproc_pool"
AC = "torch._inductor.async_compile"


def make_log(path: Path, processes: int = 2000, ranks: int = 20, records: int = 200_000) -> int:
    """Write the synthetic run; return how many records it holds."""
    lines: list[str] = []
    seqs: dict[int, int] = {}

    def add(t: float, pid: int, ppid: int, role: str, event: str, **fields: object) -> None:
        seq = seqs.get(pid, 0)
        seqs[pid] = seq + 1
        lines.append(json.dumps({"v": 1, "event": event, "ts": T0 + t, "pid": pid, "ppid": ppid, "host": "h1",
                                 "role": role, "seq": seq, **fields}, separators=(",", ":")))

    frame = {"file": "/site/backend/_inductor/__init__.py", "line": 5, "func": "<module>"}
    per_rank = processes // ranks
    add(0, 10, 1, "main", "process_start", argv=["torchrun", "train.py"], run="big", root_pid=10, forked=False)
    procs: list[tuple[int, int, str]] = []
    for rank in range(ranks):
        rpid = 1000 + rank * per_rank
        procs.append((rpid, 10, "child"))
        add(0.1 + rank * 0.01, rpid, 10, "child", "process_start", argv=["python", "train.py"], run="big",
            root_pid=10, forked=False, rank={"RANK": str(rank), "WORLD_SIZE": str(ranks)})
        add(0.5, rpid, 10, "child", "call", target=f"{SP}:SubprocPool.__init__", tag="pool-create", call_id=1,
            thread="MainThread", stack=[frame], caller=frame)
        add(0.6, rpid, 10, "child", "return", call_id=1, duration_s=0.1, sidecar_pid=rpid + 1)
        procs.append((rpid + 1, rpid, "compile-sidecar"))
        add(0.7, rpid + 1, rpid, "compile-sidecar", "process_start", argv=["python", "x/compile_worker/__main__.py"],
            run="big", root_pid=10, forked=False)
        for w in range(2, per_rank):
            procs.append((rpid + w, rpid + 1, "compile-worker"))
            add(0.8 + w * 1e-4, rpid + w, rpid + 1, "compile-worker", "process_start", argv=["python"], run="big",
                root_pid=10, forked=True)
    started = [{"pid": pid, "ppid": ppid, "name": "python", "cmd": "python", "create_time": T0 + 0.5, "rss": 1 << 20}
               for pid, ppid, _ in procs]
    for i in range(0, len(started), 100):
        add(1.0, 9, 10, "watcher", "tree", run="big", root_pid=10, count=len(procs) + 1, started=started[i:i + 100],
            ended=[], part=i // 100, parts=(len(started) + 99) // 100)
    i = 0
    while len(lines) + len(procs) + 1 < records:
        pid, ppid, role = procs[i % len(procs)]
        cid = 100 + i // len(procs)
        t = 2 + i * 1e-5
        add(t, pid, ppid, role, "call", target=f"{AC}:AsyncCompile.wait_pool_ready", tag="wait-pool-ready",
            call_id=cid, thread=f"worker-thread-{pid}", stack=[frame], caller=frame)
        add(t + 1e-6, pid, ppid, role, "return", call_id=cid, duration_s=1e-6)
        i += 1
    end = 2 + i * 1e-5 + 1
    for pid, ppid, role in procs:
        add(end, pid, ppid, role, "process_exit", how="exit", counts={}, dropped=0)
    add(end + 0.1, 10, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def time_command(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall and CPU (user+sys) seconds of a fresh `python -m wp_autotrace ARGS` (output to /dev/null)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "wp_autotrace", *args], env=env, stdout=subprocess.DEVNULL,
                       check=True, timeout=300)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


Row = tuple[str, float, float, float, int]


def measure(repeats: int) -> list[Row]:
    """(command, wall s, CPU s, CPU ratio full/half, records) per command."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        full, half = Path(tmp, "full.jsonl"), Path(tmp, "half.jsonl")
        n = make_log(full)
        make_log(half, processes=1000, ranks=10, records=100_000)
        for name, extra in (("report", []), ("report --json", ["--json"]), ("export", ["-o", "-"])):
            cmd = name.split()[0]
            wall, cpu = time_command([cmd, str(full), *extra], repeats)
            _, cpu_half = time_command([cmd, str(half), *extra], repeats)
            rows.append((name, wall, cpu, cpu / cpu_half, n))
    return rows


def markdown(rows: list[Row]) -> str:
    load = os.getloadavg()[0]
    out = [START, "", "### Report at scale (bench/report_scale.py)", "",
           f"Synthetic run: 2,000 processes, 20 ranks, {rows[0][4]:,} records; medians, a fresh interpreter "
           f"each; load average {load:.1f} on {os.cpu_count()} cores while measured (wall time includes waiting "
           "for a core; CPU time does not).", "",
           "| command | wall | CPU (user+sys) | target | met? (CPU) | CPU ratio for 2x the input (linear: ~2) |",
           "|---|---|---|---|---|---|"]
    for name, wall, cpu, ratio, _ in rows:
        out.append(f"| `wp-autotrace {name}` | {wall:.2f} s | {cpu:.2f} s | ≤ {TARGET_S:.0f} s | "
                   f"{'yes' if cpu <= TARGET_S else '**NO**'} | {ratio:.2f} |")
    return "\n".join(out + ["", END]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    text = markdown(measure(args.repeats))
    print(text)
    if args.no_write:
        return
    out = Path(args.out)
    old = out.read_text() if out.exists() else ""
    if START in old and END in old:
        new = old[:old.index(START)] + text + old[old.index(END) + len(END) + 1:]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    out.write_text(new)


if __name__ == "__main__":
    main()
