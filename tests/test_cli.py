"""wp-autotrace run and doctor, end to end (no torch needed)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from wp_autotrace import __version__
from wp_autotrace.cli.base import dumps
from wp_autotrace.cli.main import build_parser

from .conftest import ROOT, clean_env, events, read_log, run_python, wait_until

# Advice that names the package on an index where it has never been published.
INDEX_ADVICE = re.compile(r"pip install wp-autotrace(?![\w/.-])")


def test_run_sets_env_execs_and_says_where(tmp_path: Path) -> None:
    """`wp-autotrace run --log P -- cmd` runs cmd traced (exit code kept) and says where the log goes."""
    log = tmp_path / "via-run.jsonl"
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c",
                      "import os; print(os.environ['WP_AUTOTRACE']); raise SystemExit(7)"], clean_env())
    assert res.returncode == 7 and res.stdout == "1\n"
    assert f"wp-autotrace: logging to {log}" in res.stderr
    starts = events(read_log(log), "process_start")
    assert len(starts) == 1 and starts[0]["role"] == "main"


def test_run_default_log_and_bad_command(tmp_path: Path) -> None:
    """`run` without --log logs in the cwd; a missing program exits 127, no command 64."""
    res = run_python(["-m", "wp_autotrace", "run", "--", sys.executable, "-c", "pass"], clean_env(), cwd=tmp_path)
    assert res.returncode == 0
    (log,) = tmp_path.glob("wp_autotrace-*.jsonl")
    assert str(log) in res.stderr
    res = run_python(["-m", "wp_autotrace", "run", "--", "/nonexistent/prog"], clean_env(), cwd=tmp_path)
    assert res.returncode == 127 and "cannot run" in res.stderr
    res = run_python(["-m", "wp_autotrace", "run"], clean_env(), cwd=tmp_path)
    assert res.returncode == 64


def test_doctor_ok_here() -> None:
    """`doctor` in a good install: .pth found, a child really traces, exit 0."""
    res = run_python(["-m", "wp_autotrace", "doctor"], clean_env(), timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[ok  ] .pth file:" in res.stdout
    assert "wrote 1 process_start record(s)" in res.stdout
    assert res.stdout.rstrip().endswith("all good")


def test_doctor_says_the_shells_own_log(tmp_path: Path) -> None:
    """doctor's child writes a log of its own; the shell's WP_AUTOTRACE_LOG is what every traced run started from it
    writes, so doctor says it: a log the start refuses (a missing folder, a folder, a file others may write) is a
    problem, each as a traced run started there meets it (it prints one line and runs untraced, checked here);
    a good one a note. Fails where doctor dropped every WP_AUTOTRACE variable and said "all good" whatever they were."""
    from wp_autotrace.cli.doctor import shell_log

    shared = tmp_path / "shared.jsonl"
    shared.write_text("")
    shared.chmod(0o666)
    for log, problem in ((tmp_path / "missing" / "x.jsonl", "does not exist"), (tmp_path, "not a regular file"),
                         (shared, "writable by group or others"), (tmp_path / "new.jsonl", "")):
        said: list[tuple[bool | None, str]] = []
        shell_log(lambda ok, text, said=said: said.append((ok, text)), str(log))
        assert len(said) == 1 and said[0][0] is (False if problem else None) and problem in said[0][1], said
        traced = run_python(["-c", "print('ran')"], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                                                              WP_AUTOTRACE_SAMPLE_INTERVAL="0"), cwd=tmp_path)
        assert traced.stdout == "ran\n" and ("running untraced" in traced.stderr) == bool(problem), traced.stderr
    res = run_python(["-m", "wp_autotrace", "doctor"], clean_env(WP_AUTOTRACE_LOG=str(tmp_path / "missing" / "x")),
                     timeout=120)
    assert res.returncode == 1 and "[FAIL] WP_AUTOTRACE_LOG=" in res.stdout, res.stdout


def test_doctor_says_the_shell_runs_below_a_traced_run(tmp_path: Path) -> None:
    """A shell below a traced run (a traced program's terminal) passes WP_AUTOTRACE_RUN on: a program started from it
    with WP_AUTOTRACE=1 joins that run, as shown here, and doctor says so; it said nothing of it (its own child runs
    without it) and, of the shell's log, that every traced run started there appends to it as a run of its own."""
    log = tmp_path / "run.jsonl"
    outer = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    code = ("import os, subprocess, sys; print(os.environ['WP_AUTOTRACE_RUN']); sys.stdout.flush(); "
            "subprocess.run([sys.executable, '-c', 'pass']); "
            "subprocess.run([sys.executable, '-m', 'wp_autotrace', 'doctor'])")
    res = run_python(["-c", code], outer, timeout=180)
    run_id = res.stdout.splitlines()[0]
    starts = [r for r in read_log(log) if r["event"] == "process_start"]
    assert {r["run"] for r in starts} == {run_id}, starts  # the child joined the shell's run
    said = f"[note] WP_AUTOTRACE_RUN={run_id} (set in this shell): it runs below the traced run"
    assert said in res.stdout, res.stdout


def test_doctor_explains_a_venv_without_the_package(tmp_path: Path) -> None:
    """`doctor --python` on a venv without the package says so and exits 1."""
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    res = run_python(["-m", "wp_autotrace", "doctor", "--python", str(python)], clean_env(), timeout=120)
    assert res.returncode == 1
    assert "wp_autotrace importable there: no" in res.stdout
    assert "wrote 0 process_start record(s)" in res.stdout
    assert "pip install <path to a wp-autotrace checkout>" in res.stdout
    assert not INDEX_ADVICE.search(res.stdout + res.stderr), res.stdout


def test_no_advice_names_an_unpublished_index_package() -> None:
    """Neither README nor the CLI tells anyone to `pip install wp-autotrace` from an index."""
    for path in (ROOT / "README.md", ROOT / "wp_autotrace" / "cli" / "main.py"):
        assert not INDEX_ADVICE.search(path.read_text()), path


def test_usage_errors_exit_64() -> None:
    """Unknown or missing subcommands exit 64 with usage."""
    res = run_python(["-m", "wp_autotrace", "frobnicate"], clean_env())
    assert res.returncode == 64 and "usage:" in res.stderr
    res = run_python(["-m", "wp_autotrace"], clean_env())
    assert res.returncode == 64
    assert os.path.exists(sys.executable)


def bare_python(tmp_path: Path) -> str:
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    return str(env_dir / "bin" / "python")


def test_run_refuses_an_interpreter_without_the_package(tmp_path: Path) -> None:
    """The command's Python lacks wp_autotrace: run says why, runs nothing, writes no log, exits 78."""
    python = bare_python(tmp_path)
    marker = tmp_path / "ran"
    res = run_python(["-m", "wp_autotrace", "run", "--", python, "-c", f"open({str(marker)!r}, 'w')"], clean_env(),
                     cwd=tmp_path, timeout=120)
    assert res.returncode == 78, res.stderr
    assert f"{python} cannot trace: wp_autotrace is not importable there; nothing was run" in res.stderr
    assert f"doctor --python {python}" in res.stderr
    assert not marker.exists() and not list(tmp_path.glob("wp_autotrace-*.jsonl"))


def test_run_checks_the_python_on_path_for_other_commands(tmp_path: Path) -> None:
    """A non-Python command (sh) is checked against the python first on PATH."""
    python = bare_python(tmp_path)
    env = clean_env(PATH=f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}")
    res = run_python(["-m", "wp_autotrace", "run", "--", "sh", "-c", "python -c pass"], env, cwd=tmp_path,
                     timeout=120)
    assert res.returncode == 78 and "cannot trace" in res.stderr, res.stderr


def test_run_prints_the_short_answer_and_keeps_signal_codes(tmp_path: Path) -> None:
    """After the program: answer, findings and the log's path on stderr; stdout untouched; a program ended by
    signal N ends run by signal N too (its parent sees what it would see untraced)."""
    log = tmp_path / "r.jsonl"
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c",
                      "import os, signal; print('out'); os.kill(os.getpid(), signal.SIGTERM)"], clean_env())
    assert res.returncode == -signal.SIGTERM
    assert res.stdout == "out\n"
    lines = res.stderr.splitlines()
    after = lines[lines.index("wp-autotrace:") + 1:]
    assert after[1].startswith("  - ") and after[-2:] == [f"  log: {log}", f"  full report: wp-autotrace report {log}"]
    assert "No compile pool was made" in after[0]  # the answer paragraph first, pools first (report.summary_lines)


