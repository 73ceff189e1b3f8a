"""The run model: Run -> Process -> Pool -> Call, what fold.py folds log records into.

fold.Builder has one handler per event (``visit_<event>``, as pytest's
assertion rewriter visits nodes). Identities (identities.py keeps them):

- a process is (host, pid, create_time): a reused pid is a new process. The
  start time comes from process_start.create_time, else the watcher's
  entries; without either, a new process_start after an exit (or for
  another run) is a new process. A non-forked process_start for a live
  process is its exec (docs/contracts.md, "Exec keeps the process"), not a new process.
- a run is its run id (process_start.run; watcher records' run); a record
  belongs to the run of its process's latest process_start.
- a pool is its instance: the sidecar it started (pid captured by
  pool-create), so its wakeups, quiesces and shutdowns are its own.

Everything here is linear in the number of records: no per-process ancestor
walks, no per-pool scans.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, cast

from ...common.vocab import COMPILE_WORKER, MEMORY_STALE_S

# What a process left behind (in a leftover record) that the watcher later saw end: its exit_how.
LEFT_THEN_ENDED = "ended after the main process"
# Create times are rounded to 10 ms: a child started by a call can read as started just before the call.
CREATE_ROUNDING_S = 0.05

# The one empty dict every call without captured fields, env or return fields shares (one allocation per
# call less, at a million calls); never changed: the findings only read them.
NO_FIELDS: dict[str, Any] = {}
# tracer_error's `where` for spans the live export could not send (watcher/export.py WHERE).
LIVE_EXPORT = "live-export"


class Call:
    """One traced call (or a refused one, ``blocked``), made by calls.new_call only. A call whose record holds
    none of the fields few calls have (calls._RARE_FIELDS), made in a process that never exec'd, neither refused
    nor a stop request from multiprocessing's exit handler nor made by a spawned child's re-import of its main
    script, is a Call; any other is a RichCall, which keeps those fields in slots of its own. A plain Call reads
    them as the class's values below, which are exactly what its record gives: the two read alike. Each slot is
    8 bytes a call: most calls of most tags are plain; not a compile call (its rss) nor an AsyncCompile.wait (its
    env, its captured state): docs/scale.md, "Memory per call"."""

    __slots__ = ("proc", "call_id", "ts", "target", "tag", "caller", "parent", "thread", "end", "error", "ret",
                 "pool")

    proc: Process
    call_id: int | None
    ts: float
    target: str  # one object per distinct string (the fold's Registry.shared): tag and thread too
    tag: str
    caller: dict[str, Any] | None  # the one kept frame equal to the record's (Registry.share)
    parent: Call | None
    thread: str
    end: float | None
    error: str | None
    ret: dict[str, Any]  # what the return captured (sidecar_pid, worker_pids, ...)
    pool: Pool | None

    # A plain Call's values of RichCall's own fields (never set on a plain Call: it has no slot for them).
    env: dict[str, Any] = NO_FIELDS
    gen = 0  # which of the process's programs made it (call ids restart after an exec)
    blocked = False
    action = ""
    # What the call record captured as the call started (SubprocPool.shutdown: the jobs in flight, whether
    # torch still held the pool running): docs/evidence.md.
    at_call: dict[str, Any] = NO_FIELDS
    rss: int | None = None  # resident memory as the call began (compile calls)
    # Called by multiprocessing's exit handler (a child's finalizers): its caller is then only the frame the
    # process was forked at, inherited, never what asked for the call (docs/users.md D4).
    at_exit = False
    # A stop request with no Python frame above it (its recorded stack empty, not absent): the interpreter itself
    # called it, i.e. atexit ran the pool's own shutdown registered as a handler (torch's
    # _SubprocessFxCompile.process_pool registers pool.shutdown so), not a finalizer of multiprocessing's.
    by_interpreter = False
    # Made while a spawned process re-imported the main script as __mp_main__ (multiprocessing.spawn's
    # _fixup_main_from_path): the script's top level running again in a spawned child.
    mp_main = False

    def outermost(self) -> Call:
        """The outermost traced call around this one in its process (the parent_call chain; bounded): the call the
        user's line made, whose wait the user sees."""
        c, seen = self, 0
        while c.parent is not None and c.parent is not c and seen < 64:
            c, seen = c.parent, seen + 1
        return c


