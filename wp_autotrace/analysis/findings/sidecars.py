"""A compile sidecar that never served its pool: what its main() raised and what the user can change about it
(a module shadowing the standard library on the sidecar's PYTHONPATH, a full /dev/shm), that it ran another Python
than the process that made it and died untraced, or that nothing asked it to stop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common.targets import POOL_CREATE
from ...common.vocab import SIDECAR_ROLES
from ..derive.ending import OOM_AMONG, OOM_KILL, SHUTDOWN_FOUND_DEAD
from ..derive.errors import own_errors, shadowing
from ..words.fmt import TEXT_PIDS, pid_text, site
from .base import Finding, in_ranks

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Pool, Process


def _clean_end(p: Process) -> bool:
    return p.exit_how in ("exit", "os._exit")


def _error_text(p: Process) -> str:
    err = own_errors(p)[0]
    origin = err.get("origin")
    where = f" ({site(origin)})" if origin else ""
    return f"{err.get('exc_type') or 'an exception'}: {err.get('message', '')[:120]}{where}"


def _shadow_advice(p: Process) -> str:
    """Where a sidecar's error came from a module named like one of the standard library's, outside it (a stale
    backport, a folder put on sys.path): what to remove. torch starts the sidecar with the main process's sys.path
    as its PYTHONPATH (TORCH_CUSTOM_PYTHONPATH overrides it), so such a module comes before the standard
    library's there, and each new sidecar imports it again. '' otherwise."""
    origin = p.errors[0].get("origin") or {}
    file = origin.get("file")
    found = shadowing(file) if isinstance(file, str) else None
    if found is None:
        return ""
    name, where = found
    installed = where.rpartition("/")[2] in ("site-packages", "dist-packages")
    remove = (f"uninstall the stale `{name}` from {where} (pip uninstall {name})" if installed else
              f"take {where} off sys.path before the first compile, or remove its {name}; or set "
              f"TORCH_CUSTOM_PYTHONPATH (the sidecar's PYTHONPATH) without it")
    return (f"{remove}: the sidecar imported {file} as the standard library's `{name}` (torch starts it with the "
            "main process's sys.path as its PYTHONPATH), and a new pool would die the same way")


# multiprocessing's locks (a worker pool's queues make them) are POSIX semaphores, each a file in /dev/shm (glibc's
# sem_open): ENOSPC where one is made is a full /dev/shm, a container's 64 MB by default.
SEMAPHORE_FILE = "multiprocessing/synchronize.py"
NO_SPACE = "[Errno 28]"
SHM_FULL_ADVICE = ("/dev/shm is full: remove what fills it (files earlier jobs left there: ls -la /dev/shm), or give "
                   "the container a larger one (docker run --shm-size=1g; on Kubernetes an emptyDir of medium Memory "
                   "on /dev/shm); meanwhile TORCHINDUCTOR_COMPILE_THREADS=1 compiles without a pool")


def _shm_full(p: Process) -> bool:
    """p's own first error is ENOSPC where multiprocessing made a semaphore: its pool found /dev/shm full."""
    err = own_errors(p)[0]
    file = (err.get("origin") or {}).get("file")
    return isinstance(file, str) and file.endswith(SEMAPHORE_FILE) and NO_SPACE in str(err.get("message", ""))


# torch starts a sidecar as [sys.executable, .../compile_worker/__main__.py, ...] with the creator's sys.path as its
# PYTHONPATH: where the creator's sys.executable names another binary than the Python it runs on (an embedding host,
# a packaged application's launcher), the sidecar runs that binary on this Python's libraries.
OTHER_PYTHON_ADVICE = ("give torch the Python the job runs on: sys.executable = {exe!r} before the first compile "
                       "(torch starts each sidecar with sys.executable; an embedding host or launcher that sets it to "
                       "another binary needs it set back), or compile without a pool: TORCHINDUCTOR_COMPILE_THREADS=1; "
                       "a new pool would die the same way")


# The second word of torch's sidecar command: the path of its worker script.
WORKER_SCRIPT = "compile_worker/__main__.py"


