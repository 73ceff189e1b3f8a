"""The log is safe (issue 15): never the host's fd, never another user's file, never glued; safe export;
fork-then-exec without false findings; secrets redacted. No torch needed."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.read.check import redact_cmd
from wp_autotrace.cli.export import CANT_CREATE
from wp_autotrace.cli.main import main
from wp_autotrace.cli.outfile import open_output, write_file
from wp_autotrace.common import redact
from wp_autotrace.common.vocab import HELPER_ROLES
from wp_autotrace.runtime.sink import RECORD_START, Sink, open_log
from wp_autotrace.runtime.sink_rare import default_log_name

from .conftest import ROOT, clean_env, events, read_log, run_python, tiny_tmpfs

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (foreign owners, tmpfs mounts)")
# A uid with no passwd entry: the "other local user" of the threat model.
OTHER_UID = 4242


def traced(log: Path, **extra: str) -> dict[str, str]:
    return clean_env(**{"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_SAMPLE_INTERVAL": "0.02",
                        **extra})


def parse_framed(data: bytes) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Records and unparsable lines of a log; fails if any line holds a fragment glued to a record."""
    records, fragments = [], []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            assert line.find(b'{"v":', 1) == -1, f"a fragment swallowed a record: {line[:120]!r}"
            fragments.append(line)
    return records, fragments


# -- 1. the sink's fd -----------------------------------------------------------

CLOSERANGE = textwrap.dedent('''
    import json, os, sys, time
    if sys.argv[2] == "unlink":
        os.unlink(os.environ["WP_AUTOTRACE_LOG"])
    os.closerange(3, 1024)                    # as daemons do
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"my data")
    json.dumps([1])                           # a traced call: call and return records
    time.sleep(0.3)                           # the sampler writes tree records meanwhile
    print("done")
''')


@pytest.mark.parametrize("case", ["reopen", "unlink"])
def test_closed_and_reused_fd_never_receives_records(case: str, tmp_path: Path) -> None:
    """Host closes every fd and opens its own file: the file stays clean; records continue (or stop cleanly)."""
    script, mine, log = tmp_path / "d.py", tmp_path / "mine.txt", tmp_path / "run.jsonl"
    script.write_text(CLOSERANGE)
    res = run_python([str(script), str(mine), case], traced(log, WP_AUTOTRACE_TARGETS="json:dumps"), timeout=30)
    assert (res.returncode, res.stdout) == (0, "done\n"), res.stderr
    assert mine.read_bytes() == b"my data"
    if case == "reopen":
        assert res.stderr == ""
        recs = read_log(log)
        assert [r["event"] for r in recs if r["event"] in ("call", "return", "process_exit")] == [
            "call", "return", "process_exit"], "records stopped after the fd was reused"
    else:  # the log is gone: one warning, then nothing anywhere
        assert res.stderr.count("wp-autotrace:") == 1 and "records are being dropped" in res.stderr, res.stderr
        assert not log.exists()


STDERR_CLOSED = textwrap.dedent('''
    import os, sys
    from wp_autotrace.runtime import bootstrap
    from wp_autotrace.runtime import sink
    f = open(sys.argv[1], "w")                # takes fd 2: the host started with 2>&-
    assert f.fileno() == 2, f.fileno()
    f.write("results\\n"); f.flush()
    sink.warn("late warning")
    bootstrap._runtime.sink.error("probe", RuntimeError("boom"))
    f.write("more\\n"); f.close()
''')