class RichCall(Call):
    """A call that holds what few calls hold (calls.new_call decides): its own values of Call's class-level fields."""

    __slots__ = ("env", "gen", "blocked", "action", "at_call", "rss", "at_exit", "by_interpreter", "mp_main")


# A pool's kind (Pool.kind).
SUBPROC = "subproc"
EXECUTOR = "executor"
# torch's autotune subprocesses (TuningProcess, one per device, restarted after a kill; AutotuneProcessPool's
# one spawned worker): started by the autotuning process itself, its members (fold/autotune.py).
AUTOTUNE = "autotune"
# quack's compile workers (torch._vendor.quack, 2.13+): Autotuner._precompile Popens them, its handle's shutdown
# stops them; folded as autotune pools are (fold/autotune.py).
QUACK = "quack"


class Pool:
    """One compile pool instance: the call that made it and the sidecar it started.

    Its lifecycle as the log shows it (analysis/derive/pools.py derives the story: idle
    spans, memory, who asked for the shutdown): when it was ready, its jobs
    (counted submits: count, first, last), each quiesce call, and its shutdown
    requests. A SubprocPool can be shut down once: the first shutdown call is the
    request, later ones (torch's atexit, its finalizer, its reader thread) are no-ops
    counted in shutdown_calls.
    """

    __slots__ = ("creator", "call", "sidecar_pid", "sidecar", "wakeups", "quiesces", "shutdowns", "shutdown_at",
                 "ready_at", "jobs", "first_job", "last_job", "quiesce_calls", "shutdown_call", "shutdown_calls",
                 "kind", "members", "kills", "stack")

    def __init__(self, creator: Process, call: Call, kind: str = SUBPROC, stack: Any = None) -> None:
        self.creator = creator
        self.call = call
        # The making call's stack as recorded (outermost first): the frames above its caller tell apart two
        # pools made at one line (a helper's), called from different places. Kept for pools only (few).
        self.stack: list[dict[str, Any]] = [f for f in stack or () if isinstance(f, dict)]
        # SUBPROC: a sidecar interpreter and the workers it forks. EXECUTOR: a ProcessPoolExecutor made in the
        # creator itself (worker_start_method fork or spawn; torch 2.1-2.3's default): its workers are the
        # creator's own children, in `members` (finish.py), and it has no sidecar.
        self.kind = kind
        self.members: list[Process] = []
        # AUTOTUNE: its creator's TuningProcess.kill calls that found the subprocess running (a SIGKILL sent)
        self.kills: list[Call] = []
        self.sidecar_pid: int | None = None
        self.sidecar: Process | None = None
        self.wakeups = 0
        self.quiesces = 0
        self.shutdowns = 0  # distinct shutdown requests: 0 or 1
        self.shutdown_at: float | None = None  # when its creator first asked it to shut down
        self.ready_at: float | None = None  # wait_pool_ready returned, else its workers started
        self.jobs: int | None = None  # counted submits (None: not known, or split among several pools)
        self.first_job: float | None = None
        self.last_job: float | None = None
        self.quiesce_calls: list[Call] = []
        self.shutdown_call: Call | None = None  # the request (the first shutdown call)
        self.shutdown_calls = 0


class JobSpan:
    """One job a pool worker took (its `job` records): from its start to its end; end None: no end was written
    (the worker held it until it ended, or the log's end). Made by fold.job_span only, its slots set there (no
    __init__: a long run makes one for half of its records)."""

    __slots__ = ("work_id", "fn", "arg", "start", "end")

    work_id: int | None  # a `start` record's work_id, fn, arg and ts
    fn: str | None
    arg: str | None
    start: float
    end: float | None


