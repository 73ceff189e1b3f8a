"""torch's autotune subprocesses as a pool (model.AUTOTUNE): made by the autotuning process itself, one
subprocess per device (TuningProcess, a Popen of __autotune_main__.py, 2.8+; a spawned Process before), or
AutotuneProcessPool's one spawned worker (2.11+). quack's compile workers (model.QUACK, torch._vendor.quack
2.13+) likewise: each Autotuner._precompile call Popens a pool of them, its handle's shutdown stops it.

Protocol: a TuningProcessPool.__init__ / AutotuneProcessPool.__init__ call makes the pool; a TuningProcess.start
(or initialize, _init_pool) outside such a call, while its process has no autotune pool still open, makes one too
(a TuningProcess used on its own, or one whose pool call is not traced). A pool stays open until a stop call
(TuningProcess.shutdown, TuningProcessPool.shutdown, AutotuneProcessPool._shutdown ...) not inside another:
a kill is no stop (torch starts a new subprocess at the next put). Its members are its creator's children in
the autotune-worker role (quack: quack-worker) started after it was made (finish: autotune_members); its jobs
are the get calls (each one benchmark's wait), and its kills the kill calls that found the subprocess running.
An AutotuneProcessPool's jobs are the ones its warm_up/submit calls handed its worker (handed): their ends are
told by its worker's own job records (runtime/jobs.py: its loop is watched in the role those calls gave it), and
where fewer jobs were recorded than handed (an older log, a worker not traced), by nothing (jobs_unbounded).
"""
from __future__ import annotations

from ...common import targets, vocab
from .model import AUTOTUNE, QUACK, Call, Model, Pool, Process

_OWN_TAGS = (targets.AUTOTUNE_POOL, targets.AUTOTUNE_START, targets.AUTOTUNE_STOP, targets.AUTOTUNE_KILL,
             targets.AUTOTUNE_GET)
# A member starts after its pool's making: allow clock skew (as finish.SIDECAR_START_SLACK_S).
START_SLACK_S = 1.0


def _inside_own(c: Call) -> bool:
    """Is c called from inside another autotune call (TuningProcessPool.__init__ starting its TuningProcesses,
    TuningProcessPool.shutdown stopping them, get's kill)?"""
    q = c.parent
    while q is not None:
        if q.tag in _OWN_TAGS:
            return True
        q = q.parent
    return False


def is_kill(c: Call) -> bool:
    """A TuningProcess.kill call (logs written before it had a tag of its own call it a stop)."""
    return c.tag == targets.AUTOTUNE_KILL or c.target.endswith(KILL_QUALNAME)


KILL_QUALNAME = targets.LABEL_SEP + "TuningProcess.kill"
# AutotuneProcessPool's calls that hand its worker a job and return its future at once: the call's end says
# nothing of the job's (waiting on the future is no traced call); only the worker's own job records do.
WARM_UP_QUALNAME = targets.LABEL_SEP + "AutotuneProcessPool.warm_up"
HAND_QUALNAMES = (WARM_UP_QUALNAME, targets.LABEL_SEP + "AutotuneProcessPool.submit")


def handed(pool: Pool) -> list[Call]:
    """The creator's calls that handed the autotune pool's worker a job while the pool was open, earliest first:
    each submit, and the first warm_up (torch keeps its future: a later one hands nothing); a submit inside a
    warm_up is that warm_up's job (2.14's warm_up hands it so), not another. A call that raised handed none."""
    if pool.kind != AUTOTUNE:
        return []
    stop = pool.shutdown_at if pool.shutdown_at is not None else float("inf")
    calls = sorted((c for c in pool.creator.calls.values() if c.target.endswith(HAND_QUALNAMES)
                    and c.error is None and pool.call.ts <= c.ts <= stop and not _inside_hand(c)),
                   key=lambda c: c.ts)
    warm = next((c for c in calls if c.target.endswith(WARM_UP_QUALNAME)), None)
    return [c for c in calls if c is warm or not c.target.endswith(WARM_UP_QUALNAME)]


