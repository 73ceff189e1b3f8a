"""The log's vocabulary, in one home: the schema version, event names, roles, leftover and exit reasons.

Every writer (runtime, watcher, `run`) and every reader (analysis, cli) spells these through this
module; the one literal left is pytest_plugin.py's "test", as that plugin imports nothing of ours.
tests/test_schema.py checks every emit site against analysis/read/schema.py, which adds each event's
fields and types, and tests/test_house.py that no other module defines a name this module defines.

Two files, one vocabulary: the words a traced start and its exit write (the record's frame, their events
and roles) are core.py's, re-exported here, since a traced process that imports no target module loads
only that part (runtime's start modules import from it); every other name is defined here. Stdlib only.
"""

from .core import (
    AUTOTUNE_WORKER as AUTOTUNE_WORKER,
)
from .core import (
    CHILD as CHILD,
)
from .core import (
    COMPILE_SIDECAR as COMPILE_SIDECAR,
)
from .core import (
    COMPILE_WORKER as COMPILE_WORKER,
)
from .core import (
    ERROR as ERROR,
)
from .core import (
    EXEC as EXEC,
)
from .core import (
    EXIT_NOTE as EXIT_NOTE,
)
from .core import (
    FORKSERVER as FORKSERVER,
)
from .core import (
    FX_COMPILE_SIDECAR as FX_COMPILE_SIDECAR,
)
from .core import (
    GUARDED_ROLES as GUARDED_ROLES,
)
from .core import (
    HEADER_KEYS as HEADER_KEYS,
)
from .core import (
    HELPER_ROLES as HELPER_ROLES,
)
from .core import (
    MAIN as MAIN,
)
from .core import (
    MAX_RECORD_BYTES as MAX_RECORD_BYTES,
)
from .core import (
    PROCESS_EXIT as PROCESS_EXIT,
)
from .core import (
    PROCESS_START as PROCESS_START,
)
from .core import (
    QUACK_WORKER as QUACK_WORKER,
)
from .core import (
    RECORD_START as RECORD_START,
)
from .core import (
    RESOURCE_TRACKER as RESOURCE_TRACKER,
)
from .core import (
    SCHEMA_VERSION as SCHEMA_VERSION,
)
from .core import (
    SIDECAR_ROLES as SIDECAR_ROLES,
)
from .core import (
    SIGNAL_SENT as SIGNAL_SENT,
)
from .core import (
    TRACER_ERROR as TRACER_ERROR,
)

# The watcher-reader timing contract: the watcher writes its verdict (leftover) this long after it first
# misses the main process (processes the root's exit is just ending get this long to go). `run` waits this
# long (plus two ticks and some slack) for the verdict before it summarises (cli/run/__init__.py
# await_verdict).
LEFTOVER_GRACE_S = 0.2
# The /proc/PID/stat states of a stopped process (a SIGSTOP or SIGTSTP's group stop; a tracer's), which the verdict
# writes into a leftover's entry: one that runs no code until a SIGCONT, never "left running".
STOPPED = ("T", "t")
# A process the watcher's verdict names left running, but whose end the log shows (its process_exit, or the
# watcher saw it gone) this soon after the main process's, was ending with it, not left running: torch's own
# worker watchdog (2.1-2.9) polls its creator every 1 s and then SIGKILLs the worker, so its workers end up to
# about 1 s after the main; two and a half polls leave a loaded host's watchdog a poll late and the watcher's own
# late look room, sit on no multiple of the poll, and stay far below what anyone would call "left running"
# (analysis/fold/finish.py settle_leftovers).
LEFTOVER_ENDED_S = 2.5
# A process whose own process_exit came that soon after the main's end ended with it only where the watcher then
# saw it gone within this long of that record: the interpreter's teardown after the record (torch 2.13's orphaned
# sidecar: 1.6-2.7 s idle, up to 5.4 s at load 20) runs finalizers and daemon threads, and one that lingers past
# this (a __del__ joining a thread, a device library's teardown) was left running, whatever its record says.
LEFTOVER_TEARDOWN_S = 10.0
# The watcher-reader sampling contract: the watcher reads a pool process's memory at most every
# MEMORY_EVERY_S and looks at the live set every MEMORY_LOOK_S (watcher/memory.py), so while it keeps up a
# process's latest sample is at most MEMORY_STALE_S old: the most a sample may age and still count in a
# sum at one moment (analysis/derive/memseries.py; docs/evidence.md, "Memory at once").
MEMORY_EVERY_S = 2.0
MEMORY_LOOK_S = 0.5
MEMORY_STALE_S = MEMORY_EVERY_S + MEMORY_LOOK_S
# A loaded host stretches that period (the sampler's CPU budget: an idle pool read every 8-9 s at load 9-20), and
# it changes within a run with the load and the pools' sizes, so a reading counts for MEMORY_KEPT_K x the pace
# the watcher kept near it (the median of the MEMORY_PACE_N sweep periods nearest it), MEMORY_STALE_S at least: a
# sweep a little late still counts, a gap far beyond the pace around it (the watcher stopped, stalled or died) is
# still unread (analysis/fold/pace.py).
MEMORY_KEPT_K = 1.5
# The watcher writes every live member's rss at least this often (a keep-alive tree record; watcher/main.py), its
# heartbeat looked for this often: while it runs it is never quiet longer than their sum, so a member without an end
# record is shown alive at the end of the log only by a watcher record that near it (analysis/derive/alive.py).
KEEPALIVE_S = 60.0
HEARTBEAT_S = 2.0
MEMORY_PACE_N = 8
# An idle MiB·s whose stretch went unread (a process alive with no reading STALE_S fresh) for more than this
# share of it is a floor, told "at least ... (read for N of M s)": a watcher that keeps up leaves a few tenths
# of a second unread at a worker's start; one stretched on a loaded box (readings every 8-9 s) leaves 70 %.
IDLE_UNREAD_SHARE = 0.1