# Where a process was when last seen: its last record's (event, ts, target, signal), target and signal None where
# it has none (last_seen).
LastSeen = tuple[str, float, Any, Any]


def seen(r: dict[str, Any]) -> LastSeen:
    """A record's LastSeen (what Process.last keeps of a record other than a call's; the registry's writer inlines
    it)."""
    return (r["event"], r["ts"], r.get("target"), r.get("signal"))


def last_seen(p: Process) -> LastSeen | None:
    """Where p was when last seen (Process.last): its last record's (event, ts, target, signal); None: none seen."""
    last = p.last
    if not isinstance(last, Call):
        return last
    if p.last_return:
        # a return record holds no target nor signal (schema); its Call's end is its ts
        return ("return", cast(float, last.end), None, None)
    return ("blocked" if last.blocked else "call", last.ts, last.target, None)


class Process:
    """Everything the log says about one process (host, pid, create_time)."""

    __slots__ = ("host", "pid", "create_time", "last_return", "run", "ppid", "parent", "children", "role", "traced",
                 "forked", "execs", "start", "end", "exit_how", "exited", "gone", "seen", "peak_rss", "last_rss",
                 "cmd", "name", "env", "rank", "calls", "pools", "open_pool", "pool_by_sidecar",
                 "worker_pids", "served", "served_at", "errors", "reparented_to", "depth", "guard", "python",
                 "index", "argv", "last", "exit_code", "exit_error", "via", "exec_into", "exit_unwritten", "executable",
                 "mem", "devices", "count_times", "counts", "pool_starts", "knobs", "pgid", "nproc", "memcg", "pidcg",
                 "cpucg", "zombie", "wait_status", "refused", "sigign",
                 "count_callers", "tests", "cwd", "dropped", "threads", "env_changed", "cpu",
                 "imports", "jobs_run", "sent", "spawned", "one_of")

    def __init__(self, host: str, pid: int, index: int) -> None:
        self.host = host
        self.pid = pid
        self.index = index  # creation order: stable sort key
        self.create_time: float | None = None
        self.run: Run | None = None
        self.ppid: int | None = None
        self.parent: Process | None = None
        self.children: list[Process] = []
        self.role = ""
        self.traced = False
        self.forked = False
        self.execs = 0
        self.start: float | None = None
        self.end: float | None = None
        self.exit_how = ""
        self.exit_code: int | None = None  # process_exit's code
        self.exit_error: str | None = None  # process_exit's error: the uncaught exception that ended it
        self.exited = False  # a process_exit was written
        self.refused: dict[str, Any] | None = None  # an EAGAIN exit's {error, uid, uid_tasks, nproc?} (refused.py)
        self.sigign = ""  # the ending signals it ignored as it joined (tree entry's `sigign`: "INT", "INT,TERM")
        self.gone: float | None = None  # when the watcher first missed it
        self.seen: float | None = None  # the watcher's last sample that saw it alive, before gone (None: not known)
        self.peak_rss = 0
        self.last_rss = 0
        self.cmd = ""
        self.name = ""
        self.env: dict[str, Any] = {}
        self.rank: dict[str, Any] = {}
        self.calls: dict[int, Call] = {}
        self.pools: list[Pool] = []
        self.open_pool: Pool | None = None
        self.pool_by_sidecar: dict[int, Pool] = {}
        self.worker_pids: set[int] = set()
        self.served = False  # a sidecar that was asked to shut down (it served its pool)
        self.served_at: float | None = None  # when that request came
        self.errors: list[dict[str, Any]] = []
        self.reparented_to: int | None = None
        self.depth = 0
        self.guard = False
        self.python = ""
        self.argv: list[str] = []  # its command line as recorded (interpreter first)
        # Where it was when last seen (read through last_seen()), from its last record but process_exit: the Call of a
        # call, a blocked record or the return that ended it (last_return), else a LastSeen; never the record, which
        # would keep a long log's every record alive until its writer's next one (a Call is kept anyway).
        self.last: LastSeen | Call | None = None
        self.last_return = False
        self.mem: list[tuple[float, int, int]] = []  # watcher's (ts, pss, uss) samples, bytes
        self.threads: dict[float, int] = {}  # its threads at each of those samples (by ts), where read
        # A variable torch reads into its config changed in-process before it loaded (config's env_changed):
        # {var, old, new, before, at}, the imports around the change.
        self.env_changed: list[dict[str, Any]] = []
        self.cpu: dict[float, float] = {}  # the CPU seconds it had used at each of those samples, where read
        # watched imports (import records): module -> (when the latest began, resident bytes then or None)
        self.imports: dict[str, tuple[float, int | None]] = {}
        self.devices: list[str] = []  # accelerator device files it held (watcher, read once)
        self.counts: dict[str, int] = {}  # counted hot calls (process_exit)
        self.count_times: dict[str, list[float]] = {}  # their first and last times
        self.pool_starts: list[float] = []  # a sidecar: when its worker pool was (re)started
        self.knobs: list[str] = []  # the pool settings its torch's config has (config record)
        self.tests: list[tuple[float, str, str]] = []  # pytest's tests here: (ts, nodeid, start/end)
        self.cwd = ""  # its working directory at start (process_start)
        self.executable = ""  # sys.executable, from its process_start
        self.via = ""  # how the watcher proved it the run's: root, child, claim ("" in older logs: a member)
        self.exec_into: dict[str, Any] | None = None  # its exec record, while no later record says it failed
        self.exit_unwritten: dict[str, Any] | None = None  # its exit record's fields, had it a descriptor (a note)
        self.wait_status: int | None = None  # its wait status once reaped, as the watcher read it through its pidfd
        self.pgid: int | None = None  # its process group, as the watcher first saw it
        self.nproc: tuple[int, int] | None = None  # (its ulimit -u (RLIMIT_NPROC soft), its uid): the watcher's read
        self.memcg: str | None = None  # its memory cgroup's path, as the watcher read it (the run's memcgs: its limit)
        self.pidcg: str | None = None  # its pids cgroup's path, alike (the run's pidcgs)
        self.cpucg: str | None = None  # its cpu cgroup's path, alike (the run's cpucgs: its CFS quota)
        self.zombie: dict[str, Any] | None = None  # the watcher's zombie entry: {ppid, since, status, reaped?}
        self.count_callers: dict[str, Any] = {}  # counted target -> its last call's user frame
        self.dropped = 0  # records it could not write, as it last said (each saying is the count so far)
        self.jobs_run: list[JobSpan] = []  # a pool worker: the jobs it took, in order (job records)
        self.sent: list[dict[str, Any]] = []  # the signals it sent (signal_sent, in order); a failed one has `error`
        self.spawned: list[tuple[int, float]] = []  # workers its compile executor named (worker_spawned): (pid, when)
        # the rows that may be one process with it, unproven which (pidns.unproven; one list they share), else ()
        self.one_of: list[Process] | tuple[()] = ()

    @property
    def may_be(self) -> list[int]:
        """The pids of the untraced rows it may be one process with (one_of's host rows), sorted; [] where none."""
        return sorted(q.pid for q in self.one_of if not q.traced)

    @property
    def run_id(self) -> str:
        """The id of the run this process is one of ("" when the log names none)."""
        return self.run.id if self.run is not None else ""

    @property
    def ended_at(self) -> float | None:
        """When this process ended, the one rule every reader uses (docs/evidence.md, "Memory at once"): the
        watcher's end where it has one (it first missed the process, after the interpreter's teardown: the
        real end), else its own process_exit record's time; never before that record (the later of the two);
        None when it was not seen to end."""
        gone, end = self.gone, self.end
        if gone is None or end is None:
            return end if gone is None else gone
        return max(gone, end)

    def alive_at(self, t: float) -> bool:
        """Had this process started by t (or its start is unknown) and not ended (ended_at) by then?"""
        return (self.start is None or self.start <= t) and ((e := self.ended_at) is None or e > t)

    def alive_during(self, a: float, b: float) -> bool:
        """Was this process alive at some moment of [a, b] (alive_at, over a span)?"""
        return (self.start is None or self.start <= b) and ((e := self.ended_at) is None or e > a)

    def compile_workers(self) -> list[Process]:
        """Its children that are workers of its compile pool, in the order the log first showed them: in the
        compile-worker role (torch's initializer ran in them: their own `role` record), whose pids its pool's start
        captured (a sidecar's), or named by it as it started them (worker_spawned: a worker killed while it
        imported never wrote its role). A name is its child of that pid started last by the name's time (create
        times are rounded: CREATE_ROUNDING_S later at most): a child started after it (its pid reused) is not."""
        named: set[int] = set()
        for pid, ts in self.spawned:
            q = max((q for q in self.children if q.pid == pid
                     and (q.start if q.start is not None else ts) <= ts + CREATE_ROUNDING_S),
                    key=lambda q: q.start or 0.0, default=None)
            if q is not None:
                named.add(q.index)
        return [q for q in self.children if q.role == COMPILE_WORKER or q.pid in self.worker_pids or q.index in named]


