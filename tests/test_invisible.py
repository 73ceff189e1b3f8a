"""Differential tests: a traced (and guard-only) program behaves exactly as untraced (issue 14).

Each case runs the same program three ways through the installed .pth:
untraced, traced (WP_AUTOTRACE=1) and guard-only (WP_AUTOTRACE_GUARD), with the
functions under test named in WP_AUTOTRACE_TARGETS, and asserts identical
stdout, stderr and exit code. Memory addresses (``0x7f...``) are the only
thing normalised: they differ between any two runs. Torch-free, so
tools/python_matrix.sh runs them on every supported Python.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from .conftest import clean_env, events, read_log, run_python, wait_for_watcher

ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# 3.9/3.10 re-raise with the traceback saved when the wrapper caught the exception:
# one frame of the wrapper stays there (docs/guarantees.md).
WRAPPER_FRAME_IN_TRACEBACKS = sys.version_info < (3, 11)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def without_wrapper_frames(stderr: str) -> str:
    """stderr with the wrapper's traceback entries (file line + source line) removed."""
    out: list[str] = []
    skip = False
    for line in stderr.splitlines(keepends=True):
        if skip and line.startswith("    "):
            skip = False
            continue
        skip = "wp_autotrace" in line and line.lstrip().startswith("File ")
        if not skip:
            out.append(line)
    return "".join(out)


def three_ways(tmp_path: Path, args: list[str], targets: str, allow_wrapper_frame: bool = False,
               timeout: float = 60, guard: bool = True, expect_calls: bool | tuple[str, ...] = True,
               **env: str) -> list[dict[str, Any]]:
    """Run args untraced, traced and guard-only in tmp_path; assert the same result; return the traced log.

    The traced run must really trace: it writes a process_start and a call record for every
    target named (expect_calls: those named there; False: none), else "the same result" would
    hold trivially.
    guard=False leaves the guard-only run out (its root runs a notice thread, which 3.12+ warns
    about at os.fork()).
    """
    log = tmp_path / "traced.jsonl"
    log.unlink(missing_ok=True)  # a log of an earlier call would prove nothing about this one
    runs = {
        "untraced": clean_env(**env),
        "traced": clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0",
                            WP_AUTOTRACE_TARGETS=targets, **env),
        "guard-only": clean_env(WP_AUTOTRACE_GUARD="nested-pools", WP_AUTOTRACE_TARGETS=targets, **env),
    }
    if not guard:
        del runs["guard-only"]
    results = {name: run_python(args, e, cwd=tmp_path, timeout=timeout) for name, e in runs.items()}
    base = results["untraced"]
    for name, res in results.items():
        stderr = ADDRESS.sub("0x?", res.stderr)
        if allow_wrapper_frame and WRAPPER_FRAME_IN_TRACEBACKS:
            stderr = without_wrapper_frames(stderr)
        assert (res.returncode, ADDRESS.sub("0x?", res.stdout), stderr) == (
            base.returncode, ADDRESS.sub("0x?", base.stdout), ADDRESS.sub("0x?", base.stderr)), name
    records = read_log(log)
    assert events(records, "process_start"), "the traced run wrote no process_start: it did not trace"
    if expect_calls:
        expected = targets.split(",") if expect_calls is True else expect_calls
        called = set(calls(records))
        missing = [t for t in expected if t and t not in called]
        assert not missing, f"the traced run recorded no call of {missing}: the test would pass untraced"
    return records


def calls(records: list[dict[str, Any]]) -> list[str]:
    return [r["target"] for r in records if r["event"] == "call"]


# -- builtins, keywords, identity -------------------------------------------------

def test_os_exit_is_untouched_and_takes_its_keyword(tmp_path: Path) -> None:
    """os._exit(status=3) exits 3 and os._exit is posix._exit, traced or not."""
    three_ways(tmp_path, ["-c", "import os, posix; print(os._exit is posix._exit, flush=True); os._exit(status=3)"],
               targets="")


def test_traced_builtin_keeps_keywords_signature_and_identity(tmp_path: Path) -> None:
    """A builtin named as a target (os:_exit) keeps its keyword, signature and `is` identity."""
    recs = three_ways(tmp_path, ["-c", textwrap.dedent("""
        import inspect, os, posix
        print(os._exit is posix._exit, inspect.signature(os._exit), os._exit.__name__, flush=True)
        os._exit(status=3)
    """)], targets="os:_exit")
    assert calls(recs) == ["os:_exit"]


