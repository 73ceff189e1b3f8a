"""bench/run.py's compile and peers groups: cold torch.compile untraced, traced and under peer tools."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import venvs  # noqa: E402
from run_common import SCENARIO, Report, clean_env, kill_group, med, quartiles, rotated, spread  # noqa: E402

EXPECTED_WARM_POOL_PIDS = 2  # main and sidecar 1 (see scenario/wp_bench_backend)
NO_SAMPLER = "wp-autotrace, sampler off"  # attribution: the same run with WP_AUTOTRACE_SAMPLE_INTERVAL=0
HUNTER_SPEC = "function='warm_pool', kind='call', action=CallPrinter(stream=open({path!r}, 'a', 1), force_pid=True)"


def _count_pids(path: Path, pattern: str) -> set[int]:
    if not path.exists():
        return set()
    return {int(m) for m in re.findall(pattern, path.read_text(errors="replace"), re.MULTILINE)}


def _wp_pids(log: Path) -> tuple[set[int], int, int]:
    """warm_pool caller pids, record count and bytes of a wp-autotrace log."""
    pids, records = set(), 0
    if not log.exists():
        return pids, 0, 0
    with log.open("rb") as f:
        for line in f:
            if not line.strip():
                continue  # records are framed by newlines on both sides (docs/log-schema.md)
            records += 1
            rec = json.loads(line)
            if rec.get("event") == "call" and str(rec.get("target", "")).endswith(":AsyncCompile.warm_pool"):
                pids.add(rec["pid"])
    return pids, records, log.stat().st_size


# A viztracer event: {"pid": 1, "tid": 1, "ts": 1.0, "ph": "X", "cat": "FEE", "name": "Q.warm_pool (file:line)"
VIZ_WARM_POOL = re.compile(r'"pid": (\d+)[^{}]*?"name": "(?:[\w.<>]+\.)?warm_pool \(')


def _viztracer_pids(path: Path) -> set[int]:
    """Scanned, not parsed: the trace is hundreds of MB."""
    if not path.exists():
        return set()
    return {int(m) for m in VIZ_WARM_POOL.findall(path.read_text(errors="replace"))}


def compile_once(py: str, tool: str, rundir: Path, timeout: float) -> dict[str, Any]:
    """One cold compile under `tool`: wall, CPU, exit status and the warm_pool pids it reported."""
    rundir.mkdir(parents=True)
    env = clean_env(TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=str(rundir / "cache"),
                    PYTHONPATH=str(SCENARIO), WP_BENCH_CHAIN_MARKER=str(rundir / "chain-done"),
                    WP_BENCH_CHAIN_TIMEOUT=str(timeout / 2))
    argv = [py, str(SCENARIO / "compile_run.py")]
    out = rundir / ("trace.json" if tool == "viztracer" else "tool.out")
    if tool.startswith("wp-autotrace"):
        env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(out))
        if tool == NO_SAMPLER:
            env["WP_AUTOTRACE_SAMPLE_INTERVAL"] = "0"
    elif tool == "hunter":
        env["PYTHONHUNTER"] = HUNTER_SPEC.format(path=str(out))
    elif tool == "viztracer":  # 1.x follows subprocesses by default (--log_subprocess only warns now)
        argv = [py, "-m", "viztracer", "--quiet", "-o", str(out), *argv[1:]]
    elif tool == "seed":
        argv += ["--seed-log", str(out)]
    with (rundir / "stdout").open("wb") as so, (rundir / "stderr").open("wb") as se:
        proc = subprocess.Popen(argv, env=env, cwd=rundir, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    t0 = time.perf_counter()
    timer = threading.Timer(timeout, kill_group, (proc.pid,))
    timer.start()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    linger = 0.0
    while linger < 30:  # what the run left behind (sidecars) gets 30 s to leave, then is killed
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
        linger += 0.5
    kill_group(proc.pid)
    res: dict[str, Any] = {"tool": tool, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                           "status": proc.returncode, "timed_out": wall >= timeout, "linger_s": linger}
    lines = (rundir / "stdout").read_text(errors="replace").strip().splitlines()
    try:
        res.update(json.loads(lines[-1]))
    except (IndexError, ValueError):
        res["chain_complete"] = False
    if tool.startswith("wp-autotrace"):
        pids, res["records"], res["bytes"] = _wp_pids(out)
    elif tool == "hunter":
        pids = _count_pids(out, r"^\[(\d+)\]")
        res["bytes"] = out.stat().st_size if out.exists() else 0
    elif tool == "viztracer":
        pids = _viztracer_pids(out)
        res["bytes"] = out.stat().st_size if out.exists() else 0
    elif tool == "seed":
        pids = _count_pids(out, r"pid=(\d+)")
    else:
        pids = set()
    res["pids"] = sorted(pids)
    shutil.rmtree(rundir, ignore_errors=True)  # a viztracer trace is ~0.5 GB
    print(f"    {tool}: {wall:.1f} s, exit {proc.returncode}, chain complete {res['chain_complete']}, "
          f"warm_pool pids {res['pids']}", flush=True)
    return res


def _ending(run: dict[str, Any]) -> str:
    """Exit status, whether the sidecar chain completed, how long its processes outlived the main one."""
    text = str(run["status"]) + (" (timed out)" if run["timed_out"] else "")
    text += "" if run["chain_complete"] else " (chain incomplete)"
    return text + (f" / {run['linger_s']:.0f} s" if run["linger_s"] else "")


def _size(n: float) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n:.0f} B"


COMPILE_TARGET = 1.02  # issue 32: a cold compile traced at most 1.02x its untraced wall time


def _compile_row(by: dict[str, list[dict[str, Any]]], rep: Report) -> None:
    """Issue 32's compile figure: traced over untraced wall, round by round (each round runs both); its floor
    is the same run's noise (the untraced runs' own spread) and, in full runs, the watcher's share (sampler off)."""
    plain = [r["wall"] for r in by["untraced"]]
    mid, lo, hi = quartiles([t["wall"] / u for t, u in zip(by["wp-autotrace"], plain)])
    umid, ulo, uhi = quartiles(plain)
    why = (f"the untraced runs alone spread {ulo:.1f}–{uhi:.1f} s around {umid:.1f} s (p25–p75, "
           f"±{(uhi - ulo) / 2 / umid * 100:.1f}%, this run)")
    if NO_SAMPLER in by:
        off = quartiles([t["wall"] / u for t, u in zip(by[NO_SAMPLER], plain)])[0]
        why += f"; the tracer without the watcher (`{NO_SAMPLER}`) is {off:.3f}× in the same rounds"
    quart = f"p25–p75 {lo:.3f}–{hi:.3f}; {len(plain)} rounds" if len(plain) > 1 else "1 round"
    rep.issue_row("compile", f"{mid:.3f}× ({quart})",
                  mid <= COMPILE_TARGET, why)


