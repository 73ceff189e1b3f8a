"""Findings as a registry: each one a small function over the analysed run.

A finding function takes the View (view.View: the selected runs' model
plus what is derived from it) and returns a Finding or None. FINDINGS
lists them in the order they are shown. One finding per kind, aggregated
(counts and the first few pids), never one line per process; the full pid
lists are in ``pids`` (--json).

Advice is concrete where the log allows: a caller in a device plugin release
that plugins.py knows gets that release's known behaviour and fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ..common import targets as T
from ..common.vocab import COMPILE_WORKER, GUARDED_ROLES, SIDECAR_ROLES
from .fmt import TEXT_PIDS, mib_s_text, pid_text, site, size_text
from .model import RUN_END_UNSEEN, RUN_IN_PROGRESS, RUN_KILLED, signal_name
from .plugins import advice_for_frame
from .pools import PoolStory, user_frame

if TYPE_CHECKING:
    from .model import Call, Pool, Process, Run
    from .view import View

# The main process waiting longer than this at exit is worth a finding.
SLOW_EXIT_WAIT_S = 5.0
# A pool idle this long after its last job is worth a finding: shorter gaps are the pause
# between two compiles of one training step (and torch 2.10+ quiesces after 60 s by default).
IDLE_POOL_S = 5.0
# A child process spending this long shutting its pool down at exit delays whoever joins it
# (pytorch#115366 measured ~1 s per spawn child).
CHILD_EXIT_WAIT_S = 0.5


class Finding(NamedTuple):
    """One finding: a stable kind, how bad, one sentence, the evidence, what to do, what it cost."""

    kind: str
    severity: str  # "problem", "warning" or "info"
    text: str
    pids: list[int]
    evidence: list[str]
    advice: str
    cost: dict[str, Any]


def _sites(calls: Any) -> str:
    sites = sorted({site(c.caller) for c in calls})
    return ", ".join(sites[:3]) + (f" (+{len(sites) - 3} more)" if len(sites) > 3 else "")


def _roles(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


NESTED_ADVICE = (
    "the backend imported in every sidecar calls warm_pool() at import: keep it out of the sidecars "
    "(TORCH_DEVICE_BACKEND_AUTOLOAD=0 in the sidecar's environment, as newer torch_npu releases do around "
    "their call), or run with WP_AUTOTRACE_GUARD=nested-pools")


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


def _in_ranks(v: View, procs: Any) -> str:
    """' in rank 0, 1' (the ranks the processes belong to), or ''."""
    ranks = sorted({v.rank_of[p.index] for p in procs if p.index in v.rank_of})
    if not ranks:
        return ""
    names = [r.removeprefix("rank ") for r in ranks]
    return f" in {'rank' if len(names) == 1 else 'ranks'} {', '.join(names[:8])}" + (
        f" (+{len(names) - 8} more)" if len(names) > 8 else "")


def nested_pools(v: View) -> Finding | None:
    nested = [c for c in v.warm_calls if c.proc.role in GUARDED_ROLES]
    if not nested:
        return None
    pids = sorted({c.proc.pid for c in nested})
    return Finding(
        "nested-pools", "problem",
        f"Nested compile pools: warm_pool ran inside {len(pids)} compile sidecar/worker process(es)"
        f"{_in_ranks(v, (c.proc for c in nested))} (pids {pid_text(pids)}), called from {_sites(nested)}; "
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
        f"(pids {pid_text(pids)}): a direct call from {_sites(bypass)} bypasses that guard, which only "
        "torch's own maybe_warm_pool() honours.",
        pids, [site(c.caller) for c in bypass[:TEXT_PIDS]],
        plugin_advice(bypass, "TORCH_WARM_POOL only stops torch's own maybe_warm_pool(); stop the direct "
                      "warm_pool() call at its source (see the call sites)" + (
                          "; the guard is on and refuses it in pool processes, not in the main process"
                          if any(r.guard for r in v.runs) else " or use WP_AUTOTRACE_GUARD=nested-pools")),
        {"processes": len(pids)})


def leftovers(v: View) -> Finding | None:
    if not v.leftover_count:
        return None
    listed = v.leftover_procs
    rss = v.leftover_rss
    unlisted = v.leftover_count - len(listed)
    more = f"; {unlisted} more not listed (the log's list was cut)" if unlisted > 0 else ""
    mb = f", holding about {size_text(v.leftover_real)}" if v.leftover_real else ""
    # How the main process ended, in words: "killed" only where a signal is known (`run` waited for it).
    killed = next((_no_exit_how(r)[0] for r in v.runs if v.states[r.id] == RUN_KILLED), "")
    pending = _provisional(v)
    # Those the log later saw end (killed by a runner, or finished): nothing of them is left to end now.
    ended = [p for p in listed if p.end is not None]
    since = ""
    if ended and len(ended) == len(listed) and not unlisted:
        since = "; all have ended since"
    elif ended:
        since = f"; {len(ended)} have ended since (pids {pid_text(p.pid for p in ended)})"
    todo = ("nothing is left of them to end; stop their cause" if since.startswith("; all") else
            "end them now with `wp-autotrace cleanup LOG` (it checks each is still the process the log saw); "
            "then stop their cause")
    # Pools are one cause among others: named only when a pool process is among those left. The
    # Answer quotes this advice above the findings, so it points at no place in the report.
    pool_left = any(p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER for p in listed)
    cause = (": pools started where nothing shuts them down (each pool's finding says where)" if pool_left
             else ": what started them (the Process tree names each one's parent)")
    return Finding(
        "leftovers", "problem",
        f"{v.leftover_count} process(es) outlived the main process{_in_ranks(v, listed)} "
        f"({f'it {killed}; ' if killed else ''}{_roles(listed)}){mb}: "
        f"pids {pid_text(p.pid for p in listed)}{more}{pending}{since}.",
        sorted(p.pid for p in listed), [],
        todo + cause,
        {"processes": v.leftover_count, "leftover_rss_bytes": rss, "leftover_pss_bytes": v.leftover_pss,
         "leftover_real_bytes": v.leftover_real})


def _provisional(v: View) -> str:
    """Where a left-behind list comes from when it is not the watcher's verdict, in words ("" when it is)."""
    runs = [r for r in v.runs if r.verdict_pending or r.no_verdict]
    if not runs:
        return ""
    whence = " and ".join(sorted({"the main process's own list at its exit" if r.provisional_from == "below"
                                  else "the last look after the main process ended" for r in runs}))
    state = "verdict pending" if any(r.verdict_pending for r in runs) else "no verdict will come"
    return f" ({state}: from {whence})"