def _program(cmd: str) -> str:
    """What a sidecar ran: its command line (the watcher's: argv joined with spaces, so a Python's path may hold
    some) up to the path of torch's worker script, else its first word."""
    return cmd.partition(WORKER_SCRIPT)[0].rpartition(" /")[0] or cmd.split(" ", 1)[0]


def other_python(v: View) -> list[tuple[Process, Process]]:
    """(sidecar, creator) for untraced sidecars that ended with a non-zero code without serving their pool and
    whose command (the watcher's read of it) runs another executable than their creator's sys.executable (its
    process_start's). Untraced: a sidecar that ran this Python would have loaded the tracer and said its error."""
    found = []
    for pool in v.pools:
        side, made_by = pool.sidecar, pool.creator
        if side is None or side.traced or side.served or not made_by.executable or not side.cmd:
            continue
        runs_its_own = side.cmd == made_by.executable or side.cmd.startswith(made_by.executable + " ")
        if not runs_its_own and v.endings.of(side).code not in (None, 0):
            found.append((side, made_by))
    return found


def _started_with(pool: Pool) -> str | None:
    """The program torch started pool's sidecar with, as its creator's SubprocPool.__init__ captured it."""
    for c in pool.creator.calls.values():
        if c.tag == POOL_CREATE and c.ret.get("sidecar_pid") == pool.sidecar_pid:
            exe = c.ret.get("sidecar_exe")
            return exe if isinstance(exe, str) else None
    return None


def unseen_other_python(v: View) -> list[tuple[Pool, str]]:
    """(pool, program) for pools whose sidecar no look of the watcher saw, that torch's own wait found exited
    non-zero (derive/poolends.py), and that torch started with another program than their creator's sys.executable
    (the creator's capture): other_python's case where the sidecar died within a tick."""
    found = []
    for pool in v.pools:
        exe, made_by, ending = _started_with(pool), pool.creator, v.endings.of_pool(pool)
        if (pool.sidecar is None and exe and made_by.executable and exe != made_by.executable
                and ending.kind == SHUTDOWN_FOUND_DEAD and ending.code not in (None, 0)):
            found.append((pool, exe))
    return found


def _unseen_text(pool: Pool, exe: str, code: int | None) -> str:
    made_by = pool.creator
    version = f", Python {made_by.python}" if made_by.python else ""
    return (f"sidecar {pool.sidecar_pid} exited (code {code}) before the watcher's first look; torch started it with "
            f"{exe}, not the Python {made_by.role} {made_by.pid} runs on ({made_by.executable}{version})")


def _unseen_finding(v: View, found: list[tuple[Pool, str]]) -> Finding:
    """sidecar-never-served for sidecars no look saw that ran another Python (unseen_other_python)."""
    pool, exe = found[0]
    pids = sorted({p.sidecar_pid for p, _ in found if p.sidecar_pid is not None})
    said = _unseen_text(pool, exe, v.endings.of_pool(pool).code)
    told = f"{len(pids)} compile sidecar(s) never served their pool"
    return Finding(
        "sidecar-never-served", "problem", f"{told} (pids {pid_text(pids)}); {said}{OTHER_PYTHON_WHY}.", pids,
        [f"{p.creator.role} {p.creator.pid} SubprocPool.__init__ sidecar_exe {e}; process_start executable "
         f"{p.creator.executable}; SubprocPool.shutdown's wait: exit code {v.endings.of_pool(p).code}"
         for p, e in found[:TEXT_PIDS]],
        OTHER_PYTHON_ADVICE.format(exe=pool.creator.executable), {"processes": len(pids), "cpu_s": None},
        f"{told}: {said}.")


def _other_python_text(v: View, side: Process, made_by: Process) -> str:
    """What the sidecar ran against what its creator runs on, the part the Answer keeps."""
    ending = v.endings.of(side)
    lived = (f" {ending.at - side.start:.1f} s after it started" if ending.at is not None and side.start is not None
             else "")
    version = f", Python {made_by.python}" if made_by.python else ""
    return (f"sidecar {side.pid} exited (code {ending.code}){lived} and ran {_program(side.cmd)}, not the "
            f"Python {made_by.role} {made_by.pid} runs on ({made_by.executable}{version})")


