"""Activation: run once per process from the .pth file when WP_AUTOTRACE is on.

The first traced process of a run is the root: it fixes the log path and a
run id, and exports them with its pid through os.environ, so every
descendant (compile sidecars are started with a copy of os.environ) appends
to the same log. Everything here is contained: a failure prints one
``wp-autotrace:`` line and the program runs on untraced.
"""

import os
import sys

from ..common.clock import own_create_time
from ..common.cmdline import own_argv, runs_own_cli
from ..common.env import (
    CHILD_ROLE_ENV,
    ENABLE_ENV,
    EXPORT_ENV,
    FALSE_WORDS,
    GUARD_ENV,
    GUARD_NESTED_POOLS,
    INTERVAL_ENV,
    LINGER_ENV,
    LOG_ENV,
    NOTICE_ENV,
    REDACT_ENV,
    ROOT_ENV,
    RUN_ENV,
    STACK_ENV,
    TARGETS_ENV,
    TRUE_WORDS,
    WARNED_ENV,
    WATCHED_ENV,
    is_true,
)
from ..common.redact import env_secrets, parse_patterns, redact_argv, redact_env
from ..common.targets import (
    ARGV_ROLES,
    TARGETS,
    Target,
    parse_extra_targets,
    rank_env,
    watched_env,
)
from ..common.vocab import CHILD, COMPILE_WORKER, GUARDED_ROLES, MAIN, SIDECAR_ROLES
from .host_patches import (
    install_exec_record,
    install_mp_exit_finalizer,
    install_process_hooks,
    reset_body_hooks_after_fork,
)
from .sink import Sink, default_log_name, warn

# Not typing.TYPE_CHECKING: importing typing costs every traced process milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_STACK = 8
DEFAULT_INTERVAL = 0.1
# Below this the watcher would cost a good share of a core on an idle host.
MIN_INTERVAL = 0.01
DEFAULT_LINGER = 60.0  # seconds the watcher stays after the root ends, while run processes live
MAX_LINGER = 7 * 24 * 3600.0
GUARD_MODES = (GUARD_NESTED_POOLS,)


class Settings:
    """What the environment asks for, validated."""

    def __init__(self, trace: bool, guard: bool, log: "str | None", stack: int, interval: float,
                 extra_targets: "tuple[Target, ...]", redact: "tuple[str, ...]" = (),
                 linger: float = DEFAULT_LINGER) -> None:
        self.trace = trace
        self.guard = guard
        self.log = log
        self.stack = stack
        self.interval = interval
        self.extra_targets = extra_targets
        # Name patterns whose argv/env values are masked in the log (redact.py).
        self.redact = redact or parse_patterns("")
        self.linger = linger
        self.notes: list[str] = []  # what a bad value was replaced by: said in the root (_say_notes)


def _number(name: str, default: float, low: float, high: float, notes: "list[str]") -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
        if not low <= value <= high:
            raise ValueError
    except ValueError:
        notes.append(f"{name}={raw[:40]!r} is not a number in [{low:g}, {high:g}]; using {default:g}")
        return default
    return value


def _is_root() -> bool:
    """Whether this process starts a run (settings warnings are printed there only): no run's root
    and no process that already warned about these settings is among its ancestors."""
    pid = str(os.getpid())
    root_pid, warned = os.environ.get(ROOT_ENV), os.environ.get(WARNED_ENV)
    return (not root_pid or root_pid == pid) and (not warned or warned == pid)


