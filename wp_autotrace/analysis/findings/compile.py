"""A compile whose kernels failed in the pool: the job's error as the compiling process got it, and its cause only
where a record shows it.

A SubprocPool job that raises comes back to the process that sent it as torch's SubprocException ("An exception
occurred in a subprocess: Name=KERNEL Traceback ... <the job's own exception line>"); a compiled module's wait for
its kernels (AsyncCompile.wait) raises the first one it meets. The return record keeps the error's head (the
kernel's name) and its tail (the job's own line: runtime/reads.error_text). The kernel counts every thread of
every process of a uid against RLIMIT_NPROC (`ulimit -u`), which the watcher reads per process (tree entries'
`nproc`, `uid`). What the uid ran at once is counted from the run's records (_uid_peak): every process alive by its
span, with its threads where a memory sweep read them at that moment, else as one. The tasks that meet the limit are
often a job's linker's threads, gone between two sweeps, and the linker's own EAGAIN goes to its stderr: the job's
error names only its exit status. A traced process that an uncaught refused start (EAGAIN) ends counts its uid's
tasks as it exits (process_exit's `uid_tasks`: common/refused.py), its started threads still alive. "The process
limit was reached" where such a process under the pool counted its ulimit -u (_refused_cause), or the job's error
is EAGAIN (a fork or a thread start refused) and one moment's count reached the limit; else the failure with its
own line, and the cause unknown (docs/evidence.md).
"""

from __future__ import annotations

import bisect
import os
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from ...common.refused import says_eagain
from ...common.vocab import JOB_ERROR
from ..words.fmt import cgroup_text, site
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Process

KERNEL_NAME = re.compile(r"Name=([^\s<>]+)")
# An exception's own line: "module.Type: message" or a bare "Type".
OWN_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")
# A limit told beside an error that does not say EAGAIN only within this factor of the most counted at once (a
# floor: threads are read by sweeps a tenth of a second apart at best, and a linker's threads can multiply the
# count between two of them: a /proc reader every 2 ms saw 24 under ulimit -u 24 where the sweeps read 9-11).
NEAR_FACTOR = 4
LIMIT_ADVICE = ("ask for a higher process limit (`ulimit -u`; under SLURM or a container, the job's or the "
                "container's limit), or make fewer workers and threads: TORCHINDUCTOR_COMPILE_THREADS=1 compiles "
                "in the process itself")
# A pids cgroup's limit (a container's): the kernel counts each task (process and thread, root's too) against it.
PIDS_ADVICE = ("raise the task limit of the job's cgroup (podman's or docker's --pids-limit, a pod's pid limit, "
               "systemd's TasksMax; ulimit -u does not lift it), or make fewer workers and threads: "
               "TORCHINDUCTOR_COMPILE_THREADS=1 compiles in the process itself")
UNKNOWN_ADVICE = "read the job's own error line above; rerun with TORCHINDUCTOR_COMPILE_THREADS=1 to see it in-process"
# A job's own line that says a file it read back was gone (a kernel's module read by inspect, as @triton.jit does,
# or a file opened again): what a compile cache shared with other jobs does when one of them wipes it, or on a
# network filesystem. An "if": the record's bound cuts the file's path out of the traceback.
MISSING_MARKS = ("source code not available", "FileNotFoundError", "No such file or directory")
CACHE_ADVICE = ("a file the job read back was gone: if the compile cache is shared with other jobs (one that wipes "
                "it, or TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR on a shared or network filesystem), give each "
                "job its own (TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR per job), and never wipe a cache in use")

# The watcher reads a pids limit's count again as it reads a job's error (a tick after it, as a rule): a count read
# this soon after the failure is told as the one the failure met; later (the watcher far behind the log), the
# refusals cannot be placed before it.
PLACED_WITHIN_S = 2.0

# A job's own line that names no cause of its own: a child's exit status (a compiler's or linker's, whose reason went
# to its stderr, which no record holds).
STATUS_ONLY = ("returned non-zero exit status", "CalledProcessError")


def _says_why(line: str | None) -> bool:
    """Whether the job's own line names a cause of its own (not only a child's exit status)."""
    return bool(line) and not any(mark in (line or "") for mark in STATUS_ONLY)


