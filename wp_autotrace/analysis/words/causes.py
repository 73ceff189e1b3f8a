"""Causes and their symptoms: which findings follow from another, so the Answer tells the cause first with its
symptoms under it, and "Fix first" is the cause's fix (each finding is still ranked by its own cost: a symptom
can cost more than its cause, and the pair is placed where the worst of them ranks).

Two causes today. A fork pool's hung job (`fork-pool-hang`) leads the hang at exit of the same process
(`exit-hang`); a sidecar's exit join on a job (its `exit-hang`) leads the main's exit-time wait on that sidecar
(`slow-exit-wait`, WAITS_ON). Nested compile pools (`nested-pools`: warm_pool ran inside compile sidecars or
workers, each call starting another sidecar). What follows from it, when every process the finding names is inside the
nesting (the processes that made pools inside a pool, those pools' sidecars and workers, and a pool's creator in
its calls that wait on its pool: the main's exit waits on its sidecar, which waits on the one below): processes left
running, calls that never returned (the shutdowns waiting on the sidecar below), zombies, sidecars that
never served, pools that died, jobs cut off. Two follow from it by kind, whatever they name: the main process's
wait at exit (torch waits for every pool it started, the nested ones included) and TORCH_WARM_POOL=0 bypassed
(the nested warm_pool calls themselves).

A second: a sidecar that died as it started (`sidecar-never-served` with what its main() raised). What follows
from it, when every process the finding names is that pool's creator, sidecar or workers: jobs sent to the pool
that were never answered or cut off, the pool's death, calls that never returned; its fix (what the sidecar
raised) comes first, never "make a new pool", which would die the same way.

And: a pool that died (`pool-died`, with how its sidecar ended) leads the jobs sent to it after (`jobs-lost`,
its cost's lost_in naming that pool's sidecar) and its workers left running (`leftovers` naming none but them).

Built on the report dict only (its findings' kinds and pids, its pools), like the Answer.
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import GUARDED_ROLES

NESTING = "nested-pools"
QUOTA = "cpu-quota-pool"
# Kinds that follow from the nesting when every pid they name is inside it.
NESTING_SYMPTOMS = ("leftovers", "call-never-returned", "zombies", "sidecar-never-served", "pool-died",
                    "jobs-cut-off", "jobs-lost")
# Kinds that follow from the nesting whatever they name (the main's own wait at exit, the nested calls).
NESTING_BY_KIND = ("slow-exit-wait", "warm-pool-bypass")


def creator_pids(rep: dict[str, Any]) -> set[int]:
    """The processes that made the run's pools."""
    return {p["creator_pid"] for p in rep.get("pools") or ()}


def nesting_pids(rep: dict[str, Any]) -> set[int]:
    """The processes of the nesting: each process that made a pool inside a pool (a sidecar or worker), and the
    sidecars and workers of every pool of the run (the first pool's sidecar is where the nesting starts). A pool's
    creator is the nesting's only in its waits on its pool (symptom_of: its exit's shutdown waits on that sidecar,
    which waits on the nesting below it), not in any other call it left open."""
    pools = rep.get("pools") or []
    if not any(p.get("creator_role") in GUARDED_ROLES for p in pools):
        return set()
    pids: set[int] = set()
    for p in pools:
        if p.get("creator_role") in GUARDED_ROLES:
            pids.add(p["creator_pid"])
        if p.get("sidecar_pid") is not None:
            pids.add(p["sidecar_pid"])
        pids.update(p.get("worker_pids") or ())
    return pids


START_FAILED = "sidecar-never-served"
# Kinds that follow from a sidecar's failed start when every pid they name is of its pool.
START_SYMPTOMS = ("jobs-lost", "jobs-cut-off", "pool-died", "call-never-returned")


def failed_start_pids(rep: dict[str, Any], cause: dict[str, Any]) -> set[int]:
    """The processes of the pools whose sidecar the failed-start finding names: creator, sidecar, workers."""
    sidecars = set(cause.get("pids") or ())
    pids: set[int] = set()
    for p in rep.get("pools") or []:
        if p.get("sidecar_pid") in sidecars:
            pids.update((p["creator_pid"], p["sidecar_pid"], *(p.get("worker_pids") or ())))
    return pids


