"""End-to-end activation through the installed .pth, without torch.

Each test runs a real interpreter (sys.executable, where the package is
installed) with the environment set, and reads the log it wrote.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, events, read_log, run_python


def traced_env(log: Path, **extra: str) -> dict[str, str]:
    return clean_env(**{"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), **extra})


@pytest.mark.parametrize("value", [None, "0", "false", "off", ""])
def test_off_imports_nothing(value: str | None, tmp_path: Path) -> None:
    """WP_AUTOTRACE unset/0/false/off/empty: nothing of wp_autotrace is imported, no file written."""
    env = clean_env() if value is None else clean_env(WP_AUTOTRACE=value)
    res = run_python(["-c", "import sys; print(sorted(m for m in sys.modules if 'wp_autotrace' in m))"],
                     env, cwd=tmp_path)
    # From 3.15, site resolves the .start entry point (PEP 829), a top-level module, in every interpreter.
    expected = "['wp_autotrace_start']" if sys.version_info >= (3, 15) else "[]"
    assert res.stdout.strip() == expected, res.stderr
    assert res.stderr == ""
    assert not list(tmp_path.iterdir())


# The interpreter's import state a host can read: its modules and the path finder's cache of path entries.
IMPORT_STATE = "import json, sys; print(json.dumps([sorted(sys.modules), sorted(sys.path_importer_cache)]))"


@pytest.mark.parametrize("env", [{"WP_AUTOTRACE": "0"}, {"WP_AUTOTRACE_GUARD": "off"},
                                 {"WP_AUTOTRACE": " False ", "WP_AUTOTRACE_GUARD": ""}])
@pytest.mark.parametrize("cache", ["-B", "unwritable"])
def test_a_false_word_leaves_the_import_state_untraced(env: dict[str, str], cache: str, tmp_path: Path) -> None:
    """A variable set to a false word: the .pth line imports wp_autotrace._preload to read it (compiled code
    costs a traced start nothing) and takes the two modules, and the path finder's entry for the package's
    folder, out again: sys.modules and sys.path_importer_cache end as untraced, nothing on stderr, no pyc
    written under -B or where none can be (a pycache prefix below a file: even root cannot write there)."""
    prefix = tmp_path / "pyc"
    if cache == "unwritable":
        (tmp_path / "file").touch()
        prefix = tmp_path / "file" / "pyc"
    args = (["-B"] if cache == "-B" else []) + ["-c", IMPORT_STATE]
    runs = [run_python(args, clean_env(PYTHONPYCACHEPREFIX=str(prefix), **extra), cwd=tmp_path)
            for extra in ({}, env)]
    assert [r.stderr for r in runs] == ["", ""] and runs[0].returncode == runs[1].returncode == 0
    assert runs[1].stdout == runs[0].stdout
    assert not prefix.exists() or not [p for p in prefix.rglob("*") if "wp_autotrace" in str(p)]


def test_a_false_word_keeps_the_package_where_one_of_its_modules_is_loaded(tmp_path: Path) -> None:
    """_preload.start() called with a false word after another module of the package was imported (3.15's start
    file, or a host calling it): only the second name goes; the package stays, as its loaded module needs it."""
    code = ("import sys, wp_autotrace.common.core, wp_autotrace._preload as p; p.start(); "
            "print(sorted(m for m in sys.modules if m.startswith('wp_autotrace')))")
    res = run_python(["-c", code], clean_env(WP_AUTOTRACE="0"), cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.split() == ["['wp_autotrace',", "'wp_autotrace.common',", "'wp_autotrace.common.core']"]


# site run by hand under an audit hook: the files of the package (or their pycs) opened while it runs the .pth.
FILES_OPENED = textwrap.dedent("""
    import importlib.util, json, os, sys
    opened = []
    def hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            opened.append(os.fsdecode(args[0]))
    sys.addaudithook(hook)
    import site
    site.main()
    folder = importlib.util.find_spec("wp_autotrace").submodule_search_locations[0]
    pycs = os.path.dirname(importlib.util.cache_from_source(os.path.join(folder, "__init__.py")))
    print(json.dumps(sorted({os.path.basename(p) for p in opened if os.path.dirname(p) in (folder, pycs)})))