def test_warnings_never_land_in_a_file_that_took_fd_2(tmp_path: Path) -> None:
    """Started with 2>&-: results.txt takes fd 2 and never receives wp-autotrace text; the log gets it."""
    script, results, log = tmp_path / "s.py", tmp_path / "results.txt", tmp_path / "run.jsonl"
    script.write_text(STDERR_CLOSED)
    cmd = f'exec "{sys.executable}" "{script}" "{results}" 2>&-'
    res = subprocess.run(["sh", "-c", cmd], env=traced(log), capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stdout
    assert results.read_text() == "results\nmore\n"
    errors = events(read_log(log), "tracer_error")
    assert {e["error"] for e in errors} >= {"late warning", "RuntimeError: boom"}
    assert len([e for e in errors if "boom" in e["error"]]) == 1  # logged once, not twice


def test_warnings_go_to_stderr_while_it_is_the_original(tmp_path: Path) -> None:
    """The positive control: with fd 2 untouched, a warning is printed once."""
    log = tmp_path / "run.jsonl"
    code = "from wp_autotrace.runtime import sink; sink.warn('hello'); sink.warn('hello')"
    res = run_python(["-c", code], traced(log))
    assert res.stderr == "wp-autotrace: hello\n"


# -- 2. ownership ---------------------------------------------------------------


def test_existing_log_must_be_private_regular_and_single_link(tmp_path: Path) -> None:
    """Group/other-writable or hard-linked existing logs are refused; this user's 0600 file is appended to."""
    ok = tmp_path / "ok.jsonl"
    ok.touch(0o600)
    fd, identity = open_log(str(ok), create=False)
    os.close(fd)
    assert identity == (ok.stat().st_dev, ok.stat().st_ino)
    wide = tmp_path / "wide.jsonl"
    wide.touch()
    wide.chmod(0o666)
    with pytest.raises(OSError, match="writable by group or others"):
        open_log(str(wide))
    linked = tmp_path / "linked.jsonl"
    os.link(ok, linked)
    with pytest.raises(OSError, match="2 hard links"):
        open_log(str(linked))
    with pytest.raises(FileNotFoundError):  # descendants never create
        open_log(str(tmp_path / "new.jsonl"), create=False)


def test_world_writable_log_refused_end_to_end(tmp_path: Path) -> None:
    """A pre-created 0666 WP_AUTOTRACE_LOG: one warning, untraced, file untouched, same stdout and exit code."""
    log = tmp_path / "run.jsonl"
    log.touch()
    log.chmod(0o666)
    res = run_python(["-c", "print('hi')"], traced(log))
    assert (res.returncode, res.stdout) == (0, "hi\n")
    assert res.stderr.count("wp-autotrace:") == 1 and "writable by group or others" in res.stderr
    assert log.stat().st_size == 0


@pytest.fixture
def shared() -> Any:
    """A sticky world-writable directory both users can reach (tmp_path's parents are 0700)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="wp-i15-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as_other_user(fn: Any) -> None:
    """Run fn in a forked child with OTHER_UID (no passwd entry needed)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0


@needs_root
def test_foreign_log_refused(shared: Path) -> None:
    """Another user pre-creates WP_AUTOTRACE_LOG 0666: the victim refuses it; nothing is written into it."""
    log = shared / "run.jsonl"

    def plant() -> None:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, 0o666)
        os.close(fd)

    _as_other_user(plant)
    assert log.stat().st_uid == OTHER_UID
    res = run_python(["-c", "print('hi')", "--token=SECRET"], traced(log))
    assert (res.returncode, res.stdout) == (0, "hi\n")
    assert res.stderr.count("wp-autotrace:") == 1 and f"belongs to uid {OTHER_UID}" in res.stderr, res.stderr
    assert log.stat().st_size == 0


@needs_root
def test_predictable_default_name_cannot_collide(shared: Path) -> None:
    """The default name has 32 random bits; an attacker's file at the old predictable names is never used."""
    host = os.uname().nodename
    pid_now = os.getpid()
    planted = [shared / f"wp_autotrace-{host}-{p}.jsonl" for p in range(pid_now, pid_now + 200)]

    def plant() -> None:
        for path in planted:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(fd, 0o666)
            os.close(fd)

    _as_other_user(plant)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-c", "print('hi')"], env, cwd=shared)
    assert (res.returncode, res.stdout, res.stderr) == (0, "hi\n", "")
    assert all(p.stat().st_size == 0 for p in planted)
    (mine,) = [p for p in shared.glob("wp_autotrace-*.jsonl") if p not in planted]
    assert re.fullmatch(rf"wp_autotrace-{re.escape(host)}-\d+-[0-9a-f]{{8}}\.jsonl", mine.name)
    assert mine.stat().st_uid == 0 and stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert default_log_name("h", 1) != default_log_name("h", 1)


# -- 3. framing -------------------------------------------------------------------


def test_each_record_is_framed_by_a_leading_newline(tmp_path: Path) -> None:
    """A fragment already in the file (a killed writer) ends at the next record's newline."""
    log = tmp_path / "f.jsonl"
    sink = Sink(str(log), "h", "main")
    with open(log, "ab") as f:
        f.write(b'{"v":1,"event":"call","torn')
    sink.emit("role", role="x")
    records, fragments = parse_framed(log.read_bytes())
    assert [r["event"] for r in records] == ["role"] and fragments == [b'{"v":1,"event":"call","torn']
    assert log.read_bytes().endswith(b"\n") and RECORD_START == b"\n"


