"""End to end under torchrun: 2 ranks (gloo, CPU), the stand-in backend warming pools in each.

torchrun starts each rank in a session of its own and the sidecar chains
outlive their starters, so the run is bounded and then every process that
carries this test's log in its environment is killed (tests/procs.py).
`torchrun_log` is the run itself, for tests that read the log or the report.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.present.render import render_text

from .conftest import STANDIN, clean_env, events, needs_torch, report_json
from .procs import records, run_until

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

# Bounds the whole run; on an idle 2-core machine ranks are up and a sidecar
# of each has died after ~25 s.
TORCHRUN_TIMEOUT = 55
# Ranks wind down on SIGINT from torchrun before everything is killed.
GRACE_S = 4

RANK_SCRIPT = textwrap.dedent('''
    import os, time
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} sum {t.item():.0f}", flush=True)
    time.sleep(600)  # the test stops the run once it has seen what it needs
''')

# What the console script `torchrun` is (pip writes it with the installing interpreter).
TORCHRUN_SHIM = "#!{python}\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n"


def _ready(recs: list[dict[str, Any]]) -> bool:
    """Both ranks started, and a sidecar of each rank has died in its main()."""
    ranks = {r["rank"].get("RANK") for r in events(recs, "process_start") if "rank" in r and r["role"] == "child"}
    died = {_rank_of(recs, e["pid"]) for e in events(recs, "error") if e["role"] == "compile-sidecar"}
    return {"0", "1"} <= ranks and {"0", "1"} <= died


def _rank_of(recs: list[dict[str, Any]], pid: int) -> str | None:
    for r in recs:
        if r["event"] == "process_start" and r["pid"] == pid:
            return r.get("rank", {}).get("RANK")  # type: ignore[no-any-return]
    return None


def torchrun_log(tmp_path: Path, timeout: float = TORCHRUN_TIMEOUT) -> Path:
    """Run 2 ranks under a traced torchrun until each has a dead sidecar; return the log."""
    log = tmp_path / "torchrun.jsonl"
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    shim = tmp_path / "torchrun"
    shim.write_text(TORCHRUN_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), PYTHONPATH=str(STANDIN),
                    TORCHINDUCTOR_COMPILE_THREADS="2", OMP_NUM_THREADS="1")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    cmd = [str(shim), "--standalone", "--nproc_per_node=2", "--monitor_interval=1", str(script)]
    res, reached = run_until(cmd, env, log, _ready, timeout, cwd=tmp_path, interrupts=1, interrupt_wait=GRACE_S)
    assert reached, f"not ready after {timeout} s: {len(records(log))} records\n{res.stderr[-3000:]}"
    return log


def test_torchrun_two_ranks(tmp_path: Path) -> None:
    """Both ranks' process_start carry their rank; the launcher is traced; dead sidecars have error records."""
    log = torchrun_log(tmp_path)
    recs = records(log)
    starts = events(recs, "process_start")
    (launcher,) = [s for s in starts if s["role"] == "main"]
    assert os.path.basename(launcher["argv"][1]) == "torchrun" and "rank" not in launcher
    ranks = {s["rank"]["RANK"]: s for s in starts if s.get("ppid") == launcher["pid"] and "rank" in s}
    assert set(ranks) == {"0", "1"}
    for r, s in ranks.items():
        assert s["rank"]["LOCAL_RANK"] == r and s["rank"]["WORLD_SIZE"] == "2"
        assert s["rank"]["LOCAL_WORLD_SIZE"] == "2" and s["rank"]["GROUP_RANK"] == "0"
        assert s["rank"]["TORCHELASTIC_RUN_ID"]
        # the attempt torchrun started it in (no restart yet): the one sign that tells a restarted rank apart
        assert s["rank"]["TORCHELASTIC_RESTART_COUNT"] == "0"
    # sidecars inherit their rank's variables: pools can be grouped per rank
    sidecars = [s for s in starts if s["role"] == "compile-sidecar"]
    assert {s.get("rank", {}).get("RANK") for s in sidecars} >= {"0", "1"}
    sidecar_pids = {s["pid"] for s in sidecars}
    # (the test's SIGINT may add KeyboardInterrupt records from excepthook)
    errors = [e for e in events(recs, "error") if e["pid"] in sidecar_pids and e["source"] == "logging"]
    assert errors and all(e["exc_type"] == "RuntimeError" for e in errors)
    # the launcher imports torch too: its own chain has no rank
    assert {_rank_of(recs, e["pid"]) for e in errors} >= {"0", "1"}
    # every rank's warm_pool call names the backend's distribution
    warm = [c for c in events(recs, "call") if c["target"].endswith("AsyncCompile.warm_pool")
            and c["pid"] in {s["pid"] for s in ranks.values()}]
    assert {c["caller"]["dist"] for c in warm} == {"wp-standin-backend"}
    # the report: both ranks labelled, the launcher named, the Findings short
    rep = report_json(log)
    text = render_text(rep, {})
    assert {e["rank"] for e in rep["ranks"]} == {"rank 0", "rank 1"}
    procs = {p["pid"]: p for p in rep["processes"]}
    assert procs[launcher["pid"]]["launcher"] and f"{launcher['pid']} launcher (" in text
    for r, s in ranks.items():
        assert procs[s["pid"]]["rank_label"] == f"rank {r}" and f"{s['pid']} child (ranks.py) rank {r}" in text
    assert "== Ranks (2), launched by " in text
    # Findings aggregate over ranks and processes: one per kind, each a sentence and its advice (which
    # kinds appear depends on how the test's SIGINT lands: a launcher killed after the grace adds one).
    findings = text.split("== Findings\n")[1].split("\n\n")[0].splitlines()
    kinds = [f["kind"] for f in rep["findings"]]
    assert len(kinds) == len(set(kinds)) and len(findings) <= 2 * len(kinds), "\n".join(findings)
    assert all(len(line) <= 600 for line in findings), "\n".join(findings)  # pid lists are capped
    assert "nested-pools" in {f["kind"] for f in rep["findings"]}
