"""The findings and words that come from the signals the run's traced processes sent (derive/senders.py): an
interrupt that stopped a pool's creator but not the job its pool's worker held, and the creators one process
killed together (docs/evidence.md, "Signals a process sent").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..derive.senders import INTERRUPT
from ..words.fmt import TEXT_PIDS, pid_text
from .base import Finding

if TYPE_CHECKING:
    from ..derive.pools import PoolStory
    from ..derive.senders import Sent
    from ..derive.view import View
    from ..fold.model import JobSpan, Pool, Process

# torch's sidecar and workers ignore SIGINT (compile_worker/subproc_pool.py, _async_compile_initializer): an
# interrupt of the creator stops its wait on the job, never the job.
# A job that ended this soon after the interrupt did not run on (the worker's record lands after the end).
RAN_ON_S = 0.5
INTERRUPT_ADVICE = ("an interrupt stops the wait, not the compile job already in the pool: it runs to its end in "
                    "its worker (which serves nothing else meanwhile); to stop it, end the pool "
                    "(torch._inductor.async_compile.shutdown_compile_workers(): on torch 2.13 it stops the "
                    "workers at once) or restart the process")


def sent_words(sent: Sent, p: Process) -> str:
    """'main 691 signalled its process group 709 (os.killpg at FILE:LINE (func))', or '... sent it (os.kill ...)'."""
    if sent.sender is p:
        return f"it signalled its own process group {sent.group} ({sent.call})" if sent.group is not None else \
            f"it signalled itself ({sent.call})"
    if sent.group is not None:
        return f"{sent.who} signalled its process group {sent.group} ({sent.call})"
    return f"{sent.who} sent it ({sent.call})"


def _held_at(workers: list[Process], t: float) -> list[tuple[Process, JobSpan]]:
    """The jobs the pool's workers held at t (their own job records), with the worker holding each."""
    return [(w, j) for w in workers for j in w.jobs_run
            if j.start <= t and (j.end is None or j.end > t) and w.alive_at(t)]


def _wait_told(creator: Process, t: float) -> bool:
    """A traced call of the creator open at t that the interrupt ended (its error): pool-wait-interrupted and
    pool-job-hang tell that wait and its job, from the call itself."""
    return any(c.ts <= t and c.end is not None and c.end >= t and c.error for c in creator.calls.values())


def interrupted_job(v: View) -> Finding | None:
    """A pool's creator got SIGINT (a traced process's signal record: Jupyter's Interrupt, a Ctrl-C a launcher
    passed on) while a worker of its pool held a job: the job ran on in that worker after the interrupt. Where a
    traced wait of the creator was what the interrupt ended, the findings of that wait tell it (_wait_told)."""
    found: list[tuple[Pool, Sent, Process, JobSpan]] = []
    for pool in v.pools:
        st = v.story(pool)
        for sent in v.endings.senders.reaching(pool.creator, INTERRUPT):
            if _wait_told(pool.creator, sent.ts):
                continue
            found += [(pool, sent, w, j) for w, j in _held_at(st.workers, sent.ts)
                      if (e := j.end if j.end is not None else w.ended_at) is None or e - sent.ts >= RAN_ON_S]
    if not found:
        return None
    pool, sent, worker, job = found[0]
    creator, rel = pool.creator, v.rel
    end = job.end if job.end is not None else worker.ended_at
    until = (f"until {rel(end) or 0:.1f} s ({end - sent.ts:.1f} s after the interrupt)" if job.end is not None
             and end is not None else
             f"until the worker ended at {rel(end) or 0:.1f} s, unfinished" if end is not None else
             "to the end of the log")
    fn = f" ({job.fn})" if job.fn else ""
    new = [q for q in v.story(pool).workers if q.start is not None and end is not None and sent.ts < q.start < end]
    beside = (f"; meanwhile the pool started {len(new)} new worker(s) ({pid_text([q.pid for q in new], TEXT_PIDS)}) "
              f"beside it" if new else "")
    more = f" ({len(found) - 1} more job(s) alike)" if len(found) > 1 else ""
    text = (f"{creator.role.capitalize()} {creator.pid} got SIGINT at {rel(sent.ts) or 0:.1f} s "
            f"({sent_words(sent, creator)}) while compile worker {worker.pid} of its pool held a job{fn}, since "
            f"{rel(job.start) or 0:.1f} s: the job ran on {until}{beside}{more}. torch's pool processes ignore "
            "SIGINT, so the interrupt stopped the wait, not the job.")
    evidence = [f"signal_sent: {sent.who} sent SIGINT at {rel(sent.ts) or 0:.1f} s ({sent.call})",
                f"job: worker {worker.pid} started job {job.work_id} at {rel(job.start) or 0:.1f} s"
                + (f", ended it at {rel(job.end) or 0:.1f} s" if job.end is not None else ", wrote no end")]
    headline = (f"{creator.role.capitalize()} {creator.pid} got SIGINT at {rel(sent.ts) or 0:.1f} s ({sent.who}'s "
                f"{sent.call.split(' at ')[0]}), but the job compile worker {worker.pid} held ran on {until}: torch's "
                "pool processes ignore SIGINT.")
    return Finding("interrupted-job", "warning", text, sorted({creator.pid, *(w.pid for _, _, w, _ in found)}),
                   evidence, INTERRUPT_ADVICE, {"processes": len({id(w) for _, _, w, _ in found})}, headline)


def killed_alike(v: View, creator: Process, others: list[PoolStory]) -> tuple[list[PoolStory], str, str]:
    """Of `others` (pools that outlived their creators too), those whose creator the same process's signal
    ended as it ended `creator`, and the words that count them: (' and 2 more (3217, 3218)', ' (theirs by
    7.6-8.1 s)'); ('', '') where none did."""
    mine = v.endings.of(creator)
    if mine.sender is None:
        return [], "", ""
    alike = [x for x in others if x.orphaned is not None and (e := v.endings.of(x.pool.creator)).sender is
             mine.sender and e.signal == mine.signal]
    if not alike:
        return [], "", ""
    spans = sorted(x.orphaned[1] - x.orphaned[0] for x in alike if x.orphaned is not None)
    by = f"{spans[0]:.1f} s" if spans[-1] - spans[0] < 0.05 else f"{spans[0]:.1f}-{spans[-1]:.1f} s"
    return alike, f" and {len(alike)} more ({pid_text([x.pool.creator.pid for x in alike], TEXT_PIDS)})", \
        f" (theirs by {by})"
