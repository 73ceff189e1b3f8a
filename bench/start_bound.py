"""The cheapest start that keeps today's records: scratch variants of the joined start module, counted (cachegrind).

For the traced-child row (issue #41): what does a start cost that keeps EVERY record and safety of today's (a traced
``-c pass`` child, a forked compile worker, a spawn child; each host patch installed) and loads only what such a
start runs? bench/start_census.py finds the joined module's code objects none of its three command lines runs (33,
18.7 KB); this writes variants of the joined module into a pip-less venv of this tree (bench/startup_cost.py's),
never into the product, and counts a traced child of a traced root over ``python -c pass`` untraced (``--shapes``):

- ``main``: the joined module as the tree has it.
- ``gone``: the bound: every cold code object gone, its name bound to ONE shared stub function. Not a working start
  (a fork, an exec or a signal calls the stub: ``--check`` shows it); no deferral can cost a start less, since each
  keeps at least a name. Kept: the two functions whose ``__code__`` a start uses as a value (``_at_fork``,
  ``_finds_nothing``).
- ``lazy``: a working shape of it: each cold top-level function and method a closure of one factory (one code
  object for all) that makes the real bodies at its first call from one marshalled bytes constant (compiled from
  the same lines, the cold names renamed in it so the real bodies call each other directly) and hands its arguments
  on, taking its own frame out of an exception's traceback as the replacements do. Eager still: the fork child's
  code (every forked pool worker runs it; ``_forked_to_exec`` counts frames), what counts frames from its caller
  (the signal replacements, whose record's frames start at the caller; ``drop_own_frame``), the two code values
  above, and functions nested in a function a start runs (closures over its locals).
- ``gone_lazyset``, ``lazy_noblob``: ``lazy``'s functions gone (its bound), and its stubs without the bodies: the
  stubs' own price.
- ``no:<evidence>`` (``-`` between several; ``no:all``): ``gone`` less that evidence (EVIDENCE: its functions gone,
  their calls replaced by what a start without it would do): what each kind of evidence or safety costs a start.
  These starts write less; priced, not proposed.

``--check`` runs a scenario under each shape (a traced root: a ``-c pass`` child, a compile worker's command line, a
forked child that execs, a multiprocessing fork and spawn child, a signal sent, an os.kill that raises with its
traceback printed) and compares the log's records (times, pids and other per-run values taken out; the watcher's
records, which follow its polls' timing, left out) and the scenario's output with ``main``'s. ``--cpu N``: CPU and
minor faults per shape over off (a venv each, N alternating rounds, paired medians).

Usage: python bench/start_bound.py [--json] [--check] [--cpu N] [--shapes main,gone,lazy]   (needs valgrind)
"""

from __future__ import annotations

