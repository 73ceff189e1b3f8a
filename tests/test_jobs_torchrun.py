"""A two-node torchrun job on one machine: two UTS namespaces (`unshare -u`, hosts n0 and n1),
`--nnodes=2`, one rank per node, gloo on CPU. Each node's launcher is its own traced root with
its own log; `report n0.jsonl n1.jsonl` shows one job with both hosts and both ranks.

Skipped where `unshare -u` is not permitted (no CAP_SYS_ADMIN, no user namespaces). The run is
bounded; whatever of it is left is killed through its logs (tests/procs.py kill_run).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from wp_autotrace.analysis.present.render import render_text

from .conftest import clean_env, needs_torch, report_json, wait_for_watcher
from .procs import kill_run
from .test_torchrun import TORCHRUN_SHIM

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

# Both nodes import torch, rendezvous and all-reduce once: ~25 s on an idle 2-core box.
JOB_TIMEOUT_S = 150
WATCHER_WAIT_S = 30

RANK_SCRIPT = textwrap.dedent('''
    import torch.distributed as dist
    dist.init_process_group("gloo")
    import torch
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()
''')


def _unshare_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-u", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_node_torchrun_is_one_job(tmp_path: Path) -> None:
    if not _unshare_ok():
        pytest.skip("unshare -u is not permitted here")
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    shim = tmp_path / "torchrun"
    shim.write_text(TORCHRUN_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    port, rdzv = _free_port(), f"job-{uuid.uuid4().hex[:8]}"
    logs = [tmp_path / f"n{i}.jsonl" for i in range(2)]
    procs = []
    try:
        for i, log in enumerate(logs):
            env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), OMP_NUM_THREADS="1",
                            GLOO_SOCKET_IFNAME="lo")
            for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
                env.pop(name, None)
            launch = [str(shim), "--nnodes=2", f"--node_rank={i}", "--nproc_per_node=1", "--master_addr=127.0.0.1",
                      f"--master_port={port}", f"--rdzv_id={rdzv}", "--monitor_interval=1", str(script)]
            cmd = ["unshare", "-u", "sh", "-c", f'hostname n{i} && exec "$@"', "node", *launch]
            procs.append(subprocess.Popen(cmd, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True))
        deadline = time.monotonic() + JOB_TIMEOUT_S
        outs = [p.communicate(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
    finally:
        for log in logs:
            kill_run(log)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    assert b"sum 3" in outs[0][0] + outs[1][0]
    for log in logs:
        wait_for_watcher(log, timeout=WATCHER_WAIT_S)
    rep = report_json(*logs)
    assert len(rep["jobs"]) == 1, [j["runs"] for j in rep["jobs"]]
    job = rep["jobs"][0]
    assert job["hosts"] == ["n0", "n1"] and len(job["runs"]) == 2 and job["nodes"] == 2
    assert job["ranks"] == ["rank n0:0", "rank n1:1"] and job["kinds"] == ["torchelastic"]
    assert job["id"] == f"torchrun {rdzv} @ 127.0.0.1:{port}" and job["state"] == "ended"
    assert [len(n["launchers"]) for n in job["per_node"]] == [1, 1]
    text = render_text(rep, {})
    assert f"== Job: torchrun {rdzv} @ 127.0.0.1:{port} (2 runs, 2 node(s))" in text
    assert "- node n0 (run " in text and "- node n1 (run " in text and "  - rank n1:1: child " in text
    ranks_header = next(line for line in text.splitlines() if line.startswith("== Ranks (2), launched by "))
    assert " on n0" in ranks_header and " on n1" in ranks_header  # each node's launcher, not one node's
