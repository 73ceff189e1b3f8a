"""Issue 24: escapes, secrets, the OTLP endpoint, start-up rusage and fork, guard notices, small truths."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.words.fmt import escape
from wp_autotrace.cli.cleanup import cleanup

from .conftest import ROOT, clean_env, events, needs_torch, run_python, wait_for_watcher
from .logs import T0, LogWriter, report, watcher

HOST = os.uname().nodename
# Bidirectional and invisible format characters: each reorders or hides what a terminal shows.
INVISIBLE = "\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u200e\u200f\u061c\u2028\u2029\ufeff"


# -- item 4: bidi and invisible controls are escaped wherever text reaches a terminal --------------

def test_escape_covers_bidi_and_invisible() -> None:
    """Each such character becomes \\uNNNN; C0/C1 stay \\xNN; ordinary text is untouched."""
    out = escape("a" + INVISIBLE + "\x1b\x9b é")
    assert not set(out) & set(INVISIBLE + "\x1b\x9b")
    assert out.startswith("a\\u202e\\u2066") and "\\x1b\\x9b é" in out


def test_report_text_escapes_bidi_json_keeps_it(tmp_path: Path) -> None:
    """A right-to-left override in argv reaches the text report escaped, the JSON exact."""
    w = LogWriter()
    evil = "python train.py \u202eyp.niart\u2066x\u200b"
    w.add(0, 100, 1, "main", "process_start", argv=[evil], forked=False, run="r1")
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    assert not set(text) & set(INVISIBLE) and "\\u202eyp.niart\\u2066x\\u200b" in text
    assert rep["runs"][0]["command"] == evil


def test_cleanup_output_is_escaped() -> None:
    """cleanup's lines carry the log's role and run id: escaped like the report."""
    said: list[str] = []
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    recs = [{"v": 1, "event": "leftover", "ts": time.time(), "pid": 1, "ppid": 0, "host": HOST, "role": "main",
             "seq": 0, "run": "r\u202e1\x1b", "pids": [dead.pid],
             "procs": [{"pid": dead.pid, "create_time": 1.0, "role": "side\u2066car\u200b", "cmd": "x"}]}]
    cleanup([(build(recs), None)], None, dry_run=True, grace=0.1, say=said.append)
    assert said and not set("".join(said)) & set(INVISIBLE + "\x1b"), said
    assert any("\\u202e" in line for line in said) and any("\\u2066" in line for line in said)


def test_doctor_output_is_escaped() -> None:
    """doctor prints the interpreter path it was given: escaped."""
    from wp_autotrace.cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["doctor", "--python", "/nonexistent/py\u202ethon\x1b"])
    assert code == 1
    assert not set(out.getvalue()) & set(INVISIBLE + "\x1b") and "py\\u202ethon\\x1b" in out.getvalue()


# -- items 6 and 7: the watcher starts without a fork of the host, and leaves no child rusage ------

RUSAGE = ("import resource\nr = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
          "print([getattr(r, f) for f in dir(r) if f.startswith('ru_')])\n")


def test_child_rusage_before_any_child_is_untouched(tmp_path: Path) -> None:
    """getrusage(RUSAGE_CHILDREN) in a traced root (watcher on) is what it is untraced: all zero."""
    log = tmp_path / "r.jsonl"
    untraced = run_python(["-c", RUSAGE], clean_env())
    traced = run_python(["-c", RUSAGE], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)))
    assert (traced.returncode, traced.stdout, traced.stderr) == (untraced.returncode, untraced.stdout,
                                                                untraced.stderr)
    assert set(json.loads(untraced.stdout)) == {0}
    assert events(wait_for_watcher(log, 30, event="watcher_start"), "watcher_start")  # it did start


# The host has a thread before spawn() (as when another .pth started one), and any fork is a tripwire.
NO_FORK = """
import os, sys, threading, time
threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
def tripwire(*a, **k):
    raise AssertionError("the host forked")
os.fork = tripwire
from wp_autotrace.runtime.spawn import spawn
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
print(spawn(fd, path, "0123456789ab", 0.0, 0.05, 0.0))
try:
    os.waitpid(-1, os.WNOHANG)
    print("a child is left")
except ChildProcessError:
    pass
