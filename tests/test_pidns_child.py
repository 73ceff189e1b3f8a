"""A traced program's Python child in a new pid namespace (`unshare -p -f --mount-proc`, as bwrap and nsjail do):
its records carry its namespace pids (1, 2), the watcher samples it by host pid. The report shows each process once,
by the host pid `ps` shows, under its host parent (not a second, parentless pid-1 row), and counts 4 processes, not
6. The truth is the test's own: the main reads its namespaced descendants' host pids with psutil while they run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, wait_for_watcher

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="needs root and unshare (a pid namespace)")

# Each program's wait for the watcher to have sampled its namespaced processes (each needle, such as b'"nspid":1', in
# the log that many times) before it lets them end: a process the watcher never saw stays as its records say.
SAMPLED = textwrap.dedent('''
    def sampled(needles, end):
        import os, time
        while time.monotonic() < end:
            with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as log:
                text = log.read()
            if all(text.count(needle) >= n for needle, n in needles.items()):
                return
            time.sleep(0.02)
''')


def run_traced(tmp_path: Path, program: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """program run traced, as a run's main, with the path of the flag it sets (then args): what it printed, and
    the run's log."""
    script, log = tmp_path / "prog.py", tmp_path / "run.jsonl"
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "go"), *args], capture_output=True, text=True,
                          timeout=120, env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                          stdin=subprocess.DEVNULL)
    return done, log


# The namespaced python starts a python child that waits for the flag; the main, outside, reads both host pids
# (psutil: the test's reading, not the tool's), prints them, waits for the watcher to have sampled both, then sets
# the flag.
PROGRAM = SAMPLED + textwrap.dedent('''
    import json, os, subprocess, sys, time
    import psutil
    flag = sys.argv[1]
    wait = "import os, sys, time; [time.sleep(0.02) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]"
    inner = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {wait!r}, sys.argv[1]]); sys.exit(4)"
    ns = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", inner, flag])
    end = time.monotonic() + 60
    while True:
        pythons = [p.pid for p in psutil.Process(ns.pid).children(recursive=True) if p.name().startswith("python")]
        if len(pythons) == 2 or time.monotonic() > end or ns.poll() is not None:
            break
        time.sleep(0.02)
    print(json.dumps({"unshare": ns.pid, "pythons": sorted(pythons)}), flush=True)
    sampled({b'"nspid":1': 1, b'"nspid":2': 1}, end)  # the namespace's pids 1 and 2
    open(flag, "w").close()
    print(json.dumps({"flag": time.time()}), flush=True)
    print("rc", ns.wait())
''')


def test_a_child_in_a_pid_namespace_is_one_process_under_its_host_pid(tmp_path: Path) -> None:
    done, log = run_traced(tmp_path, PROGRAM)
    assert done.returncode == 0 and done.stdout.endswith("rc 4\n"), done.stdout + done.stderr
    truth = json.loads(done.stdout.splitlines()[0])
    assert len(truth["pythons"]) == 2, truth
    wait_for_watcher(log)
    out = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", "--json", str(log)], capture_output=True,
                         text=True, timeout=120, env=clean_env())
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    procs = rep["processes"]
    by_pid = {p["pid"]: p for p in procs}
    main = next(p for p in procs if p["role"] == "main")
    assert sorted(by_pid) == sorted([main["pid"], truth["unshare"], *truth["pythons"]]), procs
    outer, inner = truth["pythons"]  # the namespace's pid 1 started first
    assert [by_pid[pid]["traced"] for pid in (outer, inner)] == [True, True]
    chain = [main["pid"], truth["unshare"], outer, inner]
    for parent, child in zip(chain, chain[1:]):
        assert procs[by_pid[child]["parent_index"]]["pid"] == parent, (child, procs)
    # both waited for the flag: their ends are the host's (the watcher's sample by host pid), not the end its claim's
    # look-up under the namespace pid wrote (another host process had that pid, or none)
    flagged = json.loads(done.stdout.splitlines()[1])["flag"]
    for pid in (outer, inner):
        assert rep["t0"] + by_pid[pid]["ending"]["at"] >= flagged - 0.05, (pid, by_pid[pid]["ending"], flagged)


FIXTURE = Path(__file__).resolve().parent / "fixtures" / "odd" / "pidns_child_killed.jsonl"


# The namespace the fixture's writers in it and the watcher's entries of them name, as today's do (the fixture was
# written before either recorded one): any inode other than the host's, one for both.
NS = ',"pidns":4026532999'