def _inside_hand(c: Call) -> bool:
    """Is c called from inside a call that hands the pool a job (2.14's warm_up calls submit)?"""
    q = c.parent
    while q is not None:
        if q.target.endswith(HAND_QUALNAMES):
            return True
        q = q.parent
    return False


def jobs_unbounded(pool: Pool) -> bool:
    """Was the autotune pool handed more jobs (handed) than its workers recorded (job records: each one's start
    and end)? Then a job's end no record bounds, and when its worker was busy, and so idle, is not known."""
    n = len(handed(pool))
    return n > 0 and sum(len(w.jobs_run) for w in pool.members) < n


def open_pool(p: Process, kind: str = AUTOTUNE) -> Pool | None:
    """p's latest autotune (or quack) pool not yet stopped, or None."""
    return next((x for x in reversed(p.pools) if x.kind == kind and x.shutdown_call is None), None)


def on_quack_call(c: Call, model: Model) -> None:
    """quack's precompile makes a pool of compile workers (one per call: each Popens its own); its handle's
    shutdown stops the open one."""
    p = c.proc
    if c.tag == targets.QUACK_PRECOMPILE:
        c.pool = Pool(p, c, QUACK)
        p.pools.append(c.pool)
        model.pools.append(c.pool)
    elif (pool := open_pool(p, QUACK)) is not None:
        pool.shutdown_call, pool.shutdown_at = c, c.ts
        pool.shutdowns = 1
        pool.shutdown_calls += 1


def on_call(c: Call, model: Model) -> None:
    """Fold one autotune call of c.proc: make its pool, or credit the stop, kill or job to the open one."""
    if c.tag in (targets.QUACK_PRECOMPILE, targets.QUACK_SHUTDOWN):
        on_quack_call(c, model)
        return
    p = c.proc
    pool = open_pool(p)
    if c.tag == targets.AUTOTUNE_POOL or (c.tag == targets.AUTOTUNE_START and pool is None and not _inside_own(c)):
        c.pool = Pool(p, c, AUTOTUNE)
        p.pools.append(c.pool)
        model.pools.append(c.pool)
    elif pool is None:
        return
    elif is_kill(c):
        if c.at_call.get("running") is not False:
            pool.kills.append(c)
    elif c.tag == targets.AUTOTUNE_STOP and not _inside_own(c):
        pool.shutdown_call, pool.shutdown_at = c, c.ts
        pool.shutdowns = 1
        pool.shutdown_calls += 1


def autotune_members(m: Model) -> None:
    """Each autotune (quack) pool's members: its creator's autotune-worker (quack-worker) children, each to the
    pool of its kind made last before it started; and an autotune pool's jobs: its creator's get calls while it
    was open (count, first start, last end)."""
    for p in m.processes:
        for kind, role in ((QUACK, vocab.QUACK_WORKER), (AUTOTUNE, vocab.AUTOTUNE_WORKER)):
            of_kind = [x for x in p.pools if x.kind == kind]
            for q in (q for q in p.children if q.role == role) if of_kind else ():
                at = (q.start or 0.0) + START_SLACK_S
                pool = next((x for x in reversed(of_kind) if x.call.ts <= at), None)
                if pool is not None:
                    pool.members.append(q)
        pools = [x for x in p.pools if x.kind == AUTOTUNE]
        if not pools:
            continue
        gets = sorted((c for c in p.calls.values() if c.tag == targets.AUTOTUNE_GET), key=lambda c: c.ts)
        for pool in pools:
            stop = pool.shutdown_at if pool.shutdown_at is not None else float("inf")
            mine = [c for c in gets if pool.call.ts <= c.ts <= stop]
            if mine:
                pool.jobs, pool.first_job = len(mine), mine[0].ts
                pool.last_job = max(c.end if c.end is not None else c.ts for c in mine)
            elif hands := handed(pool):  # counted as a SubprocPool's submits are: first and last handed
                pool.jobs, pool.first_job, pool.last_job = len(hands), hands[0].ts, hands[-1].ts
