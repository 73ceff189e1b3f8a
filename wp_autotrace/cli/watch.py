"""A live view of a running traced run: ``wp-autotrace watch [LOG]``.

The log is read incrementally (logread.Tail: from the last offset; a partial
last line waits for its end) and each record is folded into the run model as
it comes (fold.Builder.feed): the same identities, runs and members the
report uses. The live processes' RSS and age come from /proc, each checked by
start time against pid reuse (procfs.same_process). On a terminal the view
redraws in place (curses, 'q' quits); otherwise, or with ``--once``, it prints
plain text. It ends when the run ends: its main process gone, no process of
the run alive, and the log read to its end (a view still reading a big log
decides nothing). Every line is escaped (fmt.escape): thread names, command
lines and roles come from the log. A log moved or removed while watched is
said, and watch stops.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from typing import Any

from ..analysis.derive.labels import rank_value
from ..analysis.fold.fold import Builder
from ..analysis.fold.model import Call, Process, Run
from ..analysis.fold.verdict import watchers_gone
from ..analysis.read.logread import NoUsableLog, Tail
from ..analysis.words.fmt import escape, size_text
from ..common import targets as T
from ..common.procfs import make_reader, same_process
from ..common.vocab import MAIN, WATCHER
from .base import NO_USABLE_LOG, seconds

DEFAULT_INTERVAL_S = 1.0
MAX_INTERVAL_S = 3600.0  # a refresh an hour apart is a view no longer; time.sleep refuses what time_t cannot hold
# Per refresh a view reads at most this much of the log (then draws, then reads on): a huge log never
# freezes it, and it says "reading" until it has caught up.
READ_PER_REFRESH = 64 * 2**20
LOG_GLOB = "wp_autotrace-*.jsonl"
ROLE_WIDTH = 30  # indented role names: "compile-sidecar (left)" a few levels deep
MAX_INDENT = 8  # depth levels drawn as indentation


class LogMoved(Exception):
    """The log's path no longer names the file being watched."""


def newest_log(folder: str = ".") -> str | None:
    """The most recently written wp_autotrace-*.jsonl in folder, or None. A log removed between the listing and its
    reading (an old run's, cleared away meanwhile) is passed over, never a traceback."""
    times = {}
    for log in glob.glob(os.path.join(folder, LOG_GLOB)):
        try:
            times[log] = os.path.getmtime(log)
        except OSError:
            continue
    return max(times, key=times.__getitem__) if times else None


def _site(caller: Any) -> str:
    if not isinstance(caller, dict) or not caller.get("file"):
        return "?"
    path = str(caller["file"])
    short = "/".join(path.split("/")[-3:])
    return f"{short}:{caller.get('line')}"


def _age(now: float, since: float | None) -> str:
    """Seconds since `since` on this host's clock, or "?" where they cannot be told: no time, or a time
    ahead of this host's clock (a log written on a host whose clock runs ahead; never a negative age)."""
    if not since or since > now:
        return "?"
    return f"{now - since:.1f}s"


