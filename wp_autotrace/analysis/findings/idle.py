"""The idle-pool finding: pools that sat idle after their last job, or between their uses, holding memory; how
long, how much, and what ends them (knob_advice: in the names the run's torch has).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..derive.callers import BY_TIMER, BY_USER, user_frame
from ..derive.facts import made_in
from ..derive.poolprocs import fx_subprocess
from ..derive.pools import PoolStory
from ..fold.model import AUTOTUNE, EXECUTOR, QUACK
from ..words.fmt import TEXT_PIDS, gap_words, idle_mib_s_text, seconds_text, site, size_text
from .base import Finding
from .exitwaits import shutdown_path

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Process

# A pool idle this long after its last job is worth a finding: shorter gaps are the pause
# between two compiles of one training step (and torch 2.10+ quiesces after 60 s by default).
IDLE_POOL_S = 5.0



# torch's quiesce settings (torch/_inductor/config.py, 2.10+): quiesce_async_compile_pool is on by default
# in 2.13 (env TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL); quiesce_async_compile_time (60 s) has no env var.
QUIESCE_POOL = "quiesce_async_compile_pool"


QUIESCE_TIME = "quiesce_async_compile_time"


# The FX-subprocess pool (derive/poolprocs.fx_subprocess): one worker whatever compile_threads says, no quiesce,
# outside _pool_set (shutdown_compile_workers() leaves it), stopped by torch's atexit.
FX_ADVICE = (
    "this is the FX-subprocess compile pool (TORCHINDUCTOR_FX_COMPILE_MODE=subprocess): torch's "
    "shutdown_compile_workers(), compile_threads and the quiesce settings do not touch it, and it stays until exit; "
    "where its memory matters compile in the process (unset TORCHINDUCTOR_FX_COMPILE_MODE), or after your last "
    "compile call torch._inductor.compile_fx_subproc._SubprocessFxCompile.process_pool().shutdown() (a later "
    "compile would find it shut down: the pool is cached)")


# Autotune subprocesses and quack's compile workers: outside _pool_set (shutdown_compile_workers() and
# compile_threads never touch them), each with its own stop.
IDLE_ADVICE_BY_KIND = {
    AUTOTUNE: ("these are max-autotune's benchmark subprocesses, which torch's shutdown_compile_workers() and "
               "compile_threads do not touch: after your last autotune call "
               "torch._inductor.autotune_process.AutotuneProcessPool.shutdown_instance() (pipelined GEMM "
               "autotuning) or the TuningProcessPool's shutdown(); or autotune in the process where their memory "
               "matters (TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC and TORCHINDUCTOR_PIPELINE_GEMM_AUTOTUNING unset)"),
    QUACK: ("these are quack's compile workers, which torch's shutdown_compile_workers() does not touch: call "
            "shutdown() on the handle its precompile returned once its benchmarks are done"),
}


def knob_advice(v: View, p: Process, st: PoolStory | None = None) -> str:
    """What ends an idle pool, in the names the run's torch has (its config record's knobs), with the
    quiesce settings the pool itself used (its SubprocPool.__init__ capture) over the import-time ones."""
    if st is not None and fx_subprocess(st.pool):
        return FX_ADVICE
    if st is not None and st.pool.kind in IDLE_ADVICE_BY_KIND:
        return IDLE_ADVICE_BY_KIND[st.pool.kind]
    settings, _, knobs = v.config_of(p)
    stops = "the pool's workers" if st is not None and st.pool.kind == EXECUTOR else "the sidecar and its workers"
    parts = [f"call {shutdown_path(v, p)}() after your last compile (it stops {stops})"]
    if (st is not None and st.shutdown_by == BY_USER and st.shutdown_frame is not None and st.pool.shutdown_at
            and st.pool.shutdown_at >= st.busy_until):
        # the program made that call itself, later than its last compile: the advice is to move it, not to add it
        # (one made with a job in flight, a drain's, cut that job: no earlier place is the fix)
        parts = [f"your code's {shutdown_path(v, p).rsplit('.', 1)[-1]}() at {site(st.shutdown_frame)} shut it "
                 f"down {st.pool.shutdown_at - st.busy_until:.1f} s after its last job: call it right after the "
                 "last compile that needs the pool"]
    if "compile_threads" in knobs or "compile_threads" in settings:
        parts.append("or compile without a pool: compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1 "
                     f"(now {settings.get('compile_threads', '?')})")
        made = made_in(v, st.pool) if st is not None else None
        if made is not None:  # a library's line made it: the setting is the user's fix, not a change there
            parts[:2] = [f"set TORCHINDUCTOR_COMPILE_THREADS=1 in the environment that starts the program (its "
                         f"child processes inherit it; now {settings.get('compile_threads', '?')}): no pool is made",
                         f"or, in {made['dist']} {made['version']}".rstrip() + f" (its line made the pool, not "
                         f"yours), call {shutdown_path(v, p)}() after the last compile"]
    # torch's quiesce is SubprocPool's alone: a fork/spawn pool (TrackedProcessPoolExecutor) has no timer to lower
    if any("quiesce" in k for k in knobs) and not (st is not None and st.pool.kind == EXECUTOR):
        parts.append(_quiesce_advice(v, settings, st))
    return "; ".join(parts)


def _quiesce_advice(v: View, settings: dict[str, Any], st: PoolStory | None) -> str:
    """Lower quiesce_async_compile_time where quiesce is on (torch 2.13's default); enable it where off."""
    used = st.pool.call.ret.get("quiesce_after_s") if st is not None else None
    at_import = settings.get(QUIESCE_TIME)
    values = ([f"{used:g} s for this pool"] if isinstance(used, (int, float)) else []) + (
        [f"{at_import} s at import"] if at_import is not None and at_import != used else [])
    quiesced = [(ts, by) for ts, by in st.quiesced if st.busy_until <= ts <= st.idle_to] if st is not None else []
    if quiesced and quiesced[0][1] != BY_TIMER:  # the program quiesced it itself: the timer is not what acts
        return (f"a quiesce ({quiesced[0][1]}) stops only the workers: the sidecar holds its memory until "
                "shutdown, so shut the pool down when no compile will follow")
    if quiesced and st is not None:
        values.append(f"its workers quiesced {quiesced[0][0] - st.busy_until:.1f} s after its last job")
    now = f" ({'; '.join(values)})" if values else ""
    if isinstance(used, (int, float)) or (used is None and settings.get(QUIESCE_POOL) is True):
        return (f"or stop idle workers sooner: lower {QUIESCE_TIME}{now}, in code before the pool is made "
                f"(torch._inductor.config.{QUIESCE_TIME} = N), though the sidecar stays until shutdown")
    return (f"or stop idle workers sooner: {QUIESCE_POOL}=True (TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL=1) "
            f"with a low {QUIESCE_TIME}{now}, though the sidecar stays until shutdown")



def _idle_text(v: View, st: PoolStory) -> str:
    pool = st.pool
    rel = v.rel
    last = st.idle_after_words
    ending = v.endings.of_pool(pool)
    if st.alive_at_end:
        until = "to the end of the log (still running)"
    elif ending.kind == "shutdown-completed":
        until = f"until {st.shutdown_by} shut it down at {seconds_text(rel(pool.shutdown_at))}"
    else:  # the words its evidence allows (analysis/derive/poolends.py): never "shut it down" for a pool found dead
        until = f"until {seconds_text(rel(st.idle_to))} ({ending.words})"
    n_read, n_alive = st.held_read
    covered = f" ({n_read} of {n_alive} processes read)" if n_read < n_alive else ""
    # Where only some processes were read, the figure is a floor (the others count in no figure): say so.
    held = (f", holding {'at least ' if covered else ''}{size_text(st.held_bytes)}{covered}" if st.held_bytes
            else "") + (
        f": {idle_mib_s_text(st.idle_mib_s, st.idle_unread_s, st.idle_s)}" if st.idle_mib_s else "")
    quiesced = [(ts, by) for ts, by in st.quiesced if st.busy_until <= ts <= st.idle_to]
    q = ""
    if quiesced:
        q = f"; {quiesced[0][1]} stopped its workers at {seconds_text(rel(quiesced[0][0]))}, the sidecar stayed"
        if st.after_quiesce is not None:
            q += f", holding {size_text(st.after_quiesce[1])} (read at {seconds_text(rel(st.after_quiesce[0]))})"
    made = site(user_frame(pool.call.caller) or pool.call.caller)
    idle = (f"0 s after its last job: still busy {until}" if st.busy_past_stop  # never a span running backwards
            else f"0 s after {last}: stopped first, {until}" if st.stopped_first
            else f"{st.idle_s:.1f} s after {last} (from {seconds_text(rel(st.busy_until))}) {until}{held}{q}")
    if (big := max(st.gaps, key=lambda g: g.end - g.start, default=None)) is not None:  # the job records tell gaps
        gap = gap_words(seconds_text(rel(big.start)), seconds_text(rel(big.end)), big.end - big.start, big.first) + (
            f", {st.idle_total_s:.1f} s idle in all" + (  # a comma: the floor's parentheses never nest
                f": {idle_mib_s_text(st.idle_total_mib_s, st.idle_total_unread_s, st.idle_total_s)}"
                if st.idle_total_mib_s else ""))
        idle = f"{gap}; idle {idle}" if big.end - big.start > st.idle_s else f"{idle}; idle {gap}"
    return f"pool of {st.name} (made by {pool.creator.role} {pool.creator.pid} at {made}) idle {idle}"


def idle_pools(v: View) -> Finding | None:
    """Pools that sat idle after their last job, or between their uses (idle gaps, from job records), holding
    memory: how long, how much, and what ends them; the values count the gaps too."""
    idle = sorted((st for pool in v.pools if (st := v.story(pool)).idle_s >= IDLE_POOL_S or st.gaps),
                  key=lambda st: (-(st.idle_total_mib_s or 0.0), -st.idle_total_s))
    if not idle:
        return None
    total = sum(st.idle_total_mib_s or 0.0 for st in idle)
    unread, seconds = sum(st.idle_total_unread_s for st in idle), sum(st.idle_total_s for st in idle)
    more = (f" (+{len(idle) - 1} more idle pool(s)" + (f"; {idle_mib_s_text(total, unread, seconds)} in all"
                                                        if total else "") + ")" if len(idle) > 1 else "")
    pids = sorted({p.pid for st in idle for p in st.procs})
    first = idle[0]
    return Finding(
        "idle-pool", "warning", f"A {_idle_text(v, first)}{more}.", pids,
        [_idle_text(v, st) for st in idle[:TEXT_PIDS]], knob_advice(v, first.pool.creator, first),
        {"pools": len(idle), "idle_s": round(sum(st.idle_total_s for st in idle), 3), "idle_mib_s": round(total, 1),
         "idle_gib_s": round(total / 1024, 3), "held_pss_bytes": sum(st.held_bytes or 0 for st in idle) or None})
