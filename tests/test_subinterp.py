"""Subinterpreters (issue #35): one tracer per process, in its main interpreter only.

site runs again in every subinterpreter, and with it the .pth line; a second tracer
started there put its TargetFinder in the subinterpreter's sys.meta_path, wrote a
second process_start for the pid, and on 3.13 aborted the process when the
subinterpreter closed (its exit hook's sys._current_frames() made frame objects for
the main interpreter's frames from the subinterpreter's allocator: "free(): invalid
pointer"; 3.12 crashed too, in CPython's test_threads_join_with_no_main). Each test runs
a program untraced, with WP_AUTOTRACE=1 and with the guard alone, on the pyenv builds of
3.12 and 3.13 (the issue's program also on 3.9 and 3.11; skipped where absent), and
wants the same exit status, stdout and stderr every time.

Each Python gets a venv outside the checkout (~/.cache/wp-autotrace-tests/venv-subinterp/<checkout>/py3.X)
with the package installed editable; it is reinstalled when its wp_autotrace.pth is not
the checkout's .pth line (the line is copied at install time).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from .conftest import ROOT, clean_env, events, read_log, run_python

VERSIONS = ("3.12", "3.13")
# The program also on Pythons whose subinterpreters share one GIL and allocator (no crash there,
# but a second tracer all the same): the .pth line's test differs on them (wp_autotrace_start.py says why).
ALL_VERSIONS = ("3.9", "3.11", *VERSIONS)
PYENV = Path.home() / ".pyenv" / "versions"
# Made outside the checkout (about 76 MB a Python: nothing for `git status` to show), one folder per checkout
# (each venv holds an editable install of its own checkout: another worktree's would test other code).
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wp-autotrace-tests"
VENVS = CACHE / "venv-subinterp" / hashlib.sha256(str(ROOT.resolve()).encode()).hexdigest()[:12]
PIP_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300

# The program, on both versions (3.12 has no Interpreter.exec: the low-level module), with a
# thread started and joined inside the subinterpreter, twice over. What the subinterpreter sees is printed:
# its sys.meta_path, any wp_autotrace module loaded there, and its atexit callbacks.
PROGRAM = textwrap.dedent('''
    import sys
    SUB = ("import atexit, sys, threading\\n"
           "print('sub sees', [type(f).__name__ for f in sys.meta_path], "
           "sorted(m for m in sys.modules if m.startswith('wp_autotrace')), atexit._ncallbacks(), flush=True)\\n"
           "t = threading.Thread(target=print, args=('a thread in the subinterpreter',), kwargs={'flush': True})\\n"
           "try:\\n"
           "    t.start(); t.join()\\n"
           "except RuntimeError as e:\\n"  # 3.9: "thread is not supported for isolated subinterpreters"
           "    print(e, flush=True)\\n")
    for _ in range(2):
        if sys.version_info >= (3, 13):
            from test.support import interpreters
            interp = interpreters.create()
            interp.exec(SUB)
            interp.close()
        else:
            import _xxsubinterpreters as interpreters
            interp = interpreters.create()
            interpreters.run_string(interp, SUB)
            interpreters.destroy(interp)
    print("ok", flush=True)
''')

# sink_rare.no_other_interpreter before, while and after a subinterpreter lives (the main interpreter's
# exit hook looks at other threads' frames only when it says True).
ALONE = textwrap.dedent('''
    import sys
    from wp_autotrace.runtime.sink_rare import no_other_interpreter
    if sys.version_info >= (3, 13):
        import _interpreters as low
    else:
        import _xxsubinterpreters as low
    seen = [no_other_interpreter()]
    interp = low.create()
    seen.append(no_other_interpreter())
    low.destroy(interp)
    seen.append(no_other_interpreter())
    print(seen)
''')

# A bounded slice of CPython's own regression tests that create, run threads in, and close
# subinterpreters: test_threading's SubinterpThreadingTests (the crash), and test_interpreters
# (3.12: the whole module, 69 tests; 3.13: test_api, 81 tests; its channels/queues/stress/lifecycle
# parts are left out to bound the run on a loaded machine). About 2 s and 6-12 s a run.
CPYTHON_SLICES = {
    "3.12": ["test.test_threading.SubinterpThreadingTests", "test.test_interpreters"],
    "3.13": ["test.test_threading.SubinterpThreadingTests", "test.test_interpreters.test_api"],
}


def _pyenv_python(minor: str) -> Path | None:
    """The newest pyenv build of a minor version, or None."""
    found = sorted((p for p in PYENV.glob(f"{minor}.*") if re.fullmatch(rf"{re.escape(minor)}\.\d+", p.name)),
                   key=lambda p: int(p.name.rsplit(".", 1)[1]))
    python = found[-1] / "bin" / f"python{minor}" if found else None
    return python if python is not None and python.exists() else None


def _installed_pth(venv: Path, minor: str) -> Path:
    return venv / "lib" / f"python{minor}" / "site-packages" / "wp_autotrace.pth"


def venv_python(minor: str) -> str:
    """A venv of that Python with the checkout installed (editable), made or refreshed; skip if impossible."""
    base = _pyenv_python(minor)
    if base is None:
        pytest.skip(f"Python {minor} is not installed under {PYENV}")
    venv = VENVS / f"py{minor}"
    pth = _installed_pth(venv, minor)
    want = (ROOT / "wp_autotrace" / "_bootstrap.pth").read_bytes()
    if not (pth.exists() and pth.read_bytes() == want):
        try:
            if not (venv / "bin" / "python").exists():
                subprocess.run([str(base), "-m", "venv", str(venv)], check=True, capture_output=True,
                               timeout=PIP_TIMEOUT_S)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--force-reinstall", "-e", str(ROOT)], check=True, capture_output=True,
                           timeout=PIP_TIMEOUT_S)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"cannot build a Python {minor} venv with the package: {exc}")
    return str(venv / "bin" / "python")


def three_ways(python: str, args: list[str], tmp_path: Path) -> dict[str, tuple[int, str, str]]:
    """(exit status, stdout, stderr) untraced, traced and guard-only; the traced log is tmp_path/run.jsonl."""
    envs = {"untraced": clean_env(),
            "traced": clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(tmp_path / "run.jsonl")),
            "guard": clean_env(WP_AUTOTRACE_GUARD="nested-pools")}
    results = {}
    for name, env in envs.items():
        res = run_python(args, env, timeout=RUN_TIMEOUT_S, cwd=tmp_path, python=python)
        results[name] = (res.returncode, res.stdout, res.stderr)
    return results


@pytest.mark.parametrize("minor", ALL_VERSIONS)
def test_subinterpreter_sees_what_it_sees_untraced(minor: str, tmp_path: Path) -> None:
    """The issue's program: same output and exit traced, guarded and untraced; the subinterpreter
    holds no finder, no wp_autotrace module and no atexit callback; one process_start for the pid."""
    python = venv_python(minor)
    (tmp_path / "prog.py").write_text(PROGRAM)
    got = three_ways(python, [str(tmp_path / "prog.py")], tmp_path)
    untraced = got["untraced"]
    # (a venv's setuptools may add its DistutilsMetaFinder to sys.meta_path: only ours is looked for)
    assert untraced[0] == 0 and untraced[1].count("] [] 0\n") == 2 and "TargetFinder" not in untraced[1], untraced
    assert got["traced"] == untraced
    assert got["guard"] == untraced
    recs = read_log(tmp_path / "run.jsonl")
    starts = events(recs, "process_start")
    assert len(starts) == 1 and len(events(recs, "process_exit")) == 1
    assert not [r for r in recs if r["event"] == "tracer_error"]


@pytest.mark.parametrize("minor", VERSIONS)
def test_exit_hook_looks_at_threads_only_alone(minor: str) -> None:
    """The main interpreter's exit hook walks other threads' frames (sys._current_frames(), every
    interpreter's on 3.12+) only while no subinterpreter exists."""
    python = venv_python(minor)
    res = run_python(["-c", ALONE], clean_env(), timeout=RUN_TIMEOUT_S, python=python)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[True, False, True]"


def _outcome(result: tuple[int, str, str]) -> tuple[int, list[str]]:
    """A unittest run's exit status and its per-test lines (-v), timings taken out."""
    code, _, err = result
    lines = [re.sub(r"\d+\.\d+s", "Ns", line) for line in err.splitlines()
             if " ... " in line or line.startswith(("Ran ", "OK", "FAILED"))]
    return code, lines


@pytest.mark.slow
@pytest.mark.parametrize("minor", VERSIONS)
def test_cpython_subinterpreter_tests_pass_traced(minor: str, tmp_path: Path) -> None:
    """CPython's own subinterpreter tests (CPYTHON_SLICES) give the same results traced as untraced."""
    python = venv_python(minor)
    got = three_ways(python, ["-m", "unittest", "-v", *CPYTHON_SLICES[minor]], tmp_path)
    untraced = _outcome(got["untraced"])
    assert untraced[0] == 0 and untraced[1][-1].startswith("OK"), got["untraced"][2][-2000:]
    assert _outcome(got["traced"]) == untraced, got["traced"][2][-2000:]
    assert _outcome(got["guard"]) == untraced, got["guard"][2][-2000:]
