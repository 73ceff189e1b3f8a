"""A pool's processes: which they are (its sidecar and its descendants, or a fork/spawn pool's workers; never
another pool's), its workers, the workers it was made for, when they were gone, how they were started, and
whether they outlived the pool's creator. Definitions: derive/pools.py's docstring ("pool processes").
"""

from __future__ import annotations

from ...common import targets, vocab
from ..fold.model import EXECUTOR, Pool, Process


def fx_subprocess(pool: Pool) -> bool:
    """Is the pool the FX-subprocess compile pool (TORCHINDUCTOR_FX_COMPILE_MODE=subprocess, torch 2.7+): a
    SubprocPool(1, kind=SPAWN) made inside _SubprocessFxCompile.process_pool, or whose sidecar has that role?
    torch's shutdown_compile_workers() never stops it (it is outside _pool_set): atexit does."""
    parent = pool.call.parent
    return bool((parent is not None and parent.tag == targets.FX_POOL)
                or (pool.sidecar is not None and pool.sidecar.role == vocab.FX_COMPILE_SIDECAR))


def pool_processes(pool: Pool, heads: dict[int, Pool]) -> list[Process]:
    """The sidecar and its descendants (iteratively: the tree can be deep); a fork/spawn pool's: its workers
    and theirs. Not another pool's (a nested pool's sidecar, members and theirs: `heads`, pool_index's of every
    pool): each process counts in one pool only, so adding the pools' rows never counts a process twice, and
    all pools' walks together visit each process once (8,000 pools each a child of the one before: linear)."""
    side = pool.sidecar
    if side is None and not pool.members:
        return []
    found: list[Process] = []
    stack, seen = [side] if side is not None else list(pool.members), set()
    while stack:
        p = stack.pop()
        if p.index in seen:
            continue
        seen.add(p.index)
        found.append(p)
        stack.extend(q for q in p.children if heads.get(id(q), pool) is pool)
    return found


def workers_of(pool: Pool) -> list[Process]:
    """The compile workers of the pool's sidecar (Process.compile_workers); a fork/spawn pool's own workers."""
    side = pool.sidecar
    return list(pool.members) if side is None else side.compile_workers()


WORKERS_ARG = "--workers="  # the sidecar's argument: the workers its pool starts (SubprocPool's nprocs)


def pool_size(pool: Pool) -> int | None:
    """The workers the pool was made for (compile_threads as torch read it then): a sidecar's --workers=N, a
    fork/spawn pool's max_workers as captured; None when the log does not say."""
    if pool.sidecar is not None:
        arg = next((a for a in pool.sidecar.argv if a.startswith(WORKERS_ARG)), "")
        return int(arg[len(WORKERS_ARG):]) if arg[len(WORKERS_ARG):].isdigit() else None
    n = pool.call.ret.get("max_workers")
    return n if isinstance(n, int) else None


def pool_end(pool: Pool) -> float | None:
    """When the pool's processes were gone: its sidecar's end; a fork/spawn pool's, its last worker's (None
    while one was not seen to end, or it had none)."""
    if pool.sidecar is not None or not pool.members:
        return pool.sidecar.ended_at if pool.sidecar is not None else None
    ends = [q.ended_at for q in pool.members]
    return None if any(e is None for e in ends) else max(e for e in ends if e is not None)


# A pool whose processes lived this long after its creator ended outlived it (orphans: nobody can use or stop
# them; whoever waits on what they inherited waits too). Far from what a normal end takes: a creator's exit
# stops its pool before it ends, and a SubprocPool's sidecar sees its creator's pipe close at once.
OUTLIVED_S = 5.0


def outlived_creator(pool: Pool) -> tuple[float, float] | None:
    """(the creator's end, the pool's end) when the pool's processes were seen to end OUTLIVED_S or more after
    its creator ended; None otherwise (a pool still running at the end of the log is a leftover's story)."""
    made_end, end = pool.creator.ended_at, pool_end(pool)
    if made_end is None or end is None or end - made_end < OUTLIVED_S:
        return None
    return made_end, end


def start_method(pool: Pool) -> str:
    """How a pool's workers were started, from the workers themselves: 'fork' (each forked from its creator),
    'spawn' (each a fresh interpreter its creator started), '' when not known (none seen, or a SubprocPool:
    its sidecar is started with subprocess and forks its workers)."""
    if pool.kind != EXECUTOR or not pool.members:
        return ""
    forked = {q.forked for q in pool.members if q.traced}
    return "fork" if forked == {True} else "spawn" if forked == {False} else ""