def namespace_read(text: str) -> str:
    """The fixture's log as a watcher that read the namespace writes it: the namespace's writers (pid 1, pid 2) and
    the tree entries with an nspid name their namespace."""
    out = []
    for line in text.splitlines(keepends=True):
        if re.search(r'"pid":[12],"ppid":[01],"host":"vm",', line):
            line = line.replace('"host":"vm",', f'"host":"vm"{NS},', 1)
        out.append(re.sub(r'("nspid":\d+)', r"\1" + NS, line))
    return "".join(out)


def test_a_namespaced_child_without_its_exit_ends_where_the_host_saw_it_end(tmp_path: Path) -> None:
    """The log of the test above with the namespace's pid 1 (host 18230) left without its process_exit, as a kill
    leaves it, and its namespace read. Its end is the watcher's by host pid (its `ended` entry for 18230), not the
    entry its claim's look-up under pid 1 wrote earlier (host pid 1 is another process: fails where that one was
    kept)."""
    log = tmp_path / "read.jsonl"
    log.write_text(namespace_read(FIXTURE.read_text()))
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    assert sum(NS[1:] in json.dumps(r, separators=(",", ":")) for r in lines) == 5  # 3 records, 2 entries
    ended = {e["pid"]: e["end"] for r in lines if r["event"] == "tree" for e in r.get("ended", ())}
    assert ended[1] < ended[18230]  # the claim's look-up came first
    from .conftest import report_json

    rep = report_json(log)
    by_pid = {p["pid"]: p for p in rep["processes"]}
    assert sorted(by_pid) == [18225, 18229, 18230, 18232]
    killed = by_pid[18230]
    assert killed["traced"] and killed["exit_record_s"] is None, killed
    assert abs(rep["t0"] + killed["ending"]["at"] - ended[18230]) < 0.01, killed["ending"]


def test_a_start_time_alone_joins_no_namespaced_process_to_a_host_one() -> None:
    """The same real log as written then: no record names a namespace, so the namespace's pid 1 and 2 match the
    host's 18230 and 18232 by pid there and start time alone, which is no proof (namespaces started in one clock
    grain share both: TWINS below, three of four). They were merged on it; now each stays a row, the traced one
    saying which host process it may be, the host one "traced: not known", and each process is counted once."""
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.strip()]
    assert not any("pidns" in json.dumps(r) for r in lines)
    inner = {e["nspid"]: e for r in lines if r["event"] == "tree" for e in r.get("started", ()) if "nspid" in e}
    assert sorted((n, e["pid"]) for n, e in inner.items()) == [(1, 18230), (2, 18232)]
    from .conftest import report_json

    rep = report_json(FIXTURE)
    rows = {(p["host"], p["pid"]): p for p in rep["processes"]}
    for nspid, entry in inner.items():
        assert rows[("vm", entry["pid"])]["traced"] is None, rows[("vm", entry["pid"])]
        assert rows[("vm", nspid)]["traced"] and rows[("vm", nspid)]["host_pids"] == [entry["pid"]], rows
    assert rep["processes_started"] == 4, rep["processes_started"]  # the main, unshare, two pythons
    from wp_autotrace.analysis.words.sentences import process_words

    assert process_words(rows[("vm", 1)]).endswith("(may be host pid 18230: the same start, not proven)")


TWINS = Path(__file__).resolve().parent / "fixtures" / "odd" / "pidns_twins_one_grain.jsonl"


def test_namespaces_started_in_one_clock_grain_lose_no_process() -> None:
    """A real log: a main started four `unshare -pf python` children at once; three of their pythons began in one
    10 ms grain, so their records (pid 1, ppid 0, one create time) are one process to the fold. The watcher saw each
    by its host pid (its tree entries: the truth here). Merging all three host processes into that one twin had
    dropped two of them (the report listed 7 processes for the 9 the host ran); each host process stays now."""
    lines = [json.loads(x) for x in TWINS.read_text().splitlines() if x.strip()]
    seen = {e["pid"] for r in lines if r["event"] == "tree" for e in r.get("started", ())}
    colliding = [e["pid"] for r in lines if r["event"] == "tree" for e in r.get("started", ())
                 if e.get("nspid") == 1 and e["create_time"] == 1796564730.8]
    assert len(seen) == 9 and len(colliding) == 3  # the main, four unshares, four pythons
    from .conftest import report_json

    rep = report_json(TWINS)
    pids = {p["pid"] for p in rep["processes"]}
    assert seen <= pids, sorted(seen - pids)


