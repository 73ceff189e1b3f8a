"""The log's core words: what every traced process's start and exit write (the record's frame and header, their
events and roles).

Part of the log's one vocabulary (vocab.py re-exports every name here and defines the rest; a reader imports
vocab): split by job, as a traced process that imports no target module loads only what its start, its exit
and its host hooks (exec, signals) write: every name a start module holds costs each traced start its
unmarshal and store (docs/scale.md). runtime's start modules and env.py import from here. Stdlib only, no
imports.
"""

SCHEMA_VERSION = 1
# The members every record starts with, in this order: runtime/sink.py writes them, analysis/fold/fold.py
# tells them from the fields a record carries. pidns only where its writer is not in the initial pid namespace.
HEADER_KEYS = ("v", "event", "ts", "pid", "ppid", "host", "pidns", "role", "seq")
# Records are kept well below the size a local filesystem appends atomically
# (70 KB lines were seen intact here); bigger ones are shrunk, never split.
MAX_RECORD_BYTES = 32 * 1024
# Record framing: a blank line before each record ends any fragment left by a
# killed or short write, so the next record always starts a fresh line.
RECORD_START = b"\n"
# Event names.
PROCESS_START = "process_start"
PROCESS_EXIT = "process_exit"
TRACER_ERROR = "tracer_error"
# the guard's record in a pool process (runtime/catch.py, loaded at its start)
ERROR = "error"
EXEC = "exec"  # written by a process just before it execs; a later record of it means the exec failed
# written by a process just before it signals another (os.kill, os.killpg, signal.pidfd_send_signal); again, with
# `error`, where that failed
SIGNAL_SENT = "signal_sent"
# A note beside the log (LOG + EXIT_NOTE + pid): a symlink, which needs no descriptor, whose target holds what an
# exit record that could not be written would have said; the watcher reads it when it sees that process end.
EXIT_NOTE = ".exit-unwritten."
# Roles: what a process is to the run (process_start's and the watcher's `role`): a start's own, and those a
# command line shows (env.ARGV_ROLES) or a pool's guard reads.
MAIN = "main"  # the run's root
CHILD = "child"  # any other traced process
COMPILE_SIDECAR = "compile-sidecar"
FX_COMPILE_SIDECAR = "fx-compile-sidecar"
COMPILE_WORKER = "compile-worker"
AUTOTUNE_WORKER = "autotune-worker"
QUACK_WORKER = "quack-worker"
RESOURCE_TRACKER = "resource-tracker"
FORKSERVER = "forkserver"
# Sidecars: the processes that fork a compile pool's workers.
SIDECAR_ROLES = frozenset({COMPILE_SIDECAR, FX_COMPILE_SIDECAR})
# Every process whose only job is to serve a compile or autotune pool: a
# warm_pool there (a device plugin auto-loaded by its `import torch`) nests pools.
GUARDED_ROLES = SIDECAR_ROLES | {COMPILE_WORKER, AUTOTUNE_WORKER, QUACK_WORKER}
# Helper processes that outlive their starter by design: never "left behind".
HELPER_ROLES = frozenset({RESOURCE_TRACKER, FORKSERVER})