def read_settings() -> "Settings":
    """Parse the WP_AUTOTRACE_* variables; a bad value takes the default and adds a note (Settings.notes:
    start() prints them in the root only). Reads only: the environment is left as it was."""
    env = os.environ
    notes: list[str] = []
    enable_raw = (env.get(ENABLE_ENV) or "").strip().lower()
    if enable_raw not in TRUE_WORDS + FALSE_WORDS:
        notes.append(f"{ENABLE_ENV}={enable_raw[:40]!r} is not one of {', '.join(TRUE_WORDS)} "
                     f"(or {', '.join(FALSE_WORDS[1:])}); tracing off")
    guard_raw = (env.get(GUARD_ENV) or "").strip().lower()
    guard = guard_raw in GUARD_MODES
    if not guard and guard_raw not in FALSE_WORDS:
        notes.append(f"{GUARD_ENV}={guard_raw[:40]!r} is not one of {', '.join(GUARD_MODES)}; guard off")
    extra, rejected = parse_extra_targets(env.get(TARGETS_ENV, ""))
    if rejected:
        notes.append(f"{TARGETS_ENV}: ignored {', '.join(map(repr, rejected))} (want module:Qual.name)")
    nested = [t for t in extra if t.qualname.count(".") > 1]
    if nested:
        notes.append(f"{TARGETS_ENV}: ignored {', '.join(repr(f'{t.module}:{t.qualname}') for t in nested)} "
                     "(a nested class's method cannot be traced: name a function or Class.method)")
        extra = [t for t in extra if t not in nested]
    interval = _number(INTERVAL_ENV, DEFAULT_INTERVAL, 0, 3600, notes)
    if 0 < interval < MIN_INTERVAL:
        notes.append(f"{INTERVAL_ENV}={interval:g} is below {MIN_INTERVAL:g}; using {MIN_INTERVAL:g}")
        interval = MIN_INTERVAL
    settings = Settings(
        trace=is_true(env.get(ENABLE_ENV)),
        guard=guard,
        log=env.get(LOG_ENV) or None,
        stack=int(_number(STACK_ENV, DEFAULT_STACK, 0, 256, notes)),
        interval=interval,
        extra_targets=tuple(extra),
        redact=parse_patterns(env.get(REDACT_ENV, "")),
        linger=_number(LINGER_ENV, DEFAULT_LINGER, 0, MAX_LINGER, notes),
    )
    settings.notes = notes
    return settings


def _alias_notes(targets: "tuple[Target, ...]") -> "list[str]":
    """Targets named by a module alias already loaded (os.path is posixpath): never patched, so said."""
    notes = []
    for t in targets:
        name = getattr(sys.modules.get(t.module), "__name__", t.module)
        if name != t.module:
            notes.append(f"{TARGETS_ENV}: ignored {t.module}:{t.qualname} ({t.module} is an alias of {name}: "
                         f"name {name}:{t.qualname})")
    return notes


def _say_notes(settings: "Settings") -> None:
    """The settings' notes, in the root only, once per run; when tracing stays off, mark the environment
    so that descendants (which inherit the same values) stay silent. Tracing on: the run's ROOT_ENV does."""
    if not _is_root():
        return
    notes = settings.notes + _alias_notes(settings.extra_targets)
    for note in notes:
        warn(note)
    if notes and not (settings.trace or settings.guard):
        os.environ[WARNED_ENV] = str(os.getpid())


def detect_role(is_root: bool) -> str:
    """main, a pool's role (named by the starting call, or seen in argv), or child."""
    # Popped, so that this process's own children do not inherit it.
    given = os.environ.pop(CHILD_ROLE_ENV, "")
    if is_root:
        return MAIN
    if given in GUARDED_ROLES:
        return given
    argv = own_argv()[:4] + list(sys.argv or [])[:1]
    for marker, role in ARGV_ROLES:
        if any(marker in str(arg).replace(os.sep, "/") for arg in argv):
            return role
    return CHILD


