"""A compile pool larger than the CPU quota it ran in (a container's --cpus, a pod's limits.cpu), and the kernel's
throttling of that quota during the run.

torch sizes a pool by the CPUs the process may be scheduled on (os.sched_getaffinity: a cpuset narrows it, a CFS
quota does not), so a container with a quota of a fraction of a CPU on a many-CPU host gets a pool of many workers,
each a python that imports torch, all sharing that fraction: the pool's start and its kernels wait for the next
period. Told only from the watcher's cpucg records (watcher/cgroups.py): the quota read as the first of the run's
processes in that cgroup joined, and the cgroup's throttled periods read then and at the watcher's end; never
guessed from how slow the compile was. docs/evidence.md says what each word needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import targets
from ..derive.poolprocs import pool_size
from ..words.fmt import cgroup_text, plural, pool_name
from .base import Finding

if TYPE_CHECKING:
    from ..derive.pools import PoolStory
    from ..derive.view import View

QUOTA_ADVICE = ("compile without a pool inside the quota: TORCHINDUCTOR_COMPILE_THREADS=1 in the environment that "
                "starts the program (the kernels compile in the process itself); or a pool no larger than the "
                "quota's CPUs (TORCHINDUCTOR_COMPILE_THREADS=N, N at most the quota); or a larger quota")


def _counts(rec: dict[str, Any]) -> tuple[int, int, int] | None:
    """(periods, throttled periods, throttled us) of a cpucg record, None where one is unread."""
    got = tuple(rec.get(k) for k in ("periods", "throttled", "throttled_us"))
    return got if all(isinstance(x, int) for x in got) else None  # type: ignore[return-value]


def _throttled(v: View, st: PoolStory) -> tuple[str, list[dict[str, Any]]] | None:
    """(the cgroup's path, its records: the first at the join, the last `final`) of the first cpu cgroup of the pool's
    creator or processes whose quota (read at the join, before the pool was made) is below the pool's size and
    whose throttled periods rose between the two reads; None where no record shows both."""
    size = max(pool_size(st.pool) or 0, len(st.workers))
    for run, host, path in dict.fromkeys((q.run, q.host, q.cpucg) for q in [st.pool.creator, *st.procs]
                                         if q.cpucg is not None):
        recs = run.cpucgs.get((host, path or ""), []) if run is not None else []
        first, last = (recs[0], recs[-1]) if recs else ({}, {})
        limit, before, after = first.get("limit"), _counts(first), _counts(last)
        if not (isinstance(limit, (int, float)) and 0 < limit < size and last.get("final") is True
                and before is not None and after is not None and after[1] > before[1]
                and first["ts"] <= st.pool.call.ts):
            continue
        return path or "", recs
    return None


def _exit_wait_throttled(st: PoolStory, recs: list[dict[str, Any]]) -> bool:
    """Did the quota throttle the pool while its creator waited at exit for torch's shutdown of it? A pool process
    was alive during the wait (its shutdown is what was waited on), and the cgroup's throttled count rose from the
    read inside the wait (else the last before it) to the first read at or after its end (else the final one):
    reads that show no rise across the wait leave the wait its own (words/causes.py)."""
    for c in st.pool.creator.calls.values():
        if c.tag != targets.EXIT_SHUTDOWN or c.end is None or not any(q.alive_during(c.ts, c.end) for q in st.procs):
            continue
        inside = [r for r in recs if c.ts <= r["ts"] <= c.end]
        before = inside[0] if inside else next((r for r in reversed(recs) if r["ts"] < c.ts), recs[0])
        after = next((r for r in recs if r["ts"] >= c.end), recs[-1])
        counts = _counts(before), _counts(after)
        if counts[0] is not None and counts[1] is not None and counts[1][1] > counts[0][1]:
            return True
    return False


def cpu_quota_pool(v: View) -> Finding | None:
    """The first pool whose processes ran in a CPU quota smaller than the pool (its workers, compile_threads as
    torch read it), where the quota's cgroup was throttled between the watcher's reads: the quota in CPUs (and its
    two figures, the cgroup that sets it), the pool's size, the periods throttled and the time stood still."""
    for pool in v.pools:
        st = v.story(pool)
        found = _throttled(v, st)
        if found is not None:
            break
    else:
        return None
    path, recs = found
    first, last = recs[0], recs[-1]
    creator, rel = st.pool.creator, v.rel
    threads, workers = pool_size(st.pool), len(st.workers)
    size = max(threads or 0, workers)
    periods, throttled, us = (a - b for a, b in zip(_counts(last) or (0, 0, 0), _counts(first) or (0, 0, 0)))
    on = cgroup_text(path, first)
    name = pool_name({"kind": pool.kind, "sidecar_pid": pool.sidecar_pid, "worker_pids": [q.pid for q in st.workers]})
    sized = f"compile_threads {threads}" if threads is not None else plural(workers, "worker")
    quota = (f"{first['limit']:g} CPU ({first['file']} {first.get('quota_us')} us per {first.get('period_us')} us, "
             f"{on})")
    ready = (f"; the pool became ready {st.ready_at - pool.call.ts:.1f} s after it was made"
             if st.ready_at is not None and st.ready_at > pool.call.ts else "")
    pool_words = f"{creator.role.capitalize()} {creator.pid}'s compile pool ({name}; {sized}) ran inside a CPU quota of"
    throttling = (f"the kernel throttled the cgroup in {throttled} of {periods} periods between "
                  f"{rel(first['ts']) or 0:.1f} s and {rel(last['ts']) or 0:.1f} s, its tasks standing still "
                  f"{us / 1e6:.1f} s in all (summed over CPUs)")
    # compile_threads is the size torch asked for: fewer workers may have started, and the watcher saw these
    of = plural(size, "worker") if workers >= size else f"{size} workers ({workers} seen)"
    text = f"{pool_words} {quota}: a pool sized for {of} for {first['limit']:g} CPU; {throttling}{ready}."
    return Finding(
        "cpu-quota-pool", "warning", text, sorted({creator.pid, *(q.pid for q in st.procs)}),
        [f"cpucg {path}: quota {first['limit']:g} CPU read at {rel(first['ts'])} s; throttled "
         f"{_counts(first)} -> {_counts(last)} (periods, throttled, us) at {rel(last['ts'])} s"],
        QUOTA_ADVICE,
        {"quota_cpus": first["limit"], "pool_size": size, "periods": periods, "throttled_periods": throttled,
         "throttled_s": round(us / 1e6, 3),
         # the creator's wait at exit on this pool stood still in the quota (causes.py: it follows from it)
         **({"exit_wait_throttled": True} if _exit_wait_throttled(st, recs) else {})},
        # the Answer's line: the quota against the pool, and the throttling (the text's clauses cut before it)
        f"{pool_words} {first['limit']:g} CPU ({on}); {throttling}.")
