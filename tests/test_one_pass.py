"""The watcher reads every pool of the run in one pass (watcher/memory.py, MemorySampler._due), so the readings a
moment's sum is made of were taken together: three busy ranks' pools read pool by pool, seconds apart, had no
moment with all of them read, and the run's peak was told as a floor (235-424 MiB beside the probe's 456).

Crafted: a sampler whose reads cost a fake CPU clock (no /proc read), driven tick by tick as the watcher drives it,
and the report of a log made from what it read. tests/test_one_pass_e2e.py runs real torch pools beside a loaded box.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.watcher import memory

from .logs import T0, LogWriter

MIB = 1 << 20
TICK_S = 0.1  # the watcher's default interval
RANKS = (101, 102, 103)


def _sampler(cost_s: float, pss: Any = None) -> memory.MemorySampler:
    """A sampler whose every read costs cost_s of its own (fake) CPU clock; pss(pid) is the PSS it reads (1)."""
    clock = [0.0]

    class FakeSampler(memory.MemorySampler):
        def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any]:
            clock[0] += cost_s
            got = pss(pid) if pss is not None else 1
            return {"pid": pid, "create_time": key[1], "pss": got, "uss": got, "rss": got}

    return FakeSampler(cpu_clock=lambda: clock[0])


def _ranks(workers: int = 2, ranks: tuple[int, ...] = RANKS) -> dict[int, dict[str, Any]]:
    """The watcher's live entries of ranks spawned by main 100, each with a pool: a sidecar (rank + 100) and its
    forked workers (sidecar * 10 + i)."""
    live: dict[int, dict[str, Any]] = {100: {"pid": 100, "ppid": 1, "create_time": T0, "role": "main",
                                             "rss": 300 * MIB}}
    for rank in ranks:
        side = rank + 100
        live[rank] = {"pid": rank, "ppid": 100, "create_time": T0 + 1, "role": "child", "rss": 400 * MIB}
        live[side] = {"pid": side, "ppid": rank, "create_time": T0 + 2, "role": "compile-sidecar", "rss": 200 * MIB}
        for i in range(workers):
            live[side * 10 + i] = {"pid": side * 10 + i, "ppid": side, "create_time": T0 + 3,
                                   "role": "compile-worker", "rss": 200 * MIB}
    return live


def _pool_of(pid: int) -> int:
    return pid if pid in RANKS else pid - 100 if pid < 1000 else pid // 10 - 100


def _drive(s: memory.MemorySampler, live: dict[int, dict[str, Any]], until: float,
           grow: Any = None) -> list[tuple[float, list[int]]]:
    """Tick the sampler every TICK_S from 0 to until; grow(t, live) moves the entries' rss first (the tree's
    stat). (t, pids read) for each tick that read anything."""
    out, t = [], 0.0
    while t < until:
        if grow is not None:
            grow(t, live)
        got = s.tick(t, live)
        if got:
            out.append((t, [e["pid"] for e in got["procs"]]))
        t = round(t + TICK_S, 6)
    return out


def _compiling(t: float, live: dict[int, dict[str, Any]]) -> None:
    """The ranks' pools compile: every 3 s one pool's worker grows by 20 MiB, the ranks in turn."""
    if round(t * 10) % 30 == 0:
        rank = RANKS[round(t * 10) // 30 % len(RANKS)]
        live[(rank + 100) * 10]["rss"] += 20 * MIB


def test_busy_pools_are_read_in_one_pass_not_pool_by_pool() -> None:
    """Three ranks' pools growing in turn (their compiles): each growth wants a reading, and every reading is a
    pass over every pool and its creator, never one pool alone (the old plan swept the pool that grew by itself,
    every 3 s for 140 s, and the three were never read in one tick); the passes keep coming while they grow, at
    the sampler's CPU share."""
    s = _sampler(0.003)
    live = _ranks()
    reads = _drive(s, live, 200.0, _compiling)
    everyone = {pid for pid, e in live.items() if e["role"] != "main"}
    partial = [(t, sorted({_pool_of(p) for p in pids})) for t, pids in reads if set(pids) != everyone]
    assert not partial, partial
    times = [t for t, _ in reads]
    assert len(times) >= 10 and max(b - a for a, b in zip(times, times[1:])) < 30, times
    assert s.cpu_s <= 200 * memory.CPU_SHARE + len(everyone) * 0.003 + memory.BURST_S + memory.DEBT_S


