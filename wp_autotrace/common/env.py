"""What a process is started with, in one home: its environment, its command line, its start time.

Each side reads these (a traced process at start-up, the watcher, `run`, the offline reader), and a
traced start-up needs all three, so they are one module: a traced child pays the fixed price of
finding and loading a file (about 0.1 ms each) once for them, not three times (docs/scale.md).

- The environment: every WP_AUTOTRACE* variable, with the words that turn one on or off; and the
  other variables a traced process records (POOL_ENV, RANK_ENV), read without a KeyError per unset
  name. The one-line ``wp_autotrace.pth`` and ``wp_autotrace_start.py`` keep their own literals (they must
  import nothing); tests/test_startfile.py checks them equal to these.
- The command line: this process's own (own_argv), the roles a command line shows, and whether it
  runs the wp-autotrace command; Python's argv grammar itself is cmdline.py's, loaded only where needed.
- The one process clock: a process's create time from /proc/PID/stat (clock_create_time; procfs.py, which
  only the watcher, the root's exit and the offline tools load, re-exports it beside the identity rule).
- Which import changed a variable inductor's config reads (env_watch).

Stdlib only, import-cheap: the host side loads it at start-up.
"""

import os
import sys
import time

from .core import AUTOTUNE_WORKER, COMPILE_SIDECAR, FORKSERVER, QUACK_WORKER, RESOURCE_TRACKER

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")

# Read by every traced process.
ENABLE_ENV = "WP_AUTOTRACE"
LOG_ENV = "WP_AUTOTRACE_LOG"
STACK_ENV = "WP_AUTOTRACE_STACK"
TARGETS_ENV = "WP_AUTOTRACE_TARGETS"
INTERVAL_ENV = "WP_AUTOTRACE_SAMPLE_INTERVAL"
LINGER_ENV = "WP_AUTOTRACE_LINGER"
GUARD_ENV = "WP_AUTOTRACE_GUARD"
REDACT_ENV = "WP_AUTOTRACE_REDACT"
# A job id of the user's choosing, recorded with each process's launcher variables
# (RANK_ENV, below): runs on several hosts that carry the same one are one job.
JOB_ENV = "WP_AUTOTRACE_JOB"
# `otlp`: the watcher streams the run's spans to the OTEL_EXPORTER_OTLP_* endpoint (watcher/export.py).
EXPORT_ENV = "WP_AUTOTRACE_EXPORT"
# The guard's one mode (GUARD_ENV's value).
GUARD_NESTED_POOLS = "nested-pools"
# Exported by the root for its descendants.
RUN_ENV = "WP_AUTOTRACE_RUN"
ROOT_ENV = "WP_AUTOTRACE_ROOT_PID"
WATCHED_ENV = "WP_AUTOTRACE_WATCHED"  # the run id whose watcher the root started
NOTICE_ENV = "WP_AUTOTRACE_NOTICE"  # the guard's notice file
# Set only when tracing stays off after the settings warnings were printed: the pid that printed
# them, so that its descendants (the same settings) stay silent. Never a run's identity. Not a
# setting: named _MARK, not _ENV, until README's row of the root's internal variables lists it
# (tests/test_readme.py checks every *_ENV name is in README's Settings table).
WARNED_ENV = "WP_AUTOTRACE_WARNED"
# Added by a wrapper to the environment of the interpreters its call's own thread
# starts (never to os.environ; the child pops it at start): how a spawned pool
# process learns which pool it serves.
CHILD_ROLE_ENV = "WP_AUTOTRACE_CHILD_ROLE"
# Every name above starts with this: what a clean child environment drops.
PREFIX = "WP_AUTOTRACE"
# What a run hands down to its descendants (a fresh run, e.g. `wp-autotrace run`, drops them).
RUN_IDENTITY_ENV = (RUN_ENV, ROOT_ENV, NOTICE_ENV, WARNED_ENV)


def is_true(value: "str | None") -> bool:
    """A switch's value read as on (1, true, yes, on; case and spaces ignored)."""
    return (value or "").strip().lower() in TRUE_WORDS