import argparse
import ast
import json
import marshal
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import start_census  # noqa: E402
import startup_cost  # noqa: E402
from instructions import instructions  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# Cold in the census's three command lines, yet needed eagerly by a working start: a code object used as a value at
# start, the fork child's frames (counted by depth in _forked_to_exec; every forked pool worker runs them)
AS_VALUE = ("_at_fork", "_finds_nothing")
FORK = ("after_fork_in_child", "_forked_to_exec", "_after_fork", "Sink.reset_after_fork")
# Frames counted by depth, so a stub's frame between would change what they find (--check found both): the signal
# record's frames are the caller's, counted from the replacement (host_calls.record_signal); drop_own_frame takes
# its caller's frame out of a traceback (a stub's frame instead left the replacement's in the host's traceback)
FRAMES = ("_kill", "_killpg", "hooked_pidfd_send_signal", "_signal_record", "drop_own_frame")
# What each kind of evidence or safety costs above the bound: ``gone`` with that evidence's functions gone too and
# their calls replaced by what a start without it would do (these starts write less: priced, not proposed)
EVIDENCE = {
    "redaction": (("parse_patterns", "_compile", "is_secret", "_option_name", "redact_arg", "redact_argv",
                   "redact_env", "argv_env_secrets", "_plain_name", "_mask_auth", "_redact_words"),
                  (('redact=parse_patterns(env.get(REDACT_ENV, "")),', "redact=None,"),
                   ("argv=redact_argv(argv, patterns, argv_env_secrets(argv, patterns)),", "argv=argv,"),
                   ("env=redact_env(pool_env(), patterns),", "env=pool_env(),"))),
    "redaction_calls": ((), (('redact=parse_patterns(env.get(REDACT_ENV, "")),', "redact=None,"),
                             ("argv=redact_argv(argv, patterns, argv_env_secrets(argv, patterns)),", "argv=argv,"),
                             ("env=redact_env(pool_env(), patterns),", "env=pool_env(),"))),  # its code still loaded
    "identity": (("own_start", "split_stat", "boot_time", "_bracketed_boot", "clock_create_time"),
                 (("rt.create_time, rt.start_ticks = own_start()", "rt.create_time, rt.start_ticks = None, None"),)),
    "exec_signal_patches": (("install_exec_record", "install_signal_record", "pidfd_owners", "look_like",
                             "_exec_recorder"),
                            (("install_exec_record(_exec_recorder(rt))", "None"),
                             ("install_signal_record(rt.sink.emit)", "None"))),
    "env_watch": (("env_watch",), (("rt.env_watch = env_watch()", "rt.env_watch = None"),
                                   ("runtime.env_watch.check(fullname)", "None"))),
    "finder": (("install_finder", "_front_finder"), (("    install_finder(rt)\n", "    None\n"),
                                                     ("rt._front = _front_finder(rt)", "rt._front = None"))),
}
STUB = "def _wp_stub(*args, **kwargs):\n    raise RuntimeError('start_bound: a stub')\n"
# The lazy shape's one factory and its loader (one code object each, whatever the number of functions deferred)
LAZY = '''
_wp_real = {}
def _wp_lazy(name):
    def call(*args, **kwargs):
        try:
            return (_wp_real.get(name) or _wp_load(name))(*args, **kwargs)
        except BaseException as exc:
            tb = exc.__traceback__
            if _TRIM_TRACEBACK and tb is not None and tb.tb_frame is getframe(0):
                exc.__traceback__ = tb.tb_next
            raise
    return call
def _wp_load(name):
    import marshal
    g = globals()
    exec(marshal.loads(_WP_COLD), g)
    for n in _WP_NAMES:
        _wp_real[n] = g["_wp_r_" + n.replace(".", "_")]
    return _wp_real[name]
'''


def cold_defs(tree: ast.Module, cold: set[str]) -> list[tuple[str, ast.FunctionDef, int]]:
    """(qualname, node, depth) of each cold function definition, outermost only (a cold def's nested code goes with
    it); depth 0 top level, 1 a method, 2 nested in a function."""
    found: list[tuple[str, ast.FunctionDef, int]] = []

    def walk(body: list[ast.stmt], prefix: str, depth: int) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".", 1)
            elif isinstance(node, ast.FunctionDef):
                name = prefix + node.name
                if name in cold:
                    found.append((name, node, depth))
                else:
                    walk(node.body, name + ".<locals>.", 2)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                walk(node.body, prefix, depth)
    walk(tree.body, "", 0)
    return found


def priced(text: str, cold: set[str], shape: str) -> str:
    """``gone`` less the evidence named in shape (``-`` between names; ``all``: every one)."""
    names = list(EVIDENCE) if shape == "all" else shape.split("-")
    for name in names:
        extra, subs = EVIDENCE[name]
        cold = cold | set(extra)
        for old, new in subs:
            if text.count(old) != 1:
                raise RuntimeError(f"start_bound: {old!r} is not once in the joined module")
            text = text.replace(old, new)
    return variant(text, cold, "gone")


