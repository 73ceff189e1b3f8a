"""After the last record: links, pool credits, ends and each run's root (the end of fold.Builder's fold).

Also the crediting of a pool's calls to their pool, which the visits of `return` records use too.
"""

from __future__ import annotations

from typing import Callable

from ...common import targets, vocab
from ...common.vocab import BOOTSTRAPPING_ERROR, SIDECAR_ROLES, SPAWNED_ARG
from .autotune import autotune_members
from .identities import Registry
from .model import CREATE_ROUNDING_S, EXECUTOR, LEFT_THEN_ENDED, Call, Model, Pool, Process, Run, Waited, exec_name
from .nspids import named, sidecars_on_host, workers_on_host
from .pace import Pace
from .pidns import merge_namespaced

# A sidecar starts after the pool-create call that makes it; allow clock skew.
SIDECAR_START_SLACK_S = 1.0

# The tags of the calls credit_pool counts (fold.py calls it for these only: every return passes there).
POOL_COUNTS = {targets.POOL_WAKEUP: "wakeups", targets.POOL_QUIESCE: "quiesces", targets.POOL_SHUTDOWN: "shutdowns"}


# The counted (COUNT-mode) labels that are a pool's jobs: process_exit's counts are keyed by label.
_SUBMIT = {t.label: True for t in targets.TARGETS if t.tag == targets.POOL_SUBMIT}


def credit_pool(c: Call) -> None:
    """Count a wakeup/quiesce/shutdown for its own pool: by the sidecar pid it
    captured, else the caller's latest pool still open."""
    field = POOL_COUNTS.get(c.tag)
    if field is None:
        return
    p = c.proc
    sidecar = c.ret.get("sidecar_pid")
    pool = p.pool_by_sidecar.get(sidecar) if sidecar is not None else None
    pool = pool or p.open_pool or (p.pools[-1] if p.pools else None)
    if pool is None:
        return
    if c.tag == targets.POOL_SHUTDOWN:
        pool.shutdown_calls += 1
        if pool.shutdown_call is None or c.ts < pool.shutdown_call.ts:
            pool.shutdown_call = c
        pool.shutdowns = 1
        pool.shutdown_at = pool.shutdown_call.ts
        if pool is p.open_pool:
            p.open_pool = None
        return
    if c.tag == targets.POOL_QUIESCE:
        pool.quiesce_calls.append(c)
    setattr(pool, field, getattr(pool, field) + 1)

def finish(reg: Registry) -> None:
    """After the last record: one process for one seen under two pids (pidns.py), parents and children, runs for
    the unclaimed, pools, ends, depths, roots, waits."""
    merge_namespaced(reg)
    m = reg.model
    if m.processes or m.runs:
        times = [r.start for r in m.runs.values() if r.start is not None]
        ends = [r.end for r in m.runs.values() if r.end is not None]
        m.t0 = min(times) if times else 0.0
        m.t_end = max(ends) if ends else m.t0
    orphan = None
    for p in m.processes:
        if p.parent is None and p.ppid is not None and p.ppid != p.pid:
            p.parent = parent_at_start(reg, p)
        if p.parent is not None:
            p.parent.children.append(p)
        if p.run is None:
            run = p.parent.run if p.parent is not None and p.parent.run is not None else None
            if run is None:
                orphan = orphan or reg.run("")
                run = orphan
            reg.join(p, run)
    finish_pools(reg)
    finish_ends(reg)
    _set_depths(m.processes)
    for run in m.runs.values():
        finish_run(run)
    match_waits(reg)

def parent_at_start(reg: Registry, p: Process) -> Process | None:
    """p's parent, looked up after the last record: the process of its ppid that had started by p's start (create
    times are rounded: CREATE_ROUNDING_S), the latest started of them (an earlier one had ended for the pid to be
    taken again). The latest process of the pid, then, may be one that took it after p started: never p's
    parent. Only a create time says when a process started (a process known only from a record that came before
    its process_start, in a log out of order, has none: its first record is no start); where no process of the
    pid has one by then, or p's start is unknown, that latest one."""
    best: Process | None = None
    if p.start is not None and p.ppid is not None:
        by = p.start + CREATE_ROUNDING_S
        for q in reg.all_by_pid.get((p.host, p.ppid), ()):
            born = q.create_time
            if q is not p and born is not None and born <= by and (best is None or born >= (best.create_time or 0)):
                best = q
    if best is not None:
        return best
    latest = reg.current.get((p.host, p.ppid)) if p.ppid is not None else None
    return latest if latest is not p else None