@needs_root
def test_enospc_then_every_later_record_parses(tmp_path: Path) -> None:
    """A 64 KiB tmpfs fills mid-record: the fragment is terminated; every record after space returns parses."""
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        log = mnt / "full.jsonl"
        sink = Sink(str(log), "h", "main")
        filler = mnt / "filler"
        with open(filler, "wb") as f:
            f.write(b"x" * (40 * 1024 + 123))
        for i in range(40):  # ~3 KB each: the disk fills part-way through one of them
            sink.emit("call", call_id=i, big="y" * 3000)
        assert sink.dropped > 0
        filler.unlink()
        for i in range(5):
            sink.emit("return", call_id=100 + i)
        records, fragments = parse_framed(log.read_bytes())
        assert [r["call_id"] for r in records if r["event"] == "return"] == [100, 101, 102, 103, 104]
        assert len(fragments) <= 1


FSIZE = textwrap.dedent('''
    import resource, sys
    from wp_autotrace.runtime.sink import Sink
    sink = Sink(sys.argv[1], "h", "main")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10000, hard))   # SIGXFSZ is ignored by Python
    for i in range(10):
        sink.emit("call", call_id=i, big="y" * 3000)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    for i in range(3):
        sink.emit("return", call_id=100 + i)
    print(sink.dropped)
''')


def test_rlimit_fsize_short_write_then_every_later_record_parses(tmp_path: Path) -> None:
    """RLIMIT_FSIZE cuts a record short: later records still parse, none glued."""
    script, log = tmp_path / "f.py", tmp_path / "f.jsonl"
    script.write_text(FSIZE)
    res = run_python([str(script), str(log)], clean_env(PYTHONPATH=str(ROOT)))
    assert res.returncode == 0 and int(res.stdout) > 0, res.stderr
    records, fragments = parse_framed(log.read_bytes())
    assert [r["call_id"] for r in records if r["event"] == "return"] == [100, 101, 102]
    assert len(fragments) <= 1


BIG_WRITER = textwrap.dedent('''
    import sys
    from wp_autotrace.runtime.sink import Sink
    sink = Sink(sys.argv[1], "h", "child")
    print("ready", flush=True)
    i = 0
    while True:
        sink.emit("tree", count=i, procs=["p" * 30000])
        i += 1
''')
SMALL_WRITER = textwrap.dedent('''
    import sys, time
    from wp_autotrace.runtime.sink import Sink
    sink = Sink(sys.argv[1], "h", "child")
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        sink.emit("role", role="steady")
        time.sleep(0.0005)
''')
KILLS = 30


def test_sigkill_mid_write_never_glues(tmp_path: Path) -> None:
    """A writer of ~30 KB records is SIGKILLed at random 30 times while others write: nothing is glued or lost."""
    log = tmp_path / "k.jsonl"
    Sink(str(log), "h", "main")
    big, small = tmp_path / "big.py", tmp_path / "small.py"
    big.write_text(BIG_WRITER)
    small.write_text(SMALL_WRITER)
    env = clean_env(PYTHONPATH=str(ROOT))
    steady = [subprocess.Popen([sys.executable, str(small), str(log), "60"], env=env) for _ in range(2)]
    rng = random.Random(15)
    try:
        for _ in range(KILLS):
            w = subprocess.Popen([sys.executable, str(big), str(log)], env=env, stdout=subprocess.PIPE)
            assert w.stdout is not None and w.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0.001, 0.05))
            w.send_signal(signal.SIGKILL)
            w.wait(30)
    finally:
        for p in steady:
            p.kill()
            p.wait(30)
    records, fragments = parse_framed(log.read_bytes())
    by_pid: dict[int, list[int]] = {}
    for r in records:
        by_pid.setdefault(r["pid"], []).append(r["seq"])
    for p in steady:  # the other writers lost nothing (the last record may have been cut by the kill)
        seqs = sorted(by_pid[p.pid])
        assert seqs == list(range(len(seqs)))
    assert len({r["pid"] for r in records if r["event"] == "tree"}) >= KILLS // 2
    print(f"{len(fragments)} fragment(s) from {KILLS} kills")


# -- 4. export --------------------------------------------------------------------


def _small_log(tmp_path: Path) -> Path:
    log = tmp_path / "run.jsonl"
    Sink(str(log), "h", "main").emit("process_start", argv=["x"], forked=False)
    return log


