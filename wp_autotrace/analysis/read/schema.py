"""The log's record schema, in one place: event names, each event's fields, the version.

The reader (logread) checks every field against FIELD_TYPES, the model
(fold.py) folds records by these names, and docs/log-schema.md's table is
generated from EVENTS (tests/test_schema.py keeps it in step). A new event is
one entry here plus its ``visit_<event>`` handler in fold.py.
"""

from __future__ import annotations

# The event names and the schema version, re-exported: the log's schema is read from this one module.
from ...common.vocab import (
    BLOCKED,
    CALL,
    CONFIG,
    CPUCG,
    ERROR,
    EXEC,
    EXIT_UNWRITTEN,
    IMPORT,
    JOB,
    LEFTOVER,
    MEMCG,
    MEMORY,
    OOM,
    ORPHAN_FDS,
    PIDCG,
    PROCESS_EXIT,
    PROCESS_START,
    RETURN,
    ROLE,
    ROOT_CHANGE,
    RUN_EXIT,
    SCHEMA_VERSION,
    SIGNAL_SENT,
    TEST,
    TRACER_ERROR,
    TREE,
    WATCHER_EXIT,
    WATCHER_EXIT_REASONS,
    WATCHER_SIGNAL,
    WATCHER_START,
    WORKER_SPAWNED,
)

__all__ = [  # what this module offers, its own names and the re-exported vocabulary
    "ANY", "BASE_FIELDS", "BLOCKED", "BOOL", "CALL", "CONFIG", "CPUCG", "DEVS", "DICT", "ENDED", "ERROR", "EVENTS",
    "EXEC",
    "EXIT_UNWRITTEN",
    "FIELD_TYPES", "FRAME", "FRAMES", "IMPORT", "INT", "INTS", "JOB", "KNOWN_EVENTS", "LEFTOVER", "MEMCG", "MEMORY",
    "MEMS",
    "NUM",
    "OOM", "OPT_STR", "ORPHAN_FDS", "PIDCG",
    "PROCESS_EXIT", "PROCESS_START", "PROCS", "RETURN", "ROLE", "ROOT_CHANGE", "RSS", "RUN_EXIT",
    "SCHEMA_VERSION", "SIGNAL_SENT", "STR", "STRS", "TEST", "TIMES", "TRACER_ERROR", "TREE", "UINT", "WATCHER_EXIT",
    "WATCHER_EXIT_REASONS", "WATCHER_SIGNAL", "WATCHER_START", "ZOMBIES", "markdown_table",
]

# Field types the reader checks (check.CHECKS): a field of the wrong type is
# dropped from its record, and counted.
INT = "int"  # an integer in [-2**63, 2**63)
UINT = "uint"  # an integer in [0, 2**63): pids, counts, bytes
NUM = "num"  # a finite number (never NaN/Infinity) within +-1e15
STR = "str"
OPT_STR = "str|null"
BOOL = "bool"
DICT = "dict"  # any JSON object (deep-sanitised: non-finite numbers become null)
ANY = "any"  # any JSON value (deep-sanitised)
INTS = "list[uint]"
STRS = "list[str]"
FRAME = "frame"  # {file, line, func, dist?, dist_version?, rel?, src?}
FRAMES = "list[frame]"
PROCS = "list[proc]"  # {pid, ppid, name, cmd, create_time, rss, role?, via?}
ENDED = "list[ended]"  # {pid, create_time, end, seen?, status?}
RSS = "list[rss]"  # {pid, create_time, rss}
MEMS = "list[mem]"  # {pid, create_time, pss, uss, rss, swap_pss?, threads?, cpu_s?}
DEVS = "list[devices]"  # {pid, create_time, paths}
ZOMBIES = "list[zombie]"  # {pid, create_time, ppid, since, status}
TIMES = "dict[str,list[num]]"  # label -> [first, last]

