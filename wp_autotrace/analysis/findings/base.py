"""What every finding shares: the Finding record and the few phrases several findings build."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ..derive.plugins import advice_for_frame
from ..words.fmt import site

if TYPE_CHECKING:
    from ..derive.view import View

class Finding(NamedTuple):
    """One finding: a stable kind, how bad, one sentence, the evidence, what to do, what it cost."""

    kind: str
    severity: str  # "problem", "warning" or "info"
    text: str
    pids: list[int]
    evidence: list[str]
    advice: str
    cost: dict[str, Any]
    # The finding in one short sentence for the Answer, where its text is too long to be told there whole and
    # a cut at a clause would drop what the user asked (which worker held a hung job); "": the text's own clauses.
    headline: str = ""


def sites_text(calls: Any) -> str:
    sites = sorted({site(c.caller) for c in calls})
    return ", ".join(sites[:3]) + (f" (+{len(sites) - 3} more)" if len(sites) > 3 else "")


def roles_text(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


def plugin_advice(calls: Any, generic: str) -> str:
    """The known behaviour and fix of each plugin release among the callers (plugins.py), then generic."""
    known: list[str] = []
    for c in calls:
        text = advice_for_frame(c.caller)
        if text and text not in known:
            known.append(text)
    if not known:
        return generic
    return " ".join(known[:2]) + f" In general: {generic}"


def in_ranks(v: View, procs: Any) -> str:
    """' in rank 0, 1' (the ranks the processes belong to), or ''."""
    ranks = sorted({v.rank_of[p.index] for p in procs if p.index in v.rank_of})
    if not ranks:
        return ""
    names = [r.removeprefix("rank ") for r in ranks]
    return f" in {'rank' if len(names) == 1 else 'ranks'} {', '.join(names[:8])}" + (
        f" (+{len(names) - 8} more)" if len(names) > 8 else "")


# Signals a process gets from its own fault or abort(): with no record of a sender, its signal tells a crash, or a
# signal sent from outside the run (a wait status cannot tell kill() from a fault: both dump core), so the words
# say both, what the signal means first (the common case), and that no sender is known.
CRASHES = {
    "SIGSEGV": "a segmentation fault in native code, in an extension, a driver or corrupted memory",
    "SIGBUS": "a bus error in native code, often a mapped file cut short or a full /dev/shm",
    "SIGFPE": "an arithmetic fault in native code, such as an integer division by zero",
    "SIGILL": "an illegal instruction, such as native code built for another CPU or a compiler's trap",
    "SIGABRT": "abort() in native code, such as a failed C++ check, whose message is then on stderr",
    "SIGTRAP": "a trap in native code, such as a breakpoint",
    "SIGSYS": "a system call its seccomp filter forbids",
}
# Who sends these from outside: systemd's WatchdogSec= ends a unit with SIGABRT, `timeout -s` any of them.
_OUTSIDE = {"SIGABRT": "kill, timeout -s, a watchdog: systemd's WatchdogSec= sends SIGABRT"}
# Where a crash's stacks are: the Python one faulthandler prints (at the signal, whoever sent it), the native one in
# the core dump.
CRASH_FIX = ("run it again with PYTHONFAULTHANDLER=1, which prints the Python stack as the signal arrives (a crash's "
             "or a kill's); the core dump holds the native one")


def crash_or_outside(signal: str) -> str:
    """'a crash, by its signal: <what it means>, or a signal sent from outside the run (kill, ...)' for a crash
    signal; '' for any other."""
    what = CRASHES.get(signal)
    if not what:
        return ""
    return f"a crash, by its signal: {what}; or a signal sent from outside the run ({_OUTSIDE.get(signal, 'kill')})"


def crash_note(signal: str | None) -> str:
    """' (a crash, by its signal: a segmentation fault in native code, ...; or a signal sent from outside the run
    (kill); no record shows a sender)' for a crash signal that no record says another process sent; '' for any
    other."""
    either = crash_or_outside(signal or "")
    return f" ({either}; no record shows a sender)" if either else ""