def verdict_pending(v: View) -> Finding | None:
    """The main process ended, and nothing yet says what it left: no verdict, no look after its end."""
    runs = [r for r in v.runs if r.verdict_pending and not r.provisional_from]
    if not runs:
        return None
    return Finding(
        "verdict-pending", "warning",
        "Verdict pending: the main process ended, but the watcher has not yet written what the run left "
        "behind, and no look after that end is in the log: what is still running is not known yet.",
        sorted(r.root.pid for r in runs if r.root is not None), [],
        "read the report again in a few seconds (the watcher writes its verdict shortly after the main "
        "process ends)", {})


def _clean_end(p: Process) -> bool:
    return p.exit_how in ("exit", "os._exit")


def _ended_before(p: Process, asked: float | None) -> bool:
    """p ended without a clean exit before it was asked to stop (or never was): killed, not stopped."""
    return p.end is not None and not _clean_end(p) and (asked is None or p.end < asked)


def _sidecar_killed(pool: Pool) -> bool:
    """Ended without a clean exit and never got its shutdown request (traced: SubprocMain._shutdown
    never ran; untraced: it was gone before its pool asked it to stop)."""
    side = pool.sidecar
    if side is None:
        return False
    if pool.shutdown_at is not None and side.end is not None and side.end >= pool.shutdown_at:
        return False  # it was asked to stop and did: however it ended, not a kill
    if side.traced:
        return side.end is not None and not _clean_end(side) and not side.served
    return _ended_before(side, pool.shutdown_at)


