"""Jobs: runs of one launch on several hosts, grouped by the launchers' ids (analysis/derive/jobs.py).

Synthetic logs for the rule (share an id and overlap: one job; reuse an id later:
two jobs; share nothing: apart), then a SLURM-shaped launch of real traced
processes (two steps of one job id, env set by hand).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.cli.main import main

from .conftest import clean_env, read_log, report_json, wait_for_watcher
from .logs import T0, LogWriter

TORCHRUN = {"TORCHELASTIC_RUN_ID": "exp7", "MASTER_ADDR": "n0", "MASTER_PORT": "29500",
            "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"}
STEP_TIMEOUT_S = 60  # one traced `python -c` and its watcher, on a loaded 2-core box


def node_log(tmp_path: Path, host: str, rank: int, t: float = 0.0, ident: dict[str, str] | None = None,
             leftover_sidecar: bool = False, run: str | None = None) -> Path:
    """One node of a torchrun job: launcher 100 (no rank) -> rank 101 (makes a pool, sidecar 102)."""
    w = LogWriter(host)
    run = run or f"run{host}{int(t)}"
    start = {"run": run, "root_pid": 100, "forked": False, "env": {}}
    rank_env = {**(TORCHRUN if ident is None else ident), "RANK": str(rank), "LOCAL_RANK": "0"}
    w.add(t, 100, 1, "main", "process_start", argv=["python", "/usr/bin/torchrun", "train.py"], **start)
    w.add(t + 1, 101, 100, "child", "process_start", argv=["python", "train.py"], rank=rank_env, **start)
    w.warm(t + 2, 101, 100, "child", 102)
    w.add(t + 3, 102, 101, "compile-sidecar", "process_start", argv=["python", "x/__main__.py"], rank=rank_env,
          **start)
    w.add(t + 8, 101, 100, "child", "process_exit", how="exit", code=0)
    w.add(t + 9, 100, 1, "main", "process_exit", how="exit", code=0)
    procs = [{"pid": 102, "ppid": 1, "rss": 300 << 20, "role": "compile-sidecar"}] if leftover_sidecar else []
    w.add(t + 9.5, 900, 1, "watcher", "leftover", run=run, root_pid=100, how="root-exit", count=len(procs),
          procs=procs)
    return w.write(tmp_path / f"{host}-{int(t)}.jsonl")


def test_two_hosts_one_job_header_nodes_ranks(tmp_path: Path) -> None:
    """Two nodes' logs of one torchrun job: one job, both hosts, both ranks, per node and per rank."""
    n0 = node_log(tmp_path, "n0", 0, leftover_sidecar=True)
    n1 = node_log(tmp_path, "n1", 1, t=0.4)
    rep = report_json(n0, n1)
    (job,) = rep["jobs"]
    assert job["hosts"] == ["n0", "n1"] and job["nodes"] == 2 and job["ranks"] == ["rank n0:0", "rank n1:1"]
    assert job["kinds"] == ["torchelastic"] and job["id"] == "torchrun exp7 @ n0:29500"
    assert job["state"] == "ended" and job["start"] == T0 and job["end"] == T0 + 9.9
    node0, node1 = job["per_node"]
    assert node0["launchers"] == ["torchrun 100"] and node0["ranks"] == ["rank n0:0"]
    assert node0["pools"] == 1 and node0["idle_pool_rss_bytes"] == 300 << 20 and node0["leftovers"] == 1
    assert node1["idle_pool_rss_bytes"] == 0 and node1["leftovers"] == 0 and node1["exit_codes"] == [0]
    assert [e["idle_pool_rss_bytes"] for e in job["per_rank"]] == [300 << 20, 0]
    text = render_text(rep, {})
    assert "== Job: torchrun exp7 @ n0:29500 (2 runs, 2 node(s))" in text
    assert text.count("== Job:") == 1 and "one job (== Job above)" in text
    assert "- node n0 (run runn00): torchrun 100; 1 pool(s), idle pool memory 300" in text
    assert "  - rank n1:1: child 101 (train.py); 1 pool(s); nothing left; 0 error(s)" in text
    assert "== Ranks (2), launched by torchrun 100 on n0, torchrun 100 on n1" in text


def test_reused_id_later_is_another_job_and_strangers_stay_apart(tmp_path: Path) -> None:
    """The same rdzv id launched again after the first ended: two jobs; a run with no launcher id: its own."""
    first = [node_log(tmp_path, "n0", 0), node_log(tmp_path, "n1", 1, t=0.2)]
    again = [node_log(tmp_path, "n0", 0, t=600), node_log(tmp_path, "n1", 1, t=600.3)]
    alone = node_log(tmp_path, "n2", 0, t=1, ident={})
    rep = report_json(*first, *again, alone)
    jobs = sorted(rep["jobs"], key=lambda j: j["start"])
    assert [len(j["runs"]) for j in jobs] == [2, 1, 2]
    assert jobs[1]["hosts"] == ["n2"] and jobs[1]["kinds"] == []
    assert jobs[0]["end"] < jobs[2]["start"]
    assert render_text(rep, {}).count("== Job: torchrun exp7") == 2