def test_run_says_when_no_log_was_written(tmp_path: Path) -> None:
    """The program ran without tracing (here: a shell that runs python -S): run says so, keeps its code."""
    log = tmp_path / "never.jsonl"
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(log), "--", "sh", "-c",
                      f"exec {sys.executable} -S -c 'raise SystemExit(3)'"],
                     clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    assert res.returncode == 3 and not log.exists(), res.stderr
    assert f"no log was written ({log}): tracing did not start" in res.stderr


def test_run_with_a_directory_as_its_log_says_no_log_was_written(tmp_path: Path) -> None:
    """`run --log DIR`: no record can be written there, and the program runs untraced with its own code. run said
    "logging to DIR", then a summary of "no usable record" that pointed to `wp-autotrace report DIR`, a report of
    nothing; it says no log was written, why, and what to name instead."""
    folder = tmp_path / "logs"
    folder.mkdir()
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(folder), "--", sys.executable, "-c",
                      "raise SystemExit(3)"], clean_env())
    assert res.returncode == 3 and list(folder.iterdir()) == [], res.stderr
    assert (f"no log was written: {folder} is a directory, and the program ran untraced; name a file in it "
            f"(--log {folder / 'run.jsonl'})") in res.stderr, res.stderr
    assert "logging to" not in res.stderr and "full report" not in res.stderr and "no usable record" not in res.stderr