# Why, after what (the Finding's text, not the Answer's): how torch starts a sidecar, and why no error is logged.
OTHER_PYTHON_WHY = (": torch starts the sidecar with its creator's sys.executable and the creator's sys.path as its "
                    "PYTHONPATH; it ran untraced, so its own error is not in the log")


def _why(v: View, raised: list[Process], other: list[tuple[Process, Process]], shm: bool) -> str:
    """Why the sidecars never served: what the first one's main() raised, else the other Python it ran, else that
    nothing asked it to stop."""
    if raised:
        return (f"; sidecar {raised[0].pid}'s main() raised {_error_text(raised[0])}"
                + (": /dev/shm was full, where its worker pool makes its locks (POSIX semaphores are files there)"
                   if shm else "") + (f" ({len(raised)} raised)" if len(raised) > 1 else ""))
    if other:
        return f"; {_other_python_text(v, *other[0])}{OTHER_PYTHON_WHY}"
    return ": its main loop never served the pool (no SubprocMain._shutdown)"


def sidecars_never_served(v: View) -> Finding | None:
    """Sidecars that exited (or are left) without ever being asked to shut down: traced ones that ended cleanly or
    logged an error, and untraced ones that ran another Python than their creator (other_python)."""
    idle = [pool.sidecar for pool in v.pools if pool.sidecar is not None and pool.sidecar.traced
            and not pool.sidecar.served and _clean_end(pool.sidecar)]
    # a sidecar whose worker the OOM killer ended logs its broken pool: oom-killed tells that, not this
    idle += [p for p in v.procs if p.role in SIDECAR_ROLES and own_errors(p) and p not in idle
             and not any(v.endings.of(w).kind in (OOM_KILL, OOM_AMONG) for w in p.children)]
    other = [pair for pair in other_python(v) if pair[0] not in idle]
    idle += [side for side, _ in other]
    if not idle:
        unseen = unseen_other_python(v)
        return _unseen_finding(v, unseen) if unseen else None
    pids = sorted({p.pid for p in idle})
    raised = [p for p in idle if own_errors(p)]
    shm = bool(raised) and _shm_full(raised[0])
    warmed = {c.proc.index for c in v.warm_calls}
    if any(p.index in warmed for p in raised):
        advice = ("its own import started a pool (see nested-pools) and its main() then failed: keeping the "
                  "backend out of the sidecars fixes both")
    elif raised and _shm_full(raised[0]):
        advice = SHM_FULL_ADVICE
    elif raised:
        advice = _shadow_advice(raised[0]) or (
            f"fix what its main() raised ({_error_text(raised[0])}); the sidecar cannot serve until then")
    elif other:
        advice = OTHER_PYTHON_ADVICE.format(exe=other[0][1].executable)
    else:
        advice = ("nothing asked it to stop: its pool was never shut down (torch's shutdown_compile_workers "
                  "never ran, or ran in another process); shut the pool down before exit")
    told = f"{len(pids)} compile sidecar(s) never served their pool{in_ranks(v, idle)}"
    # the Answer keeps /dev/shm, or both Pythons, which a cut before the error's place would drop
    headline = (f"{told}: /dev/shm was full, where sidecar {raised[0].pid}'s worker pool makes its locks (OSError: "
                "[Errno 28] No space left on device)." if shm else
                f"{told}: {_other_python_text(v, *other[0])}." if other and not raised else "")
    return Finding(
        "sidecar-never-served", "problem" if raised or other else "warning",
        f"{told} (pids {pid_text(pids)}){_why(v, raised, other, shm)}.",
        pids, [_error_text(p) for p in raised[:TEXT_PIDS]]
        + [f"watcher tree: sidecar {s.pid} cmd {_program(s.cmd)}; {c.role} {c.pid} process_start executable "
           f"{c.executable}; exit code {v.endings.of(s).code}" for s, c in other[:TEXT_PIDS]], advice,
        {"processes": len(pids), "cpu_s": None}, headline)