# A cause by kind: its symptoms' kinds, when they name one of the cause's processes (a fork pool's hung job keeps
# its process from ending: concurrent.futures' exit join waits for it; a main killed there leaves the workers, and
# its wait is a call that never returned; a pool's shutdown at exit cuts the hung job off).
# An autotune subprocess torch killed (autotune-killed) stays a zombie: kill() never waits for it. A forked child
# waiting on its parent's compile thread pool (forked-compile-hang) leaves its compile calls open. Pools threads made
# at once (pools-made-at-once) sit idle: all but the one inductor hands out ran no job; so does a pool made for a
# compile that the interpreter's exit then refused (compile-after-exit).
# A wait the user interrupted on a running job (pool-wait-interrupted): torch's exit then cuts that job off
# (jobs-cut-off), whose own advice ("wait for the jobs before shutting down") is not the user's to follow, and the
# program the job ran (a compiler) outlives the pool it was re-parented from (leftovers, named by both).
# A pool inside a CPU quota (cpu-quota-pool) is shut down at exit by throttled processes: the main's slow wait
# there (slow-exit-wait) follows from the quota where the quota's records show the pool throttled during that wait
# (its cost's exit_wait_throttled), unless a sidecar's own exit join is what it waited on (WAITS_ON).
BY_KIND = {"fork-pool-hang": ("exit-hang", "leftovers", "call-never-returned"),
           "pool-job-hang": ("exit-hang", "leftovers", "jobs-cut-off", "call-never-returned"),
           "pool-wait-interrupted": ("jobs-cut-off", "leftovers"),
           "autotune-killed": ("zombies",), "forked-compile-hang": ("call-never-returned", "leftovers"),
           "pools-made-at-once": ("idle-pool",), "compile-after-exit": ("idle-pool",),
           "cpu-quota-pool": ("slow-exit-wait",), "spawn-main-reimport": ("warm-pool-bypass",)}
# Causes whose symptoms must name none but the cause's own processes: a spawned child's re-imported main that
# called warm_pool under the TORCH_WARM_POOL=0 its parent pool gave it bypassed the guard because of the
# re-import (the main guard is its fix); a bypass in a process the re-import never ran in is the user's own call.
WHOLLY = ("spawn-main-reimport",)


# Jobs sent to a pool whose sidecar had ended (jobs-lost) follow from that pool's death (pool-died), which tells how
# its sidecar ended (a group signal, an OOM kill): the cause leads, the lost jobs under it. The lost jobs name their
# creators; their cost's lost_in names the dead pools' sidecars, which pool-died names.
LOST_IN = {"jobs-lost": "pool-died"}


# Workers left running after their pool died (leftovers) follow from that death (pool-died): the dead sidecar never
# stopped them, and its creator's shutdown found nothing to stop; pool-died names the dead pools' sidecars.
ORPHANED_BY = {"leftovers": "pool-died"}


def dead_pools_workers(rep: dict[str, Any], died: dict[str, Any]) -> set[int]:
    """The workers of the pools whose sidecar the pool-died finding names."""
    sidecars = set(died.get("pids") or ())
    return {w for p in rep.get("pools") or [] if p.get("sidecar_pid") in sidecars for w in p.get("worker_pids") or ()}


# A wait on another process's hang: the main's exit-time wait (slow-exit-wait) on a sidecar whose own exit join
# waited on a job (its exit-hang) follows from that join, the processes it waited on being its cost's waited_on
# (never its own pids: a main's own exit-hang shares the main's pid, and is no cause of its wait).
WAITS_ON = {"slow-exit-wait": ("exit-hang",)}