class RunView:
    """What the model and /proc say about the newest run in a log."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or os.uname().nodename
        self.reader = make_reader()
        self.builder = Builder()
        self.run: Run | None = None
        self.rss: dict[int, int] = {}  # id(process) -> live rss
        self.alive: set[int] = set()  # id(process) of the run's live processes at the last refresh
        self.behind = False  # the log is not read to its end yet

    def feed(self, r: dict[str, Any]) -> None:
        """Take one record into the model; a new run's root makes that run the one shown."""
        p = self.builder.feed(r)
        if (p is not None and r["event"] == "process_start" and p.role == MAIN and not r.get("forked")
                and p.run is not None and r.get("root_pid") in (None, p.pid)):
            self.run = p.run

    def root(self) -> Process | None:
        run = self.run
        if run is None:
            return None
        mains = [p for p in run.processes if p.role == MAIN and p.pid == run.root_pid]
        return mains[-1] if mains else None

    def _live(self, p: Process) -> bool:
        """Alive now: no end in the log, and (on this host) /proc still shows the same process."""
        if p.end is not None or p.gone is not None or p.role == WATCHER:
            return False
        if p.host != self.host:
            return True  # the watcher's word is the only one for other hosts
        info = self.reader.stat(p.pid)
        if info is None or (p.create_time is not None and not same_process(info["create_time"], p.create_time)):
            return False
        self.rss[id(p)] = info["rss"]
        return True

    def refresh(self) -> bool:
        """Check the run's processes in /proc; True once the run has ended (and the log is read to its end)."""
        run = self.run
        if run is None:
            return False
        self.alive = {id(p) for p in run.processes if self._live(p)}
        root = self.root()
        if root is None or id(root) in self.alive or self.behind:
            return False
        # The main process ended and the watcher wrote its verdict: the run has ended (README), and what
        # still lives is left behind (shown, with how to end it), not a run to keep watching.
        return not self.alive or run.leftover_seen

    def _rows(self) -> list[tuple[int, Process]]:
        """Live processes in tree order, each with its depth below the root (ended parents count)."""
        run = self.run
        if run is None:
            return []
        procs = sorted(run.processes, key=lambda p: (p.create_time or p.start or 0.0, p.index))
        kids: dict[int | None, list[Process]] = {}
        for p in procs:
            parent = p.parent or (self.builder.reg.current.get((p.host, p.ppid)) if p.ppid is not None else None)
            key = id(parent) if parent is not None and parent is not p and parent.run is run else None
            kids.setdefault(key, []).append(p)
        out: list[tuple[int, Process]] = []
        seen: set[int] = set()
        stack = [(p, 0) for p in reversed(kids.get(None, []))]
        while stack:  # depth-first, without recursion: a deep sidecar chain must not hit the recursion limit
            p, depth = stack.pop()
            if id(p) in seen:
                continue
            seen.add(id(p))
            if id(p) in self.alive:
                out.append((depth, p))
            stack.extend((k, depth + 1) for k in reversed(kids.get(id(p), [])))
        return out

    def _state(self, root: Process | None, rows: list[tuple[int, Process]]) -> str:
        run = self.run
        if root is None or run is None:
            return "?"
        if id(root) in self.alive:
            return "running"
        if run.leftover_seen:
            alive = f" ({len(rows)} still alive: wp-autotrace cleanup LOG ends them)" if rows else ""
            return f"ended; the watcher's verdict: {run.leftover_count} left behind{alive}"
        if run.watcher_pids and not run.watcher_exit:
            if watchers_gone(run, self.host):
                return "ended; no verdict will come (the watcher ended without writing what was left)"
            return "ended; verdict pending (the watcher has not written what was left yet)"
        return "ended"

    def render(self, path: str, now: float | None = None) -> list[str]:
        """The view as plain lines, every one escaped."""
        now = time.time() if now is None else now
        rows = self._rows()
        run, root = self.run, self.root()
        gone = sum(1 for p in run.processes if id(p) not in self.alive) if run else 0
        total = sum(self.rss.get(id(p), 0) for _, p in rows)
        state = self._state(root, rows)
        out = [f"wp-autotrace watch  {path}  run {run.id if run else '?'}  "
               f"{time.strftime('%H:%M:%S', time.localtime(now))}" + ("  (reading the log...)" if self.behind else ""),
               f"main {root.pid if root else '?'} {state}; {len(rows)} process(es) alive, "
               f"{gone} ended; rss {size_text(total)}", "",
               f"{'pid':>8}  {'role':<{ROLE_WIDTH}} {'rank':>4} {'depth':>5} {'rss':>8} {'age':>8}  warm_pool"]
        for depth, p in rows:
            out.append(self._row(p, depth, root, now))
        if run is not None and run.possible:
            pids = ", ".join(str(e["pid"]) for e in run.possible.values())
            out.append(f"possibly the run's (same process group or session only; never cleaned up): {pids}")
        calls = sorted((c for _, p in rows for c in p.calls.values() if c.end is None), key=lambda c: c.ts)
        out += ["", f"open calls ({len(calls)}): who waits on what"]
        out += [self._call(c, now) for c in calls]
        return [escape(line) for line in out]

    def _row(self, p: Process, depth: int, root: Process | None, now: float) -> str:
        left = " (left)" if root is not None and p is not root and id(root) not in self.alive else ""
        label = ("  " * min(depth, MAX_INDENT) + (p.role or "child") + left)[:ROLE_WIDTH]
        start = p.create_time or p.start
        age = _age(now, start)
        rss = self.rss.get(id(p), 0)
        warm = [c for c in p.calls.values() if c.tag == T.WARM_POOL]
        warm_text = f"x{len(warm)} from {_site(warm[0].caller)}" if warm else ""
        size = size_text(rss) if rss else "?"
        return (f"{p.pid:>8}  {label:<{ROLE_WIDTH}} {rank_value(p.rank) or '-':>4} {depth:>5} {size:>8} "
                f"{age:>8}  {warm_text}")

    @staticmethod
    def _call(c: Call, now: float) -> str:
        p = c.proc
        return (f"{p.pid:>8}  {p.role or 'child':<{ROLE_WIDTH}} waits {_age(now, c.ts):>8} in "
                f"{c.target.rpartition(':')[2]} ({c.thread or '?'}, called from {_site(c.caller)})")


