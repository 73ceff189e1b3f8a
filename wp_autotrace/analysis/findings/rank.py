"""The one ranking of findings: by what each costs (the cost keys of docs/evidence.md, "Cost keys"), the worst
first. The report orders its findings by it and the Answer leads with the worst; analysis, not wording.
"""

from __future__ import annotations

from typing import Any

from ..words.fmt import MIB

# Findings' cost keys (docs/evidence.md, "Cost keys"), in the order the ranking weighs them: a process the OOM
# killer ended (all its work, and the job with it), what was lost (a job's work), then what is still there
# after the program (processes, memory: someone must act), then the program standing still in the middle of
# its work (blocked_s: a first compile waiting for its pool; the user waits with it), then memory held
# by idle pools (it costs everyone on the host), then time spent waiting on what was not coming (it costs the
# user's time), then zombies last: a zombie holds no memory, only its pid (an orphan a slow pid 1 had not
# reaped yet must not lead an Answer about GiB·s held idle).
SEVERITY = {"problem": 0, "warning": 1, "info": 2}
# A wait shorter than this is noise on a loaded host: not ranked as a hang.
HANG_S = 1.0
# How long a compile job must have run for a wait the user interrupted on it to be told as a hang: torch's own bar
# for a stuck compile job (its CI sets TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=300 "so a stuck compile doesn't
# burn the whole shard budget"; precompilation_timeout_seconds defaults to 300 too). A first Triton compile's jobs
# take seconds: a Ctrl-C a few seconds into one is the user's impatience, and nothing in the log shows more.
STUCK_JOB_S = 300.0


def costs(f: dict[str, Any]) -> dict[str, float]:
    """A finding's cost keys (docs/evidence.md, "Cost keys"), from its `cost`; older keys stand in where a
    finding has not got the new ones yet (exit_wait_s, idle_mib_s, leftover_real_bytes)."""
    c = f.get("cost") or {}
    keys = ("oom_kills", "jobs_lost", "procs_left", "mib_left", "zombies", "hang_s", "idle_gib_s", "blocked_s")
    out = {k: float(c[k]) for k in keys
           if isinstance(c.get(k), (int, float))}
    if "hang_s" not in out and isinstance(c.get("exit_wait_s"), (int, float)):
        out["hang_s"] = float(c["exit_wait_s"])
    if "idle_gib_s" not in out and isinstance(c.get("idle_mib_s"), (int, float)):
        out["idle_gib_s"] = c["idle_mib_s"] / 1024
    if f.get("kind") == "leftovers":
        out.setdefault("procs_left", float(c.get("processes") or 0))
        if isinstance(c.get("leftover_real_bytes"), (int, float)):
            out.setdefault("mib_left", c["leftover_real_bytes"] / MIB)
    return out


def rank_key(f: dict[str, Any]) -> tuple[float, ...]:
    """Worst first: OOM kills, jobs lost, then left behind (processes and memory), the program blocked mid-work, idle
    memory, hang, zombies; within a class the larger figure; findings without a cost by severity."""
    c = costs(f)
    lost, left, mib = c.get("jobs_lost", 0.0), c.get("procs_left", 0.0), c.get("mib_left", 0.0)
    zombies, hang, idle = c.get("zombies", 0.0), c.get("hang_s", 0.0), c.get("idle_gib_s", 0.0)
    oom, blocked = c.get("oom_kills", 0.0), c.get("blocked_s", 0.0)
    classes = (oom > 0, lost > 0, left > 0 or mib > 0, blocked >= HANG_S, idle > 0, hang >= HANG_S, zombies > 0)
    first = next((i for i, hit in enumerate(classes) if hit), len(classes))
    return (first, -oom, -lost, -mib, -left, -blocked, -idle, -hang, -zombies, SEVERITY.get(f.get("severity", ""), 3))


def ranked(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings, worst first (stable: equal costs keep their registry order)."""
    return sorted(findings, key=rank_key)



def report_key(rep: dict[str, Any]) -> tuple[tuple[float, ...], bool]:
    """How bad one launch's own report is, for ordering launches the worst first (a log holding many answers only
    the first few one by one: a clean run first would hide the one that left a process running): its worst
    problem's rank_key (no problem: after every one), then a non-zero exit code first; and whether it had a
    problem at all. From the launch's own report, so a finding of another launch never counts for it."""
    keys = [rank_key(f) for f in rep["findings"] if f.get("severity") != "info"]
    failed = any(r.get("exit_code") not in (None, 0) for r in rep["runs"])
    worst = min(keys) if keys else (float("inf"),)
    return worst + (0.0 if failed else 1.0,), bool(keys) or failed
