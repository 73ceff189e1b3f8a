"""What a traced start runs of the joined start module, and what it only defines (a census, no valgrind).

A traced start pays for every code object it loads, run or not (BENCHMARKS.md, "start, seventeenth" and
"nineteenth round": a function a start never calls still costs its unmarshal, its making and the exit's
collections). This lists, for a traced child of a traced root in a pip-less venv of this tree (bench/startup_cost.py's,
its start pack written, so the joined module runs), each code object of the joined module
(wp_autotrace.JOINED's file) with its own marshalled bytes (nested code objects counted in their own rows), and
whether a start RAN it, for three command lines a traced child has:

- ``pass``: ``python -c pass``;
- ``worker``: a compile worker's options (``--name=value`` arguments: the argument redaction's name test runs);
- ``spawn``: multiprocessing's spawn child (``-c "...; spawn_main(...)" --multiprocessing-fork``: program text).

How it sees the calls: a ``.pth`` file sorted before the tracer's (``aaa_wp_census.pth``) sets ``sys.setprofile`` and
registers an atexit function before the tracer's exit hook is registered, so it runs after the exit record (atexit
runs last-registered first) and writes each called code object's (file, first line). It imports nothing of the
tracer (a START module imported before the tracer's line would make that start run the sources one by one). Code
run after atexit (interpreter finalization) is not seen; the exit record is written inside atexit, and is.

``cold`` lists what none of the three ran. Cold here is not cold everywhere: a forked pool worker runs the fork
child's code, a pool's owner the signal replacements, a ``tcp://`` argument the URL masking (BENCHMARKS.md,
"start, nineteenth round").

Usage: python bench/start_census.py [--json]   (a few seconds)
"""

from __future__ import annotations

import argparse
import json
import marshal
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import startup_cost  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import wp_autotrace  # noqa: E402  (JOINED: the joined module's name)

KINDS = {
    "pass": ["-c", "pass"],
    "worker": ["-c", "pass", "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler",
               "--kind=fork", "--workers=32", "--parent=1234", "--read-fd=5", "--write-fd=6"],
    # spawn's text, its call left in a comment: the argument redaction reads the same words
    "spawn": ["-c", "import sys; sys.exit(0)  # spawn_main(tracker_fd=5, pipe_handle=7)", "--multiprocessing-fork"],
}
# One line (site runs a .pth line that starts with "import", in its own function's locals: the lambdas take what they
# use as defaults); only where WP_CENSUS_OUT is set, and once (a venv's site reads its site-packages twice: a second
# atexit function, run first, would stop the census before the tracer's exit hook)
CENSUS_PTH = (
    "import os, sys, atexit; o = sys.getprofile() is None and os.environ.get('WP_CENSUS_OUT'); s = {}; "
    "o and sys.setprofile("
    "lambda f, e, a, s=s: e == 'call' and s.setdefault((f.f_code.co_filename, f.f_code.co_firstlineno), 1)); "
    "o and atexit.register(lambda s=s, o=o, sys=sys: (sys.setprofile(None), open(o, 'a').write("
    "''.join('%s\\t%d\\n' % k for k in s))))\n")


def code_rows(path: Path) -> list[tuple[str, int, int]]:
    """Every code object compiled from the joined file: (qualname, first line, own marshalled bytes), by line."""
    rows = []
    todo = [compile(path.read_text(), str(path), "exec")]
    while todo:
        code = todo.pop()
        nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
        own = len(marshal.dumps(code)) - sum(len(marshal.dumps(c)) for c in nested)
        rows.append((getattr(code, "co_qualname", code.co_name), code.co_firstlineno, own))
        todo.extend(nested)
    return sorted(rows, key=lambda row: row[1])


def census(python: str, site: Path, tmp: Path, argv: list[str]) -> set[int]:
    """The first lines of the joined module's code objects a traced child with argv called."""
    out = tmp / "census.txt"
    out.unlink(missing_ok=True)
    log = tmp / "log.jsonl"
    log.touch()  # a descendant opens the log its root made; it never makes one
    env = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="x",
                              WP_AUTOTRACE_ROOT_PID="1", WP_CENSUS_OUT=str(out))
    subprocess.run([python, *argv], env=env, cwd=tmp, check=True, timeout=120, stdin=subprocess.DEVNULL)
    joined = str(site / "wp_autotrace" / "runtime" / "_start_joined.py")
    lines = set()
    for line in out.read_text().splitlines():
        name, _, first = line.rpartition("\t")
        if name == joined:
            lines.add(int(first))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-census-"))
    try:
        venv = startup_cost.make_venv(tmp, "tree", sys.executable, REPO / "wp_autotrace")
        python = str(venv / "bin" / "python")
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "aaa_wp_census.pth").write_text(CENSUS_PTH)
        joined = site.joinpath(*wp_autotrace.JOINED.split(".")).with_suffix(".py")
        census(python, site, tmp, KINDS["pass"])  # writes the pack: the starts below run the joined module
        pack_ok = subprocess.run(
            [python, "-c", "import sys; print(sys.modules['wp_autotrace.runtime.sink'].__file__)"],
            env=startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(tmp / "log.jsonl"), WP_AUTOTRACE_RUN="x",
                                    WP_AUTOTRACE_ROOT_PID="1"), capture_output=True, text=True, cwd=tmp, timeout=120)
        if pack_ok.stdout.strip() != str(joined):
            print(f"start_census: the joined module did not run ({pack_ok.stdout.strip()!r})", file=sys.stderr)
            return 1
        ran = {kind: census(python, site, tmp, argv) for kind, argv in KINDS.items()}
        rows = code_rows(joined)
        seen = {name for name, line, _ in rows if line in ran["pass"]}
        if not {"start", "at_exit"} <= seen:  # a start cut short (a warning, no log) would read as all cold
            print(f"start_census: a plain traced start did not reach its exit record; it ran {sorted(seen)}",
                  file=sys.stderr)
            return 1
        out: dict[str, object] = {"code_objects": len(rows), "bytes": sum(row[2] for row in rows)}
        for kind in KINDS:  # the module's own body runs at every start (its first line is the banner's)
            hot = [row for row in rows if row[1] in ran[kind] or row[0] == "<module>"]
            out[kind] = {"ran": len(hot), "ran_bytes": sum(row[2] for row in hot)}
        cold = [row for row in rows if row[0] != "<module>" and not any(row[1] in lines for lines in ran.values())]
        out["cold"] = {"count": len(cold), "bytes": sum(row[2] for row in cold),
                       "names": [f"{name} ({size})" for name, _, size in cold]}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
