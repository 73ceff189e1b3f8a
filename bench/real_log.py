"""A realistic long traced compile job's log, at any size: what a big `wp-autotrace report` really reads.

Usage: python bench/real_log.py OUT.jsonl [--records 1000000]   (prints how many records it wrote)

bench/report_scale.py's synthetic run is one call site round-robin over 2,000 processes at ~140K
records/s with one-frame stacks and no watcher samples: its reorder window is always full and every
record is a call/return. This one is shaped after real logs (tests' and bench/users' runs of torch
2.13: tests/test_pools' three ranks, bench/users/actor_ranks.py), scaled to a long job:

- 8 ranks under a launcher, each with a compile sidecar and 16 forked compile workers, a watcher;
  start-up as the real logs have it (process_start with argv/env, the torch._dynamo import, config,
  wait-pool-ready > process-pool > pool-create with 6-8-frame stacks, the sidecar's pool calls, each
  worker's after-fork and warm-up job, the watcher's tree records listing them).
- then each rank compiles graph after graph (dynamo's `_compile` with its rss, inductor's
  AsyncCompile.wait with its pool fields, both with 8-frame stacks, returned), each graph's kernels
  compiled in the rank's workers (a `job` start and end per kernel, the kernel's name as its arg):
  job records are most of a real long log, call/return records a few per graph.
- the watcher's samples: a tree rss heartbeat every ~2 s (the processes whose rss moved) and every
  live process's each 60 s; a memory pass over every pool (144 processes) every ~90 s (its CPU bucket's
  pace at that size: watcher/memory.py).
- the end as the real logs have it: pool shutdown calls, the sidecar's signals to its workers, every
  process_exit (the sidecar's with its submit count), tree ended lists, leftover, watcher_exit.

Timestamps are written as the writer writes them (integer nanoseconds, `...e-9`); each record lands in the
file a little after its timestamp (most within 0.1 ms, a few up to 20 ms: a writer preempted between
taking its time and writing), so writers interleave out of time order as in a real file, each writer's
own records in order. ~52 records/s of run time: a 1M-record log is a ~5.4-hour job. Deterministic (seeded).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from pathlib import Path
from typing import Any

T0_NS = 1_796_508_000_000_000_000
RANKS, WORKERS = 8, 16
SITE = "/opt/venv/lib/python3.11/site-packages"
PY = "/usr/lib/python3.11"
AC, SP = "torch._inductor.async_compile", "torch._inductor.compile_worker.subproc_pool"
ENV = {"TORCHINDUCTOR_COMPILE_THREADS": str(WORKERS)}
KERNEL_FN = "torch._inductor.runtime.compile_tasks:_worker_compile_triton"
KINDS = ("poi", "red", "per")
OPS = ("add", "mul", "cos", "relu", "sum", "mean", "softmax", "native_layer_norm", "convolution", "gelu", "exp")
MEMORY_EVERY_S, TREE_EVERY_S, ALL_RSS_EVERY_S = 90.0, 2.0, 60.0
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def frame(file: str, line: int, func: str) -> dict[str, Any]:
    return {"file": file, "line": line, "func": func}


# Real stacks (torch 2.13's files and lines, a training script's own frames above them).
TRAIN = [frame("/home/u/train.py", 212, "<module>"), frame("/home/u/train.py", 188, "main"),
         frame("/home/u/train.py", 141, "train_step")]
COMPILE_STACK = TRAIN + [frame(f"{SITE}/torch/nn/modules/module.py", 1775, "_call_impl"),
                         frame(f"{SITE}/torch/_dynamo/eval_frame.py", 1166, "compile_wrapper"),
                         frame(f"{SITE}/torch/_dynamo/convert_frame.py", 2628, "__call__"),
                         frame(f"{SITE}/torch/_dynamo/convert_frame.py", 2319, "__call__"),
                         frame(f"{SITE}/torch/_dynamo/convert_frame.py", 777, "__call__")]
WAIT_STACK = [frame(f"{SITE}/torch/_inductor/compile_fx.py", 1847, "fx_codegen_and_compile"),
              frame(f"{SITE}/torch/_inductor/compile_fx.py", 1608, "codegen_and_compile"),
              frame(f"{SITE}/torch/_inductor/graph.py", 2669, "compile_to_module"),
              frame(f"{SITE}/torch/_inductor/graph.py", 2679, "_compile_to_module"),
              frame(f"{SITE}/torch/_inductor/graph.py", 2754, "_compile_to_module_lines"),
              frame(f"{SITE}/torch/_inductor/codecache.py", 4622, "load_by_key_path"),
              frame(f"{SITE}/torch/_inductor/runtime/compile_tasks.py", 35, "_reload_python_module")]
POOL_STACK = TRAIN + [frame(f"{SITE}/torch/_inductor/async_compile.py", 353, "wait_pool_ready"),
                      frame(f"{SITE}/torch/_inductor/async_compile.py", 378, "use_process_pool"),
                      frame(f"{SITE}/torch/_inductor/async_compile.py", 316, "process_pool")]
SIDECAR_STACK = [frame(f"{SITE}/torch/_inductor/compile_worker/__main__.py", 80, "<module>"),
                 frame(f"{SITE}/torch/_inductor/compile_worker/__main__.py", 74, "main"),
                 frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 380, "main"),
                 frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 424, "submit"),
                 frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 447, "_submit_inner"),
                 frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 459, "_start_pool")]
FORK_STACK = [frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 467, "_start_pool"),
              frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 532, "_warm_process_pool"),
              frame(f"{PY}/concurrent/futures/process.py", 767, "_adjust_process_count"),
              frame(f"{PY}/concurrent/futures/process.py", 785, "_spawn_process"),
              frame(f"{PY}/multiprocessing/process.py", 121, "start"),
              frame(f"{PY}/multiprocessing/context.py", 281, "_Popen"),
              frame(f"{PY}/multiprocessing/popen_fork.py", 19, "__init__"),
              frame(f"{PY}/multiprocessing/popen_fork.py", 66, "_launch")]
SHUTDOWN_STACK = SIDECAR_STACK[:3] + [frame(f"{SITE}/torch/_inductor/compile_worker/subproc_pool.py", 400,
                                            "_shutdown")]


class Log:
    """Records by when they land in the file (a heap), written in that order once no later-made record can
    land before them; each process's own records keep their order (its seq)."""

    def __init__(self, out: Any, rng: random.Random) -> None:
        self.out, self.rng = out, rng
        self.heap: list[tuple[int, int, str]] = []
        self.seqs: dict[int, int] = {}
        self.landed: dict[int, int] = {}  # pid -> when its last record landed (ns)
        self.made = self.written = 0
        self.ppid: dict[int, int] = {}
        self.role: dict[int, str] = {}

    def add(self, t_ns: int, pid: int, event: str, **fields: Any) -> None:
        seq = self.seqs.get(pid, 0)
        self.seqs[pid] = seq + 1
        late = int(self.rng.expovariate(1 / 40_000)) if self.rng.random() > 0.002 else self.rng.randrange(20_000_000)
        lands = max(t_ns + late, self.landed.get(pid, 0) + 1)
        self.landed[pid] = lands
        head = (f'{{"v":1,"event":"{event}","ts":{t_ns}e-9,"pid":{pid},"ppid":{self.ppid[pid]},"host":"node-03",'
                f'"role":"{self.role[pid]}","seq":{seq}')
        line = head + ("," + _dumps(fields)[1:] if fields else "}")
        self.made += 1
        heapq.heappush(self.heap, (lands, self.made, line))

    def flush(self, before_ns: int) -> None:
        """Write what landed before `before_ns` (no record made later lands before it)."""
        heap, write = self.heap, self.out.write
        while heap and heap[0][0] < before_ns:
            write(heapq.heappop(heap)[2] + "\n")
            self.written += 1