class Runtime:
    """Everything one traced process holds."""

    def __init__(self, settings: "Settings") -> None:
        env = os.environ
        self.settings = settings
        pid = os.getpid()
        run_id = env.get(RUN_ENV)
        self.is_root = not run_id or env.get(ROOT_ENV) == str(pid)
        if not run_id:
            run_id = os.urandom(6).hex()
            env[RUN_ENV] = run_id
            env[ROOT_ENV] = str(pid)
        self.run_id = run_id
        self.host = os.uname().nodename
        log = None
        if settings.trace:
            log = os.path.abspath(settings.log or default_log_name(self.host, pid))
            env[LOG_ENV] = log
        try:
            # Only the root may create the log; descendants open the root's file.
            self.sink = Sink(log, self.host, detect_role(self.is_root), create=self.is_root)
            self.sink.say_drops = True  # records lost to a full disk are counted in the log once it has room
        except OSError as exc:
            if not self.is_root:
                raise
            # Descendants would fail the same way: the whole run goes untraced.
            env[ENABLE_ENV] = "0"
            warn(f"cannot open the log {log}: {exc.strerror or exc}; running untraced", "open")
            settings.trace = False
            self.sink = Sink(None, self.host, MAIN)
        self._probes: Any = None  # made when a target module first loads
        self.create_time: float | None = None  # set by write_start
        self.notice: str | None = None  # root only: the guard's notice file, read and removed at exit
        if self.is_root and settings.guard:
            from .guard import create_notice_file

            self.notice = create_notice_file(run_id)
            if self.notice:
                env[NOTICE_ENV] = self.notice
        from .finder import TargetFinder

        self.finder = TargetFinder(TARGETS + settings.extra_targets, self._make_wrapper, self._notify,
                                   self.sink.error)

    def probes(self) -> "Any":
        """The wrappers' shared state, imported on first use: most processes never load a target."""
        if self._probes is None:
            from .recorder import Probes

            self._probes = Probes(self.sink, self.settings.stack, self.settings.guard, _post_notice)
            self.sink.hold()  # call records from now on: a held fd (placed high) saves an open per record
        return self._probes

    def _make_wrapper(self, target: "Target", label: str) -> "Any":
        return self.probes().make_wrapper(target, label)

    def _notify(self, kind: str, target: "Target", module: "Any") -> None:
        self.probes().notify(kind, target, module)

    def start(self) -> None:
        """Hook imports, write process_start; the root starts the run's watcher process."""
        if self.settings.extra_targets:
            # A user target may be a module the wrappers themselves need (threading):
            # load them before the finder can patch such a module half-way through.
            self.probes()
        self.finder.install()
        self.write_start(forked=False)
        if self.settings.trace:
            install_exec_record(self.record_exec)
        if self.sink.role in GUARDED_ROLES:
            from .catch import watch_role

            watch_role(self.sink)
        # WATCHED_ENV: a root that exec'd a new interpreter keeps the watcher it started.
        if (self.is_root and self.settings.trace and self.settings.interval > 0
                and os.environ.get(WATCHED_ENV) != self.run_id):
            self.start_watcher()
        if self._probes is None:
            # A program that lists or closes its descriptors must not find the log among them (issue 34):
            # its few records (exit, exec, errors) each open the log and close it.
            self.sink.release()

    def record_exec(self, executable: str, argv: "list[str]", env: "Any") -> None:
        """The exec record, just before this process execs (host_patches.install_exec_record):
        its end is then the watcher's `ended`, not a kill. argv masked as process_start's."""
        patterns = self.settings.redact
        secrets = env_secrets(os.environ, patterns)
        if env is not None:  # execve's own environment may hold a secret os.environ does not
            secrets += env_secrets({os.fsdecode(k): os.fsdecode(v) for k, v in dict(env).items()}, patterns)
        self.sink.emit("exec", argv=redact_argv(argv, patterns, secrets), executable=executable)

    def start_watcher(self) -> None:
        """Start the run's watcher process, unless it would become the host's own child."""
        if os.getpid() == 1:
            # A pid namespace's init (`docker run … python train.py`) adopts every
            # orphan, the watcher included: a host that waits for all its children
            # would wait for it forever. Said in the log only: stderr stays the host's.
            self.sink.emit("tracer_error", where="watcher",
                           error="not started: the main process is pid 1, which would adopt it as its child; "
                                 "no tree or leftover records")
            return
        from .spawn import spawn

        os.environ[WATCHED_ENV] = self.run_id
        try:
            started = spawn(self.sink.fd, self.sink.path or "", self.run_id, self.create_time,
                            self.settings.interval, self.settings.linger, os.environ.get(REDACT_ENV, ""),
                            os.environ.get(EXPORT_ENV, ""))
        except OSError:
            started = False
        if not started:
            warn("could not start the process-tree watcher; no tree or leftover records", "watcher")

    def write_start(self, forked: bool) -> None:
        """The process_start record: who this process is and what it was told."""
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        argv = list(own_argv() or sys.argv)
        patterns = self.settings.redact
        self.create_time = own_create_time()
        self.sink.emit(
            "process_start",
            # The whole command line, interpreter and flags included; secrets masked.
            argv=redact_argv(argv, patterns, env_secrets(os.environ, patterns)),
            executable=sys.executable,
            python=sys.version.split()[0],
            cwd=cwd,
            run=self.run_id,
            root_pid=int(os.environ.get(ROOT_ENV) or 0),
            forked=forked,
            guard=self.settings.guard,
            env=redact_env(watched_env(), patterns),
            **_rank_field(),
            # Absent where there is no /proc: readers then fall back to ts.
            **({} if self.create_time is None else {"create_time": self.create_time}),
        )

    def after_fork_in_child(self) -> None:
        """A forked child is a new process: new identity, not the root.

        A child forked by subprocess to exec a program (preexec_fn set) writes
        nothing: it is about to become another image, which writes its own
        process_start if it is traced Python; a forked start it never closed
        would read as a killed child.
        """
        self.is_root = False
        self.notice = None
        if _forked_to_exec():
            self.sink.stop()  # a held fd is O_CLOEXEC: the new image does not inherit it
            return
        role = COMPILE_WORKER if self.sink.role in SIDECAR_ROLES else CHILD
        self.sink.reset_after_fork(role)
        reset_body_hooks_after_fork()
        if self._probes is not None:
            self._probes.reset_after_fork()
        self.write_start(forked=True)

    def at_exit(self, how: str, code: "Any" = None) -> None:
        """process_exit; in the root, the guard's first notice (the watcher writes the leftovers)."""
        if self.notice is not None:
            from .guard import print_and_remove_notice

            path, self.notice = self.notice, None
            print_and_remove_notice(path)
        # Other threads' records in flight land first; process_exit is then this process's last record.
        # Looking for them walks every interpreter's threads: not while a subinterpreter lives.
        self.sink.close_to_others(EXIT_WRITE_WAIT_S if _no_other_interpreter() else 0)
        counts = self._probes.counts if self._probes is not None else {}
        fields: dict[str, Any] = {"how": how, "counts": counts, "dropped": self.sink.dropped}
        if self._probes is not None and self._probes.count_times:
            fields["count_times"] = {k: [round(t, 3) for t in v] for k, v in self._probes.count_times.items()}
        if self._probes is not None and self._probes.count_callers:
            fields["count_callers"] = _last_callers(self._probes.count_callers)
        if code is not None:
            fields["code"] = code if isinstance(code, int) else repr(code)
        if self.is_root and self.sink.active:
            fields.update(_below())
        self.sink.emit("process_exit", **fields)


