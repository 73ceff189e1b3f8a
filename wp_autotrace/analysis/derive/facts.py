"""What the Answer counts and explains beyond one pool, derived from the View:

- ``pools_across``: pools counted across the processes that made them (N creators: N sidecars + M workers =
  K compile processes), their memory together at once, and what their number scales with.
- ``compiling``: each compiling process's resident memory before its first compile and after its last (the
  tracer's read of /proc/self/statm at dynamo's `_compile` call and return: targets.COMPILE).
- ``no_pool_why``: why no pool was made, from what was seen.
- ``untraced_pools``: compile sidecars (and their workers) only the watcher saw: no record names their pool.
- ``pool_tests``: in a pytest session, the test that made a pool and the later tests it outlived.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import targets
from ...common.vocab import COMPILE_WORKER, DATALOADER_WORKER, SIDECAR_ROLES
from .attempts import restart_story
from .callers import user_frame
from .counts import counts_at, sample_near
from .labels import process_label

if TYPE_CHECKING:
    from ..fold.model import Call, Pool, Process
    from .view import View

# pytest's PYTEST_CURRENT_TEST is "nodeid (phase)": the phase is cut off.
_PHASES = (" (setup)", " (call)", " (teardown)")


def _scales_with(v: View, creators: list[Process]) -> str | None:
    """What the number of pools grows with: ranks, DataLoader workers, test processes, or sibling children."""
    if all(p.index in v.rank_of for p in creators):
        return "rank"
    roles = {p.role for p in creators}
    if roles == {DATALOADER_WORKER}:
        return DATALOADER_WORKER
    # A pytest-xdist worker's command line is execnet's `-c "import sys;exec(eval(sys.stdin.readline()))"` and
    # its PYTEST_XDIST_WORKER is set after it started: the tests it ran (the pytest plugin's records) say it.
    if all(p.tests or "PYTEST_XDIST_WORKER" in (p.env or {}) or "pytest" in " ".join(p.argv[:3])
           for p in creators):
        return "test"
    parents = {p.parent.index if p.parent is not None else None for p in creators}
    return "child" if len(parents) == 1 and None not in parents else None


def pools_across(v: View) -> dict[str, Any] | None:
    """The pools counted across the processes that made them; None without a pool."""
    if not v.pools:
        return None
    # a pool no process was seen of (a spawned child's re-imported main whose executor raised before it started
    # one) is no maker's pool to count: "2 processes each made a compile pool: 1 worker"; all where none was seen
    ran = [pool for pool in v.pools if v.story(pool).procs] or v.pools
    creators: dict[int, Process] = {}
    for pool in ran:
        creators.setdefault(pool.creator.index, pool.creator)
    sidecars = [pool.sidecar for pool in v.pools if pool.sidecar is not None]
    workers = {w.index: w for pool in v.pools for w in v.story(pool).workers}
    # memory at once as docs/evidence.md defines it (View.pools_at_once, as costs.pool_peak_pss_bytes): the
    # processes alive then without a fresh sample are not counted, and the Answer says so (all_read False), as it
    # says a floor beyond that moment (processes never read, pools read in different passes: View.at_once_keys)
    best = v.pools_at_once(v.pools)
    makers = list(creators.values())
    return {**_counted(v, v.pool_procs(v.pools), makers, best.ts if best is not None else None),
        "creators": len(creators), "pools": len(v.pools),
        "sidecars": sum(1 for p in sidecars if p.role in SIDECAR_ROLES) or len(sidecars),
        "workers": len(workers), "processes": len(sidecars) + len(workers),
        **v.at_once_keys(best),
        "scales_with": _scales_with(v, makers) if len(creators) > 1 else None,
        # the ranks among them, by the rank each was started as: two processes of one rank are one rank
        "ranks": len({v.rank_of[p.index] for p in makers if p.index in v.rank_of}),
        # a launcher that started its ranks again: the same ranks, once per attempt (attempts.py)
        "restart": restart_story(v, makers) if len(creators) > 1 else None,
    }


def _counted(v: View, procs: list[Process], creators: list[Process], t: float | None) -> dict[str, Any]:
    """At the moment of the pools' memory at once, as ps counts: every process of the run alive then (the main,
    the launcher, helpers and compilers included: what ps lists of the run), the pool processes alive then and
    their threads (those read), and the makers alive then with their own memory and threads when the watcher
    read each of them in those sweeps (a maker that had ended, another attempt's rank, is no ps line then)."""
    c = counts_at(procs, None, t)
    if c is None or t is None:
        return {}
    out: dict[str, Any] = {"counted_at": v.rel(t), "pool_threads": sum(c["threads"].values()) if c["threads"] else None,
                           "pool_threads_all": len(c["threads"]) == c["processes"],
                           "pool_processes_alive": c["processes"],
                           "run_processes": sum(1 for p in v.procs if p.alive_at(t))}
    live = [p for p in creators if p.alive_at(t)]
    own = [sample_near(p, t) for p in live]
    if live and all(s is not None for s in own):
        read = [(p, s) for p, s in zip(live, own) if s is not None]
        out["creators_alive"] = len(live)
        out["creators_pss_bytes"] = sum(s[1] for _, s in read)
        threads = [p.threads.get(s[0]) for p, s in read]
        out["creators_threads"] = sum(n for n in threads if n) if all(threads) else None
    return out


_INSTALLED = ("site-packages", "dist-packages")


def made_in(v: View, pool: Pool) -> dict[str, Any] | None:
    """The installed distribution whose line made the pool, when it is not the user's own code: the frame
    names a distribution and its file is in site-packages (or dist-packages), or outside the main process's
    working directory (a project of the user's own, installed editable, lives below it). None otherwise."""
    frame = pool.call.caller or {}
    dist, file = frame.get("dist"), frame.get("file")
    if not dist or not isinstance(file, str):
        return None
    root = pool.creator.run.root if pool.creator.run is not None else None
    cwd = (root.cwd if root is not None else "") or pool.creator.cwd
    parts = file.split("/")
    outside = bool(cwd) and not file.startswith(cwd.rstrip("/") + "/")
    if not any(x in parts for x in _INSTALLED) and not outside:
        return None
    return {"dist": dist, "version": frame.get("dist_version") or "", "rel": frame.get("rel") or file,
            "line": frame.get("line")}


def _users(frame: dict[str, Any]) -> bool:
    """A frame of the user's own code: a file outside installed packages and the standard library."""
    file = frame.get("file")
    return isinstance(file, str) and not any(x in file.split("/") for x in _INSTALLED) and "/lib/python" not in file


def called_from(v: View, pool: Pool) -> dict[str, Any] | None:
    """Where the pool's making was called from, when another pool of its creator was made at the same line (a
    helper's): the innermost user frame above the caller whose line differs from every such pool's frame at
    that depth (train vs eval calling one compile_step). None when its line alone tells it apart, nothing above
    it does, or more than TWINS_TOLD pools share the line (no Answer names each of them)."""
    caller = pool.call.caller or {}
    here = (caller.get("file"), caller.get("line"))
    twins = [x for x in v.same_line.get((pool.creator.index, *here), ()) if x is not pool]
    if not twins or len(twins) > TWINS_TOLD:
        return None
    mine = _above(pool, here)
    theirs = [_above(x, here) for x in twins]
    for depth, frame in enumerate(mine):
        if all(depth >= len(t) or (t[depth].get("file"), t[depth].get("line")) !=
               (frame.get("file"), frame.get("line")) for t in theirs):
            return frame
    return None


# The most pools made at one line that are each told by where the line was called from.
TWINS_TOLD = 8


def _above(pool: Pool, here: tuple[Any, Any]) -> list[dict[str, Any]]:
    """The user frames above the caller's (innermost first) in the pool's making stack."""
    frames = pool.stack
    at = next((i for i in range(len(frames) - 1, -1, -1)
               if (frames[i].get("file"), frames[i].get("line")) == here), None)
    return [f for f in reversed(frames[:at]) if _users(f)] if at is not None else []


def _top_compiles(v: View) -> dict[int, list[Call]]:
    """Each process's compile calls that are not inside another (dynamo recompiles inside a compile)."""
    found: dict[int, list[Call]] = {}
    for c in v.tagged(targets.COMPILE):
        if c.parent is None or c.parent.tag != targets.COMPILE:
            found.setdefault(c.proc.index, []).append(c)
    return found


def compiling(v: View) -> list[dict[str, Any]]:
    """Per compiling process: compiles, resident memory before the first and after the last (bytes, from
    the tracer's read at those calls), and when; and as torch._dynamo began importing (torch.compile's lazy
    imports of dynamo and inductor come before the first compile), where that read precedes the first."""
    out = []
    for calls in _top_compiles(v).values():
        p = calls[0].proc
        done = [c for c in calls if c.end is not None]
        last = done[-1] if done else None
        before = getattr(calls[0], "rss", None)
        after = last.ret.get("rss") if last is not None else None
        imported = p.imports.get(targets.DYNAMO_MODULE)
        if imported is not None and (imported[0] > calls[0].ts or imported[1] is None):
            imported = None  # an import after the first compile (another image) does not precede it
        out.append({"pid": p.pid, "host": p.host, "role": p.role, "compiles": len(calls),
                    "first_s": v.rel(calls[0].ts), "last_s": v.rel(last.end) if last is not None else None,
                    "before_bytes": before if isinstance(before, int) else None,
                    "after_bytes": after if isinstance(after, int) else None,
                    "import_s": v.rel(imported[0]) if imported else None,
                    "import_bytes": imported[1] if imported else None})
    return sorted(out, key=lambda e: (-((e["after_bytes"] or 0) - (e["before_bytes"] or 0)), e["pid"]))


def no_pool_why(v: View) -> dict[str, Any] | None:
    """Why no pool was made, from what the log holds: inductor never loaded; nothing compiled; compile_threads
    at most 1; the call that makes the pool returned without one (torch refused it: _pool_refused); C++ (CPU)
    kernels, built by compiler processes under the compiling process; else unknown."""
    if v.pools:
        return None
    if untraced_pools(v):  # a pool ran where no process wrote a record: "no pool was made" would be false
        return {"kind": "untraced"}
    configs = [c for r in v.runs for c in r.configs]
    if not configs:
        return {"kind": "no-inductor"}
    compiles = _top_compiles(v)
    threads = configs[0][1].get("compile_threads")
    if isinstance(threads, int) and threads <= 1:
        return {"kind": "threads", "compile_threads": threads, "compiles": sum(map(len, compiles.values()))}
    refused = _pool_refused(v, compiles)
    if refused is not None:
        return {"kind": "refused", "compile_threads": threads, **refused}
    if not compiles:
        return {"kind": "no-compile", "compile_threads": threads}
    compilers = set(compiles)
    tools = [p for p in v.procs if not p.traced and _below(p, compilers) and _is_tool(p)]
    return {"kind": "cpu" if tools else "unknown", "compile_threads": threads, "toolchain": len(tools),
            "compiles": sum(map(len, compiles.values()))}


# The start methods torch 2.13 refuses a pool in a daemonic multiprocessing process (pytorch#184472): a
# multiprocessing daemon may not have children; the default, subprocess, starts its sidecar with Popen.
_DAEMON_REFUSED = ("fork", "spawn")


def _pool_refused(v: View, compiles: dict[int, list[Call]]) -> dict[str, Any] | None:
    """A wait_pool_ready (the call that makes the pool, torch 2.13) that returned, unerring, with compile_threads
    over 1 and no pool made: torch declined one there. With worker_start_method fork or spawn its reason is a
    daemonic multiprocessing process (a DataLoader worker, Process(daemon=True)); else (or also) Triton's proton
    profiling, which forces compiles into the process. The daemon flag itself is in no record: "daemon" only
    names the rule that start method meets, never a flag read. compiles: that process's compile calls
    (_top_compiles), counted: its kernels compiled in the process only where one was recorded there."""
    for c in v.tagged(targets.WAIT_POOL_READY):
        if c.end is None or c.error or c.proc.pools:
            continue
        conf = next((s for p, s, _ in c.proc.run.configs if p is c.proc), None) if c.proc.run else None
        conf = conf if conf is not None else next((s for r in v.runs for _, s, _ in r.configs), {})
        threads, method = conf.get("compile_threads"), conf.get("worker_start_method")
        if not isinstance(threads, int) or threads <= 1:
            continue
        return {"pid": c.proc.pid, "label": process_label(c.proc), "at_s": v.rel(c.ts),
                "caller": user_frame(c.caller),
                "compile_threads": threads, "start_method": method, "daemon_rule": method in _DAEMON_REFUSED,
                "compiles": len(compiles.get(c.proc.index, ()))}
    return None


def untraced_pools(v: View) -> list[dict[str, Any]]:
    """Compile sidecars that wrote no record, seen by the watcher alone (its tree entry: their command line is
    torch's compile_worker, a start time read), each with the workers it forked and the process it ran under: a pool
    made where nothing was traced, by whom and from which line unknown (no call record names it).

    Not one of these: a recorded pool's own sidecar or worker that wrote nothing (it ran another Python); a sidecar
    under the creator of a recorded pool whose sidecar no record names (that pool's, its records lost); an entry
    with no start time of its own (a process known only from other records: a log out of order or cut makes such
    a ghost of a traced process, which has its twin under the same pid); one whose records may be a traced row's
    (Process.one_of: in a pid namespace the watcher could not read), its pool then possibly that row's."""
    known = {id(q) for pool in v.pools for q in (pool.sidecar, *pool.members) if q is not None}
    open_creators = {(pool.creator.host, pool.creator.pid) for pool in v.pools
                     if pool.sidecar is None and pool.sidecar_pid is None}
    traced = {(q.host, q.pid) for q in v.procs if q.traced}
    out = []
    for p in v.procs:
        if (p.traced or p.one_of or p.role not in SIDECAR_ROLES or id(p) in known or p.create_time is None
                or (p.host, p.pid) in traced or (p.host, p.ppid) in open_creators):
            continue
        workers = sorted({q.pid for q in p.children if q.role == COMPILE_WORKER})
        up = p.parent
        label = process_label(up) if up is not None else None
        out.append({"sidecar_pid": p.pid, "host": p.host, "role": p.role, "worker_pids": workers,
                    "start_s": v.rel(p.start), "end_s": v.rel(p.ended_at),
                    "parent_pid": up.pid if up is not None else p.ppid,
                    "parent_label": label if label and label != "?" else None,
                    "parent_traced": up.traced if up is not None else None})
    return sorted(out, key=lambda e: (e["start_s"] if e["start_s"] is not None else float("inf"), e["sidecar_pid"]))


def _below(p: Process, indexes: set[int]) -> bool:
    q = p.parent
    for _ in range(64):
        if q is None:
            return False
        if q.index in indexes:
            return True
        q = q.parent
    return False


def _is_tool(p: Process) -> bool:
    from .labels import tool_name

    return tool_name(p.name, p.cmd) is not None


def _test_name(env_value: Any) -> str | None:
    if not isinstance(env_value, str) or not env_value:
        return None
    for phase in _PHASES:
        if env_value.endswith(phase):
            return env_value[: -len(phase)]
    return env_value


def reachable_until(v: View, pool: Pool) -> float:
    """Until when the creator's compiles reached the pool: torch caches it until a shutdown drops it (or another
    pool replaces it), whatever its sidecar did; a dead sidecar's pool still answers process_pool(), and its
    ready future is what a later wait_pool_ready waits on. Else the creator's end, else the log's."""
    ends = [t for t in (pool.shutdown_at, v.next_made.get(id(pool))) if t is not None]
    made_end = pool.creator.ended_at
    return min(ends) if ends else made_end if made_end is not None else v.t_end


def pool_tests(v: View, pool: Pool) -> dict[str, Any]:
    """The test that made the pool (PYTEST_CURRENT_TEST at SubprocPool.__init__) and the later tests of its
    creator that started while the pool was torch's (reachable_until; the pytest plugin's `test` records)."""
    test = _test_name(pool.call.env.get("PYTEST_CURRENT_TEST"))
    if test is None:
        return {}
    end = reachable_until(v, pool)
    starts = [(ts, nodeid) for ts, nodeid, phase in getattr(pool.creator, "tests", ())
              if phase == "start" and pool.call.ts < ts <= end and nodeid != test]
    return {"test": test, "tests_outlived": [nodeid for _, nodeid in sorted(starts)],
            "tests_used": tests_used(pool, test, end)}


# The creator's calls that reach its cached pool: asking for it (every Triton kernel's compile, 2.4+), waiting for
# it to be ready, waiting on its kernels' futures. A submit is counted, not recorded: its times are not known.
_USES = frozenset((targets.PROCESS_POOL, targets.WAIT_POOL_READY, targets.ASYNC_WAIT))


def tests_used(pool: Pool, made_by: str, end: float) -> list[str]:
    """The later tests (pytest plugin's `test` start/end records of the creator) during which the creator reached
    the pool (a _USES call after the pool's making, before its end), in the order they ran."""
    spans: list[tuple[float, float, str]] = []
    open_at: dict[str, float] = {}
    for ts, nodeid, phase in sorted(getattr(pool.creator, "tests", ())):
        if phase == "start":
            open_at[nodeid] = ts
        elif nodeid in open_at:
            spans.append((open_at.pop(nodeid), ts, nodeid))
    spans += [(ts, float("inf"), nodeid) for nodeid, ts in open_at.items()]  # a test that never ended
    uses = [c.ts for c in pool.creator.calls.values() if c.tag in _USES and pool.call.ts < c.ts <= end]
    return [nodeid for a, b, nodeid in sorted(spans)
            if nodeid != made_by and any(a <= t <= b for t in uses)]