# Environment variables recorded at process start and at each warm_pool call,
# because each one silently decides whether a pool starts.
POOL_ENV = (
    "TORCH_WARM_POOL",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_WORKER_START",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "TORCH_TNT_IN_USE",
    # Set by pytest during each test: the test that made a pool (at SubprocPool.__init__).
    "PYTEST_CURRENT_TEST",
)

# Rank and launcher variables recorded at process start (torchrun/elastic, Slurm,
# Open MPI, MPICH/Intel MPI, PMIx): which rank a process serves, and under which
# launch. The launch identities (analysis/derive/jobs.py groups runs of several hosts
# into one job by them) are a few more reads of os.environ per process start.
#
# torchrun (elastic agent) sets it in every rank it starts: 0 for the first attempt, N after N restarts of the
# worker group; a rank's processes of two attempts are one rank started twice (analysis/derive/attempts.py).
ELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
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
    # the attempt: torchrun starts every rank again after a failure, each time with this one higher
    ELASTIC_RESTART_COUNT,
    # launch identities
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_NODEID",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_JOBID",
    JOB_ENV,
)


def set_vars(names: "tuple[str, ...]") -> "dict[str, str]":
    """{name: value} of the names set in os.environ now, in names' order.

    Read from os.environ's own dict of encoded names where os.environ is the standard mapping:
    ``os.environ.get(name)`` raises and catches a KeyError inside for each name that is not set (about
    9K instructions each, and most names a start reads are unset); a dict lookup does not. Another mapping (a
    host may replace os.environ) is read through its own interface. names: ASCII (this module's names), so
    str.encode gives the key os.environ's encodekey gives in any filesystem encoding of CPython on POSIX (all
    ASCII-compatible), and a value is decoded as its decodevalue decodes one, each without its Python call.
    Every traced start reads a few such tuples once each: no table of encoded keys is kept (building one cost
    a start more than it saved), and a loop, not a comprehension (one code object more to load at every start).
    """
    env = os.environ
    data: Any = getattr(env, "_data", None)
    standard = type(env) is _ENVIRON and type(data) is dict
    found: dict[str, str] = {}
    for k in names:
        if standard:
            value = data.get(k.encode())
            if value is not None:
                found[k] = value.decode(FS_ENCODING, "surrogateescape")
        elif k in env:
            found[k] = env[k]
    return found


_ENVIRON = type(os.environ)
# os.environ's encoding of names and values on POSIX (os.py: the filesystem encoding, surrogateescape).
FS_ENCODING = sys.getfilesystemencoding()


def pool_env() -> "dict[str, str]":
    """The environment variables that decide whether a pool starts, as set now."""
    return set_vars(POOL_ENV)


# Set by hand in many shells and containers: on their own they prove no launch.
_ONLY_WITH_OTHERS = ("MASTER_ADDR", "MASTER_PORT")


def rank_env() -> "dict[str, str]":
    """The rank/launcher variables that are set (empty outside a distributed launch)."""
    found = set_vars(RANK_ENV)
    return found if found.keys() - _ONLY_WITH_OTHERS else {}


# -- the command line: what it runs ------------------------------------------------------------



# Roles recognised from a process's command line at start (script path,
# -m module or -c code). Checked in order; the first marker found wins.
ARGV_ROLES: "tuple[tuple[str, str], ...]" = (
    ("_inductor/compile_worker/__main__.py", COMPILE_SIDECAR),
    ("_inductor/__autotune_main__.py", AUTOTUNE_WORKER),
    ("quack._compile_worker", QUACK_WORKER),
    # Started by multiprocessing's spawn/forkserver pools; it outlives its
    # starter by a moment, by design.
    ("multiprocessing.resource_tracker", RESOURCE_TRACKER),
    # multiprocessing's forkserver: started on demand, lives until its starter exits.
    ("multiprocessing.forkserver", FORKSERVER),
)

# How the wp-autotrace command shows in a command line: it never traces itself
# (`run` execs the program, which is traced as its own interpreter starts).
CLI_SCRIPT = "wp-autotrace"
CLI_MODULE = "wp_autotrace"