# Every record carries these (sink.py writes them; watcher records add run and root_pid).
BASE_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("v", UINT, "schema version"),
    ("event", STR, "one of the events below"),
    ("ts", NUM, "Unix seconds"),
    ("pid", UINT, "the writing process"),
    ("ppid", UINT, "its parent at process start"),
    ("host", STR, "host name"),
    ("pidns", UINT, "the writer's pid namespace (the inode /proc/self/ns/pid names) where it is not the initial "
                    "one: its pid is a pid there (`unshare -p`, bwrap, a container)"),
    ("role", STR, "main, compile-sidecar, compile-worker, autotune-worker, quack-worker, dataloader-worker, "
                     "resource-tracker, forkserver, "
                     "watcher, run (`wp-autotrace run` itself: run_exit), child"),
    ("seq", UINT, "per-process counter from 0"),
    ("truncated", UINT, "set when the record was cut to fit 32 KiB: its size before"),
)

_CALL_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("target", STR, "`module:Qual.name`"),
    ("tag", STR, "what the target means (`warm-pool`, `pool-create`, ...; targets.py)"),
    ("call_id", UINT, "per-process call number"),
    ("thread", STR, "thread name"),
    ("stack", FRAMES, "the caller's frames, innermost last"),
    ("caller", FRAME, "innermost frame outside torch and the stdlib (`file`, `line`, `func`, and `dist`, "
                      "`dist_version`, `rel`, `src` when known)"),
    ("parent_call", UINT, "the enclosing traced call"),
    ("env", DICT, "the pool-deciding variables (warm_pool, SubprocPool.__init__: `PYTEST_CURRENT_TEST` too)"),
    ("rss", UINT, "the process's resident memory as the call began, bytes (`compile` calls: /proc/self/statm)"),
    ("pending_jobs", INTS, "captured as the call starts (SubprocPool.shutdown): the ids of the jobs still in "
                           "flight, which torch then cancels"),
    ("pool_running", BOOL, "captured as the call starts (SubprocPool.shutdown): torch still held the pool "
                           "running (false: the call is a no-op)"),
    ("threads", UINT, "captured as the call starts (TrackedProcessPoolExecutor.__init__): the threads its process "
                      "ran, native ones included (/proc/self/stat)"),
    ("compile_threads", INT, "captured as the call starts (AsyncCompile.wait): inductor's compile_threads then"),
    ("worker_start_method", STR, "captured as the call starts (AsyncCompile.wait): inductor's worker_start_method "
                                 "then"),
    ("pool_jobs", UINT, "captured as the call starts (AsyncCompile.wait): the jobs pending in the process's live "
                        "compile pools (torch's `_pool_set`; 2.1-2.2, which keep none: the compile executors "
                        "the process started workers for), summed; absent where unknown. 0: the wait is on "
                        "in-process work (CPU C++ compiles), not on a pool"),
    ("pool_pending", ANY, "captured as the call starts (AsyncCompile.wait; concurrent.futures' _python_exit: the "
                          "torch compile pools its exit join waits on): each compile pool's pending jobs, "
                          "`[{sidecar_pid, pending}]` (a SubprocPool) or `[{worker_pids, pending, jobs?}]` (a "
                          "fork/spawn pool, a sidecar's own at its exit), `jobs` the newest 16 pending by name, "
                          "`[{work_id, fn, arg?}]` as a worker's `job` record names them; absent where unknown"),
    ("autotune_pid", UINT, "captured as the call starts (TuningProcess.kill, .get, .shutdown): its autotune "
                           "subprocess"),
    ("running", BOOL, "captured as the call starts (TuningProcess.kill): torch still held the subprocess running "
                      "(false: the kill sends nothing)"),
    ("executor_class", STR, "captured as the call starts (ProcessPoolExecutor.shutdown): the executor's class "
                            "(`TrackedProcessPoolExecutor`: torch's fork/spawn pool)"),
)
_PART_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("run", STR, "run id"),
    ("root_pid", UINT, "the run's root"),
    ("part", UINT, "this record's number when one set spans several records"),
    ("parts", UINT, "how many records the set spans"),
)
_PROC_NOTE = ("each `{pid, ppid, name, cmd, create_time, rss, role?, cmd_len?, pgid?, nproc?, uid?, sigign?, memcg?, "
              "pidcg?, cpucg?, exec?, nspid?, pidns?}` "
              "(`cmd_len`: the length before `cmd` was cut; `pgid`: its process group; `nproc`: its RLIMIT_NPROC "
              "soft value (`ulimit -u`, from /proc/PID/limits; absent when unlimited or unread) and `uid` its "
              "real uid, whose threads the kernel counts against it; `sigign`: the signals among HUP, INT, QUIT and "
              "TERM it ignored as it joined (/proc/PID/status SigIgn), comma-joined, absent where none; `memcg`: the "
              "path of its memory cgroup "
              "(/proc/PID/cgroup's v1 memory line, else its v2 line; its `memcg` record has the limit); `pidcg`: its "
              "pids cgroup's, alike (its `pidcg` record); `cpucg`: its cpu cgroup's (its `cpucg` record); `exec`: "
              "in a process listed again, whether its image changed (an exec, its memory starts there) or only its "
              "name or command line (a rename), "
              "absent where the watcher could not tell; `nspid`: its pid in its own pid namespace where that is not "
              "the watcher's (`unshare -p`, bwrap: the last of /proc/PID/status NSpid), the pid its own records carry; "
              "`pidns`, with it: that namespace (the inode /proc/PID/ns/pid names), its records' `pidns`)")