def symptom_of(rep: dict[str, Any], f: dict[str, Any], findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cause finding f follows from (one of findings), or None."""
    pids = set(f.get("pids") or ())
    joined = bool((f.get("cost") or {}).get("waited_on"))  # a sidecar's exit join: that join's, not a quota's
    by_kind = next((c for c in findings if c is not f and f["kind"] in BY_KIND.get(c["kind"], ())
                    and pids & set(c.get("pids") or ())
                    and (c["kind"] not in WHOLLY or pids <= set(c.get("pids") or ()))
                    and not (c["kind"] == QUOTA and (
                        joined or not (c.get("cost") or {}).get("exit_wait_throttled")))), None)
    if by_kind is not None:
        return by_kind
    cause = next((c for c in findings if c["kind"] == NESTING), None)
    if cause is not None and f is not cause:
        if f["kind"] in NESTING_BY_KIND:
            return cause
        # a pool's creator killed inside its wait on its pool (its exit's shutdown, the warm_pool that began
        # the chain) waited on the nesting; any other call of the main's (a DataLoader wait) is not the nesting's
        waits = set((f.get("cost") or {}).get("pool_wait_pids") or ()) & creator_pids(rep)
        if f["kind"] in NESTING_SYMPTOMS and pids and pids <= nesting_pids(rep) | waits:
            return cause
    # after the nesting: torch's exit wait on nested pools is the nesting's, whatever one sidecar's join waited on
    waited_on = set((f.get("cost") or {}).get("waited_on") or ())
    on = next((c for c in findings if c is not f and c["kind"] in WAITS_ON.get(f["kind"], ())
               and waited_on & set(c.get("pids") or ())), None)
    if on is not None:
        return on
    lost_in = set((f.get("cost") or {}).get("lost_in") or ())
    died = next((c for c in findings if c is not f and c["kind"] == LOST_IN.get(f["kind"])
                 and lost_in and lost_in <= set(c.get("pids") or ())), None)
    if died is not None:
        return died
    if f["kind"] in ORPHANED_BY and pids:
        died = next((c for c in findings if c is not f and c["kind"] == ORPHANED_BY[f["kind"]]
                     and pids <= dead_pools_workers(rep, c)), None)
        if died is not None:
            return died
    if f["kind"] in START_SYMPTOMS and pids:
        for c in findings:  # only one that raised: a sidecar that simply never served explains no lost job
            if c["kind"] == START_FAILED and c["severity"] == "problem" and pids <= failed_start_pids(rep, c):
                return c
    return None


def root_cause(rep: dict[str, Any], f: dict[str, Any], findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first cause of f's chain: a cause that follows from another (a sidecar that died as it started because
    the nesting's import started a pool in it) hands its symptoms up, so the call its death left open is told
    under the nesting with it, never under a second lead beside the nesting. None where f follows from nothing."""
    cause = symptom_of(rep, f, findings)
    seen = {id(f)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        up = symptom_of(rep, cause, findings)
        if up is None or id(up) in seen:
            break
        cause = up
    return cause


def units(rep: dict[str, Any], problems: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The problems (worst first) as (lead, symptoms) pairs: a first cause (root_cause) leads every finding that
    follows from it, directly or through another cause, the pair placed where the first of them ranks; a finding
    that is no cause's symptom stands alone."""
    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    placed: set[int] = set()
    for f in problems:
        if id(f) in placed:
            continue
        cause = root_cause(rep, f, problems) or (f if f["kind"] == NESTING or any(
            symptom_of(rep, g, problems) is f for g in problems) else None)
        if cause is None or id(cause) in placed:  # no cause, or one told already (as another cause's symptom)
            out.append((f, []))
            placed.add(id(f))
            continue
        # a finding is told once, under its first cause
        symptoms = [g for g in problems if id(g) not in placed and g is not cause
                    and root_cause(rep, g, problems) is cause]
        out.append((cause, symptoms))
        placed.update(id(g) for g in (cause, *symptoms))
    return out


def in_order(rep: dict[str, Any], ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings (worst first) with each cause moved up to just before its first symptom, its symptoms after
    it: the Findings section reads as the Answer does."""
    return [f for lead, symptoms in units(rep, ranked) for f in (lead, *symptoms)]