def sidecars_killed(v: View) -> Finding | None:
    """Sidecars that ended without a clean exit before their pool asked them to stop."""
    bad = [pool.sidecar for pool in v.pools if _sidecar_killed(pool)]
    if not bad:
        return None
    pids = sorted({p.pid for p in bad if p is not None})
    return Finding(
        "sidecar-killed", "warning",
        f"{len(pids)} compile sidecar(s) ended without a clean exit and without a shutdown request "
        f"(killed, or vanished): pids {pid_text(pids)}.",
        pids, [], "a sidecar dying early loses its pool's jobs; look for an OOM kill or a crash in its workers",
        {"processes": len(pids)})


def _error_text(p: Process) -> str:
    err = p.errors[0]
    origin = err.get("origin")
    where = f" ({site(origin)})" if origin else ""
    return f"{err.get('exc_type') or 'an exception'}: {err.get('message', '')[:120]}{where}"


def sidecars_never_served(v: View) -> Finding | None:
    """Traced sidecars that exited (or are left) without ever being asked to shut down."""
    idle = [pool.sidecar for pool in v.pools if pool.sidecar is not None and pool.sidecar.traced
            and not pool.sidecar.served and _clean_end(pool.sidecar)]
    idle += [p for p in v.procs if p.role in SIDECAR_ROLES and p.errors and p not in idle]
    if not idle:
        return None
    pids = sorted({p.pid for p in idle})
    raised = [p for p in idle if p.errors]
    why = (f"; sidecar {raised[0].pid}'s main() raised {_error_text(raised[0])}"
           + (f" ({len(raised)} raised)" if len(raised) > 1 else "")) if raised else \
        ": its main loop never served the pool (no SubprocMain._shutdown)"
    warmed = {c.proc.index for c in v.warm_calls}
    if any(p.index in warmed for p in raised):
        advice = ("its own import started a pool (see nested-pools) and its main() then failed: keeping the "
                  "backend out of the sidecars fixes both")
    elif raised:
        advice = f"fix what its main() raised ({_error_text(raised[0])}); the sidecar cannot serve until then"
    else:
        advice = ("nothing asked it to stop: its pool was never shut down (torch's shutdown_compile_workers "
                  "never ran, or ran in another process); shut the pool down before exit")
    return Finding(
        "sidecar-never-served", "problem" if raised else "warning",
        f"{len(pids)} compile sidecar(s) never served their pool{_in_ranks(v, idle)} (pids {pid_text(pids)}){why}.",
        pids, [_error_text(p) for p in raised[:TEXT_PIDS]], advice,
        {"processes": len(pids), "cpu_s": None})


def slow_exit_wait(v: View) -> Finding | None:
    slow = [c for c in v.calls if c.tag == T.EXIT_SHUTDOWN and c.proc.role == "main"
            and ((c.end is not None and c.end - c.ts > SLOW_EXIT_WAIT_S) or c.error)]
    if not slow:
        return None
    waits = [(c.end if c.end is not None else v.t_end) - c.ts for c in slow]
    c = slow[0]
    how = f", interrupted ({c.error})" if c.error else ""
    return Finding(
        "slow-exit-wait", "problem",
        f"The main process waited {waits[0]:.1f} s in shutdown_compile_workers at exit{how}.",
        sorted({c.proc.pid for c in slow}), [],
        ("torch waits for every pool it started, nested sidecars included: stop the nested pools (see "
         "nested-pools), or quiesce/shut the pool down before exit") if v.max_depth > 1 else
        (f"torch waits at exit for every pool it started: call {shutdown_path(v, c.proc)}() after your last "
         "compile, where a slow pool shutdown costs you least"),
        {"exit_wait_s": round(sum(waits), 3)})


def guard_refused(v: View) -> Finding | None:
    if not v.blocked:
        return None
    pids = sorted({c.proc.pid for c in v.blocked})
    names = sorted({T.short_label(c.target) for c in v.blocked})
    return Finding(
        "guard-refused", "info",
        f"Guard nested-pools refused {len(v.blocked)} call(s) in pids {pid_text(pids)} ({', '.join(names)}).",
        pids, [site(c.caller) for c in v.blocked[:TEXT_PIDS]], "", {"calls": len(v.blocked)})


