"""Findings about compile pools: nested and bypassing warm_pool calls, idle pools, device files, and the waits
at exit that shutting pools down costs (a sidecar that never served: findings/sidecars.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import targets
from ...common.vocab import GUARDED_ROLES
from ..derive.callers import BY_TIMER, BY_USER, user_frame
from ..derive.endings import torch_release
from ..derive.facts import made_in
from ..derive.labels import label_for
from ..derive.poolprocs import fx_subprocess, start_method
from ..derive.pools import PoolStory
from ..fold.model import AUTOTUNE, EXECUTOR, QUACK
from ..words.fmt import TEXT_PIDS, error_words, gap_words, idle_mib_s_text, pid_text, pool_name, site, size_text
from .base import Finding, in_ranks, plugin_advice, roles_text, sites_text
from .held import RAN_ON_ADVICE, held_short, held_words, lived_on, sidecar_exit_join, wait_end, wait_how
from .orphans import parent_wait, ports_held
from .rank import HANG_S
from .signals import killed_alike

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# The main process waiting longer than this at exit is worth a finding.
SLOW_EXIT_WAIT_S = 5.0


# A pool idle this long after its last job is worth a finding: shorter gaps are the pause
# between two compiles of one training step (and torch 2.10+ quiesces after 60 s by default).
IDLE_POOL_S = 5.0


# A child process spending this long shutting its pool down at exit delays whoever joins it
# (pytorch#115366 measured ~1 s per spawn child). Not lower: torch 2.13's own shutdown of a ready
# sidecar takes 0.47-0.52 s untraced, so a bar at 0.5 s flickered on a pool that was stopped normally.
CHILD_EXIT_WAIT_S = 1.0


NESTED_ADVICE = (
    "the backend imported in every sidecar calls warm_pool() at import: keep it out of the sidecars "
    "(TORCH_DEVICE_BACKEND_AUTOLOAD=0 in the sidecar's environment, as newer torch_npu releases do around "
    "their call), or run with WP_AUTOTRACE_GUARD=nested-pools")


def nested_pools(v: View) -> Finding | None:
    nested = [c for c in v.warm_calls if c.proc.role in GUARDED_ROLES]
    if not nested:
        return None
    pids = sorted({c.proc.pid for c in nested})
    return Finding(
        "nested-pools", "problem",
        f"Nested compile pools: warm_pool ran inside {len(pids)} compile sidecar/worker process(es)"
        f"{in_ranks(v, (c.proc for c in nested))} (pids {pid_text(pids)}), called from {sites_text(nested)}; "
        f"each call starts another sidecar, {v.max_depth} deep.",
        pids, [site(c.caller) for c in nested[:TEXT_PIDS]],
        plugin_advice(nested, NESTED_ADVICE),
        {"processes": len(pids)})


def warm_pool_bypass(v: View) -> Finding | None:
    bypass = [c for c in v.warm_calls if c.env.get("TORCH_WARM_POOL") not in (None, "1")]
    if not bypass:
        return None
    pids = sorted({c.proc.pid for c in bypass})
    value = bypass[0].env.get("TORCH_WARM_POOL")
    return Finding(
        "warm-pool-bypass", "warning",
        f"TORCH_WARM_POOL={value} was set in {len(pids)} process(es) that still called warm_pool "
        f"(pids {pid_text(pids)}): a direct call from {sites_text(bypass)} bypasses that guard, which only "
        "torch's own maybe_warm_pool() honours.",
        pids, [site(c.caller) for c in bypass[:TEXT_PIDS]],
        plugin_advice(bypass, "TORCH_WARM_POOL only stops torch's own maybe_warm_pool(); stop the direct "
                      "warm_pool() call at its source (see the call sites)" + (
                          "; the guard is on and refuses it in pool processes, not in the main process"
                          if any(r.guard for r in v.runs) else " or use WP_AUTOTRACE_GUARD=nested-pools")),
        {"processes": len(pids)})


def slow_exit_wait(v: View) -> Finding | None:
    """The main process waited over SLOW_EXIT_WAIT_S in shutdown_compile_workers: torch's own call at exit (no
    user frame called it) leads; where the only slow call is one the user's code made, it is told as theirs,
    at its line, never as a wait "at exit" whose fix is the call they made."""
    slow = [c for c in v.tagged(targets.EXIT_SHUTDOWN) if c.proc.role == "main"
            and ((c.end is not None and c.end - c.ts > SLOW_EXIT_WAIT_S) or c.error)]
    if not slow:
        return None
    torchs = [c for c in slow if user_frame(c.caller) is None or c.at_exit]
    c = (torchs or slow)[0]
    waits = [(x.end if x.end is not None else v.t_end) - x.ts for x in slow]
    wait = (c.end if c.end is not None else v.t_end) - c.ts
    how = f", interrupted by {error_words(c.error)}" if c.error else ""
    nested = ("torch waits for every pool it started, nested sidecars included: stop the nested pools (see "
              "nested-pools), or quiesce/shut the pool down before exit") if v.max_depth > 1 else ""
    waited_on = None
    if torchs:
        joined, waited_on = sidecar_exit_join(v, c)
        text = f"The main process waited {wait:.1f} s in shutdown_compile_workers at exit{how}{joined}."
        advice = nested or RAN_ON_ADVICE if waited_on is not None else nested or (
            f"torch waits at exit for every pool it started: call {shutdown_path(v, c.proc)}() after your last "
            "compile, where a slow pool shutdown costs you least")
    else:
        text = (f"The main process waited {wait:.1f} s in its own call of shutdown_compile_workers() at "
                f"{site(c.caller)}{how}: the call waits until each sidecar has ended its workers and itself.")
        advice = nested or OWN_SHUTDOWN_ADVICE
    return Finding(
        "slow-exit-wait", "problem" if torchs else "warning", text, sorted({x.proc.pid for x in slow}), [],
        advice, {"exit_wait_s": round(sum(waits), 3), "hang_s": round(sum(waits), 3),
                 # the sidecar whose own exit join it waited on (its exit-hang: the cause, words/causes.py)
                 **({"waited_on": [waited_on]} if waited_on is not None else {})})


# The user's own shutdown_compile_workers() was slow: the call is already what torch would do at exit; its
# seconds are the sidecar ending its workers and then itself, which no argument of the call shortens.
OWN_SHUTDOWN_ADVICE = ("nothing in the call shortens it: it waits for each sidecar to end its workers and itself "
                       "(slower on a busy host); to have no pool to stop, compile without one: compile_threads=1 / "
                       "TORCHINDUCTOR_COMPILE_THREADS=1")


def wakeup_no_pool(v: View) -> Finding | None:
    """AsyncCompile.wakeup() called, returned, and woke no sidecar (torch returned early)."""
    woke = {id(c.parent) for c in v.tagged(targets.POOL_WAKEUP) if c.parent is not None}
    idle = [c for c in v.tagged(targets.ASYNC_WAKEUP) if c.end is not None and id(c) not in woke
            and not c.error]
    if not idle:
        return None
    pids = sorted({c.proc.pid for c in idle})
    settings = v.config_of(idle[0].proc)[0]
    threads, method = settings.get("compile_threads"), settings.get("worker_start_method")
    if isinstance(threads, int) and threads <= 1:
        why = f"compile_threads is {threads}, so torch uses no process pool"
        advice = "nothing to fix unless you want a pool: set TORCHINDUCTOR_COMPILE_THREADS above 1"
    elif method not in (None, "subprocess"):
        why = f"the pool is not a SubprocPool (worker_start_method={method}): there is no sidecar to wake"
        advice = ""
    else:
        known = f"compile_threads is {threads}, so " if threads is not None else ""
        why = (f"{known}torch returned early because the pool was not ready yet (wakeup() signals the sidecar only "
               "once the pool's warm-up job has come back) or the pool failed to start")
        advice = "nothing to fix when later compiles use the pool; if none does, see the pool's errors above"
    return Finding(
        "wakeup-no-pool", "info",
        f"AsyncCompile.wakeup() was called {len(idle)} time(s) (pids {pid_text(pids)}, from {sites_text(idle)}) "
        f"and returned without waking a sidecar: {why}.",
        pids, [site(c.caller) for c in idle[:TEXT_PIDS]], advice, {"calls": len(idle)})


def shutdown_path(v: View, p: Process) -> str:
    """torch's shutdown_compile_workers as this run's torch names it: from a traced call of it, else from
    where it lives by release (docs/torch-coverage.md: codecache in 2.3, async_compile from 2.4). 2.1-2.2 have
    none: their one pool is AsyncCompile.process_pool()'s (lru-cached), stopped by its own shutdown()."""
    seen = next((c.target for c in v.tagged(targets.EXIT_SHUTDOWN)), None)
    if seen:
        module, name = targets.split_label(seen)
        return f"{module}.{name}"
    major_minor = torch_release(v.config_of(p)[1])
    if major_minor in ((2, 1), (2, 2)):
        return "torch._inductor.codecache.AsyncCompile.process_pool().shutdown"
    module = "torch._inductor.codecache" if major_minor == (2, 3) else "torch._inductor.async_compile"
    return f"{module}.shutdown_compile_workers"