def variant(text: str, cold: set[str], shape: str) -> str:
    """The joined module's text with the cold definitions replaced (the stub on a definition's first line, the rest
    left empty: the module's lines keep their spacing, moved down by the head's)."""
    if shape.startswith("no:"):
        return priced(text, cold, shape[3:])
    lines = text.split("\n")
    tree = ast.parse(text)
    defs = [(name, node, depth) for name, node, depth in cold_defs(tree, cold)
            if name.rpartition(".")[2] not in AS_VALUE]
    if shape in ("lazy", "gone_lazyset", "lazy_noblob"):
        defs = [d for d in defs if d[0] not in FORK + FRAMES and d[2] < 2]
        shape = "gone" if shape == "gone_lazyset" else shape
    names = [name for name, _, _ in defs]
    blob = [""] * len(lines)
    for name, node, _depth in defs:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        indent = " " * node.col_offset
        is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
        for k in range(first - 1, node.end_lineno):
            if shape != "gone":
                body = lines[k][node.col_offset:] if lines[k].startswith(indent) else lines[k]
                blob[k] = body.replace(f"def {node.name}(", f"def _wp_r_{name.replace('.', '_')}(", 1)
            lines[k] = ""
        stub = "_wp_stub" if shape == "gone" else f"_wp_lazy({name!r})"
        lines[first - 1] = indent + node.name + " = " + (f"property({stub})" if is_property else stub)
        if is_property:
            blob[first - 1] = ""
    head = STUB if shape == "gone" else LAZY
    if shape in ("lazy", "lazy_noblob"):
        cold_text = "\n".join(blob)
        for name in names:
            if "." not in name:  # a top-level cold name called from a cold body: the real one, no stub between
                cold_text = re.sub(rf"(?<![\w.]){re.escape(name)}\b", "_wp_r_" + name, cold_text)
        head += f"_WP_NAMES = {tuple(names)!r}\n_WP_COLD_TEXT = {cold_text if shape == 'lazy' else ''!r}\n"
    # After the first line (the sources' fingerprints: the pack's writer reads them): the module's lines move down
    # by the head's, which only a traceback through the tracer's own code would show
    return lines[0] + "\n" + head + "\n".join(lines[1:])


def finish_lazy(joined: Path) -> None:
    """Compile the lazy variant's cold text with the joined file's own path (tracebacks name it) and store it as
    marshalled bytes, the way LATER's code is kept."""
    text = joined.read_text()
    found = re.search(r"^_WP_COLD_TEXT = (.*)$", text, re.M)
    if found is None:
        return
    code = compile(ast.literal_eval(found.group(1)), str(joined), "exec")
    joined.write_text(text[:found.start()] + f"_WP_COLD = {marshal.dumps(code)!r}" + text[found.end():])


def cold_names(python: str, site: Path, tmp: Path) -> set[str]:
    """Qualnames of the joined module's code objects that none of the census's three command lines ran."""
    joined = site.joinpath(*start_census.wp_autotrace.JOINED.split(".")).with_suffix(".py")
    (site / "aaa_wp_census.pth").write_text(start_census.CENSUS_PTH)
    try:
        start_census.census(python, site, tmp, start_census.KINDS["pass"])  # writes the pack
        ran: set[int] = set()
        for argv in start_census.KINDS.values():
            ran |= start_census.census(python, site, tmp, argv)
    finally:
        (site / "aaa_wp_census.pth").unlink()
    return {name for name, line, _ in start_census.code_rows(joined) if name != "<module>" and line not in ran}


def install(site: Path, text: str, lazy: bool) -> Path:
    joined = site.joinpath(*start_census.wp_autotrace.JOINED.split(".")).with_suffix(".py")
    joined.write_text(text)
    if lazy:
        finish_lazy(joined)
    for pyc in (joined.parent / "__pycache__").glob("_start_joined*"):
        pyc.unlink()
    for pack in (site / "wp_autotrace" / "__pycache__").glob("_startpack*"):
        pack.unlink()
    return joined