def test_export_never_overwrites_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """export LOG -o LOG (directly or through a second name) is refused; the log is unchanged."""
    log = _small_log(tmp_path)
    before = log.read_bytes()
    assert main(["export", str(log), "-o", str(log)]) == CANT_CREATE
    assert main(["export", str(log), "-o", str(log), "--force"]) == CANT_CREATE
    alias = tmp_path / "alias.jsonl"
    alias.symlink_to(log)
    assert main(["export", str(alias), "-o", str(log), "--force"]) == CANT_CREATE
    assert log.read_bytes() == before
    assert "one of the input logs" in capsys.readouterr().err


def test_export_refuses_symlink_and_special_outputs(tmp_path: Path) -> None:
    """A planted trace.json symlink is never followed, even with --force; a FIFO is refused."""
    log = _small_log(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "trace.json"
    link.symlink_to(victim)
    assert main(["export", str(log), "-o", str(link)]) == CANT_CREATE
    assert main(["export", str(log), "-o", str(link), "--force"]) == CANT_CREATE
    assert victim.read_text() == "precious" and link.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["export", str(log), "-o", str(fifo), "--force"]) == CANT_CREATE


def test_export_output_is_new_0600_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new output is 0600; an existing one needs --force (then it is replaced and made 0600); - is stdout."""
    log = _small_log(tmp_path)
    out = tmp_path / "t.json"
    old = os.umask(0)
    try:
        assert main(["export", str(log), "-o", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and json.loads(out.read_text())["traceEvents"]
    out.write_text("old " * 10000)
    out.chmod(0o644)
    assert main(["export", str(log), "-o", str(out)]) == CANT_CREATE
    assert main(["export", str(log), "-o", str(out), "--force"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and json.loads(out.read_text())["traceEvents"]
    capsys.readouterr()
    assert main(["export", str(log), "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["traceEvents"]


def test_forced_output_over_a_hard_link_leaves_the_other_name_whole(tmp_path: Path) -> None:
    """--force replaces the name it is given: a second name (a hard link) of that file keeps its data, as does
    the old file when the writer fails; no temp file is left in the folder."""
    log = _small_log(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text("precious\n")
    out = tmp_path / "t.json"
    os.link(other, out)
    assert main(["export", str(log), "-o", str(out), "--force"]) == 0
    assert other.read_text() == "precious\n" and json.loads(out.read_text())["traceEvents"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_nlink == 1
    assert main(["report", "--html", "-o", str(out), "--force", str(log)]) == 0
    assert out.read_text().startswith("<!") and other.read_text() == "precious\n"
    with pytest.raises(ZeroDivisionError):
        write_file(open_output(str(out), [], force=True), str(out), lambda write: (write("cut"), 1 / 0))
    assert out.read_text().startswith("<!")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.jsonl", "run.jsonl", "t.json"]


# -- 7. fork-then-exec ----------------------------------------------------------

PREEXEC = textwrap.dedent('''
    import multiprocessing, os, subprocess, sys
    p = subprocess.Popen([sys.executable, "-c", "pass"], preexec_fn=os.setpgrp); p.wait()
    q = subprocess.Popen(["true"], preexec_fn=os.setpgrp); q.wait()
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", "pass"])
    os.waitpid(pid, 0)
    print(p.pid, q.pid, pid)
''')


def test_preexec_fn_child_writes_nothing_and_exec_after_fork_pairs(tmp_path: Path) -> None:
    """subprocess with preexec_fn: no forked start (no false "killed"); os.fork+execv: forked then non-forked start."""
    script, log = tmp_path / "p.py", tmp_path / "run.jsonl"
    script.write_text(PREEXEC)
    res = run_python([str(script)], traced(log))
    assert res.returncode == 0, res.stderr
    py_child, true_child, forked = map(int, res.stdout.split())
    recs = read_log(log)
    root = events(recs, "process_start")[0]["pid"]
    starts = {}
    for r in events(recs, "process_start"):
        starts.setdefault(r["pid"], []).append(r)
    assert [(s["forked"], s["ppid"]) for s in starts[py_child]] == [(False, root)]
    assert true_child not in {r["pid"] for r in recs}  # a non-Python program: nothing at all
    # os.fork then exec: a forked start then its exec, same pid and ppid (docs/contracts.md, "Exec keeps the process")
    assert [(s["forked"], s["ppid"]) for s in starts[forked]] == [(True, root), (False, root)]
    assert [e["pid"] for e in events(recs, "process_exit")].count(py_child) == 1


FORKSERVER = textwrap.dedent('''
    import multiprocessing as mp
    def sq(x):
        return x * x
    if __name__ == "__main__":
        ctx = mp.get_context("forkserver")
        with ctx.Pool(2) as pool:
            print(sum(pool.map(sq, range(10))))
''')


def test_forkserver_has_its_own_role(tmp_path: Path) -> None:
    """multiprocessing's forkserver is recognised (role "forkserver"), like the resource tracker."""
    script, log = tmp_path / "fs.py", tmp_path / "run.jsonl"
    script.write_text(FORKSERVER)
    res = run_python([str(script)], traced(log), timeout=60)
    assert (res.returncode, res.stdout) == (0, "285\n"), res.stderr
    roles = {r["role"] for r in events(read_log(log), "process_start")}
    assert {"main", "forkserver"} <= roles
    assert "forkserver" in HELPER_ROLES  # the report's "not left behind" set