# Event names (a start's own: core.py).
CALL = "call"
RETURN = "return"
BLOCKED = "blocked"
IMPORT = "import"
CONFIG = "config"
ROLE = "role"
TREE = "tree"
LEFTOVER = "leftover"
WATCHER_START = "watcher_start"
WATCHER_EXIT = "watcher_exit"
# the watcher was sent a signal a job's end sends every process of its step (watcher/signals.py)
WATCHER_SIGNAL = "watcher_signal"
MEMORY = "memory"  # the watcher's PSS/USS samples of pool processes (watcher/memory.py)
RUN_EXIT = "run_exit"  # written by `wp-autotrace run`: the status it waited for (docs/evidence.md)
OOM = "oom"  # the watcher: the run's cgroup counted another OOM kill (memory.events oom_kill)
MEMCG = "memcg"  # the watcher: a memory cgroup of the run's processes and its limit, once per cgroup (cgroups.py)
PIDCG = "pidcg"  # the watcher: a pids cgroup of them, its limit and its refusals' count (and again at its end)
CPUCG = "cpucg"  # the watcher: a cpu cgroup of them, its CFS quota and its throttled periods (and again at its end)
# torch's wrapper of a pool job's error, as the process that sent the job raises it (subproc_pool.SubprocException):
# a return record's `error` starts with it. The watcher reads the pids limits' counts again as it first sees one.
JOB_ERROR = "SubprocException:"
# the watcher: what a pool process first seen orphaned (or left over) held: listening sockets, pipes (fds.py)
ORPHAN_FDS = "orphan_fds"
# the watcher: a process's process_exit found no descriptor to be written with; its note said so (EXIT_NOTE)
EXIT_UNWRITTEN = "exit_unwritten"
# the watcher: the run's main process changed its user or its root directory, after which the log refused its
# records (watcher/rootchange.py)
ROOT_CHANGE = "root_change"
# A pool worker began or ended one job (runtime/jobs.py): its start without an end is a job it held.
JOB = "job"
# Written by a process that just started a worker of its torch compile executor (a fork/spawn pool in the main):
# the worker's pid, so the watcher reads it as a compile worker while it still imports, before its own role record.
WORKER_SPAWNED = "worker_spawned"
TEST = "test"  # a pytest test began or ended (the pytest plugin, only while tracing is on)

# Roles: what a process is to the run (process_start's and the watcher's `role`; a start's own and the
# pools': core.py).
WATCHER = "watcher"  # the tracer's own watcher: bookkeeping, never one of the run's processes
RUNNER = "run"  # `wp-autotrace run` itself, writing run_exit: bookkeeping, never one of the run's processes
# A torch.utils.data worker: torch's _worker_loop ran in it (targets.py).
DATALOADER_WORKER = "dataloader-worker"
# A pool's processes (compile sidecars and their workers; autotune subprocesses and quack's compile workers,
# which their creator starts itself): the watcher reads their PSS, and the report counts their memory as a pool's.
POOL_ROLES = SIDECAR_ROLES | {COMPILE_WORKER, AUTOTUNE_WORKER, QUACK_WORKER}
# The last argument of the command line multiprocessing's spawn start method runs a child with.
SPAWNED_ARG = "--multiprocessing-fork"
# Words of the RuntimeError multiprocessing raises in a spawned child that starts a process before its own start
# has finished (the re-imported main script's top level making a pool there): no process was started.
BOOTSTRAPPING_ERROR = "bootstrapping phase"

# How the watcher proved a tree entry the run's (tree.started[].via), and why one is only possibly
# the run's (tree.possible[].via): a shared process group or session is not evidence of descent.
VIA_ROOT = "root"
VIA_CHILD = "child"  # a child of a member (a re-parented orphan stays a member once seen)
VIA_CLAIM = "claim"  # its own process_start claims the run
VIA_GROUP = "group"
VIA_SESSION = "session"

# leftover's `how`: why the watcher listed what was still alive.
ROOT_EXIT = "root-exit"  # the root wrote its process_exit
ROOT_KILLED = "root-killed"  # the root ended without one
LINGER_END = "linger-end"  # still alive when the watcher's linger ran out

# watcher_exit's `reason`.
EXIT_RUN_ENDED = "run-ended"
EXIT_LINGER_END = LINGER_END
EXIT_LOG_GONE = "log-gone"
EXIT_LOG_UNWRITABLE = "log-unwritable"
EXIT_ROOT_IS_REAPER = "root-is-reaper"
# /proc is another pid namespace's (unshare -p without --mount-proc): the run's pids name other processes
# there, or none; the watcher cannot see the run, so it gives no verdict rather than a wrong one.
EXIT_PROC_ELSEWHERE = "proc-of-another-pid-namespace"
# sent SIGTERM/SIGINT/SIGHUP, it left at its bound or a second such signal, before the run ended (signals.py)
EXIT_SIGNALLED = "signalled"
EXIT_ERROR = "error"
WATCHER_EXIT_REASONS = (EXIT_RUN_ENDED, EXIT_LINGER_END, EXIT_LOG_GONE, EXIT_LOG_UNWRITABLE,
                        EXIT_ROOT_IS_REAPER, EXIT_PROC_ELSEWHERE, EXIT_SIGNALLED, EXIT_ERROR)