# torch's quiesce settings (torch/_inductor/config.py, 2.10+): quiesce_async_compile_pool is on by default
# in 2.13 (env TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL); quiesce_async_compile_time (60 s) has no env var.
QUIESCE_POOL = "quiesce_async_compile_pool"


QUIESCE_TIME = "quiesce_async_compile_time"


# The FX-subprocess pool (derive/pools.fx_subprocess): one worker whatever compile_threads says, no quiesce,
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
    if st is not None and st.shutdown_by == BY_USER and st.shutdown_frame is not None and st.pool.shutdown_at:
        # the program made that call itself, later than its last compile: the advice is to move it, not to add it
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
    if any("quiesce" in k for k in knobs):
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


def _pool_name(st: PoolStory) -> str:
    return pool_name({"kind": st.pool.kind, "start_method": start_method(st.pool), "sidecar_pid": st.pool.sidecar_pid,
                      "worker_pids": [q.pid for q in st.workers]})


def _at(x: float | None) -> str:
    return f"{x:.1f} s" if x is not None else "?"


def _idle_text(v: View, st: PoolStory) -> str:
    pool = st.pool
    rel = v.rel
    last = st.idle_after_words
    ending = v.endings.of_pool(pool)
    if st.alive_at_end:
        until = "to the end of the log (still running)"
    elif ending.kind == "shutdown-completed":
        until = f"until {st.shutdown_by} shut it down at {_at(rel(pool.shutdown_at))}"
    else:  # the words its evidence allows (analysis/derive/poolends.py): never "shut it down" for a pool found dead
        until = f"until {_at(rel(st.idle_to))} ({ending.words})"
    n_read, n_alive = st.held_read
    covered = f" ({n_read} of {n_alive} processes read)" if n_read < n_alive else ""
    # Where only some processes were read, the figure is a floor (the others count in no figure): say so.
    held = (f", holding {'at least ' if covered else ''}{size_text(st.held_bytes)}{covered}" if st.held_bytes
            else "") + (
        f": {idle_mib_s_text(st.idle_mib_s, st.idle_unread_s, st.idle_s)}" if st.idle_mib_s else "")
    quiesced = [(ts, by) for ts, by in st.quiesced if st.busy_until <= ts <= st.idle_to]
    q = ""
    if quiesced:
        q = f"; {quiesced[0][1]} stopped its workers at {_at(rel(quiesced[0][0]))}, the sidecar stayed"
        if st.after_quiesce is not None:
            q += f", holding {size_text(st.after_quiesce[1])} (read at {_at(rel(st.after_quiesce[0]))})"
    made = site(user_frame(pool.call.caller) or pool.call.caller)
    idle = (f"0 s after its last job: still busy {until}" if st.busy_past_stop  # never a span running backwards
            else f"0 s after {last}: stopped first, {until}" if st.stopped_first
            else f"{st.idle_s:.1f} s after {last} (from {_at(rel(st.busy_until))}) {until}{held}{q}")
    if (big := max(st.gaps, key=lambda g: g.end - g.start, default=None)) is not None:  # the job records tell gaps
        gap = gap_words(_at(rel(big.start)), _at(rel(big.end)), big.end - big.start, big.first) + (
            f", {st.idle_total_s:.1f} s idle in all" + (  # a comma: the floor's parentheses never nest
                f": {idle_mib_s_text(st.idle_total_mib_s, st.idle_total_unread_s, st.idle_total_s)}"
                if st.idle_total_mib_s else ""))
        idle = f"{gap}; idle {idle}" if big.end - big.start > st.idle_s else f"{idle}; idle {gap}"
    return f"pool of {_pool_name(st)} (made by {pool.creator.role} {pool.creator.pid} at {made}) idle {idle}"


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