def test_single_node_launches_on_two_hosts_are_two_jobs(tmp_path: Path) -> None:
    """torchrun's default id 'none' with a loopback master, or WORLD_SIZE == LOCAL_WORLD_SIZE: one host's own."""
    local = {"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
             "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"}
    single = {"TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
              "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    for ident in (local, single):
        rep = report_json(node_log(tmp_path, "n0", 0, ident=ident), node_log(tmp_path, "n1", 0, t=0.1, ident=ident))
        assert [len(j["runs"]) for j in rep["jobs"]] == [1, 1], ident


def test_explicit_job_id_groups_and_json_carries_it(tmp_path: Path, capsys: Any) -> None:
    """WP_AUTOTRACE_JOB alone groups overlapping runs; `report --json` carries the job (`jobs`)."""
    ident = {"WP_AUTOTRACE_JOB": "nightly-42"}
    logs = [node_log(tmp_path, "a", 0, ident=ident), node_log(tmp_path, "b", 1, t=2, ident=ident)]
    assert main(["report", "--json", *map(str, logs)]) == 0
    rep = json.loads(capsys.readouterr().out)
    (job,) = rep["jobs"]
    assert job["id"] == "WP_AUTOTRACE_JOB nightly-42" and job["hosts"] == ["a", "b"] and len(job["runs"]) == 2


def _slurm_step(log: Path, step: int, job: str, node: str) -> None:
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), SLURM_JOB_ID=job, SLURM_STEP_ID=str(step),
                    SLURM_PROCID="0", SLURM_NODEID=node, SLURM_NTASKS="1")
    proc = subprocess.run([sys.executable, "-c", "print('step')"], env=env, capture_output=True, text=True,
                          timeout=STEP_TIMEOUT_S)
    assert proc.returncode == 0 and proc.stdout == "step\n" and proc.stderr == ""
    wait_for_watcher(log, timeout=STEP_TIMEOUT_S)


def test_slurm_two_steps_of_one_job_id(tmp_path: Path) -> None:
    """Two srun steps of Slurm job 4242, each its own traced root and log: one job, steps 0 and 1;
    another job id's step stays apart."""
    logs = [tmp_path / f"step{i}.jsonl" for i in range(3)]
    _slurm_step(logs[0], 0, "4242", "0")
    _slurm_step(logs[1], 1, "4242", "0")
    _slurm_step(logs[2], 0, "5151", "0")
    rep = report_json(*logs)
    assert len(rep["runs"]) == 3 and len(rep["jobs"]) == 2
    (job,) = [j for j in rep["jobs"] if len(j["runs"]) == 2]
    assert job["id"] == "Slurm job 4242" and job["steps"] == ["0", "1"] and job["state"] == "ended"
    text = render_text(rep, {})
    assert "== Job: Slurm job 4242 (2 runs, 1 node(s))" in text and "(steps 0, 1)" in text
    starts = [r for log in logs for r in read_log(log) if r["event"] == "process_start" and r["role"] == "main"]
    assert {s["rank"]["SLURM_STEP_ID"] for s in starts} == {"0", "1"}


def _pid_log(tmp_path: Path, host: str, rank: int, t: float, pid: int, ident: dict[str, str], leftover: bool = False,
             argv: str = "train.py") -> Path:
    """One node's run: main `pid` (rank `rank`), leaving a `sleep` behind when asked."""
    w = LogWriter(host)
    run = f"run{host}{int(t)}"
    w.add(t, pid, 1, "main", "process_start", argv=["python", argv], rank={**ident, "RANK": str(rank)},
          run=run, root_pid=pid, forked=False, env={})
    if leftover:
        w.add(t + 0.5, 900, 1, "watcher", "tree", run=run, root_pid=pid, count=2, ended=[],
              started=[{"pid": pid + 1, "ppid": pid, "rss": 5 << 20, "name": "sleep", "via": "child"}])
    w.add(t + 1, pid, 1, "main", "process_exit", how="exit", code=0)
    procs = [{"pid": pid + 1, "ppid": 1, "rss": 5 << 20, "name": "sleep"}] if leftover else []
    w.add(t + 1.5, 900, 1, "watcher", "leftover", run=run, root_pid=pid, how="root-exit", count=len(procs),
          procs=procs)
    return w.write(tmp_path / f"{host}-{int(t)}.jsonl")


