"""Who each record is about: the fold's state and its identity rules (the Registry fold.Builder holds).

A process is (host, pid, create_time): a reused pid is a new process; a run is its run id; a watcher
record's subjects are found by (host, pid, create_time). See model.py's docstring for the rules.

One process, two clocks: a process_start's create_time is on the clock its process read at its start, a watcher
entry's on the watcher's (watcher_start's `boot`); a wall-clock step between the two reads (NTP, a VM resumed)
sets them apart by the step. Where both sides say how (process_start's `start_ticks`, watcher_start's `boot` and
`tick`), the process is also filed under its start ticks on the watcher's clock (Registry.on_watcher_clock),
which is exactly the create time the watcher computes for it; else create_time alone, as before.

A pid is a pid within one pid namespace. A record whose writer lives in a namespace other than its host's first
traced process's (its header's `pidns`: `unshare -p`, bwrap, nsjail) is about a process of that namespace: its host
is read as namespaced_host(host, pidns) (in_namespace), so two namespaces' pid 1 are two processes, whatever their
create times. pidns.py joins such a process to the watcher's host-pid view of it where the watcher read the same
namespace.
"""

from __future__ import annotations

from typing import Any

from ...common import vocab
from ...common.procfs import same_process
from ..read.records import Record
from .model import Model, Process, Run, Waited

# Read for every record (writer): bound once.
_WATCHER, _PROCESS_EXIT, _EXEC = vocab.WATCHER, vocab.PROCESS_EXIT, vocab.EXEC
# Records writer() leaves Process.last to their visits for (a call's is its Call), and process_exit, never a last.
_LAST_BY_VISIT = frozenset((vocab.PROCESS_EXIT, vocab.CALL, vocab.RETURN, vocab.BLOCKED))