OUTLIVED_FORK_ADVICE = (
    'start the workers without fork: worker_start_method="subprocess" (TORCHINDUCTOR_WORKER_START=subprocess, '
    "torch's default, set before torch's import): its sidecar reads its creator's pipe and ends, with its "
    "workers, as soon as the creator does; or compile without a pool: compile_threads=1 "
    "(TORCHINDUCTOR_COMPILE_THREADS=1)")


# torch 2.1-2.3 have no sidecar to start the workers in (nor TORCHINDUCTOR_WORKER_START): no pool is the fix there.
LEGACY_OUTLIVED_ADVICE = ("compile without a pool: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1); torch "
                          "2.1-2.3 start compile workers only by fork or spawn, and from 2.4 "
                          'worker_start_method="subprocess" starts them in a sidecar that ends with its creator')


def pool_outlived_creator(v: View) -> Finding | None:
    """A pool whose processes lived on after the process that made them ended (derive/pools.outlived_creator):
    nobody could use or stop them; a forked worker holds what it inherited (the creator's listening sockets, its
    stdout and stderr). Told with the creator's end, the ports they held (the cause leads: the user's symptom is
    the port), the parent's wait where a record shows it (findings/orphans.py), and what they held."""
    orphans = [(st, span) for pool in v.pools if (span := (st := v.story(pool)).orphaned) is not None]
    if not orphans:
        return None
    st, (gone, end) = max(orphans, key=lambda x: x[1][1] - x[1][0])
    pool, creator, rel = st.pool, st.pool.creator, v.rel
    ending = v.endings.of(creator)
    how = "" if creator.exited else f", {ending.words}" if ending.kind != "unknown" and ending.evidence else \
        " with no exit of its own (how, the log does not say)"
    alike, more, theirs = killed_alike(v, creator, [x for x, _ in orphans if x is not st])
    forked = start_method(pool) == "fork"
    who = "its workers" if pool.sidecar is None else f"its sidecar {pool.sidecar.pid}"
    after = parent_wait(v, st, creator.parent, end)
    held = f", holding {size_text(st.orphan_held)} (PSS)" if st.orphan_held else ""
    made = site(user_frame(pool.call.caller) or pool.call.caller)
    ports = ports_held(v, st)
    headline = ""
    if ports is not None:
        text, headline = _held_port(st, ports, forked, (
            f"when read at {_at(rel(ports[1]))}, and lived on until {_at(rel(end))}, {end - gone:.1f} s after "
            f"{creator.role} {creator.pid}{more} ended at {_at(rel(gone))}{how}{theirs}{after}"),
            f"{who} had nobody to use or stop them{held} (the pool made at {made})")
    else:
        pipes = (": forked workers inherit the creator's stdout and stderr, so a parent reading them to their end "
                 "(subprocess's communicate()) waits as long") if forked else ""
        text = (f"{creator.role.capitalize()} {creator.pid}{more} ended at {_at(rel(gone))}{how}, and its compile "
                f"pool ({_pool_name(st)}) outlived it by {end - gone:.1f} s{theirs}"
                f"{after or ', until ' + _at(rel(end))}; {who} lived on until {_at(rel(end))} with nobody to use or "
                f"stop them{held} (the pool made at {made}){pipes}.")
    return Finding(
        "pool-outlived-creator", "problem", text,
        sorted({p.pid for x in [st, *alike] for p in x.procs}), [f"{x.pool.creator.role} {x.pool.creator.pid} ended "
                                                                 f"at {_at(rel(a))}; its pool at {_at(rel(b))}"
                                                                 for x, (a, b) in orphans[:TEXT_PIDS]],
        (OUTLIVED_FORK_ADVICE if (torch_release(v.config_of(creator)[1]) or (2, 4)) >= (2, 4) else
         LEGACY_OUTLIVED_ADVICE) if forked else (
            f"end the pool before its creator ends: call {shutdown_path(v, creator)}() when its compiles are done"),
        {"hang_s": round(end - gone, 3), **({"idle_mib_s": st.orphan_mib_s} if st.orphan_mib_s else {}),
         **({"port_read_at": rel(ports[1])} if ports is not None else {})},
        # the parent's wait leads the Answer where it is shown (the user's symptom: communicate() never returned)
        f"{creator.role.capitalize()} {creator.pid}'s compile pool ({_pool_name(st)}) outlived it by "
        f"{end - gone:.1f} s{after}." if after and ports is None else headline)