def own_line(error: str) -> str | None:
    """The job's own exception line: the error's last line that reads as one, or None (an old record cut before
    it)."""
    lines = [x.strip() for x in error.splitlines() if x.strip()]  # a cut in the middle leaves the last line whole
    return lines[-1] if lines and OWN_LINE.match(lines[-1]) else None


def _failed_calls(v: View) -> list[Call]:
    """Per process, its traced calls that raised a pool job's error, outermost left out (a call whose traced
    child raised the same text says nothing more)."""
    failed = [c for c in v.calls if c.error and c.error.startswith(JOB_ERROR)]
    inner_parents = {id(c.parent) for c in failed if c.parent is not None and c.parent.error == c.error}
    return [c for c in failed if id(c) not in inner_parents]


def _uid_of(p: Process) -> int | None:
    """p's uid as the watcher read it (its tree entry), else its nearest ancestor's: a fork and an exec keep the
    uid (a setuid program, which the log would not show, aside), so a compiler the tree never listed is its
    worker's user's."""
    q: Process | None = p
    for _ in range(64):  # up the tree, bounded
        if q is None:
            return None
        if q.nproc is not None:
            return q.nproc[1]
        q = q.parent
    return None


def _uid_peak(v: View, uid: int, host: str, since: float, until: float) -> tuple[int, float | None, int]:
    """The most tasks (processes and threads) of uid on host the run's records show alive at one moment between
    since and until: (count, when, processes counted as one thread then). RLIMIT_NPROC counts one host's tasks:
    another node's processes of the uid (a multi-node job's logs read together) are not counted. A process is
    alive by its span (process_start or the tree's join, to its end as every reader takes it: Process.ended_at, so
    a zombie still counts, as the kernel counts it until reaped), read or not; a memory sweep's reading gives its
    threads at that moment, and a process no sweep read then counts as one (it runs at least its main thread). So
    a 0.3 s worker and its linkers that no sweep read still count (a sweep-only count saw 2 processes where 6 were
    alive under ulimit -u 24). Moments: each start of such a process, and each sweep. The count is a floor of the
    moment's tasks where some were counted as one; a process whose end no record shows counts until its own run's
    last record (the most a record shows of it)."""
    mine = [p for p in v.procs if p.host == host and _uid_of(p) == uid]
    starts = sorted(p.start for p in mine if p.start is not None)
    # a process whose end no record shows counts until its run's last record: an earlier run killed with its
    # watcher (no exit, no tree end) is in no record after that, and its processes are not counted beside a later one
    ends = sorted(e for p in mine if (e := p.ended_at if p.ended_at is not None or p.run is None else p.run.end)
                  is not None)
    unknown = sum(p.start is None for p in mine)  # alive from before the log began
    read: dict[float, list[tuple[Process, int]]] = {}
    for p in mine:
        for ts, n in p.threads.items():
            if since <= ts <= until:
                read.setdefault(ts, []).append((p, n))
    moments = sorted({since, *(t for t in starts if since <= t <= until), *read})
    best: tuple[int, float | None, int] = (0, None, 0)
    for t in moments:
        alive = unknown + bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t)
        swept = read.get(t, [])
        spanned = sum(p.alive_at(t) for p, _ in swept)
        count = alive + sum(n for _, n in swept) - spanned
        if count > best[0]:
            best = (count, t, alive - spanned)
    return best


def _limited(v: View, creator: Process) -> tuple[int, int] | None:
    """(ulimit -u, uid) of the pool's processes: its creator's, or the first of its pools' processes read."""
    if creator.nproc is not None:
        return creator.nproc
    for pool in v.pools:
        if pool.creator is creator:
            for p in v.story(pool).procs:
                if p.nproc is not None:
                    return p.nproc
    return None


class Pids(NamedTuple):
    """What a pids cgroup's records say of its limit beside a failed job: `words` (the limit, and the refusals in the
    window the records place), `placed`: "before" (counted by the read made as the watcher read the job's error),
    "after" (none by then, some by the watcher's end), "unknown" (no read between the join's and the end's)."""

    words: str
    limit: int
    refused: int
    placed: str


