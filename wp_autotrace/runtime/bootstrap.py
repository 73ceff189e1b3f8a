"""Activation: run once per process from the .pth file when WP_AUTOTRACE is on.

The first traced process of a run is the root: it fixes the log path and a
run id, and exports them with its pid through os.environ, so every
descendant (compile sidecars are started with a copy of os.environ) appends
to the same log. Everything here is contained: a failure prints one
``wp-autotrace:`` line and the program runs on untraced.
"""

import _thread
import os
import sys

from ..common.core import CHILD, COMPILE_WORKER, EXEC, GUARDED_ROLES, HELPER_ROLES, MAIN, PROCESS_EXIT, SIDECAR_ROLES
from ..common.env import (
    ARGV_ROLES,
    CHILD_ROLE_ENV,
    ENABLE_ENV,
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
    env_watch,
    is_true,
    own_argv,
    own_start,
    pool_env,
    rank_env,
    runs_own_cli,
    set_vars,
)
from ..common.redact import argv_env_secrets, env_secrets, parse_patterns, redact_argv, redact_env
from .host_patches import (
    calls,
    drop_fork_hook,
    install_exec_record,
    install_process_hooks,
    install_signal_record,
)
from .sink import Sink, imported_by_tracer, rare, warn

# Not typing.TYPE_CHECKING: importing typing costs every traced process milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..common.targets import Target
    from .shapes import Runtime, Settings


DEFAULT_STACK = 8
DEFAULT_INTERVAL = 0.1
# Below this the watcher would cost a good share of a core on an idle host.
MIN_INTERVAL = 0.01
DEFAULT_LINGER = 60.0  # seconds the watcher stays after the root ends, while run processes live
MAX_LINGER = 7 * 24 * 3600.0
GUARD_MODES = (GUARD_NESTED_POOLS,)
# types.SimpleNamespace, without importing types: the settings and the finders here are namespaces (a class made
# at import costs every traced start ~70K instructions, a function ~6K).
_Namespace: "Any" = type(sys.implementation)


def _number(env: "dict[str, str]", name: str, default: float, low: float, high: float, notes: "list[str]") -> float:
    raw = env.get(name)
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


def read_settings() -> "Settings":
    """Parse the WP_AUTOTRACE_* variables; a bad value takes the default and adds a note (Settings.notes:
    start() prints them in the root only). Reads only: the environment is left as it was."""
    # os.environ's values of the settings that are set: no KeyError raised for each unset one (set_vars)
    env = set_vars((ENABLE_ENV, GUARD_ENV, TARGETS_ENV, INTERVAL_ENV, STACK_ENV, LOG_ENV, REDACT_ENV, LINGER_ENV))
    notes: list[str] = []
    enable_raw = (env.get(ENABLE_ENV) or "").strip().lower()
    if enable_raw not in TRUE_WORDS + FALSE_WORDS:
        notes.append(f"{ENABLE_ENV}={enable_raw[:40]!r} is not one of {', '.join(TRUE_WORDS)} "
                     f"(or {', '.join(FALSE_WORDS[1:])}); tracing off")
    guard_raw = (env.get(GUARD_ENV) or "").strip().lower()
    guard = guard_raw in GUARD_MODES
    if not guard and guard_raw not in FALSE_WORDS:
        notes.append(f"{GUARD_ENV}={guard_raw[:40]!r} is not one of {', '.join(GUARD_MODES)}; guard off")
    extra: list[Target] = []
    if env.get(TARGETS_ENV, "").strip():
        from ..common.targets import parse_extra_targets  # the table only where the user adds to it

        extra = parse_extra_targets(env.get(TARGETS_ENV, ""), notes)
    interval = _number(env, INTERVAL_ENV, DEFAULT_INTERVAL, 0, 3600, notes)
    if 0 < interval < MIN_INTERVAL:
        notes.append(f"{INTERVAL_ENV}={interval:g} is below {MIN_INTERVAL:g}; using {MIN_INTERVAL:g}")
        interval = MIN_INTERVAL
    settings: Settings = _Namespace(
        trace=is_true(env.get(ENABLE_ENV)),
        guard=guard,
        log=env.get(LOG_ENV) or None,
        stack=int(_number(env, STACK_ENV, DEFAULT_STACK, 0, 256, notes)),
        interval=interval,
        extra_targets=tuple(extra),
        redact=parse_patterns(env.get(REDACT_ENV, "")),
        linger=_number(env, LINGER_ENV, DEFAULT_LINGER, 0, MAX_LINGER, notes),
        notes=notes,
    )
    return settings


