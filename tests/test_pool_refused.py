"""A process whose AsyncCompile.wait_pool_ready() (the call that makes the pool) returned without one: torch
2.13 refuses a fork or spawn pool in a daemonic multiprocessing process (bench/users/daemon_child.py with
TORCHINDUCTOR_WORKER_START=fork). The Answer names that call and the start method's way out, never the CPU
newcomer's "the pool starts with the first Triton kernel" (the call that starts it had run)."""
from __future__ import annotations

from pathlib import Path

import pytest

from .logs import LogWriter, report, start

USER = {"file": "/home/u/train.py", "line": 28, "func": "run_fn"}


def refused_log(method: str, threads: int = 2, main_threads: int | None = None, compile: bool = True) -> LogWriter:
    """Main 100 spawns child 150 (multiprocessing); 150 loads inductor (config: method, threads), calls
    wait_pool_ready at 2.0 s, which returns 31 us later, compiles (compile) and exits."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    if main_threads is not None:  # the main loaded inductor first, with a setting of its own
        w.add(0.5, 100, 1, "main", "config", settings={"compile_threads": main_threads}, torch_version="2.13.0+cpu")
    start(w, 1.0, 150, 100, "child")
    w.add(1.5, 150, 100, "child", "config", settings={"compile_threads": threads, "worker_start_method": method},
          torch_version="2.13.0+cpu")
    w.add(2.0, 150, 100, "child", "call", target="torch._inductor.async_compile:AsyncCompile.wait_pool_ready",
          call_id=1, thread="MainThread", stack=[USER], caller=USER)
    w.add(2.000031, 150, 100, "child", "return", call_id=1, duration_s=3.1e-5)
    if compile:
        w.add(3.0, 150, 100, "child", "call", target="torch._dynamo.convert_frame:_compile", call_id=3,
              thread="MainThread", stack=[USER], caller=USER)
        w.add(9.0, 150, 100, "child", "return", call_id=3, duration_s=6.0)
    w.add(10.0, 150, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(11.0, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_pool_torch_refused_in_a_daemonic_process_is_told_with_its_start_method(tmp_path: Path,
                                                                                   method: str) -> None:
    rep = report(refused_log(method), tmp_path)
    assert rep["pools"] == []
    why = rep["no_pool_why"]
    assert (why["kind"], why["pid"], why["start_method"], why["daemon_rule"]) == ("refused", 150, method, True)
    first = " ".join(rep["answer"].split("\n- ")[0].split())
    assert "150's AsyncCompile.wait_pool_ready() at /home/u/train.py:28 (run_fn) (2.0 s in)" in first, first
    assert f"With worker_start_method={method} torch makes no pool in a daemonic multiprocessing process" in first
    assert "TORCHINDUCTOR_WORKER_START=subprocess" in first and "first Triton kernel" not in first, first
    assert "so its kernels compiled in that process" in first, first  # its _compile record
    assert first.startswith("- Compiled without a process pool: "), first


def test_a_refusal_with_no_compile_says_no_kernel_compiled(tmp_path: Path) -> None:
    """The daemonic child only called wait_pool_ready (no torch.compile ran in it: no compile record): the
    refusal and its way out are told, never that its kernels compiled in that process."""
    rep = report(refused_log("fork", compile=False), tmp_path)
    why = rep["no_pool_why"]
    assert (why["kind"], why["compiles"]) == ("refused", 0), why
    first = " ".join(rep["answer"].split("\n- ")[0].split())
    assert "kernels compiled" not in first and first.startswith("- No compile pool was made: "), first
    assert "so a compile there would run in that process (no compile was recorded in it)" in first, first
    assert "TORCHINDUCTOR_WORKER_START=subprocess" in first, first


def test_a_refusal_under_the_subprocess_method_names_no_daemon(tmp_path: Path) -> None:
    """With the subprocess method the daemon rule does not apply: the refusal is told without it."""
    rep = report(refused_log("subprocess"), tmp_path)
    why = rep["no_pool_why"]
    assert (why["kind"], why["daemon_rule"]) == ("refused", False)
    first = rep["answer"].split("\n- ")[0]
    assert "daemonic" not in first and "proton profiling" in " ".join(first.split()), first


def test_one_compile_thread_is_not_a_refusal(tmp_path: Path) -> None:
    """compile_threads=1 in the waiting process: wait_pool_ready returns at once by design, even where another
    process (the main) loaded inductor with 2 first."""
    assert report(refused_log("fork", threads=1), tmp_path)["no_pool_why"]["kind"] == "threads"
    assert report(refused_log("fork", threads=1, main_threads=2), tmp_path)["no_pool_why"]["kind"] != "refused"
