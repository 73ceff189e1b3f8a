"""Findings about what the user set against what was in effect: the environment a process started with
(process_start's `env`) beside inductor's settings as torch._inductor.config loaded (the `config` record)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..derive.endings import torch_release
from ..derive.poolprocs import fx_subprocess, pool_end, pool_size, start_method
from ..fold.model import EXECUTOR
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# The variables torch reads into a setting at config's import, and that setting's name.
READ_AT_IMPORT = (("TORCHINDUCTOR_COMPILE_THREADS", "compile_threads"),
                  ("TORCHINDUCTOR_WORKER_START", "worker_start_method"))


def reads_start_var(version: str) -> bool:
    """Whether the run's torch reads TORCHINDUCTOR_WORKER_START: from 2.4 (docs/torch-coverage.md; 2.2-2.3 have the
    setting, fork, but no variable; 2.1 neither); an unknown version is taken to read it."""
    release = torch_release(version)
    return release is None or release >= (2, 4)


# torch 2.1's process_pool forks, hard-coded: its config has no worker_start_method (2.2 added it).
START_SETTING_FROM = (2, 2)
ALWAYS_FORKS = "fork"


def _unread_start_var(p: Process, started: str, loaded: object, version: str) -> Finding | None:
    """TORCHINDUCTOR_WORKER_START in p's environment on a torch that does not read it (reads_start_var): what
    inductor had instead, and what that release takes. 2.2-2.3 have the setting (fork unless set in code);
    2.1 has none, its pool forks whatever is set (its config record has no worker_start_method). None where the
    variable asks for what the release does anyway."""
    release = torch_release(version)
    said = (f"{p.role} {p.pid} started with {START_VAR}={started}, which torch {version} does not read (torch reads it "
            "from 2.4)")
    evidence = [f"process_start env {START_VAR}={started}", f"config record torch_version={version}"]
    if loaded is None and release is not None and release < START_SETTING_FROM:
        if str(started).strip() == ALWAYS_FORKS:
            return None
        return Finding(
            "setting-overridden", "warning",
            f"{said}; torch {version} has no start-method setting either: its compile pool always forks its "
            "workers.", [p.pid], [*evidence, "config record: no worker_start_method"],
            "compile without a pool: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1); from torch 2.2 the start "
            f"method is set in code: torch._inductor.config.worker_start_method = {str(started).strip()!r}", {})
    if loaded is None or str(started).strip() == str(loaded):
        return None
    return Finding(
        "setting-overridden", "warning", f"{said}, so inductor's worker_start_method was {loaded!s}.",
        [p.pid], [*evidence, f"config record worker_start_method={loaded}"],
        f"set it in code before the first compile: torch._inductor.config.worker_start_method = {str(started)!r}; "
        "or compile without a pool: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1)", {})


def _compile_s(p: Process) -> tuple[int, float]:
    """p's finished compiles that are not inside another (dynamo's _compile), and their seconds together."""
    done = [c for c in p.calls.values() if c.tag == targets.COMPILE and c.end is not None
            and (c.parent is None or c.parent.tag != targets.COMPILE)]
    return len(done), sum(c.end - c.ts for c in done if c.end is not None)


def _who_changed(p: Process, var: str) -> tuple[str, str, str, list[str]]:
    """Who changed var in p before its config loaded: (who, in words; the detail; the module to set it again
    after; the evidence), from the imports around the change (config's env_changed); else that the log does not
    say."""
    changes = [c for c in p.env_changed if c.get("var") == var]
    if not changes:
        return ("something in the process changed it first (an imported library, typically; the log does not say "
                "which)"), "", "", []
    c = changes[-1]
    old, new = (repr(c.get(k)) if c.get(k) is not None else "unset" for k in ("old", "new"))
    before, at = str(c.get("before") or ""), str(c.get("at") or "?")
    who = (f"the import of {before} changed it to {new}" if before else
           f"code that ran before the first import the tracer saw ({at}) changed it to {new}")
    detail = (f": it was {old} as the import of {before} began and {new} as the next import ({at}) began, so that "
              "import or the code right after it changed it" if before else "")
    return who, detail, before, [f"config env_changed {var}: {old} -> {new} between the imports of "
                                 f"{before or '(start)'} and {at}"]


def setting_overridden(v: View) -> Finding | None:
    """A process started with a pool variable set (TORCHINDUCTOR_COMPILE_THREADS=4) whose setting was another
    value when torch._inductor.config loaded (compile_threads=1): something in the process changed it first (a
    library's import, typically: named from the imports around the change where the config record has them).
    Says both values, who, what its compiles then took, and what works."""
    for p in v.procs:
        settings = next((s for q, s, _ in (p.run.configs if p.run is not None else []) if q is p), None)
        if not settings:
            continue
        for var, name in READ_AT_IMPORT:
            started, loaded = p.env.get(var), settings.get(name)
            if started is not None and var == START_VAR and not reads_start_var(version := v.config_of(p)[1]):
                unread = _unread_start_var(p, started, loaded, version)
                if unread is not None:
                    return unread
                continue
            if started is None or loaded is None or str(started).strip() == str(loaded):
                continue
            n, seconds = _compile_s(p)
            value = str(started).strip() if str(started).strip().isdigit() else repr(str(started))
            took = (f"; its {n} compile{'s' if n != 1 else ''} then took {seconds:.1f} s"
                    + (" in the process itself, with no compile pool" if name == "compile_threads"
                       and str(loaded) == "1" else "")) if n else ""
            who, detail, module, evidence = _who_changed(p, var)
            again = (f"set the variable again after importing {module}" if module else
                     f"find the import that sets os.environ[{var!r}] and set the variable again after it")
            return Finding(
                "setting-overridden", "warning",
                f"{p.role} {p.pid} started with {var}={started}, but {who}, so inductor's {name} was {loaded!s}"
                f"{took}{detail}; torch read it when torch._inductor.config loaded.",
                [p.pid], [f"process_start env {var}={started}", f"config record {name}={loaded}", *evidence],
                f"set it in code after the imports, before the first compile: torch._inductor.config.{name} = "
                f"{value} (torch reads it when the pool is made); or {again}",
                {})
    return None


START_VAR = "TORCHINDUCTOR_WORKER_START"
THREADS_VAR = "TORCHINDUCTOR_COMPILE_THREADS"


def _pool_start(pool: Pool) -> str:
    """The start method a pool really has: 'subprocess' for a SubprocPool, its workers' for a fork/spawn one."""
    return start_method(pool) if pool.kind == EXECUTOR else "subprocess"


def _late_change(c: Call, have: str, workers: int | None, reads: bool) -> tuple[str, str, str] | None:
    """What a wait c, while a pool lived, shows set since the pool was made and ignored by it: (what was set, what
    the pool kept, what the wait began with: the evidence's end), or None. Torch reads the variables once, into the
    config, when torch._inductor.config loads; it reads the config's compile_threads and worker_start_method when
    AsyncCompile.process_pool makes its pool, and keeps that pool. have: the pool's start method; workers: its
    size (pool_size); reads: whether the run's torch reads TORCHINDUCTOR_WORKER_START at all (a torch that never
    does ignored it from the start, not too late). Asked of each of a creator's waits for each of its pools (15K
    waits a long run), so what is the pool's is taken once by the caller."""
    if c.env.get(START_VAR) not in (None, have) and reads:
        return f"{START_VAR}={c.env[START_VAR]}", f"its {have} workers", f"{START_VAR}={c.env[START_VAR]}"
    method = c.at_call.get("worker_start_method")
    if method not in (None, have):
        return f"worker_start_method={method!r}", f"its {have} workers", f"worker_start_method={method!r} (config)"
    threads = c.at_call.get("compile_threads")
    if isinstance(threads, int) and threads > 1 and workers and threads != workers:
        return f"compile_threads={threads}", f"its {workers} workers", f"compile_threads={threads} (config)"
    var = c.env.get(THREADS_VAR)
    if isinstance(threads, int) and var is not None and str(var).strip() != str(threads):
        return (f"{THREADS_VAR}={var}", f"compile_threads={threads}" + (f" and its {workers} workers" if workers
                                                                          else ""),
                f"{THREADS_VAR}={var} and compile_threads={threads} (config)")
    return None


def _set_after_load(v: View, pool: Pool) -> tuple[str, str, object, object] | None:
    """A pool variable in the environment as the call that made the pool began, other than what the process
    started with and than the setting torch read from it when its config loaded: set in the process after that
    load, before the pool was made (var, its setting's name, the value then, the setting as loaded); else None."""
    p = pool.creator
    settings = next((s for q, s, _ in (p.run.configs if p.run is not None else []) if q is p), None)
    if not settings:
        return None
    for var, name in READ_AT_IMPORT:
        now, loaded = pool.call.env.get(var), settings.get(name)
        if now is None or loaded is None or str(now).strip() in (str(loaded), str(p.env.get(var, "")).strip()):
            continue
        if var == START_VAR and not reads_start_var(v.config_of(p)[1]):
            continue
        return var, name, now, loaded
    return None


def _late_before_pool(v: View, pool: Pool) -> Finding | None:
    """_set_after_load told: the variable reached no setting, so the pool was made with the setting as loaded."""
    late = _set_after_load(v, pool)
    if late is None:
        return None
    var, name, now, loaded = late
    p = pool.creator
    workers = pool_size(pool)
    kept = f"{workers} workers" if name == "compile_threads" and workers else f"{name}={loaded!s}"
    value = str(now).strip() if str(now).strip().isdigit() else repr(str(now))
    return Finding(
        "setting-too-late", "warning",
        f"{var}={now} was set in {p.role} {p.pid} after torch._inductor.config loaded (with {name}={loaded!s}) and "
        f"before its compile pool was made at {v.rel(pool.call.ts):.1f} s; it changed nothing, the pool has {kept}: "
        f"torch reads {var} once, into {name}, when torch._inductor.config loads, and reads {name} when "
        "AsyncCompile.process_pool makes the pool.",
        [p.pid], [f"{targets.short_label(pool.call.target)} at {v.rel(pool.call.ts):.1f} s began with {var}={now}",
                  f"config record {name}={loaded}", *([f"process_start env {var}={p.env[var]}"] if var in p.env
                                                      else [f"process_start env: no {var}"])],
        f"set it in code before the first compile: torch._inductor.config.{name} = {value} (torch reads the setting, "
        f"not the variable, when the pool is made); or set {var} before torch is imported (in the environment that "
        "starts the process)", {})


def setting_too_late(v: View) -> Finding | None:
    """A pool setting changed while a pool of its process already lived (seen at a later AsyncCompile.wait: the
    variable in its environment, or the config's value then): it changed nothing, since torch reads the variable
    into the config when the config loads, and the config's value when AsyncCompile.process_pool makes the pool
    it then keeps. Never about the FX-subprocess pool: neither setting sizes nor starts it."""
    waits: dict[int, list[Call]] = {}  # each creator's, once (thousands of pools of one creator: linear)
    for pool in v.pools:
        if fx_subprocess(pool):  # SubprocPool(1, kind=SPAWN) whatever these settings say: none is read for it
            continue
        before = _late_before_pool(v, pool)
        if before is not None:
            return before
        have = _pool_start(pool)
        end = pool_end(pool)
        mine = waits.get(id(pool.creator))
        if mine is None:
            mine = waits[id(pool.creator)] = [c for c in pool.creator.calls.values() if c.tag == targets.ASYNC_WAIT]
        workers, reads = pool_size(pool), reads_start_var(v.config_of(pool.creator)[1])
        later = ((c, change) for c in mine
                 if c.ts > pool.call.ts and (end is None or c.ts < end) and have
                 and (change := _late_change(c, have, workers, reads)) is not None)
        c, (what, kept, began) = next(later, (None, ("", "", "")))
        if c is None:
            continue
        evidence = f"AsyncCompile.wait at {v.rel(c.ts):.1f} s began with {began}"
        p = pool.creator
        test = f" (during {c.env['PYTEST_CURRENT_TEST'].rsplit(' ', 1)[0]})" if c.env.get("PYTEST_CURRENT_TEST") else ""
        name = "compile_threads" if "THREADS" in what or "threads" in what else "worker_start_method"
        var = THREADS_VAR if name == "compile_threads" else START_VAR
        in_code = not what.startswith("TORCHINDUCTOR_")  # set in code (the config), not the environment
        advice = (f"set torch._inductor.config.{name} before the first compile makes the pool, or call "
                  "torch._inductor.async_compile.shutdown_compile_workers() after changing it so the next compile "
                  "makes a new pool" if in_code else
                  f"set {var} before torch is imported (in the environment that starts the process, or a "
                  f"conftest.py that runs first); to change it inside a running process, set "
                  f"torch._inductor.config.{name} and call torch._inductor.async_compile.shutdown_compile_workers() "
                  "so the next compile makes a new pool")
        version = v.config_of(p)[1]
        if (torch_release(version) or (2, 4)) < (2, 4):  # no shutdown that lets a later compile make a new pool
            advice = (f"set torch._inductor.config.{name} (or {var} before torch is imported) before the first compile "
                      f"makes the pool: torch {version} keeps the one pool it made (AsyncCompile.process_pool is "
                      "cached, and torch never clears it), so no later setting reaches a pool")
        return Finding(
            "setting-too-late", "warning",
            f"{what} was set in {p.role} {p.pid} after its compile pool existed{test}; it changed nothing, the "
            f"pool made at {v.rel(pool.call.ts):.1f} s kept {kept}: torch reads {var} once, into {name}, when "
            f"torch._inductor.config loads, and reads {name} when AsyncCompile.process_pool makes the pool it "
            "then keeps.",
            [p.pid], [evidence], advice, {})
    return None