def _say_notes(settings: "Settings") -> None:
    """The settings' notes, in the root only, once per run; when tracing stays off, mark the environment
    so that descendants (which inherit the same values) stay silent. Tracing on: the run's ROOT_ENV does."""
    if not (settings.notes or settings.extra_targets) or not rare().says_settings_notes():  # else nothing to say
        return
    notes = list(settings.notes)
    if settings.extra_targets:  # the targets module is loaded then (read_settings): no file is opened
        from ..common.targets import alias_notes

        notes += alias_notes(settings.extra_targets)
    for note in notes:
        warn(note)
    if notes and not (settings.trace or settings.guard):
        os.environ[WARNED_ENV] = str(os.getpid())


def detect_role(is_root: bool) -> str:
    """main, a pool's role (named by the starting call, or seen in argv), or child."""
    # Popped, so that this process's own children do not inherit it.
    given = os.environ.pop(CHILD_ROLE_ENV, "") if set_vars((CHILD_ROLE_ENV,)) else ""
    if is_root:
        return MAIN
    # A marker holds no NUL: it is in one of the arguments exactly when it is in them joined by NULs (one C
    # search a marker, not one a marker and argument).
    argv = "\0".join(map(str, own_argv()[:4] + list(sys.argv or [])[:1])).replace(os.sep, "/")
    seen = CHILD
    for marker, role in ARGV_ROLES:  # a loop, not a generator: one code object fewer to load at every start
        if marker in argv:
            seen = role
            break
    # a helper multiprocessing starts inside the pool call (its resource tracker, beside a spawned worker) stays
    # the helper: the handed role is the worker's
    if given in GUARDED_ROLES and seen not in HELPER_ROLES:
        return given
    return seen


def new_runtime(settings: "Settings") -> "Runtime":
    """This process's Runtime: its run (a root starts one: run id, root pid and log exported), sink and finders."""
    env = os.environ
    pid = os.getpid()
    found = set_vars((RUN_ENV, ROOT_ENV))
    run_id = found.get(RUN_ENV)
    is_root = not run_id or found.get(ROOT_ENV) == str(pid)
    if not run_id:
        run_id = os.urandom(6).hex()
        env[RUN_ENV], env[ROOT_ENV] = run_id, str(pid)
    host = os.uname().nodename
    log = None
    if settings.trace:
        log = settings.log or rare().default_log_name(host, pid)
        # As the root exported it (absolute, normal: what posixpath.abspath leaves as it is), it stays as it is
        if log != settings.log or log[:1] != "/" or "/." in log or "//" in log or log.endswith("/"):
            env[LOG_ENV] = log = os.path.abspath(log)
    try:
        # Only the root may create the log; descendants open the root's file.
        sink = Sink(log, host, detect_role(is_root), create=is_root)
        sink.say_drops = True  # records lost to a full disk are counted in the log once it has room
    except OSError as exc:
        if not is_root:
            raise
        # Descendants would fail the same way: the whole run goes untraced.
        env[ENABLE_ENV] = "0"
        warn(f"cannot open the log {log}: {exc.strerror or exc}; running untraced", "open")
        settings.trace = False
        sink = Sink(None, host, MAIN)
    notice = None
    if is_root and settings.guard:
        try:
            from .guard import create_notice_file
        except BaseException:  # EMFILE, say: start() disables tracing, and the log's descriptor goes with it
            sink.release()
            sink.stop()
            raise
        notice = create_notice_file(run_id)
        if notice:
            env[NOTICE_ENV] = notice
    rt: Runtime = _Namespace(settings=settings, is_root=is_root, run_id=run_id, host=host, sink=sink, _probes=None,
                             _root=None, create_time=None, notice=notice, _finder=None)
    rt._front = _front_finder(rt)
    rt.env_watch = env_watch()
    return rt


def install_finder(rt: "Runtime") -> None:
    """Put the front finder first on sys.meta_path; the full one at once where a target module is
    already loaded or the user added targets (a module the tracer itself may need)."""
    if rt.settings.extra_targets or not sys.modules.keys().isdisjoint(TARGET_MODULES):  # the view walks the 15 names
        from .first_target import finder

        finder(rt, PYTEST_CONFIG)
    elif rt._front not in sys.meta_path:
        sys.meta_path.insert(0, rt._front)