""")


@pytest.mark.skipif(sys.version_info >= (3, 15), reason="no .pth line runs there")
def test_a_start_opens_one_file_of_the_package_before_its_pack(tmp_path: Path) -> None:
    """A traced start reads the package's own pyc and the start modules' pack, nothing else of the package
    (the line's `wp_autotrace._preload` is the package under a second name: a file costs ~0.3M instructions);
    a false word reads only the package's pyc. Seen by the interpreter's audit hook (its "open" events),
    second runs (the first writes the pycs and the pack into their own prefix)."""
    log = tmp_path / "log.jsonl"
    log.touch(mode=0o600)  # a descendant opens the log its root made
    prefix = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    tag = sys.implementation.cache_tag
    for env, want in ((traced_env(log, WP_AUTOTRACE_RUN="r", WP_AUTOTRACE_ROOT_PID="1", **prefix),
                       [f"__init__.{tag}.pyc", f"_startpack.{tag}.pyc"]),
                      (clean_env(WP_AUTOTRACE="0", **prefix), [f"__init__.{tag}.pyc"])):
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        runs = [run_python(["-S", "-c", FILES_OPENED], env, cwd=tmp_path) for _ in range(2)]
        assert [r.stderr for r in runs] == ["", ""]
        assert json.loads(runs[1].stdout) == want


# What the enabled start-up of a descendant that never loads a target adds to an untraced interpreter's
# modules (issue 32: each module costs every traced process about 0.1 ms; docs/scale.md, "Traced call
# and start-up"). A module added to this path must be added here, with its cost measured.
# Their own modules import no __future__ (annotations are quoted instead): that import alone cost a start-up
# more than a module of ours does.
# The target table, the full finder and json's C encoder load at a target module's first import only.
START_MODULES = {
    "atexit",
    "wp_autotrace", "wp_autotrace._preload",
    "wp_autotrace.runtime", "wp_autotrace.runtime.bootstrap", "wp_autotrace.runtime.sink",
    "wp_autotrace.runtime.host_patches",
    "wp_autotrace.common", "wp_autotrace.common.env", "wp_autotrace.common.core", "wp_autotrace.common.redact",
}


def test_a_traced_start_loads_only_the_start_modules(tmp_path: Path) -> None:
    """Enabled, not the root, no target imported: the modules loaded are the untraced ones plus exactly
    START_MODULES (not the recorder, the /proc readers, __future__, itertools or errno), and its process_start
    lands."""
    log = tmp_path / "log.jsonl"
    log.touch(mode=0o600)  # a descendant opens the log its root made
    code = "import sys; print(' '.join(sorted(sys.modules)))"
    off = run_python(["-c", code], clean_env(), cwd=tmp_path)
    on = run_python(["-c", code], traced_env(log, WP_AUTOTRACE_RUN="r", WP_AUTOTRACE_ROOT_PID="1"), cwd=tmp_path)
    assert off.stderr == on.stderr == "", on.stderr
    added = set(on.stdout.split()) - set(off.stdout.split())
    want = set(START_MODULES)  # 3.9 too: its command line (no sys.orig_argv) is read from /proc by env.py
    # from 3.15 the .start entry point's module (wp_autotrace_start) is loaded untraced too: not added
    assert added == want
    assert [r["event"] for r in read_log(log)] == ["process_start", "process_exit"]


@pytest.mark.parametrize("loaded", [None, "concurrent.futures.process", "torch._dynamo"])
def test_the_full_finder_is_made_at_start_only_where_a_target_module_is_loaded(
        loaded: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """install_finder: a target module already in sys.modules (a .pth before ours imported it) gets the full
    finder at once; none loaded, the front finder goes first on sys.meta_path."""
    import types

    from wp_autotrace.runtime import bootstrap, first_target

    made: list[object] = []
    monkeypatch.setattr(first_target, "finder", lambda rt, _pytest_config: made.append(rt))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    for name in bootstrap.TARGET_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    if loaded is not None:
        monkeypatch.setitem(sys.modules, loaded, types.ModuleType(loaded))
    rt = types.SimpleNamespace(settings=types.SimpleNamespace(extra_targets=()), _front=object())
    bootstrap.install_finder(rt)  # type: ignore[arg-type]
    assert made == ([] if loaded is None else [rt]) and (sys.meta_path[0] is rt._front) == (loaded is None)


# Code a traced start, its exit, a fork child, an exec and a signal never run, kept out of the start modules
# (every traced process read and unmarshalled it: ~0.1M instructions of a start, docs/scale.md): a recording
# process's environment reads (runtime/plain.py), the watcher's and cleanup's (watcher/tree.py, common/procfs.py),
# the command's (cli/doctor) and the analysis' (analysis/read/check.py).
NOT_ON_THE_START_PATH = {
    "wp_autotrace.common.env": ("pool_env_key", "pool_env_of", "role_from_cmd", "without_tracer_env"),
    "wp_autotrace.common.redact": ("environ_secrets", "redact_cmd"),
}


# A forked child makes the LATER modules it needs (the signal record's code, the sink's warnings) from the pack's
# bytes: no finder is asked (an import there could hang on a module lock a parent
# thread held at the fork), and a plain traced start makes none of them.
LATER_IN_A_FORK = textwrap.dedent("""
    import json, os, sys
    import wp_autotrace as p
    later = [n for n in p.LATER if n in sys.modules]
    seen = []
    class Watch:
        def find_spec(self, name, path=None, target=None):
            seen.append(name)
    sys.meta_path.insert(0, Watch())
    os.chdir(sys.argv[1])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), 0)
        sys.modules["wp_autotrace.runtime.sink"].warn("a forked child's warning")
        made = {n: type(sys.modules[n].__loader__).__name__ for n in p.LATER if n in sys.modules}
        os.write(w, json.dumps({"made": made, "seen": seen}).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    parent = [n for n in p.LATER if n in sys.modules]
    print(json.dumps({"at_start": later, "parent": parent, "child": json.loads(os.read(r, 65536))}))
""")


@pytest.mark.parametrize("pack", ["read", "none (-B)"])
def test_a_fork_child_makes_the_later_modules_without_an_import(pack: str, log: Path, tmp_path: Path) -> None:
    """wp_autotrace.LATER's modules: none made at a plain traced start, even of a -c program of several lines in a
    non-ASCII cwd (its process_start escapes both); a forked child that calls os.kill and warns has both, each
    with importlib's loader (host_calls made by the parent before the fork), and no finder is asked. Its warning
    is a tracer_error record (a descendant). With no pack (-B, an empty pycache prefix) their loader reads them
    then: still no finder."""
    cwd = tmp_path / "caf\u00e9 \U0001f600"
    cwd.mkdir()
    log.touch(mode=0o600)  # a descendant opens the log its root made
    env = traced_env(log, WP_AUTOTRACE_RUN="r", WP_AUTOTRACE_ROOT_PID="1")
    flags = []
    if pack != "read":
        env["PYTHONPYCACHEPREFIX"], flags = str(tmp_path / "pyc"), ["-B"]
    res = run_python([*flags, "-c", LATER_IN_A_FORK, str(cwd)], env, cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    import json

    from wp_autotrace import LATER

    got = json.loads(res.stdout)
    assert got["at_start"] == []
    # host_calls is made by the parent's before-fork hook: its forked workers inherit it, none makes its own
    assert got["parent"] == ["wp_autotrace.runtime.host_calls"]
    assert got["child"] == {"made": {n: "SourceFileLoader" for n in LATER}, "seen": []}
    forked = [r for r in read_log(log) if r["event"] == "process_start" and r["forked"]]
    assert [r["cwd"] for r in forked] == [str(cwd)]
    assert [r["error"] for r in read_log(log) if r["event"] == "tracer_error"] == ["a forked child's warning"]


def test_the_start_modules_hold_no_code_only_later_stages_run() -> None:
    """The functions only a recording process, the watcher, the command or the analysis call live with them."""
    import importlib

    for module, names in NOT_ON_THE_START_PATH.items():
        assert not [n for n in names if hasattr(importlib.import_module(module), n)], module


def test_the_start_path_holds_every_target_module() -> None:
    """bootstrap.TARGET_MODULES (what the front finder holds at start-up) is the target table's modules."""
    from wp_autotrace.common.targets import TARGETS
    from wp_autotrace.runtime.bootstrap import TARGET_MODULES

    assert {t.module for t in TARGETS} == TARGET_MODULES


@pytest.mark.parametrize("value", ["1", "TRUE", "yes", "On"])
def test_on_writes_start_and_exit_once(value: str, log: Path) -> None:
    """Any true spelling of WP_AUTOTRACE: one process_start and one process_exit; log mode 0600."""
    env = traced_env(log, WP_AUTOTRACE=value, WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-c", "print('hello')"], env)
    assert res.returncode == 0 and res.stdout == "hello\n" and res.stderr == ""
    recs = read_log(log)
    assert [r["event"] for r in recs] == ["process_start", "process_exit"]  # once, though site may read the .pth twice
    start = recs[0]
    for key in ("v", "event", "ts", "pid", "ppid", "host", "role", "seq", "argv", "executable", "python", "cwd",
                "run", "root_pid", "forked"):
        assert key in start
    assert start["role"] == "main" and start["root_pid"] == start["pid"] and start["forked"] is False
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600


def test_after_the_exit_record_no_tracer_finder_is_left(log: Path) -> None:
    """Once process_exit is written, the front finder leaves sys.meta_path (CPython keeps that list to the
    interpreter's end: the tracer's modules would outlive finalization's first collection); a child forked after
    it writes nothing, as before. It is replaced in its slot, never removed: a thread importing then (a daemon
    thread while a later exit handler lets it run) iterates the live list, and a removal before its place made
    it skip the next finder (an editable install's, appended after PathFinder: ModuleNotFoundError)."""
    code = textwrap.dedent("""
        import os, sys
        b = sys.modules["wp_autotrace.runtime.bootstrap"]
        front = b._runtime._front
        before = list(sys.meta_path)
        print(front in sys.meta_path)
        it = iter(sys.meta_path)  # a thread's import, past the front finder and the one after it
        passed = [next(it) for _ in range(before.index(front) + 2)]
        b._record_exit("exit")
        seen = [f for f in passed + list(it) if f is not front]
        ours = [f for f in sys.meta_path if (getattr(getattr(f, "find_spec", None), "__globals__", None) or {}
                                             ).get("__name__", "").startswith("wp_autotrace")]
        print(front in sys.meta_path, bool(ours), seen == [f for f in before if f is not front])
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    res = run_python(["-c", code], traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
    assert (res.stdout.split(), res.stderr) == (["True", "False", "False", "True"], "")
    assert [r["event"] for r in read_log(log)] == ["process_start", "process_exit"]



def test_the_tracers_finders_go_in_a_set_and_a_weakset(log: Path) -> None:
    """A host may put sys.meta_path's finders in a set or a WeakSet (CPython's test_sys does; a loader dedupes it
    with set()): untraced that works, so the front finder, and the finder left in its slot after the exit record,
    are hashable and weakly referenceable, as a finder instance is (a SimpleNamespace is neither)."""
    code = textwrap.dedent("""
        import sys, weakref
        def fine():
            return len(set(sys.meta_path)) == len(weakref.WeakSet(sys.meta_path)) == len(sys.meta_path)
        b = sys.modules["wp_autotrace.runtime.bootstrap"]
        print(b._runtime._front in sys.meta_path, fine())
        b._record_exit("exit")
        print(fine())
    """)
    res = run_python(["-c", code], traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
    assert (res.stdout.split(), res.stderr) == (["True", "True", "True"], "")


def test_every_top_level_module_the_tracer_imports_is_one_its_finders_look_up_as_its_own() -> None:
    """The finders look a top-level import up where the cwd cannot shadow it only for a name in sink.TRACER_IMPORTS
    (a string test: walking the frames cost every top-level import of the host): every import statement of the host
    side (runtime/, common/, the package's own modules but the command's __main__) names one of its modules, and
    so do the modules sink_rare names for the exit (INTERPRETER_MODULES)."""
    import ast

    from wp_autotrace.runtime.sink import TRACER_IMPORTS
    from wp_autotrace.runtime.sink_rare import INTERPRETER_MODULES

    pkg = Path(__file__).resolve().parent.parent / "wp_autotrace"
    files = [*pkg.glob("runtime/**/*.py"), *pkg.glob("common/**/*.py"),
             *(f for f in pkg.glob("*.py") if f.name != "__main__.py")]
    named = set(INTERPRETER_MODULES)
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                named.add(node.module.partition(".")[0])
    named.discard("wp_autotrace")
    missing = sorted(named - set(TRACER_IMPORTS.split()))
    assert len(files) > 30 and "resource" in named and not missing and TRACER_IMPORTS.startswith(" "), missing
    assert TRACER_IMPORTS.endswith(" ") and "  " not in TRACER_IMPORTS  # each name between two spaces


def test_default_log_path_is_in_cwd(tmp_path: Path) -> None:
    """Without WP_AUTOTRACE_LOG the log is created in the working directory."""
    res = run_python(["-c", "pass"], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_SAMPLE_INTERVAL="0"), cwd=tmp_path)
    assert res.returncode == 0
    logs = list(tmp_path.glob("wp_autotrace-*-*.jsonl"))
    assert len(logs) == 1 and read_log(logs[0])[0]["event"] == "process_start"


@pytest.mark.parametrize("given", ["{d}/log.jsonl", "{d}//log.jsonl", "{d}/./log.jsonl", "{d}/sub/../log.jsonl",
                                   "{d}/.h/../log.jsonl", "./log.jsonl", "log.jsonl"])
def test_a_descendant_exports_the_log_path_absolute_and_normal(given: str, tmp_path: Path) -> None:
    """A descendant hands its own children the log's path as os.path.abspath gives it, whatever form it was given
    (its children may chdir): one it was given absolute and normal stays as it is, every other form is made so."""
    (tmp_path / "sub").mkdir()
    (tmp_path / ".h").mkdir()
    log = tmp_path / "log.jsonl"
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))  # a descendant opens the log its root made
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=given.format(d=tmp_path), WP_AUTOTRACE_RUN="r",
                    WP_AUTOTRACE_ROOT_PID="1")
    res = run_python(["-c", "import os; print(os.environ['WP_AUTOTRACE_LOG'])"], env, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == str(log), (res.stdout, res.stderr)
    assert [e["event"] for e in read_log(log)] == ["process_start", "process_exit"]


SPAWNER = textwrap.dedent('''
    import multiprocessing as mp, os, subprocess, sys
    def work(q):
        q.put(os.getpid())
    if __name__ == "__main__":
        os.chdir(sys.argv[1])             # descendants must still find the log
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=work, args=(q,))
        p.start(); p.join()
        fork_ctx = mp.get_context("fork")      # a worker that leaves by os._exit
        fq = fork_ctx.Queue()
        w = fork_ctx.Process(target=work, args=(fq,))
        w.start(); w.join()
        print("children done", q.get(), fq.get() == w.pid)
''')


def test_every_process_writes_to_one_log(tmp_path: Path, log: Path) -> None:
    """subprocess, fork and multiprocessing-spawn children append to the root's log after a chdir."""
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = run_python([str(script), str(elsewhere)], traced_env(log), timeout=60)
    assert res.returncode == 0, res.stderr
    recs = read_log(log)
    starts = events(recs, "process_start")
    root = starts[0]
    assert root["role"] == "main"
    assert {r["run"] for r in starts} == {root["run"]}
    children = [s for s in starts if s["pid"] != root["pid"]]
    forked = [s for s in children if s["forked"]]
    assert len(forked) == 2 and all(f["ppid"] == root["pid"] and f["role"] == "child" for f in forked)
    spawned = [s for s in children if not s["forked"]]
    # the subprocess, the multiprocessing spawn child (and its resource tracker, if any)
    assert len(spawned) >= 2 and all(s["root_pid"] == root["pid"] for s in spawned)
    assert any("spawn_main" in " ".join(map(str, s["argv"])) for s in spawned)
    exits = {r["pid"]: r for r in events(recs, "process_exit")}
    # The multiprocessing fork worker's exit is recorded (os._exit itself is left alone);
    # the bare os.fork() child that calls os._exit writes none.
    assert [exits.get(f["pid"], {}).get("how") for f in forked] == [None, "os._exit"]
    assert exits[root["pid"]]["how"] == "exit"
    # per-process seq is complete
    for pid in {r["pid"] for r in recs}:
        seqs = [r["seq"] for r in recs if r["pid"] == pid]
        assert seqs == list(range(len(seqs))), pid


BEHAVIOUR = textwrap.dedent('''
    import sys
    print("out line"); print("err line", file=sys.stderr)
    def boom():
        raise KeyError("inner")
    if len(sys.argv) > 1:
        boom()
    sys.exit(3)
''')


@pytest.mark.parametrize("crash", [False, True])
def test_program_behaviour_unchanged(crash: bool, tmp_path: Path, log: Path) -> None:
    """Exit code, stdout and stderr (incl. a traceback) identical to an untraced run."""
    script = tmp_path / "prog.py"
    script.write_text(BEHAVIOUR)
    args = [str(script)] + (["crash"] if crash else [])
    plain = run_python(args, clean_env())
    traced = run_python(args, traced_env(log))
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert events(read_log(log), "process_exit")


@pytest.mark.parametrize("where", ["missing-dir", "read-only-dir", "symlink", "directory", "fifo", "dev-full"])
def test_bad_log_path_one_line_and_untraced(where: str, tmp_path: Path) -> None:
    """Log path in a missing/read-only dir, a symlink, directory, FIFO, /dev/full: one stderr line, untraced run.

    The program's exit code and output are unchanged; a planted symlink's target is untouched.
    """
    if where == "missing-dir":
        path = tmp_path / "nope" / "log.jsonl"
    elif where == "read-only-dir":
        if os.geteuid() == 0:
            pytest.skip("root ignores directory permissions")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        path = ro / "log.jsonl"
    elif where == "symlink":
        target = tmp_path / "victim"
        target.write_text("precious\n")
        path = tmp_path / "link.jsonl"
        path.symlink_to(target)
    elif where == "directory":
        path = tmp_path / "dir.jsonl"
        path.mkdir()
    elif where == "fifo":
        path = tmp_path / "fifo.jsonl"
        os.mkfifo(path)
    else:
        path = Path("/dev/full")
    script = tmp_path / "prog.py"
    script.write_text(BEHAVIOUR + "\n")
    sub = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'print(1)'])"
    plain = run_python(["-c", sub], clean_env())
    traced = run_python(["-c", sub], traced_env(path), timeout=30)
    assert traced.returncode == plain.returncode and traced.stdout == plain.stdout
    lines = traced.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wp-autotrace: "), traced.stderr
    assert "Traceback" not in traced.stderr
    if where == "symlink":
        assert (tmp_path / "victim").read_text() == "precious\n"