def guard_idle(v: View) -> Finding | None:
    if v.blocked or not any(r.guard for r in v.runs):
        return None
    return Finding("guard-idle", "info", "Guard nested-pools was on and refused nothing.", [], [],
                   "", {})


def tracer_trouble(v: View) -> Finding | None:
    errors = [e for r in v.runs for e in r.tracer_errors]
    dropped = sum(r.dropped for r in v.runs)
    if not errors and not dropped:
        return None
    return Finding(
        "tracer-errors", "warning",
        f"The tracer reported {len(errors)} error(s) and dropped {dropped} record(s): this report may miss events.",
        [], errors[:TEXT_PIDS], "see the errors; a dropped record usually means the log's disk was full",
        {"records_dropped": dropped})


def data_cut(v: View) -> Finding | None:
    cut = [c for r in v.runs for c in r.cut]
    if not cut:
        return None
    return Finding("log-cut", "warning", f"Parts of the log were cut: {'; '.join(sorted(set(cut))[:3])}.",
                   [], cut[:TEXT_PIDS], "counts above come from the records' own totals where they have them", {})


def _unreturned(v: View) -> list[Call]:
    """Calls entered and never left, in processes whose end was seen (a live loop is not stuck)."""
    return [c for c in v.calls if c.end is None and not c.blocked and c.tag not in _SERVING_LOOPS
            and c.proc.end is not None]


# Calls that run for a process's whole life: one still open when it ended is how it ends.
_SERVING_LOOPS = (T.SIDECAR_MAIN, T.DATALOADER_LOOP)


def _last_seen(v: View, p: Process) -> str:
    """Where a process was when last seen: its last record (not process_exit)."""
    r = p.last
    if not r:
        return "no record"
    what = r["event"] + (f" {T.short_label(r['target'])}" if r.get("target") else "")
    return f"last record {what} at {r['ts'] - v.t0:.1f} s"


def call_site(c: Call) -> str:
    """Where a call came from for people: its user frame; for a pool call made from no user frame
    (torch's atexit, python -c's <string>), the user line that made the process's pool."""
    own = user_frame(c.caller)
    if own is not None or not c.proc.pools:
        return site(c.caller)
    made = c.proc.pools[-1].call
    return f"torch at exit, for the pool made at {site(user_frame(made.caller) or made.caller)}"


def _open_call_text(v: View, c: Call) -> str:
    took = max(0.0, (c.proc.end or v.t_end) - c.ts)
    how = c.proc.exit_how or "ended"
    return (f"{T.short_label(c.target)} in {c.proc.role} {c.proc.pid}, open {took:.1f} s until the process "
            f"ended ({how}), called from {call_site(c)}; {_last_seen(v, c.proc)}")


def calls_never_returned(v: View) -> Finding | None:
    open_calls = _unreturned(v)
    if not open_calls:
        return None
    names: dict[str, int] = {}
    for c in open_calls:
        names[T.short_label(c.target)] = names.get(T.short_label(c.target), 0) + 1
    more = "" if len(names) == 1 else " (" + ", ".join(f"{n} {name}" for name, n in sorted(names.items())) + ")"
    return Finding(
        "call-never-returned", "warning",
        f"{len(open_calls)} traced call(s) never returned{more}, e.g. {_open_call_text(v, open_calls[0])}.",
        sorted({x.proc.pid for x in open_calls}),
        [_open_call_text(v, x) for x in open_calls[:TEXT_PIDS]],
        "a process that exited cleanly left the call running in another thread; one killed (or ended by "
        "os._exit) died inside it: see how each ended, and look for what it was waiting on", {})


def _root_runs(v: View, state: str) -> list[Run]:
    return [r for r in v.runs if v.states.get(r.id) == state and r.root is not None]