class Registry:
    """The fold's state (the model so far, the runs, the processes by pid and start) and how a record finds
    its process and run. fold.Builder has one and visits records into it; finish.py ends it."""

    def __init__(self, waited: Waited | None = None) -> None:
        # waited: what `run` saw of its program (finish_run gives it to that program's run)
        self.model = Model()
        self.waited = waited
        self.current: dict[tuple[str, int], Process] = {}  # (host, pid) -> latest process
        self.by_start: dict[tuple[str, int, float], Process] = {}  # (host, pid, create_time)
        self.all_by_pid: dict[tuple[str, int], list[Process]] = {}
        self.watchers: dict[tuple[str, int], Run] = {}
        self.run_exits: list[dict[str, Any]] = []  # run_exit records, matched to their runs at finish
        # One object per distinct value a call holds (target, tag, thread, caller frame): a long
        # run's calls repeat a few call sites, and memory then grows with the calls' count only.
        self.shared: dict[Any, Any] = {}
        # create_time -> round(create_time, 2), for find's lookups only: the watcher names every process by its
        # create_time in each tree and memory record (a long run: tens of thousands of entries), and a float's
        # round() to 2 digits costs several dict lookups. Equal keys (5 and 5.0) look up the same by_start entry.
        self.rounded: dict[float, float] = {}
        # (run id, host) -> (boot, tick) of the run's watcher there (watcher_start): start ticks on its clock
        self.clocks: dict[tuple[str, str], tuple[float, int]] = {}
        # (run id, host) -> [(process, start ticks)] of process_starts read before that watcher's clock
        self.unclocked: dict[tuple[str, str], list[tuple[Process, int]]] = {}
        # a process the watcher saw in another pid namespace -> its pid there (tree entries' nspid): its own records
        # carry that pid, and pidns.merge_namespaced makes the two one process at the log's end
        # and that namespace where the watcher read it (its entry's pidns), else None
        self.ns_pids: dict[Process, tuple[int, int | None]] = {}
        # host -> the pid namespace of its first traced process (None: the initial one): its pids are the watcher's
        self.home_ns: dict[str, int | None] = {}
        # namespaced_host(host, ns) -> host: the clocks, the watchers and the host are the host's
        self.real_host: dict[str, str] = {}
        # a process merged with its host twin (pidns.py) -> the namespaced host its records were filed under: the
        # pids it recorded (its pool's sidecar, its workers) are pids there (nspids.py reads them on the host)
        self.space_of: dict[Process, str] = {}
        # (namespaced host, pid there) -> the host pid the watcher saw as it (pidns._hosted); None: two did
        self.hosted: dict[tuple[str, int], int | None] = {}
        # (host, ns) -> namespaced_host(host, ns), made once (in_namespace)
        self.ns_hosts: dict[tuple[str, int], str] = {}

    def in_namespace(self, host: str, ns: int) -> str:
        """The host a record of host whose writer's pid namespace is ns (its `pidns`) is filed under, set as the
        record's host before it is visited: where ns is not the host's home namespace, the namespace's
        (namespaced_host), whose pids its pid and ppid are. A container's log has it in every record: one string
        per namespace (its hash kept), not one a record."""
        if self.home_ns.setdefault(host, ns) == ns:
            return host
        inner = self.ns_hosts.get((host, ns))
        if inner is None:
            inner = self.ns_hosts[(host, ns)] = namespaced_host(host, ns)
            self.real_host[inner] = host
        return inner

    def run(self, run_id: str) -> Run:
        run = self.model.runs.get(run_id)
        if run is None:
            run = self.model.runs[run_id] = Run(run_id, self.real_host)
            run.home_ns = self.home_ns
        return run

    def new_process(self, host: str, pid: int, ppid: int | None, ts: float, run: Run | None) -> Process:
        p = Process(host, pid, len(self.model.processes))
        p.ppid = ppid
        p.start = ts
        if ppid is not None and ppid != pid:
            p.parent = self.current.get((host, ppid))
        if run is not None:
            self.join(p, run)
        self.model.processes.append(p)
        self.current[(host, pid)] = p
        self.all_by_pid.setdefault((host, pid), []).append(p)
        return p

    def join(self, p: Process, run: Run) -> None:
        if p.run is not run:
            p.run = run
            run.processes.append(p)

    def set_create_time(self, p: Process, ct: float | None) -> None:
        if ct is not None and p.create_time is None:
            p.create_time = round(ct, 2)
            p.start = ct if p.start is None or not p.traced else min(p.start, ct)
            self.by_start[(p.host, p.pid, p.create_time)] = p

    def on_watcher_clock(self, host: str, run: Run, ticks: Any) -> float | None:
        """Start ticks as the create time run's watcher on host computes (env.clock_create_time's formula on its
        boot and tick); None where either is unknown."""
        clock = self.clocks.get((run.id, self.real_host.get(host, host)))
        if clock is None or type(ticks) is not int:
            return None
        return round(clock[0] + ticks / clock[1], 2)

    def entry_on_watcher_clock(self, host: str, run: Run, entry: dict[str, Any]) -> dict[str, Any]:
        """An entry another process of the run computed (the root's below list) with its create time on the run's
        watcher's clock, where its start_ticks and that clock are known: the root read its boot time before its
        watcher did, and a wall-clock step between the two put its entries the step away from the watcher's
        entries of the same processes. Else the entry as written (older logs, no watcher)."""
        ct = self.on_watcher_clock(host, run, entry.get("start_ticks"))
        return entry if ct is None else {**entry, "create_time": ct}

    def file_ticks(self, p: Process, run: Run, ticks: Any) -> None:
        """File p under its start ticks on its run's watcher's clock too, now or once that clock is read
        (clock_read): the watcher's entries then find it whatever clock its own create_time is on."""
        ct = self.on_watcher_clock(p.host, run, ticks)
        host = self.real_host.get(p.host, p.host)
        if ct is not None:
            self.by_start[(p.host, p.pid, ct)] = p
        elif type(ticks) is int and (run.id, host) not in self.clocks:
            self.unclocked.setdefault((run.id, host), []).append((p, ticks))

    def clock_read(self, run: Run, host: str, boot: float, tick: int) -> None:
        """run's watcher on host computes create times on (boot, tick): file the processes read before it."""
        self.clocks[(run.id, host)] = (boot, tick)
        for p, ticks in self.unclocked.pop((run.id, host), ()):
            self.file_ticks(p, run, ticks)

    def writer(self, r: Record) -> Process | None:
        """The process that wrote r, or None for the watcher's records (whose subjects are found by `subject`
        and `find`, never by who wrote them). Every record a process writes passes here once, and one step
        here is every record's: the writer's role, its last record, a failed exec, its run's time span."""
        typed = type(r) is not dict  # a typed record (read/fastread.py): the same values as attributes
        if typed:
            host, pid, role, event, ts = r.host, r.pid, r.role, r.event, r.ts
        else:
            host, pid, role, event, ts = r["host"], r["pid"], r.get("role"), r["event"], r["ts"]
        key = (host, pid)
        if role == _WATCHER or key in self.watchers:  # is_watcher, inlined
            return None
        p = self.current.get(key)
        if p is None:
            p = self.new_process(host, pid, r.get("ppid"), ts, None)
        if role and not p.role:
            p.role = role
        if event not in _LAST_BY_VISIT:
            # model.seen(r), inlined
            p.last = (event, ts, r.target, r.signal) if typed else (event, ts, r.get("target"), r.get("signal"))
        if p.exec_into is not None and event != _EXEC:
            p.exec_into = None  # it wrote again: the exec failed
        run = p.run
        if run is not None:
            # run.seen(ts), inlined: this runs for every record a process writes
            if run.start is None or ts < run.start:
                run.start = ts
            if run.end is None or ts > run.end:
                run.end = ts
            if (r.truncated if typed else r.get("truncated")) is not None:
                run.cut.append(f"a {event} record of pid {p.pid} was cut to fit 32 KiB")
        return p

    def is_same(self, p: Process, ct: float | None, ts: float) -> bool:
        """Whether a process seen now with start time ct is p (not a reused pid)."""
        if ct is None:
            return not (p.exited and p.end is not None and ts > p.end)
        if p.create_time is not None:
            return same_process(p.create_time, ct)
        # p's start is only known from its first record: ct must not be later.
        first = p.start or ts
        return (ct <= first or same_process(first, ct)) and not (p.exited and p.end is not None and ct > p.end)

    def is_new_start(self, p: Process, r: dict[str, Any]) -> bool:
        """Whether a process_start for a known (host, pid) starts a new process."""
        ct = r.get("create_time")
        if p.run is not None and r.get("run") and p.run.id != r["run"]:
            return True  # another run (pid 1 in a container, every run)
        if p.exited:
            return True  # an exec writes no process_exit: after one, this pid is a new process
        if ct is not None and p.create_time is not None:
            return not same_process(p.create_time, ct)
        if not p.traced:
            return not self.is_same(p, ct, r["ts"])
        # A live traced process starting again: an exec (same ppid), else a reused pid.
        return bool(r.get("forked")) or r.get("ppid") != p.ppid

    def subject(self, host: str, entry: dict[str, Any], ts: float, run: Run) -> Process:
        """The process a watcher entry describes: found by (host, pid, create_time), or new."""
        pid, ct = entry["pid"], entry.get("create_time")
        if ct is not None:
            p = self.by_start.get((host, pid, round(ct, 2)))
            if p is not None:
                if entry.get("name") and not p.traced and entry["name"] != p.name:
                    # the watcher lists a process again once it exec'd (first seen between fork and exec, with
                    # its parent's command line and memory: a g++ driver torch forked read as a 351 MiB
                    # "train.py"): the program it runs now names it and its memory starts there; a traced
                    # process's own process_start argv names it anyway. Also once it renamed itself (prctl,
                    # setproctitle: gunicorn's workers): its name is the new one, its memory its own all along.
                    # `exec` says which where the watcher saw its image; older logs: a new name was the sign.
                    p.cmd, p.name = entry.get("cmd") or p.cmd, entry["name"]
                    if entry.get("exec", True):
                        p.peak_rss = 0
                self.note_rss(p, entry.get("rss"))  # a later sample (a leftover's last RSS) is its peak too
                return p
        p = self.current.get((host, pid))
        if p is None or not self.is_same(p, ct, ts):
            p = self.new_process(host, pid, entry.get("ppid"), ct if ct is not None else ts, run)
        elif p.run is None:
            self.join(p, run)
        self.set_create_time(p, ct)
        self.describe(p, entry)
        return p

    def describe(self, p: Process, entry: dict[str, Any]) -> None:
        """What a watcher entry adds: parent, name, command, role, rss."""
        ppid = entry.get("ppid")
        if ppid is not None:
            if p.ppid is None:
                p.ppid = ppid
                p.parent = p.parent or self.current.get((p.host, ppid))
            elif ppid != p.ppid:
                p.reparented_to = ppid
        if not p.role and entry.get("role"):
            p.role = entry["role"]
        p.cmd = p.cmd or entry.get("cmd", "")
        p.name = p.name or entry.get("name", "")
        self.note_rss(p, entry.get("rss"))
        if type(entry.get("nspid")) is int:
            ns = entry.get("pidns")
            self.ns_pids[p] = (entry["nspid"], ns if type(ns) is int else None)

    @staticmethod
    def note_rss(p: Process, rss: int | None) -> None:
        if rss is not None:
            p.last_rss = rss
            p.peak_rss = max(p.peak_rss, rss)

    def record_run(self, r: dict[str, Any]) -> Run:
        """The run a watcher record is about: its `run` (the watcher writes it on every record), else its
        writer's."""
        key = (r["host"], r["pid"])
        if r.get("run"):
            run = self.run(r["run"])
            if r.get("role") == vocab.WATCHER:
                self.watchers[key] = run
                run.watcher_pids.add(key)
        else:
            run = self.watchers.get(key) or self.run("")
        if r.get("root_pid") is not None and run.root_pid is None:
            run.root_pid = r["root_pid"]
        if r.get("truncated") is not None:
            run.cut.append(f"a {r['event']} record was cut to fit 32 KiB (its lists are incomplete)")
        run.seen(r["ts"])
        if r["ts"] > run.watcher_last.get(r["host"], -1.0):  # every record read here is the watcher's kind
            run.watcher_last[r["host"]] = r["ts"]
        return run

    def is_watcher(self, r: dict[str, Any]) -> bool:
        return r.get("role") == vocab.WATCHER or (r["host"], r["pid"]) in self.watchers

    def share(self, value: Any) -> Any:
        """The one kept object equal to value (a str, or a frame dict of plain values): a dict's key is its keys
        then its values, in order (one flat tuple: equal exactly when the items are, in the same order)."""
        key = (*value, *value.values()) if type(value) is dict else value
        try:
            return self.shared.setdefault(key, value)
        except TypeError:  # an unhashable frame value (a crafted log): kept as it is
            return value

    def find(self, host: str, entry: dict[str, Any]) -> Process | None:
        ct = entry.get("create_time")
        if ct is not None:
            key = self.rounded.get(ct)
            if key is None:
                key = self.rounded[ct] = round(ct, 2)
            p = self.by_start.get((host, entry["pid"], key))
            if p is not None:
                return p
        p = self.current.get((host, entry["pid"]))
        return p if p is not None and self.is_same(p, ct, p.start or 0.0) else None


def namespaced_host(host: str, ns: int) -> str:
    """The host a process in pid namespace ns (not its host's home one) is filed under: its pids are that
    namespace's. Shown as it is where nothing joined it to a host pid (pidns.py)."""
    return f"{host} (pid namespace {ns})"


def namespace_of(host: str) -> tuple[str, int] | None:
    """The host and pid namespace a namespaced_host names; None for a host's own name."""
    head, sep, tail = host.rpartition(" (pid namespace ")
    return (head, int(tail[:-1])) if sep and tail.endswith(")") and tail[:-1].isdigit() else None
