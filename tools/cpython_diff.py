#!/usr/bin/env python3
"""The host against CPython's own regression tests: a slice of ``python -m test`` untraced, then traced,
compared test by test (issue 34).

    tools/cpython_diff.py PYTHON [--venv DIR] [--tests T ...] [-j N] [--out DIR]

PYTHON is an interpreter whose standard library ships ``Lib/test`` (pyenv's builds do). With ``--venv
DIR`` a venv of it is made there (once) and this repository installed into it (a wheel build, as CI's);
without, PYTHON must already have wp-autotrace installed. Both runs use the same interpreter, flags and
test list; the traced one adds ``WP_AUTOTRACE=1`` and ``WP_AUTOTRACE_LOG`` (in the output folder, never
the tests' cwd). The two runs go side by side (each in a cwd of its own): the slice spends most of its time
in the tests' own sleeps and timeouts (about 20 s of CPU in 150 s on 2 cores), so the pair takes about as long
as the traced run alone. Each test's outcome (pass, fail, skip, from ``--junit-xml``) is compared; a test file
that differs is run again, both ways, to tell a difference that repeats from a flaky test. Exit status 0
when no difference repeats (and the traced run did write a log), 1 otherwise.

A test file regrtest reports as failed or skipped as a whole (no test cases: an import error, a missing
resource) is compared too, by the summary's own lists.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The slice (test files that start, wait for, signal, fork and count descriptors), the pool,
# temp-file and fault-handler ones that finish in a few minutes on 2 cores, and the two that read the import
# system's state the tracer adds to (sys.meta_path's finders: test_sys puts them in a set).
DEFAULT_TESTS = (
    "test_subprocess", "test_signal", "test_os", "test_pty", "test_wait3", "test_wait4", "test_fork1",
    "test_atexit", "test_threading", "test_faulthandler", "test_tempfile", "test_shutil",
    "test_asyncio.test_subprocess", "test_multiprocessing_main_handling", "test_sys", "test_import",
)
FILE_TIMEOUT_S = 900  # regrtest's --timeout: one test file stuck is killed, not the whole run
TRACE_ENV_PREFIX = "WP_AUTOTRACE"
OUTCOMES = ("pass", "fail", "skip")


def make_venv(base: str, venv: str) -> str:
    """A venv of base at venv with this repository installed (once); its python."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([base, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", REPO], check=True)
    return python


def clean_env() -> dict[str, str]:
    """This environment without any WP_AUTOTRACE* variable: the untraced run."""
    return {k: v for k, v in os.environ.items() if not k.startswith(TRACE_ENV_PREFIX)}


def run_tests(python: str, tests: list[str], jobs: int, out: str, name: str, log: str | None) -> dict[str, str]:
    """One regrtest run; {test id: outcome}, plus {"<file> (whole file)": outcome} for files without cases."""
    env = clean_env()
    if log is not None:
        env.update({"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": log})
    xml = os.path.join(out, f"{name}.xml")
    # No -j: every test file runs in regrtest's own process, whose descriptors are those of a plain
    # interpreter; a -j worker holds regrtest's pipes, and fd-layout tests (test_os's closerange) then
    # skip both ways, hiding a difference.
    parallel = [f"-j{jobs}"] if jobs > 0 else []
    argv = [python, "-m", "test", *parallel, "--timeout", str(FILE_TIMEOUT_S), "--junit-xml", xml, *tests]
    started = time.monotonic()
    # Its own temporary cwd: regrtest writes build files there; never the repository, and never the cwd of
    # the other run going on beside it.
    cwd = os.path.join(out, f"{name}-cwd")
    os.makedirs(cwd, exist_ok=True)
    with open(os.path.join(out, f"{name}.txt"), "wb") as text:
        proc = subprocess.run(argv, env=env, stdout=text, stderr=subprocess.STDOUT, cwd=cwd, check=False)
    took = time.monotonic() - started
    print(f"  {name}: exit {proc.returncode}, {took:.0f} s", flush=True)
    results = read_junit(xml) if os.path.exists(xml) else {}
    with open(os.path.join(out, f"{name}.txt"), encoding="utf-8", errors="replace") as text:
        results.update(whole_files(text.read(), tests, results))
    return results


def read_junit(path: str) -> dict[str, str]:
    """{test id: pass|fail|skip} from regrtest's --junit-xml."""
    results: dict[str, str] = {}
    for case in ET.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        outcome = "fail" if tags & {"failure", "error"} else "skip" if "skipped" in tags else "pass"
        test_id = case.get("name", "?")
        # A test run twice (subtests, a rerun) keeps its worst outcome.
        if results.get(test_id) != "fail":
            results[test_id] = outcome
    return results


def whole_files(summary: str, tests: list[str], cases: dict[str, str]) -> dict[str, str]:
    """Test files regrtest failed or skipped as a whole, by its summary lists (no cases of theirs)."""
    found: dict[str, str] = {}
    mode = ""
    for line in summary.splitlines():
        words = line.split()
        if " test failed:" in line or " tests failed:" in line:
            mode = "fail"
        elif " skipped:" in line and line[:1].isdigit():
            mode = "skip"
        elif not line.startswith("    "):
            mode = ""
        elif mode:
            for word in words:
                if word in tests and not any(k.startswith(f"test.{word}.") for k in cases):
                    found[f"{word} (whole file)"] = mode
    return found


