"""The table of what wp-autotrace wraps, as data.

Each row names one function or method by module and qualified name, and says
how to record it. Rows for every torch release 2.1 - 2.14 live side by side:
a name that does not exist in the installed torch is skipped silently, so
the table needs no version checks. See ../shared/torch-targets.md (and
docs/torch-coverage.md) for where each name lived in which release.
"""

from __future__ import annotations

import os

# Modes: how a call is recorded.
TRACE = "trace"  # a call record (with stack) and a return record
COUNT = "count"  # a per-process counter, written at process exit (hot paths)
IMPORT = "import"  # the module's import itself is the event (qualname unused)
CONFIG = "config"  # read settings from the module once it has loaded

# Guard actions (WP_AUTOTRACE_GUARD=nested-pools), applied only in processes
# whose role is in GUARDED_ROLES.
SKIP = "skip"  # return None without calling
INLINE_POOL = "inline-pool"  # return an executor that runs jobs in-process


# Environment variables recorded at process start and at each warm_pool call,
# because each one silently decides whether a pool starts.
WATCHED_ENV = (
    "TORCH_WARM_POOL",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_WORKER_START",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "TORCH_TNT_IN_USE",
)

# Rank and launcher variables recorded at process start (torchrun/elastic, Slurm,
# Open MPI, MPICH/Intel MPI): which rank a process serves, and under which launch.
RANK_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "LOCAL_WORLD_SIZE",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "TORCHELASTIC_RUN_ID",
)


def watched_env() -> dict[str, str]:
    """The environment variables that decide whether a pool starts, as set now."""
    return {k: os.environ[k] for k in WATCHED_ENV if k in os.environ}


def rank_env() -> dict[str, str]:
    """The rank/launcher variables that are set (empty outside a distributed launch)."""
    return {k: os.environ[k] for k in RANK_ENV if k in os.environ}


# Inductor settings recorded when torch._inductor.config has loaded.
CONFIG_KEYS = ("compile_threads", "worker_start_method", "quiesce_async_compile_pool",
               "quiesce_async_compile_time")
# A config name holding one of these is a pool knob: the config record lists the ones this
# torch has (config event's `knobs`), so advice names only settings the user's torch knows.
KNOB_MARKS = ("compile_threads", "quiesce")


# Semantic tags: what a target's call means, whatever torch release named it.
WARM_POOL = "warm-pool"  # AsyncCompile.warm_pool: starts a compile pool now
MAYBE_WARM_POOL = "maybe-warm-pool"  # torch's own, TORCH_WARM_POOL-honouring entry
PROCESS_POOL = "process-pool"  # AsyncCompile.process_pool: makes (or returns) the pool
EXIT_SHUTDOWN = "exit-shutdown"  # shutdown_compile_workers: torch's atexit stop of every pool
ASYNC_WAKEUP = "async-wakeup"
ASYNC_QUIESCE = "async-quiesce"
WAIT_POOL_READY = "wait-pool-ready"
AFTER_FORK = "after-fork"
WORKER_START = "worker-start"  # the compile-worker initializer
POOL_CREATE = "pool-create"  # SubprocPool.__init__: a sidecar is started (its pid captured)
POOL_SUBMIT = "pool-submit"
POOL_QUIESCE = "pool-quiesce"
POOL_WAKEUP = "pool-wakeup"
POOL_SHUTDOWN = "pool-shutdown"
POOL_DEATH = "pool-sidecar-death"
SIDECAR_POOL_START = "sidecar-pool-start"  # the sidecar builds its worker pool (worker pids captured)
SIDECAR_MAIN = "sidecar-main"  # the sidecar's serving loop
SIDECAR_QUIESCE = "sidecar-quiesce"
SIDECAR_SHUTDOWN = "sidecar-shutdown"  # the sidecar was asked to stop: it served its pool
SIDECAR_POOL_SHUTDOWN = "sidecar-pool-shutdown"
TRACKED_POOL = "tracked-pool"
AUTOTUNE_POOL = "autotune-pool"
AUTOTUNE_START = "autotune-start"
AUTOTUNE_STOP = "autotune-stop"
FX_POOL = "fx-pool"
QUACK_PRECOMPILE = "quack-precompile"
QUACK_SHUTDOWN = "quack-shutdown"
BACKEND_IMPORT = "backend-import"
DATALOADER_LOOP = "dataloader-loop"  # torch.utils.data's worker loop: the process is a DataLoader worker
CONFIG_TAG = "config"
USER_TAG = "user"  # WP_AUTOTRACE_TARGETS rows: no meaning known