def _last_callers(found: "dict[str, Any]") -> "dict[str, Any]":
    """Each last_caller target's last user (code, line), attributed (process_exit's count_callers)."""
    from .dists import attribute

    return {label: attribute({"file": code.co_filename, "line": line, "func": code.co_name})
            for label, (code, line) in ((k, v) for k, v in found.items() if v is not None)}


# The frame that forks (and then execs) in subprocess.Popen when preexec_fn is set:
# fork_exec is C code, so at-fork hooks see this Python frame directly above them.
_EXEC_FORKER = ("_execute_child", "subprocess")
# Frames between _forked_to_exec and _execute_child: after_fork_in_child, _after_fork,
# host_patches._after_fork_in_child (the at-fork hook).
_EXEC_FORKER_DEPTH = 4
# Bound once: a user may trace sys._getframe, and the at-fork hook must not record
# a call under the parent's identity.
_getframe = sys._getframe


def _forked_to_exec() -> bool:
    """Whether this forked child is subprocess's pre-exec child (about to exec)."""
    frame = _getframe(1)
    for _ in range(_EXEC_FORKER_DEPTH):
        if frame is None:
            return False
        if (frame.f_code.co_name, frame.f_globals.get("__name__")) == _EXEC_FORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# At exit, how long other threads' records already being written get to land (sink.close_to_others):
# sub-millisecond unless the host is loaded; bounded so an exit is never held up for long.
EXIT_WRITE_WAIT_S = 0.2

# The root's first verdict at exit: its live descendants, so a reader right after
# the job has one before the watcher's leftover (docs/contracts.md, "The root's `below`").
BELOW_KEEP = 200  # entries written (a record stays well under the sink's 32 KiB)
BELOW_WALK = 10000  # processes visited at most: a bounded cost at exit