class Run:
    """The job's processes and what each writes (module docstring)."""

    def __init__(self, log: Log, rng: random.Random) -> None:
        self.log, self.rng = log, rng
        self.launcher, self.watcher = 100, 101
        self.ranks = [1000 + 100 * r for r in range(RANKS)]
        self.created: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        self.call_ids: dict[int, int] = {}
        self.work_ids: dict[int, int] = {}
        self.graphs: dict[int, int] = {}
        self.moved: set[int] = set()  # processes whose rss moved since the last heartbeat
        self.pool_at: dict[int, int] = {}  # rank -> when its pool's workers were all up
        self.sidecar_main: dict[int, tuple[int, int]] = {}  # sidecar -> (its main()'s call id, when)
        log.ppid.update({self.launcher: 1, self.watcher: 1})
        log.role.update({self.launcher: "main", self.watcher: "watcher"})

    def sidecar(self, rank: int) -> int:
        return rank + 1

    def workers(self, rank: int) -> list[int]:
        return [rank + 2 + w for w in range(WORKERS)]

    def born(self, pid: int, ppid: int, role: str, t_ns: int, rss: int) -> None:
        self.log.ppid[pid], self.log.role[pid] = ppid, role
        self.created[pid], self.rss[pid] = round(t_ns / 1e9, 2), rss

    def call(self, t_ns: int, pid: int, target: str, tag: str, stack: list[dict[str, Any]],
             caller: dict[str, Any] | None, **extra: Any) -> int:
        cid = self.call_ids.get(pid, 0) + 1
        self.call_ids[pid] = cid
        self.log.add(t_ns, pid, "call", target=target, tag=tag, call_id=cid, thread="MainThread", stack=stack,
                     caller=caller, **extra)
        return cid

    def ret(self, t_ns: int, pid: int, cid: int, began_ns: int, **extra: Any) -> None:
        self.log.add(t_ns, pid, "return", call_id=cid, duration_s=round((t_ns - began_ns) / 1e9, 6), **extra)

    def proc(self, pid: int, **extra: Any) -> dict[str, Any]:
        """A tree entry of a process (started lists, leftover)."""
        role = self.log.role[pid]
        cmd = {"main": "/opt/venv/bin/python -m torch.distributed.run --nproc-per-node 8 train.py",
               "child": "/opt/venv/bin/python -u train.py --config big.yaml",
               "compile-sidecar": f"/opt/venv/bin/python {SITE}/torch/_inductor/compile_worker/__main__.py "
                                  f"--pickler={SP}.SubprocPickler --kind=fork --workers={WORKERS} "
                                  f"--parent={self.log.ppid[pid]} --read-fd=8 --write-fd=12 --torch-key=***",
               }.get(role, "/opt/venv/bin/python -u train.py --config big.yaml")
        return {"pid": pid, "ppid": self.log.ppid[pid], "name": "python", "create_time": self.created[pid],
                "rss": self.rss[pid], "cmd": cmd, "pgid": self.launcher, "nproc": 2063441, "uid": 1000,
                "role": role, "via": "child", "memcg": "/slurm/uid_1000/job_81234", "pidcg": "/", **extra}

    def start(self, t_ns: int) -> int:
        """The launcher, the ranks, their pools and the watcher's first look; when the last pool is ready."""
        log, s = self.log, 1_000_000_000
        self.born(self.launcher, 1, "main", t_ns, 30 << 20)
        log.add(t_ns, self.launcher, "process_start", argv=["/opt/venv/bin/torchrun", "--nproc-per-node", "8",
                "train.py"], executable="/opt/venv/bin/python", python="3.11.7", cwd="/home/u", run="5f0c2a9e1b7d",
                root_pid=self.launcher, forked=False, guard=False, env=ENV, create_time=self.created[self.launcher])
        self.born(self.watcher, 1, "watcher", t_ns, 20 << 20)
        log.add(t_ns + s // 3, self.watcher, "watcher_start", run="5f0c2a9e1b7d", root_pid=self.launcher,
                interval=0.1, linger=60.0, oom_kill=0)
        log.add(t_ns + s // 3 + 50_000, self.watcher, "memcg", run="5f0c2a9e1b7d", root_pid=self.launcher,
                version=2, path="/slurm/uid_1000/job_81234", file="memory.max", member=self.launcher)
        ready = t_ns
        for r, rank in enumerate(self.ranks):
            ready = max(ready, self.start_rank(r, rank, t_ns + s // 2 + r * 20_000_000))
        started = [self.proc(p) for p in [self.launcher, *self.ranks]]
        self.tree(t_ns + s, started=started)
        for rank in self.ranks:
            self.tree(self.pool_at[rank], started=[self.proc(p) for p in [self.sidecar(rank), *self.workers(rank)]])
        return ready

    def start_rank(self, r: int, rank: int, t_ns: int) -> int:
        log, s = self.log, 1_000_000_000
        self.born(rank, self.launcher, "child", t_ns, 180 << 20)
        log.add(t_ns, rank, "process_start", argv=["/opt/venv/bin/python", "-u", "train.py", "--config", "big.yaml"],
                executable="/opt/venv/bin/python", python="3.11.7", cwd="/home/u", run="5f0c2a9e1b7d",
                root_pid=self.launcher, forked=False, guard=False, env=ENV, create_time=self.created[rank],
                rank={"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(RANKS)})
        log.add(t_ns + 9 * s, rank, "import", module="torch._dynamo", stack=TRAIN + COMPILE_STACK[3:5],
                caller=TRAIN[-1], env=ENV, rss=420 << 20)
        log.add(t_ns + 14 * s, rank, "config", settings={"compile_threads": WORKERS, "worker_start_method":
                "subprocess", "quiesce_async_compile_pool": False, "quiesce_async_compile_time": 60},
                torch_version="2.13.0+cu128", knobs=["compile_threads"])
        t = t_ns + 20 * s
        wait = self.call(t, rank, f"{AC}:AsyncCompile.wait_pool_ready", "wait-pool-ready", POOL_STACK[:6], TRAIN[-1])
        pool = self.call(t + 70_000, rank, f"{AC}:AsyncCompile.process_pool", "process-pool", POOL_STACK[:8],
                         TRAIN[-1], parent_call=wait)
        create = self.call(t + 140_000, rank, f"{SP}:SubprocPool.__init__", "pool-create", POOL_STACK, TRAIN[-1],
                           parent_call=pool, env=ENV)
        side = self.sidecar(rank)
        self.born(side, rank, "compile-sidecar", t + s, 9 << 20)
        self.ret(t + s + 300_000, rank, create, t + 140_000, sidecar_pid=side, quiesce_after_s=60)
        self.ret(t + s + 400_000, rank, pool, t + 70_000)
        log.add(t + s + 2_000_000, side, "process_start", argv=self.proc(side)["cmd"].split(), executable=
                "/opt/venv/bin/python", python="3.11.7", cwd="/home/u", run="5f0c2a9e1b7d", root_pid=self.launcher,
                forked=False, guard=False, env=ENV, create_time=self.created[side])
        u = t + 12 * s
        init = self.call(u - 20_000_000, side, "torch._inductor.compile_worker.utils:_async_compile_initializer",
                         "worker-start", SIDECAR_STACK[:2], None)
        self.ret(u, side, init, u - 20_000_000)
        self.sidecar_main[side] = (self.call(u + 100_000, side, f"{SP}:SubprocMain.main", "sidecar-main",
                                             SIDECAR_STACK[:2], None), u + 100_000)
        tracked = self.call(u + 200_000, side, "torch._inductor.compile_worker.tracked_process_pool:"
                            "TrackedProcessPoolExecutor.__init__", "tracked-pool", SIDECAR_STACK, None, threads=2)
        self.ret(u + 1_200_000, side, tracked, u + 200_000, max_workers=WORKERS)
        for w, pid in enumerate(self.workers(rank)):
            at = u + 2_000_000 + w * 6_000_000
            self.born(pid, side, "compile-worker", at, 300 << 20)
            log.add(at + 100_000, side, "worker_spawned", worker_pid=pid)
            log.add(at + 200_000, pid, "process_start", argv=self.proc(side)["cmd"].split(), run="5f0c2a9e1b7d",
                    root_pid=self.launcher, forked=True, create_time=self.created[pid])
            self.ret(at + 300_000, pid, self.call(at + 250_000, pid, f"{AC}:after_fork", "after-fork", FORK_STACK,
                                                  None), at + 250_000)
            self.job(pid, at + 400_000, at + 600_000, f"{AC}:AsyncCompile._get_ready", None)
        done = u + 2_000_000 + WORKERS * 6_000_000
        self.ret(done + 1_000_000, rank, wait, t)
        self.pool_at[rank] = done
        return done

    def job(self, pid: int, start_ns: int, end_ns: int, fn: str, arg: str | None) -> None:
        pool = self.log.ppid[pid]
        wid = self.work_ids.get(pool, 0)
        self.work_ids[pool] = wid + 1
        fields: dict[str, Any] = {"state": "start", "work_id": wid, "fn": fn}
        if arg is not None:
            fields["arg"] = arg
        self.log.add(start_ns, pid, "job", **fields)
        self.log.add(end_ns, pid, "job", state="end", work_id=wid)

    def graph(self, rank: int, t_ns: int) -> int:
        """One graph compiled by a rank (dynamo's _compile around inductor's wait on its kernels' jobs); when
        the rank is free again."""
        rng, s = self.rng, 1_000_000_000
        n = self.graphs.get(rank, 0)
        self.graphs[rank] = n + 1
        self.rss[rank] += rng.randrange(0, 24 << 20)
        comp = self.call(t_ns, rank, "torch._dynamo.convert_frame:_compile", "compile", COMPILE_STACK, TRAIN[-1],
                         rss=self.rss[rank])
        waited = t_ns + int(rng.uniform(0.8, 4.0) * s)
        side = self.sidecar(rank)
        wait = self.call(waited, rank, f"{AC}:AsyncCompile.wait", "async-wait", WAIT_STACK + COMPILE_STACK[:1],
                         COMPILE_STACK[0], parent_call=comp, env=ENV, compile_threads=WORKERS,
                         worker_start_method="subprocess", pool_jobs=0,
                         pool_pending=[{"sidecar_pid": side, "pending": 0}])
        free = {pid: waited for pid in self.workers(rank)}
        last = waited
        for k in range(min(1 + int(rng.expovariate(1 / 30)), 240)):
            pid = min(free, key=free.__getitem__)
            begin = free[pid] + rng.randrange(200_000, 3_000_000)
            end = begin + int(rng.uniform(0.3, 2.5) * s)
            name = f"triton_{KINDS[k % 3]}_fused_{OPS[(n + k) % len(OPS)]}_{OPS[(n * 7 + k) % len(OPS)]}_{k}"
            self.job(pid, begin, end, KERNEL_FN, name)
            free[pid] = end
            last = max(last, end)
            self.moved.add(pid)
        self.ret(last + 5_000_000, rank, wait, waited)
        done = last + int(rng.uniform(0.2, 1.0) * s)
        self.ret(done, rank, comp, t_ns, rss=self.rss[rank])
        self.moved.add(rank)
        return done

    def tree(self, t_ns: int, **lists: Any) -> None:
        self.log.add(t_ns, self.watcher, "tree", run="5f0c2a9e1b7d", root_pid=self.launcher,
                     count=len(self.log.role) - 1, final=False, **{"started": [], "ended": [], **lists})

    def heartbeat(self, t_ns: int, every: bool) -> None:
        """The tree's rss heartbeat: the processes whose rss moved since the last one (every live one if due)."""
        pids = sorted(self.created) if every else sorted(self.moved)
        for pid in pids:
            if self.log.role[pid] == "compile-worker":
                self.rss[pid] = (300 << 20) + self.rng.randrange(0, 400 << 20)
        rss = [{"pid": p, "create_time": self.created[p], "rss": self.rss[p]} for p in pids if p != self.watcher]
        self.moved.clear()
        if rss:
            self.tree(t_ns, rss=rss)

    def memory(self, t_ns: int) -> None:
        """A pass over every pool: its sidecar, workers and creator (the rank), read in one tick."""
        procs = []
        for rank in self.ranks:
            for pid in (self.sidecar(rank), *self.workers(rank), rank):
                rss = self.rss[pid]
                uss = rss * 3 // 4
                procs.append({"pid": pid, "create_time": self.created[pid], "pss": uss + (rss - uss) // 9,
                              "rss": rss, "uss": uss, "threads": 2 if pid != rank else 31,
                              "cpu_s": round((t_ns - T0_NS) / 1e9 * (0.3 if pid != rank else 0.9), 2)})
        self.log.add(t_ns, self.watcher, "memory", run="5f0c2a9e1b7d", root_pid=self.launcher, procs=procs,
                     devices=[])

    def end(self, t_ns: int) -> int:
        """Every pool shut down (its workers signalled), every process's exit, the watcher's last records."""
        log, ended = self.log, []
        for r, rank in enumerate(self.ranks):
            t = t_ns + r * 30_000_000
            side = self.sidecar(rank)
            shut = self.call(t, rank, f"{SP}:SubprocPool.shutdown", "pool-shutdown", TRAIN[:2], None,
                             pending_jobs=[], pool_running=True)
            s_shut = self.call(t + 300_000, side, f"{SP}:SubprocMain._shutdown", "sidecar-shutdown",
                               SHUTDOWN_STACK[:3], None, parent_call=self.sidecar_main[side][0])
            for w, pid in enumerate(self.workers(rank)):
                log.add(t + 400_000 + w * 50_000, side, "signal_sent", how="kill", target=pid, signal=15,
                        frames=FORK_STACK[4:] + SHUTDOWN_STACK[2:])
                log.add(t + 2_000_000 + w * 100_000, pid, "process_exit", how="signal", counts={}, dropped=0)
                ended.append({"pid": pid, "create_time": self.created[pid], "end": round((t + 3e6) / 1e9, 3)})
            self.ret(t + 5_000_000, side, s_shut, t + 300_000)
            main_cid, main_t = self.sidecar_main[side]
            self.ret(t + 5_100_000, side, main_cid, main_t)
            self.ret(t + 5_200_000, rank, shut, t)
            submits = self.work_ids[side]
            log.add(t + 9_000_000, side, "process_exit", how="exit", dropped=0,
                    counts={f"{SP}:SubprocPool.submit": submits})
            log.add(t + 20_000_000, rank, "process_exit", how="exit", counts={}, dropped=0)
            ended += [{"pid": p, "create_time": self.created[p], "end": round((t + 21e6) / 1e9, 3)}
                      for p in (side, rank)]
        t = t_ns + len(self.ranks) * 30_000_000 + 100_000_000
        log.add(t, self.launcher, "process_exit", how="exit", counts={}, dropped=0)
        self.tree(t + 100_000_000, ended=ended)
        self.log.add(t + 150_000_000, self.watcher, "leftover", run="5f0c2a9e1b7d", root_pid=self.launcher,
                     how="root-exit", count=0, procs=[], pids=[])
        self.log.add(t + 450_000_000, self.watcher, "watcher_exit", run="5f0c2a9e1b7d", root_pid=self.launcher,
                     reason="run-ended", samples=int((t - T0_NS) / 1e8), cpu_s=round((t - T0_NS) / 1e9 * 0.004, 1))
        return t + 500_000_000


END_RECORDS = RANKS * (2 * WORKERS + 10) + 5  # what Run.end writes


def make_log(path: Path, records: int = 1_000_000, seed: int = 41) -> int:
    """Write the job's log, `records` records or a few more (the start and end are whole); how many."""
    rng = random.Random(seed)
    with open(path, "w") as out:
        log = Log(out, rng)
        run = Run(log, rng)
        ready = run.start(T0_NS)
        nxt = {rank: ready + rng.randrange(0, 5_000_000_000) for rank in run.ranks}
        tree_at, mem_at, all_at = ready, ready + 10_000_000_000, ready + int(ALL_RSS_EVERY_S * 1e9)
        while log.made < records - END_RECORDS:
            rank = min(nxt, key=nxt.__getitem__)
            now = min(nxt[rank], tree_at, mem_at)
            if now == tree_at:
                run.heartbeat(now, now >= all_at)
                if now >= all_at:
                    all_at += int(ALL_RSS_EVERY_S * 1e9)
                tree_at += int(TREE_EVERY_S * 1e9) + rng.randrange(0, 50_000_000)
            elif now == mem_at:
                run.memory(now)
                mem_at += int(MEMORY_EVERY_S * 1e9) + rng.randrange(0, 5_000_000_000)
            else:
                nxt[rank] = run.graph(rank, now) + int(rng.uniform(0.5, 6.0) * 1e9)
            log.flush(min(min(nxt.values()), tree_at, mem_at))
        run.end(max(max(nxt.values()), tree_at))
        log.flush(1 << 100)
    return log.written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    print(make_log(Path(args.out), args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