def _no_exit_how(r: Run) -> tuple[str, str, str]:
    """How a main process without process_exit ended, in words, a note, and where to look for the
    cause: from `run`'s waited status when it ran the program, else both possibilities."""
    waited = r.waited
    if waited is None or waited.status >= 0:
        return ("ended without process_exit", " (killed, or os._exit)",
                "find what ended it (os._exit in the code; the OOM killer: dmesg; a time limit)")
    sig = -waited.status
    name = signal_name(sig)
    if sig in waited.forwarded:
        return (f"was ended by {name}", " (wp-autotrace run was sent it and passed it on)",
                f"it was asked to stop: find what sent {name} to wp-autotrace run, if that was not you")
    if name == "SIGKILL":
        return "was killed by SIGKILL", "", "find what killed it (the OOM killer: dmesg; a time limit)"
    return f"was ended by {name}", "", f"find what sent {name} (a time limit, a scheduler, a user)"


def _left_alive(r: Run) -> bool:
    """Something the run left behind may still be running, as far as the log knows: a leftover not seen
    to end since, or one the verdict counted without listing."""
    return r.leftover_count > len(r.leftover) or any(p.end is None for p in r.leftover)


def root_killed(v: View) -> Finding | None:
    """The main process ended without process_exit: the watcher saw it go, or nothing saw it end."""
    runs = _root_runs(v, RUN_KILLED) + _root_runs(v, RUN_END_UNSEEN)
    if not runs:
        return None
    r = runs[0]
    root = r.root
    assert root is not None
    advice = "its pools were never shut down: end what is left with `wp-autotrace cleanup LOG`"
    if v.states[r.id] == RUN_KILLED:
        when = root.gone if root.gone is not None else r.end
        at = f" at {when - v.t0:.1f} s" if when is not None else ""
        alive = r.leftover_count or max((n for ts, n in r.tree_counts if when is not None and ts >= when),
                                        default=0)
        how, note, cause = _no_exit_how(r)
        text = (f"The main process {root.pid} {how}{at}{note}; its exit handlers did not run; "
                f"seen after it: {alive} process(es) of the run still alive.")
        if r.leftover_seen and not _left_alive(r):  # the verdict, and what the log saw end since
            advice = f"nothing of the run is left to end; {cause}"
    else:
        text = (f"The main process {root.pid} has no process_exit and nothing saw it end (no watcher record "
                f"after it): it was killed, or the log stops early; {_last_seen(v, root)}.")
    return Finding("root-killed", "problem", text, [root.pid], [], advice, {})


def root_os_exit(v: View) -> Finding | None:
    """`run` saw the main process exit with a code, and it wrote no process_exit: it left by os._exit."""
    runs = [r for r in v.runs if r.root is not None and r.waited is not None and r.waited.status >= 0
            and not r.root.exited]
    if not runs:
        return None
    r = runs[0]
    assert r.root is not None and r.waited is not None
    return Finding(
        "root-os-exit", "info",
        f"The main process {r.root.pid} exited {r.waited.status} without running its exit handlers "
        "(os._exit: no process_exit, and torch's atexit shutdown of its pools did not run).",
        [r.root.pid], [], "" if not r.leftover_count else
        "shut pools down before os._exit, or exit normally" + (
            "; end what is left with `wp-autotrace cleanup LOG`" if _left_alive(r) else
            " (what it left has ended since: nothing is left to end)"),
        {"exit_code": r.waited.status})


def no_verdict(v: View) -> Finding | None:
    """No verdict will ever come (no watcher ran, or it ended without one): say so, never 'pending'."""
    runs = [r for r in v.runs if r.no_verdict]
    if not runs:
        return None
    r = runs[0]
    source = {"sample": "the last sample after the main process ended",
              "below": "the main process's own list of its live descendants at its exit"}.get(r.provisional_from)
    what = (f" What was left behind comes from {source}." if source else
            "" if r.root is not None and r.root.pid == 1 else " What was left behind is not known.")
    more = f" ({len(runs) - 1} more run(s) alike)" if len(runs) > 1 else ""
    return Finding(
        "no-verdict", "warning" if r.root is None or r.root.pid != 1 else "info",
        f"No verdict will come: {r.no_verdict}.{what}{more}",
        sorted(x.root.pid for x in runs if x.root is not None), [],
        "" if source or (r.root is not None and r.root.pid == 1) else
        "look for the run's processes with `ps`; cleanup acts only on what the log proves", {})