class Pace(Protocol):
    """How long each memory reading of a run counts (fold/pace.py)."""

    def windows(self, p: Process) -> dict[float, float]: ...


class Run:
    """One run: its id, root, processes, and what the watcher saw of it."""

    init_ended = False  # a pid-1 main's end ended its pid namespace: nothing left, known with no verdict (verdict.py)
    # host -> the pid namespace of the processes filed under it (None: the initial one): their pids are pids there,
    # not this host's where the two differ. The fold's own (identities.Registry.run: home_ns); never written here.
    home_ns: Mapping[str, int | None] = MappingProxyType({})

    def __init__(self, run_id: str, real_host: dict[str, str] | None = None) -> None:
        self.id = run_id
        self.real_host = real_host if real_host is not None else {}  # a pid namespace's host -> its host (host_of)
        self.root: Process | None = None
        self.root_pid: int | None = None
        self.processes: list[Process] = []
        self.start: float | None = None
        self.end: float | None = None
        self.tree_counts: list[tuple[float, int]] = []
        self.leftover: dict[Process, dict[str, Any]] = {}
        self.leftover_count = 0
        # Named by the verdict, but the log shows each end within vocab.LEFTOVER_ENDED_S of the main's: they were
        # ending with it (torch's worker watchdog), not left running (finish.settle_leftovers)
        self.ended_soon: dict[Process, dict[str, Any]] = {}
        self.leftover_how = ""
        self.leftover_seen = False
        self.final_seen = False
        self.waited: Waited | None = None  # `run`'s waited status of the main process, when it ran it
        self.cut: list[str] = []  # what the log itself says was cut
        self.blocked: list[Call] = []
        self.tracer_errors: list[str] = []
        self.export_errors: list[str] = []  # the live export's failures (spans not sent, and why)
        self.dropped = 0
        self.configs: list[tuple[Process, dict[str, Any], str]] = []
        self.guard = False
        self.watcher_pids: set[tuple[str, int]] = set()
        self.watcher_exit = ""  # the watcher's exit reason, once written
        self.watcher_signals: list[dict[str, Any]] = []  # its watcher_signal records: a job's end signalled it
        self.watcher_clock: dict[str, tuple[float, str]] = {}  # host -> the watcher's (boot, boot_id): its clock
        self.watcher_started: dict[tuple[str, int], float] = {}  # (host, pid) -> its watcher_start's ts
        self.interval = 0.0  # the watcher's sampling interval (watcher_start)
        # How long each of its memory readings counts (fold/pace.py: from the pace the watcher kept near it),
        # and the run's own window, the least any counts (the report's memory_stale_s)
        self.pace: Pace | None = None  # fold/pace.py's Pace (it reads the model: a Protocol here, no cycle)
        self.stale_s = MEMORY_STALE_S
        self.watcher_dropped = 0  # records the watcher could not write (a full disk), as it last said
        # (self.dropped: the run's processes' own, each process's largest count once)
        self.log_cut = 0  # 1: the log ends mid-record while this run's main was to write its exit (report.py)
        self.no_watcher = ""  # the root's tracer_error saying why it started no watcher
        self.last_sample: float | None = None  # ts of the watcher's latest tree record
        # host -> ts of the run's watcher's latest record there, of any kind (derive/alive.py: while it wrote, it
        # would have written the end of every member it watched)
        self.watcher_last: dict[str, float] = {}
        # Processes sharing only the root's group or session: possibly the run's, never proven, never signalled.
        self.possible: dict[tuple[str, int, float | None], dict[str, Any]] = {}
        self.below: list[Process] | None = None  # the root's live descendants at its exit (process_exit.below)
        self.below_count = 0
        # No leftover record yet although the main process ended: `leftover` then holds what the last
        # sample after that end (else the root's `below`) showed alive, and says so.
        self.verdict_pending = False
        self.provisional_from = ""  # "sample" or "below": where a pending (or lost) verdict's list comes from
        # Why no verdict will ever come (NO_WATCHER..., WATCHER_ENDED...), "" while one may: said instead of
        # "pending". The left-behind list then comes from provisional_from, as for a pending one.
        self.no_verdict = ""
        self.run_exit: dict[str, Any] | None = None  # `wp-autotrace run`'s record of the status it waited for
        # that record where the command run started is no run's root but its parent (a shell script of Python
        # steps): each step is a run of its own, the command's status is none of theirs (finish.match_waits)
        self.command_exit: dict[str, Any] | None = None
        # the run_exit of the `run` launch several runs share (that command's steps, or the steps a shell ran
        # before it exec'd into the root run waited for): one job (derive/jobs.py)
        self.launch: dict[str, Any] | None = None
        # (ts, before, now, since): the cgroup's OOM kill count rose in (since, ts]; since None in older logs
        self.ooms: list[tuple[float, int, int, float | None, str]] = []  # (ts, before, now, since, host)
        self.oom_start: int | None = None  # that count at the watcher's start (None: not readable)
        self.root_changes: list[dict[str, Any]] = []  # the watcher's root_change records: the main's user or root
        # (host, path) -> the watcher's memcg records of that memory cgroup: its limit, and its peak then and at the end
        self.memcgs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # (host, path) -> the watcher's pidcg records of that pids cgroup: as it joined, then `final` at its end
        self.pidcgs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # (host, path) -> the watcher's cpucg records of that cpu cgroup: its quota and counts as it joined, `final`
        self.cpucgs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # (host, pid) -> what that pool process held as the watcher first saw it orphaned: an orphan_fds entry
        self.orphan_fds: dict[tuple[str, int], dict[str, Any]] = {}
        # The reader's own look (verdict.look_now) at a main process the log saw no end of: alive_now True
        # or False where this host can tell (its pid and create time; else its watchers' pids), None where
        # it cannot; now_how says what was seen, or why nothing could be. root_gone: the main's own pid
        # is gone (not only its watchers'), so it ended after the log's last record of it.
        self.alive_now: bool | None = None
        self.now_how = ""
        self.root_gone = False

    @property
    def left_known(self) -> bool:
        """Whether what the run left running after its main is known: the watcher's verdict, a look after the
        main's end (provisional_from), or a pid-1 main's end (init_ended). Else leftover_count's 0 is no figure:
        the report says null, "not known" (the run's end unseen, no watcher, the log cut, still running)."""
        return self.leftover_seen or bool(self.provisional_from) or self.init_ended

    def ended_soon_by(self, procs: list[Process]) -> float | None:
        """How long after the main's end (Process.ended_at) the last of procs ended, where the verdict named one of
        them left running but its end came within vocab.LEFTOVER_ENDED_S (ended_soon); else None."""
        main_end = self.root.ended_at if self.root is not None else None
        ends = [e for p in procs if (e := p.ended_at) is not None]
        if main_end is None or not ends or not any(p in self.ended_soon for p in procs):
            return None
        return max(max(ends) - main_end, 0.0)

    @property
    def verdict(self) -> bool:
        """The watcher has written what the run left behind (leftover), or has stopped (watcher_exit)."""
        return self.leftover_seen or bool(self.watcher_exit)

    def seen(self, ts: float) -> None:
        self.start = ts if self.start is None or ts < self.start else self.start
        self.end = ts if self.end is None or ts > self.end else self.end

    @property
    def hosts(self) -> list[str]:
        """The hosts its processes ran on (a process still filed under its pid namespace: that namespace's host)."""
        return sorted({self.host_of(p) for p in self.processes})

    def host_of(self, p: Process) -> str:
        """The host p ran on: its own, or where it is filed under a pid namespace (identities.namespaced_host),
        that namespace's host."""
        return self.real_host.get(p.host, p.host)

    @property
    def command(self) -> str:
        return self.root.cmd if self.root else ""