def runs_own_cli(argv: "Sequence[str]") -> bool:
    """Whether an interpreter's argv runs the wp-autotrace command (its console script, or
    python -m wp_autotrace); argv[0] may be any interpreter's name.

    Every traced start asks. Either answer needs one of the two names inside an argument, so where neither
    is (one C search of the joined arguments) the answer is no without loading the argv grammar (cmdline.py).
    """
    joined = "\0".join(argv)
    if CLI_MODULE not in joined and CLI_SCRIPT not in joined:
        return False
    from .cmdline import basename, program

    kind, what = program(argv) if argv else ("repl", "")
    return (kind, what) == ("-m", CLI_MODULE) or (kind == "script" and basename(what) == CLI_SCRIPT)


def own_argv() -> "list[str]":
    """This interpreter's full command line (sys.orig_argv; /proc on Python < 3.10)."""
    argv = getattr(sys, "orig_argv", None)
    if argv:
        return list(argv)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            data = f.read(65536).decode(errors="replace")
    except OSError:
        return []
    # Each argument ends with a NUL: the last split piece is not an argument.
    return data.split("\0")[:-1] if data.endswith("\0") else data.split("\0")


# -- the one process clock --------------------------------------------------------------------


# /proc/PID/stat (man proc(5)): (1) pid, (2) comm in parentheses (it may hold
# spaces and ")", so fields are counted from the last ")"), then (3) state,
# (4) ppid, (5) pgrp, (6) session, ... (20) num_threads, ... (22) starttime in
# clock ticks since boot, (23) vsize, (24) rss in pages. Indexes below count from field 3.
STAT_STATE, STAT_PPID, STAT_PGRP, STAT_SESSION, STAT_THREADS, STAT_STARTTIME, STAT_RSS = 0, 1, 2, 3, 17, 19, 21
# A stat line is well under this (52 fields; comm at most 64 bytes).
STAT_BYTES = 4096

def split_stat(data: bytes, maxsplit: int = -1) -> "tuple[str, list[bytes]] | None":
    """A /proc/PID/stat line as (comm, fields from (3) on); None if malformed. maxsplit (at least STAT_RSS + 1):
    fields past it stay one bytes object, for a caller that reads none of them (a traced start reads its
    starttime only: 23 objects made, not 52)."""
    head, sep, tail = data.rpartition(b")")
    fields = tail.split(None, maxsplit)
    if not sep or len(fields) <= STAT_RSS:
        return None
    return head.partition(b"(")[2].decode(errors="replace"), fields


_boot_time: "float | None" = None


def boot_time() -> float:
    """The boot time on the wall clock, exact to microseconds: computed once per process.

    /proc/PID/stat's starttime counts ticks of CLOCK_BOOTTIME (suspend included,
    proc(5)); /proc/stat's btime is that boot time cut to an integer second (up
    to 1 s early), which put every start up to 1 s before the records' clock.
    Where CLOCK_BOOTTIME is missing, btime.
    """
    global _boot_time
    if _boot_time is None:
        try:
            _boot_time = _bracketed_boot()
        except (AttributeError, OSError):
            _boot_time = _btime()
    return _boot_time


# Bracketed reads of the two clocks: a process preempted between its wall-clock and its boot-clock read gets a
# boot time off by the preemption (40 ms seen at load 18), and two processes then disagree past procfs.SAME_START_S on
# one create time (the watcher took its own root for another process and quit). The read whose bracket is
# tightest is kept, the wall clock taken as the bracket's middle.
BOOT_READS = 5
BOOT_TIGHT_S = 0.0005


def _bracketed_boot() -> float:
    """The wall clock minus CLOCK_BOOTTIME, from the tightest of up to BOOT_READS bracketed reads (the first
    within BOOT_TIGHT_S ends the search: one read where nothing preempts)."""
    best_span, best = float("inf"), 0.0
    for _ in range(BOOT_READS):
        t1 = time.time()
        up = time.clock_gettime(time.CLOCK_BOOTTIME)
        t2 = time.time()
        if t2 - t1 < best_span:
            best_span, best = t2 - t1, (t1 + t2) / 2 - up
        if best_span <= BOOT_TIGHT_S:
            break
    return best


def _btime() -> float:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    return 0.0


