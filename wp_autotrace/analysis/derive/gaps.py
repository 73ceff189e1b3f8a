"""A pool's idle stretches between its uses, from the merged spans in which a worker held a job
(derive/busy.busy_spans): the gaps the idle-pool finding counts beside the idle span after the last job."""

from __future__ import annotations

from typing import NamedTuple

# A stretch this long with no job held, inside a pool's life (from its ready to its first job, or between two
# jobs), is told as an idle gap: the compile jobs of one graph come within a second or two of each other (its
# kernels are submitted together), so a gap this long is a pause between compiles (a notebook's next cell, an
# eval between epochs); far from any natural figure of one compile.
IDLE_GAP_S = 10.0


# A ready that is its workers' start is a create_time, whose clock (the kernel's boot time, in whole seconds, plus
# clock ticks) may read up to a second off the log's own: a first job handed that soon after it was handed as it
# started (a real AutotuneProcessPool's worker, spawned inside the warm_up call that handed it its first job, read
# as started 2.6 ms before that call).
START_SKEW_S = 1.0
# The ready probe's worker writes its job's end record after it sends the result, so the record may land after the
# main's ready (12 ms in a CI run): a stretch that begins this soon after the ready begins at it. One that begins
# later begins at a job's end (the creator's first compile, sent as wait_pool_ready returned, can start before the
# probe's end record is written, and its span then merges with the probe's): its first job came before it.
READY_END_LATE_S = 0.5


class IdleGap(NamedTuple):
    """One idle gap inside a pool's life: from (its ready, else a job's end) to (the next job's start), and what
    its processes held over it (MiB·s, the same sum as the idle span's; None where none was read in it)."""
    start: float
    end: float
    first: bool  # from its ready to its first job after it
    mib_s: float | None
    unread_s: float  # of its seconds, those a process of the pool, alive, was not read (the MiB·s counts none)


def idle_gaps(spans: list[tuple[float, float]], ready_at: float | None, end: float,
              queued: float | None = None) -> list[tuple[float, float, bool]]:
    """The stretches of IDLE_GAP_S or more, from ready_at (else the first job's start) to end, in which no job of
    `spans` (busy_spans: merged, earliest first) was held, as (start, end, first: from the ready, no job held
    between them but the ready probe). [] without job records: no other evidence tells when a pool held no job
    between its uses.
    queued: when the pool's first job was submitted, where its ready is its workers' start (no wait_pool_ready
    probe came back); submitted by the time a stretch before that job begins, the job waited on the worker then
    (a spawned worker imports what the job's function needs before it starts it: 12 s under load, FX-subprocess
    compile), which is no idle time."""
    if not spans:
        return []
    out: list[tuple[float, float, bool]] = []
    t = ready_at if ready_at is not None else spans[0][0]
    for i, (a, b) in enumerate(spans):
        if a >= end:
            break
        waited = i == 0 and queued is not None and queued <= t + START_SKEW_S
        if a - t >= IDLE_GAP_S and not waited:  # the ready probe's end record may come after the ready: late
            out.append((t, a, ready_at is not None and t - ready_at <= READY_END_LATE_S))
        t = max(t, b)
    return out