"""


def test_watcher_starts_without_forking_a_threaded_host(tmp_path: Path) -> None:
    """No fork() of the host (3.12+ -X dev would warn: multi-threaded), no child left, stderr quiet."""
    log = tmp_path / "w.jsonl"
    res = run_python(["-X", "dev", "-c", NO_FORK, str(log)], clean_env())
    assert (res.returncode, res.stdout, res.stderr) == (0, "True\n", ""), res.stderr
    assert events(wait_for_watcher(log, 30, event="watcher_start"), "watcher_start")


# -- item 2: secrets masked per argument, from a child's own environment, URLs and headers ---------

def test_redact_per_argument_forms() -> None:
    """One argument is masked whole: --token=two words leaves no word; URLs, headers, --passwd/--pass."""
    from wp_autotrace.common import procfs, redact

    pats = redact.DEFAULT_PATTERNS
    argv = ["curl", "--token=two words", "-H", "Authorization: Bearer abc.def", "postgres://u:pw@db:5432/x",
            "--passwd", "p1", "--pass", "p2", "X-Api-Key: k3", "sh -c 'train --token t4 --lr 1'",
            "--db=mysql://root:hunter2@h/x?y=1", "--lr", "0.1", "https://host/path", "PASS=p5"]
    assert redact.redact_argv(argv, pats) == [
        "curl", "--token=***", "-H", "Authorization: Bearer ***", "postgres://u:***@db:5432/x",
        "--passwd", "***", "--pass", "***", "X-Api-Key: ***", "sh -c 'train --token *** --lr 1'",
        "--db=mysql://root:***@h/x?y=1", "--lr", "0.1", "https://host/path", "PASS=***"]
    assert procfs.environ_secrets(b"A=1\0CHILD_TOKEN=abcdefgh\0X_SECRET=cut", pats) == ("abcdefgh",)


CHILD_SECRETS = '''
import os, subprocess
env = dict(os.environ, CHILD_ONLY_TOKEN="childenv-SECRET-1")
subprocess.run(["sh", "-c", "sleep 0.6", "x", "--token=two SECRET-2 words", "postgres://u:pw-SECRET-3@db/x",
                "Authorization: Bearer tok-SECRET-4", "--passwd", "SECRET-5", "--note", "childenv-SECRET-1"],
               env=env)
'''


def test_tree_records_mask_per_argument_and_child_environment(tmp_path: Path) -> None:
    """The watcher's tree cmd: masked argument by argument, with the secrets of the child's own environment."""
    script = tmp_path / "root.py"
    script.write_text(CHILD_SECRETS)
    log = tmp_path / "run.jsonl"
    res = run_python([str(script)], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                                              WP_AUTOTRACE_SAMPLE_INTERVAL="0.05"), timeout=60)
    assert res.returncode == 0, res.stderr
    recs = wait_for_watcher(log, 30)
    shells = [p for t in events(recs, "tree") for p in t["started"] if p["name"] == "sh"]
    # The shell the root ran, not a child it forked to exec sleep (seen as `sh` before its exec).
    shells = [p for p in shells if p["ppid"] not in {q["pid"] for q in shells}]
    assert shells, recs
    # /proc may show no command line yet at the first sight (the watcher reads it again then).
    assert shells[-1]["cmd"] == ("sh -c sleep 0.6 x --token=*** postgres://u:***@db/x Authorization: Bearer *** "
                                "--passwd *** --note ***"), shells
    assert b"SECRET" not in log.read_bytes()


def test_old_logs_leak_no_secret_into_any_output(tmp_path: Path) -> None:
    """A log whose writer masked less (or not at all): report --json and text, chrome and OTLP mask it."""
    from wp_autotrace.analysis.export.chrome import to_chrome_trace
    from wp_autotrace.analysis.export.otlp import to_otlp
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    w = LogWriter()
    argv = ["python", "train.py", "--api-key", "SECRET-1", "--db=postgres://u:SECRET-2@h/x"]
    w.add(0, 100, 1, "main", "process_start", argv=argv, forked=False, run="r1", root_pid=100)
    w.add(0.5, 100, 1, "watcher", "tree", run="r1", root_pid=100, count=2, final=False, ended=[], started=[
        {"pid": 100, "ppid": 1, "name": "python", "create_time": 0.0, "rss": 1, "cmd": " ".join(argv)},
        {"pid": 101, "ppid": 100, "name": "curl", "create_time": 0.1, "rss": 1,
         "cmd": "curl -H Authorization: Bearer SECRET-3 --password SECRET-4"}])
    w.add(0.9, 100, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=1, pids=[101],
          procs=[{"pid": 101, "ppid": 100, "name": "curl", "create_time": 0.1, "rss": 1,
                  "cmd": "curl --token SECRET-5"}])
    w.add(0.95, 100, 1, "main", "exec", argv=["curl", "--token", "SECRET-6"], executable="/usr/bin/curl")
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    data = read_logs([str(w.write(tmp_path / "old.jsonl"))])
    assert "SECRET" not in json.dumps(data.records)  # every record, as read
    rep = analyze(data)
    outputs = {"json": json.dumps(rep), "text": render_text(rep, {}),
               "chrome": json.dumps(to_chrome_trace(data)), "otlp": json.dumps(to_otlp(data))}
    for name, text in outputs.items():
        assert "SECRET" not in text, name


def test_cleanup_dry_run_masks_the_live_command_line(tmp_path: Path) -> None:
    """--dry-run shows a live process's command line: masked as the log's is."""
    from .clock import started
    from .test_cleanup import _cleanup, _dead_pid, _log

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--token", "live-SECRET-1",
                             "postgres://u:live-SECRET-2@h/x"], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        began = started(proc.pid)
        assert began is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": began,
                                                           "role": "compile-sidecar", "cmd": "python x"}])
        res = _cleanup(str(log), "--dry-run")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "--token *** postgres://u:***@h/x" in res.stdout and "SECRET" not in res.stdout, res.stdout
    finally:
        proc.kill()
        proc.wait(10)


# -- item 3: export --endpoint never follows a redirect, has one deadline, reads a bounded answer ---

class RawReceiver:
    """A one-purpose HTTP receiver on 127.0.0.1: answer(conn) writes the answer; stops by itself."""

    def __init__(self, answer: Any, lifetime: float = 20.0) -> None:
        import socket
        import threading

        self.answer = answer
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)  # accept() wakes up to see stop (a close from another thread does not)
        self.end = time.monotonic() + lifetime  # the thread ends by itself even if nobody stops it
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import socket

        while not self.stop.is_set() and time.monotonic() < self.end:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n")
                                       if ln.lower().startswith(b"content-length:")), b"0"))
                    while len(body) < length:
                        body += conn.recv(65536)
                    self.requests.append(head)
                    self.answer(conn, self.stop)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()


def _redirect(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/login\r\nContent-Length: 0\r\n\r\n")


def _trickle(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(0.2):  # a byte at a time, each well within any per-read timeout
        conn.sendall(b"x")


# "Endless" as the client sees it, capped so that a client reading it all (the bug) ends too.
ENDLESS_CAP = 64 << 20
endless_sent: list[int] = []


def _endless(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")  # no length: until close
    chunk = b"x" * 65536
    sent = 0
    try:
        while not stop.is_set() and sent < ENDLESS_CAP:
            conn.sendall(chunk)
            sent += len(chunk)
    finally:
        endless_sent.append(sent)


def _ok(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")


@pytest.fixture
def otlp_log(tmp_path: Path) -> Path:
    """A small finished run (no opentelemetry package needed: these tests are about the POST)."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100)
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w.write(tmp_path / "run.jsonl")