def test_reused_job_id_each_job_has_its_own_rank_rows(tmp_path: Path) -> None:
    """Review 1 #10: a constant WP_AUTOTRACE_JOB launched twice: the later job's rank rows are its own
    (pid, command), not the earlier job's; the two job headers differ; several logs 'hold' runs."""
    ident = {"WP_AUTOTRACE_JOB": "J"}
    logs = [_pid_log(tmp_path, "n0", 0, 0, 500, ident), _pid_log(tmp_path, "n1", 1, 0.2, 510, ident),
            _pid_log(tmp_path, "n0", 0, 60, 700, ident, argv="again.py"),
            _pid_log(tmp_path, "n1", 1, 60.2, 710, ident, argv="again.py")]
    rep = report_json(*logs)
    first, second = sorted(rep["jobs"], key=lambda j: j["start"])
    assert [e["pid"] for e in first["per_rank"]] == [500, 510]
    assert [e["pid"] for e in second["per_rank"]] == [700, 710]
    assert all(e["label"] == "again.py" for e in second["per_rank"])
    assert first["ranks"] == second["ranks"] == ["rank n0:0", "rank n1:1"]  # unique within each job: no suffix
    text = render_text(rep, {})
    headers = [line for line in text.splitlines() if line.startswith("== Job:")]
    assert len(headers) == 2 and headers[0] != headers[1]
    assert "these logs hold 4 runs" in text and "this log holds" not in text


def test_slurm_steps_each_rank_row_is_its_own_step(tmp_path: Path) -> None:
    """Review 1 #10 (jobs_steps.sh): steps 0 and 1 of one Slurm job on n0/n1; only step 1's rank 0 leaves
    a process: the leftover is step 1's rank 0's, and step 1's rank 0 appears in the job."""
    ident = {"SLURM_JOB_ID": "902"}
    logs = [_pid_log(tmp_path, "n0", 0, 0, 592, {**ident, "SLURM_STEP_ID": "0"}, argv="pass.py"),
            _pid_log(tmp_path, "n1", 1, 0.1, 593, {**ident, "SLURM_STEP_ID": "0"}, argv="pass.py"),
            _pid_log(tmp_path, "n0", 0, 5, 700, {**ident, "SLURM_STEP_ID": "1"}, leftover=True, argv="orphan.py"),
            _pid_log(tmp_path, "n1", 1, 5.1, 701, {**ident, "SLURM_STEP_ID": "1"}, argv="pass.py")]
    rep = report_json(*logs)
    (job,) = rep["jobs"]
    rows = {(e["pid"], e["leftovers"]) for e in job["per_rank"]}
    assert rows == {(592, 0), (593, 0), (700, 1), (701, 0)}
    assert len(job["ranks"]) == 4 and "rank n0:0 (step 1)" in job["ranks"]
    text = render_text(rep, {})
    assert "rank n0:0 (step 1): main 700 (orphan.py)" in text


def test_node_and_rank_memory_is_real_memory_after_the_main_ended(tmp_path: Path) -> None:
    """#30's residual: a node's and a rank's idle pool memory and leftovers are real memory read after the main
    process ended (the watcher re-reads every pool then), not a sum of RSS: a forked worker's RSS counts its
    sidecar's pages again, and the sidecar's RSS is not what it holds. Sidecar: 300 MiB RSS, 240 MiB PSS read
    after the end; its forked worker: 290 MiB RSS, no PSS reading (counted 0, as the run's own figure)."""
    w = LogWriter("n0")
    start = {"run": "r", "root_pid": 100, "env": {}}
    rank_env = {**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0"}
    w.add(0, 100, 1, "main", "process_start", argv=["python", "/usr/bin/torchrun", "t.py"], forked=False,
          create_time=T0, **start)
    w.add(1, 101, 100, "child", "process_start", argv=["python", "t.py"], rank=rank_env, forked=False,
          create_time=T0 + 1, **start)
    w.warm(2, 101, 100, "child", 102)
    w.add(3, 102, 101, "compile-sidecar", "process_start", argv=["python", "x/__main__.py"], rank=rank_env,
          forked=False, create_time=T0 + 3, **start)
    w.add(3.5, 103, 102, "compile-worker", "process_start", argv=["python", "x/__main__.py"], rank=rank_env,
          forked=True, create_time=T0 + 3.5, **start)
    w.add(8, 101, 100, "child", "process_exit", how="exit", code=0)
    w.add(9, 100, 1, "main", "process_exit", how="exit", code=0)
    procs = [{"pid": 102, "ppid": 1, "rss": 300 << 20, "role": "compile-sidecar"},
             {"pid": 103, "ppid": 102, "rss": 290 << 20, "role": "compile-worker"}]
    w.add(9.5, 900, 1, "watcher", "leftover", run="r", root_pid=100, how="root-exit", count=2, procs=procs)
    w.add(9.6, 900, 1, "watcher", "memory", run="r", root_pid=100,
          procs=[{"pid": 102, "create_time": T0 + 3, "pss": 240 << 20, "uss": 200 << 20, "rss": 300 << 20}])
    rep = report_json(w.write(tmp_path / "n0.jsonl"))
    (job,) = rep["jobs"]
    (node,) = job["per_node"]
    assert (node["idle_pool_real_bytes"], node["leftover_real_bytes"]) == (240 << 20, 240 << 20), node
    (rank,) = job["per_rank"]
    assert rank["idle_pool_real_bytes"] == 240 << 20, rank
    from wp_autotrace.analysis.present.render import _node_figures  # the words of the Job section's node and rank lines

    assert _node_figures(node) == "1 pool(s), idle pool memory 240 MiB; 2 left (240 MiB); 0 error(s)"