def test_bad_settings_warn_and_use_defaults(log: Path) -> None:
    """Bad WP_AUTOTRACE_* values (incl. code in TARGETS): one warning each, defaults used, nothing evaluated."""
    env = traced_env(log, WP_AUTOTRACE_STACK="lots", WP_AUTOTRACE_SAMPLE_INTERVAL="-1",
                     WP_AUTOTRACE_TARGETS="os:system;__import__('os').system('echo pwned'),json:dumps",
                     WP_AUTOTRACE_GUARD="maybe")
    res = run_python(["-c", "print('ran')"], env)
    assert res.returncode == 0 and res.stdout == "ran\n"
    warnings = res.stderr.splitlines()
    assert len(warnings) == 4 and all(w.startswith("wp-autotrace: ") for w in warnings), res.stderr
    assert "pwned" not in res.stdout
    assert events(read_log(log), "process_start")


SPAWN_CHILDREN = textwrap.dedent("""
    import subprocess, sys
    for _ in range(2):
        subprocess.run([sys.executable, "-c", "print('child')"], check=True)
    print("root")
""")


@pytest.mark.parametrize("value", ["2", "enable", "y", " Enabled "])
def test_unknown_enable_value_warns_once_in_root_only(value: str, tmp_path: Path) -> None:
    """WP_AUTOTRACE outside the accepted words: one warning from the root, children silent, nothing traced."""
    res = run_python(["-c", SPAWN_CHILDREN], clean_env(WP_AUTOTRACE=value), cwd=tmp_path)
    assert (res.returncode, res.stdout) == (0, "child\nchild\nroot\n")
    assert res.stderr == (f"wp-autotrace: WP_AUTOTRACE={value.strip().lower()!r} is not one of 1, true, yes, on "
                          "(or 0, false, no, off); tracing off\n")
    assert not list(tmp_path.glob("*.jsonl"))