SCENARIO = r'''
import multiprocessing as mp, os, subprocess, sys, time, traceback
def work():
    pass
def nap(ready):
    ready.set()
    time.sleep(60)
if __name__ == "__main__":
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    subprocess.run([sys.executable, "-c", "pass", "--kind=fork", "--workers=32", "--read-fd=5"], check=True)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", "pass"])
    os.waitpid(pid, 0)
    for how in ("fork", "spawn"):
        p = mp.get_context(how).Process(target=work)
        p.start()
        p.join()
    ready = mp.get_context("fork").Event()
    p = mp.get_context("fork").Process(target=nap, args=(ready,))
    p.start()
    ready.wait(60)  # its start record written (else a race: terminated before its at-fork hook ran)
    p.terminate()  # os.kill(pid, SIGTERM): a signal record
    p.join()
    try:
        os.kill(2 ** 22 + 7, 0)
    except ProcessLookupError:
        print("".join(traceback.format_exc().replace(sys.prefix, "PREFIX").splitlines(True)[-4:]))
    print(os.kill.__name__, os.kill.__module__, os.execv.__qualname__)
'''
# Fields that differ run to run whatever the start (times, pids, paths of the scratch folders)
_VARYING = re.compile(r'"(t|ts|time|t_ns|pid|ppid|parent_pid|root_pid|start|boot|created|mono|cpu_s|rss_kb|'
                      r'wall_s|utime|stime|elapsed_s|seq|host|pidns|tid|exit_t|run|create_time|start_ticks|member|target)":\s*'
                      r'("[^"]*"|[-\d.e]+)')


def records(python: str, tmp: Path, tag: str) -> tuple[list[str], str]:
    """The scenario's records (varying fields out, sorted: order between processes is the scheduler's) and output."""
    log = tmp / f"check-{tag}.jsonl"
    script = tmp / "scenario.py"
    script.write_text(SCENARIO)
    env = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    out = subprocess.run([python, str(script)], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    # The watcher's records follow its polls' timing (which processes a poll saw alive): left out
    lines = [_VARYING.sub(r'"\1": X', line) for line in log.read_text().splitlines()
             if line.startswith("{") and '"role":"watcher"' not in line]
    return sorted(lines), out.stdout + out.stderr[-2000:]


def count(python: str, tmp: Path) -> int:
    log = tmp / "log.jsonl"
    log.touch()
    on = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="x",
                             WP_AUTOTRACE_ROOT_PID="1")
    subprocess.run([python, "-c", "pass"], env=on, cwd=tmp, check=True)  # writes the pack
    ran = subprocess.run([python, "-c", "import sys; print(sys.modules['wp_autotrace.runtime.sink'].__file__)"],
                         env=on, cwd=tmp, capture_output=True, text=True, check=True).stdout.strip()
    if not ran.endswith("_start_joined.py"):
        raise RuntimeError(f"the joined module did not run: {ran!r}")
    # A stub a start calls would turn tracing off (start() contains it, with a warning): that start writes nothing
    log.write_bytes(b"")
    said = subprocess.run([python, "-c", "pass"], env=on, cwd=tmp, capture_output=True, text=True, check=True)
    events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
    if said.stderr or events != ["process_start", "process_exit"]:
        raise RuntimeError(f"the start did not trace: {events} {said.stderr[-500:]!r}")
    base = instructions([python, "-c", "pass"], startup_cost._clean(), tmp)
    return instructions([python, "-c", "pass"], on, tmp) - base