def finish_pools(reg: Registry) -> None:
    workers_on_host(reg)
    executor_members(reg.model)
    spawned_members(reg.model)
    autotune_members(reg.model)
    for pool in reg.model.pools:
        if pool.sidecar_pid is None:
            continue
        candidates = named(reg, pool.creator, pool.sidecar_pid)
        after = pool.call.ts - SIDECAR_START_SLACK_S
        pool.sidecar = next((q for q in candidates if (q.start or 0.0) >= after),
                            candidates[-1] if candidates else None)
    sidecars_on_host(reg)
    for c in reg.model.of_tags(*POOL_COUNTS):  # calls that never returned still count for their pool
        if c.end is None and not c.blocked:
            credit_pool(c)
    for p in reg.model.processes:
        if p.pools and p.count_times:
            _credit_jobs(p)

def finish_ends(reg: Registry) -> None:
    """A process with no process_exit ends when the watcher first missed it."""
    in_leftover = {p for run in reg.model.runs.values() for p in run.leftover}
    for p in reg.model.processes:
        if p.role == "":
            p.role = vocab.CHILD
        if p.end is None and p.gone is not None and p.exec_into is not None:
            p.end = p.gone  # it became another program; the watcher saw that one end
            p.exit_how = f"exec'd into {exec_name(p.exec_into)}"
        elif p.end is None and p.gone is not None and p not in in_leftover:
            p.end = p.gone
            p.exit_how = p.exit_how or "vanished"
        elif p.end is None and p.gone is not None:
            # Left behind, and the watcher saw it end later (killed, or it finished): not still running.
            p.end = p.gone
            p.exit_how = p.exit_how or LEFT_THEN_ENDED

def finish_run(run: Run) -> None:
    mains = [p for p in run.processes if p.role == "main"]
    by_pid = [p for p in mains if p.pid == run.root_pid]
    run.root = by_pid[0] if by_pid else mains[0] if mains else None
    if run.root is not None and run.root_pid is None:
        run.root_pid = run.root.pid
    settle_leftovers(run)
    listed = len(run.leftover)
    if run.leftover_count > listed:
        run.cut.append(f"leftover: {listed} of {run.leftover_count} processes listed")
    run.pace = Pace(run.processes)
    run.stale_s = run.pace.run_window


# The main's end as seen (the watcher's pidfd or listing) comes up to a look after its kill: a sidecar's own exit
# record written just after the kill can precede it (0.01 s in a CI run); one written seconds before the main's end
# was written while the main lived, and is no ending with it.
MAIN_SEEN_LATE_S = 1.0