# A pidcg record's counts of refusals: pids.events max at the limit's cgroup, and (v2, a limit set above the
# process's own cgroup) at its own, where kernels before Linux 6.13 count them (watcher/cgroups.py)
COUNT_KEYS = ("refused", "refused_own")


def _rise(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, str] | None:
    """The larger rise of a pidcg's counts from its record a to its record b, and that count's field (`refused`
    where both rise alike: 6.13+ may count one refusal in both, so never their sum); None where b did not read
    every count a did (or a none)."""
    keys = [k for k in COUNT_KEYS if isinstance(a.get(k), int)]
    if not keys or not all(isinstance(b.get(k), int) for k in keys):
        return None
    return max(((b[k] - a[k], k) for k in keys), key=lambda rise: rise[0])


def _count_words(key: str, path: str, counts: str) -> str:
    """The pids.events counts read, named where they are the process's own cgroup's."""
    if key == "refused":
        return f"pids.events max {counts}"
    return (f"pids.events max {counts} in its own {path}: before Linux 6.13 the kernel counts a refusal in the "
            "forking task's cgroup, not the limit's")


def _pids_refused(v: View, creator: Process, failed: float) -> Pids | None:
    """The first pids cgroup of the compiling process or of its pools' processes with a limit whose kernel count of
    refused forks and thread starts rose between the watcher's reads of it (its pidcg records: as the first process
    in it joined, `after` as the watcher read a job's error, `final` at its end; the larger rise of its counts,
    _rise), placed against the failure raised at `failed` (Unix seconds); None where none rose, or the cgroup was
    first read only after the failure."""
    procs = [creator] + [q for pool in v.pools if pool.creator is creator for q in v.story(pool).procs]
    # each process's own run's records: another traced program in the same cgroup (one log, one container) is
    # another run, and its refusals are not this one's
    for run, host, path in dict.fromkeys((q.run, q.host, q.pidcg) for q in procs if q.pidcg is not None):
        recs = run.pidcgs.get((host, path or ""), []) if run is not None else []
        first, last = (recs[0], recs[-1]) if recs else ({}, {})
        total = _rise(first, last)
        # the last read: the watcher's end (`final`), or the one as it read the job's error where no end was written
        if not (isinstance(first.get("limit"), int) and (last.get("final") is True or isinstance(
                last.get("after"), float)) and total is not None and total[0] > 0 and first["ts"] <= failed):
            continue
        on = cgroup_text(path, first)
        limit = (f"pids.max {first['limit']} ({on}; each process and each thread in it counts, root's too, the "
                 "run's or not)")
        # the last count read as the watcher read a job's error, no later than PLACED_WITHIN_S after this failure
        read = next((r for r in reversed(recs) if isinstance(r.get("after"), float)
                     and _rise(first, r) is not None and r["ts"] - failed <= PLACED_WITHIN_S), None)
        early = _rise(first, read) if read is not None else None
        a, f, b = (f"{v.rel(t) or 0:.1f} s" for t in (first["ts"], failed, last["ts"]))
        if read is not None and early is not None and early[0] > 0:  # counted by the time the failure was read
            (k, key), r = early, f"{v.rel(read['ts']) or 0:.1f} s"
            return Pids(f"the task limit of its cgroup was reached: {limit}; the kernel refused {k} fork(s) or "
                        f"thread start(s) there between {a} and {r}, as the watcher read the failure raised at {f} "
                        f"({_count_words(key, str(path), f'{first[key]} -> {read[key]}')})", first["limit"], k,
                        "before")
        rise, key = total
        if read is not None and read["ts"] >= failed:  # none by the time the failure was read: all after it
            r = f"{v.rel(read['ts']) or 0:.1f} s"
            counts = f"{first[key]} -> {read[key]} -> {last[key]}"
            return Pids(f"the task limit of its cgroup was reached only after the failure: {limit}; the kernel "
                        f"refused none there between {a} and {r}, as the watcher read the failure raised at {f}, "
                        f"and {rise} by its end at {b} ({_count_words(key, str(path), counts)})", first["limit"],
                        rise, "after")
        return Pids(f"the task limit of its cgroup was reached in the run: {limit}; the kernel refused "
                    f"{rise} fork(s) or thread start(s) there between {a} and {b} "
                    f"({_count_words(key, str(path), f'{first[key]} -> {last[key]}')}); the failure was raised at "
                    f"{f}, with no count read in between", first["limit"], rise, "unknown")
    return None