def start_runtime(rt: "Runtime") -> None:
    """Hook imports, write process_start; the root starts the run's watcher process."""
    if rt.settings.extra_targets:
        # A user target may be a module the wrappers need (threading): load them before the finder patches it.
        from .first_target import probes

        probes(rt)
    install_finder(rt)
    write_start(rt, forked=False)
    if rt.settings.trace:
        install_exec_record(_exec_recorder(rt))
        install_signal_record(rt.sink.emit)
    if rt.sink.role in GUARDED_ROLES:
        from .catch import watch_role

        watch_role(rt.sink)
    if rt.is_root:
        from . import root  # the root's own work: its watcher, and what its exit record lists

        rt._root = root
        # WATCHED_ENV: a root that exec'd a new interpreter keeps the watcher it started.
        if rt.settings.trace and rt.settings.interval > 0 and os.environ.get(WATCHED_ENV) != rt.run_id:
            root.start_watcher(rt)
    if rt._probes is None:
        # A program that lists or closes its descriptors must not find the log among them (guarantees.md):
        # its few records (exit, exec, errors) each open the log and close it.
        rt.sink.release()


def _exec_recorder(rt: "Runtime") -> "Callable[[str, list[str], Any], None]":
    """The exec record's writer for rt, handed to host_patches.install_exec_record."""

    def record_exec(executable: str, argv: "list[str]", env: "Any") -> None:
        """The exec record, just before this process execs (host_patches.install_exec_record):
        its end is then the watcher's `ended`, not a kill. argv masked as process_start's."""
        patterns = rt.settings.redact
        secrets = env_secrets(os.environ, patterns)
        if env is not None:  # execve's own environment may hold a secret os.environ does not
            secrets += env_secrets({os.fsdecode(k): os.fsdecode(v) for k, v in dict(env).items()}, patterns)
        rt.sink.emit(EXEC, argv=redact_argv(argv, patterns, secrets), executable=executable)

    return record_exec


def write_start(rt: "Runtime", forked: bool) -> None:
    """The process_start record: who this process is and what it was told."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    argv = list(own_argv() or sys.argv)
    patterns = rt.settings.redact
    rt.create_time, rt.start_ticks = own_start()
    rt.sink.emit(
        "process_start",
        # The whole command line, interpreter and flags included; secrets masked.
        argv=redact_argv(argv, patterns, argv_env_secrets(argv, patterns)),
        executable=sys.executable,
        python=sys.version.split()[0],
        cwd=cwd,
        run=rt.run_id,
        root_pid=int(set_vars((ROOT_ENV,)).get(ROOT_ENV) or 0),
        forked=forked,
        guard=rt.settings.guard,
        env=redact_env(pool_env(), patterns),
        # {"rank": {...}} when a launcher set rank variables; nothing otherwise (docs/contracts.md, "Ranks")
        **({"rank": rank} if (rank := rank_env()) else {}),
        # Absent where there is no /proc: readers then fall back to ts.
        **({} if rt.create_time is None else {"create_time": rt.create_time, "start_ticks": rt.start_ticks}),
    )


def after_fork_in_child(rt: "Runtime") -> None:
    """A forked child is a new process: new identity, not the root.

    A child forked by subprocess to exec a program (preexec_fn set) writes
    nothing: it is about to become another image, which writes its own
    process_start if it is traced Python; a forked start it never closed
    would read as a killed child.
    """
    rt.is_root = False
    rt.notice = None
    if _forked_to_exec():
        rt.sink.stop()  # a held fd is O_CLOEXEC: the new image does not inherit it
        return
    role = COMPILE_WORKER if rt.sink.role in SIDECAR_ROLES else CHILD
    rt.sink.reset_after_fork(role)
    patches = sys.modules.get(__package__ + ".target_patches")  # loaded with a target module, if any
    if patches is not None:
        patches.reset_body_hooks_after_fork()
    if rt._probes is not None:
        rt._probes.reset_after_fork()
    write_start(rt, forked=True)


def at_exit(rt: "Runtime", how: str, code: "Any" = None) -> None:
    """process_exit; in the root, the guard's first notice (the watcher writes the leftovers)."""
    if rt.notice is not None:
        path, rt.notice = rt.notice, None
        sys.modules[__package__ + ".guard"].print_and_remove_notice(path)  # loaded with the notice file
    # An uncaught exception ends it (Python printed it, set sys.last_value, then ran the exit handlers): read before
    # the wait, while a refused thread start's tasks live (reads.ended_by); sys's dict: getattr raised inside each time
    last = sys.__dict__.get("last_value") if how == "exit" and code is None else None
    ended: dict[str, Any] = {}
    if last is not None:
        try:
            from .reads import ended_by  # loaded only here: a child with no target module may not have it

            ended = ended_by(last)
        except Exception:  # no descriptor for the import (EMFILE, often the very error): the exit record first
            pass
    # Other threads' records in flight land first; process_exit is then this process's last record.
    # Looking for them walks every interpreter's threads: not while a subinterpreter lives.
    rt.sink.close_to_others(EXIT_WRITE_WAIT_S if _thread_count() and rare().no_other_interpreter() else 0)
    fields: dict[str, Any] = {"how": how, "counts": {}, "dropped": rt.sink.dropped}
    if rt._probes is not None:  # first_target is loaded with the probes (make_probes): no file is opened at exit
        sys.modules[__package__ + ".first_target"].exit_counts(rt._probes, fields)
    if code is not None:
        fields["code"] = code if isinstance(code, int) else repr(code)
    fields.update(ended)
    if rt.is_root and rt.sink.active and rt._root is not None:
        fields.update(rt._root.below())
    before = rt.sink.dropped
    rt.sink.emit(PROCESS_EXIT, **fields)
    limits = rare().one_more_descriptor(rt.sink) if rt.sink.dropped != before else None
    if limits is not None:  # no descriptor was free: once more, one above the program's limit
        try:
            rt.sink.dropped = before
            rt.sink.emit(PROCESS_EXIT, **fields)
        finally:
            rare().put_back_limit(limits)
    if rt.sink.dropped != before:  # still lost: a note the watcher turns into exit_unwritten
        rare().leave_exit_note(rt.sink, {"how": how, "code": fields.get("code"), "dropped": rt.sink.dropped})