def in_main_interpreter() -> bool:
    """Whether this is the process's main interpreter: the tracer never starts in a subinterpreter.

    The same test as the .pth line's and wp_autotrace._site.in_main_interpreter's (why it is
    right on each Python: there). Costs two dict lookups: no import.
    """
    is_main = sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter")
    return bool(is_main()) if is_main is not None else "_signal" in sys.modules


def _no_other_interpreter() -> bool:
    """Whether Sink.close_to_others may look at other threads' frames (sys._current_frames()).

    From 3.12 sys._current_frames() walks the threads of every interpreter of the process and
    makes a frame object, from the caller's interpreter's allocator, for each one's running frame;
    a subinterpreter has its own GIL and allocator, runs on meanwhile, and later frees that
    object with its own allocator (3.13: "free(): invalid pointer", issue #35). So the look is
    skipped while another interpreter exists, or when that cannot be told. 3.9-3.11: one GIL and
    one allocator for every interpreter: always safe. Imported at exit only, on 3.12+.
    """
    if sys.version_info < (3, 12):
        return True
    for name in ("_interpreters", "_xxsubinterpreters"):  # 3.13+, 3.12
        try:
            return len(__import__(name).list_all()) <= 1
        except ImportError:
            continue
        except Exception:
            return False
    return False


def _below() -> "dict[str, Any]":
    """{"below": [...], "below_count": n} of the root's live descendants; nothing without /proc, or where
    /proc is another pid namespace's (`unshare -p` without --mount-proc: our pid there is another process,
    kthreadd for pid 2, and its children are not ours; the watcher says so in its watcher_exit)."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return {}
    except OSError:
        return {}
    from ..common.procfs import ProcReader, descendants  # the root's exit only: not at start-up (clock.py)

    if not ProcReader.available():
        return {}
    found, count = descendants(os.getpid(), BELOW_KEEP, BELOW_WALK)
    return {"below": found, "below_count": count}


def _rank_field() -> "dict[str, Any]":
    """{"rank": {...}} when a launcher set rank variables; nothing otherwise (docs/contracts.md, "Ranks")."""
    rank = rank_env()
    return {"rank": rank} if rank else {}


def _post_notice(info: "dict[str, Any]") -> None:
    from .guard import post_notice

    post_notice(info)


_runtime: "Runtime | None" = None
_started = False


# Called in every forked child (host_patches.install_process_hooks): a new identity, not the root.
def _after_fork() -> None:
    rt = _runtime
    if rt is None:
        return
    try:
        rt.after_fork_in_child()
        # Other os._exit callers write no process_exit (README, Known limits).
        install_mp_exit_finalizer(_record_exit)
    except Exception as exc:
        rt.sink.error("fork", exc)


# Written once, by whichever exit comes first (atexit, or a multiprocessing worker's end).
def _record_exit(how: str, code: "int | None" = None) -> None:
    global _runtime
    rt, _runtime = _runtime, None
    if rt is None:
        return
    try:
        rt.at_exit(how, code)
    except Exception as exc:
        rt.sink.error("exit", exc)


def _at_exit() -> None:
    _record_exit("exit")


def start() -> None:
    """Entry point from the .pth file. Runs once per process; never raises."""
    global _started, _runtime
    # site runs the .pth again in every subinterpreter (the line tests this too; here for any
    # other caller): one tracer per process, in its main interpreter, and a subinterpreter sees
    # exactly what it would untraced (issue #35; docs/guarantees.md, "Subinterpreters").
    if _started or not in_main_interpreter():
        return
    _started = True
    runtime = None
    try:
        settings = read_settings()
        _say_notes(settings)
        # The wp-autotrace command never traces itself (`run` execs the program, traced as it starts).
        if not (settings.trace or settings.guard) or runs_own_cli(own_argv()):
            return
        runtime = Runtime(settings)
        runtime.start()
        _runtime = runtime
        install_process_hooks(_after_fork, _at_exit)
    except Exception as exc:
        _runtime = None
        if runtime is not None:
            runtime.finder.uninstall()
        warn(f"tracing disabled: {type(exc).__name__}: {exc}", "start")
