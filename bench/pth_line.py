"""What the `.pth` line costs an interpreter, and what other forms of it would: off, set to a false word, traced.

site compiles every `.pth` import line at each start-up (exec of the line's text), whether or not the line then
does anything, and compiling costs by the token (~12K instructions a token of code; a string constant's text
~300 a character): the line's cost off is its compile. Each form below is one line in a `.pth` of its own
pip-less venv (bench/startup_cost.make_venv), beside a copy of this tree's wp_autotrace/__init__.py (the
loader; ``_preload`` is its second name) whose load_and_start() only marks bootstrap loaded (what a traced
start's run-once tests read), so that a form's traced figure is the line's own work. Each venv is a venv:
site runs its line twice (see bench/start_phases.py). Figures, `python -c pass`:

- ``off``: WP_AUTOTRACE and WP_AUTOTRACE_GUARD unset, over a venv with no `.pth`: instructions (valgrind
  cachegrind, user space, PYTHONHASHSEED fixed; the second of two runs: load-proof) and CPU (user+sys from
  os.wait4's rusage: the median of per-round paired differences with its p25-p75, rounds alternating and
  rotating over the venvs);
- ``false_word``: WP_AUTOTRACE=0, instructions over the same venv with no `.pth` (CPU, paired as below, for
  this tree's line);
- ``traced``: WP_AUTOTRACE=1, instructions (and CPU, paired as above) over ``import only``, the form that
  only imports _preload and calls start(): what a traced start pays anyway.

Forms: ``empty .pth`` (a file with no line: what site pays to read any `.pth`); ``import os`` (the floor:
what site pays for any import line); ``nested exec`` (the line before: both
variables' presence, then the value test and main-interpreter test compiled from a string inside a string,
the inner one skipped once bootstrap is loaded); ``flat exec`` (the same tests in one string, which the
venv's second run compiles again); ``this tree's line`` (presence, then wp_autotrace._preload.start(): the
value test as compiled code; a false word imports the package, which start() takes out of sys.modules
again); ``handover, or-chain`` (the same with the presence tests written as two `in` tests);
``package hand-over`` (the same test, then ``__import__("wp_autotrace").start()``: two tokens fewer, but a
copy older than this layout first on sys.path has no such name and site prints its error at every start);
``names joined`` (any name starting with WP_AUTOTRACE hands over, a substring test in the names joined: one
bytes constant, not two; a WP_AUTOTRACE_LOG alone then pays the false word's import); ``one variable``
(WP_AUTOTRACE's presence alone: an interface change, WP_AUTOTRACE_GUARD alone would no longer trace);
``presence test alone`` (hands over nothing: a lower bound for any line that decides by presence).
``off_once_no_venv``: the same (CPU for ``import os`` and this tree's line only) outside a venv (the base
interpreter's user site, PYTHONUSERBASE), where site reads the line once.

Usage: python bench/pth_line.py [--rounds N] [--json] [--once-cpu]   (needs valgrind; about eight minutes;
--once-cpu: only the CPU pairs outside a venv, no valgrind, seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import startup_cost  # noqa: E402
from instructions import instructions  # noqa: E402

WARMUP = 5
PACKAGE = BENCH.parent / "wp_autotrace"
PRESENT = '(b"WP_AUTOTRACE" in os.environ._data or b"WP_AUTOTRACE_GUARD" in os.environ._data)'
MAIN = 'sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter", lambda: "_signal" in sys.modules)()'
VALUES = ('{os.environ.get("WP_AUTOTRACE", "").strip().lower(), os.environ.get("WP_AUTOTRACE_GUARD", "")'
          '.strip().lower()} - {"", "0", "false", "no", "off"}')
CALL = '__import__("wp_autotrace._preload")._preload.start()'
# The line up to this tree's handover (kept here as the record of what it cost).
NESTED = (f"import os; {PRESENT} and exec('import sys; \"wp_autotrace.runtime.bootstrap\" in sys.modules or "
          f'exec("""import sys; {VALUES} and {MAIN} and {CALL}""")\')')
FLAT = (f"import os; {PRESENT} and exec('import sys; \"wp_autotrace.runtime.bootstrap\" not in sys.modules and "
        f"{VALUES} and {MAIN} and {CALL}')")
# The package's load_and_start() in every venv (what start() calls once its tests pass): bootstrap marked loaded.
# Forms measured outside a venv too ("bare" first: no line).
ONCE = ("bare", "import os", "this tree's line", "empty .pth", "package hand-over", "names joined", "one variable",
        "presence test alone")
# The interpreter the venvs are made from: outside a venv site reads the user site once.
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
STUB_START = '\n\ndef load_and_start():\n    sys.modules["wp_autotrace.runtime.bootstrap"] = sys.modules[__name__]\n'


def forms() -> dict[str, str]:
    """Each form's line."""
    line = (PACKAGE / "_bootstrap.pth").read_text().splitlines()[0]
    head, sep, handover = line.partition(" and __import__(")
    if not sep or not head.startswith("import os; "):
        raise RuntimeError("the .pth line's form changed: update bench/pth_line.py")
    return {"empty .pth": "", "import os": "import os", "nested exec": NESTED, "flat exec": FLAT,
            "this tree's line": line,
            "handover, or-chain": f"import os; {PRESENT} and __import__({handover}",
            "package hand-over": f'{head} and __import__("wp_autotrace").start()',
            "names joined": f'import os; b"WP_AUTOTRACE" in b"".join(os.environ._data) and __import__({handover}',
            "one variable": f'import os; b"WP_AUTOTRACE" in os.environ._data and __import__({handover}',
            "presence test alone": head, "import only": f"import os; {CALL}"}


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """Median and p25-p75 of a[i] - b[i], in ms (inputs in s)."""
    diffs = [(x - y) * 1e3 for x, y in zip(a, b)]
    q = statistics.quantiles(diffs, n=4)
    return {"median": round(statistics.median(diffs), 3), "p25": round(q[0], 3), "p75": round(q[2], 3)}


