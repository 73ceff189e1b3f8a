"""bench/run.py's shared pieces: the report's rows, environments, timing and alternation helpers."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import venvs  # noqa: E402

BENCH = venvs.BENCH
SCENARIO = BENCH / "scenario"


# Issue 32's figures and targets, in the issue's order: the first rows of BENCHMARKS.md's table.
# key -> (figure, target text, group that measures it). The numeric targets sit with each group's code.
ISSUE32: dict[str, tuple[str, str, str]] = {
    "report_cpu": ("`report --json`, 1M records: CPU over a bare `json.loads` pass of the same lines", "≤ 1.0×",
                   "report"),
    "report_mem": ("the same: peak memory over the log's size", "≤ 1.0×", "report"),
    "watcher": ("watcher, 1,000 idle run processes", "≤ 1% of a core", "watcher"),
    "startup": ("traced child start-up (enabled, non-root) over unset", "≤ +1.5 ms", "startup"),
    "call": ("traced call, shallow stack", "≤ 8 µs", "micro"),
    "compile": ("compile, traced / untraced", "≤ 1.02×", "compile"),
}


class Row:
    """One line of the summary table; why: the floor measured in this run, shown when the target is missed."""

    def __init__(self, figure: str, measured: str, target: str, met: bool | None, why: str = "") -> None:
        self.figure, self.measured, self.target, self.met, self.why = figure, measured, target, met, why


class Report:
    """Issue 32's rows (by key), the other summary rows and detail sections, in the order they were measured."""

    def __init__(self) -> None:
        self.issue: dict[str, Row] = {}
        self.rows: list[Row] = []
        self.details: list[str] = []

    def row(self, figure: str, measured: str, target: str, met: bool | None, why: str = "") -> None:
        self.rows.append(Row(figure, measured, target, met, why))
        print(f"  {figure}: {measured} (target {target}: {_met(met)})", flush=True)

    def issue_row(self, key: str, measured: str, met: bool, why: str) -> None:
        """One of issue 32's figures (ISSUE32[key]); why: its floor, measured in the same run."""
        figure, target, _ = ISSUE32[key]
        self.issue[key] = Row(figure, measured, target, met, why)
        print(f"  [issue 32] {figure}: {measured} (target {target}: {_met(met)})", flush=True)
        if not met:
            print(f"    floor: {why}", flush=True)

    def detail(self, title: str, lines: list[str]) -> None:
        self.details.append(f"### {title}\n\n" + "\n".join(lines) + "\n")


def _met(met: bool | None) -> str:
    return {True: "yes", False: "**NO**", None: "—"}[met]


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without tracer, torch-pool or peer-tool settings, plus extra."""
    drop = ("WP_AUTOTRACE", "TORCHINDUCTOR_", "TORCH_WARM_POOL", "PYTHONHUNTER", "PYTHONPATH", "WP_BENCH_",
            "PYTHONMANHOLE", "VIZTRACER")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def med(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    """'median (p25-p75)' of values times scale."""
    if len(values) < 2:
        return fmt.format(values[0] * scale)
    q = statistics.quantiles(values, n=4)
    return f"{fmt.format(med(values) * scale)} ({fmt.format(q[0] * scale)}–{fmt.format(q[2] * scale)})"


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(median, p25, p75) of values (one value: itself three times)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return med(values), q[0], q[2]


def rotated(names: list[str], r: int) -> list[str]:
    """names, started at position r: no variant always runs first."""
    k = r % len(names)
    return names[k:] + names[:k]


def spawn_timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run argv with stdio on /dev/null: (wall s, user+sys CPU s, exit status)."""
    dn = os.devnull
    actions = [(os.POSIX_SPAWN_OPEN, 0, dn, os.O_RDONLY, 0), (os.POSIX_SPAWN_OPEN, 1, dn, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, dn, os.O_WRONLY, 0)]
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, ru = os.wait4(pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def run_worker(venv: Path, kind: str, *args: Any, timeout: float = 600) -> dict[str, Any]:
    """bench/workers.py KIND ARGS in venv; its last stdout line, parsed."""
    cmd = [str(venvs.python_of(venv)), str(BENCH / "workers.py"), kind, *map(str, args)]
    out = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def speed_check() -> float:
    """Median µs of a fixed pure-Python loop: how busy the machine was."""
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        sum(i * i for i in range(10_000))
        times.append(time.perf_counter() - t0)
    return round(med(times) * 1e6)


def _host_procs() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