# The label of a call in the log: "module:Qual.name". Built and split here only.
LABEL_SEP = ":"


def make_label(module: str, qualname: str) -> str:
    """A call's label in the log: ('torch.x', 'AsyncCompile.warm_pool') -> 'torch.x:AsyncCompile.warm_pool'."""
    return f"{module}{LABEL_SEP}{qualname}"


def split_label(label: str) -> tuple[str, str]:
    """The inverse of make_label: (module, qualname); ('', label) when there is no separator."""
    module, sep, qualname = label.partition(LABEL_SEP)
    return (module, qualname) if sep else ("", label)


def short_label(label: str) -> str:
    """'mod:AsyncCompile.warm_pool' -> 'AsyncCompile.warm_pool' (for people)."""
    return split_label(label)[1]


class Target:
    """One thing to wrap: where it lives and how to record it.

    A plain class rather than a NamedTuple: importing typing would add
    milliseconds to every traced interpreter's start.
    """

    __slots__ = ("module", "qualname", "mode", "role", "guard", "capture", "env", "child_role", "tag")

    def __init__(self, module: str, qualname: str, mode: str = TRACE, role: str | None = None,
                 guard: str | None = None, capture: tuple[tuple[str, str], ...] = (), env: bool = False,
                 child_role: str | None = None, tag: str = USER_TAG) -> None:
        self.module = module
        self.qualname = qualname
        self.mode = mode
        # Role the calling process takes on, unless it already has a stronger one.
        self.role = role
        # Guard action (SKIP or INLINE_POOL) in GUARDED_ROLES processes.
        self.guard = guard
        # (key, "self.attr.attr" or "result.attr") read after a successful call
        # and added to the return record; a dict is recorded as its keys.
        self.capture = capture
        # Record WATCHED_ENV with the call.
        self.env = env
        # Role for interpreters this call starts (via CHILD_ROLE_ENV).
        self.child_role = child_role
        # What the call means (one of TAGS), recorded with it: the report keys
        # on tags, so a target renamed between torch releases keeps its meaning.
        self.tag = tag

    @property
    def label(self) -> str:
        """How calls of this target are named in the log (see make_label)."""
        return make_label(self.module, self.qualname)

    def __repr__(self) -> str:
        return f"Target({self.module!r}, {self.qualname!r}, mode={self.mode!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.module, self.qualname, self.mode))


_AC = "torch._inductor.async_compile"
_CC = "torch._inductor.codecache"
_SP = "torch._inductor.compile_worker.subproc_pool"
_AT = "torch._inductor.autotune_process"

_SIDECAR = (("sidecar_pid", "self.process.pid"),)
_WORKERS = (("worker_pids", "self.pool._processes"),)