# The frame that forks (and then execs) in subprocess.Popen when preexec_fn is set:
# fork_exec is C code, so at-fork hooks see this Python frame directly above them.
_EXEC_FORKER = ("_execute_child", "subprocess")
# Frames between _forked_to_exec and _execute_child: after_fork_in_child, _after_fork,
# host_patches._at_fork (the at-fork hook).
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

def in_main_interpreter() -> bool:
    """Whether this is the process's main interpreter: the tracer never starts in a subinterpreter.

    The same test as the .pth line's and wp_autotrace_start.in_main_interpreter's (why it is
    right on each Python: there). Costs two dict lookups: no import.
    """
    is_main = sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter")
    return bool(is_main()) if is_main is not None else "_signal" in sys.modules


_thread_count = _thread._count  # other threads of this interpreter: with none, nothing to wait for


# Every module of targets.TARGETS, as a set the start-up path holds without loading the table
# (tests/test_activation.py checks the two equal).
TARGET_MODULES = frozenset((
    "torch._inductor.async_compile", "torch._inductor.codecache", "torch._inductor.compile_worker.subproc_pool",
    "torch._inductor.compile_worker.watchdog", "torch._inductor.compile_worker.utils", "torch._dynamo",
    "torch._inductor.compile_worker.tracked_process_pool", "torch._inductor.autotune_process",
    "torch._inductor.compile_fx_subproc", "torch._vendor.quack.autotuner", "torch.utils.data._utils.worker",
    "torch._dynamo.convert_frame", "torch_npu._inductor", "torch._inductor.config", "concurrent.futures.process",
))


# pytest's module that makes its plugin manager: loaded, it has the tracer's plugin registered
# (target_patches.install_pytest_plugin) in a traced session; no entry point loads it untraced.
PYTEST_CONFIG = "_pytest.config"


def _front_finder(runtime: "Runtime") -> "Any":
    """The meta-path finder a traced process starts with: the target module names and nothing else.

    Its find_spec answers None for every other module (the import goes on as untraced), and for a target
    module hands the import to the full finder (first_target.finder()), which takes its place on sys.meta_path.
    A top-level module the tracer's own code imports is looked up as the full finder would
    (finder.trusted_spec: never from the cwd or the script's folder). A module object holding a closure, not an
    instance of a class of its own (_finder): making a class costs every traced start ~70K instructions.
    """

    def find_spec(fullname: str, path: "Any" = None, target: "Any" = None) -> "Any":
        runtime.env_watch.check(fullname)  # every import's start: who changed what inductor's config reads
        if fullname in TARGET_MODULES or (fullname == PYTEST_CONFIG and runtime.settings.trace):
            from .first_target import finder  # loaded with the first target module: most processes never

            return finder(runtime, PYTEST_CONFIG).find_spec(fullname, path, target)
        if path is None and imported_by_tracer(fullname, 2) and fullname not in sys.builtin_module_names:
            from .finder import trusted_spec

            return trusted_spec(fullname)
        return None

    # invalidate_caches: nothing cached here; present for the finder protocol
    return _finder(find_spec, _finds_nothing)