def records_lost(v: View) -> Finding | None:
    """The watcher could not write some records (a full disk) and kept sampling: the log is incomplete."""
    lost = sum(r.watcher_dropped for r in v.runs)
    if not lost:
        return None
    return Finding(
        "records-lost", "warning",
        f"The watcher could not write {lost} record(s) (the log's disk was full or unwritable) and kept "
        "sampling: processes, ends and samples of that time may be missing from this report.",
        [], [], "give the log's filesystem room (WP_AUTOTRACE_LOG on a disk with space)",
        {"records_dropped": lost})


def run_in_progress(v: View) -> Finding | None:
    """The main process has not ended: nothing about the exit (leftovers, exit wait) is known yet."""
    runs = _root_runs(v, RUN_IN_PROGRESS)
    if not runs:
        return None
    r = runs[0]
    alive = f"; {r.tree_counts[-1][1]} process(es) alive at the last sample" if r.tree_counts else ""
    if not r.watcher_pids:  # only the log's age says so
        alive += "; no watcher record confirms it: the log's last record is recent"
    return Finding(
        "in-progress", "info",
        f"Run {r.id or '?'} is in progress: main process {r.root.pid if r.root else '?'} had not exited at the "
        f"last record ({(r.end or v.t0) - v.t0:.1f} s in){alive}; what it leaves behind is not known yet.",
        [], [], "report again when it ends, or follow it with `wp-autotrace watch LOG`", {})


def wakeup_no_pool(v: View) -> Finding | None:
    """AsyncCompile.wakeup() called, returned, and woke no sidecar (torch returned early)."""
    woke = {id(c.parent) for c in v.calls if c.tag == T.POOL_WAKEUP and c.parent is not None}
    idle = [c for c in v.calls if c.tag == T.ASYNC_WAKEUP and c.end is not None and id(c) not in woke
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
        f"AsyncCompile.wakeup() was called {len(idle)} time(s) (pids {pid_text(pids)}, from {_sites(idle)}) "
        f"and returned without waking a sidecar: {why}.",
        pids, [site(c.caller) for c in idle[:TEXT_PIDS]], advice, {"calls": len(idle)})


def shutdown_path(v: View, p: Process) -> str:
    """torch's shutdown_compile_workers as this run's torch names it: from a traced call of it, else from
    where it lives by release (docs/torch-coverage.md: codecache in 2.3, async_compile from 2.4)."""
    seen = next((c.target for c in v.calls if c.tag == T.EXIT_SHUTDOWN), None)
    if seen:
        module, name = T.split_label(seen)
        return f"{module}.{name}"
    version = v.config_of(p)[1]
    major_minor = tuple(int(x) for x in version.split("+")[0].split(".")[:2] if x.isdigit())
    module = "torch._inductor.codecache" if major_minor == (2, 3) else "torch._inductor.async_compile"
    return f"{module}.shutdown_compile_workers"


# torch's quiesce settings (torch/_inductor/config.py, 2.10+): quiesce_async_compile_pool is on by default
# in 2.13 (env TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL); quiesce_async_compile_time (60 s) has no env var.
QUIESCE_POOL = "quiesce_async_compile_pool"
QUIESCE_TIME = "quiesce_async_compile_time"


def knob_advice(v: View, p: Process, st: PoolStory | None = None) -> str:
    """What ends an idle pool, in the names the run's torch has (its config record's knobs), with the
    quiesce settings the pool itself used (its SubprocPool.__init__ capture) over the import-time ones."""
    settings, _, knobs = v.config_of(p)
    parts = [f"call {shutdown_path(v, p)}() after your last compile (it stops the sidecar and its workers)"]
    if "compile_threads" in knobs or "compile_threads" in settings:
        parts.append("or compile without a pool: compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1 "
                     f"(now {settings.get('compile_threads', '?')})")
    if any("quiesce" in k for k in knobs):
        parts.append(_quiesce_advice(v, settings, st))
    return "; ".join(parts)


