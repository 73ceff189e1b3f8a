"""A live view of a running traced run: ``wp-autotrace watch [LOG]``.

The log is read incrementally (from the last offset; a partial last line
waits for its end), the live processes' RSS and age come from /proc, each
checked by start time against pid reuse. On a terminal the view redraws in
place (curses, 'q' quits); otherwise, or with ``--once``, it prints plain
text. It ends when the run ends: its main process gone and no process of
the run alive.
"""

from __future__ import annotations

import glob
import os
import sys
import time
from typing import Any

from ..analysis.labels import rank_value
from ..analysis.logread import parse_line
from ..common.procfs import make_reader, same_process
from ..common.vocab import WATCHER as WATCHER_ROLE

DEFAULT_INTERVAL_S = 1.0
MAX_READ = 8 * 2**20  # per refresh, so a huge log never freezes the view; the rest comes next time
LOG_GLOB = "wp_autotrace-*.jsonl"
ROLE_WIDTH = 30  # indented role names: "compile-sidecar (left)" a few levels deep


def newest_log(folder: str = ".") -> str | None:
    """The most recently written wp_autotrace-*.jsonl in folder, or None."""
    logs = glob.glob(os.path.join(folder, LOG_GLOB))
    return max(logs, key=os.path.getmtime) if logs else None


def _parse(line: bytes) -> dict[str, Any] | None:
    """One checked record from one line (logread's rules: a torn fragment before a record is dropped)."""
    return parse_line(line, _ignore, {})


def _ignore(reason: str) -> None:
    """A live view does not count what it passes over (report does)."""