@pytest.mark.parametrize("traced", [False, True])
def test_mistyped_guard_warns_in_root_only(traced: bool, tmp_path: Path, log: Path) -> None:
    """A mistyped WP_AUTOTRACE_GUARD warns once in the root, never in the children (whose stderr a host may read)."""
    env = traced_env(log, WP_AUTOTRACE_GUARD="nested_pool") if traced else clean_env(WP_AUTOTRACE_GUARD="nested_pool")
    res = run_python(["-c", SPAWN_CHILDREN], env, cwd=tmp_path)
    assert (res.returncode, res.stdout) == (0, "child\nchild\nroot\n")
    assert res.stderr == "wp-autotrace: WP_AUTOTRACE_GUARD='nested_pool' is not one of nested-pools; guard off\n"


def test_argv_exact_including_empty_arguments(log: Path) -> None:
    """process_start argv is the command line exactly (3.9 reads /proc: no trailing empty item)."""
    run_python(["-c", "pass", "", "x"], traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
    start = events(read_log(log), "process_start")[0]
    assert start["argv"][1:] == ["-c", "pass", "", "x"]


def test_extra_targets_traced_and_exceptions_pass_through(tmp_path: Path, log: Path) -> None:
    """A traced function's exception reaches the caller unchanged and is recorded."""
    (tmp_path / "userpool.py").write_text(textwrap.dedent('''
        def start(n):
            if n < 0:
                raise RuntimeError(f"bad n {n}")
            return n * 2
    '''))
    code = "import userpool; print(userpool.start(2)); userpool.start(-1)"
    base = {"PYTHONPATH": str(tmp_path)}
    plain = run_python(["-c", code], clean_env(**base))
    traced = run_python(["-c", code], traced_env(log, WP_AUTOTRACE_TARGETS="userpool:start", **base))
    assert traced.returncode == plain.returncode == 1
    assert traced.stdout == plain.stdout == "4\n"
    # Same exception and origin; only our wrapper's frame may appear in between.
    assert traced.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1] == "RuntimeError: bad n -1"
    assert traced.stderr.splitlines()[-3:-1] == plain.stderr.splitlines()[-3:-1]
    recs = read_log(log)
    returns = events(recs, "return")
    assert [r.get("error") for r in returns] == [None, "RuntimeError: bad n -1"]
    assert [c["target"] for c in events(recs, "call")] == ["userpool:start"] * 2