# -- a plain target's edge calls ---------------------------------------------------------

EDGES = """
    import sys

    def gen(n):
        yield from range(n)

    def boom(x):
        raise ValueError(f"no {x}")

    def again(n):
        return n if n <= 0 else again(n - 1) + 1

    def late(what):
        print("late", what, flush=True)
        return what

    class Held:
        def __del__(self):
            late("at shutdown")

    kept = Held()  # collected as the interpreter finalizes its modules
"""


def test_plain_targets_raise_recurse_yield_and_run_at_shutdown_as_untraced(tmp_path: Path) -> None:
    """Targets written by the one-function wrapper (no capture, memory or role): a generator, a raising one
    (its traceback as untraced), one that calls itself, and one called from a __del__ as the interpreter
    finalizes: the same output, exit code and stderr traced, guard-only and untraced."""
    write(tmp_path, {"edges.py": EDGES})
    recs = three_ways(tmp_path, ["-c", textwrap.dedent("""
        import edges
        print(list(edges.gen(3)), edges.again(5), edges.late("now"))
        try:
            edges.boom(1)
        except ValueError as exc:
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            print(repr(exc), tb.tb_frame.f_code.co_name)  # the innermost frame: boom's own
        edges.boom(2)
    """)], targets="edges:gen,edges:boom,edges:again,edges:late", allow_wrapper_frame=True)
    returns = {r["call_id"]: r for r in recs if r["event"] == "return"}
    again = [r for r in recs if r["event"] == "call" and r["target"] == "edges:again"]
    assert len(again) == 6 and all(r["call_id"] in returns for r in again)
    assert [returns[r["call_id"]].get("error") for r in recs if r["event"] == "call"
            and r["target"] == "edges:boom"] == ["ValueError: no 1", "ValueError: no 2"]


# -- recursion ----------------------------------------------------------------------

RECURSIVE = """
    DEPTH = [0]
    def down(n):
        DEPTH[0] = n
        down(n + 1)
"""


def test_traced_recursion_reaches_the_untraced_depth(tmp_path: Path) -> None:
    """A traced recursive function reaches >= 95% of the depth it reaches untraced; the limit is restored."""
    write(tmp_path, {"recmod.py": RECURSIVE, "plainmod.py": RECURSIVE})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import sys, recmod, plainmod
        limit = sys.getrecursionlimit()
        for mod in (plainmod, recmod):
            try:
                mod.down(0)
            except RecursionError as exc:
                print(type(exc).__name__)
        print(recmod.DEPTH[0] >= 0.95 * plainmod.DEPTH[0], sys.getrecursionlimit() == limit)
    """)], targets="recmod:down")


LIMITS = """
    import sys
    def plain(x):
        return x + 1
    def set_max():
        sys.setrecursionlimit(2**31 - 1)
        return "set"
"""


def test_a_traced_call_at_the_largest_recursion_limit_returns_as_untraced(tmp_path: Path) -> None:
    """A host whose recursion limit is a C int's largest (2**31 - 1: the tracer's own room above it is no int
    setrecursionlimit takes) still gets its traced call's result, and its limit back as it left it; one that
    sets that limit inside a traced call gets its result too. Before, both raised OverflowError out of the
    host's call (the first from the move before its call record, the second after the function had run)."""
    write(tmp_path, {"limmod.py": LIMITS})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import sys, limmod
        def step(name, f, *args):
            try:
                print(name, f(*args))
            except BaseException as exc:
                print(name, "raised", type(exc).__name__)
        sys.setrecursionlimit(2**31 - 1)
        step("at the largest", limmod.plain, 1)
        step("again", limmod.plain, 2)
        print(sys.getrecursionlimit() == 2**31 - 1 or sys.getrecursionlimit())
        sys.setrecursionlimit(5000)
        step("inside", limmod.set_max)  # (the limit it leaves: a separate matter, docs/guarantees.md)
        sys.setrecursionlimit(5000)
        print(limmod.plain(2), sys.getrecursionlimit())
    """)], targets="limmod:plain,limmod:set_max")


SETS_LIMIT = """
    import sys
    def lift():  # torch's compile_fx inside dynamo's _compile
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
    def lower(n):
        sys.setrecursionlimit(n)
    def fails(n):
        sys.setrecursionlimit(n)
        raise ValueError(n)
    def outer(n):  # a traced call whose host calls another that sets the limit
        lower(n)
        return sys.getrecursionlimit()