# -- 8. redaction ----------------------------------------------------------------


def test_glob_match_is_fnmatch_for_names() -> None:
    """The start-up path's matcher agrees with fnmatch (case-insensitive) on names."""
    import fnmatch

    names = ["token", "API_KEY", "monkey", "pass", "x-secret-y", "", "credentials", "tok", "keyk", "*a_k*y", "?"]
    for pattern in redact.DEFAULT_PATTERNS + ("a?i*", "*", "k*y", "**key"):
        for name in names:
            assert redact.glob_match(pattern, name) == fnmatch.fnmatchcase(name.lower(), pattern), (pattern, name)


def test_is_secret_and_env_secrets_are_fnmatch_over_names() -> None:
    """is_secret (its patterns compiled once: words, whole names, globs) says what fnmatch says of the
    lower-cased name for any of the patterns; env_secrets keeps the long values of those names, in order."""
    import fnmatch

    rng = random.Random(32)
    alphabet = "apsk*?eyt_A-"
    pattern_sets = [redact.DEFAULT_PATTERNS, redact.parse_patterns("*session*,hf_*,a?i*,tok,*,k*y"), ("*a*k*", "*t?k*")]
    pattern_sets += [tuple("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))).lower()
                           for _ in range(rng.randint(1, 5))) for _ in range(200)]
    names = ["token", "API_KEY", "monkey", "pass", "PASS", "x-secret-y", "", "hf_home", "tok", "path"]
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(200)]
    for patterns in pattern_sets:
        for name in names:
            want = any(fnmatch.fnmatchcase(name.lower(), p) for p in patterns)
            assert redact.is_secret(name, patterns) == want, (patterns, name)
        environ = {name: name * 3 for name in names}
        want_values = tuple(v for k, v in environ.items() if len(v) >= redact.MIN_ENV_SECRET
                            and any(fnmatch.fnmatchcase(k.lower(), p) for p in patterns))
        assert redact.env_secrets(environ, patterns) == want_values


def test_redact_argv_forms() -> None:
    """--opt=value, --opt value, NAME=value; a following option is not taken as the value."""
    pats = redact.parse_patterns("*session*")
    argv = ["python", "train.py", "--token=abc", "--api-key", "k1", "--password", "--verbose", "HF_TOKEN=x",
            "--session-id", "s1", "--lr", "0.1", "--Secret=Q"]
    assert redact.redact_argv(argv, pats, ("envsecret77",)) == [
        "python", "train.py", "--token=***", "--api-key", "***", "--password", "--verbose", "HF_TOKEN=***",
        "--session-id", "***", "--lr", "0.1", "--Secret=***"]
    assert redact.redact_argv(["-c", "print('envsecret77')"], pats, ("envsecret77",)) == ["-c", "print('***')"]
    assert redact_cmd("python x.py --api-key k1 --n 2") == "python x.py --api-key *** --n 2"
    assert redact.redact_env({"HF_TOKEN": "x", "TORCH_WARM_POOL": "0"}, pats) == {
        "HF_TOKEN": "***", "TORCH_WARM_POOL": "0"}