def test_exec_into_traced_program_and_no_site(tmp_path: Path, log: Path) -> None:
    """exec keeps one process identity; -S and -I interpreters run unaffected."""
    code = "import os, sys; os.execv(sys.executable, [sys.executable, '-c', 'print(\"after exec\")'])"
    res = run_python(["-c", code], traced_env(log))
    assert res.returncode == 0 and res.stdout == "after exec\n"
    starts = events(read_log(log), "process_start")
    assert len(starts) == 2 and starts[0]["pid"] == starts[1]["pid"]
    assert {s["role"] for s in starts} == {"main"}
    other = tmp_path / "nosite.jsonl"
    res = run_python(["-S", "-c", "print('no site')"], traced_env(other))
    assert res.returncode == 0 and res.stdout == "no site\n" and not other.exists()
    res = run_python(["-I", "-c", "print('isolated')"], traced_env(other))
    assert res.returncode == 0 and res.stdout == "isolated\n"


def test_argv_recorded_not_environment(log: Path) -> None:
    """argv is recorded, environment values are not."""
    env = traced_env(log, SECRET_TOKEN="hunter2")
    run_python(["-c", "pass", "arg1"], env)
    text = log.read_text()
    assert "hunter2" not in text and "arg1" in text


def test_guard_alone_writes_nothing(tmp_path: Path) -> None:
    """The guard without tracing writes no file and prints nothing."""
    res = run_python(["-c", "print('guarded')"], clean_env(WP_AUTOTRACE_GUARD="nested-pools"), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "guarded\n" and res.stderr == ""
    assert not list(tmp_path.iterdir())


def test_python_version_supported() -> None:
    """The interpreter is one we support."""
    assert sys.version_info >= (3, 9)


def test_the_exit_record_carries_the_probes_counts_times_and_callers(tmp_path: Path) -> None:
    """A process whose probes counted calls: process_exit's counts, count_times (to the millisecond) and
    count_callers (each last caller attributed), in that order after how; a process without probes says counts {}."""
    import types

    from wp_autotrace.runtime import bootstrap, first_target
    from wp_autotrace.runtime.sink import Sink

    assert first_target  # loaded with the probes in a real process: the exit finds it in sys.modules
    code = test_the_exit_record_carries_the_probes_counts_times_and_callers.__code__
    probes = types.SimpleNamespace(counts={"m:f": 2}, count_times={"m:f": [1.23456, 2.5]},
                                   count_callers={"m:f": (code, 7), "m:g": None})
    log = tmp_path / "e.jsonl"
    for i, p in enumerate((probes, None)):
        rt = types.SimpleNamespace(notice=None, sink=Sink(str(log), "h", "main"), _probes=p, is_root=False,
                                   _root=None)
        bootstrap.at_exit(rt, "exit", i)  # type: ignore[arg-type]
    with_probes, without = events(read_log(log), "process_exit")
    assert list(with_probes)[8:] == ["how", "counts", "dropped", "count_times", "count_callers", "code"]
    assert with_probes["counts"] == {"m:f": 2} and with_probes["count_times"] == {"m:f": [1.235, 2.5]}
    assert list(with_probes["count_callers"]) == ["m:f"]
    assert with_probes["count_callers"]["m:f"]["line"] == 7
    assert without["counts"] == {} and "count_times" not in without and "count_callers" not in without
