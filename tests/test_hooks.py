"""Fast, in-process tests of the import hook against synthetic modules (no torch)."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.common.targets import INLINE_POOL, SKIP, Target
from wp_autotrace.runtime.finder import TargetFinder
from wp_autotrace.runtime.recorder import Probes, is_wrapper
from wp_autotrace.runtime.sink import Sink

from .conftest import read_log

POOL_MODULE = '''
import atexit
import functools

REGISTERED = []          # what atexit.register was handed (it returns its argument)
EARLY_CALLS = []

class AsyncCompile:
    @staticmethod
    @functools.lru_cache(1)
    def process_pool():
        return object()

    @classmethod
    def warm_pool(cls, n: int = 2) -> str:
        """Doc of warm_pool."""
        EARLY_CALLS.append(cls.__name__)
        cls.process_pool()
        return f"warmed {n}"

    @classmethod
    def fail(cls, message="boom from fail"):
        raise ValueError(message)

def after_fork():
    AsyncCompile.process_pool.cache_clear()

REGISTERED.append(atexit.register(after_fork))
atexit.unregister(after_fork)
AsyncCompile.warm_pool()   # a call from the module's own top level, as torch 2.1-2.4 had
'''


# torch 2.2-2.3's codecache: the compile initializer is a top-level function defined above AsyncCompile, and the
# body's own warm_pool() hands it to the fork pool it makes before the import ends.
INIT_MODULE = '''
import functools
import os

class Before:            # a class built before the initializer exists: nothing to wrap yet
    pass

def _async_compile_initializer(orig_ppid):
    return ("initialized", orig_ppid)

class AsyncCompile:
    @classmethod
    def warm_pool(cls):
        return functools.partial(_async_compile_initializer, os.getpid())

HANDED = AsyncCompile.warm_pool()   # what the pool's workers will run first
'''


@pytest.fixture
def synth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh package 'synthpkg' on sys.path, and cleanup of what it imported."""
    pkg = tmp_path / "synthpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "pool.py").write_text(POOL_MODULE)
    (pkg / "cc23.py").write_text(INIT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m.startswith("synthpkg")]:
        del sys.modules[name]


TARGETS = (
    Target("synthpkg.pool", "AsyncCompile.warm_pool", guard=SKIP),
    Target("synthpkg.pool", "AsyncCompile.process_pool", guard=INLINE_POOL),
    Target("synthpkg.pool", "AsyncCompile.fail"),
    Target("synthpkg.pool", "after_fork"),
    Target("synthpkg.cc23", "AsyncCompile.warm_pool"),
    Target("synthpkg.cc23", "_async_compile_initializer", role="compile-worker"),
    Target("synthpkg.absent", "Nothing.here"),
    Target("synthpkg.pool", "Missing.method"),
)


def make_finder(log: Path, guard: bool = False, role: str = "main") -> tuple[TargetFinder, Probes]:
    sink = Sink(str(log), "testhost", role)
    probes = Probes(sink, stack_limit=8, guard=guard, notice=lambda info: None)
    errors: list[Any] = []
    finder = TargetFinder(TARGETS, probes.make_wrapper, probes.notify, lambda where, exc: errors.append(exc))
    finder.errors = errors  # type: ignore[attr-defined]
    return finder, probes


def import_traced(log: Path, guard: bool = False, role: str = "main", module: str = "synthpkg.pool") -> Any:
    """Import a synthetic module with the finder installed, then remove the finder."""
    finder, _ = make_finder(log, guard=guard, role=role)
    finder.install()
    try:
        return importlib.import_module(module)
    finally:
        finder.uninstall()
        assert not finder.errors  # type: ignore[attr-defined]


def calls(records: list[dict[str, Any]]) -> list[str]:
    return [r["target"].rpartition(":")[2] for r in records if r["event"] == "call"]


def test_top_level_call_during_module_body_is_traced(synth: Path, log: Path) -> None:
    """A module's own top-level call of a target (torch 2.1-2.4's bare warm_pool()) is traced."""
    mod = import_traced(log)
    assert mod.EARLY_CALLS == ["AsyncCompile"]
    recs = read_log(log)
    assert calls(recs)[:2] == ["AsyncCompile.warm_pool", "AsyncCompile.process_pool"]
    warm = next(r for r in recs if r["event"] == "call")
    assert warm["stack"][-1]["file"].endswith("synthpkg/pool.py")
    assert warm["caller"]["line"] == POOL_MODULE.splitlines().index(
        "AsyncCompile.warm_pool()   # a call from the module's own top level, as torch 2.1-2.4 had") + 1
    # The inner process_pool call knows it runs inside warm_pool.
    inner = [r for r in recs if r["event"] == "call"][1]
    assert inner["parent_call"] == warm["call_id"]