# Four `unshare -p -f` pythons started at once, each its namespace's pid 1; each prints nothing and waits for the flag,
# so all four live (and their records interleave) until the main, outside, has read their host pids and command lines
# (psutil: the test's own reading) and seen the watcher sample all four. Then each exits with its own code.
SIBLINGS = SAMPLED + textwrap.dedent('''
    import json, os, subprocess, sys, time
    import psutil
    flag, extra = sys.argv[1], sys.argv[2:]
    wait = "import os, sys, time; [time.sleep(0.02) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]; "
    kid = wait + "sys.exit(int(sys.argv[2]))"
    ps = [subprocess.Popen(["unshare", "-p", "-f", *extra, sys.executable, "-c", kid, flag, str(10 + i)])
          for i in range(4)]
    end = time.monotonic() + 60
    truth = {}
    while len(truth) < 4 and time.monotonic() < end:
        truth = {c.pid: {"unshare": p.pid, "cmdline": c.cmdline()} for p in ps
                 for c in psutil.Process(p.pid).children() if c.name().startswith("python")}
        time.sleep(0.02)
    print(json.dumps(truth), flush=True)
    sampled({b'"nspid":1': 4}, end)  # all four namespaces' pid 1
    open(flag, "w").close()
    print("rc", [p.wait() for p in ps])
''')


@pytest.mark.parametrize("mount_proc", [False, True], ids=["host-proc", "mount-proc"])
def test_sibling_namespaces_each_keep_their_own_records(tmp_path: Path, mount_proc: bool) -> None:
    """Each of four namespaces' pid 1 is one row under its host pid, traced, holding its own records (its command
    line, its process_exit) -- not one pid-1 row holding them all and four host rows told "untraced"."""
    done, log = run_traced(tmp_path, SIBLINGS, *(["--mount-proc"] if mount_proc else []))
    assert done.returncode == 0 and done.stdout.endswith("rc [10, 11, 12, 13]\n"), done.stdout + done.stderr
    truth = {int(pid): t for pid, t in json.loads(done.stdout.splitlines()[0]).items()}
    assert len(truth) == 4, truth
    wait_for_watcher(log)
    out = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", "--json", str(log)], capture_output=True,
                         text=True, timeout=120, env=clean_env())
    assert out.returncode == 0, out.stderr
    procs = json.loads(out.stdout)["processes"]
    by_pid = {p["pid"]: p for p in procs}
    main = next(p for p in procs if p["role"] == "main")
    unshares = [t["unshare"] for t in truth.values()]
    assert sorted(by_pid) == sorted([main["pid"], *unshares, *truth]), procs
    for pid, t in truth.items():
        row = by_pid[pid]
        assert row["traced"] and row["exit_record_s"] is not None, row
        assert row["cmd"].split()[-2:] == t["cmdline"][-2:], (row["cmd"], t["cmdline"])  # its own argv, by host pid
        assert procs[row["parent_index"]]["pid"] == t["unshare"], row


GRAIN = Path(__file__).resolve().parent / "fixtures" / "odd" / "pidns_three_in_one_grain.jsonl"


def test_three_namespaces_in_one_clock_grain_are_told_apart_by_their_namespace() -> None:
    """A real log (the test above's shape): three of the four namespaces' pid 1 began in one 10 ms grain, so their
    records share (host, pid 1, create time); each record's `pidns` and the watcher's reading of each host pid's
    namespace join each host python to its own records. The truth is the watcher's own entries: each host pid's
    command line (its exit code is its last argument) and namespace."""
    lines = [json.loads(x) for x in GRAIN.read_text().splitlines() if x.strip()]
    seen = {e["pid"]: e for r in lines if r["event"] == "tree" for e in r.get("started", ())}
    starts = [r for r in lines if r["event"] == "process_start" and r["pid"] == 1]
    assert len(seen) == 9 and len({(r["create_time"], r["pid"]) for r in starts}) == 2  # 3 share one grain
    from .conftest import report_json

    rep = report_json(GRAIN)
    by_pid = {p["pid"]: p for p in rep["processes"]}
    assert sorted(by_pid) == sorted(seen)
    inner = {pid: e for pid, e in seen.items() if e.get("nspid") == 1}
    assert len(inner) == 4
    for pid, e in inner.items():
        row = by_pid[pid]
        assert row["traced"] and row["exit_record_s"] is not None and row["host"] == lines[0]["host"], row
        assert row["cmd"].split()[-1] == e["cmd"].split()[-1], (row["cmd"], e["cmd"])