def _export_to(log: Path, rec: RawReceiver) -> tuple[int, str, float]:
    """`export --endpoint` to a receiver, closed afterwards: (exit code, stderr, seconds it took)."""
    try:
        t = time.monotonic()
        code, err = _export(log, "--endpoint", rec.url)
        return code, err, time.monotonic() - t
    finally:
        rec.close()


def _export(log: Path, *extra: str) -> tuple[int, str]:
    from contextlib import redirect_stderr

    from wp_autotrace.cli.main import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["export", str(log), "--format", "otlp", *extra])
    return code, err.getvalue()


def test_endpoint_redirect_is_an_error(otlp_log: Path) -> None:
    """A 302 (a login page) is not a receiver: exit 69, said so, nothing re-sent to the new place."""
    rec = RawReceiver(_redirect)
    code, err, _ = _export_to(otlp_log, rec)
    assert code == 69 and "HTTP 302" in err and "not followed" in err and "sent" not in err.replace("not sent", ""), err
    assert len(rec.requests) == 1


@pytest.mark.timing
def test_endpoint_has_a_total_deadline(otlp_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A receiver that trickles its answer a byte at a time cannot keep export past the deadline."""
    from wp_autotrace.cli import post

    monkeypatch.setattr(post, "DEADLINE_S", 1.5)
    code, err, took = _export_to(otlp_log, RawReceiver(_trickle))
    assert code == 69 and "no complete answer within 1.5 s" in err, err
    assert took < 5, took


@pytest.mark.timing
def test_endpoint_answer_is_read_bounded(otlp_log: Path) -> None:
    """An endless answer is read up to a bound, not into memory: the POST is delivered, fast."""
    code, err, took = _export_to(otlp_log, RawReceiver(_endless))
    assert code == 0 and "sent 1 spans" in err, err
    assert took < 10, took
    # The client stopped reading early: what got through is its bound plus the sockets' buffers.
    assert endless_sent and endless_sent[-1] < ENDLESS_CAP // 2, endless_sent


def test_endpoint_credentials_never_printed(otlp_log: Path) -> None:
    """user:password in the URL: sent as Basic auth, masked in every message (success and failure)."""
    import base64
    import socket

    rec = RawReceiver(_ok)
    try:
        host = rec.url.replace("http://", "http://ann:pw-SECRET@")
        code, err = _export(otlp_log, "--endpoint", host + "/otlp?token=tok-SECRET")
    finally:
        rec.close()
    assert code == 0 and "SECRET" not in err and "ann:***@" in err, err
    auth = base64.b64encode(b"ann:pw-SECRET")
    assert b"Authorization: Basic " + auth in rec.requests[0] and b"pw-SECRET" not in rec.requests[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, err = _export(otlp_log, "--endpoint", f"http://ann:pw-SECRET@127.0.0.1:{port}/")
    assert code == 69 and "SECRET" not in err and "ann:***@" in err, err


def _hostile_reason(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad\x1b]0;title\x07\x1b[31m\r\nContent-Length: 0\r\n\r\n")


def _hostile_location(conn: Any, stop: Any) -> None:
    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://x/\x1b[2J\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("answer", [_hostile_reason, _hostile_location])
def test_endpoint_answer_never_reaches_the_terminal_raw(otlp_log: Path, answer: Any) -> None:
    """A receiver's status reason or redirect Location with terminal escapes is shown escaped (\\x1b), never
    sent raw to the user's terminal (it could retitle it or clear it)."""
    code, err, _ = _export_to(otlp_log, RawReceiver(answer))
    assert code == 69 and "\\x1b" in err and "\x1b" not in err and "\x07" not in err, repr(err)


def test_endpoint_with_chrome_format_is_a_usage_error(otlp_log: Path, tmp_path: Path) -> None:
    """--endpoint only sends OTLP: with --format chrome it is a usage error (it was silently ignored)."""
    from wp_autotrace.cli.main import main

    assert main(["export", str(otlp_log), "--endpoint", "http://127.0.0.1:9/", "-o", str(tmp_path / "t.json")]) == 64
    assert not (tmp_path / "t.json").exists()


# -- item 8: guard notices live where only the run's user can create or read them -----------------

NOBODY = 65534  # the conventional unprivileged uid


def _as_nobody(code: str) -> str:
    """Run code as uid/gid NOBODY (the test is root); its stdout."""
    def drop() -> None:
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    python = "/usr/bin/python3"  # one the throwaway user may run (the test's may be in a private folder)
    res = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30,
                         preexec_fn=drop, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


# Another user's attempts on a notice path: create a file beside it, read it, re-create it once removed.
ATTACK = '''
import os, sys
path = sys.argv[1]
out = []
for name, fn in (("beside", lambda: os.open(os.path.join(os.path.dirname(path), "planted"),
                                            os.O_WRONLY | os.O_CREAT, 0o666)),
                 ("read", lambda: os.open(path, os.O_RDONLY)),
                 ("recreate", lambda: os.open(path, os.O_WRONLY | os.O_CREAT, 0o666))):
    try:
        os.close(fn())
        out.append(name + ":done")
    except OSError:
        out.append(name + ":refused")
print(" ".join(out))
'''


def test_guard_notice_is_private_to_the_run_user(tmp_path: Path) -> None:
    """Another user can neither read the notice, nor plant a file beside it, nor re-create it after the root
    removed it; its directory's name is not derived from the run id (which ps shows)."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, to act as a throwaway user, and /usr/bin/python3")
    # Not under tmp_path (its parents may be closed to other users): a /tmp-like folder they can reach.
    tmp = Path(tempfile.mkdtemp(prefix="wp-i24-"))
    try:
        os.chmod(tmp, 0o1777)  # like /tmp: world-writable, sticky
        _notice_attacks(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _notice_attacks(tmp: Path) -> None:
    # The throwaway user really can write in tmp (else every refusal below would prove nothing).
    assert _as_nobody(f"import os; os.close(os.open({str(tmp / 'probe')!r}, os.O_CREAT | os.O_WRONLY)); "
                      "print('ok')") == "ok"
    os.unlink(tmp / "probe")
    code = "import os; print(os.environ['WP_AUTOTRACE_NOTICE']); print(os.environ['WP_AUTOTRACE_RUN'])"
    res = run_python(["-c", code], clean_env(WP_AUTOTRACE_GUARD="nested-pools", TMPDIR=str(tmp)), timeout=30)
    assert res.returncode == 0, res.stderr
    path, run = res.stdout.split()
    assert run not in path
    assert not os.path.exists(path) and not list(tmp.iterdir())  # the root removed its file and directory
    assert _as_nobody(ATTACK.replace("sys.argv[1]", repr(path))) == "beside:refused read:refused recreate:refused"
    # While a run lives: the directory is 0700 and the root's own.
    code = "import os; p = os.environ['WP_AUTOTRACE_NOTICE']; st = os.stat(os.path.dirname(p)); " \
           "print(oct(st.st_mode & 0o777), st.st_uid == os.geteuid(), p)"
    res = run_python(["-c", code], clean_env(WP_AUTOTRACE_GUARD="nested-pools", TMPDIR=str(tmp)), timeout=30)
    mode, own, path = res.stdout.split()
    assert (mode, own) == ("0o700", "True"), res.stdout
    # Even knowing the name, a directory and file another user made there receive no post.
    plant = (f"import os; os.umask(0); os.mkdir({os.path.dirname(path)!r}, 0o777); "
             f"os.close(os.open({path!r}, os.O_CREAT | os.O_WRONLY, 0o666)); print('planted')")
    assert _as_nobody(plant) == "planted"
    post = ("from wp_autotrace.runtime.guard import post_notice; "
            "post_notice({'pid': 7, 'role': 'compile-sidecar', 'target': 'x:AsyncCompile.warm_pool'})")
    res = run_python(["-c", post], clean_env(WP_AUTOTRACE_NOTICE=path), timeout=30)
    assert res.returncode == 0 and os.path.getsize(path) == 0, res.stderr


# -- item 9: small truths ---------------------------------------------------------------------------

def test_run_missing_command_names_no_log(tmp_path: Path) -> None:
    """`run -- nosuchcmd`: exit 127, and no "logging to" line for a log that is never made."""
    res = run_python(["-m", "wp_autotrace", "run", "--", "nosuchcmd-i24"], clean_env(), cwd=tmp_path)
    assert res.returncode == 127 and "nosuchcmd-i24" in res.stderr and "command not found" in res.stderr
    assert "logging to" not in res.stderr, res.stderr
    assert not list(tmp_path.glob("*.jsonl"))


SHOW_ENV = ("import os, subprocess, sys\n"
            "print(sorted(k for k in os.environ if k.startswith('WP_AUTOTRACE') and k != 'WP_AUTOTRACE'))\n"
            "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")


def test_tracing_off_by_a_bad_value_exports_no_run_identity(tmp_path: Path) -> None:
    """WP_AUTOTRACE=2 (off, warned once): no WP_AUTOTRACE_ROOT_PID or other run identity is exported; the
    child (same settings) stays silent."""
    res = run_python(["-c", SHOW_ENV], clean_env(WP_AUTOTRACE="2"), cwd=tmp_path)
    assert res.returncode == 0 and res.stderr.count("wp-autotrace:") == 1, res.stderr
    assert "WP_AUTOTRACE_ROOT_PID" not in res.stdout and "WP_AUTOTRACE_RUN" not in res.stdout, res.stdout


def test_read_settings_only_reads() -> None:
    """read_settings leaves os.environ as it was, whatever it finds."""
    from wp_autotrace.runtime import bootstrap

    env = {"WP_AUTOTRACE": "2", "WP_AUTOTRACE_SAMPLE_INTERVAL": "soon", "WP_AUTOTRACE_TARGETS": "a.b:K.Inner.m"}
    saved = dict(os.environ)
    try:
        for key in [k for k in os.environ if k.startswith("WP_AUTOTRACE")]:
            del os.environ[key]
        os.environ.update(env)
        before = dict(os.environ)
        settings = bootstrap.read_settings()
        assert dict(os.environ) == before and len(settings.notes) == 3, settings.notes
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize(("spec", "said"), [
    ("json:JSONDecoder.Inner.meth", "'json:JSONDecoder.Inner.meth' (a nested class's method cannot be traced"),
    ("os.path:join", "os.path:join (os.path is an alias of posixpath: name posixpath:join)"),
])
def test_unsupported_targets_warn_once_in_root(spec: str, said: str, tmp_path: Path) -> None:
    """A target the finder could never patch is said once, by the root (the child stays silent)."""
    log = tmp_path / "t.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0",
                    WP_AUTOTRACE_TARGETS=spec)
    res = run_python(["-c", SHOW_ENV], env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("wp-autotrace:") == 1 and said in res.stderr, res.stderr


def test_doctor_names_an_editable_install_not_pythonpath() -> None:
    """doctor in an editable install (this checkout's venv, pip install -e) says so; it does not blame
    PYTHONPATH for the package living beside the checkout rather than the .pth."""
    from importlib.metadata import distribution

    info = json.loads(distribution("wp-autotrace").read_text("direct_url.json") or "{}")
    if not info.get("dir_info", {}).get("editable"):
        pytest.skip("this interpreter has a wheel install, not an editable one")
    res = run_python(["-m", "wp_autotrace", "doctor", "--python", sys.executable], clean_env(), timeout=120)
    assert "PYTHONPATH" not in res.stdout and "an editable install" in res.stdout, res.stdout


def test_leftovers_seen_ending_later_are_not_still_running(tmp_path: Path) -> None:
    """A leftover the watcher later saw end (a runner killed it): still 'outlived the main process', but the
    report neither calls it running nor advises cleanup for it."""
    from .test_model import with_root_killed

    w = with_root_killed()
    before = report(w, tmp_path)
    (left,) = [f for f in before["findings"] if f["kind"] == "leftovers"]
    assert "cleanup" in left["advice"]  # alive at the end of the log: cleanup is the advice
    # seen to end well after the main's kill at 3.5 s (LEFTOVER_ENDED_S): left running, then ended
    watcher(w, 9.1, "tree", count=0, started=[], ended=[{"pid": 200, "end": T0 + 9.0}])
    rep = report(w, tmp_path)
    (left,) = [f for f in rep["findings"] if f["kind"] == "leftovers"]
    assert "all have ended since" in left["text"] and "cleanup" not in left["advice"], left
    side = next(p for p in rep["processes"] if p["pid"] == 200)
    assert side["left_behind"] and side["end_s"] is not None
    assert "still running" not in render_text(rep, {})


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
def test_bundled_example_is_quiet_and_its_report_knows_what_it_killed(tmp_path: Path) -> None:
    """examples/run_example.py: no KeyboardInterrupt tracebacks on the terminal (the program's own stderr
    goes to a file), and its report does not call the sidecars it killed still running."""
    res = run_python([str(ROOT / "examples" / "run_example.py"), "8"], clean_env(), cwd=tmp_path, timeout=240)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[max(0, out.find("Traceback") - 1500):out.find("Traceback") + 1500]
    assert "still running" not in out and "end them now" not in out, out[-3000:]
    if "are up: interrupting the main process" in out:  # its KeyboardInterrupt tracebacks are kept, in its file
        assert "Traceback" in (tmp_path / "wp_autotrace-example.stderr.txt").read_text()