def _held_port(st: PoolStory, ports: tuple[str, float, str], forked: bool, when: str, rest: str) -> tuple[str, str]:
    """pool_outlived_creator's text and Answer line where its processes held a listening socket: the port leads.
    Whose socket only where the record shows it (one socket in several of them, or the creator's too): a worker's
    own listener (a metrics server) reads the same. The Answer's line leaves out why it was the creator's."""
    creator = st.pool.creator
    pool = f"{creator.role.capitalize()} {creator.pid}'s compile pool ({_pool_name(st)})"
    sockets = "listening sockets" if " and " in ports[0] else "listening socket"
    held = f"{'the' if ports[2] or ' and ' in ports[0] else 'a'} {sockets} of {ports[0]}"
    unsure = "" if ports[2] else " (whether theirs was their creator's or one of their own, no record shows)"
    cause = f"forked workers inherit every fd their creator had open, its listening sockets too{unsure}, and" \
        if forked else "and"
    whose = f", their creator's ({ports[2]})," if ports[2] else ""
    text = (f"{pool} held {held}{whose} {when}; {rest}; {cause} a listening socket keeps its port bound while a "
            "process holds it: another bind() of that port fails (EADDRINUSE) until it is closed, at the latest as "
            "they end.")
    return text, f"{pool} held {held} {when}."