def _quiesce_advice(v: View, settings: dict[str, Any], st: PoolStory | None) -> str:
    """Lower quiesce_async_compile_time where quiesce is on (torch 2.13's default); enable it where off."""
    used = st.pool.call.ret.get("quiesce_after_s") if st is not None else None
    at_import = settings.get(QUIESCE_TIME)
    values = ([f"{used:g} s for this pool"] if isinstance(used, (int, float)) else []) + (
        [f"{at_import} s at import"] if at_import is not None and at_import != used else [])
    quiesced = [ts for ts, _ in st.quiesced if st.busy_until <= ts <= st.idle_to] if st is not None else []
    if quiesced and st is not None:
        values.append(f"its workers quiesced {quiesced[0] - st.busy_until:.1f} s after its last job")
    now = f" ({'; '.join(values)})" if values else ""
    if isinstance(used, (int, float)) or (used is None and settings.get(QUIESCE_POOL) is True):
        return (f"or stop idle workers sooner: lower {QUIESCE_TIME}{now}, in code before the pool is made "
                f"(torch._inductor.config.{QUIESCE_TIME} = N), though the sidecar stays until shutdown")
    return (f"or stop idle workers sooner: {QUIESCE_POOL}=True (TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL=1) "
            f"with a low {QUIESCE_TIME}{now}, though the sidecar stays until shutdown")


def _pool_name(st: PoolStory) -> str:
    n = len(st.workers)
    return f"sidecar {st.pool.sidecar_pid}" + (f" + {n} worker{'s' if n != 1 else ''}" if n else "")


def _at(x: float | None) -> str:
    return f"{x:.1f} s" if x is not None else "?"


def _idle_text(v: View, st: PoolStory) -> str:
    pool = st.pool
    rel = v.rel
    last = "its last job" if pool.last_job is not None else "it was ready" if st.ready_at is not None \
        else "its sidecar started serving"
    if st.alive_at_end:
        until = "to the end of the log (still running)"
    elif st.shutdown_by:
        until = f"until {st.shutdown_by} shut it down at {_at(rel(pool.shutdown_at))}"
    else:
        until = f"until its sidecar ended at {_at(rel(pool.sidecar.end if pool.sidecar else None))}"
    covered = (f" ({len(st.span_sampled)} of {len(st.in_span)} processes read)"
               if len(st.span_sampled) < len(st.in_span) else "")
    held = (f", holding {size_text(st.held_bytes)}{covered}" if st.held_bytes else "") + (
        f": {mib_s_text(st.idle_mib_s)}" if st.idle_mib_s else "")
    quiesced = [(ts, by) for ts, by in st.quiesced if st.busy_until <= ts <= st.idle_to]
    q = ""
    if quiesced:
        q = f"; {quiesced[0][1]} stopped its workers at {_at(rel(quiesced[0][0]))}, the sidecar stayed"
    made = site(user_frame(pool.call.caller) or pool.call.caller)
    return (f"pool of {_pool_name(st)} (made by {pool.creator.role} {pool.creator.pid} at {made}) idle "
            f"{st.idle_s:.1f} s after {last} (from {_at(rel(st.busy_until))}) {until}{held}{q}")


