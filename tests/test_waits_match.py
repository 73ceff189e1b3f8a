"""`run`'s run_exit records matched to their runs (fold/finish.match_waits) in a log of thousands of runs."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from wp_autotrace.analysis.fold.finish import match_waits
from wp_autotrace.analysis.fold.identities import Registry

T0 = 1_800_000_000.0
RUNS = 6000
# CPU seconds match_waits may take for RUNS runs: ~0.02 s when each record reads only the runs that share its
# pid; comparing each record with every run took 3 to 10 s here (grows as the square of the runs)
BOUND_S = 1.0


def _registry(shape: str, n: int) -> Registry:
    """n runs in one log, as the fold leaves them (each run's root; the run_exit records): `traced`, each run's
    main waited for by `run`; `shell`, each run a step of a shell `run` waited for (run_exit names the shell);
    `execd`, a shell's step, then its exec'd last step (the shell's pid, its create time the shell's) waited
    for."""
    reg = Registry()
    for i in range(n):
        t, root, shell = T0 + i, 100_000 + i, 300_000 + i
        step = reg.new_process("h1", root, shell, t, reg.run(f"r{i}"))
        reg.run(f"r{i}").root = step
        step.end = t + 0.3
        waited = root if shape == "traced" else shell
        if shape == "execd":
            last = reg.new_process("h1", shell, 1, t - 0.1, reg.run(f"r{i}b"))
            reg.run(f"r{i}b").root = last
            last.end = t + 0.5
        reg.run_exits.append({"event": "run_exit", "ts": t + 0.6, "pid": 500_000 + i, "host": "h1",
                              "root_pid": waited, "status": i % 7, "forwarded": []})
    return reg


def _cpu_of(reg: Registry) -> float:
    collecting = gc.isenabled()
    gc.disable()  # a collection's walk of every object is not the matching's cost
    try:
        t = time.process_time()
        match_waits(reg)
        return time.process_time() - t
    finally:
        if collecting:
            gc.enable()


@pytest.mark.parametrize("shape", ["traced", "shell", "execd"])
def test_thousands_of_runs_each_get_their_own_wait_reading_only_their_own_pid(shape: str) -> None:
    """Each run gets its own record (its status, i % 7), and the matching's cost grows with the runs, not their
    square: a record reads the runs whose main (or whose main's parent) had its pid."""
    reg = _registry(shape, RUNS)
    spent = _cpu_of(reg)
    runs: dict[str, Any] = reg.model.runs
    for i in range(RUNS):
        step = runs[f"r{i}"]
        if shape == "traced":
            assert step.run_exit["status"] == i % 7 and step.waited.status == i % 7 and step.launch is None
        elif shape == "shell":
            assert step.run_exit is None and step.command_exit["status"] == i % 7 and step.launch is step.command_exit
        else:  # the exec'd step's record; the step before it is of the same launch
            last = runs[f"r{i}b"]
            assert last.run_exit["status"] == i % 7 and step.run_exit is None
            assert step.launch is last.run_exit and last.launch is last.run_exit
    assert spent < BOUND_S, f"{spent:.2f} CPU s to match {RUNS} runs' waits"
