"""Real memory of a run's pool processes, and the accelerator device files they hold.

The watcher's tick hands ``MemorySampler.tick`` its live entries (watcher/main.py,
``Watcher.live``: pid -> {pid, ppid, create_time, role, ...}); it returns the
``memory`` record's lists to write, or None.

What is sampled: pool processes only, i.e. compile sidecars and compile workers
(their role in the entry), and the helpers beside them (a resource tracker or forkserver whose parent is one
of those), read in their pool's sweeps. Their memory is read
from ``/proc/PID/smaps_rollup``: PSS (each shared page split among the processes
sharing it, so PSS adds up across forked workers to the real memory) and USS
(Private_Clean + Private_Dirty: what the process alone holds, freed when it
ends). RSS is never summed across processes: forked workers share most of their
pages, and a sum of RSS counts them once per worker.

At once (docs/evidence.md, "Memory at once"): a pool's processes (a sidecar and the
workers it forked) are read together, in one tick: a *sweep*, so the sum of one
``memory`` record's samples of a pool is what it held at that moment, never a sum
of figures from different moments. PSS moves when a co-sharer goes (a sidecar
whose workers ended holds their once-shared pages alone; it shares them again when
workers join), so a pool is swept again at the next look after one of its processes
ended or a new one joined it, and every pool right after the run's main process
ended (a leftover's figure is what it held after that end).

One pass (docs/evidence.md, "Memory at once"): every reading the watcher plans is a pass over every pool of the
run (each pool's processes and its creator), in one tick, so a sum across pools is one moment's too. Reads once
planned pool by pool (a pool that grew read alone, a batch cut at the bucket's cap) read three busy ranks' pools
seconds apart at every sweep on a loaded box: no moment had them all, and the run's peak was told as a floor.

Bounded rate:
- a pass at most every ``EVERY_S`` seconds, or sooner when a pool is new or grew (below), besides the
  re-reads above (one per end or join: bounded by the processes that end or start);
- the reads' own CPU time (the kernel walks the process's page tables: about
  2 ms for a torch worker) comes from a token bucket that fills at ``CPU_SHARE``
  of one core and holds at most ``BURST_S`` or one pass; a pass is made only when the bucket holds what it
  should cost (its reads times the last read's cost). On a 32-worker pool of 200 MiB (4.5 ms a read on
  a loaded 2-core box) a pass comes about every 37 s instead of every
  EVERY_S, and over any T seconds the sampler costs at most one pass + CPU_SHARE x T of CPU, plus the end- and
  join-triggered re-reads.
  (Without the join re-read, a 3-process pool at 5 ms a read under load was first
  swept whole 5 s after its workers forked: a 4 s idle span went unread.)
- a re-read that cannot wait (a co-sharer ended or joined, a process is ending, the main ended) is a pass when the
  bucket holds one, else its own pools only, whatever the bucket.
- a pass that is wanted may take the bucket down to ``-DEBT_S`` (paid back before the next): over any T seconds
  the sampler then costs at most CPU_SHARE x T + one pass + DEBT_S, plus the re-reads above.
- one tick reads at most ``PASS_MAX_S`` of CPU (at the last read's cost; 264 pool processes at 3.8 ms): beyond it
  (hundreds of pool processes) a pass reads whole pools, the least recently read first, up to that, so the pools
  are read in turn and a sum across all of them is no moment's: the report then tells the run's figure as a
  floor ("N of M read", analysis/derive/memseries.py), never a sum of different moments' readings.
- one tick's reads end within ``WALL_MAX_S`` (the reader's staleness) of its first, at the pass's own wall time a
  read: a record's readings carry one time and are summed as one moment; the pools left come first next.
- a pool one of whose processes grew since its last reading (its resident size in the tree's entry, which the
  tree's stat refreshes every STAT_EVERY ticks for a pool process: no read of its own) by GROWN_BYTES and
  GROWN_FRACTION wants a pass at the next look the bucket can pay for, before the periodic one is due: a
  process that grows and then ends between two periodic sweeps was read at its size before the growth (an
  autotune subprocess's peak read 11 % under the probe's: docs/users.md).
- a pool one of whose processes wrote its process_exit (the log's record, handed in by the watcher's tick) is
  read in that very tick (a pass if the bucket holds one), the look's period and the bucket notwithstanding:
  the last reading of what it held as it ended (one per process end). This is as late as a reading can be: the
  kernel frees a process's memory before its pidfd becomes readable or it turns zombie (a zombie has no smaps),
  so a pidfd or the tree's end come too late to read anything; a process killed by a signal writes no
  process_exit, and its last reading is the last periodic or growth one.

Device files: a pool process's fd links are read with each of its memory samples
(so at the same bounded rate, their CPU counted in the same bucket), and the ones
under the accelerator device paths (DEVICE_PREFIXES) are recorded when they change
(the first read that finds any, then each new set). Read once, at the first
sample, they would never be seen: a sidecar is first sampled right after exec and
a worker right after fork, before either opens a device (a worker's CUDA init
runs in its first job).
Counted as a user counts: each sample carries the process's threads (/proc/PID/stat num_threads, read with
its smaps_rollup: ps's NLWP at the same moment, native threads included), and a pool's sweep reads its
creator too (a sidecar's parent, a fork/spawn pool's maker: the main process or a rank) when that creator is
no pool process itself, so the creator's own memory and the pool's come from one moment (the total htop
shows), one more read per sweep paid from the same bucket.
Everything here is stdlib; a process that vanished mid-read is skipped silently.
"""