def test_run_refuses_python_dash_s(tmp_path: Path) -> None:
    """python -S skips site and so the .pth: refused before anything runs."""
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(tmp_path / "l.jsonl"), "--", sys.executable, "-S",
                      "-c", "pass"], clean_env())
    assert res.returncode == 78 and "-S skips site" in res.stderr


def caught_signals(pid: int) -> int:
    """The mask of signals pid has a handler for (SigCgt in /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("SigCgt:", 1)[1].split()[0], 16)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_forwards_signals_to_the_program(tmp_path: Path, sig: int) -> None:
    """A signal sent to the run command reaches the program, which ends as it chooses."""
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n"
            "signal.signal(signal.SIGINT, lambda *a: sys.exit(6))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "s.jsonl"), "--",
                             sys.executable, "-c", code], env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        # run installs its forwarding handlers (SIGINT, SIGTERM, then SIGHUP) once the program has started, so
        # 'ready' can come first: wait until the kernel shows SIGHUP caught, not a 0.2 s guess.
        wait_until(lambda: caught_signals(proc.pid) & (1 << (signal.SIGHUP - 1)), 30,
                   what="run's signal forwarding installed")
        proc.send_signal(sig)  # to the run command only, not its group
        assert proc.wait(30) == (5 if sig == signal.SIGTERM else 6)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()


def test_version_and_help_speak_to_users() -> None:
    """--version; --help says to set WP_AUTOTRACE=1, has no RST markup; a missing command is named in user terms."""
    res = run_python(["-m", "wp_autotrace", "--version"], clean_env())
    assert res.returncode == 0 and res.stdout.strip() == f"wp-autotrace {__version__}"
    res = run_python(["-m", "wp_autotrace", "--help"], clean_env())
    assert res.returncode == 0 and "WP_AUTOTRACE=1" in res.stdout and "``" not in res.stdout
    res = run_python(["-m", "wp_autotrace"], clean_env())
    assert res.returncode == 64
    assert "choose a command: report, export, run, watch, cleanup, doctor" in res.stderr
    assert "cmd" not in res.stderr.replace("command", "")


def test_every_argument_has_help_with_its_default() -> None:
    """Each subcommand's arguments have help; each option's help states its default."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, p in sub.choices.items():
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.dest} has no help"
            if action.option_strings:
                assert "default" in action.help, f"{name} {action.option_strings[0]}: no default in its help"