def test_function_captured_at_definition_is_the_wrapper(synth: Path, log: Path) -> None:
    """A function captured at definition (register_at_fork, atexit) is the wrapper."""
    mod = import_traced(log)
    # atexit.register(after_fork) during the body was handed the wrapper.
    mod.REGISTERED[0]()
    assert "after_fork" in calls(read_log(log))


def test_a_function_the_body_hands_on_after_a_class_is_the_wrapper(synth: Path, log: Path) -> None:
    """A top-level target function defined above a class, handed on by the body's own later call (torch 2.2-2.3's
    import-time warm_pool gives its fork pool the compile initializer before the import ends), is the wrapper: the
    pool's workers run it traced, and so say they are compile workers."""
    mod = import_traced(log, module="synthpkg.cc23")
    assert is_wrapper(mod.HANDED.func) and mod._async_compile_initializer is mod.HANDED.func
    assert mod.HANDED()[0] == "initialized"
    assert calls(read_log(log)) == ["AsyncCompile.warm_pool", "_async_compile_initializer"]


def test_binding_signature_and_cache_attributes_are_kept(synth: Path, log: Path) -> None:
    """classmethod/staticmethod binding, signature, docstring and lru_cache attributes survive wrapping."""
    mod = import_traced(log)
    ac = mod.AsyncCompile
    assert ac.warm_pool(3) == "warmed 3"
    assert ac().warm_pool(n=4) == "warmed 4"
    assert str(inspect.signature(ac.warm_pool)) == "(n: int = 2) -> str"
    assert ac.warm_pool.__doc__ == "Doc of warm_pool."
    raw = inspect.getattr_static(ac, "process_pool")
    # Still a staticmethod, now holding the tracer's wrapper, and binding like it (no self passed).
    assert isinstance(raw, staticmethod) and is_wrapper(raw.__func__)
    assert ac().process_pool() is ac.process_pool()
    first = ac.process_pool()
    assert ac.process_pool() is first
    ac.process_pool.cache_clear()  # torch's after_fork does this
    assert ac.process_pool.cache_info().currsize == 0
    assert ac.process_pool() is not first


def test_exceptions_pass_through_unchanged(synth: Path, log: Path) -> None:
    """A wrapped function's exception passes through unchanged; the return record carries it."""
    mod = import_traced(log)
    with pytest.raises(ValueError, match="boom from fail") as info:
        mod.AsyncCompile.fail()
    assert info.traceback[-1].name == "fail"  # the origin is the wrapped function
    ret = [r for r in read_log(log) if r["event"] == "return" and "error" in r]
    assert ret and ret[-1]["error"] == "ValueError: boom from fail"


def test_a_long_error_keeps_its_head_and_its_own_last_line(synth: Path, log: Path) -> None:
    """A pool job's error arrives as a long traceback whose last line is the job's own exception: the return
    record keeps the head (the kind of failure, the kernel's name) and that tail, within a bounded size."""
    from wp_autotrace.runtime.reads import ERROR_CUT, ERROR_HEAD, ERROR_TAIL

    mod = import_traced(log)
    frames = "".join(f'  File "/site-packages/pkg/mod{i}.py", line {i}, in f{i}\n    g{i}()\n' for i in range(40))
    message = ("An exception occurred in a subprocess:\n\nName=triton_poi_fused_0\nTraceback (most recent call "
               f"last):\n{frames}RuntimeError: can't start new thread\n")
    with pytest.raises(ValueError):
        mod.AsyncCompile.fail(message)
    error = [r for r in read_log(log) if r["event"] == "return" and "error" in r][-1]["error"]
    assert len(error) <= ERROR_HEAD + ERROR_TAIL + len(ERROR_CUT) < len(message)
    assert error.startswith("ValueError: An exception occurred in a subprocess:\n\nName=triton_poi_fused_0")
    assert error.rstrip().splitlines()[-1] == "RuntimeError: can't start new thread"
    assert ERROR_CUT in error