TARGETS: tuple[Target, ...] = (
    # AsyncCompile: in codecache up to 2.3, in async_compile from 2.4.
    *(
        row
        for mod in (_CC, _AC)
        for row in (
            Target(mod, "AsyncCompile.warm_pool", guard=SKIP, env=True, tag=WARM_POOL),
            Target(mod, "AsyncCompile.process_pool", guard=INLINE_POOL, tag=PROCESS_POOL),
            Target(mod, "shutdown_compile_workers", tag=EXIT_SHUTDOWN),
        )
    ),
    Target(_AC, "AsyncCompile.wakeup", tag=ASYNC_WAKEUP),
    Target(_AC, "AsyncCompile.wait_pool_ready", tag=WAIT_POOL_READY),
    Target(_AC, "AsyncCompile.quiesce", tag=ASYNC_QUIESCE),
    Target(_AC, "maybe_warm_pool", env=True, tag=MAYBE_WARM_POOL),
    Target(_AC, "after_fork", tag=AFTER_FORK),
    # The compile-worker initializer: runs in every pool worker (and in the
    # sidecar's main). Three homes over the releases.
    *(
        Target(mod, "_async_compile_initializer", role="compile-worker", tag=WORKER_START)
        for mod in (
            _CC,
            "torch._inductor.compile_worker.watchdog",
            "torch._inductor.compile_worker.utils",
        )
    ),
    # SubprocPool: the parent's handle on a sidecar (2.4+).
    Target(_SP, "SubprocPool.__init__", capture=_SIDECAR, tag=POOL_CREATE),
    Target(_SP, "SubprocPool.submit", mode=COUNT, tag=POOL_SUBMIT),
    Target(_SP, "SubprocPool.quiesce", capture=_SIDECAR, tag=POOL_QUIESCE),
    Target(_SP, "SubprocPool.wakeup", capture=_SIDECAR, tag=POOL_WAKEUP),
    Target(_SP, "SubprocPool.shutdown", capture=_SIDECAR, tag=POOL_SHUTDOWN),
    # SubprocMain: the sidecar's own pool (built in __init__ in 2.4,
    # _new_pool in 2.5-2.8, lazily in _start_pool from 2.9).
    Target(_SP, "SubprocMain.__init__", capture=_WORKERS, tag=SIDECAR_POOL_START),
    Target(_SP, "SubprocMain._new_pool", capture=(("worker_pids", "result._processes"),),
           tag=SIDECAR_POOL_START),
    Target(_SP, "SubprocMain._start_pool", capture=_WORKERS, tag=SIDECAR_POOL_START),
    Target(_SP, "SubprocMain.main", tag=SIDECAR_MAIN),
    Target(_SP, "SubprocMain._quiesce", tag=SIDECAR_QUIESCE),
    Target(_SP, "SubprocMain._shutdown", tag=SIDECAR_SHUTDOWN),
    Target(_SP, "SubprocMain._shutdown_pool", tag=SIDECAR_POOL_SHUTDOWN),
    Target("torch._inductor.compile_worker.tracked_process_pool", "TrackedProcessPoolExecutor.__init__",
           tag=TRACKED_POOL),
    # 2.14: the health monitor noticed the sidecar died.
    Target(_SP, "SubprocPool._on_sidecar_death", capture=_SIDECAR, tag=POOL_DEATH),
    # Pools outside _pool_set, which shutdown_compile_workers never stops.
    # Autotune subprocess: a spawned Process started by initialize() in 2.1-2.7,
    # a Popen of __autotune_main__.py by start() from 2.8.
    Target(_AT, "TuningProcess.initialize", child_role="autotune-worker", tag=AUTOTUNE_START),
    Target(_AT, "TuningProcess.start", capture=(("autotune_pid", "self.process.pid"),), tag=AUTOTUNE_START),
    Target(_AT, "TuningProcess.terminate", tag=AUTOTUNE_STOP),
    Target(_AT, "TuningProcess.kill", tag=AUTOTUNE_STOP),
    Target(_AT, "TuningProcess.shutdown", tag=AUTOTUNE_STOP),
    Target(_AT, "TuningProcessPool.__init__", tag=AUTOTUNE_POOL),
    Target(_AT, "TuningProcessPool.initialize", tag=AUTOTUNE_START),
    Target(_AT, "TuningProcessPool.terminate", tag=AUTOTUNE_STOP),
    Target(_AT, "TuningProcessPool.shutdown", tag=AUTOTUNE_STOP),
    # Pipelined GEMM autotuning (2.11+): a 1-worker spawn ProcessPoolExecutor,
    # rebuilt by _init_pool after an idle shutdown.
    Target(_AT, "AutotuneProcessPool.__init__", tag=AUTOTUNE_POOL),
    Target(_AT, "AutotuneProcessPool._init_pool", child_role="autotune-worker", tag=AUTOTUNE_START),
    Target(_AT, "AutotuneProcessPool._shutdown", tag=AUTOTUNE_STOP),
    Target(_AT, "AutotuneProcessPool.shutdown_instance", tag=AUTOTUNE_STOP),
    # FX-subprocess compile (2.7+): a SubprocPool(1, kind=SPAWN) of its own.
    Target("torch._inductor.compile_fx_subproc", "_SubprocessFxCompile.process_pool",
           child_role="fx-compile-sidecar", tag=FX_POOL),
    # Vendored quack (2.13+): Popens `python -m torch._vendor.quack._compile_worker`.
    Target("torch._vendor.quack.autotuner", "Autotuner._precompile", tag=QUACK_PRECOMPILE),
    Target("torch._vendor.quack.autotuner", "_PrecompileHandle.shutdown", tag=QUACK_SHUTDOWN),
    # DataLoader workers (every release): the loop runs in the worker, so the process says what it is
    # (a forked child of the training script otherwise looks like any other child).
    Target("torch.utils.data._utils.worker", "_worker_loop", role="dataloader-worker", tag=DATALOADER_LOOP),
    # Device plugins: importing torch_npu's inductor package warms a pool.
    Target("torch_npu._inductor", "", mode=IMPORT, tag=BACKEND_IMPORT),
    Target("torch._inductor.config", "", mode=CONFIG, tag=CONFIG_TAG),
)