def clock_create_time(starttime: bytes, tick: int, boot: float) -> float:
    """The one process clock: a stat starttime (clock ticks since boot) as a create time, Unix seconds on the
    records' clock, 2 decimals (tick: SC_CLK_TCK; boot: boot_time()).

    Every process of a run (process_start), the watcher (tree entries, through procfs.ProcClock), the root's
    exit and cleanup use this one clock and rounding, so (host, pid, create_time) names one process (compare
    two with procfs.same_process). A function, not a class: a class costs a traced start ~0.1M instructions
    to make, and the start reads one create time, its own.
    """
    return round(boot + int(starttime) / tick, 2)


def own_start() -> "tuple[float | None, int | None]":
    """This process's (create time, raw start ticks) from one /proc/self/stat read; (None, None) where there is
    no /proc. The ticks (clock ticks since boot) are what a wall-clock step leaves alone: a reader holding its
    own boot time turns them into a create time on its own clock (clock_create_time), where the create time
    this process computed is on the clock it read at its start."""
    try:
        fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)  # a third of open()'s cost (procfs._read)
        try:
            data = os.read(fd, STAT_BYTES)
        finally:
            os.close(fd)
        parsed = split_stat(data, STAT_RSS + 1)
        if parsed is None:
            return None, None
        started = parsed[1][STAT_STARTTIME]
        return clock_create_time(started, os.sysconf("SC_CLK_TCK"), boot_time()), int(started)
    except (OSError, ValueError):
        return None, None


# The variables torch reads into inductor's config as torch._inductor.config loads (compile_threads,
# worker_start_method): a change of one before that import changes the setting (env_watch finds who).
READ_AT_CONFIG = ("TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_WORKER_START")


def env_watch() -> "Any":
    """Which import saw READ_AT_CONFIG change in-process: checked as each import begins (the finders' find_spec),
    until inductor's config loads (finish). Protocol: check(fullname) at every import; finish() once inductor's
    config has loaded (it read the variables): stops watching and answers the changes seen until then, each
    {var, old, new, before, at}: the value was `old` when the import of module `before` began and `new` when
    the import of `at` began, so the change was made by `before`'s import (its top level after its own last
    import) or by the importing code between the two imports.

    A namespace of two closures, not a class: every traced start makes one, and a class costs a start ~0.1M
    instructions to make. Cost per import (a traced host pays it at each import that reaches sys.meta_path):
    two lookups in os.environ's own dict and two identity tests (an assignment makes a new value object), the
    dict's get, the keys and the values seen held in the closures' cells (~0.85K instructions; BENCHMARKS.md);
    nothing when os.environ is not the standard mapping.
    """
    env = os.environ
    data = getattr(env, "_data", None)
    get: Any = None  # the watched dict's get; None: not watching (another mapping, or finished)
    k0 = k1 = s0 = s1 = None  # the two variables' keys in that dict, and their values seen at the last import
    if type(env) is _ENVIRON and type(data) is dict:
        get = data.get
        k0, k1 = map(str.encode, READ_AT_CONFIG)  # ASCII: as set_vars encodes its names
        s0, s1 = get(k0), get(k1)
    last = ""  # the import begun last
    changes: list[dict[str, object]] = []

    def check(fullname: str) -> None:
        """At the start of fullname's import: note a change of a watched variable since the last import."""
        nonlocal last, s0, s1
        if get is not None and (get(k0) is not s0 or get(k1) is not s1):
            new0, new1 = get(k0), get(k1)
            for var, old, new in ((READ_AT_CONFIG[0], s0, new0), (READ_AT_CONFIG[1], s1, new1)):
                if old != new:  # set again to an equal value: no change
                    changes.append({"var": var, "old": None if old is None else env.decodevalue(old),
                                    "new": None if new is None else env.decodevalue(new), "before": last,
                                    "at": fullname})
            s0, s1 = new0, new1
        last = fullname

    def finish() -> "list[dict[str, object]]":
        """Inductor's config has loaded: stop watching; the changes seen until now."""
        nonlocal get
        get = None
        return changes

    return _Namespace(check=check, finish=finish)


# types.SimpleNamespace without importing types (a start-up cost)
_Namespace: "Any" = type(sys.implementation)