def idle_pools(v: View) -> Finding | None:
    """Pools that sat idle after their last job, holding memory: how long, how much, and what ends them."""
    idle = sorted((st for pool in v.pools if (st := v.story(pool)).idle_s >= IDLE_POOL_S),
                  key=lambda st: (-(st.idle_mib_s or 0.0), -st.idle_s))
    if not idle:
        return None
    total = sum(st.idle_mib_s or 0.0 for st in idle)
    more = (f" (+{len(idle) - 1} more idle pool(s)" + (f"; {mib_s_text(total)} in all" if total else "") + ")"
            if len(idle) > 1 else "")
    pids = sorted({p.pid for st in idle for p in st.procs})
    first = idle[0]
    return Finding(
        "idle-pool", "warning", f"A {_idle_text(v, first)}{more}.", pids,
        [_idle_text(v, st) for st in idle[:TEXT_PIDS]], knob_advice(v, first.pool.creator, first),
        {"pools": len(idle), "idle_s": round(sum(st.idle_s for st in idle), 3), "idle_mib_s": round(total, 1),
         "held_pss_bytes": sum(st.held_bytes or 0 for st in idle) or None})


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
        f"{len(pids)} compile pool process(es) ({_roles(holding)}) hold accelerator device files "
        f"({', '.join(paths[:4])}{' …' if len(paths) > 4 else ''}): pids {pid_text(pids)}; each holds the "
        "device's driver state while it lives.",
        pids, [f"{p.role} {p.pid}: {', '.join(p.devices)}" for p in holding[:TEXT_PIDS]],
        "a worker forked from a process that had opened the device inherits its files: start the pool before "
        f"the first device call, and shut it down after the last compile ({shutdown_path(v, v.pools[0].creator)}())"
        + start, {"processes": len(pids)})


def _exit_shutdowns(v: View) -> list[Call]:
    """Pool shutdowns at a non-main process's own exit that took CHILD_EXIT_WAIT_S or more: torch's atexit
    shutdown_compile_workers, or (a multiprocessing child, whose atexit never runs) the finalizer torch
    registers with each pool calling SubprocPool.shutdown. Either way no user frame asked for it."""
    shutdowns = (T.EXIT_SHUTDOWN, T.POOL_SHUTDOWN)
    return [c for c in v.calls if c.tag in shutdowns and (c.parent is None or c.parent.tag not in shutdowns)
            and c.proc.role not in ("main", *GUARDED_ROLES) and c.thread in ("MainThread", "")
            and user_frame(c.caller) is None and c.proc.pools and _took(v, c) >= CHILD_EXIT_WAIT_S]


def _took(v: View, c: Call) -> float:
    return max(0.0, (c.end if c.end is not None else c.proc.end if c.proc.end is not None else v.t_end) - c.ts)


def child_exit_wait(v: View) -> Finding | None:
    """A child spends seconds shutting its own pool down at exit: whoever joins it waits (pytorch#115366)."""
    slow = _exit_shutdowns(v)
    if not slow:
        return None
    c = slow[0]
    p = c.proc
    made = p.pools[-1].call
    how = "spawned" if not p.forked else "forked"
    still = "" if c.end is not None else ", and it never returned"
    return Finding(
        "child-exit-wait", "warning",
        f"{how.capitalize()} child {p.pid} spent {_took(v, c):.1f} s in {T.short_label(c.target)} at its exit"
        f"{still}, shutting down the pool it made at {site(user_frame(made.caller) or made.caller)}: its parent's "
        f"join() waits that long" + (f" (+{len(slow) - 1} more child(ren))" if len(slow) > 1 else "") + ".",
        sorted({x.proc.pid for x in slow}), [f"{x.proc.pid}: {_took(v, x):.2f} s" for x in slow[:TEXT_PIDS]],
        f"call {shutdown_path(v, p)}() at the end of the child's work, so its exit does not hang on torch's "
        "exit-time shutdown (atexit, or the multiprocessing finalizer in a multiprocessing child); or compile in "
        "the parent, so the child makes no pool (pytorch#115366)",
        {"processes": len(slow), "exit_wait_s": round(sum(_took(v, x) for x in slow), 3)})


FINDINGS: tuple[Callable[[View], Finding | None], ...] = (
    root_killed,
    root_os_exit,
    no_verdict,
    records_lost,
    run_in_progress,
    idle_pools,
    child_exit_wait,
    pool_device_files,
    nested_pools,
    warm_pool_bypass,
    verdict_pending,
    leftovers,
    sidecars_killed,
    sidecars_never_served,
    slow_exit_wait,
    calls_never_returned,
    wakeup_no_pool,
    guard_refused,
    guard_idle,
    tracer_trouble,
    data_cut,
)


def find_all(view: View) -> list[Finding]:
    """Every finding that applies, in FINDINGS order."""
    return [f for f in (check(view) for check in FINDINGS) if f is not None]