"""


def test_a_limit_the_host_sets_inside_a_traced_call_is_the_one_it_reads_after(tmp_path: Path) -> None:
    """A traced call that sets the recursion limit itself (torch raises it to 2000 inside dynamo's _compile) leaves
    the value it set, returning or raising, as untraced: the wrapper's moves around it are relative, and would
    leave it one frame's allowance lower; also where that call is inside another traced call (the calls in flight
    then are the thread's own: before, only a lone call kept the host's value, and the nested one left 2499)."""
    write(tmp_path, {"limits.py": SETS_LIMIT})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import sys, limits
        sys.setrecursionlimit(1000)
        limits.lift()
        print(sys.getrecursionlimit())
        limits.lower(1500)
        print(sys.getrecursionlimit())
        try:
            limits.fails(1700)
        except ValueError:
            print(sys.getrecursionlimit())
        limits.lift()
        print(sys.getrecursionlimit())
        print(limits.outer(2500), sys.getrecursionlimit())
    """)], targets="limits:lift,limits:lower,limits:fails,limits:outer", allow_wrapper_frame=True)


THREADED = """
    def work(n):
        total = 0
        for i in range(n):  # bytecode: other threads run inside the call
            total += i
        return total
"""


def test_traced_calls_in_threads_at_once_leave_the_recursion_limit_as_it_was(tmp_path: Path) -> None:
    """Eight threads making 5,000 traced calls each, switching every microsecond: another thread's call in
    flight moves the limit too, and no call may take that for a limit its host set (it would keep a frame's
    allowance for good: drift up with every such overlap; seen 1000 -> 1002..1005). The limit after is 1000.
    5,000, not 20,000 (a quarter of the time; ~30 s at load 20 before): with unseen.kept_setting taking every
    difference for the host's, or dropping its own-calls test, 8 x 5,000 read 1004-1024 in 6 of 6 runs (2,000:
    3 of 3; 1,000: 2 of 3), so a regression still fails here; the right code reads 1000 at any count."""
    write(tmp_path, {"thrmod.py": THREADED})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import sys, threading, thrmod
        sys.setswitchinterval(1e-6)
        sys.setrecursionlimit(1000)
        def run():
            for _ in range(5000):
                thrmod.work(200)
        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sys.getrecursionlimit())
    """)], targets="thrmod:work", guard=False, timeout=240)


FORKS = """
    import os
    def spawn(work):  # a fork pool's worker start: the child never returns through the wrapper
        pid = os.fork()
        if pid == 0:
            work()
        return pid
    def fork():
        return os.fork()
    def outer():  # a traced call inside another
        return fork()
"""


def test_a_process_forked_inside_a_traced_call_reads_its_hosts_recursion_limit(tmp_path: Path) -> None:
    """A child forked inside a traced call (torch's fork-start pools fork their workers so) reads the recursion limit
    as untraced, for good: where it never returns through the wrapper (a worker), where it does (the move back is
    not made twice), and where the fork is two traced calls deep. Before, the child read the limit one frame's
    allowance higher (STACK_COST for each traced call it was forked in) for life, or lower after returning."""
    write(tmp_path, {"forks.py": FORKS})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import os, sys, forks
        sys.setrecursionlimit(1000)
        def report(tag):
            print(tag, sys.getrecursionlimit(), flush=True)
        def worker():
            report("worker")
            os._exit(0)
        os.waitpid(forks.spawn(worker), 0)
        for how in (forks.fork, forks.outer):
            pid = how()
            if pid == 0:
                report("returned " + how.__name__)
                forks.fork() or os._exit(0)  # a traced call in the child moves as in any process
                report("after a call")
                os._exit(0)
            os.waitpid(pid, 0)
        report("parent")
    """)], targets="forks:spawn,forks:fork,forks:outer", guard=False)


# -- copy, pickle, multiprocessing ------------------------------------------------

PKG = {
    "pkg/__init__.py": "from .impl import f, public, adder, part, Pool\n",
    "pkg/impl.py": """
        import functools

        def f(x):
            return x + 1

        def _impl(x):
            return x * 2

        public = _impl

        class Adder:
            def __call__(self, x):
                return x + 3

        adder = Adder()
        part = functools.partial(max, 10, 0)  # (a partial of a target itself would hold the unwrapped function)

        class Pool:
            def warm(self, n):
                return n

            @classmethod
            def build(cls):
                return cls.__name__

            @staticmethod
            def plain(x):
                return -x
    """,
}
PKG_TARGETS = "pkg:f,pkg.impl:public,pkg:adder,pkg:part,pkg.impl:Pool.warm,pkg.impl:Pool.build,pkg.impl:Pool.plain"