def test_a_pass_dearer_than_a_tenth_of_a_second_is_still_whole() -> None:
    """Reads at 15 ms each (a loaded box's rank and workers): a pass of the three pools and their ranks costs
    0.18 s of CPU. It is made whole when the bucket holds it (the old batch was capped at 0.1 s and read two of
    the three pools each time, in turn, for the whole run)."""
    s = _sampler(0.015)
    live = _ranks()
    reads = _drive(s, live, 300.0)
    everyone = {pid for pid, e in live.items() if e["role"] != "main"}
    assert len(reads) >= 4 and all(set(pids) == everyone for _, pids in reads), reads
    assert s.cpu_s <= 300 * memory.CPU_SHARE + len(everyone) * 0.015 + memory.BURST_S + memory.DEBT_S


def test_past_the_pass_bound_pools_are_read_whole_least_recently_read_first() -> None:
    """100 ranks' pools (400 reads at 5 ms: 2 s) are more than one tick may read (PASS_MAX_S): each pass reads
    whole pools, the least recently read first, at most PASS_MAX_S's worth after its first, so every pool is read
    in turn; the CPU stays within the share plus one pass."""
    ranks = tuple(range(1001, 1101))
    live: dict[int, dict[str, Any]] = {}
    for rank in ranks:
        live[rank] = {"pid": rank, "ppid": 100, "create_time": T0, "role": "child", "rss": 400 * MIB}
        live[rank + 5000] = {"pid": rank + 5000, "ppid": rank, "create_time": T0, "role": "compile-sidecar"}
        live.update({w: {"pid": w, "ppid": rank + 5000, "create_time": T0, "role": "compile-worker"}
                     for w in (rank + 10000, rank + 20000)})
    s = _sampler(0.005)
    reads = _drive(s, live, 2000.0)
    per_pass = max(1, int(memory.PASS_MAX_S / (4 * 0.005)))
    for _, pids in reads[1:]:
        sidecars = {p for p in pids if 6000 <= p < 7000}
        assert len(sidecars) <= per_pass and len(pids) == 4 * len(sidecars), pids  # whole pools, with their ranks
    last: dict[int, float] = {}
    for t, pids in reads:
        last.update((p, t) for p in pids if 6000 <= p < 7000)
    assert len(last) == len(ranks)  # every pool read
    assert s.cpu_s <= 2000 * memory.CPU_SHARE + max(memory.PASS_MAX_S, 400 * 0.005) + memory.BURST_S + memory.DEBT_S


def test_a_join_reads_every_pool_when_the_bucket_pays_and_its_own_when_it_cannot() -> None:
    """A worker joining one pool is read at the next look whatever the bucket: with the bucket able to pay, as
    part of a pass over every pool (one moment's sum); with it empty, its own pool only (bounded by the
    processes that start and end), never waiting."""
    s = _sampler(0.002)
    live = _ranks()
    assert s.tick(0.0, live) is not None
    s.tokens = 1.0
    live[20130] = {"pid": 20130, "ppid": 203, "create_time": T0 + 4, "role": "compile-worker", "rss": MIB}
    got = s.tick(memory.LOOK_S, live)
    assert got is not None and {e["pid"] for e in got["procs"]} == set(live) - {100}
    s.tokens = -1.0
    live[20131] = {"pid": 20131, "ppid": 203, "create_time": T0 + 5, "role": "compile-worker", "rss": MIB}
    got = s.tick(2 * memory.LOOK_S, live)
    assert got is not None and {e["pid"] for e in got["procs"]} == {103, 203, 2030, 2031, 20130, 20131}