def _curses(step: Any, interval: float) -> bool:
    """Redraw in place until the run ends (True) or 'q' is pressed (False)."""
    import curses

    def body(screen: Any) -> bool:
        try:
            curses.curs_set(0)
        except curses.error:
            pass
        screen.timeout(int(interval * 1000))
        while True:
            ended, lines = step()
            height, width = screen.getmaxyx()
            screen.erase()
            footer = "q: quit" + ("   (the run has ended)" if ended else "")
            for row, line in enumerate([*lines[: height - 1], footer] if height > 1 else []):
                try:
                    screen.addnstr(min(row, height - 1), 0, line, max(width - 1, 0))
                except curses.error:  # a terminal resized to nothing under us: skip this frame
                    break
            screen.refresh()
            if ended:
                return True
            if screen.getch() in (ord("q"), ord("Q")):
                return False

    return bool(curses.wrapper(body))


def watch(path: str, once: bool, interval: float, out: Any = None) -> int:
    """Show the run in path until it ends (or once); the exit status. LogMoved when the log's path no
    longer names the file (the caller says so)."""
    out = out or sys.stdout
    tail = Tail(path)
    view = RunView()

    def step() -> tuple[bool, list[str]]:
        if tail.moved():
            raise LogMoved(path)
        budget = READ_PER_REFRESH
        if once:  # one view, so from the whole log as it is now (still read in bounded pieces), never a prefix
            budget = max(budget, os.fstat(tail.file.fileno()).st_size)
        while budget > 0:
            before = tail.offset
            for r in tail.read():
                view.feed(r)
            budget -= tail.offset - before
            if not tail.behind or tail.offset == before:
                break
        view.behind = tail.behind
        return view.refresh(), view.render(path)

    try:
        if not once and out.isatty() and os.environ.get("TERM", "dumb") != "dumb":
            _curses(step, interval)
            out.write("\n".join(step()[1]) + "\n")  # the last state stays on the terminal
            return 0
        while True:
            ended, lines = step()
            if once and view.run is None:
                # A view of nothing ("main ? ?", exit 0) would read as a run seen with nothing in it.
                raise NoUsableLog(f"no traced process in {path}: no valid record of one")
            out.write("\n".join(lines) + "\n")
            out.flush()
            if once or ended:
                return 0
            out.write("\n")
            time.sleep(interval)
    finally:
        tail.close()


def add_parser(sub: Any) -> None:
    """watch's subcommand and its arguments."""
    p = sub.add_parser("watch", help="live view of a running traced run: processes, roles, RSS, open calls")
    p.add_argument("log", nargs="?", metavar="LOG", help="the run's log (default: the newest wp_autotrace-*.jsonl "
                                                          "in this folder)")
    p.add_argument("--once", action="store_true", help="print the view once as plain text and exit (default: "
                                                        "refresh until the run ends; q quits)")
    p.add_argument("--interval", type=_interval, default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"seconds between refreshes, at most {MAX_INTERVAL_S:g} (default: {DEFAULT_INTERVAL_S:g})")
    p.set_defaults(func=run)


def _interval(text: str) -> float:
    """A positive number of seconds up to MAX_INTERVAL_S (argparse type)."""
    value = seconds(text)
    if value > MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_INTERVAL_S:g} s between refreshes: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    log = args.log or newest_log()
    if log is None or not os.path.isfile(log):
        raise NoUsableLog(f"no such log: {log}" if log else "no wp_autotrace-*.jsonl in this folder; name the log")
    try:
        return watch(log, args.once, args.interval)
    except LogMoved:
        print(f"wp-autotrace watch: the log {escape(log)} was moved or removed while watched; stopping",
              file=sys.stderr)
        return NO_USABLE_LOG
    except BrokenPipeError:
        raise  # its reader left (`watch | head`): main's, never the log's fault
    except OSError as exc:
        raise NoUsableLog(f"{log}: {exc.strerror or exc}") from None
