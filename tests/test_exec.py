"""A traced process that execs a non-Python program writes an `exec` record first (issue 20 item 4,
issue 24 item 5): the root handing over to /bin/sh, a hand-written fork()+exec() child, pty.fork() as
pexpect uses it. Its end is then the watcher's, and the model says "exec'd into", never "killed"."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.fold import build

from .conftest import events
from .test_watcher import WAIT_SAMPLED, differential


def execs_of(recs: list[dict[str, Any]], pid: int) -> list[dict[str, Any]]:
    return [r for r in events(recs, "exec") if r["pid"] == pid]


def ended_pids(recs: list[dict[str, Any]]) -> set[int]:
    return {e["pid"] for t in events(recs, "tree") for e in t["ended"]}


def test_root_execs_a_shell_and_exits_zero(tmp_path: Path) -> None:
    """os.execv("/bin/sh", ...) in the root: same output as untraced, an exec record (argv masked), the end from
    the watcher, and the model's main "exec'd into sh", not killed."""
    recs = differential('''
        import os, sys
        sys.stdout.flush()
        os.execv("/bin/sh", ["sh", "-c", "echo from sh; exit 0", "x", "--token=s3cret-value-1"])
    ''', tmp_path)
    root = events(recs, "process_start")[0]["pid"]
    (rec,) = execs_of(recs, root)
    assert rec["executable"] == "/bin/sh" and rec["argv"][:3] == ["sh", "-c", "echo from sh; exit 0"]
    assert "s3cret-value-1" not in str(rec["argv"]) and b"s3cret" not in (tmp_path / "run.jsonl").read_bytes()
    assert not [r for r in events(recs, "process_exit") if r["pid"] == root]
    assert root in ended_pids(recs)
    main = [p for p in build(recs).processes if p.pid == root][0]
    assert main.exit_how == "exec'd into sh", main.exit_how


def test_fork_exec_child_and_pty_fork_child(tmp_path: Path) -> None:
    """A hand-written fork()+execvp() child and a pty.fork()+execv() child (pexpect's way) each write one exec
    record (execvp's PATH walk: only the path that exists), and their ends are the watcher's."""
    recs = differential(WAIT_SAMPLED + textwrap.dedent('''
        import os, pty
        wait_until_sampled()
        pid = os.fork()
        if pid == 0:
            os.execvp("sleep", ["sleep", "0.5"])
        pty_pid, fd = pty.fork()
        if pty_pid == 0:
            os.execv("/bin/sh", ["sh", "-c", "sleep 0.5"])
        os.waitpid(pid, 0)
        while True:
            try:
                if not os.read(fd, 1024):
                    break
            except OSError:
                break
        os.waitpid(pty_pid, 0)
        print("done")
    '''), tmp_path)
    root = events(recs, "process_start")[0]["pid"]
    children = [s["pid"] for s in events(recs, "process_start") if s["ppid"] == root and s["forked"]]
    assert len(children) == 2, events(recs, "process_start")
    # which is which: by what each exec'd (the two may start in either order)
    forked, pty_child = sorted(children, key=lambda pid: [r["argv"][0] for r in execs_of(recs, pid)] != ["sleep"])
    (a,) = execs_of(recs, forked)
    (b,) = execs_of(recs, pty_child)
    assert a["argv"] == ["sleep", "0.5"] and os.path.basename(a["executable"]) == "sleep"
    assert b["executable"] == "/bin/sh" and b["argv"] == ["sh", "-c", "sleep 0.5"]
    assert {forked, pty_child} <= ended_pids(recs)
    how = {p.pid: p.exit_how for p in build(recs).processes}
    assert how[forked] == "exec'd into sleep" and how[pty_child] == "exec'd into sh", how


def test_failed_exec_goes_on_writing(tmp_path: Path) -> None:
    """An exec the kernel refuses (an executable file with no format): the exec record, then the process goes
    on and writes its process_exit; the model does not call it exec'd."""
    bogus = tmp_path / "bogus"
    bogus.write_bytes(b"\x00\x01not a program")
    bogus.chmod(0o755)
    recs = differential(textwrap.dedent(f'''
        import os
        try:
            os.execv({str(bogus)!r}, ["bogus"])
        except OSError as exc:
            print("exec failed", exc.errno)
    '''), tmp_path)
    root = events(recs, "process_start")[0]["pid"]
    (rec,) = execs_of(recs, root)
    (done,) = [r for r in events(recs, "process_exit") if r["pid"] == root]
    assert done["seq"] > rec["seq"]
    main = [p for p in build(recs).processes if p.pid == root][0]
    assert main.exit_how == "exit" and main.exec_into is None