def settle_leftovers(run: Run) -> None:
    """Move out of run.leftover (into run.ended_soon) each process whose end came within vocab.LEFTOVER_ENDED_S of
    the main process's end (Process.ended_at), a moment after the verdict's grace: it was ending with the main, not
    left running. Two records show that end. A signal a traced process of the run sent it (torch's worker watchdog
    on 2.1-2.9 SIGKILLs its own worker within its 1 s poll), with the end seen that soon. Or its own process_exit
    written that soon (its exit handlers ran: it ended by itself; torch 2.13's orphaned sidecar reads the end of
    its pipe, stops its workers and returns from main() a moment after its main is killed), with the end seen
    within vocab.LEFTOVER_TEARDOWN_S of that record: the interpreter's teardown after it (the sidecar's: 1.6-2.7 s
    on an idle host, up to 5.4 s on a loaded one, docs/verdict.md) still runs finalizers and daemon threads, so one
    that lingers longer, or whose record came before the main's end (more than MAIN_SEEN_LATE_S: it then hung), stays
    left running. Or, third, a signal to the main's process group: its wait status (its zombie's, as the watcher
    read it) and the main's (its zombie's, or `run`'s waited status) name the same signal, and it was in the main's
    process group (a CI step's `timeout` SIGTERMs the group; on a loaded host a member dies a look after the main).
    The watcher's "gone" alone is not
    enough: `cleanup` or a runner ending a leftover a second later leaves no record of its own. A process with no
    end in the log stays a leftover: its end is never assumed."""
    main_end = run.root.ended_at if run.root is not None else None
    if main_end is None:
        return
    # by host too: a namespace's sender (joined to no host process) names its target by the namespace's pid
    signalled = {(q.host, s.get("target")) for q in run.processes for s in q.sent if not s.get("error")}
    root = run.root
    assert root is not None
    waited = run.waited.status if run.waited is not None else None
    main_sig = -waited if isinstance(waited, int) and waited < 0 else _killed_by(root)

    def soon(p: Process) -> bool:
        end = p.ended_at
        if end is None:
            return False
        if (p.exited and p.end is not None and p.gone is not None
                and -MAIN_SEEN_LATE_S <= p.end - main_end <= vocab.LEFTOVER_ENDED_S
                and end - p.end <= vocab.LEFTOVER_TEARDOWN_S):
            return True  # its own exit record after the main's end, and seen gone soon after it: it ended with it
        if (main_sig is not None and p.pgid is not None and p.pgid == root.pgid and _killed_by(p) == main_sig
                and end - main_end <= vocab.LEFTOVER_ENDED_S):
            return True  # the signal to the main's group ended it too, a moment later
        return (p.host, p.pid) in signalled and end - main_end <= vocab.LEFTOVER_ENDED_S

    ended = {p: entry for p, entry in run.leftover.items() if soon(p)}
    for p in ended:
        del run.leftover[p]
    run.ended_soon.update(ended)
    # the verdict's count names them too; an unlisted rest (a cut list) stays counted
    run.leftover_count = max(run.leftover_count - len(ended), len(run.leftover))


def _killed_by(p: Process) -> int | None:
    """The signal that ended p, as its wait status (its zombie's, read by the watcher) holds it; None where no
    status was read or p exited."""
    status = p.zombie.get("status") if p.zombie is not None else None
    return status & 0x7F or None if isinstance(status, int) else None


def _started(r: Run) -> float:
    """When r began: its main's start (an exec'd main's is its create time), else its first record's time."""
    root = r.root
    return root.start if root is not None and root.start is not None else r.start or 0.0


class _ByRoot:
    """Runs (each with a root) keyed by one number of their root, its pid or its ppid, and its host, each list in
    the runs' order: a lookup reads the runs that share that number, not every run (a log of thousands of runs
    made each record's lookup a walk over all of them)."""

    def __init__(self, runs: list[Run], number: Callable[[Process], object]) -> None:
        self.on_host: dict[tuple[object, str], list[Run]] = {}
        self.any_host: dict[object, list[Run]] = {}
        for r in runs:
            if r.root is not None:
                self.on_host.setdefault((number(r.root), r.root.host), []).append(r)
                self.any_host.setdefault(number(r.root), []).append(r)

    def on(self, number: object, host: str) -> list[Run]:
        """The runs whose root has that number on that host."""
        return self.on_host.get((number, host)) or []

    def named(self, number: object, host: str) -> list[Run]:
        """As on(), for a record's host: one that names none ("") matches a root on any host."""
        return self.any_host.get(number) or [] if host == "" else self.on(number, host)