def differences(untraced: dict[str, str], traced: dict[str, str]) -> dict[str, tuple[str, str]]:
    """{test id: (untraced outcome, traced outcome)} where they differ ("absent" where one lacks it)."""
    return {t: (untraced.get(t, "absent"), traced.get(t, "absent"))
            for t in sorted(set(untraced) | set(traced)) if untraced.get(t) != traced.get(t)}


def test_file(test_id: str, tests: list[str]) -> str:
    """The slice entry a test id belongs to (test.test_os.FileTests.x -> test_os)."""
    for name in sorted(tests, key=len, reverse=True):
        if test_id.startswith(f"test.{name}.") or test_id.startswith(f"{name} "):
            return name
    return test_id.split(".")[1] if test_id.startswith("test.") else test_id


def counts(results: dict[str, str]) -> str:
    return ", ".join(f"{o} {sum(1 for v in results.values() if v == o)}" for o in OUTCOMES)


def log_records(log: str) -> int:
    """process_start records in the traced run's log: proof the tracer ran."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if '"event":"process_start"' in line)
    except OSError:
        return 0


def both_ways(python: str, tests: list[str], jobs: int, out: str, suffix: str,
             log: str) -> tuple[dict[str, str], dict[str, str]]:
    """The untraced and the traced run of tests, side by side; (untraced, traced) results."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        untraced = pool.submit(run_tests, python, tests, jobs, out, f"untraced{suffix}", None)
        traced = pool.submit(run_tests, python, tests, jobs, out, f"traced{suffix}", log)
        return untraced.result(), traced.result()


def compare(python: str, tests: list[str], jobs: int, out: str) -> int:
    """Both runs, the differences, a second look at the files that differ; the exit status."""
    log = os.path.join(out, "trace.jsonl")
    untraced, traced = both_ways(python, tests, jobs, out, "", log)
    starts = log_records(log)
    if not untraced or not traced:
        print(f"a run gave no results (see {out}/untraced.txt, traced.txt)")
        return 1
    print(f"untraced: {counts(untraced)}\ntraced:   {counts(traced)}   ({starts} process_start records logged)")
    diff = differences(untraced, traced)
    if diff:
        again = sorted({test_file(t, tests) for t in diff})
        print(f"{len(diff)} difference(s) in {', '.join(again)}: running those files again, both ways")
        diff2 = differences(*both_ways(python, again, jobs, out, "-again", log))
        flaky = {t: d for t, d in diff.items() if t not in diff2}
        diff = {t: d for t, d in diff.items() if t in diff2}
        for test_id, (a, b) in flaky.items():
            print(f"  flaky (not repeated): {test_id}: untraced {a}, traced {b}")
    for test_id, (a, b) in diff.items():
        print(f"  DIFFERENT: {test_id}: untraced {a}, traced {b}")
    print(f"{len(diff)} difference(s) that repeat")
    if starts == 0:
        print("the traced run logged no process_start: the tracer did not run (is wp-autotrace installed?)")
        return 1
    return 1 if diff else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("python", help="an interpreter that ships Lib/test (pyenv's builds do)")
    parser.add_argument("--venv", help="make a venv of PYTHON here (once) with this repository installed")
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="regrtest names (default: the slice)")
    parser.add_argument("-j", "--jobs", type=int, default=0,
                        help="regrtest workers (default 0: none, every file in one process, as a plain run)")
    parser.add_argument("--out", help="folder for the outputs and the traced log (default: a new temporary one)")
    args = parser.parse_args(argv)
    # A background job of a non-interactive shell (CI's `cmd &`, nohup) starts with SIGINT ignored, and its
    # children inherit that: test_signal's and test_threading's interrupt tests then fail, or hang on 3.13,
    # both ways. The tests get the signals a terminal's interpreter has.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    # The tests run with their output folder as cwd: a relative interpreter path (CI's .venv-ci/bin/python)
    # is made absolute here, never resolved through its symlink (that would leave the venv).
    given = os.path.abspath(args.python) if os.sep in args.python else args.python
    python = make_venv(given, os.path.abspath(args.venv)) if args.venv else given
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="cpython-diff-")
    os.makedirs(out, exist_ok=True)
    probe = subprocess.run([python, "-c", "import platform, test.libregrtest; print(platform.python_version())"],
                           capture_output=True, text=True, env=clean_env())
    if probe.returncode:
        print(f"{python}: no regression tests (Lib/test) in this Python; pyenv's builds ship them")
        return 2
    version = probe.stdout.strip()
    print(f"Python {version}: {len(args.tests)} test entries, -j{args.jobs}", flush=True)
    started = time.monotonic()
    status = compare(python, args.tests, args.jobs, out)
    print(f"took {time.monotonic() - started:.0f} s")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"python": version, "tests": args.tests, "status": status}, f)
    if status == 0 and not args.out:  # nothing to look at: leave no temporary folder behind
        shutil.rmtree(out, ignore_errors=True)
        print("the outputs were removed (nothing to look at; --out DIR keeps them)")
    else:  # named only once it is sure to stay
        print(f"outputs in {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
