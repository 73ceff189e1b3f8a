"""The Answer answers the user's question (issue 31): how many compile processes, why, and the fix they can
apply — real torch 2.13 CPU scenarios, each checked against a reading the test takes itself.

- vllm-project/vllm#14808 "how do I reduce the number of compile_worker processes?": three ranks each make
  their own pool from inside an installed library (tests/fixtures/serving). The Answer counts across
  processes (3 sidecars + 6 workers = 9), their memory at once (against the test's own smaps_rollup sum of
  the same processes, read while they idle), what it scales with (per rank), and puts the setting the user
  can apply (TORCHINDUCTOR_COMPILE_THREADS=1, inherited by the ranks) before a code change in the library,
  which it names.
- pytorch#140795 "memory grows after compile even with COMPILE_THREADS=1": no pool; the Answer says why and
  how much the compiling process grew (against psutil in the program, before its first and after its last
  compile).
- A newcomer on CPU (compile_threads=2, no pool): the Answer says inductor built C++ kernels without a pool.
- huggingface/diffusers#3503, compile tests leaving processes for the rest of the suite: the test that made
  the pool, the later tests it outlived (against the suite's own check of a live sidecar at each test's
  start), and advice in test terms.

On CPU torch makes no pool by itself: `AsyncCompile.wait_pool_ready()` stands in for a GPU host's first
Triton kernel (marked `# first Triton kernel`), as in tests/test_scenarios.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from wp_autotrace.analysis.findings.idle import IDLE_POOL_S
from wp_autotrace.analysis.words.fmt import size_text

from .clock import started
from .conftest import ROOT, clean_env, needs_torch, read_log, report_json, wait_for_watcher
from .test_answer_text import answer_and_findings

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

MIB = 2**20
TIMEOUT_S = 300
WIDTH = 100  # the report's width when stdout is not a terminal
SERVING = ROOT / "tests" / "fixtures" / "serving"
SIDECAR_MARK = "compile_worker/__main__.py"
# The report's memory at once and the test's own reading are taken at different moments of the same idle
# processes (their PSS moves a little as pages are touched and shared): this close.
AT_ONCE_TOLERANCE = 0.25
IDLE_MARGIN_S = 1.0  # beyond the idle-pool threshold, so the finding is not decided by a tick's timing
# psutil's RSS in the program and the tracer's read at its first and last compile call are a few
# allocations apart (dynamo's frame hooks run between them): this close.
RSS_SLACK = 24 * MIB


def pss(pid: int) -> int:
    """A process's PSS from /proc/PID/smaps_rollup, in bytes (the test's own reading)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))


def compile_processes(root: int) -> tuple[list[int], list[int]]:
    """The sidecars below root (their command line runs compile_worker/__main__.py, their parent's does not)
    and their workers (every process below a sidecar: forked, they keep its command line)."""
    sidecars, workers = [], []
    for p in psutil.Process(root).children(recursive=True):
        try:
            if any(SIDECAR_MARK in a for a in p.cmdline()) and not any(
                    SIDECAR_MARK in a for a in psutil.Process(p.ppid()).cmdline()):
                sidecars.append(p.pid)
                workers += [c.pid for c in p.children(recursive=True)]
        except psutil.Error:
            continue
    return sorted(sidecars), sorted(workers)


def samples(log: Path) -> dict[int, int]:
    """How many memory samples the watcher wrote of each pid so far."""
    seen: dict[int, int] = {}
    for r in read_log(log):
        if r["event"] == "memory":
            for e in r.get("procs") or ():
                seen[e["pid"]] = seen.get(e["pid"], 0) + 1
    return seen


