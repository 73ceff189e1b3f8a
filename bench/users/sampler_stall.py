"""Repro of a defect found while scoring (docs/users.md, D1): once one smaps_rollup read costs more CPU than
the sampler's bucket can ever hold (BURST_S), MemorySampler never reads again for the rest of the run.

The bucket is capped at BURST_S (0.01 s), and a read is made only when the bucket holds what the last read
cost; a read of a ~240 MiB torch process on a loaded box can cost over 10 ms of CPU, after which
`tokens < read_cost` holds forever. Seen in every case of docs/users.md: memory records stop 30-55 s into
the run while pools idle on for 20-80 s more.

    .venv/bin/python bench/users/sampler_stall.py      # prints reads per 10 s of fake time; exits 1 if it stalls
"""
import os
import sys

from wp_autotrace.watcher.memory import BURST_S, MemorySampler


class Clock:
    """CPU clock whose reads cost `cost` seconds each (the sampler reads it before and after each read)."""

    def __init__(self) -> None:
        self.t, self.calls, self.cost = 0.0, 0, 0.002

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            self.t += self.cost
        return self.t


clock = Clock()
sampler = MemorySampler(cpu_clock=clock)
live = {os.getpid(): {"pid": os.getpid(), "create_time": 1.0, "role": "compile-sidecar"}}
reads = []
for step in range(600):  # 60 s of watcher ticks, 0.1 s apart
    now = step * 0.1
    if step == 100:
        clock.cost = BURST_S * 1.5  # one process grew: a read now costs 15 ms of CPU
    before = sampler.reads
    sampler.tick(now, live)
    reads.append(sampler.reads - before)
per10 = [sum(reads[i:i + 100]) for i in range(0, 600, 100)]
print("reads per 10 s:", per10)
sys.exit(1 if sum(per10[2:]) == 0 else 0)
