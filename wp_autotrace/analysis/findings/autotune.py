"""Findings about torch's autotune subprocesses (an autotune pool: fold/autotune.py, derive/autotune.py): a
benchmark that never answered, the SIGKILL torch sent on its timeout, the subprocess started in its place, and
the zombie the killed one stayed under its creator (TuningProcess.kill() never waits for it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..derive.autotune import Kill, kills
from ..fold.model import AUTOTUNE
from ..words.fmt import TEXT_PIDS, site
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View

# The setting that bounds what a hung benchmark costs (torch/_inductor/config.py; TuningProcessPool passes it
# to every get), and its default on torch 2.13.
TIMEOUT_SETTING = "torch._inductor.config.max_autotune_subproc_result_timeout_seconds"
TIMEOUT_DEFAULT_S = 60
AUTOTUNE_ADVICE = (
    f"each benchmark that hangs costs its whole timeout: lower {TIMEOUT_SETTING} (it is {TIMEOUT_DEFAULT_S} s on "
    "torch 2.13; no environment variable sets it) before compiling, so a hung candidate is dropped sooner; the "
    "zombie holds no memory, only a pid, and goes when the process that made it ends (torch's "
    "TuningProcess.kill() does not wait for it: nothing to do unless pids run short)")


def _one(v: View, k: Kill) -> str:
    """One kill in words: who hung, how long it was waited for, the SIGKILL, the replacement, the zombie."""
    creator = k.call.proc
    who = f"{creator.role} {creator.pid}"
    waited = f" for {k.waited_s:.1f} s" if k.waited_s is not None else ""
    at = f" (the wait at {site(k.caller)})" if k.caller is not None else ""
    sig = v.endings.of(k.proc).signal if k.proc is not None else None
    how = "with SIGKILL" if sig in (None, "SIGKILL") else f"(its end: {sig})"
    text = (f"autotune subprocess {k.pid} gave no answer to a benchmark{waited}{at}: {who} killed it {how} at "
            f"{v.rel(k.call.ts) or 0:.1f} s (torch's TuningProcess.kill on get's timeout)")
    if k.replacement is not None:
        text += f" and started {k.replacement.pid} in its place"
    if k.zombie_under_creator and k.zombie_from is not None:
        until = (f"until {who} ended at {v.rel(k.zombie_to) or 0:.1f} s" if k.zombie_to is not None
                 and k.zombie_to == creator.ended_at else
                 f"until it was reaped at {v.rel(k.zombie_to) or 0:.1f} s" if k.zombie_to is not None
                 else "to the end of the log")
        span = f" ({k.zombie_to - k.zombie_from:.1f} s)" if k.zombie_to is not None else ""
        text += (f"; {k.pid} then stayed defunct (a zombie: `ps` shows it <defunct>) under {who} from "
                 f"{v.rel(k.zombie_from) or 0:.1f} s {until}{span}, as kill() never waits for it")
    return text


def autotune_killed(v: View) -> Finding | None:
    """A benchmark in an autotune subprocess that never answered: torch's kill on get's timeout, the replacement,
    the zombie left under the creator."""
    found = [(pool, k) for pool in v.pools if pool.kind == AUTOTUNE for k in kills(pool)]
    if not found:
        return None
    pool, first = found[0]
    made = pool.call
    more = f" (+{len(found) - 1} more killed)" if len(found) > 1 else ""
    pids = sorted({k.pid for _, k in found if k.pid is not None})
    waited = sum(k.waited_s or 0.0 for _, k in found)
    zombies = [k for _, k in found if k.zombie_under_creator]
    return Finding(
        "autotune-killed", "warning",
        f"{_one(v, first)[0].upper()}{_one(v, first)[1:]}{more}. The autotune pool was made at "
        f"{site(made.caller)}.",
        pids, [f"{k.pid}: TuningProcess.kill at {v.rel(k.call.ts) or 0:.1f} s" for _, k in found[:TEXT_PIDS]],
        AUTOTUNE_ADVICE,
        # each kill lost its benchmark: torch scores the candidate inf and ignores it ("It will be ignored"), so it
        # ranks as lost work, before what the pool idled (a cause before the memory its pool held after it)
        {"processes": len(found), "hang_s": round(waited, 3), "killed": len(found), "zombies": len(zombies),
         "jobs_lost": len(found)})