from __future__ import annotations

import os
import time
from itertools import compress, repeat

from ..common import vocab as V

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

# A pool process's memory at most this often (idle spans last tens of seconds), and how often the sampler
# looks at the live set at all (the watcher ticks every 0.1 s): the reader's staleness rule is their sum.
EVERY_S = V.MEMORY_EVERY_S
LOOK_S = V.MEMORY_LOOK_S
CPU_SHARE = 0.004  # the sampler's CPU time as a share of one core: under the watcher's 0.5 % budget (docs/scale.md)
BURST_S = 0.01  # CPU seconds the bucket can hold: a new pool's first few reads come at once
# A pass reads every pool of the run in one tick (a sum across pools is one moment's) up to this many CPU seconds
# of reads (at the last measured cost a read): 8 ranks' pools of 32 workers each (264 processes, 1-4 ms a read)
# are read whole. Beyond it a tick's reads would hold the watcher's other work (ends, the verdict) for seconds:
# a pass then takes the pools least recently read, whole, up to this much, and the bucket holds this much.
PASS_MAX_S = 1.0
# A pass that is wanted may run the bucket into debt down to this many CPU seconds (20-30 reads), paid back at
# CPU_SHARE before the next: a pool that grows or starts a second after another pass still gets its pass. A rank's
# pool made as another rank's idles (two at a time, each rank's when the other's is ready) overlaps it for 2-3 s
# on a loaded box, while its sidecar imports torch; with passes only from a full bucket (one 6-read pass is 6 s of
# filling at 4 ms a read) no pass fell in it and the run's peak was one pool's (236 MiB beside the test's 457).
DEBT_S = 0.1
# A pass reads no pool whose reads would end past this much wall time from its first read (at the pass's own wall
# time a read so far): every reading of one `memory` record carries the tick's one time and the reader sums them
# as one moment, which it allows of readings at most MEMORY_STALE_S apart. The watcher runs at nice 10: on a loaded
# box a read's wall time is several times its CPU (0.30 s of CPU took 1.4-1.6 s at load 18), and PASS_MAX_S of CPU
# alone let one record span seconds. The pools left are read first at the next look (least recently read first).
WALL_MAX_S = V.MEMORY_STALE_S
# A pool process whose resident size (its stat's, in the tree entry) grew by both of these since the reading
# before is read again before its periodic sweep: its peak is within about GROWN_FRACTION of the truth,
# where the bucket can pay.
GROWN_BYTES = 4 << 20
GROWN_FRACTION = 0.05
# smaps_rollup lines kept, in kB: the field names are the kernel's (Documentation/filesystems/proc.rst).
_KB_FIELDS = {b"Rss:": "rss", b"Pss:": "pss", b"Private_Clean:": "private_clean",
              b"Private_Dirty:": "private_dirty", b"SwapPss:": "swap_pss"}
# fd link targets that are an accelerator's device files: NVIDIA, Ascend, DRM (AMD, Intel), accel (NPUs).
DEVICE_PREFIXES = ("/dev/nvidia", "/dev/davinci", "/dev/dri/", "/dev/accel")
MAX_DEVICES = 32  # distinct device paths kept per process
# The roles pool_pids reads: a pool process, or a helper whose parent may be one.
_SAMPLED_ROLES = V.POOL_ROLES | V.HELPER_ROLES
# A pool's creator is read in its sweeps only up to this resident size: smaps_rollup walks the page tables, about
# 9 ms a GiB resident on a loaded 2-core box (18 ms for 2 GiB; a 300 MiB worker 2-4 ms), and at CPU_SHARE one
# read of a 20 GiB main would stretch every pool's sweep period to ~45 s. Above it the creator's own figure is
# not told (docs/evidence.md, "Counted as ps counts"); the tree keeps its RSS.
CREATOR_MAX_RSS = 1 << 30