def bench_compile(made: dict[str, Path], rounds: int, peers: bool, attribution: bool, timeout: float, tmp: Path,
                  rep: Report) -> None:
    """Cold torch.compile (stand-in backend, terminating sidecar chain): untraced vs traced, and the peers."""
    py = str(venvs.python_of(made["torch"]))
    peer_tools = ["hunter", "viztracer", "seed"] if peers else []
    ours = ["untraced", "wp-autotrace", *([NO_SAMPLER] if attribution else [])]
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        tools = rotated(ours, r)
        # the peers are spread over the rounds, each between two baseline runs
        share = peer_tools[r::rounds]
        for i, tool in enumerate(share):
            tools.insert(1 + i, tool)
        for tool in tools:
            # no spaces in the path: inductor passes it to g++ unquoted
            runs.append(compile_once(py, tool, tmp / f"compile-{len(runs)}-{re.sub(r'[^a-z]+', '-', tool)}", timeout))
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by.setdefault(run["tool"], []).append(run)
    base = med([r["wall"] for r in by["untraced"]])
    wp = by["wp-autotrace"]
    _compile_row(by, rep)
    log_bytes, log_records = med([r["bytes"] for r in wp]), med([r["records"] for r in wp])
    rep.row("log size for that compile", f"{_size(log_bytes)}, {log_records:.0f} records", "report it", None)
    lines = ["`bench/scenario/compile_run.py`: import torch, `torch.compile` a function of several kernels and run it, "
             "with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 and a fresh TORCHINDUCTOR_CACHE_DIR per run. "
             "`bench/scenario` is on PYTHONPATH: its stand-in backend (a `torch.backends` entry point) calls "
             f"`AsyncCompile.warm_pool()` at import while a counter it keeps in os.environ is < 2, so the run is "
             "main → sidecar 1 → sidecar 2 and stops; warm_pool runs in exactly "
             f"{EXPECTED_WARM_POOL_PIDS} processes (main, sidecar 1). After the compile the main script waits "
             "(bounded) until sidecar 2 has loaded the backend, so every tool is measured on the whole chain. "
             f"Wall: from start to the main process's exit; `{NO_SAMPLER}` (full runs only) is wp-autotrace with "
             "WP_AUTOTRACE_SAMPLE_INTERVAL=0, to show what the sampler costs; "
             "CPU: user+sys of the main process and the children it waited for. "
             f"{rounds} alternating round(s); every tool uses the same venv (hunter's .pth loads in every run).",
             "", "| tool | runs | wall s | ratio vs untraced | CPU s | waited for the chain s | warm_pool PIDs "
             f"reported (of {EXPECTED_WARM_POOL_PIDS}) | output | exit / left behind |",
             "|---|---|---|---|---|---|---|---|---|"]
    for tool in [*ours, *peer_tools]:
        rs = by.get(tool, [])
        if not rs:
            continue
        walls = [r["wall"] for r in rs]
        waits = [r.get("chain_wait_s", 0.0) for r in rs]
        captured = "—" if tool == "untraced" else str(round(med([len(r["pids"]) for r in rs])))
        size = "—" if "bytes" not in rs[0] else _size(med([r["bytes"] for r in rs]))
        ends = ", ".join(_ending(r) for r in rs)
        lines.append(f"| {tool} | {len(rs)} | {spread(walls, fmt='{:.1f}')} | {med(walls) / base:.2f}× | "
                     f"{med([r['cpu'] for r in rs]):.1f} | {med(waits):.1f} | {captured} | {size} | {ends} |")
    viz = by.get("viztracer", [])
    if viz and med([len(r["pids"]) for r in viz]) < EXPECTED_WARM_POOL_PIDS:
        lines += ["", "viztracer keeps only the last 1,000,000 events per process by default (`--tracer_entries`); "
                  "a warm_pool call made early (during `import torch`) can be overwritten before the trace is saved."]
    rep.detail("Cold compile and peers", lines)
    for tool in peer_tools:
        rs = by[tool]
        rep.row(f"peer: {tool}, wall ratio / warm_pool PIDs captured",
                f"{med([r['wall'] for r in rs]) / base:.2f}× / {round(med([len(r['pids']) for r in rs]))} of "
                f"{EXPECTED_WARM_POOL_PIDS}", "report it", None)
