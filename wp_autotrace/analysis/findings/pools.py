"""Findings about compile pools: nested and bypassing warm_pool calls, a wakeup that woke no sidecar, pools
that outlived their creator, device files, and how their workers start (a fork pool's hang, a spawned child's
re-import of the main script). Idle pools: findings/idle.py; the waits at exit that shutting pools down costs:
findings/exitwaits.py; a sidecar that never served: findings/sidecars.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ...common.vocab import BOOTSTRAPPING_ERROR, GUARDED_ROLES
from ..derive.callers import user_frame
from ..derive.endings import torch_release
from ..derive.poolprocs import start_method
from ..derive.pools import PoolStory
from ..words.fmt import TEXT_PIDS, error_words, pid_text, seconds_text, site, size_text
from .base import Finding, in_ranks, plugin_advice, roles_text, sites_text
from .exitwaits import shutdown_path
from .held import held_short, held_words, lived_on, wait_end, wait_how
from .orphans import parent_wait, ports_held
from .rank import HANG_S
from .signals import killed_alike

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Pool

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
    """A pool whose processes lived on after the process that made them ended (derive/poolprocs.outlived_creator):
    nobody could use or stop them; a forked worker holds what it inherited (the creator's listening sockets, its
    stdout and stderr). Told with the creator's end, the ports they held (the cause leads: the user's symptom is
    the port), the parent's wait where a record shows it (findings/orphans.py), and what they held."""
    orphans = [(st, span) for pool in v.pools if (span := (st := v.story(pool)).orphaned) is not None]
    if not orphans:
        return None
    st, (gone, end) = max(orphans, key=lambda x: x[1][1] - x[1][0])
    pool, creator, rel = st.pool, st.pool.creator, v.rel

    def at(x: float | None) -> str:
        return seconds_text(rel(x))

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
            f"when read at {at(ports[1])}, and lived on until {at(end)}, {end - gone:.1f} s after "
            f"{creator.role} {creator.pid}{more} ended at {at(gone)}{how}{theirs}{after}"),
            f"{who} had nobody to use or stop them{held} (the pool made at {made})")
    else:
        pipes = (": forked workers inherit the creator's stdout and stderr, so a parent reading them to their end "
                 "(subprocess's communicate()) waits as long") if forked else ""
        text = (f"{creator.role.capitalize()} {creator.pid}{more} ended at {at(gone)}{how}, and its compile "
                f"pool ({st.name}) outlived it by {end - gone:.1f} s{theirs}"
                f"{after or ', until ' + at(end)}; {who} lived on until {at(end)} with nobody to use or "
                f"stop them{held} (the pool made at {made}){pipes}.")
    return Finding(
        "pool-outlived-creator", "problem", text,
        sorted({p.pid for x in [st, *alike] for p in x.procs}), [f"{x.pool.creator.role} {x.pool.creator.pid} ended "
                                                                 f"at {at(a)}; its pool at {at(b)}"
                                                                 for x, (a, b) in orphans[:TEXT_PIDS]],
        (OUTLIVED_FORK_ADVICE if (torch_release(v.config_of(creator)[1]) or (2, 4)) >= (2, 4) else
         LEGACY_OUTLIVED_ADVICE) if forked else (
            f"end the pool before its creator ends: call {shutdown_path(v, creator)}() when its compiles are done"),
        {"hang_s": round(end - gone, 3), **({"idle_mib_s": st.orphan_mib_s} if st.orphan_mib_s else {}),
         **({"port_read_at": rel(ports[1])} if ports is not None else {})},
        # the parent's wait leads the Answer where it is shown (the user's symptom: communicate() never returned)
        f"{creator.role.capitalize()} {creator.pid}'s compile pool ({st.name}) outlived it by "
        f"{end - gone:.1f} s{after}." if after and ports is None else headline)


def _held_port(st: PoolStory, ports: tuple[str, float, str], forked: bool, when: str, rest: str) -> tuple[str, str]:
    """pool_outlived_creator's text and Answer line where its processes held a listening socket: the port leads.
    Whose socket only where the record shows it (one socket in several of them, or the creator's too): a worker's
    own listener (a metrics server) reads the same. The Answer's line leaves out why it was the creator's."""
    creator = st.pool.creator
    pool = f"{creator.role.capitalize()} {creator.pid}'s compile pool ({st.name})"
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
    if c.error and BOOTSTRAPPING_ERROR in c.error:
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