_VIA_NOTE = ("; `via`: how it was proven the run's: `root`, `child` (a child of a member) or `claim` (its own "
             "process_start names the run); absent in older logs, where every entry is a member")

# event -> (what it says, its fields as (name, type, description)).
EVENTS: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    PROCESS_START: ("a traced interpreter started (or a forked child, or an exec'd image)", (
        ("argv", STRS, "the whole command line; values of secret-looking options masked as `***`"),
        ("executable", STR, "sys.executable"),
        ("python", STR, "Python version"),
        ("cwd", OPT_STR, "working directory"),
        ("run", STR, "run id, inherited by every descendant"),
        ("root_pid", UINT, "the run's root"),
        ("forked", BOOL, "a forked child (no exec)"),
        ("guard", BOOL, "WP_AUTOTRACE_GUARD=nested-pools"),
        ("env", DICT, "the pool-deciding variables as set"),
        ("create_time", NUM, "process start time (boot time + /proc start ticks, 2 decimals)"),
        ("start_ticks", UINT, "the /proc start ticks themselves (clock ticks since boot): one process across a "
                              "wall-clock step, where the create times two readers computed differ by it"),
        ("rank", DICT, "the launcher variables that are set (targets.RANK_ENV: RANK, LOCAL_RANK, WORLD_SIZE, "
                       "GROUP_RANK, LOCAL_WORLD_SIZE, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                       "TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT (the attempt: 0, then 1 after torchrun's first "
                       "restart of the ranks), and the launch ids that group runs into jobs: MASTER_ADDR, MASTER_PORT, "
                       "SLURM_JOB_ID, SLURM_STEP_ID, SLURM_NODEID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, "
                       "PMI_JOBID, WP_AUTOTRACE_JOB); absent when none is"),
    )),
    CALL: ("a traced call started", _CALL_FIELDS),
    RETURN: ("it returned", (
        ("call_id", UINT, "the call"),
        ("duration_s", NUM, "seconds"),
        ("error", STR, "`Type: message` when the call raised; a long one as its head and its tail with `[...]` "
                        "between (runtime/reads.py's ERROR_HEAD and ERROR_TAIL; the tail: a pool job's own "
                        "exception line)"),
        ("sidecar_pid", UINT, "captured: the pool's sidecar"),
        ("sidecar_exe", STR, "captured (SubprocPool.__init__): the program torch started the sidecar with (its "
                             "argv[0], the creator's sys.executable then)"),
        ("quiesce_after_s", NUM, "captured (SubprocPool.__init__, torch 2.10+): the pool's quiesce delay as it "
                                 "was made (quiesce_async_compile_time then); absent when quiesce was off"),
        ("worker_pids", INTS, "captured: the sidecar's workers"),
        ("max_workers", UINT, "captured (TrackedProcessPoolExecutor.__init__): the workers a fork/spawn pool may "
                              "start (compile_threads as it was made)"),
        ("autotune_pid", UINT, "captured: the autotune process"),
        ("sidecar_returncode", INT, "captured (SubprocPool.shutdown): the sidecar's status as torch's own "
                                    "process.wait() saw it (-N: signal N); absent when torch did not wait"),
        ("rss", UINT, "the process's resident memory as the call returned, bytes (`compile` calls)"),
    )),
    BLOCKED: ("the guard refused a call", _CALL_FIELDS + (("action", STR, "`skip` or `inline-pool`"),)),
    IMPORT: ("a watched module (`torch_npu._inductor`, `torch._dynamo`) started importing", (
        ("module", STR, "module name"),
        ("stack", FRAMES, "as in call"),
        ("caller", FRAME, "as in call"),
        ("env", DICT, "as in call"),
        ("rss", UINT, "the process's resident memory as the import began, bytes (`torch._dynamo`: before "
                      "torch.compile's lazy imports)"),
    )),
    CONFIG: ("torch._inductor.config loaded", (
        ("settings", DICT, "compile_threads, worker_start_method, quiesce_async_compile_pool, "
                           "quiesce_async_compile_time, as this torch has them"),
        ("knobs", STRS, "the pool settings this torch's config has (its names with `compile_threads` or "
                        "`quiesce`): what advice may name"),
        ("torch_version", STR, "torch.__version__"),
        ("env_changed", ANY, "`[{var, old, new, before, at}]`: a variable torch reads into this config "
                             "(TORCHINDUCTOR_COMPILE_THREADS, TORCHINDUCTOR_WORKER_START) changed in the process "
                             "before it loaded: `old` as the import of module `before` began, `new` as the next import "
                             "(`at`) began; absent when none changed"),
    )),
    ROLE: ("the process took a new role", (("role", STR, "the new role"),)),
    WORKER_SPAWNED: ("the process just started a worker of its torch compile executor (a fork/spawn pool; "
                     "concurrent.futures' _spawn_process returned)", (
        ("worker_pid", UINT, "the worker's pid (the watcher reads it as a compile worker from then on, while it "
                             "still imports, before its own `role` record)"),
    )),
    TREE: ("the run's process set changed (the watcher)", _PART_FIELDS + (
        ("count", UINT, "the run's processes alive now (the true number)"),
        ("started", PROCS, "processes first seen now, " + _PROC_NOTE + _VIA_NOTE),
        ("possible", PROCS, "processes sharing only the root's process group (`via`: `group`) or session "
                            "(`session`): possibly the run's, never proven; never in started, ended or leftover"),
        ("ended", ENDED, "processes gone: `{pid, create_time, end, seen?, status?}` (`end`: the first sample that "
                         "missed it; `seen`: the sample before, the last that saw it alive (its pidfd not yet "
                         "readable): it ended in (seen, end]; absent in older logs and where the watcher has no "
                         "pidfd; `status`: its wait status (waitpid's: an exit code or the signal that ended it), "
                         "where its parent had reaped it when the watcher wrote it off, read through its pidfd "
                         "(Linux 6.15+); a zombie's is in `zombies`)"),
        ("rss", RSS, "rss heartbeat: `{pid, create_time, rss}` of each process whose rss moved by 10% or 16 MiB "
                     "since the value last written for it, and of every live process each 60 s (older logs: "
                     "every process every 2 s)"),
        ("final", BOOL, "the last sample"),
        ("zombies", ZOMBIES, "processes of the run seen defunct (state Z: ended, not reaped by their parent), "
                             "once each: `{pid, create_time, ppid, since, status}` (`since`: when the watcher "
                             "saw it end; `status`: the wait status in /proc/PID/stat field 52)"),
        ("reaped", ENDED, "zombies gone from /proc (their parent reaped them): `{pid, create_time, end}`"),
    )),
    LEFTOVER: ("the run's processes still alive when its root ended", _PART_FIELDS + (
        ("how", STR, "`root-exit`, `root-killed` or `linger-end`"),
        ("count", UINT, "how many (the true number)"),
        ("pids", INTS, "their pids"),
        ("procs", PROCS, _PROC_NOTE.replace("pidns?}", "pidns?, state?}", 1) + "; `state`: `T` or `t` where "
                         "it was stopped (a SIGSTOP or SIGTSTP; a tracer's stop) as the verdict was written, its "
                         "/proc/PID/stat state, absent where it ran or slept"),
        ("samples", UINT, "samples taken"),
    )),
    PROCESS_EXIT: ("a traced process is exiting", (
        ("how", STR, "`exit`, or `os._exit`: a forked multiprocessing worker's end, recorded by its last finalizer, "
                     "without `code`"),
        ("code", ANY, "exit code"),
        ("counts", DICT, "counted hot calls (SubprocPool.submit)"),
        ("count_times", TIMES, "each counted call's first and last time (Unix seconds): a pool's first and "
                               "last job"),
        ("count_callers", DICT, "label -> the innermost user frame of the last counted call (SubprocPool.submit: "
                                "the line that sent the last job)"),
        ("dropped", UINT, "records this process could not write"),
        ("below", PROCS, "the root only: its live descendants at its exit, each `{pid, ppid, create_time, "
                         "start_ticks, name}` (at most 200; start_ticks: as process_start's)"),
        ("below_count", UINT, "the root only: how many live descendants it had (the true number)"),
        ("error", STR, "where an uncaught exception ends it: that exception (`Type: message`, cut as a return's "
                       "`error`), as Python printed it before the exit handlers (sys.last_value)"),
        ("uid", UINT, "where `error` says a fork or thread start was refused (EAGAIN): its real uid"),
        ("uid_tasks", UINT, "with `uid`: the tasks (processes' threads) of that uid /proc showed as it exited, "
                            "before its own threads ended (a floor: another pid namespace's are not seen)"),
        ("nproc", UINT, "with `uid`: its own RLIMIT_NPROC soft value (`ulimit -u`); absent where unlimited"),
    )),
    EXEC: ("a traced process is about to exec another program (a later record of it means the exec failed)", (
        ("argv", STRS, "the new command line, masked as process_start's"),
        ("executable", STR, "the program it execs"),
    )),
    SIGNAL_SENT: ("a traced process is about to signal a process or a process group (os.kill, os.killpg, "
                  "signal.pidfd_send_signal: psutil's, subprocess's and multiprocessing's kill and terminate "
                  "reach os.kill); again, with `error`, where the call failed; never for signal 0", (
        ("how", STR, "`kill`, `killpg` or `pidfd_send_signal`"),
        ("target", INT, "kill's pid as given (0 and negatives are process groups, as kill(2) reads them), "
                        "killpg's pgid, or the pidfd's process (-1: it had ended; 0: not known)"),
        ("signal", UINT, "the signal's number"),
        ("frames", FRAMES, "the sender's frames, innermost first (the caller of os.kill first), at most 8"),
        ("pidfd", UINT, "pidfd_send_signal's descriptor"),
        ("error", STR, "the failure's errno name (`ESRCH`, `EPERM`): the signal was not sent"),
    )),
    TEST: ("a pytest test began or ended (the pytest plugin, only while tracing is on)", (
        ("nodeid", STR, "the test's node id (`FILE::TEST`)"),
        ("phase", STR, "`start` or `end`"),
    )),
    JOB: ("a process pool worker began or ended one job (its worker loop, concurrent.futures' `_process_worker`: "
          "torch's fork/spawn pools' workers and a sidecar's: a loop started with torch's compile initializer; "
          "AutotuneProcessPool's worker: a loop run in the autotune-worker role its pool's call handed it; never a "
          "program's own pool's); a start without an end is a job the worker held "
          "until it ended", (
        ("state", STR, "`start` or `end`"),
        ("work_id", UINT, "the job's number in its executor (an end names the start it ends)"),
        ("fn", STR, "start: the job's function, `module:qualname` (through functools.partial; a SubprocPool "
                    "job's from its pickle's first bytes, never unpickled); absent when unknown"),
        ("arg", STR, "start: its first argument that is a name (a Triton kernel's), for torch's own job functions "
                     "only (a program's own pool's arguments are never written); absent when none"),
    )),
    TRACER_ERROR: ("a fault inside the tracer", (
        ("where", STR, "what it was doing (`warning`: a warning that could not go to the original stderr; "
                       "`live-export`: spans the live export could not send, and why; `log`: records this "
                       "process could not write)"),
        ("error", STR, "the fault"),
        ("dropped", UINT, "records it could not write so far (a full disk), written once the log takes records "
                          "again: the watcher's (it kept sampling), or any traced process's (`where` `log`, "
                          "right after the first record that landed)")) + _PART_FIELDS[:2]),
    ERROR: ("an exception torch caught and logged, or one that reached sys/threading.excepthook, in a "
            "pool-serving process (output unchanged; at most 50 per process)", (
        ("source", STR, "`logging`, `excepthook` or `threading.excepthook`"),
        ("logger", OPT_STR, "logger name (null for the hooks)"),
        ("level", STR, "log level"),
        ("exc_type", OPT_STR, "exception type (null: an error logged without one)"),
        ("message", STR, "exception message"),
        ("log_message", OPT_STR, "torch's own words (`Uncaught exception in compile_worker subprocess`)"),
        ("frames", FRAMES, "innermost last, at most 8"),
        ("origin", FRAME, "innermost frame of the exception"),
    )),
    MEMORY: ("real memory of the run's pool processes (watcher: sidecars, compile workers, the resource "
             "tracker or forkserver a pool process started, and each pool's creator in the same sweep; "
             "every pool in one pass, at most every 2 s, within 0.4 % of a core)", _PART_FIELDS + (
        ("procs", MEMS, "`{pid, create_time, pss, uss, rss, swap_pss?, threads?, cpu_s?}`: bytes from "
                        "/proc/PID/smaps_rollup (uss = Private_Clean + Private_Dirty), threads and cpu_s (utime + "
                        "stime so far, seconds) from /proc/PID/stat read with it"),
        ("devices", DEVS, "accelerator device files a pool process holds, read once at its first sample: "
                          "`{pid, create_time, paths}`"),
    )),
    WATCHER_START: ("the watcher started", _PART_FIELDS[:2] + (
        ("interval", NUM, "seconds between samples"), ("linger", NUM, "seconds it watches after the root"),
        ("oom_kill", UINT, "the run's cgroup's OOM kill count at the start (memory.events, or memory.oom_control "
                           "in cgroup v1); absent where none is readable: then no OOM kill is ever named"),
        ("boot", NUM, "the boot time its create times are computed from (wall clock minus CLOCK_BOOTTIME, read once "
                      "at its start, Unix seconds); absent without /proc"),
        ("boot_id", STR, "/proc/sys/kernel/random/boot_id then: the boot its pids are of"),
        ("tick", UINT, "clock ticks per second of /proc start ticks (SC_CLK_TCK): a process_start's start_ticks "
                       "on this clock is round(boot + start_ticks / tick, 2)"))),
    OOM: ("the run's cgroup counted more OOM kills than before (the watcher, each time it rises)",
          _PART_FIELDS[:2] + (
        ("oom_kill", UINT, "the count now"), ("before", UINT, "the count at the watcher's previous read"),
        ("since", NUM, "when that previous read was (Unix seconds): the kills happened in (since, ts]; absent in "
                       "older logs, whose watcher read the count only at ends: then no process is named from it"))),
    MEMCG: ("a memory cgroup of the run's processes and the memory limit it is held to (the watcher, once per "
               "cgroup, as the first process in it joins, and again with `final` at its end where a limit is set)",
           _PART_FIELDS[:2] + (
        ("member", UINT, "the process whose joining read it (its tree entry's `memcg` is `path`)"),
        ("version", UINT, "1 (v1's memory hierarchy) or 2 (the unified one)"),
        ("path", STR, "the cgroup, as /proc/PID/cgroup names it"),
        ("file", STR, "the limit's file: `memory.max` (v2) or `memory.limit_in_bytes` (v1)"),
        ("limit", UINT, "the least limit set on it or on a cgroup above it, bytes: its charge (every page its "
                        "processes use, page cache too) past it calls its OOM killer; absent where none is set "
                        "(`max`, or v1's unlimited)"),
        ("limit_path", STR, "the cgroup above `path` that sets `limit`; absent where `path` sets it"),
        ("peak", UINT, "with a limit: the most the kernel has charged the limit's cgroup so far, bytes (v1 "
                       "memory.max_usage_in_bytes, v2 memory.peak); absent where unread"),
        ("final", BOOL, "true in the record written at the watcher's end: `peak` read again"))),
    PIDCG: ("a pids cgroup of the run's processes, the task limit it is held to and the kernel's count of the forks "
            "and thread starts that limit refused (the watcher, once per cgroup as the first process in it joins, "
            "and where a limit is set, again with `after` as it first reads a pool job's error of the run and with "
            "`final` at its end)", _PART_FIELDS[:2] + (
        ("member", UINT, "the process whose joining read it (its tree entry's `pidcg` is `path`)"),
        ("version", UINT, "1 (v1's pids hierarchy) or 2 (the unified one)"),
        ("path", STR, "the cgroup, as /proc/PID/cgroup names it"),
        ("file", STR, "`pids.max`"),
        ("limit", UINT, "the least pids.max on it or on a cgroup above it: its tasks (each process and each "
                        "thread, root's too) past it are refused (EAGAIN); absent where none is set (`max`)"),
        ("limit_path", STR, "the cgroup above `path` that sets `limit`; absent where `path` sets it"),
        ("refused", UINT, "pids.events `max` then (v1: of `path`; v2: of the limit's cgroup): the forks and thread "
                          "starts the limit refused so far; absent where unread"),
        ("refused_own", UINT, "v2, where `limit_path` is set: pids.events `max` of `path` then (Linux before 6.13, "
                              "or cgroup2's pids_localevents, counts a refusal in the forking task's cgroup, not the "
                              "limit's); a rise in either count is a refusal (the larger rise: 6.13+ may count in "
                              "both); absent where unread"),
        ("after", NUM, "in the record written as the watcher first read a return record of the run whose call "
                       "raised a pool job's error (SubprocException): that record's ts; `refused` (`refused_own`) "
                       "read then"),
        ("final", BOOL, "true in the record written at the watcher's end: `refused` (`refused_own`) read again"))),
    CPUCG: ("a cpu cgroup of the run's processes, the CFS quota it is held to and the kernel's counts of the periods "
             "its tasks ran in and were throttled in (the watcher, once per cgroup as the first process in it joins, "
             "and where a quota is set, again with `final` at its end)", _PART_FIELDS[:2] + (
        ("member", UINT, "the process whose joining read it (its tree entry's `cpucg` is `path`)"),
        ("version", UINT, "1 (v1's cpu hierarchy) or 2 (the unified one)"),
        ("path", STR, "the cgroup, as /proc/PID/cgroup names it"),
        ("file", STR, "the quota's file: `cpu.max` (v2) or `cpu.cfs_quota_us` (v1, with cpu.cfs_period_us)"),
        ("limit", NUM, "the least quota on it or on a cgroup above it, in CPUs (`quota_us` / `period_us`): its "
                       "tasks together run at most that much CPU time per period, then wait for the next; absent "
                       "where none is set (`max`, v1's -1)"),
        ("quota_us", UINT, "with `limit`: the CPU time its tasks may run per period, us"),
        ("period_us", UINT, "with `limit`: the period, us"),
        ("limit_path", STR, "the cgroup above `path` that sets `limit`; absent where `path` sets it"),
        ("periods", UINT, "with a limit: cpu.stat nr_periods of the limit's cgroup then (periods its tasks ran in, "
                          "since the cgroup was made); absent where unread"),
        ("throttled", UINT, "cpu.stat nr_throttled then: the periods its tasks spent the quota in and were stopped"),
        ("throttled_us", UINT, "the time they stood stopped then, us, summed over CPUs (v2 throttled_usec, v1 "
                               "throttled_time / 1000)"),
        ("final", BOOL, "true in the record written at the watcher's end: the counts read again"))),
    ORPHAN_FDS: ("what pool processes held as the watcher first saw them orphaned (their parent, the pool's "
                 "creator, ended or they were re-parented) or in its leftover verdict: once per process, only those "
                 "holding a listening socket or a pipe their creator's parent reads", _PART_FIELDS[:4] + (
        ("procs", ANY, "`[{pid, create_time, creator?, listen?, read_by?}]`: `creator` the parent it had; `listen` "
                       "its listening TCP and bound UDP sockets, `[{proto, addr, port, fds, inode?, creator_holds?}]` "
                       "(/proc/PID/fd's socket inodes in /proc/PID/net/tcp, tcp6 (state LISTEN), udp, udp6 (no "
                       "remote); `inode` the socket's (one socket in two processes: one inode); `creator_holds` true "
                       "where its creator, alive then, held that socket too); "
                       "`read_by` `{pid, fds}`: the creator's parent (a live member) held the read end of pipes "
                       "this process held at `fds` (its stdout 1, stderr 2)"),)),
    EXIT_UNWRITTEN: ("a process's process_exit could not be written (no descriptor free: its table full at its hard "
                     "limit); the watcher read the note it left (a symlink beside the log) when it saw it end",
                     _PART_FIELDS[:2] + (
        ("exited_pid", UINT, "the process whose record was lost"),
        ("create_time", NUM, "its start (Unix seconds), as the watcher's `ended` entry has it"),
        ("noted", NUM, "when it left the note (Unix seconds)"),
        ("how", STR, "process_exit's `how`"), ("code", ANY, "process_exit's `code`"),
        ("dropped", UINT, "records it could not write, this one included"))),
    ROOT_CHANGE: ("the run's main process changed its user (its file-system uid) or its root directory (chroot) "
                  "since the watcher's last sample: the log, private to the user that started the run, then refuses "
                  "its records (watcher/rootchange.py)", _PART_FIELDS[:2] + (
        ("uid", INT, "its file-system uid now (/proc/PID/status); with `was_uid`, the one before"),
        ("was_uid", INT, "its file-system uid before (at first the watcher's own, which it inherited from it)"),
        ("root", STR, "its root directory now (/proc/PID/root); with `was_root`, the one before"),
        ("was_root", STR, "its root directory before"),
        ("since", NUM, "the watcher's last sample before, where it was unchanged (Unix seconds); absent: none"))),
    RUN_EXIT: ("`wp-autotrace run` waited for its program: the status it saw (so `report` says the same)",
               _PART_FIELDS[:2] + (
        ("status", INT, "the exit code, or -N for signal N"),
        ("forwarded", INTS, "the signals `run` passed on to the program, each once"),
        ("since", NUM, "when `run` started the program (Unix seconds); absent in logs before it"))),
    WATCHER_EXIT: ("the watcher stopped", _PART_FIELDS[:2] + (
        ("reason", STR, ", ".join(f"`{r}`" for r in WATCHER_EXIT_REASONS[:-1]) + f" or `{WATCHER_EXIT_REASONS[-1]}`"),
        ("samples", UINT, "samples taken"),
        ("cpu_s", NUM, "the watcher's own CPU seconds"),
        ("dropped", UINT, "records the watcher could not write (a full disk); absent when none"),
        ("exported", UINT, "live export (WP_AUTOTRACE_EXPORT=otlp) only: spans the receiver accepted"),
        ("unsent", UINT, "live export only: spans not delivered (receiver down, slow, refusing; queue full)"),
        ("signal", STR, "the first SIGTERM, SIGINT or SIGHUP the watcher was sent; absent when none"),
        ("signals", UINT, "the signals it was sent and caught, all of them (watcher_signal records: at most 16)"))),
    WATCHER_SIGNAL: ("the watcher was sent a signal it catches (a job step's end signals every process of the step; "
                     "docs/verdict.md): written as it took it", _PART_FIELDS[:2] + (
        ("signal", STR, "`SIGTERM`, `SIGINT`, `SIGHUP`, `SIGUSR1` or `SIGUSR2`"),
        ("sender_pid", INT, "the sender's pid (siginfo si_pid; 0: the kernel)"),
        ("sender_uid", INT, "the sender's uid (siginfo si_uid)"),
        ("sender", STR, "the sender's name (/proc/PID/comm) as the watcher took the signal; absent when gone"),
        ("action", STR, "`watch-on` (the first SIGTERM/SIGINT/SIGHUP: it watches on, bounded), `stop` (a second "
                        "one: it leaves now) or `ignored` (SIGUSR1/SIGUSR2)"))),
}

KNOWN_EVENTS = frozenset(EVENTS)

# event -> {field: type}, base fields included: what the reader checks.
FIELD_TYPES: dict[str, dict[str, str]] = {
    event: {**{name: kind for name, kind, _ in BASE_FIELDS}, **{name: kind for name, kind, _ in fields}}
    for event, (_, fields) in EVENTS.items()
}


def markdown_table() -> str:
    """docs/log-schema.md's table, generated from EVENTS."""
    rows = ["| event | what | fields |", "|---|---|---|"]
    for event, (what, fields) in EVENTS.items():
        cells = ", ".join(f"`{name}` ({doc})" for name, _, doc in fields)
        rows.append(f"| `{event}` | {what} | {cells} |")
    return "\n".join(rows) + "\n"