def test_subclass_override_is_wrapped_wherever_defined(synth: Path, log: Path) -> None:
    """A subclass override (XPUAsyncCompile.warm_pool) in another module is wrapped at creation."""
    (synth / "plugin.py").write_text(textwrap.dedent('''
        from synthpkg.pool import AsyncCompile

        class XPUAsyncCompile(AsyncCompile):
            @classmethod
            def warm_pool(cls, n=1):
                return "xpu " + super().warm_pool(n)

        RESULT = XPUAsyncCompile.warm_pool()
    '''))
    plugin = import_traced(log, module="synthpkg.plugin")
    assert plugin.RESULT == "xpu warmed 1"
    names = calls(read_log(log))
    assert "XPUAsyncCompile.warm_pool" in names
    sub_call = [r for r in read_log(log) if r["event"] == "call" and r["target"].endswith("XPUAsyncCompile.warm_pool")]
    assert sub_call[0]["target"] == "synthpkg.plugin:XPUAsyncCompile.warm_pool"


def test_module_imported_before_activation_is_patched_at_once(synth: Path, log: Path) -> None:
    """A target module imported before activation is patched at install."""
    mod = importlib.import_module("synthpkg.pool")
    finder, _ = make_finder(log)
    finder.install()
    finder.uninstall()
    mod.AsyncCompile.warm_pool()
    assert calls(read_log(log))[:1] == ["AsyncCompile.warm_pool"]


def test_finder_declines_other_modules(log: Path) -> None:
    """The finder declines non-target and missing modules, importing and recording nothing."""
    finder, _ = make_finder(log)
    before = set(sys.modules)
    assert finder.find_spec("json") is None
    assert finder.find_spec("synthpkg.absent") is None  # a target module that does not exist
    assert set(sys.modules) - before == set()
    assert not log.exists() or read_log(log) == []


def test_guard_refuses_in_sidecar_but_not_in_main(synth: Path, tmp_path: Path) -> None:
    """Guard in a sidecar: warm_pool refused, process_pool gives a working in-process executor."""
    side_log = tmp_path / "side.jsonl"
    mod = import_traced(side_log, guard=True, role="compile-sidecar")
    assert mod.EARLY_CALLS == []  # warm_pool refused at import
    pool = mod.AsyncCompile.process_pool()
    assert pool.submit(lambda x: x * 2, 21).result() == 42  # a working in-process executor
    recs = read_log(side_log)
    assert [r["action"] for r in recs if r["event"] == "blocked"] == ["skip", "inline-pool"]
    assert not [r for r in recs if r["event"] == "call" and r["target"].endswith("warm_pool")]


def test_user_monkeypatch_of_warm_pool_still_traced(synth: Path, log: Path) -> None:
    """User code that monkeypatches warm_pool itself (the seed's approach) keeps working, still traced."""
    mod = import_traced(log)
    ac = mod.AsyncCompile
    original = ac.warm_pool
    seen = []

    def traced(cls: Any) -> Any:  # what the seed script does
        seen.append(cls)
        return original()

    ac.warm_pool = classmethod(traced)
    ac.warm_pool()
    assert seen == [ac]
    assert calls(read_log(log)).count("AsyncCompile.warm_pool") == 2  # at import, then via the user's patch