def match_waits(reg: Registry) -> None:
    """`run`'s waited status (reg.waited: the program it just ran) and its run_exit records, each to one run:
    the run whose main process had that pid on that host and started last before it. Pid and host alone
    are not a process: a restarted container's main gets the pid of an earlier run's main, whose run_exit
    is not the later one's ending (docs/evidence.md)."""
    runs = [r for r in reg.model.runs.values() if r.root is not None]
    by_pid = _ByRoot(runs, lambda root: root.pid)
    by_ppid = _ByRoot(runs, lambda root: root.ppid)

    def owner(pid: object, host: str, ts: float) -> Run | None:
        return max((r for r in by_pid.named(pid, host) if _started(r) <= ts), key=_started, default=None)

    waited = reg.waited
    if waited is not None and (run := owner(waited.pid, waited.host, float("inf"))) is not None:
        run.waited = waited
    for rec in reg.run_exits:  # in log order: a later record of one run wins
        if isinstance(rec.get("status"), int) and (run := owner(rec.get("root_pid"), rec["host"], rec["ts"])):
            run.run_exit = rec
    for run in runs:
        seen = run.run_exit
        if seen is not None and run.waited is None and run.root is not None:
            run.waited = Waited(run.root.pid, seen["status"], tuple(seen.get("forwarded") or ()), run.root.host)
    # a command that is no traced root (`run -- bash train.sh`): its Python steps' roots are its children, each a
    # run of its own; the first record after a step's start is its command's (a pid reused later is another's)
    owned = {id(r.run_exit) for r in runs if r.run_exit is not None}
    for rec in reg.run_exits:
        if isinstance(rec.get("status"), int) and id(rec) not in owned:
            for run in by_ppid.named(rec.get("root_pid"), rec["host"]):
                if run.command_exit is None and _started(run) <= rec["ts"]:
                    run.command_exit = run.launch = rec
    _namespace_mains(reg, runs, owned)
    # a script whose last step is exec'd (`bash -c "python STEP; exec python LAST"`): the exec'd step is the root
    # run waited for, its create time the shell's; the steps before it were that shell's children, each a run of its
    # own, started in the root's life (a traced root's own children are of its run): one launch
    for owner_run in runs:
        owned_by, root = owner_run.run_exit, owner_run.root
        if owned_by is None or root is None:
            continue
        end = root.ended_at if root.ended_at is not None else owned_by["ts"]
        steps = [r for r in by_ppid.on(root.pid, root.host) if r is not owner_run and r.launch is None
                 and _started(owner_run) <= _started(r) <= end]
        for run in (owner_run, *steps) if steps else ():
            run.launch = owned_by


def _namespace_mains(reg: Registry, runs: list[Run], owned: set[int]) -> None:
    """A command whose Python main is the first process of a pid namespace of its own (`run -- unshare -p -f
    python ...`, a container runtime's init): the main's records say pid 1, ppid 0 (its parent is outside that
    namespace), and no pid of the log names the command run waited for. Such mains whose first record came within
    the command's life (run_exit's since .. its ts, run's own clock reads) on its host are its steps, as a shell's
    Python children are: the command's status is told, never as the main's own code. The time is all that joins
    them: a main within the lives of two such commands (two `run`s at once on one log) is joined to neither."""
    recs = [rec for rec in reg.run_exits if isinstance(rec.get("status"), int) and id(rec) not in owned
            and isinstance(rec.get("since"), (int, float)) and not any(r.launch is rec for r in runs)]
    for run in runs:
        root = run.root
        if root is None or root.ppid != 0 or run.launch is not None or run.run_exit is not None:
            continue
        host, start = reg.real_host.get(root.host, root.host), run.start or 0.0
        during = [rec for rec in recs if rec["host"] == host and rec["since"] <= start <= rec["ts"]]
        if len(during) == 1:
            run.command_exit = run.launch = during[0]


