"""The finding of the signals the watcher itself was sent (watcher_signal records, watcher/signals.py): a
scheduler ending the job step signals every process of the step, the watcher among them, then SIGKILLs what is
left after its grace. Told beside what the watcher saw in that window (docs/verdict.md, "A job step's end").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import vocab
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Run

ENDING = ("SIGTERM", "SIGINT", "SIGHUP")  # watcher/signals.py ENDING, by name: the analysis never imports it
STEP_END = ("a scheduler ending the job step (SLURM: scancel, a time limit; systemd stopping the unit) signals "
            "every process of the step, then SIGKILLs what is left after its grace (SLURM's KillWait: 30 s by "
            "default)")
# Not proven a step's end: the watcher alone was sent it (a user's kill of its pid), as far as the records show.
ALONE = ("no record shows the run's own processes sent it too (a scheduler ending the job step signals every "
         "process of the step): whether the step was ending is not known")
# Senders that end a job step (their /proc comm), and how long after the watcher's signal a process of the run ended
# by the same signal still shows the step-wide signal (SLURM's KillWait: 30 s by default, a handler's time within it).
SCHEDULERS = frozenset(("slurmstepd", "slurmd", "systemd", "srun", "sbatch", "salloc"))
STEP_WINDOW_S = 30.0
CHECKPOINT = ("a checkpoint request sent to every process of the step a while before its end (srun --signal, "
              "sbatch --signal); the watcher ignored it and watched on")
# A main's end a step_end record shows, and what to do (the finding's advice too).
STEP_HOW = "ended as its job step was ended"
STEP_AFTER = "ended after its job step's end began"
# What to do where the step's end ended the run (the finding's advice, and a main's end step_end shows).
STEP_ADVICE = ("if the step's time limit ended it (`sacct -j JOBID`: State TIMEOUT), ask for more time or stop "
               "sooner: the main process and its pools get only the grace to end")


def watcher_signalled(v: View) -> Finding | None:
    """The watcher was sent SIGTERM/SIGINT/SIGHUP (a step's end), or only SIGUSR1/2 (a checkpoint request)."""
    runs = [r for r in v.runs if r.watcher_signals]
    if not runs:
        return None
    r = runs[0]
    ending = [s for s in r.watcher_signals if s.get("signal") in ENDING]
    first = ending[0] if ending else r.watcher_signals[0]
    said = f"The watcher was sent {first.get('signal')} by {_sender(first)} at {first['ts'] - v.t0:.1f} s"
    main = r.root.ended_at if r.root is not None else None
    if main is not None:
        gap = first["ts"] - main
        said += f", {abs(gap):.1f} s {'after' if gap >= 0 else 'before'} the main process ended"
    more = f" ({len(runs) - 1} more run(s) alike)" if len(runs) > 1 else ""
    if not ending:
        return Finding("watcher-signalled", "info", f"{said}: {CHECKPOINT}.{more}", [], [], "", {})
    stop = next((s for s in ending[1:] if s.get("action") == "stop"), None)
    left = f"at a second {stop.get('signal')} (by {_sender(stop)})" if stop is not None else \
        "within its bound, before a SIGKILL would come"
    why = STEP_END if _step_wide(v, r, first) else ALONE
    return Finding(
        "watcher-signalled", "info", f"{said}: {why}. It watched on: {_outcome(r, left)}.{more}",
        [], [], STEP_ADVICE, {"signal": first.get("signal")})


def step_end(v: View, r: Run) -> dict[str, Any] | None:
    """A scheduler's ending signal to the step (SIGTERM/SIGINT/SIGHUP to the watcher from a sender SCHEDULERS names)
    where no record shows the main ended before it (more than a second before: the tolerance _step_wide allows): the
    one record of the step's end around a main whose own status went unread. Only a named scheduler: processes of the
    run ended by one signal show many were sent it (a user's `pkill python` too), not a step's end. None where no
    such record is in the run."""
    ending = [s for s in r.watcher_signals if s.get("signal") in ENDING and s.get("sender") in SCHEDULERS]
    if not ending or r.root is None:
        return None
    first = ending[0]
    end = r.root.ended_at
    return None if end is not None and end < first["ts"] - 1.0 else first


def step_end_words(v: View, r: Run, s: dict[str, Any], why: bool = True) -> tuple[str, str, str]:
    """(how, note, what to do) for a main's end around a step_end record: 'ended as its job step was ended' where
    it ended within a second of the signal; where later, or its end was not seen, both readings the records
    leave (the step's SIGKILL after the grace, or its own os._exit within it); why: the note says what a scheduler
    does at a step's end (the finding's words; the Run line's are short)."""
    said = f"{_sender(s)} sent {s.get('signal')} at {s['ts'] - v.t0:.1f} s"
    end = r.root.ended_at if r.root is not None else None
    scheduler = f", the watcher's record: {STEP_END}" if why else ""
    if end is not None and end - s["ts"] <= 1.0:
        return STEP_HOW, f"{said}{scheduler}; its own status was not read", STEP_ADVICE
    later = f"{end - s['ts']:.1f} s later" if end is not None else "when, no record shows"
    return (STEP_AFTER, f"{said}{scheduler}; it ended {later}: killed after the grace, or by its own os._exit within "
            "it; its own status was not read", f"{STEP_ADVICE}; if it left by itself, find the os._exit in the code")


def _step_wide(v: View, r: Run, first: dict[str, Any]) -> bool:
    """Whether a record shows the signal went to the step, not the watcher alone: a scheduler sent it, or a process
    of the run ended by the same signal from the watcher's on, within STEP_WINDOW_S."""
    if first.get("sender") in SCHEDULERS:
        return True
    sig, t = first.get("signal"), first["ts"]
    return any((e := v.endings.of(p)).signal == sig and e.at is not None and t - 1.0 <= e.at <= t + STEP_WINDOW_S
               for p in r.processes)


def _sender(s: dict[str, Any]) -> str:
    """'slurmstepd (pid 7, uid 0)', 'pid 7 (uid 0)' where its name was not read, or 'the kernel' (pid 0)."""
    pid = s.get("sender_pid")
    if not pid:
        return "the kernel"
    ids = f"pid {pid}, uid {s.get('sender_uid')}"
    return f"{s['sender']} ({ids})" if s.get("sender") else f"{ids.replace(', ', ' (')})"


def _outcome(r: Run, left: str) -> str:
    """What the watcher did after the signal, from its watcher_exit (none: it was killed before writing it);
    `left`: when it left, where it left by its own bound or a second signal."""
    alive = f"{r.tree_counts[-1][1]} process(es) of the run still alive" if r.tree_counts else "what was alive unknown"
    if r.watcher_exit == vocab.EXIT_RUN_ENDED:
        return "it saw the run end (its verdict is the report's)"
    if r.watcher_exit in (vocab.EXIT_SIGNALLED, vocab.EXIT_LINGER_END):
        main = "the main process ended" if r.leftover_seen else "the main process still running (no verdict)"
        return f"it left {left}, {main}, {alive}"
    if not r.watcher_exit:  # the log alone cannot tell a watcher still at work from one killed
        return ("the log has no watcher_exit: it was still watching as the log was read, or was killed before it "
                "could write one (SIGKILL after the grace)")
    return f"it left ({r.watcher_exit})"