def cpu(tmp: Path, texts: dict[str, str], rounds: int) -> dict[str, object]:
    """CPU (user+sys, rusage) of a traced child per shape over the untraced ``-c pass``: a venv per shape, the rounds
    alternating, paired medians with p25-p75 (bench/start_phases.py's way), and minor faults."""
    pythons = {}
    log = tmp / "cpu-log.jsonl"
    log.touch()
    on = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="x",
                             WP_AUTOTRACE_ROOT_PID="1")
    for shape, text in texts.items():
        venv = startup_cost.make_venv(tmp, "cpu-" + shape.replace(":", "_"), sys.executable, REPO / "wp_autotrace")
        install(next((venv / "lib").glob("python3*/site-packages")), text, shape.startswith("lazy"))
        pythons[shape] = str(venv / "bin" / "python")
        subprocess.run([pythons[shape], "-c", "pass"], env=on, cwd=tmp, check=True)  # writes the pack
    variants = [("off", pythons["main"], startup_cost._clean())] + [(k, v, on) for k, v in pythons.items()]
    got: dict[str, list[tuple[float, int]]] = {name: [] for name, _, _ in variants}
    for r in range(rounds + 5):
        k = r % len(variants)
        for name, python, env in variants[k:] + variants[:k]:
            ru = startup_cost.spawned([python, "-c", "pass"], env)
            if r >= 5:  # the first rounds warm the page cache
                got[name].append((ru.ru_utime + ru.ru_stime, ru.ru_minflt))
        log.write_bytes(b"")
    out: dict[str, object] = {"rounds": rounds}
    for name in pythons:
        ms = [(a[0] - b[0]) * 1e3 for a, b in zip(got[name], got["off"])]
        q = statistics.quantiles(ms, n=4)
        out[name] = {"cpu_ms": round(statistics.median(ms), 3), "p25": round(q[0], 3), "p75": round(q[2], 3),
                     "minflt": statistics.median(a[1] - b[1] for a, b in zip(got[name], got["off"]))}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="compare main's and lazy's records")
    parser.add_argument("--shapes", default="main,gone,lazy", help="comma-separated: main, gone, lazy, "
                        "gone_lazyset, lazy_noblob, no:<evidence>[-<evidence>...] or no:all (EVIDENCE's names)")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="also CPU per shape, N alternating rounds")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-bound-"))
    try:
        venv = startup_cost.make_venv(tmp, "tree", sys.executable, REPO / "wp_autotrace")
        python = str(venv / "bin" / "python")
        site = next((venv / "lib").glob("python3*/site-packages"))
        joined = site.joinpath(*start_census.wp_autotrace.JOINED.split(".")).with_suffix(".py")
        text = joined.read_text()
        cold = cold_names(python, site, tmp)
        out: dict[str, object] = {"cold": len(cold)}
        checked: dict[str, tuple[list[str], str]] = {}
        for shape in args.shapes.split(","):
            install(site, text if shape == "main" else variant(text, cold, shape), shape.startswith("lazy"))
            out[shape] = count(python, tmp)
            if args.check:
                checked[shape] = records(python, tmp, shape)
        if "main" in checked:  # each shape's records beside main's (gone's differ: the check sees a difference)
            a, a_out = checked.pop("main")
            events: dict[str, int] = {}
            for line in a:  # the varying fields' values are X now: no longer JSON
                event = line.partition('"event":"')[2].partition('"')[0]
                events[event] = events.get(event, 0) + 1
            out["check"] = {"main_records": events, "main_output": a_out}
            for shape, (b, b_out) in checked.items():
                only_main, only_here = Counter(a) - Counter(b), Counter(b) - Counter(a)
                out["check"][shape] = {"same_records": a == b, "same_output": a_out == b_out,
                                       "only_main": list(only_main.elements())[:3],
                                       "only_here": list(only_here.elements())[:3], "output": b_out[-600:]}
        if args.cpu:
            texts = {shape: text if shape == "main" else variant(text, cold, shape) for shape in args.shapes.split(",")}
            out["cpu"] = {"load_start": os.getloadavg(), **cpu(tmp, texts, args.cpu), "load_end": os.getloadavg()}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
