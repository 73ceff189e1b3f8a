"""How the report names the endings of processes it did not trace (no process_start, no process_exit): real runs,
the watcher's own view (its zombie entry's wait status, its end times), never words a trace would need.

- An untraced child that exited 0 and that the watcher saw defunct (its wait status 0) exited: it has no Python
  exit handlers to skip, so "left without its exit handlers (os._exit)" is not its ending.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import report_json, run_python, traced_env, wait_for_watcher

# The main process starts an untraced child and reaps it only once the watcher wrote it off as a zombie (its
# tree record's `zombies` entry, read from the log; bounded), so its wait status is in the log.
REAP_WHEN_SEEN_DEFUNCT = textwrap.dedent('''
    import json, os, subprocess, time
    log = os.environ["WP_AUTOTRACE_LOG"]

    def logged(key, pid):  # the watcher's tree records hold pid in their `key` list (bounded wait)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log, "rb") as f:
                for line in f:
                    if line.startswith(b'{"') and b'"tree"' in line:
                        try:
                            rec = json.loads(line)
                        except ValueError:
                            continue
                        if any(e["pid"] == pid for e in rec.get(key) or ()):
                            return True
            time.sleep(0.02)
        return False

    child = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    member = logged("started", child.pid)
    child.stdin.write(b"x"); child.stdin.close()  # it exits 0; not reaped until the watcher saw it defunct
    seen = member and logged("zombies", child.pid)
    print("child", child.pid, child.wait(), "seen defunct" if seen else "never seen defunct", flush=True)
''')

def _ending(rep: dict[str, Any], pid: int) -> dict[str, Any]:
    return next(p for p in rep["processes"] if p["pid"] == pid)["ending"]


def test_an_untraced_child_seen_defunct_with_code_0_exited(tmp_path: Path) -> None:
    """`head`, reaped by its parent after the watcher saw it defunct: "exited (code 0)", from its wait status."""
    log = tmp_path / "run.jsonl"
    script = tmp_path / "main.py"
    script.write_text(REAP_WHEN_SEEN_DEFUNCT)
    res = run_python([str(script)], traced_env(log))
    assert res.returncode == 0 and "seen defunct" in res.stdout and "never" not in res.stdout, (res.stdout, res.stderr)
    wait_for_watcher(log)
    pid = int(res.stdout.split()[1])
    rep = report_json(log)
    ending = _ending(rep, pid)
    assert ending["kind"] == "exit" and ending["code"] == 0, ending
    assert any("wait status 0" in e for e in ending["evidence"]), ending
    said = " ".join([rep["answer"], *(f["text"] for f in rep["findings"]), ending["words"]])
    assert "exit handlers" not in said and "os._exit" not in said, said


@pytest.mark.parametrize("after", ["", "; time.sleep(1.5)"], ids=["main-exits", "main-lives-on"])
def test_a_child_its_parent_waited_for_did_not_die_with_it(tmp_path: Path, after: str) -> None:
    """A shell wrapper: `sh -c "sleep 0.6; true"` waits for its sleep, then exits. Both ends fall in one watcher
    tick (equal end times): that says nothing of which ended first, so sleep did not "die with its creator";
    and while main lives on, the two ends together are no "signal to the process group" either (a parent and the
    child it waited for, no signal status)."""
    log = tmp_path / "run.jsonl"
    code = f"import subprocess, time; print(subprocess.run(['sh', '-c', 'sleep 0.6; true']).returncode){after}"
    res = run_python(["-c", code], traced_env(log))
    assert res.returncode == 0 and res.stdout == "0\n", (res.stdout, res.stderr)
    wait_for_watcher(log)
    rep = report_json(log)
    # By the tree, not by command line: on a loaded box the watcher's one look at sleep (0.6 s) may fall
    # between sh's fork and its exec, and sleep is then listed with sh's command line.
    main = next(p for p in rep["processes"] if "subprocess.run" in p["cmd"])
    sh = next(p for p in rep["processes"] if p["ppid"] == main["pid"])
    sleep = next(p for p in rep["processes"] if p["ppid"] == sh["pid"])
    print("sleep", sleep["ending"], "sh", sh["ending"])
    for p in (sleep, sh):
        assert p["ending"]["kind"] not in ("with-creator", "with-group"), p["ending"]
    said = " ".join([rep["answer"], *(f["text"] for f in rep["findings"])])
    assert "died with its creator" not in said and "process group" not in said, said
