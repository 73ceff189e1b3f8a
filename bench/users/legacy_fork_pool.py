"""torch 2.1-2.3's default compile pool: a CPU service that compiles once, then serves (idles) for a while.

On torch 2.1-2.3 the first import of inductor's codecache (torch.compile's first use) runs AsyncCompile.warm_pool()
at that module's top level, which forks compile_threads workers from the main at once (a ProcessPoolExecutor, fork:
no sidecar; 2.3 keeps no env switch for the start method). On a CPU host no job is ever sent to them (C++ kernels
compile on AsyncCompile.pool(), a thread pool), so they sit idle, holding a copy of the main's pages, until the
interpreter's exit joins them. The user asks: what are these `python service.py` processes in ps, who made them,
and what do they hold? From 2.4 the default is a sidecar (subprocess) and from 2.9 nothing warms at import: this
case is for torch 2.1-2.3 only (run with such a torch: docs/users.md, "torch 2.3.1, live").

It prints, as its own evidence of the line that made the pool, its children right after torch.compile(...) and
after the first call. Standalone: `python bench/users/legacy_fork_pool.py` (IDLE_S: seconds to serve; 20).
"""
import os
import time

import psutil
import torch

IDLE_S = float(os.environ.get("IDLE_S", "20"))


def step(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ x.T).sum()


def children() -> list[int]:
    return sorted(p.pid for p in psutil.Process().children())


compiled = torch.compile(step)  # on 2.1-2.3: the codecache import here forks the pool
print("children after torch.compile:", children(), flush=True)
print("result", float(compiled(torch.randn(64, 64))), flush=True)
print("children after the first call:", children(), flush=True)
time.sleep(IDLE_S)  # serving: nothing more to compile
print("done", flush=True)