def test_copy_and_deepcopy_return_the_wrapper(tmp_path: Path) -> None:
    """copy/deepcopy of wrapped functions, methods, partials, callable objects (and dicts of them) as untraced.

    A function copies as itself (the wrapper: a call through the copy is recorded); a partial or
    callable object as a copy of itself.
    """
    write(tmp_path, PKG)
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import copy, pkg
        objs = [pkg.f, pkg.public, pkg.adder, pkg.part, pkg.Pool.warm, pkg.Pool.build, pkg.Pool.plain]
        for obj in objs:
            print(copy.copy(obj) is obj, copy.deepcopy(obj) is obj, copy.deepcopy({"k": obj})["k"] is obj)
        print(repr(pkg.f), repr(pkg.adder), repr(pkg.part))
        print(copy.copy(pkg.f)(1), copy.deepcopy(pkg.Pool.warm)(pkg.Pool(), 4))
    """)], targets=PKG_TARGETS, expect_calls=("pkg:f", "pkg.impl:Pool.warm"))


def test_pickling_reduces_as_untraced(tmp_path: Path) -> None:
    """Re-exports, aliases, partials, callable objects and methods pickle to the very bytes they do untraced."""
    write(tmp_path, PKG)
    recs = three_ways(tmp_path, ["-c", textwrap.dedent("""
        import functools, hashlib, pickle, pkg, pkg.impl
        objs = [pkg.f, pkg.impl.f, pkg.public, pkg.impl._impl, pkg.adder, pkg.part, pkg.Pool.warm,
                pkg.Pool().warm, pkg.Pool.build, pkg.Pool.plain]
        for obj in objs:
            data = pickle.dumps(obj)
            print(hashlib.sha1(data).hexdigest()[:12], pickle.loads(data) is obj)
        print(pkg.f is pkg.impl.f, pkg.public is pkg.impl._impl, isinstance(pkg.part, functools.partial))
        print(pkg.f(1), pkg.public(2), pkg.adder(3), pkg.part())
        print(pkg.Pool().warm(4), pkg.Pool.build(), pkg.Pool.plain(5))
    """)], targets=PKG_TARGETS)
    assert {t.rpartition(":")[2] for t in calls(recs)} >= {"f", "public", "adder", "part", "Pool.warm",
                                                            "Pool.build", "Pool.plain"}


def test_spawn_mode_multiprocessing_with_traced_callables(tmp_path: Path) -> None:
    """A spawn pool whose initializer and tasks are traced targets works as untraced."""
    write(tmp_path, {**PKG, "main.py": """
        import multiprocessing as mp
        import pkg

        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(1, initializer=pkg.part) as pool:
                print(pool.map(pkg.f, [1, 2]), pool.map(pkg.adder, [1]), pool.map(pkg.public, [4]))
    """})
    # A callable object and a partial pickle by value (as untraced): the workers call untraced copies.
    three_ways(tmp_path, ["main.py"], targets=PKG_TARGETS, timeout=120, expect_calls=("pkg:f", "pkg.impl:public"))


# -- tracebacks ---------------------------------------------------------------------

def test_traceback_through_a_target_has_no_tracer_frame(tmp_path: Path) -> None:
    """An uncaught exception through a traced function prints the untraced traceback (3.11+)."""
    write(tmp_path, {"failing.py": """
        def fail(x):
            raise ValueError(f"boom {x}")

        class Pool:
            def fail(self):
                return fail(2)
    """})
    three_ways(tmp_path, ["-c", "import failing\nfailing.Pool().fail()"], targets="failing:fail,failing:Pool.fail",
               allow_wrapper_frame=True)


def test_import_error_in_target_module_has_no_hook_frames(tmp_path: Path) -> None:
    """A target module failing at import shows the untraced traceback: importlib's and our frames stripped."""
    write(tmp_path, {"broken.py": """
        def target():
            return 1

        class Later:
            def method(self):
                return 2

        raise RuntimeError("broken at import")
    """, "classfail.py": """
        class Pool:
            def method(self):
                return 1
            raise KeyError("in class body")
    """})
    # Nothing is called: the imports fail (the traced runs still trace: each writes its process_start).
    three_ways(tmp_path, ["-c", "import broken"], targets="broken:target,broken:Later.method", expect_calls=False)
    (tmp_path / "badsyntax.py").write_text("def target(:\n    pass\n")
    three_ways(tmp_path, ["-c", "import badsyntax"], targets="badsyntax:target", expect_calls=False)
    three_ways(tmp_path, ["-c", "import classfail"], targets="classfail:Pool.method", allow_wrapper_frame=True,
               expect_calls=False)