def tag_of(label: str) -> str:
    """The tag of a call logged without one (logs written before tags): by label,
    else by the method name when only one tag uses it (a subclass override)."""
    global _TAG_INDEX
    if _TAG_INDEX is None:
        by_label = {t.label: t.tag for t in TARGETS}
        by_method: dict[str, set[str]] = {}
        for t in TARGETS:
            by_method.setdefault(t.qualname.rpartition(".")[2], set()).add(t.tag)
        by_label.update((m, tags.pop()) for m, tags in by_method.items() if len(tags) == 1 and m)
        _TAG_INDEX = by_label
    return _TAG_INDEX.get(label) or _TAG_INDEX.get(short_label(label).rpartition(".")[2]) or USER_TAG


_TAG_INDEX: dict[str, str] | None = None

# Roles recognised from a process's command line at start (script path,
# -m module or -c code). Checked in order; the first marker found wins.
ARGV_ROLES: tuple[tuple[str, str], ...] = (
    ("_inductor/compile_worker/__main__.py", "compile-sidecar"),
    ("_inductor/__autotune_main__.py", "autotune-worker"),
    ("quack._compile_worker", "quack-worker"),
    # Started by multiprocessing's spawn/forkserver pools; it outlives its
    # starter by a moment, by design.
    ("multiprocessing.resource_tracker", "resource-tracker"),
    # multiprocessing's forkserver: started on demand, lives until its starter exits.
    ("multiprocessing.forkserver", "forkserver"),
)


def parse_extra_targets(spec: str) -> tuple[list[Target], list[str]]:
    """Parse WP_AUTOTRACE_TARGETS ("module:Qual.name,...") into traced targets.

    Returns the targets and a list of the items that were rejected. Only
    identifiers are accepted: nothing from the environment is ever evaluated.
    """
    targets: list[Target] = []
    rejected: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        module, sep, qualname = item.partition(":")
        names_ok = all(part.isidentifier() for part in module.split(".")) and all(
            part.isidentifier() for part in qualname.split(".")
        )
        if sep and names_ok and len(item) <= 200:
            targets.append(Target(module, qualname))
        else:
            rejected.append(item[:80])
    return targets, rejected