def test_user_patterns_are_lowered_and_a_name_of_separators_only_is_a_name() -> None:
    """WP_AUTOTRACE_REDACT's patterns are matched lowered (blank items dropped), and a name made only of "_", "."
    or "-" is an option or variable name as a word of letters is: its value is masked, alone or in program text."""
    assert redact.parse_patterns(" API_Code , ,X ") == (*redact.DEFAULT_PATTERNS, "api_code", "x")
    assert redact.redact_argv(["prog", "--API_CODE=v1", "API_CODE=v2"], redact.parse_patterns("API_Code")) == [
        "prog", "--API_CODE=***", "API_CODE=***"]
    pats = redact.parse_patterns("_")
    assert redact.redact_argv(["prog", "_=hunter22", 'f(_="hunter22")'], pats) == ["prog", "_=***", 'f(_="***")']

def test_secrets_inside_program_text_are_masked_and_the_text_kept() -> None:
    """Review 1 #12: a `python -c` program's text: a value after a secret-named option (`"--password",
    "pw"`, `"--api-key=v"`) is masked, and nothing around it changes (quotes, commas, brackets, spacing)."""
    pats = redact.DEFAULT_PATTERNS
    text = ('import subprocess,sys; subprocess.run([sys.executable, "-c", "pass", "--api-key=sekritvalue",\n'
            '    "--password", "pw123456", "--lr", "0.1"])  ;  f(a, token="t0k3n") ; print("--secret=s3")')
    want = ('import subprocess,sys; subprocess.run([sys.executable, "-c", "pass", "--api-key=***",\n'
            '    "--password", "***", "--lr", "0.1"])  ;  f(a, token="***") ; print("--secret=***")')
    assert redact.redact_argv(["python", "-c", text], pats) == ["python", "-c", want]
    # the masked text is the program's text apart from the masked values
    assert want.replace("***", "") == text.replace("sekritvalue", "").replace("pw123456", "").replace(
        "t0k3n", "").replace("s3\")", "\")")
    shell = ["sh", "-c", "train --token abc  --n 2"]
    assert redact.redact_argv(shell, pats) == ["sh", "-c", "train --token ***  --n 2"]


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    """--token=…, --api-key …, a secret env value in argv and a WP_AUTOTRACE_REDACT pattern: none in the log."""
    log = tmp_path / "run.jsonl"
    args = ["-c", "print('ok')", "--token=tok-SECRET-1", "--api-key", "key-SECRET-2", "--hf", "env-SECRET-3",
            "--session=sess-SECRET-4", "--lr", "0.1"]
    # Sampler off: its tree records' `cmd` is the watcher's to redact (analysis/read/check.py's redact_cmd).
    env = traced(log, HF_TOKEN="env-SECRET-3", WP_AUTOTRACE_REDACT="*session*", WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(args, env)
    assert (res.returncode, res.stdout, res.stderr) == (0, "ok\n", "")
    assert b"SECRET" not in log.read_bytes()
    (start,) = events(read_log(log), "process_start")
    assert start["argv"][-8:] == ["--token=***", "--api-key", "***", "--hf", "***", "--session=***", "--lr", "0.1"]


# -- a descendant never writes on its own stderr (issue 20 item 7) ---------------------------

CHILD_STDERR = textwrap.dedent('''
    import os, subprocess, sys
    {prepare}
    # a traced Python child whose stderr the host captures (and may parse), and a forked one
    child = subprocess.run([sys.executable, "-c", "import os; os.fork() or print('child ran')"],
                           capture_output=True, text=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 2)
        from wp_autotrace.runtime import sink
        sink.warn("a forked child's warning")
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    forked = os.read(r, 4096).decode()
    print(repr(child.stdout), repr(child.stderr), repr(forked))
''')


def test_log_moved_descendants_say_nothing_on_their_stderr(tmp_path: Path) -> None:
    """The log moved mid-run: a new descendant cannot open it and runs untraced, silently (no `tracing
    disabled: FileNotFoundError` on the stderr its parent captures)."""
    log = tmp_path / "run.jsonl"
    prepare = f"os.rename({str(log)!r}, {str(tmp_path / 'moved.jsonl')!r})"
    res = run_python(["-c", CHILD_STDERR.format(prepare=prepare)], traced(log))
    assert res.returncode == 0 and res.stdout == "'child ran\\n' '' ''\n", (res.stdout, res.stderr)


@needs_root
def test_full_disk_descendants_say_nothing_on_their_stderr(tmp_path: Path) -> None:
    """The log's disk is full (a 64 KiB tmpfs): a descendant's `cannot write the log ... No space left`
    never reaches its stderr; the root alone may say it, on its own stderr."""
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        log = mnt / "run.jsonl"
        prepare = textwrap.dedent(f'''
            try:
                with open({str(mnt / "filler")!r}, "wb") as f:
                    while True:
                        f.write(b"x" * 4096)
                        f.flush()
            except OSError:
                pass
            from wp_autotrace.runtime import bootstrap
            root_sink = bootstrap._runtime.sink
            while not root_sink.dropped:  # the log's own last page full too
                root_sink.emit("tracer_error", where="test", error="x" * 1000)
        ''')
        res = run_python(["-c", CHILD_STDERR.format(prepare=prepare)],
                         traced(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
        assert res.returncode == 0 and res.stdout == "'child ran\\n' '' ''\n", (res.stdout, res.stderr)


def test_a_process_start_masks_its_argv_as_the_whole_environment_scan_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """argv_env_secrets (the start-up's scan: only values found in argv, or holding a '*') masks argv exactly as
    env_secrets of the whole environment does, over random argvs and secret values that overlap masks, and
    where a mask makes a value."""
    rng = random.Random(7)
    pats = redact.DEFAULT_PATTERNS
    values = ["abcdef123", "zz*zzzz", "secretvalue", "***abc", "é\udcffsecret", "short", "abcdef1234567"]
    for i, value in enumerate(values):
        monkeypatch.setenv(f"WP_TEST_TOKEN_{i}", value)
        monkeypatch.setenv(f"WP_TEST_PLAIN_{i}", value)
    words = values + ["--token", "--n", "2", "-c", "x=abcdef123", "postgres://u:abcdef123@h", "train"]
    # and where one value's mask makes another, in no argument before ("abcdef123" masked, then "***abc")
    made = [["python", "abcdef123abc"], ["python", "-c", "f('abcdef123abc')"]]
    for argv in made + [["python"] + [rng.choice(words) + rng.choice(["", "x", " y", "*"])
                                      for _ in range(rng.randint(0, 5))] for _ in range(500)]:
        want = redact.redact_argv(argv, pats, redact.env_secrets(os.environ, pats))
        assert redact.redact_argv(argv, pats, redact.argv_env_secrets(argv, pats)) == want, argv
    assert redact.redact_argv(made[0], pats, redact.env_secrets(os.environ, pats)) == ["python", "***"]


def test_the_start_scan_finds_the_secret_names_is_secret_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """argv_env_secrets looks names up in one lowered string: it answers the values of exactly the names is_secret
    answers (env_secrets, name by name), in os.environ's order, of those found in argv: a word twice in a name,
    a word in a name beside another name, a whole-name pattern (pass, not passx), a name whose lower() is ASCII
    only from a non-ASCII letter (the Kelvin sign) or longer than the name (dotted I), a user's word, whole name
    and wildcard patterns."""
    names = ["MY_API_TOKEN", "my_token_lower", "TO\u212aEN_X", "PASS", "pass", "PASSX", "XPASS", "A_KEY_KEY",
             "KEY", "PLAIN", "\u00dcn_SECRET", "\u0130_TOKEN", "TOKEN\u0130", "MY_FOO", "EXACT", "EXACTLY",
             "APIXKEY", "CREDENTIALS_FILE"]
    for i, name in enumerate(names):
        monkeypatch.setenv(name, f"value-{i:02d}-of-{name}")
    monkeypatch.setenv("HF_TOKEN_UNUSED", "nowhere-in-argv")
    monkeypatch.setenv("STAR_TOKEN", "a*b*c*d")  # in no argument, but a mask may make it
    argv = ["python", "-c", " ".join(os.environ[name] for name in names)]
    text = "\0".join(argv)
    user = (redact.parse_patterns("*foo*,exact"), redact.parse_patterns("api?key,x*s"))
    for pats in (redact.DEFAULT_PATTERNS, *user):
        want = tuple(v for v in redact.env_secrets(os.environ, pats) if v in text or "*" in v)
        got = redact.argv_env_secrets(argv, pats)
        assert got == want, pats
        value = dict(zip(names, map(os.environ.__getitem__, names)))  # "pass": a lower-case name on purpose
        assert value["pass"] in got and value["PASSX"] not in got and value["A_KEY_KEY"] in got
    assert os.environ["TO\u212aEN_X"] in got and os.environ["STAR_TOKEN"] in got
    assert os.environ["APIXKEY"] in got and "nowhere-in-argv" not in got