def test_failing_atexit_callback_reads_as_the_function(tmp_path: Path) -> None:
    """A traced atexit callback that fails is reported under its own repr, with the same traceback."""
    write(tmp_path, {"exiting.py": """
        import atexit

        def shutdown():
            raise RuntimeError("at exit")

        atexit.register(shutdown)
    """})
    recs = three_ways(tmp_path, ["-c", "import exiting"], targets="exiting:shutdown", allow_wrapper_frame=True)
    assert calls(recs) == ["exiting:shutdown"]  # handed the wrapper while the module body ran


# -- module bodies ------------------------------------------------------------------

def test_target_module_runs_with_its_own_dict(tmp_path: Path) -> None:
    """locals() is globals() at a target module's top level, locals().copy() works; top-level calls traced."""
    write(tmp_path, {"cfg.py": """
        import os

        class AsyncCompile:
            @classmethod
            def warm_pool(cls):
                return "warm"

        def after_fork():
            pass

        os.register_at_fork(after_in_child=after_fork)
        SAME = locals() is globals()
        DEFAULTS = locals().copy()
        WARMED = AsyncCompile.warm_pool()
    """})
    recs = three_ways(tmp_path, ["-c", textwrap.dedent("""
        import os, cfg
        print(cfg.SAME, "AsyncCompile" in cfg.DEFAULTS, cfg.WARMED)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        print(os.waitpid(pid, 0)[1])
    """)], targets="cfg:AsyncCompile.warm_pool,cfg:after_fork", guard=False)
    assert calls(recs)[0] == "cfg:AsyncCompile.warm_pool"  # the module's own top-level call
    assert "cfg:after_fork" in calls(recs)  # register_at_fork was handed the wrapper


# -- descriptors --------------------------------------------------------------------

def test_property_and_cached_property_traced_as_calls(tmp_path: Path) -> None:
    """Getter, setter and deleter of a property and a cached_property's function are traced; values unchanged."""
    write(tmp_path, {"props.py": """
        import functools

        class Box:
            def __init__(self):
                self._v = 1

            @property
            def value(self):
                return self._v

            @value.setter
            def value(self, v):
                self._v = v

            @value.deleter
            def value(self):
                self._v = None

            @functools.cached_property
            def once(self):
                print("computing")
                return 42
    """})
    recs = three_ways(tmp_path, ["-c", textwrap.dedent("""
        import props
        b = props.Box()
        print(b.value); b.value = 5; print(b.value); del b.value; print(b.value)
        print(b.once, b.once, type(props.Box.__dict__["value"]).__name__)
    """)], targets="props:Box.value,props:Box.once")
    assert calls(recs).count("props:Box.value") == 3
    assert {"props:Box.value.setter", "props:Box.value.deleter"} <= set(calls(recs))
    assert calls(recs).count("props:Box.once") == 1


def test_other_descriptor_refused_with_one_warning(tmp_path: Path, log: Path) -> None:
    """A data descriptor the tracer cannot trace is left alone, with one warning; values unchanged."""
    write(tmp_path, {"desc.py": """
        class Const:
            def __get__(self, obj, owner=None):
                return 7
            def __set__(self, obj, value):
                pass

        class Box:
            seven = Const()
    """})
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0",
                    WP_AUTOTRACE_TARGETS="desc:Box.seven")
    res = run_python(["-c", "import desc; print(desc.Box().seven, type(desc.Box.__dict__['seven']).__name__)"],
                     env, cwd=tmp_path)
    assert (res.returncode, res.stdout) == (0, "7 Const\n")
    assert res.stderr == "wp-autotrace: target desc:Box.seven is a Const, not a function: not traced\n"


# -- threads ------------------------------------------------------------------------