def executor_members(m: Model) -> None:
    """Each fork/spawn pool's workers: the compile workers its creator started (torch's initializer ran in them:
    their `role` records) and the workers it named as it started them (Process.compile_workers: one killed while it
    imported never wrote its role), each to the creator's executor pool made last before it started. A compile
    worker with no such pool (torch 2.1-2.7 builds its ProcessPoolExecutor with no TrackedProcessPoolExecutor call
    to mark it) makes one from its creator's last AsyncCompile.process_pool call before it: the workers are the
    evidence. A sidecar's workers are its SubprocPool's, not an executor's."""
    made = False
    for p in m.processes:
        workers = p.compile_workers()
        if not workers or p.role in SIDECAR_ROLES:
            continue
        for q in sorted(workers, key=lambda q: q.start or 0.0):
            at = (q.start or 0.0) + SIDECAR_START_SLACK_S
            pool = next((x for x in reversed(p.pools) if x.kind == EXECUTOR and x.call.ts <= at), None)
            if pool is None:
                call = max((c for c in p.calls.values() if c.tag == targets.PROCESS_POOL and c.ts <= at),
                           key=lambda c: c.ts, default=None)
                if call is None or call.pool is not None:
                    continue
                pool = call.pool = Pool(p, call, EXECUTOR)
                p.pools.append(pool)
                m.pools.append(pool)
                made = True
            pool.members.append(q)
    if made:
        m.pools.sort(key=lambda x: x.call.ts)
        for p in m.processes:
            p.pools.sort(key=lambda x: x.call.ts)


def spawned_members(m: Model) -> None:
    """A spawn pool's worker that died as it started (before torch's initializer ran in it, so no compile worker
    by its role: an unguarded main script re-imported there raised) is still its pool's: a spawned child
    (SPAWNED_ARG) its creator started inside the call that made the pool. And a pool whose making started no
    process and raised (a spawned child re-running the script: multiprocessing refuses to start processes while
    the child bootstraps), or that never started one (_never_started), was an attempt, not a pool: no `ps` line
    was ever of it, so it is dropped, its calls kept."""
    dropped = []
    for pool in m.pools:
        if pool.kind != EXECUTOR or pool.members:
            continue
        outer = pool.call.outermost()
        started = [q for q in pool.creator.children if q.start is not None
                   and q.start >= outer.ts - CREATE_ROUNDING_S and (outer.end is None or q.start <= outer.end)]
        pool.members.extend(q for q in started if SPAWNED_ARG in q.argv)
        if not started and outer.end is not None and (outer.error or _never_started(pool, outer)):
            dropped.append(pool)
    for pool in dropped:
        m.pools.remove(pool)
        pool.creator.pools.remove(pool)
        pool.call.pool = None


def _never_started(pool: Pool, outer: Call) -> bool:
    """Whether a pool the re-imported main script made in a spawned child never started a process: an executor
    starts its workers at its first job, not as it is made, so its making returned; multiprocessing refused to
    start any process in that child (a call of it raised the bootstrapping RuntimeError: its own start had not
    finished), and no process that child started from the making on was seen."""
    creator = pool.creator
    if not pool.call.mp_main:
        return False
    refused = any(c.error and BOOTSTRAPPING_ERROR in c.error for c in creator.calls.values())
    return refused and not any(q.start is None or q.start >= outer.ts - CREATE_ROUNDING_S for q in creator.children)


def _credit_jobs(p: Process) -> None:
    """A process's counted submits (count, first, last) to its pools: the first job to the pool made
    last before it, the last job likewise; the count only when the process made one pool."""
    times = [t for label, t in p.count_times.items() if _SUBMIT.get(label) and len(t) == 2]
    if not times:
        return
    first, last = min(t[0] for t in times), max(t[1] for t in times)
    count = sum(n for label, n in p.counts.items() if _SUBMIT.get(label))

    def made_before(ts: float) -> Pool:
        return next((pool for pool in reversed(p.pools) if pool.call.ts <= ts), p.pools[0])

    made_before(first).first_job = first
    made_before(last).last_job = last
    if len(p.pools) == 1:
        p.pools[0].jobs = count


def _set_depths(processes: list[Process]) -> None:
    """Sidecars on the path from the root down to each process, itself included: linear, memoised."""
    done: set[int] = set()
    for p in processes:
        chain: list[Process] = []
        on_chain: set[int] = set()
        q: Process | None = p
        while q is not None and q.index not in done and q.index not in on_chain:
            chain.append(q)
            on_chain.add(q.index)
            q = q.parent
        base = q.depth if q is not None and q.index in done else 0
        for x in reversed(chain):
            base += x.role in SIDECAR_ROLES
            x.depth = base
            done.add(x.index)