def _stub(site: Path, python: str) -> None:
    """The stub package in a site-packages folder, compiled by python."""
    (site / "wp_autotrace").mkdir(parents=True)
    (site / "wp_autotrace" / "__init__.py").write_text((PACKAGE / "__init__.py").read_text() + STUB_START)
    subprocess.run([python, "-m", "compileall", "-q", str(site / "wp_autotrace")], check=True,
                   env=startup_cost._clean())


def make(tmp: Path, name: str, line: str | None) -> Path:
    """A venv with the stub package and, unless line is None, the line in its own .pth."""
    venv = startup_cost.make_venv(tmp, name, sys.executable, None)
    site = next((venv / "lib").glob("python3*/site-packages"))
    _stub(site, str(venv / "bin" / "python"))
    if line is not None:
        (site / "zz.pth").write_text(line + "\n")
    return venv


def make_user(tmp: Path, name: str, line: str | None) -> dict[str, str]:
    """No venv: the base interpreter's user site (PYTHONUSERBASE) holding the stub package and, unless line
    is None, the line; site reads it once. The environment that selects it."""
    base = tmp / f"user-{name}"
    site = base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    _stub(site, BASE_PYTHON)
    if line is not None:
        (site / "zz.pth").write_text(line + "\n")
    return startup_cost._clean(PYTHONUSERBASE=str(base))


def cpu(runs: dict[str, tuple[list[str], dict[str, str]]], rounds: int) -> dict[str, list[float]]:
    """Each (argv, env)'s CPU seconds per round, rounds alternating and rotating over them."""
    out: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for r in range(rounds + WARMUP):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            _, c = startup_cost.timed(*runs[name])
            if r >= WARMUP:
                out[name].append(c)
    return out