def test_the_command_never_traces_itself(tmp_path: Path) -> None:
    """With WP_AUTOTRACE=1 exported, `python -m wp_autotrace` (and the console script) write no log; a plain
    interpreter in the same environment does."""
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-m", "wp_autotrace", "--version"], env, cwd=tmp_path)
    assert res.returncode == 0 and __version__ in res.stdout
    script = Path(sys.executable).parent / "wp-autotrace"
    if script.exists():
        res = run_python([str(script), "--version"], env, cwd=tmp_path)
        assert res.returncode == 0 and __version__ in res.stdout
    assert not list(tmp_path.glob("*.jsonl"))
    assert run_python(["-c", "pass"], env, cwd=tmp_path).returncode == 0
    assert len(list(tmp_path.glob("*.jsonl"))) == 1


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_reader_gone_mid_write_is_output_closed(unbuffered: str) -> None:
    """The reader takes the first bytes of an output larger than a pipe holds and goes (`report --html -o - |
    head -c 100`): exit 74, never 0. Under PYTHONUNBUFFERED the text layer writes to the raw fd and drops
    what a short write left over, silently."""
    code = ("import sys\nfrom wp_autotrace.cli.base import OutputClosed, write_out\ntry:\n"
            " write_out('x' * 400_000)\nexcept OutputClosed:\n sys.exit(74)\n")
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdout is not None and p.stdout.read(100)  # it is writing: now the reader goes
    p.stdout.close()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 74, err


def test_nested_run_leaves_the_answer_to_the_inner_run(tmp_path: Path) -> None:
    """`wp-autotrace run -- wp-autotrace run -- PROG`: the outer run has nothing of its own to trace (the
    command never traces itself) and says nothing of its own; the inner run traces PROG and answers, once.
    Never "tracing did not start; check with: wp-autotrace doctor" on a working install."""
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    prog = [sys.executable, "-c", "print('hi')"]
    res = run_python(["-m", "wp_autotrace", "run", "--", "wp-autotrace", "run", "--", *prog], env,
                     cwd=str(tmp_path))
    assert (res.returncode, res.stdout) == (0, "hi\n"), res.stderr
    assert "did not start" not in res.stderr and res.stderr.count("full report:") == 1, res.stderr
    outer, inner = tmp_path / "outer.jsonl", tmp_path / "inner.jsonl"
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(outer), "--", sys.executable, "-m", "wp_autotrace",
                      "run", "--log", str(inner), "--", *prog], env, cwd=str(tmp_path))
    assert (res.returncode, res.stdout) == (0, "hi\n"), res.stderr
    assert "did not start" not in res.stderr and res.stderr.count("full report:") == 1, res.stderr
    assert events(read_log(inner), "process_start") and not outer.exists()


@pytest.mark.parametrize("value", [
    {"a": [], "b": {}, "c": [[{}]], "d": None, "e": True, "1": -0.0},
    {"big": 10**30, "tiny": 5e-324, "max": 1.7976931348623157e308, "sum": 0.1 + 0.2, "neg": -10**40},
    {"text": "é\u2028\ufeff\x00\x7f/\\\b\f\n\r\t\"</script>", "pair": "\ud83d\ude00", "run": ["x\udcff"]},
    ["\udcff", {"k\ud800": 1}],  # lone surrogates (a log's undecodable bytes, kept by surrogateescape)
    {"obj": object, "tuple": (1, "2")},  # default=str, and tuples as lists
])
def test_indented_json_is_json_indent_byte_for_byte(value: object) -> None:
    """report --json's text (cli.base.dumps, indent 1, written by the C encoder and indented by msgspec) is
    exactly json.dumps's with the same indent (0 too: a newline per item)."""
    for indent in (0, 1, 2):
        assert dumps(value, indent=indent) == json.dumps(value, indent=indent, allow_nan=False, default=str)