def test_no_dummy_threads_from_start_new_thread(tmp_path: Path) -> None:
    """Targets called in _thread.start_new_thread threads leave no _DummyThread behind."""
    write(tmp_path, {"work.py": "def job(done):\n    done.release()\n"})
    three_ways(tmp_path, ["-c", textwrap.dedent("""
        import _thread, threading, time, work
        for _ in range(3):
            lock = _thread.allocate_lock(); lock.acquire()
            _thread.start_new_thread(work.job, (lock,))
            lock.acquire()
        for _ in range(500):  # until the three threads have ended (bounded, 5 s), not a guess at how long
            if not _thread._count():
                break
            time.sleep(0.01)
        print([type(t).__name__ for t in threading.enumerate()].count("_DummyThread"))
    """)], targets="work:job")


# -- child roles --------------------------------------------------------------------

FAKE_TORCH = {
    "torch/__init__.py": "",
    "torch/_inductor/__init__.py": "",
    "torch/_inductor/async_compile.py": """
        class AsyncCompile:
            @classmethod
            def warm_pool(cls):
                print("warm_pool ran", flush=True)
    """,
    "torch/_inductor/autotune_process.py": """
        import subprocess, sys, threading

        STARTED = threading.Event()
        RELEASE = threading.Event()

        class TuningProcess:
            def initialize(self):
                code = "import os; print('pool child', os.environ.get('WP_AUTOTRACE_CHILD_ROLE'), flush=True)"
                subprocess.run([sys.executable, "-c", code], check=True)
                STARTED.set()
                RELEASE.wait(30)   # the call is still running while another thread starts a child
    """,
    "leak.py": """
        import subprocess, sys, threading
        from torch._inductor import autotune_process as ap

        t = threading.Thread(target=ap.TuningProcess().initialize)
        t.start()
        ap.STARTED.wait(30)
        code = ("import os; print('other child', os.environ.get('WP_AUTOTRACE_CHILD_ROLE'), flush=True); "
                "from torch._inductor.async_compile import AsyncCompile; AsyncCompile.warm_pool()")
        subprocess.run([sys.executable, "-c", code], check=True)
        ap.RELEASE.set()
        t.join()
        print("done")
    """,
}


def test_child_role_reaches_only_the_pool_child(tmp_path: Path) -> None:
    """An interpreter another thread starts during TuningProcess.initialize keeps its role and is never guarded."""
    write(tmp_path, FAKE_TORCH)
    recs = three_ways(tmp_path, ["leak.py"], targets="", timeout=90)
    starts = {r["pid"]: r for r in events(recs, "process_start")}
    roles = sorted(r["role"] for r in starts.values())
    assert roles == ["autotune-worker", "child", "main"], roles
    assert not events(recs, "blocked")


# -- imports ------------------------------------------------------------------------

def test_tracer_imports_cannot_be_shadowed_from_cwd(tmp_path: Path) -> None:
    """wrapt.py / psutil.py / threading.py in the cwd never run for a program that does not import them."""
    shadow = "import sys; sys.stdout.write('SHADOWED {}\\n'.format(__name__))\n"
    write(tmp_path, {"wrapt.py": shadow, "psutil.py": shadow, "threading.py": shadow, "json.py": shadow,
                     "target_mod.py": "def f():\n    return 1\n"})
    three_ways(tmp_path, ["-c", "import target_mod; print(target_mod.f())"], targets="target_mod:f")


def test_a_module_the_roots_start_loads_is_still_the_programs_own(tmp_path: Path) -> None:
    """A traced root's start loads its watcher's modules (resource, __future__); a resource.py in the script's
    folder is still the one the program's `import resource` runs, as untraced (the watcher on, as users run)."""
    write(tmp_path, {"resource.py": "print('mine')\n", "main.py": "import resource\nprint(resource.__name__)\n"})
    log = tmp_path / "traced.jsonl"
    base = run_python(["main.py"], clean_env(), cwd=tmp_path, timeout=60)
    traced = run_python(["main.py"], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), cwd=tmp_path, timeout=60)
    assert base.stdout == "mine\nresource\n", base
    assert (traced.returncode, traced.stdout, traced.stderr) == (base.returncode, base.stdout, base.stderr), traced
    wait_for_watcher(log, timeout=60)  # the run had its watcher: the modules its start loads were loaded