def run_probed(args: list[str], env: dict[str, str], cwd: Path, ready: Callable[[], bool],
               probe: Callable[[int], Any], go: Path | None) -> tuple[int, Any, str]:
    """Run python traced in its own session; once ready() holds, probe(root pid), then create `go`. The
    whole group is killed at the end, by pid."""
    proc = subprocess.Popen([sys.executable, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    seen = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                seen = probe(proc.pid)
                break
            time.sleep(0.2)
        if go is not None:
            go.touch()
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return proc.returncode, seen, err


def report_text(log: Path, verbose: bool = False) -> str:
    """`wp-autotrace report LOG` with stdout in a pipe (not a terminal): what a user pipes or logs."""
    args = [sys.executable, "-m", "wp_autotrace", "report", str(log), *(["--verbose"] if verbose else [])]
    res = subprocess.run(args, env=clean_env(COLUMNS="200"), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def assert_fits(text: str) -> None:
    wide = [line for line in answer_and_findings(text) if len(line) > WIDTH]
    assert not wide, "\n".join(wide)


RANKS = textwrap.dedent('''
    import multiprocessing as mp
    import os
    import sys

    from wp_fx_serve.engine import serve

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        ranks = []
        for rank in range(3):
            os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3")
            ranks.append(ctx.Process(target=serve, args=(rank, sys.argv[1])))
            ranks[-1].start()
        for p in ranks:
            p.join()
''')


def test_14808_each_rank_makes_a_pool_counted_across_processes(tmp_path: Path) -> None:
    """Three ranks, each with its own pool made inside an installed library: the Answer leads with the
    count across processes and their memory at once (against the test's smaps_rollup sum), says it grows
    with the rank count, and puts the setting first, naming the library."""
    (tmp_path / "serve.py").write_text(RANKS)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(SERVING),
                    TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL="0")  # a server's workers stay (no quiesce)
    probed: dict[str, Any] = {}

    before: dict[int, int] = {}  # samples of each compile process when all 9 were first seen
    # The server idles before it is stopped, as the user's did: its pools' idle span must pass the idle-pool
    # finding's threshold, whatever the machine's speed (the scenario's length, not a wait for an event).
    up_since: list[float] = []
    last_threads: dict[int, int] = {}  # each pool process's threads as ps showed them at the last look
    steady: list[float] = []  # when the watcher had read each pool process again after that count last changed

    def ready() -> bool:
        """All 9 processes up, and the watcher has read each of them since (a sidecar read before it forked
        its workers held their pages alone: not the figure the test reads)."""
        if len(list(tmp_path.glob("ready-*"))) < 3 or not log.exists():
            return False
        root = int(next(r["pid"] for r in read_log(log) if r["event"] == "process_start"))
        sidecars, workers = compile_processes(root)
        if len(sidecars) != 3 or len(workers) != 6:
            return False
        now = samples(log)
        threads = {p: psutil.Process(p).num_threads() for p in sidecars + workers}
        if not before or threads != last_threads:
            # A sidecar still starts its executor's threads after its workers are up (2, 3, then 4 at load): the
            # watcher's readings count as steady from the first of each process after the last change ps showed.
            before.clear()
            before.update({p: now.get(p, 0) for p in sidecars + workers})
            last_threads.clear()
            last_threads.update(threads)
            steady.clear()
        if not up_since:
            up_since.append(time.monotonic())
        read = all(now.get(p, 0) > n for p, n in before.items())
        if read and not steady:
            steady.append(time.time())
        return read and time.monotonic() - up_since[0] >= IDLE_POOL_S + IDLE_MARGIN_S

    def probe(root: int) -> dict[str, Any]:
        sidecars, workers = compile_processes(root)
        ranks = [psutil.Process(p).ppid() for p in sidecars]  # each sidecar's maker: a rank
        threads = {p: psutil.Process(p).num_threads() for p in ranks + sidecars + workers}
        # every process ps lists of the run now, with its start: those started by the report's moment were alive
        # then. The start on the test's own clock, read now (psutil 5.x keeps the boot time it first read)
        everyone = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        probed.update(started=[t for t in (started(p.pid) for p in everyone) if t is not None])
        probed.update(sidecars=sidecars, workers=workers, pss=sum(pss(p) for p in sidecars + workers), at=time.time(),
                      ranks_pss=sum(pss(p) for p in ranks), pool_threads=sum(threads[p] for p in sidecars + workers),
                      ranks_threads=sum(threads[p] for p in ranks))
        return probed

    rc, seen, err = run_probed(["serve.py", str(tmp_path)], env, tmp_path, ready, probe, tmp_path / "go")
    assert rc == 0 and seen, err[-3000:]
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    (tmp_path / "probe.json").write_text(json.dumps(seen))  # kept with the log, for the record
    assert len(seen["sidecars"]) == 3 and len(seen["workers"]) == 6
    across = rep["pools_across"]
    assert (across["creators"], across["sidecars"], across["workers"], across["processes"]) == (3, 3, 6, 9)
    assert across["scales_with"] == "rank"
    together = across["at_once_bytes"]
    assert abs(together - seen["pss"]) <= AT_ONCE_TOLERANCE * seen["pss"], (together, seen["pss"])
    first = rep["answer"].splitlines()[0]
    assert first.startswith("- 3 processes each made a compile pool"), rep["answer"]
    assert "3 sidecars + 6 workers = 9 compile processes" in first
    assert f"{size_text(together)} together at once" in first and "per rank" in first  # 1.2 GiB on torch 2.14
    # the setting the user can apply comes before a change to code that is not theirs, and the library is named
    fix = next(line for line in rep["answer"].splitlines() if line.startswith("- Fix first"))
    assert "wp-fx-serve 0.1" in rep["answer"]
    assert "TORCHINDUCTOR_COMPILE_THREADS=1" in fix and "inherit" in fix
    assert fix.index("TORCHINDUCTOR_COMPILE_THREADS=1") < fix.find("shutdown_compile_workers") or \
        "shutdown_compile_workers" not in fix
    text = report_text(log)
    assert_fits(text)
    assert text.splitlines()[1].startswith("- 3 processes each made a compile pool")
    # counted as ps counts, at that moment: the 3 ranks and their 9 pool processes, their threads (the probe's
    # psutil num_threads while they idled), and the ranks' own memory beside the pools' (its smaps_rollup sum).
    # The moment is the pools' peak at once: while they idled, before the probe, or as they ended at exit (a
    # sidecar's PSS rises as its workers go), when the ranks had exited and their figures are not told.
    assert across["counted_at"] is not None
    if rep["t0"] + across["counted_at"] > seen["at"]:
        assert "ranks held" not in first or "creators_pss_bytes" in across, first
        return
    counted = (across["pool_threads"], across["creators_threads"])
    if rep["t0"] + across["counted_at"] >= steady[0]:  # every reading counted then was taken once threads held still
        assert counted == (seen["pool_threads"], seen["ranks_threads"])
    else:  # the peak came as the pools started: a sidecar's reading then predates some of its threads (21 vs 24)
        assert 9 <= counted[0] <= seen["pool_threads"] and 3 <= counted[1] <= seen["ranks_threads"], (counted, seen)
    own = across["creators_pss_bytes"]
    assert abs(own - seen["ranks_pss"]) <= AT_ONCE_TOLERANCE * seen["ranks_pss"], (own, seen["ranks_pss"])
    threads = sum(counted)
    assert f"the 3 ranks and their 9 pool processes ran {threads} threads" in " ".join(first.split()), first
    assert f"the ranks {size_text(own)} of their own" in first
    # what ps listed of the run then: at least every process the probe saw that had started by that moment (alive
    # at both moments, so between them too), the main and multiprocessing's resource tracker among them
    before = sum(1 for t in seen["started"] if t <= rep["t0"] + across["counted_at"])
    assert across["run_processes"] >= max(before, 1 + 3 + 9), (across, seen["started"])
    assert f"the run had {across['run_processes']} processes" in " ".join(first.split()), first


COMPILE_GROWTH = textwrap.dedent('''
    import json, sys
    import psutil
    import torch

    me = psutil.Process()
    imported = me.memory_info().rss  # torch.compile (below) imports dynamo and inductor first

    @torch.compile
    def layer(x):
        return (x.sin() + x.cos()).relu() * 2

    @torch.compile
    def head(x):
        return torch.softmax(x @ x.T, dim=-1).sum(0)

    before = me.memory_info().rss
    x = torch.randn(64, 64)
    layer(x)
    head(x)
    after = me.memory_info().rss
    with open(sys.argv[1], "w") as f:
        json.dump({"imported": imported, "before": before, "after": after, "pid": me.pid}, f)
''')


def _compile_run(tmp_path: Path, threads: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    (tmp_path / "grow.py").write_text(COMPILE_GROWTH)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS=threads,
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "grow.py", str(tmp_path / "probe.json")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=60)
    return report_json(log), json.loads((tmp_path / "probe.json").read_text()), log


def test_140795_memory_growth_across_compiles_without_a_pool(tmp_path: Path) -> None:
    """compile_threads=1: no pool, and the Answer says so, why, and how much the compiling process grew
    from before its first compile to after its last (against psutil in the program)."""
    rep, probe, log = _compile_run(tmp_path, "1")
    assert rep["pools"] == []
    (grew,) = [e for e in rep["compiling"] if e["pid"] == probe["pid"]]
    assert grew["compiles"] >= 2
    assert abs(grew["before_bytes"] - probe["before"]) <= RSS_SLACK, (grew, probe)
    assert abs(grew["after_bytes"] - probe["after"]) <= RSS_SLACK, (grew, probe)
    # torch.compile's lazy imports (100+ MiB) precede the first compile: the growth is told from them
    assert abs(grew["import_bytes"] - probe["imported"]) <= RSS_SLACK, (grew, probe)
    assert grew["import_s"] <= grew["first_s"]
    answer = " ".join(rep["answer"].split())
    assert answer.startswith("- Compiled without a process pool: compile_threads=1"), answer
    total = round((grew["after_bytes"] - grew["import_bytes"]) / MIB)
    lazy = round((grew["before_bytes"] - grew["import_bytes"]) / MIB)
    growth = round((grew["after_bytes"] - grew["before_bytes"]) / MIB)
    assert f"main {probe['pid']} grew {total:+d} MiB from importing torch._dynamo" in answer, answer
    assert f"{lazy:+d} MiB before its first compile" in answer, answer
    assert f"then {growth:+d} MiB across its {grew['compiles']} compiles" in answer, answer
    assert "no pool holds it" in answer
    assert_fits(report_text(log))


def test_cpu_newcomer_is_told_why_no_pool(tmp_path: Path) -> None:
    """compile_threads=2 on CPU: inductor 2.13 builds C++ kernels without the pool, so none is made; the
    Answer says that (a newcomer otherwise thinks tracing failed)."""
    rep, probe, log = _compile_run(tmp_path, "2")
    assert rep["pools"] == [] and rep["compiling"]
    first = rep["answer"].splitlines()[0]
    assert first.startswith("- Compiled without a process pool: the kernels were C++ (CPU)"), rep["answer"]
    assert "the pool starts with the first Triton kernel" in first and "compile_threads=2" in first
    assert_fits(report_text(log))


SUITE_CONFTEST = textwrap.dedent('''
    import os
    import psutil
    import pytest

    @pytest.fixture(autouse=True)
    def note_live_pool(request):
        """The suite's own check: is a compile sidecar alive as this test starts?"""
        alive = any("compile_worker/__main__.py" in " ".join(c.cmdline())
                    for c in psutil.Process().children(recursive=True) if c.is_running())
        if alive:
            with open(os.environ["PROBE_OUT"], "a") as f:
                f.write(request.node.nodeid + "\\n")
        yield
''')

SUITE = textwrap.dedent('''
    import time
    import torch
    from torch._inductor.async_compile import AsyncCompile

    def test_config():
        assert torch.tensor(1) + 1 == 2

    def test_unet_compile():
        AsyncCompile.wait_pool_ready()  # first Triton kernel

    def test_unet_forward():
        time.sleep(1.5)  # the later tests take their time: the pool idles past IDLE_POOL_S (5 s)

    def test_vae_forward():
        time.sleep(1.5)  # the later tests take their time: the pool idles past IDLE_POOL_S (5 s)

    def test_scheduler_step():
        time.sleep(1.5)  # the later tests take their time: the pool idles past IDLE_POOL_S (5 s)

    def test_pipeline_save():
        time.sleep(1.5)  # the later tests take their time: the pool idles past IDLE_POOL_S (5 s)
''')


def test_3503_compile_test_outlives_the_rest_of_the_suite(tmp_path: Path) -> None:
    """A compile test's pool lives through the rest of the suite: the Answer names the test that made it,
    counts the later tests it outlived (against the suite's own check at each test's start), and says what
    to do in test terms; --verbose names those tests."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(SUITE_CONFTEST)
    (suite / "test_models.py").write_text(SUITE)
    log = tmp_path / "log.jsonl"
    out = tmp_path / "alive.txt"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), PROBE_OUT=str(out))
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "suite"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wait_for_watcher(log, timeout=60)
    outlived = out.read_text().split()
    assert len(outlived) == 4, outlived  # the suite saw the sidecar alive at the start of the 4 later tests
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert pool["test"] == "suite/test_models.py::test_unet_compile"
    assert pool["tests_outlived"] == outlived
    answer = rep["answer"]
    assert "made by test suite/test_models.py::test_unet_compile" in answer, answer
    assert "outlived the 4 tests after it" in answer
    fix = next(line for line in answer.splitlines() if line.startswith("- Fix first"))
    assert "fixture" in fix and "shutdown_compile_workers()" in fix and "own process" in fix
    verbose = report_text(log, verbose=True)
    assert all(name in verbose for name in outlived)
    assert_fits(report_text(log))


def test_caller_paths_are_normalised(tmp_path: Path) -> None:
    """A script run as `python w/../my2.py`: the report names the line that made the pool as /…/my2.py:2, never
    `w/../my2.py` (the Run section's command line stays as it was typed)."""
    (tmp_path / "w").mkdir()
    (tmp_path / "my2.py").write_text("from torch._inductor.async_compile import AsyncCompile\n"
                                     "AsyncCompile.wait_pool_ready()  # first Triton kernel\n")
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "w/../my2.py"], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=60)
    text = report_text(log)
    assert "w/../my2.py:" not in text and f"{tmp_path / 'my2.py'}:2" in text


def test_pools_made_by_pytest_xdist_workers_scale_with_the_test_processes(tmp_path: Path) -> None:
    """docs/users.md D5: xdist workers are execnet children (`-c import sys;exec(eval(...))`, no
    PYTEST_XDIST_WORKER at their start); the tests they ran say they are test processes: 'per test process',
    not 'per child process'."""
    from .logs import LogWriter, report

    def start(t: float, pid: int, ppid: int, role: str, argv: list[str]) -> None:
        w.add(t, pid, ppid, role, "process_start", argv=argv, python="3.11.7", forked=False, env={}, run="r1",
              root_pid=100)

    w = LogWriter()
    start(0, 100, 1, "main", ["python", "-m", "pytest", "-n", "2"])
    for n, (pid, sidecar) in enumerate(((101, 201), (102, 202))):
        start(0.5, pid, 100, "child", ["python", "-c", "import sys;exec(eval(sys.stdin.readline()))"])
        w.add(1, pid, 100, "child", "test", nodeid=f"tests/test_x.py::test_{n}", phase="start")
        w.warm(2, pid, 100, "child", sidecar)
    rep = report(w, tmp_path)
    assert rep["pools_across"]["scales_with"] == "test", rep["pools_across"]
    assert "per test process" in rep["answer"], rep["answer"]