class LogTail:
    """New complete records of a growing log, from where the last read stopped."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self) -> list[dict[str, Any]]:
        """The records completed since the last read (blank lines and torn fragments skipped)."""
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < self.offset:  # replaced or truncated: start over
                self.offset, self.partial = 0, b""
            f.seek(self.offset)
            data = f.read(MAX_READ)
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()  # b"" after a newline; else a line still being written
        return [r for r in (_parse(line) for line in lines if line.strip()) if r is not None]


def _rank(value: Any) -> str:
    return rank_value(value) or "-"


def _site(caller: Any) -> str:
    if not isinstance(caller, dict) or not caller.get("file"):
        return "?"
    path = str(caller["file"])
    short = "/".join(path.split("/")[-3:])
    return f"{short}:{caller.get('line')}"


class RunView:
    """What the log and /proc say about the newest run in a log."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or os.uname().nodename
        self.reader = make_reader()
        self._reset()

    def _reset(self) -> None:
        self.run: str | None = None
        self.root: tuple[str, int] | None = None
        self.procs: dict[tuple[str, int], dict[str, Any]] = {}
        self.calls: dict[tuple[str, int, int], dict[str, Any]] = {}
        self.ended = 0

    def _proc(self, host: str, pid: int) -> dict[str, Any]:
        return self.procs.setdefault((host, pid), {"pid": pid, "ppid": None, "role": "child", "rank": "-",
                                                   "create_time": None, "rss": None, "warm": [], "alive": True})

    def feed(self, r: dict[str, Any]) -> None:
        """Take one record into the view."""
        host, pid, event = r["host"], r["pid"], r["event"]
        if event == "process_start" and r.get("root_pid") == pid and not r.get("forked") and r.get("run") != self.run:
            self._reset()  # a new run in the same log: show that one
            self.run, self.root = str(r.get("run")), (host, pid)
        run = r.get("run")
        if self.run is not None and isinstance(run, str) and run != self.run:
            return
        if r.get("role") == WATCHER_ROLE:
            if event in ("tree", "leftover"):
                self._tree(r)
            return
        p = self._proc(host, pid)
        if r.get("role"):
            p["role"] = r["role"]
        if event == "process_start":
            p.update(ppid=r.get("ppid"), rank=_rank(r.get("rank")), cmd=" ".join(map(str, r.get("argv") or [])))
            p["create_time"] = r.get("create_time") or p["create_time"]
        elif event == "process_exit":
            p["alive"] = False
        elif event == "tree":
            self._tree(r)
        elif event == "call" and isinstance(r.get("call_id"), int):
            self.calls[(host, pid, r["call_id"])] = r
            if str(r.get("target", "")).endswith(".warm_pool"):
                p["warm"].append(_site(r.get("caller")))
        elif event == "return":
            self.calls.pop((host, pid, r.get("call_id")), None)  # type: ignore[arg-type]
        if p["ppid"] is None:
            p["ppid"] = r.get("ppid")

    def _tree(self, r: dict[str, Any]) -> None:
        """A sampler record: the root's (procs: the whole live set) or the watcher's (started/ended)."""
        host = r["host"]
        listed = r.get("started") if "started" in r else r.get("procs")
        for e in listed or []:
            if isinstance(e, dict) and isinstance(e.get("pid"), int):
                p = self._proc(host, e["pid"])
                if p["ppid"] is None:
                    p["ppid"] = e.get("ppid")
                if p["role"] == "child" and e.get("role"):
                    p["role"] = e["role"]
                p["create_time"] = p["create_time"] or e.get("create_time")
                p["cmd"] = p.get("cmd") or e.get("cmd") or e.get("name")
        for e in r.get("ended") or []:  # the watcher saw it go (the only word for other hosts)
            if isinstance(e, dict) and (host, e.get("pid")) in self.procs:
                self.procs[(host, e["pid"])]["alive"] = False

    def refresh(self) -> bool:
        """Check the live processes in /proc; True once the run has ended."""
        for (host, pid), p in self.procs.items():
            if not p["alive"] or host != self.host:
                continue
            info = self.reader.stat(pid)
            ct = p["create_time"]
            if info is None or (ct is not None and not same_process(info["create_time"], ct)):
                p["alive"] = False
                continue
            p["create_time"] = ct or info["create_time"]
            p["rss"] = info["rss"]
        live = [k for k, p in self.procs.items() if p["alive"]]
        root = self.procs.get(self.root) if self.root else None
        return self.root is not None and (root is None or not root["alive"]) and not live

    def _depths(self) -> list[tuple[int, dict[str, Any]]]:
        """Live processes in tree order, each with its depth below the root (ended parents count)."""
        kids: dict[Any, list[tuple[str, int]]] = {}
        for (host, pid), p in sorted(self.procs.items(), key=lambda kv: (kv[1]["create_time"] or 0, kv[0])):
            parent = (host, p["ppid"])
            kids.setdefault(parent if parent in self.procs and parent != (host, pid) else None, []).append((host, pid))
        out: list[tuple[int, dict[str, Any]]] = []
        seen: set[tuple[str, int]] = set()
        stack = [(key, 0) for key in reversed(kids.get(None, []))]
        while stack:  # depth-first, without recursion: a deep sidecar chain must not hit the recursion limit
            key, depth = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            if self.procs[key]["alive"]:
                out.append((depth, self.procs[key]))
            stack.extend((k, depth + 1) for k in reversed(kids.get(key, [])))
        return out

    def render(self, path: str, now: float | None = None) -> list[str]:
        """The view as plain lines."""
        now = time.time() if now is None else now
        rows = self._depths()
        gone = sum(1 for p in self.procs.values() if not p["alive"])
        total = sum(p["rss"] or 0 for _, p in rows)
        root = self.procs.get(self.root) if self.root else None
        state = "running" if root and root["alive"] else "ended"
        out = [f"wp-autotrace watch  {path}  run {self.run or '?'}  {time.strftime('%H:%M:%S', time.localtime(now))}",
               f"main {self.root[1] if self.root else '?'} {state}; {len(rows)} process(es) alive, "
               f"{gone} ended; rss {total / 2**20:.0f} MB", "",
               f"{'pid':>8}  {'role':<{ROLE_WIDTH}} {'rank':>4} {'depth':>5} {'rss':>8} {'age':>8}  warm_pool"]
        for depth, p in rows:
            left = " (left)" if state == "ended" else ""  # outlived the main process
            label = ("  " * min(depth, 8) + str(p["role"]) + left)[:ROLE_WIDTH]
            age = f"{now - p['create_time']:.1f}s" if p["create_time"] else "?"
            rss = f"{p['rss'] / 2**20:.0f} MB" if p["rss"] else "?"
            warm = f"x{len(p['warm'])} from {p['warm'][0]}" if p["warm"] else ""
            out.append(f"{p['pid']:>8}  {label:<{ROLE_WIDTH}} {p['rank']:>4} {depth:>5} {rss:>8} {age:>8}  {warm}")
        calls = [(k, c) for k, c in self.calls.items() if self.procs.get(k[:2], {}).get("alive")]
        out += ["", f"open calls ({len(calls)}): who waits on what"]
        for (host, pid, _), c in sorted(calls, key=lambda kc: kc[1]["ts"]):
            role = self.procs[(host, pid)]["role"]
            out.append(f"{pid:>8}  {role:<{ROLE_WIDTH}} waits {now - c['ts']:7.1f}s in "
                       f"{str(c.get('target', '?')).rpartition(':')[2]} ({c.get('thread') or '?'}, "
                       f"called from {_site(c.get('caller'))})")
        return out


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
    """Show the run in path until it ends (or once); the exit status."""
    out = out or sys.stdout
    tail = LogTail(path)
    view = RunView()

    def step() -> tuple[bool, list[str]]:
        for r in tail.read():
            view.feed(r)
        return view.refresh(), view.render(path)

    if not once and out.isatty() and os.environ.get("TERM", "dumb") != "dumb":
        _curses(step, interval)
        out.write("\n".join(step()[1]) + "\n")  # the last state stays on the terminal
        return 0
    while True:
        ended, lines = step()
        out.write("\n".join(lines) + "\n")
        out.flush()
        if once or ended:
            return 0
        out.write("\n")
        time.sleep(interval)