def test_a_traced_roots_program_finds_no_module_of_the_start_but_atexit(tmp_path: Path) -> None:
    """The standard modules a traced root's start loads for itself are out of sys.modules by the program's first
    line, as untraced, but atexit (its one callback: docs/guarantees.md)."""
    show = "import sys; print(sorted(m for m in sys.modules if not m.startswith('wp_autotrace')))"
    log = tmp_path / "traced.jsonl"
    base = run_python(["-c", show], clean_env(), cwd=tmp_path, timeout=60)
    traced = run_python(["-c", show], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), cwd=tmp_path,
                        timeout=60)
    assert base.returncode == traced.returncode == 0, (base, traced)
    extra = set(eval(traced.stdout)) - set(eval(base.stdout))  # noqa: S307 (a list of names the test printed)
    assert extra <= {"atexit"}, extra
    wait_for_watcher(log, timeout=60)


# -- the pytest plugin ---------------------------------------------------------------

PYTEST_DRIVER = """
import contextlib, io, re, sys
import pytest

out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = pytest.main(["-q", "-p", "no:cacheprovider", "test_x.py"])
print(re.sub(r"in [0-9.]+s", "in Xs", out.getvalue()))  # pytest's timing differs between any two runs
sys.exit(code)
"""


OFF_SESSION = """
import contextlib, io, sys
import pytest

out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = pytest.main(["-p", "no:cacheprovider", "test_x.py"])
print([m for m in sys.modules if m.startswith("wp_autotrace")], "plugins:" in out.getvalue(),
      "wp-autotrace" in out.getvalue(), int(code))  # an IntEnum prints as ExitCode.OK before 3.11
"""


def test_an_untraced_pytest_session_has_no_trace_of_the_package(tmp_path: Path) -> None:
    """Off means absent: with tracing off pytest neither imports the package nor lists it in its header (no
    entry point: a traced session registers the plugin through the tracer's import hook)."""
    write(tmp_path, {"test_x.py": "def test_a():\n    assert 1\n", "driver.py": OFF_SESSION})
    res = run_python(["driver.py"], clean_env(), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[-2] in ("[] True False 0", "[] False False 0"), res.stdout


def test_a_pytest_session_reads_the_same_with_the_plugin(tmp_path: Path) -> None:
    """The tracer registers wp_autotrace.pytest_plugin when pytest loads: traced, it records each test's start and end,
    and pytest says exactly what it says untraced (no warning that the package the .pth imported could not
    have its asserts rewritten); a failing test's report too."""
    write(tmp_path, {"test_x.py": """
        def test_a():
            assert 1 + 1 == 2

        def test_b():
            assert [1, 2] == [1, 3]
        """, "driver.py": PYTEST_DRIVER})
    records = three_ways(tmp_path, ["driver.py"], targets="", expect_calls=False)
    assert [(r["nodeid"], r["phase"]) for r in events(records, "test")] == [
        ("test_x.py::test_a", "start"), ("test_x.py::test_a", "end"),
        ("test_x.py::test_b", "start"), ("test_x.py::test_b", "end")]


def test_a_programs_own_process_pool_runs_as_untraced_and_writes_no_job_records(tmp_path: Path) -> None:
    """concurrent.futures' worker loop (traced by default) runs as untraced under fork and spawn: results, a job's
    exception with its remote traceback printed uncaught, and a worker that stops after each job
    (max_tasks_per_child) all read the same; the program's own pools (no torch compile initializer) write no job
    records (millions of a program's jobs are not the tracer's business), and the main never loaded the job
    recorder. torch's pools' job records: test_held_jobs and test_pool_kinds."""
    write(tmp_path, {"jobsmod.py": """
        def square(x):
            return x * x

        def fail(x):
            raise ValueError(f"boom {x}")
    """, "main.py": """
        import sys
        from concurrent.futures import ProcessPoolExecutor
        import multiprocessing as mp
        import jobsmod

        if __name__ == "__main__":
            for method in ("fork", "spawn"):
                extra = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) and method == "spawn" else {}
                with ProcessPoolExecutor(2, mp_context=mp.get_context(method), **extra) as pool:
                    print(method, list(pool.map(jobsmod.square, range(4))), flush=True)
            # the process that only made the pools never loads the job recorder (False untraced too)
            print("recorder of jobs loaded:", "wp_autotrace.runtime.jobs" in sys.modules, flush=True)
            with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
                pool.submit(jobsmod.fail, 3).result()
    """})
    recs = three_ways(tmp_path, ["main.py"], targets="", timeout=120, expect_calls=False)
    assert [r for r in recs if r["event"] == "job"] == []