class Waited(NamedTuple):
    """What `wp-autotrace run` knows of the program it started and waited for (no log says it)."""

    pid: int
    status: int  # Popen.returncode: the exit code, or -N for signal N
    forwarded: tuple[int, ...] = ()  # the signals `run` passed on to it
    host: str = ""  # the host it ran on ("": any)
    no_watcher: str = ""  # why no watcher ran, when `run` found none ("": one ran, or not known)


class Model:
    """The folded log: runs, processes, calls and pools, plus the reader's counts."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.processes: list[Process] = []
        self.calls: list[Call] = []
        # The same calls by tag, each list in the calls' order: most readers want the calls of one tag, and a
        # long log's are nearly all of one or two (each reader's own walk of every call was ~15 ms at 1M records).
        self.tagged: dict[str, list[Call]] = {}
        self.pools: list[Pool] = []
        self.t0 = 0.0
        self.t_end = 0.0

    def of_tags(self, *tags: str) -> list[Call]:
        """The calls of these tags, in their order (never to be changed: the model's own list where it can be)."""
        return calls_of(self.calls, self.tagged, tags)


def calls_of(calls: list[Call], tagged: dict[str, list[Call]], tags: tuple[str, ...]) -> list[Call]:
    """The calls of these tags, in their order in calls, from tagged (calls by tag, each list in that order): the
    one tag's own list where at most one of them has calls; else a walk of calls."""
    found = [tagged[tag] for tag in tags if tag in tagged]
    if len(found) > 1:
        wanted = set(tags)
        return [c for c in calls if c.tag in wanted]
    return found[0] if found else []



def in_namespace(p: Process) -> bool:
    """Whether p is filed under a pid namespace other than its host's first (identities.namespaced_host), joined to
    no host process (pidns.py): its pid, and every pid its records name, are that namespace's, and which host
    process it was no reading proves."""
    return p.run is not None and p.host in p.run.real_host


def signal_name(n: int) -> str:
    import signal

    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def ended_by(run: Run) -> str | None:
    """The signal that ended the main process, as `run` saw it (its waited status); None if not known."""
    waited = run.waited
    return signal_name(-waited.status) if waited is not None and waited.status < 0 else None


def exec_name(record: dict[str, Any]) -> str:
    """What an exec record's process became: its program's name."""
    argv = record.get("argv") or []
    path = record.get("executable") or (argv[0] if argv else "") or "?"
    return str(path).rstrip("/").rpartition("/")[2] or str(path)