_runtime: "Runtime | None" = None
_started = False


# Called in every forked child (host_patches.install_process_hooks): a new identity, not the root.
def _after_fork() -> None:
    rt = _runtime
    if rt is None:
        return
    try:
        after_fork_in_child(rt)
        # Other os._exit callers write no process_exit (README, Known limits).
        calls().install_mp_exit_finalizer(_record_exit)  # inherited: made before the fork
    except Exception as exc:
        rt.sink.error("fork", exc)


# Written once, by whichever exit comes first (atexit, or a multiprocessing worker's end).
def _record_exit(how: str, code: "int | None" = None) -> None:
    global _runtime
    rt, _runtime = _runtime, None
    if rt is None:
        return
    try:
        at_exit(rt, how, code)
    except Exception as exc:
        rt.sink.error("exit", exc)
    finally:
        _let_go(rt)


def _let_go(rt: "Runtime") -> None:
    """After the exit record nothing of the tracer runs (the at-fork hook found no runtime, the front finder
    served imports whose records could no longer be written): the two references CPython keeps to the
    interpreter's end (its at-fork list; sys.meta_path, through sys's saved dict) are dropped, so the
    tracer's modules are freed with the program's at finalization's first collection, not walked by
    every collection after it (~1M instructions of a traced start's exit, docs/scale.md). A full finder
    (a target module loaded) stays: its wrappers may still be running. 3.9's finalization never frees what
    its at-fork list holds, so there the hook keeps them: letting go would only add their collection (+0.8M)."""
    if sys.version_info >= (3, 10):
        drop_fork_hook()
    try:
        # Replaced in its slot, never removed: importlib iterates the live list, and a thread importing now (a
        # daemon thread, while a later exit handler lets it run) would resume one finder further and skip one
        meta = sys.meta_path
        for i in range(len(meta)):
            if meta[i] is rt._front:
                meta[i] = _gone_finder()
    except Exception:
        pass


def _finds_nothing(*_args: "Any") -> None:
    """The front finder's invalidate_caches; a copy whose globals are none is the finder left in its slot after
    the exit record."""


def _gone_finder() -> "Any":
    """A finder that finds nothing, holding no tracer module (_finder: not a class made, ~60K an exit)."""
    function: Any = type(_finds_nothing)
    nothing = function(_finds_nothing.__code__, {"__builtins__": {}})  # a copy whose globals are empty
    return _finder(nothing, nothing)


def _finder(find_spec: "Any", invalidate_caches: "Any") -> "Any":
    """A meta-path finder of these two functions: a module object (no class made), hashable and weakly referenceable
    as a finder instance is (a host may put sys.meta_path in a set or a WeakSet: a SimpleNamespace would raise)."""
    finder: Any = type(sys)("wp_autotrace finder")
    finder.find_spec, finder.invalidate_caches = find_spec, invalidate_caches
    return finder


def _at_exit() -> None:
    _record_exit("exit")


def start() -> None:
    """Entry point from the .pth file. Runs once per process; never raises."""
    global _started, _runtime
    # site runs the .pth again in every subinterpreter (the line tests this too; here for any
    # other caller): one tracer per process, in its main interpreter, and a subinterpreter sees
    # exactly what it would untraced (docs/guarantees.md, one tracer per process).
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
        runtime = new_runtime(settings)
        known = set(sys.modules) if runtime.is_root else None
        start_runtime(runtime)
        if known is not None and runtime._root is not None:
            runtime._root.unshadow(known)
        _runtime = runtime
        install_process_hooks(_after_fork, _at_exit)
    except Exception as exc:
        _runtime = None
        if runtime is not None:  # either finder off sys.meta_path (wrapped objects stay wrapped)
            while runtime._front in sys.meta_path:
                sys.meta_path.remove(runtime._front)
            if runtime._finder is not None:
                runtime._finder.uninstall()
            # The program runs on untraced: the log's descriptor is not one of its numbers (its opens under a
            # small RLIMIT_NOFILE would get one fewer), and the patched senders and exec write nothing more.
            runtime.sink.release()
            runtime.sink.stop()
        warn(f"tracing disabled: {type(exc).__name__}: {exc}", "start")