def test_lru_cache_function_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """A module-level lru_cache function target keeps cache_clear/cache_info."""
    (tmp_path / "synthcache.py").write_text("import functools\n@functools.lru_cache(None)\ndef pool():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sink = Sink(str(log), "h", "main")
    probes = Probes(sink, 4, False, lambda info: None)
    finder = TargetFinder((Target("synthcache", "pool"),), probes.make_wrapper, probes.notify, pytest.fail)
    finder.install()
    try:
        mod = importlib.import_module("synthcache")
    finally:
        finder.uninstall()
        sys.modules.pop("synthcache", None)
    assert mod.pool() == 1
    mod.pool.cache_clear()
    assert isinstance(mod.pool.cache_info(), functools._CacheInfo)
    traced = [r for r in read_log(log) if r["event"] == "call"]
    assert [r["target"] for r in traced] == ["synthcache:pool"]  # the call really went through the wrapper


def test_wrapped_targets_pickle_by_reference(synth: Path, log: Path) -> None:
    """Spawn-mode pools pickle their initializer; a wrapper must pickle like the function."""
    import pickle

    mod = import_traced(log)
    for obj in (mod.after_fork, mod.AsyncCompile.warm_pool, mod.AsyncCompile.process_pool,
                functools.partial(mod.after_fork)):
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj or (isinstance(obj, functools.partial) and back.func is obj.func)


def test_body_hooks_leave_other_threads_alone_and_are_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              log: Path) -> None:
    """While a target body runs, another thread's classes and atexit callbacks are untouched; hooks removed after."""
    import atexit
    import builtins
    import threading
    import types

    sync = types.ModuleType("synth_sync")
    sync.inside, sync.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "synth_sync", sync)
    (tmp_path / "slowpool.py").write_text(textwrap.dedent('''
        import synth_sync

        class AsyncCompile:
            def warm_pool(self):
                return 1

        synth_sync.inside.set()
        synth_sync.release.wait(10)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    real = (builtins.__build_class__, atexit.register)
    sink = Sink(str(log), "h", "main")
    probes = Probes(sink, 4, False, lambda info: None)
    finder = TargetFinder((Target("slowpool", "AsyncCompile.warm_pool"), Target("slowpool", "warm")),
                          probes.make_wrapper, probes.notify, pytest.fail)
    finder.install()
    importer = threading.Thread(target=importlib.import_module, args=("slowpool",))
    try:
        importer.start()
        assert sync.inside.wait(10)  # type: ignore[attr-defined]
        assert builtins.__build_class__ is not real[0]  # the window is open

        class AsyncCompile:  # same name, another module: not a target
            def warm_pool(self) -> int:
                return 2

        def warm() -> None:
            pass

        assert atexit.register(warm) is warm
        atexit.unregister(warm)
        assert not is_wrapper(AsyncCompile.__dict__["warm_pool"])  # a class of this module: not wrapped
        assert AsyncCompile.__dict__["warm_pool"].__code__.co_filename == __file__
    finally:
        sync.release.set()  # type: ignore[attr-defined]
        importer.join(10)
        finder.uninstall()
        mod = sys.modules.pop("slowpool", None)
    assert (builtins.__build_class__, atexit.register) == real
    assert mod is not None and mod.AsyncCompile().warm_pool() == 1
    assert calls(read_log(log)) == ["AsyncCompile.warm_pool"]


def test_cached_stacks_follow_lines_depth_and_caller(synth: Path, log: Path) -> None:
    """The stack and caller kept encoded per call site (Stacks.stack) are those of each call:
    another line, a deeper stack past the frame limit, or a cleared code cache give their own."""
    finder, probes = make_finder(log)
    probes.stacks.stack_limit = 3
    finder.install()
    try:
        mod = importlib.import_module("synthpkg.pool")
    finally:
        finder.uninstall()

    def deep(n: int) -> None:
        if n:
            return deep(n - 1)
        mod.AsyncCompile.warm_pool(1)

    def site() -> None:
        for _ in range(2):
            mod.AsyncCompile.warm_pool(1); mod.AsyncCompile.warm_pool(2)  # noqa: E702  (one line, two calls)
            mod.AsyncCompile.warm_pool(3)
        deep(0)
        deep(5)
        probes.stacks.forget_codes()
        mod.AsyncCompile.warm_pool(4)

    site()
    recs = [r for r in read_log(log) if r["event"] == "call" and r["target"].endswith("warm_pool")][1:]
    lines = [r["caller"]["line"] for r in recs]
    first = lines[0]
    in_deep = first - 4  # deep's own warm_pool line
    assert lines == [first, first, first + 1, first, first, first + 1, in_deep, in_deep, first + 5]
    assert [r["caller"]["func"] for r in recs] == ["site"] * 6 + ["deep", "deep", "site"]
    assert all(len(r["stack"]) == 3 for r in recs)
    assert [f["func"] for f in recs[7]["stack"]] == ["deep", "deep", "deep"]  # the innermost three of six
    assert recs[7]["stack"][-1]["line"] != recs[7]["stack"][0]["line"]


def test_a_caller_past_the_kept_frames_keys_its_own_stack(synth: Path, log: Path) -> None:
    """Where the kept frames are all library ones (threading's Thread.run, one frame kept), the caller found
    past them is part of the cached stack's key: two lines calling through the same library frame each get
    their own caller, the first again on its second call (a key of the kept frames alone would give both
    the first caller)."""
    import threading

    finder, probes = make_finder(log)
    probes.stacks.stack_limit = 1
    finder.install()
    try:
        mod = importlib.import_module("synthpkg.pool")
    finally:
        finder.uninstall()
    warm = mod.AsyncCompile.warm_pool
    line = sys._getframe().f_lineno
    threading.Thread(target=warm, args=(1,)).run()  # run() here, in this thread: Thread.run calls warm
    threading.Thread(target=warm, args=(1,)).run()
    for _ in range(2):
        threading.Thread(target=warm, args=(1,)).run()
    recs = [r for r in read_log(log) if r["event"] == "call" and r["target"].endswith("warm_pool")][-4:]
    assert [r["caller"]["line"] for r in recs] == [line + 1, line + 2, line + 4, line + 4]
    assert [[f["func"] for f in r["stack"]] for r in recs] == [["run"]] * 4


def test_call_records_are_canonical_and_an_oversized_one_is_shrunk_from_its_fields(synth: Path, log: Path) -> None:
    """The call record assembled from cached parts (Probes._enter) is byte for byte the full encode of its
    own members, nested (parent_call) or not; one over the cap is rebuilt from the same fields, in the same
    order, and shrunk like any record (issue 32 took the closure out of that path)."""
    from wp_autotrace.runtime.jsonline import encode, frame
    from wp_autotrace.runtime.sink import MAX_RECORD_BYTES

    sink = Sink(str(log), "testhost", "main")
    probes = Probes(sink, stack_limit=8, guard=False, notice=lambda info: None)
    targets = (Target("synthpkg.pool", "AsyncCompile.warm_pool", capture_call=(("payload", "self.payload"),)),
               Target("synthpkg.pool", "AsyncCompile.process_pool"))
    finder = TargetFinder(targets, probes.make_wrapper, probes.notify, lambda where, exc: None)
    finder.install()
    try:
        mod = importlib.import_module("synthpkg.pool")
    finally:
        finder.uninstall()
    mod.AsyncCompile.payload = "p" * 10
    mod.AsyncCompile.warm_pool(1)  # calls process_pool inside: a nested call record
    mod.AsyncCompile.payload = "p" * (MAX_RECORD_BYTES + 100)
    mod.AsyncCompile.warm_pool(1)
    lines = [line for line in log.read_bytes().split(b"\n") if line]
    records = [json.loads(line) for line in lines]
    for line, rec in zip(lines, records):
        # ts is written from the clock's integer nanoseconds (`<ns>e-9`), the encoder writes the float's repr
        # (as a record over the cap has it: rebuilt from its fields)
        ns = re.match(rb'\{"v":1,"event":"\w+","ts":(\d+)e-9,', line)
        if ns is not None:
            line = line.replace(b"%se-9," % ns[1], b"%s," % repr(json.loads(ns[1] + b"e-9")).encode(), 1)
        assert (ns is None) == (b"...[truncated]" in line), line[:80]
        assert frame(encode(rec)) == b"\n" + line + b"\n", rec["event"]
    small, nested, big = [r for r in records if r["event"] == "call"][-4:-1]
    assert list(small)[8:] == ["target", "tag", "call_id", "thread", "stack", "caller", "payload"]
    assert small["payload"] == "p" * 10 and small["caller"]["func"].startswith("test_call_records")
    assert nested["parent_call"] == small["call_id"] and nested["target"].endswith("process_pool")
    assert list(big)[8:] == list(small)[8:] and big["call_id"] > nested["call_id"]
    assert big["payload"].endswith("[truncated]") and len(big["payload"]) < MAX_RECORD_BYTES
    assert big["stack"] == small["stack"][:-1] + [dict(small["stack"][-1], line=big["stack"][-1]["line"])]


def test_call_env_is_the_environment_at_each_call(synth: Path, log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call record's env is the pool variables as set at that call: the JSON kept by their stored values is
    made again when one changes, unset, set back or set to a value that decodes differently."""
    from wp_autotrace.common.env import POOL_ENV

    for name in POOL_ENV:
        monkeypatch.delenv(name, raising=False)
    sink = Sink(str(log), "testhost", "main")
    probes = Probes(sink, stack_limit=8, guard=False, notice=lambda info: None)
    finder = TargetFinder((Target("synthpkg.pool", "AsyncCompile.warm_pool", env=True),), probes.make_wrapper,
                          probes.notify, lambda where, exc: None)
    finder.install()
    try:
        mod = importlib.import_module("synthpkg.pool")
    finally:
        finder.uninstall()
    settings: list[dict[str, str]] = [{}, {"TORCH_WARM_POOL": "0"}, {"TORCH_WARM_POOL": "1"}, {},
                                      {"TORCH_WARM_POOL": "1", "PYTEST_CURRENT_TEST": "t\u00e9 (call)"},
                                      {"TORCH_WARM_POOL": "1"}, {"TORCH_WARM_POOL": "0"}]
    for setting in settings:
        for name in POOL_ENV:
            monkeypatch.delenv(name, raising=False)
        for name, value in setting.items():
            monkeypatch.setenv(name, value)
        mod.AsyncCompile.warm_pool(1)
    calls = [r for r in read_log(log) if r["event"] == "call"][1:]  # after the module's own top-level call
    assert [c["env"] for c in calls] == settings


def test_a_thread_is_named_as_its_name_reads(synth: Path, log: Path) -> None:
    """The thread a call record names is the calling thread's `name` as it reads at that call: renamed between
    calls, and through the property of a Thread class that replaces it (the plain wrapper reads Thread's own
    property's _name directly only where the class keeps that property)."""
    import threading

    mod = import_traced(log)

    class Named(threading.Thread):
        @property  # type: ignore[override]
        def name(self) -> str:
            return "named by its class"

    def twice() -> None:
        mod.AsyncCompile.warm_pool(1)
        threading.current_thread().name = "renamed"
        mod.AsyncCompile.warm_pool(1)

    def two_calls() -> None:
        mod.AsyncCompile.warm_pool(1)
        mod.AsyncCompile.warm_pool(1)

    for thread in (threading.Thread(target=twice, name="first"), Named(target=two_calls)):
        thread.start()
        thread.join()
    names = [r["thread"] for r in read_log(log) if r["event"] == "call" and r["target"].endswith("warm_pool")]
    assert names[1:] == ["first", "renamed", "named by its class", "named by its class"]


def test_a_refused_lowering_of_the_recursion_limit_is_made_good() -> None:
    """A lowering of the recursion limit refused (the stack deeper than the new limit) is kept in unseen.refused
    and made good by the next move, so the moves of traced calls still add up to nothing."""
    from wp_autotrace.runtime import unseen

    limit = sys.getrecursionlimit()
    depth = len(inspect.stack())
    sys.setrecursionlimit(depth + 1000)
    try:
        def deep(n: int) -> None:
            if n:
                return deep(n - 1)
            unseen.adjust_limit(-900)  # to depth + 100, below this frame's depth: refused
            return None

        deep(200)
        assert sys.getrecursionlimit() == depth + 1000 and unseen.refused == [900]
        unseen.adjust_limit(0)  # here, above depth + 100: made good
        assert sys.getrecursionlimit() == depth + 100 and unseen.refused == []
    finally:
        unseen.refused.clear()
        sys.setrecursionlimit(limit)


def test_a_move_of_the_recursion_limit_past_a_c_int_is_kept_and_made_good() -> None:
    """At a C int's largest limit (2**31 - 1) a raise by the tracer's room is no int setrecursionlimit takes: the
    move is kept in unseen.refused (the limit below where it should be) instead of raising OverflowError into
    the host, and the lowering that follows makes it good, so the host's limit comes back as it set it."""
    from wp_autotrace.runtime import unseen

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(2**31 - 1)
    try:
        unseen.adjust_limit(unseen.HEADROOM)
        assert sys.getrecursionlimit() == 2**31 - 1 and unseen.refused == [-unseen.HEADROOM]
        unseen.adjust_limit(-unseen.HEADROOM)
        assert sys.getrecursionlimit() == 2**31 - 1 and unseen.refused == []
    finally:
        unseen.refused.clear()
        sys.setrecursionlimit(limit)


def test_a_recording_wrapper_at_the_stack_limit_raises_the_hosts_error_and_leaves_the_limit(log: Path) -> None:
    """The recorder's wrapper (a target with a role, capture or memory reading) called at every depth up to and
    past the recursion limit: whatever the host's call raised there is the host's own RecursionError (no second
    one raised by the tracer's frames over it, after the host's, or before its call), no traced call stays
    counted in flight, and a traced call made again from a shallow stack leaves the limit as the host set it.
    (Its exception path called Python functions before moving the limit back: at the limit they raised again,
    over the host's error, and left the limit moved and the call counted.)"""
    from wp_autotrace.runtime import unseen

    probes = Probes(Sink(str(log), "testhost", "main"), stack_limit=8, guard=False, notice=lambda info: None)

    def host(n: int) -> int:
        return n

    wrapped = probes.make_wrapper(Target("synthpkg.limits", "host", mem=True), "synthpkg.limits:host")(host, False)

    def at_depth(k: int) -> int:
        return at_depth(k - 1) if k else wrapped(1)

    limit = sys.getrecursionlimit()
    depth = len(inspect.stack())
    sys.setrecursionlimit(depth + 200)
    try:
        raised = 0
        for k in range(150, 205):
            try:
                assert at_depth(k) == 1
            except RecursionError as exc:
                raised += 1
                assert exc.__context__ is None and exc.__cause__ is None, (k, repr(exc.__context__))
            assert unseen.active == [], (k, unseen.active)
            assert wrapped(2) == 2  # from here, shallow: a lowering refused deep down is made good
            assert sys.getrecursionlimit() == depth + 200 and unseen.refused == [], (k, unseen.refused)
        assert raised, "no call reached the limit: the test would pass on any wrapper"
    finally:
        unseen.refused.clear()
        unseen.active.clear()
        sys.setrecursionlimit(limit)


def test_set_vars_reads_the_variables_as_os_environ_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """set_vars answers what os.environ answers for its names, in their order (set, set empty, unset, set after the
    first read, a value that is not UTF-8), and the names it encodes with str.encode are ASCII, so each is
    os.environ's own key."""
    from wp_autotrace.common import env

    names = (*env.POOL_ENV, *env.RANK_ENV)
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("TORCH_WARM_POOL", "")
    monkeypatch.setenv(env.JOB_ENV, "j\u00e9")
    monkeypatch.setitem(os.environb, b"PMI_RANK", b"\xff1")  # not UTF-8: os.environ holds it surrogate-escaped
    for _ in range(2):  # read again after a variable is set
        assert env.set_vars(names) == {k: os.environ[k] for k in names if k in os.environ}
        assert list(env.set_vars(names)) == [k for k in names if k in os.environ]
        monkeypatch.setenv("WORLD_SIZE", "8")
    assert env.rank_env() == {"RANK": "3", "WORLD_SIZE": "8", "PMI_RANK": "\udcff1", env.JOB_ENV: "j\u00e9"}
    for name in (*names, *env.READ_AT_CONFIG):
        assert name.isascii() and name.encode() == os.environ.encodekey(name)  # type: ignore[attr-defined]


def test_set_vars_reads_a_replaced_os_environ_through_its_own_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host may replace os.environ with another mapping: set_vars then reads that mapping, not the old one's dict."""
    from wp_autotrace.common import env

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr(os, "environ", {"RANK": "7", "WORLD_SIZE": ""})
    assert env.set_vars(env.RANK_ENV) == {"RANK": "7", "WORLD_SIZE": ""}


def test_env_watch_names_the_imports_around_each_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """env_watch tells a change of a variable inductor's config reads with the import begun before it and the one
    that saw it (unset -> set too); a value set again to an equal string is no change; after finish() nothing
    more is noted and finish answers the same list."""
    from wp_autotrace.common.env import READ_AT_CONFIG, env_watch

    threads, start = READ_AT_CONFIG
    monkeypatch.setenv(threads, "4")
    monkeypatch.delenv(start, raising=False)
    watch = env_watch()
    watch.check("first")
    monkeypatch.setenv(threads, "1")
    watch.check("second")
    monkeypatch.setenv(threads, "1")  # set again: a new bytes object in os.environ, the same value
    watch.check("third")
    monkeypatch.setenv(start, "fork")
    watch.check("fourth")
    changes = watch.finish()
    monkeypatch.setenv(threads, "2")
    watch.check("fifth")
    assert changes == [{"var": threads, "old": "4", "new": "1", "before": "first", "at": "second"},
                       {"var": start, "old": None, "new": "fork", "before": "third", "at": "fourth"}]
    assert watch.finish() is changes and len(changes) == 2