def _refused_under(v: View, creator: Process, failed: float) -> Process | None:
    """The first process under `creator` (its pools' workers, the compilers and linkers their jobs ran) that an
    uncaught EAGAIN ended, by its own exit record with its uid's tasks counted then (Process.refused), no later
    than the failure raised at `failed`: the refusal under a job whose own line names only a child's exit
    status. A process of another host or run is not under it."""
    def under(q: Process) -> bool:
        a = q.parent
        for _ in range(64):  # up the tree, bounded
            if a is None:
                return False
            if a is creator:
                return True
            a = a.parent
        return False

    ended = [q for q in v.procs if q.refused is not None and q.host == creator.host and q.end is not None
             and q.end <= failed and under(q)]
    return min(ended, key=lambda q: q.end or 0.0, default=None)


def _refused_cause(v: View, q: Process, limit: tuple[int, int] | None) -> tuple[str, str]:
    """(cause, advice) from a refused task start's own count (_refused_under): "reached" where the uid's tasks it
    counted as it exited reached its own ulimit -u (else the watcher's read of it) and the uid is not root's (the
    kernel exempts root outside a user namespace, which the log does not say); else the refusal with its count,
    the limit only a possibility."""
    r = q.refused or {}
    n = r.get("nproc", limit[0] if limit else None)
    uid, tasks = r.get("uid"), r.get("uid_tasks", 0)
    parent = f", which {q.parent.role} {q.parent.pid} started" if q.parent is not None else ""
    program = os.path.basename(q.argv[0]) if q.argv else (q.name or "a program")
    error = str(r.get("error") or "an uncaught exception")
    ended = (f"{q.role} {q.pid} ({program}{parent}) ended by {own_line(error) or error} at "
             f"{v.rel(q.end) or 0:.1f} s, a thread or process start refused (EAGAIN), with {tasks} processes "
             f"and threads of uid {uid} alive on the host as it ended")
    if n is not None and tasks >= n and uid != 0:
        return f"the process limit (ulimit -u {n}) was reached: {ended}", LIMIT_ADVICE
    under_n = f"its processes ran under ulimit -u {n}, and " if n is not None else ""
    root = " (root's processes are held to it only inside a user namespace)" if uid == 0 else ""
    return (f"{under_n}{ended}{root}: whether the limit was reached, no record shows",
            f"if the process limit caused it: {LIMIT_ADVICE}")


def _limit_cause(v: View, first: Call, line: str | None, limit: tuple[int, int] | None,
                 eagain: bool) -> tuple[str, str]:
    """(cause, advice) of a failed compile where the process limit may be why: a task start refused under the
    failure (_refused_under: a job's linker or compiler that counted its uid's tasks at the limit) first, else the
    job's own EAGAIN against the records' count at one moment (_uid_peak), else unknown (module docstring)."""
    p = first.proc
    refused = _refused_under(v, p, first.end or first.ts) if eagain or not _says_why(line) else None
    if refused is not None:
        return _refused_cause(v, refused, limit)
    cause, advice = "no record shows why the job failed", UNKNOWN_ADVICE
    if limit is not None:
        n, uid = limit
        since = min((pool.call.ts for pool in v.pools if pool.creator is p), default=first.ts)
        count_at, at, ones = _uid_peak(v, uid, p.host, since, first.end or first.ts)
        when = f" at {v.rel(at) or 0:.1f} s" if at else ""
        seen = f"{count_at} processes and threads of uid {uid} at once{when}"
        # The kernel exempts root (uid 0 outside a user namespace, which the log does not say) from the limit:
        # its EAGAIN there is another refusal's (a cgroup's pids.max), so the limit is only a possibility.
        if eagain and count_at >= n and uid != 0:
            cause, advice = f"the process limit (ulimit -u {n}) was reached: {seen}", LIMIT_ADVICE
        elif not eagain and count_at * NEAR_FACTOR < n:
            pass  # far above anything counted: no cause, and beside the job's own line only noise
        else:
            root = "; root's processes are held to it only inside a user namespace" if uid == 0 else ""
            # a floor where some process's threads were not read at that moment: each counted as its one thread
            ones_said = (f" ({ones} of them processes counted as one thread each: no sweep read their threads "
                         "then)") if ones else ""
            # a refused thread start (EAGAIN), or a line that names no cause of its own (a linker's exit status:
            # its own "Resource temporarily unavailable" went to its stderr): the limit may be why
            unsure = eagain or not _says_why(line)
            unsure_said = ": whether the limit was reached, no record shows" if unsure else ""
            cause = (f"{cause} (its processes ran under ulimit -u {n}; its records show at least {count_at} "
                     f"processes and threads of uid {uid} alive at once{when}{ones_said}{root}{unsure_said})")
            if eagain and count_at >= n:
                advice = f"if the process limit caused it: {LIMIT_ADVICE}"
    return cause, advice