def _log(reads: list[tuple[float, list[int]]], live: dict[int, dict[str, Any]], pss: Any) -> LogWriter:
    """The log of main 100 spawning the ranks, each making its pool, and the watcher's memory records of what the
    sampler read (reads), at the PSS pss(pid, t) held then."""
    w = LogWriter()
    run = {"run": "r1", "root_pid": 100}
    w.add(0, 100, 1, "main", "process_start", argv=["python", "serve.py"], python="3.11.7", forked=False, env={},
          create_time=T0, **run)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=TICK_S, linger=60.0, **run)
    for rank in RANKS:
        side = rank + 100
        w.add(1, rank, 100, "child", "process_start", argv=["python", "-c", "from multiprocessing.spawn ..."],
              python="3.11.7", forked=False, env={"RANK": str(rank - 101)}, create_time=T0 + 1, **run)
        w.warm(1.5, rank, 100, "child", side)
        w.add(2, side, rank, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py"],
              python="3.11.7", forked=False, env={"TORCH_WARM_POOL": "0"}, create_time=T0 + 2, **run)
        for i in range(2):
            w.add(3, side * 10 + i, side, "compile-worker", "process_start", argv=["x/compile_worker/__main__.py"],
                  python="3.11.7", forked=True, env={}, create_time=T0 + 3, **run)
    for t, pids in reads:
        w.add(t, 900, 100, "watcher", "memory", procs=[
            {"pid": p, "create_time": live[p]["create_time"], "pss": pss(p, t), "uss": pss(p, t) // 2,
             "rss": 2 * pss(p, t)} for p in pids], devices=[], **run)
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_the_runs_peak_of_busy_pools_is_one_passes_sum_and_told_whole(tmp_path: Path) -> None:
    """What a user reads: three ranks' pools grow while they compile (each worker 2 MiB a second, the ranks in
    turn) until the run ends; the run's memory at once is the sum one pass read, every process read ("all read":
    no floor), within the growth the sampler's period leaves of the most they held at once (the old plan: the
    pools read one at a time, the run's figure a floor, 'N of M read')."""
    def pss(pid: int, t: float) -> int:
        if pid in RANKS:
            return 300 * MIB
        return (100 + (2 * round(max(0.0, t - 3)) if pid >= 1000 else 0)) * MIB

    s = _sampler(0.004)
    live = _ranks()
    t_end = 120.0

    def grow(t: float, live: dict[int, dict[str, Any]]) -> None:
        for pid, e in live.items():
            if pid >= 1000:
                e["rss"] = 2 * pss(pid, t)

    reads = [(t, pids) for t, pids in _drive(s, live, t_end, grow) if t >= 3]
    rep = analyze(read_logs([str(_log(reads, live, pss).write(tmp_path / "log.jsonl"))]))
    across = rep["pools_across"]
    assert across["at_once_all_read"], across
    # the pools only grow: the most they held at one moment read is what the last pass read
    last = reads[-1][0]
    assert across["at_once_bytes"] == sum(pss(p, last) for p in live if p >= 200), (across, last)
    assert t_end - last < 20  # passes kept coming to the end (every ~12 s: 12 reads at 4 ms, 0.4 % of a core)


def test_a_growth_a_second_after_a_pass_gets_its_pass_within_the_debt() -> None:
    """A pool that grows a second after a pass still gets a whole pass: a wanted pass may run the bucket into debt
    down to DEBT_S (one rank's sidecar importing torch while another rank's pool idles overlap for 2-3 s on a loaded
    box; a pass only from a full bucket, 6 s of filling, fell in no such overlap). Past the debt it waits."""
    s = _sampler(0.004)
    live = _ranks()
    everyone = {pid for pid, e in live.items() if e["role"] != "main"}
    assert s.tick(0.0, live) is not None  # the first pass: the bucket in debt by its cost
    live[2010]["rss"] += 20 * MIB
    got = s.tick(1.0, live)
    assert got is not None and {e["pid"] for e in got["procs"]} == everyone
    live[2020]["rss"] += 20 * MIB
    assert s.tick(2.0, live) is None  # a second pass would take the debt past DEBT_S
    assert s.tokens >= -memory.DEBT_S - len(everyone) * 0.004


def test_a_pool_whose_process_ended_as_it_was_read_is_left_out_and_read_again(tmp_path: Path) -> None:
    """A pass that finds a pool's worker gone (it exited between the tree's sample and the read: the tree sees the
    end only at its next one) leaves that pool's readings out and reads it again at the next look: its sidecar's
    figure then holds the workers' pages alone, and summed with their readings of the pass before, a pool's 234 MiB
    was told as 371 (two ranks' 458 as 607). A process alive but unreadable (its stat there) keeps its pool in."""
    gone = {2010}
    clock = [0.0]

    class FakeSampler(memory.MemorySampler):
        def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any] | None:
            clock[0] += 0.002
            return None if pid in gone or pid == 2020 else {"pid": pid, "create_time": key[1], "pss": 1}

    for pid in (101, 102, 103, 201, 202, 203, 2011, 2020, 2021, 2030, 2031):  # alive: 2020 unreadable, not gone
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python3) S 1 1 1 0 -1\n")
    s = FakeSampler(proc=str(tmp_path), cpu_clock=lambda: clock[0])
    live = _ranks()
    got = s.tick(0.0, live)
    assert got is not None
    read = {e["pid"] for e in got["procs"]}
    assert read.isdisjoint({201, 2010, 2011}) and {202, 2021, 203, 2030, 2031, 101} <= read, read
    del live[2010]  # the tree sees the end
    again = s.tick(memory.LOOK_S, live)
    assert again is not None and {201, 2011} <= {e["pid"] for e in again["procs"]}