def passes(venvs: dict[str, Path], env: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """`python -c pass` in each venv, in env."""
    return {k: ([str(v / "bin" / "python"), "-c", "pass"], env) for k, v in venvs.items()}


def second(argv: list[str], env: dict[str, str], tmp: Path) -> int:
    """The instructions of argv's second run (the first warms the file cache and writes any pyc)."""
    instructions(argv, env, tmp)
    return instructions(argv, env, tmp)


def counts(venvs: dict[str, Path], env: dict[str, str], tmp: Path) -> dict[str, int]:
    """Each venv's `python -c pass` instructions."""
    return {name: second([str(venv / "bin" / "python"), "-c", "pass"], env, tmp) for name, venv in venvs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--once-cpu", action="store_true", help="only the CPU of the line outside a venv (seconds)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-pth-"))
    try:
        lines = forms()
        if args.once_cpu:
            users = {k: make_user(tmp, f"form{i}", None if k == "bare" else lines[k])
                     for i, k in enumerate(ONCE[:3])}
            once_cpu = cpu({k: ([BASE_PYTHON, "-c", "pass"], users[k]) for k in users}, args.rounds)
            print(json.dumps({"rounds": args.rounds, "load": os.getloadavg(),
                              "bare_cpu_median_ms": round(statistics.median(once_cpu["bare"]) * 1e3, 3),
                              "off_once_no_venv_cpu_ms": {k: paired(once_cpu[k], once_cpu["bare"])
                                                          for k in ONCE[1:3]}}))
            return 0
        venvs = {"bare": make(tmp, "bare", None)}
        venvs.update((name, make(tmp, f"form{i}", text)) for i, (name, text) in enumerate(lines.items()))
        envs = {"off": startup_cost._clean(), "false_word": startup_cost._clean(WP_AUTOTRACE="0"),
                "traced": startup_cost._clean(WP_AUTOTRACE="1")}
        n = {mode: counts(venvs, env, tmp) for mode, env in envs.items()}
        shown = [k for k in lines if k != "import only"]
        users = {k: make_user(tmp, f"form{i}", None if k == "bare" else lines[k]) for i, k in enumerate(ONCE)}
        once = {k: second([BASE_PYTHON, "-c", "pass"], env, tmp) for k, env in users.items()}
        off_cpu = cpu(passes(venvs, envs["off"]), args.rounds)
        traced_cpu = cpu(passes({k: venvs[k] for k in lines}, envs["traced"]), args.rounds)
        once_cpu = cpu({k: ([BASE_PYTHON, "-c", "pass"], users[k]) for k in ONCE[:3]}, args.rounds)
        false_cpu = cpu(passes({k: venvs[k] for k in ("bare", "this tree's line")}, envs["false_word"]), args.rounds)
        bare_ms = statistics.median(off_cpu["bare"]) * 1e3
        out = {"rounds": args.rounds, "load": os.getloadavg(), "chars": {k: len(v) for k, v in lines.items()},
               "bare": {"instructions": n["off"]["bare"], "cpu_median_ms": round(bare_ms, 3)},
               "off": {k: {"instructions": n["off"][k] - n["off"]["bare"],
                           "cpu_ms": paired(off_cpu[k], off_cpu["bare"])} for k in shown},
               "off_once_no_venv": {k: {"instructions": once[k] - once["bare"],
                                        "cpu_ms": paired(once_cpu[k], once_cpu["bare"]) if k in once_cpu else None}
                                    for k in ONCE[1:]},
               "false_word_instructions": {k: n["false_word"][k] - n["false_word"]["bare"] for k in shown},
               "false_word_cpu_ms": paired(false_cpu["this tree's line"], false_cpu["bare"]),
               "traced_over_import_only": {k: {"instructions": n["traced"][k] - n["traced"]["import only"],
                                               "cpu_ms": paired(traced_cpu[k], traced_cpu["import only"])}
                                           for k in shown}}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