def pool_device_files(v: View) -> Finding | None:
    """Pool processes holding accelerator device files (pytorch#134084)."""
    holding = [p for pool in v.pools for p in v.story(pool).procs if p.devices]
    if not holding:
        return None
    paths = sorted({d for p in holding for d in p.devices})
    pids = sorted({p.pid for p in holding})
    settings = v.config_of(v.pools[0].creator)[0]
    method = settings.get("worker_start_method")
    start = (f"; worker_start_method is {method}: 'subprocess' starts the sidecar from a fresh interpreter"
             if method not in (None, "subprocess") else "")
    return Finding(
        "pool-device-files", "warning",
        f"{len(pids)} compile pool process(es) ({roles_text(holding)}) hold accelerator device files "
        f"({', '.join(paths[:4])}{' …' if len(paths) > 4 else ''}): pids {pid_text(pids)}; each holds the "
        "device's driver state while it lives.",
        pids, [f"{p.role} {p.pid}: {', '.join(p.devices)}" for p in holding[:TEXT_PIDS]],
        "a worker forked from a process that had opened the device inherits its files: start the pool before "
        f"the first device call, and shut it down after the last compile ({shutdown_path(v, v.pools[0].creator)}())"
        + start, {"processes": len(pids)})


# The executor class torch's fork/spawn pool is (2.8+): its ProcessPoolExecutor.shutdown is the pool's.
TORCH_EXECUTOR = "TrackedProcessPoolExecutor"