def _slow_sampler() -> memory.MemorySampler:
    """A sampler on a loaded box at nice 10: every read costs 5 ms of its (fake) CPU clock and 0.4 s of its (fake)
    wall clock."""
    cpu, wall = [0.0], [0.0]

    class SlowSampler(memory.MemorySampler):
        def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any]:
            cpu[0] += 0.005
            wall[0] += 0.4
            return {"pid": pid, "create_time": key[1], "pss": 1, "uss": 1, "rss": 1}

    return SlowSampler(cpu_clock=lambda: cpu[0], wall_clock=lambda: wall[0])


def test_a_pass_stops_at_a_pools_end_once_its_reads_took_the_wall_bound() -> None:
    """One `memory` record's readings carry the tick's one time and are summed as one moment: at nice 10 on a
    loaded box a read's wall time is several times its CPU (5 ms of CPU, 0.4 s of wall here), so a pass of the
    three ranks (12 reads with their ranks, 4.8 s) would put readings seconds apart in one record. It stops at a
    pool's end once WALL_MAX_S has passed (the first pool whole with its rank, 1.6 s); the pools left are read first
    at the next look, so every pool is read in turn."""
    s = _slow_sampler()
    live = _ranks()
    reads = _drive(s, live, 120.0)
    pools = [sorted({_pool_of(p) for p in pids}) for _, pids in reads]
    assert reads and all(len(p) == 1 for p in pools), pools  # each record: one whole pool
    assert all(len(pids) == 4 for _, pids in reads), reads  # its sidecar, 2 workers and its rank
    assert {p[0] for p in pools[:3]} == set(RANKS), pools  # the pools left come first at the next looks


def test_a_fork_pools_creator_is_left_out_with_its_pool_when_a_worker_ended_as_it_was_read(tmp_path: Path) -> None:
    """A fork pool's workers are forks of its creator (the pool is keyed by it) and share its pages: once one
    exits, the creator's PSS holds its share of them, so the creator's reading of that pass, summed with the ended
    worker's of the pass before, counts them twice as the sidecar's would. The creator's reading leaves with its
    pool's and is read again at the next look; a sidecar pool's creator (no pages shared with the workers its
    sidecar forked) stays read."""
    clock = [0.0]

    class FakeSampler(memory.MemorySampler):
        def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any] | None:
            clock[0] += 0.002
            return None if pid == 1010 else {"pid": pid, "create_time": key[1], "pss": 1}

    live: dict[int, dict[str, Any]] = {100: {"pid": 100, "ppid": 1, "create_time": T0, "role": "main", "rss": MIB}}
    live[101] = {"pid": 101, "ppid": 100, "create_time": T0 + 1, "role": "child", "rss": 400 * MIB}
    for w in (1010, 1011):  # rank 101's fork pool: no sidecar
        live[w] = {"pid": w, "ppid": 101, "create_time": T0 + 3, "role": "compile-worker", "rss": 200 * MIB}
    for pid in (100, 101, 1011):  # alive; 1010 has no /proc entry: gone
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python3) S 1 1 1 0 -1\n")
    s = FakeSampler(proc=str(tmp_path), cpu_clock=lambda: clock[0])
    assert list(s.pools(live)) == [101], s.pools(live)
    got = s.tick(0.0, live)
    read = {e["pid"] for e in got["procs"]} if got else set()
    assert read.isdisjoint({101, 1010, 1011}), read
    assert 101 in s.reread


def test_a_reread_that_cannot_wait_is_read_first_in_a_pass_cut_by_the_wall_bound() -> None:
    """A pool process that wrote its process_exit has its pool read in that very tick: the last reading of what it
    held as it ended (its memory is freed before the tree sees it gone). A pass cut at WALL_MAX_S (a loaded box:
    0.4 s of wall a read) reads that pool first, not after the pools least recently read, which the cut drops."""
    s = _slow_sampler()
    live = _ranks()
    first = s.tick(0.0, live)  # the first pass: one pool read whole, the others left for later
    assert first is not None
    read_first = {_pool_of(e["pid"]) for e in first["procs"]}
    # a pool the next pass would read last (least recently read first): its worker writes its process_exit
    last = next(r for r in RANKS if r not in read_first and r != min(set(RANKS) - read_first))
    got = s.tick(memory.LOOK_S, live, ending={(last + 100) * 10: T0 + 5.0})
    assert got is not None and last in {_pool_of(e["pid"]) for e in got["procs"]}, (last, got)