def compile_failed(v: View) -> Finding | None:
    """Kernels whose compile job failed in the pool: how many the records name, the job's own line, and the
    process limit where the records show it reached (module docstring)."""
    failed = _failed_calls(v)
    if not failed:
        return None
    first = min(failed, key=lambda c: c.ts)
    p, error = first.proc, first.error or ""
    kernels = sorted({m.group(1) for c in failed if (m := KERNEL_NAME.search(c.error or ""))})
    line = own_line(error)
    named = f" ({', '.join(kernels[:4])}{' ...' if len(kernels) > 4 else ''})" if kernels else ""
    count = max(len(kernels), len({(c.proc.index, c.error) for c in failed}))
    raised = v.rel(first.end or first.ts) or 0.0
    what = (f"{count} kernel{'s' if count > 1 else ''}{named} failed to compile in the pool: {p.role} {p.pid}'s "
            f"{first.target.rsplit(':', 1)[-1]}() at {site(first.caller)} raised at {raised:.1f} s in (it stops at "
            "the first failed kernel: others may have failed too)")
    said = f"the job's own error: {line.rstrip('.')}" if line else "the job's own error line is not in the record"
    limit = _limited(v, p)
    eagain = says_eagain(error)
    cause, advice = _limit_cause(v, first, line, limit, eagain)
    pids = _pids_refused(v, p, first.end or first.ts)
    if pids is not None and pids.placed == "after":  # the refusals came after the failure: not its cause
        cause = f"{cause}; {pids.words}"
    elif pids is not None and _says_why(line) and not eagain:  # the job's line names a cause of its own
        cause = f"{pids.words}, though the job's own line names a cause of its own: whether the limit caused this " \
                "failure, no record shows"
    elif pids is not None and pids.placed == "before":
        # the kernel's own count of refusals by the time the failure was read: the limit was reached, whatever
        # ulimit -u says, and the job's own line names no other cause (a refused fork's EAGAIN, or only a child's
        # exit status)
        cause, advice = pids.words, PIDS_ADVICE
    elif pids is not None:  # only the end's count: the refusals may all have come after the failure
        cause, advice = f"{pids.words}: whether the limit caused it, no record shows", \
            f"if the task limit caused it: {PIDS_ADVICE}"
    if advice == UNKNOWN_ADVICE and line and any(mark in line for mark in MISSING_MARKS):
        advice = CACHE_ADVICE
    text = f"{what}; {said}; {cause}."
    return Finding("compile-failed", "problem", text, sorted({c.proc.pid for c in failed}),
                   [f"{c.proc.role} {c.proc.pid} {c.target}: {c.error}" for c in failed[:3]], advice,
                   {"kernels_failed": count, "jobs_lost": count, "kernels": kernels, "error_line": line,
                    "nproc_limit": limit[0] if limit else None, "uid": limit[1] if limit else None,
                    "limit_reached": cause.startswith(("the process limit", "the task limit")),
                    **({"pids_max": pids.limit, "pids_refused": pids.refused, "pids_placed": pids.placed}
                       if pids else {})},
                   headline=text)  # whole in the Answer: the job's own line and the cause are what the user asked