def read_rollup(pid: int, proc: str = "/proc") -> dict[str, int] | None:
    """{rss, pss, uss, swap_pss} in bytes from smaps_rollup; None if gone or unreadable."""
    try:
        with open(f"{proc}/{pid}/smaps_rollup", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return parse_rollup(data)


def parse_rollup(data: bytes) -> dict[str, int] | None:
    """The kB fields of a smaps_rollup text, in bytes, with uss = Private_Clean + Private_Dirty."""
    found: dict[str, int] = {}
    for line in data.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in _KB_FIELDS and parts[1].isdigit():
            found[_KB_FIELDS[parts[0]]] = int(parts[1]) * 1024
    if "pss" not in found:
        return None  # a kernel without PSS (or an empty read of an exiting process)
    out = {"pss": found["pss"], "rss": found.get("rss", 0),
           "uss": found.get("private_clean", 0) + found.get("private_dirty", 0)}
    if found.get("swap_pss"):
        out["swap_pss"] = found["swap_pss"]
    return out


def read_threads(pid: int, proc: str = "/proc") -> int | None:
    """pid's threads (num_threads, /proc/PID/stat field 20: native ones included); None if gone."""
    return read_stat(pid, proc)[0]


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_stat(pid: int, proc: str = "/proc") -> tuple[int | None, float | None]:
    """pid's threads (num_threads, field 20: native ones included) and the CPU it has used (utime + stime,
    fields 14 and 15, seconds), from one read of /proc/PID/stat; (None, None) if gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read(1024)
        fields = data[data.rindex(b")") + 2:].split()  # after the name: field 3 is the first
        return int(fields[17]), (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None, None


def _ended(pid: int, proc: str = "/proc") -> bool:
    """pid is gone or a zombie (its memory freed), as opposed to alive but unreadable (another user's)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read(1024)
        return data[data.rindex(b")") + 2:][:1] in (b"Z", b"X")
    except (OSError, ValueError):
        return True


def classify_fd_target(target: str) -> str | None:
    """The device path an fd link points to, if it is an accelerator's device file."""
    return target if target.startswith(DEVICE_PREFIXES) else None


def device_files(pid: int, proc: str = "/proc") -> list[str] | None:
    """The accelerator device files pid holds open (sorted, distinct); None if its fds cannot be read."""
    base = f"{proc}/{pid}/fd"
    try:
        fds = os.listdir(base)
    except OSError:
        return None
    found: set[str] = set()
    for fd in fds:
        try:
            target = os.readlink(f"{base}/{fd}")
        except OSError:
            continue
        device = classify_fd_target(target)
        if device is not None and len(found) < MAX_DEVICES:
            found.add(device)
    return sorted(found)


class MemorySampler:
    """Picks the pools to sweep this tick, within the time and CPU budget."""

    def __init__(self, proc: str = "/proc", cpu_clock: Callable[[], float] = time.process_time,
                 every: float = EVERY_S, share: float = CPU_SHARE, burst: float = BURST_S,
                 wall_clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = proc
        self.cpu_clock = cpu_clock
        self.wall_clock = wall_clock
        self.every = every
        self.share = share
        self.burst = burst
        self.tokens = burst  # CPU seconds the sampler may spend now
        self.last_fill: float | None = None
        self.read_at: dict[tuple[int, float], float] = {}  # (pid, create_time) -> when last read
        self.swept_at: dict[int, float] = {}  # pool key (its sidecar's pid) -> when last read
        self.passed_at: float | None = None  # when the last pass was made (every pool, or PASS_MAX_S's worth)
        self.members: dict[int, set[tuple[int, float]]] = {}  # pool key -> its processes at the last look
        self.reread: set[int] = set()  # pools to read at this look whatever the budget (a co-sharer ended)
        self.grown: set[int] = set()  # a pass is wanted as soon as the bucket pays: one of these pools grew since
        self.read_rss: dict[tuple[int, float], int] = {}  # (pid, create_time) -> its entry's rss at its last read
        self.root_ended = False
        self.cpu_s = 0.0  # CPU seconds spent reading, in all (the bench reads it)
        self.read_cost = 0.0  # CPU seconds one read cost, as the last sweep measured it
        self.reads = 0
        self.looked: float | None = None
        self.devices_seen: dict[tuple[int, float], list[str]] = {}  # the device set last recorded per process

    def pool_pids(self, live: dict[int, dict[str, Any]]) -> list[int]:
        """The live pool processes: a sidecar, or a compile worker (a child of a sidecar running its command
        line: watcher/main.py's roles), and a pool's helpers: a resource tracker or forkserver whose parent is one
        of those (a spawn pool's sidecar starts multiprocessing's tracker beside its worker: alive for the pool's
        life, it is one of the pool's processes as ps lists them, and a pool figure without it is no whole
        moment's). The main's own tracker (its parent no pool process) is not read. Their other descendants (a
        worker's g++ and cc1plus) are not sampled: short lived, and not the pool's memory."""
        # Asked at every look, never cached: a sidecar first seen between its fork and its exec has its
        # parent's command line and no pool role; its entry gets one after the exec (tree.py), same key. The
        # roles are read in C (a run of a thousand idle processes holds none of these): the Python test runs
        # over those picked only.
        picked = list(compress(live, map(_SAMPLED_ROLES.__contains__, map(dict.get, live.values(), repeat("role")))))
        pool = {pid for pid in picked if live[pid].get("role") in V.POOL_ROLES}
        return [pid for pid in picked if pid in pool or live[pid].get("ppid") in pool]

    def pools(self, live: dict[int, dict[str, Any]]) -> dict[int, list[int]]:
        """Pool key (the sidecar's pid; for a fork or spawn pool's workers, whose parent is the process that made
        the pool and no pool process, that parent's pid; an orphaned worker keys itself) -> its live processes,
        sidecar first. A helper is in its parent's pool, and so is a worker its helper (a forkserver) forked:
        one sweep reads them all."""
        pids = self.pool_pids(live)
        inside = set(pids)

        def key_of(pid: int) -> int:
            for _ in range(len(inside)):  # up through helpers (bounded: a stale entry's ppid cannot loop it)
                role, parent = live[pid].get("role"), live[pid].get("ppid")
                if not (role in V.HELPER_ROLES or (role == V.COMPILE_WORKER and parent in inside
                                                   and live[parent].get("role") in V.HELPER_ROLES)):
                    break
                pid = live[pid]["ppid"]  # a helper's parent is a pool process, in `inside`
            return parent if role == V.COMPILE_WORKER and parent in live else pid

        groups: dict[int, list[int]] = {}
        for pid in sorted(pids, key=lambda p: live[p].get("ppid") in inside):
            groups.setdefault(key_of(pid), []).append(pid)
        return groups

    @staticmethod
    def creator(key: int, pids: list[int], live: dict[int, dict[str, Any]], read: list[dict[str, Any]]) -> list[int]:
        """[the pool's creator] to read in its sweep: the sidecar's parent (a fork/spawn pool is keyed by its
        creator), when alive, no pool process (a nested pool's maker is read with its own pool), resident at
        most CREATOR_MAX_RSS (its stat's, in the tree entry) and not read in this tick already (two pools of
        one maker); else []."""
        maker = key if key not in pids else live[key].get("ppid")
        if maker is None or maker not in live or live[maker].get("role") in V.POOL_ROLES \
                or (live[maker].get("rss") or 0) > CREATOR_MAX_RSS:
            return []
        return [] if any(e["pid"] == maker for e in read) else [maker]

    def _fill(self, now: float, cap: float) -> None:
        if self.last_fill is not None:
            self.tokens = min(cap, self.tokens + (now - self.last_fill) * self.share)
        self.last_fill = now

    def _note_ends(self, groups: dict[int, list[int]], live: dict[int, dict[str, Any]], root_ended: bool) -> None:
        """Flag for a re-read each pool one of whose processes ended since the last look (its co-sharers'
        PSS rose) or that a new process joined (they share with it now), and every pool once the run's main
        process has ended."""
        now_members = {key: {(pid, live[pid]["create_time"]) for pid in pids} for key, pids in groups.items()}
        for key, before in self.members.items():
            if key in now_members and before != now_members[key]:
                self.reread.add(key)
        if root_ended and not self.root_ended:
            self.reread.update(groups)
        self.root_ended = self.root_ended or root_ended
        self.members = now_members

    def tick(self, now: float, live: dict[int, dict[str, Any]], root_ended: bool = False,
             ending: dict[int, float] | None = None) -> dict[str, list[dict[str, Any]]] | None:
        """Make the pass that is due and affordable (or the re-reads that cannot wait): the `memory` record's
        lists, or None when nothing was read. ending: pid -> ts of the process_exit records the log showed since
        the last tick (any process's: those of a live pool process, written after it started, are read now)."""
        ending_pools = self._ending(live, ending) if ending else set()
        if self.looked is not None and now - self.looked < LOOK_S and not ending_pools:
            return None
        self.looked = now
        groups = self.pools(live)
        self._note_ends(groups, live, root_ended)
        self.reread.update(key for key, pids in groups.items() if ending_pools.intersection(pids))
        self._note_growth(groups, live)
        # each pool's reads: its processes, then its creator (a pool's maker that is no pool process itself)
        plan = {key: pids + self.creator(key, pids, live, []) for key, pids in groups.items()}
        keys = self._due(plan, now)
        if not keys:
            self._forget(live, groups)
            return None
        devices: list[dict[str, Any]] = []
        procs, keys = self._sweep_pools(keys, plan, live, now, devices)
        for key in keys:
            self.reread.discard(key)
            self.grown.discard(key)
            self.swept_at[key] = now
        procs = self._whole(procs, {key: groups[key] for key in keys})
        self._forget(live, groups)
        if not procs and not devices:
            return None
        return {"procs": procs, "devices": devices}

    def _whole(self, procs: list[dict[str, Any]], swept: dict[int, list[int]]) -> list[dict[str, Any]]:
        """procs less the readings of a pool one of whose processes ended as it was read (gone, or a zombie: its
        read found nothing), that pool read again at the next look. Its sharers' figures are then after that end
        (a sidecar holds its workers' pages alone once they exit), while the tree sees the end only at its next
        sample: summed with the ended workers' readings of the pass before, a pool's 234 MiB was told as 371."""
        read = {e["pid"] for e in procs}
        broken: set[int] = set()
        for key, pids in swept.items():
            if any(p not in read and _ended(p, self.proc) for p in pids):
                broken.update(pids)
                if key not in pids:  # a fork pool, keyed by its creator: its workers shared the creator's pages,
                    broken.add(key)  # whose figure rose at that end as a sidecar's does
                self.reread.add(key)
        return [e for e in procs if e["pid"] not in broken] if broken else procs

    def _ending(self, live: dict[int, dict[str, Any]], ending: dict[int, float]) -> set[int]:
        """The live pool processes whose process_exit was just read (the record is this process's: written
        after it started, not by an earlier holder of its pid)."""
        pool = set(self.pool_pids(live))
        return {pid for pid, ts in ending.items() if pid in pool and live[pid].get("create_time", ts) <= ts + 0.05}

    def _note_growth(self, groups: dict[int, list[int]], live: dict[int, dict[str, Any]]) -> None:
        """Flag the pools one of whose processes grew by GROWN_BYTES and GROWN_FRACTION since its last read."""
        for key, pids in groups.items():
            for pid in pids:
                before = self.read_rss.get((pid, live[pid]["create_time"]))
                rss = live[pid].get("rss")
                if before is not None and isinstance(rss, int) and rss - before >= max(
                        GROWN_BYTES, before * GROWN_FRACTION):
                    self.grown.add(key)
                    break

    def _due(self, plan: dict[int, list[int]], now: float) -> list[int]:
        """The pools to read now. A pass: every pool of the run at once (their sum then is one moment's, D8), made
        when one is wanted (EVERY_S since the last, a new pool, a pool that grew, a re-read) and the bucket holds
        its cost. Pools' reads were once planned pool by pool (a pool that grew, a new one, the periodic batch
        cut at the bucket's cap) and three busy ranks' pools were read seconds apart at every sweep: no moment had
        them all, and the run's peak was told as a floor (235-424 MiB beside the probe's 456). Past PASS_MAX_S of
        reads (hundreds of pool processes) a pass reads the pools least recently read first, up to PASS_MAX_S:
        the run's figure is then a floor, told as one ("N of M read"). Re-reads that cannot wait (a co-sharer
        ended or joined, a process is ending, the run's main ended) read their own pools whatever the bucket when
        it cannot pay for the pass: bounded by the processes that start and end."""
        if not plan:
            return []
        cost = {key: len(pids) * self.read_cost for key, pids in plan.items()}
        order = sorted(plan, key=lambda k: (k in self.swept_at, self.swept_at.get(k, 0.0)))
        chunk: list[int] = []
        spent = 0.0
        for key in order:  # whole pools, never piecemeal; at least one however large
            if chunk and spent + cost[key] > PASS_MAX_S:
                break
            chunk.append(key)
            spent += cost[key]
        self._fill(now, max(self.burst, spent))
        forced = [key for key in plan if key in self.reread]
        wanted = forced or self.passed_at is None or now - self.passed_at >= self.every or any(
            key not in self.swept_at or key in self.grown for key in plan)
        if wanted and self.tokens >= spent - DEBT_S:
            self.passed_at = now
            return list(dict.fromkeys([*forced, *chunk]))  # the re-reads that cannot wait first: a cut pass keeps them
        return forced

    def _sweep_pools(self, keys: list[int], plan: dict[int, list[int]], live: dict[int, dict[str, Any]],
                     now: float, devices: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
        """Read the pools of keys whole, in order, while the next pool's reads would end within WALL_MAX_S of the
        first (at least one pool): (the readings, the pools read). Two pools of one maker read it once."""
        start = self.wall_clock()
        procs: list[dict[str, Any]] = []
        done: list[int] = []
        seen: set[int] = set()
        for key in keys:
            pids = [pid for pid in plan[key] if pid not in seen]
            elapsed = self.wall_clock() - start
            if done and seen and elapsed + elapsed / len(seen) * len(pids) > WALL_MAX_S:
                break
            seen.update(pids)
            if pids:
                procs += self._sweep(pids, live, now, devices)
            done.append(key)
        return procs, done

    def _sweep(self, pids: list[int], live: dict[int, dict[str, Any]], now: float,
               devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Read every process of one pool in this one tick; the bucket pays for the reads."""
        start = self.cpu_clock()
        found = []
        for pid in pids:
            key = (pid, live[pid]["create_time"])
            entry = self._read(pid, key, devices)
            self.read_at[key] = now
            rss = live[pid].get("rss")
            if isinstance(rss, int):
                self.read_rss[key] = rss
            if entry is not None:
                found.append(entry)
        spent = max(0.0, self.cpu_clock() - start)
        self.tokens -= spent
        self.read_cost = spent / len(pids) if pids else self.read_cost
        self.cpu_s += spent
        self.reads += len(pids)
        return found

    def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any] | None:
        mem = read_rollup(pid, self.proc)
        held = device_files(pid, self.proc)
        if held and held != self.devices_seen.get(key):
            self.devices_seen[key] = held  # recorded on change only: a worker holds its device for its life
            devices.append({"pid": pid, "create_time": key[1], "paths": held})
        if mem is None:
            return None
        threads, cpu = read_stat(pid, self.proc)  # the one stat read the threads already took: its CPU is free
        return {"pid": pid, "create_time": key[1], **mem, **({"threads": threads} if threads else {}),
                **({"cpu_s": round(cpu, 2)} if cpu is not None else {})}

    def _forget(self, live: dict[int, dict[str, Any]], groups: dict[int, list[int]]) -> None:
        """Drop ended processes' read times and ended pools' sweep times (a long run churns through many).
        The live keys are made only when one of those has grown past its bound (not at every look)."""
        if len(self.swept_at) > 2 * len(groups) + 64:
            self.swept_at = {k: v for k, v in self.swept_at.items() if k in groups}
        bound = 2 * len(live) + 64
        if max(len(self.read_at), len(self.read_rss), len(self.devices_seen)) <= bound:
            self.grown.intersection_update(groups)
            return
        alive = {(pid, e["create_time"]) for pid, e in live.items()}
        if len(self.read_at) > bound:
            self.read_at = {k: v for k, v in self.read_at.items() if k in alive}
        if len(self.read_rss) > bound:
            self.read_rss = {k: v for k, v in self.read_rss.items() if k in alive}
        self.grown.intersection_update(groups)
        if len(self.devices_seen) > bound:
            self.devices_seen = {k: v for k, v in self.devices_seen.items() if k in alive}


def make_sampler() -> MemorySampler | None:
    """A sampler where the kernel has smaps_rollup (Linux 4.14+), else None: no memory records."""
    return MemorySampler() if os.path.exists(f"/proc/{os.getpid()}/smaps_rollup") else None