# The main itself unshares a pid namespace (for its children only) and forks two: the first is that namespace's pid
# 1, the second its pid 2. os.fork's results are the host pids (the kernel's answer, the program's own reading).
# Pid 2 ends first, and pid 1 only once the main reaped it: the namespace's init ending kills what is left in it.
FORKED = SAMPLED + textwrap.dedent('''
    import ctypes, json, os, sys, time
    flag = sys.argv[1]
    assert ctypes.CDLL(None, use_errno=True).unshare(0x20000000) == 0, ctypes.get_errno()  # CLONE_NEWPID
    pids = []
    for code, go in ((0, flag + "2"), (3, flag)):
        pid = os.fork()
        if pid == 0:
            while not os.path.exists(go):
                time.sleep(0.02)
            sys.exit(code)
        pids.append(pid)
    print(json.dumps(pids), flush=True)
    end = time.monotonic() + 60
    sampled({b'"nspid":1': 1, b'"nspid":2': 1}, end)  # the namespace's pids 1 and 2
    open(flag, "w").close()
    second = os.waitstatus_to_exitcode(os.waitpid(pids[1], 0)[1])
    open(flag + "2", "w").close()
    print("rc", [os.waitstatus_to_exitcode(os.waitpid(pids[0], 0)[1]), second])
''')


def test_children_forked_into_a_namespace_their_parent_unshared_are_its_own(tmp_path: Path) -> None:
    """A forked child reads its namespace again (its parent unshared one after its own start): its records are
    not the parent's namespace's pids 1 and 2 but the host processes os.fork returned, traced, under the main."""
    done, log = run_traced(tmp_path, FORKED)
    assert done.returncode == 0 and done.stdout.endswith("rc [0, 3]\n"), done.stdout + done.stderr
    kids = json.loads(done.stdout.splitlines()[0])
    wait_for_watcher(log)
    from .conftest import report_json

    procs = report_json(log)["processes"]
    by_pid = {p["pid"]: p for p in procs}
    main = next(p for p in procs if p["role"] == "main")
    assert sorted(by_pid) == sorted([main["pid"], *kids]), procs
    for pid in kids:
        assert by_pid[pid]["traced"] and by_pid[pid]["forked"] and by_pid[pid]["exit_record_s"] is not None
        assert procs[by_pid[pid]["parent_index"]]["pid"] == main["pid"]


# The namespace's pid 1 starts a child (its pid 2) and, once the flag is set, sends it SIGTERM by that pid
# (os.kill(2)): the record names the target by its namespace pid. Truth: the main's psutil reading of both host pids.
SIGNALLED = SAMPLED + textwrap.dedent('''
    import json, os, subprocess, sys, time
    import psutil
    flag = sys.argv[1]
    inner = ("import os, signal, subprocess, sys, time; "
             "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
             "[time.sleep(0.02) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]; "
             "os.kill(c.pid, signal.SIGTERM); sys.exit(-c.wait())")
    ns = subprocess.Popen(["unshare", "-p", "-f", sys.executable, "-c", inner, flag])
    end = time.monotonic() + 60
    pythons = []
    while len(pythons) < 2 and time.monotonic() < end and ns.poll() is None:
        pythons = [c.pid for c in psutil.Process(ns.pid).children(recursive=True) if c.name().startswith("python")]
        time.sleep(0.02)
    print(json.dumps(sorted(pythons)), flush=True)
    sampled({b'"nspid":1': 1, b'"nspid":2': 1}, end)  # the namespace's pids 1 and 2
    open(flag, "w").close()
    print("rc", ns.wait())
''')


def test_a_signal_sent_by_namespace_pid_is_told_to_the_host_process(tmp_path: Path) -> None:
    """kill(2) from the namespace's pid 1 reached its child: the report tells the child's end as that SIGTERM sent
    by the sender's host pid (its target read through the merge), not as an end nothing explains."""
    done, log = run_traced(tmp_path, SIGNALLED)
    assert done.returncode == 0 and done.stdout.endswith("rc 15\n"), done.stdout + done.stderr
    sender, target = json.loads(done.stdout.splitlines()[0])  # the namespace's pid 1 started first
    wait_for_watcher(log)
    from .conftest import report_json

    by_pid = {p["pid"]: p for p in report_json(log)["processes"]}
    ending = by_pid[target]["ending"]
    assert ending["signal"] == "SIGTERM" and f"sent by child {sender} " in ending["words"], ending