def _exit_shutdowns(v: View) -> list[Call]:
    """Pool shutdowns at a non-main process's own exit that took CHILD_EXIT_WAIT_S or more: torch's atexit
    shutdown_compile_workers, or (a multiprocessing child, whose atexit never runs) the finalizer torch
    registers with each pool calling SubprocPool.shutdown, or a fork/spawn pool's ProcessPoolExecutor.shutdown.
    Either way no user frame asked for it (a forked child's stack keeps the frame it was forked at: multiprocessing's
    exit handler, Call.at_exit, is no user's request)."""
    shutdowns = (targets.EXIT_SHUTDOWN, targets.POOL_SHUTDOWN, targets.EXECUTOR_SHUTDOWN)
    return [c for c in v.tagged(*shutdowns) if (c.parent is None or c.parent.tag not in shutdowns)
            and (c.tag != targets.EXECUTOR_SHUTDOWN or c.at_call.get("executor_class") == TORCH_EXECUTOR)
            and c.proc.role not in ("main", *GUARDED_ROLES) and c.thread in ("MainThread", "")
            and (user_frame(c.caller) is None or c.at_exit) and c.proc.pools and _took(v, c) >= CHILD_EXIT_WAIT_S]


def _took(v: View, c: Call) -> float:
    return max(0.0, (c.end if c.end is not None else c.proc.end if c.proc.end is not None else v.t_end) - c.ts)


def child_exit_wait(v: View) -> Finding | None:
    """A child spends seconds shutting its own pool down at exit: whoever joins it waits (pytorch#115366)."""
    slow = sorted(_exit_shutdowns(v), key=lambda x: -_took(v, x))  # the longest wait leads
    if not slow:
        return None
    c = slow[0]
    p = c.proc
    made = p.pools[-1].call
    how = "spawned" if not p.forked else "forked"
    still = "" if c.end is not None else ", and it never returned"
    label = label_for(p.argv) if p.argv else ""
    # multiprocessing's parent joins its child; another parent (an execnet gateway's) waits in its own way
    waits = "its parent's join() waits that long" if p.forked or label.startswith("multiprocessing") else \
        "whatever waits for it to end (its parent) waits that long"
    named = f" ({label})" if label and not label.startswith("multiprocessing") else ""
    return Finding(
        "child-exit-wait", "warning",
        f"{how.capitalize()} child {p.pid}{named} spent {_took(v, c):.1f} s in {targets.short_label(c.target)} at its "
        f"exit{still}, shutting down the pool it made at {site(user_frame(made.caller) or made.caller)}: {waits}"
        + (f" (+{len(slow) - 1} more child(ren))" if len(slow) > 1 else "") + ".",
        sorted({x.proc.pid for x in slow}), [f"{x.proc.pid}: {_took(v, x):.2f} s" for x in slow[:TEXT_PIDS]],
        f"call {shutdown_path(v, p)}() at the end of the child's work, so its exit does not hang on torch's "
        "exit-time shutdown (atexit, or the multiprocessing finalizer in a multiprocessing child); or compile in "
        "the parent, so the child makes no pool (pytorch#115366)",
        {"processes": len(slow), "exit_wait_s": round(sum(_took(v, x) for x in slow), 3),
         "hang_s": round(sum(_took(v, x) for x in slow), 3)})


FORK_ADVICE = ('start the workers without fork: worker_start_method="subprocess" (TORCHINDUCTOR_WORKER_START='
               "subprocess, torch's default), or compile without a pool: compile_threads=1 "
               "(TORCHINDUCTOR_COMPILE_THREADS=1); or make the pool before the process starts other threads")


def fork_pool_hang(v: View) -> Finding | None:
    """A fork pool made while its process ran other threads (the threads captured as it was made), and a wait of
    that process on the pool (AsyncCompile.wait, wait_pool_ready) that never returned or was interrupted: a fork
    copies only the forking thread, so a lock another held then is never released in a worker."""
    for pool in v.pools:
        threads = pool.call.at_call.get("threads")
        if start_method(pool) != "fork" or not isinstance(threads, int) or threads < 2:
            continue
        creator = pool.creator
        waits = [c for c in creator.calls.values() if c.tag in (targets.ASYNC_WAIT, targets.WAIT_POOL_READY)
                 and (c.end is None or c.error) and (c.end is None or c.end >= pool.call.ts)]
        if not waits:
            continue
        c = waits[0]
        end = wait_end(v, c)
        waited = end - c.ts
        if waited < HANG_S:
            continue
        after, lived = lived_on(v, c, end)
        return Finding(
            "fork-pool-hang", "problem",
            f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its fork compile pool "
            f"{wait_how(v, c)}{after}. {held_words(v, pool, c.ts, end, c)}. "
            f"Its workers were forked while it ran {threads} threads (the pool made at {site(pool.call.caller)}): "
            "a fork copies only the forking thread, so a lock another thread held then is never released in a "
            "worker, and a job that needs it never ends.",
            [creator.pid, *(q.pid for q in pool.members)], [f"threads at the pool's making: {threads}"],
            FORK_ADVICE, {"hang_s": round(waited, 3)},
            f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its fork compile pool "
            f"{wait_how(v, c)}{lived}"
            + (f"; {short}" if (short := held_short(v, pool, c.ts, end)) else "")
            + f"; its workers were forked while it ran {threads} threads.")
    return None


GUARD_ADVICE = ('put the script\'s top-level work under `if __name__ == "__main__":` (a spawned process imports the '
                "main script again, as __mp_main__, and runs all of its unguarded top level); or start the pool's "
                'workers without spawn: worker_start_method="subprocess" (TORCHINDUCTOR_WORKER_START=subprocess)')


def _parent_wait(v: View, pool: Pool | None) -> str:
    """How long the pool's creator waited in the call that made the pool (the compile, or wait_pool_ready) for
    the spawned worker that died, where that call ended with an error: the wait a user sees as a hang."""
    outer = pool.call.outermost() if pool is not None else None
    if pool is None or outer is None or outer.end is None or not outer.error:
        return "BrokenProcessPool in its parent"
    return (f"{pool.creator.role} {pool.creator.pid} waited {outer.end - outer.ts:.1f} s in "
            f"{targets.short_label(outer.target)}() from {v.rel(outer.ts) or 0:.1f} s, then got "
            f"{outer.error.split(':', 1)[0]}")


def spawn_main_reimport(v: View) -> Finding | None:
    """A spawned child (a spawn pool's worker, say) re-imported the main script as __mp_main__ and its top level
    made traced calls there (the script has no `if __name__ == "__main__":` around them): from the calls' own
    stacks. Where one raised multiprocessing's bootstrapping error, the child died and its pool broke."""
    calls = [c for c in v.calls if c.mp_main]
    if not calls:
        return None
    c = next((x for x in calls if x.error), calls[0])
    child = c.proc
    parent = child.parent
    started = (child.start or c.ts) + 1.0  # create times are rounded: allow a moment before the pool's making
    pool = next((x for x in reversed(v.pools) if x.creator is parent and x.call.ts <= started), None)
    of = (f", a worker of the spawn compile pool {parent.role} {parent.pid} made,"
          if pool is not None and parent is not None else "")
    ran = f"{targets.short_label(c.target)}() at {site(c.caller)}"
    if c.error and "bootstrapping phase" in c.error:
        text = (f"Spawned process {child.pid}{of} died as it started, breaking its pool "
                f"({_parent_wait(v, pool)}): it imported the main script again (as __mp_main__) and the "
                f"script's unguarded top level ran {ran}, which raised {c.error.split(':', 1)[0]} (it tried to "
                "start processes before its own start had finished).")
    else:
        raised = f" and raised {error_words(c.error)[:120]}" if c.error else ""
        text = (f"The main script's top level ran again in spawned process {child.pid}{of.rstrip(',')}, which "
                f"imported it as __mp_main__: {ran} ran in the child{raised}.")
    return Finding(
        "spawn-main-reimport", "problem" if c.error else "warning", text,
        sorted({x.proc.pid for x in calls}), [f"call stack through multiprocessing.spawn._fixup_main_from_path "
                                              f"in {x.proc.pid}" for x in calls[:TEXT_PIDS]],
        GUARD_ADVICE, {})
