"""A torchrun job whose rank fails after compiling: torchrun stops the other rank and restarts the worker group, and
every rank of every attempt makes its own compile pool.

Public reports: pytorch/pytorch#113231 ("When torchelastic notices that one rank has failed, it will send a SIGTERM
signal to other trainer ranks to tear them down before restarting. However, if the trainer itself launches
subprocesses ... the SIGTERM will be delivered only to the direct child": since then each rank starts in its own
session and the SIGTERM goes to its process group, compile sidecar and workers included) and pytorch/pytorch#146371
("We expected that when worker process with rank 1 failed, all of the workers must be restarted by torchrun").

Run it under torchrun (2 ranks, one restart), as its user does:
    python -m torch.distributed.run --standalone --nproc-per-node=2 --max-restarts=1 --monitor-interval=0.5 \
        bench/users/torchrun_restart.py

Flow: each rank makes its pool as a GPU host's first Triton kernel does (AsyncCompile.wait_pool_ready()), compiles,
says so (a file per rank: the ranks share no process group here, gloo would add its own threads), then trains
(sleeps). On the first attempt rank 1 raises after STEP_S of training (a NaN loss); torchrun's agent then sends SIGTERM
to rank 0's process group (rank 0, its sidecar and its workers: `SubprocessHandler.close`, `os.killpg`) and starts both
ranks again. The second attempt compiles again (new pools) and ends normally (torch's atexit shuts each pool down).

The user asks: what happened to the compile pools at the restart (are any left from the failed attempt), and what did
the restart cost in compile pools (how many were made in all, how long each rank waited for its new one)?
Each rank prints its pid, its sidecar's pid and its waits (psutil: the independent reading); torchrun's agent logs
"Sending process N closing signal SIGTERM" on stderr.
"""
import os
import sys
import time
from pathlib import Path

STEP_S = 8  # rank 1 trains this long (both pools idle) before it fails
TRAIN_S = 300  # rank 0's training: longer than the case; the agent's SIGTERM ends it
WAIT_S = 400  # bound on waiting for the other rank's compile


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} rank {os.environ.get('RANK')} attempt "
          f"{os.environ.get('TORCHELASTIC_RESTART_COUNT')} pid {os.getpid()}] {msg}", flush=True)


def main() -> int:
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    marks = Path("/tmp") / f"torchrun_restart_{os.environ.get('TORCHELASTIC_RUN_ID', 'x')}"
    marks.mkdir(exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
    import psutil
    import torch
    from torch._inductor.async_compile import AsyncCompile

    t0 = time.monotonic()
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    ready = time.monotonic() - t0
    # the same graphs in every attempt: the restart's compiles hit the FX graph cache the first attempt filled
    torch.compile(lambda x: (x * (rank + 1)).cos() + 1)(torch.ones(4))
    sidecar = AsyncCompile.process_pool().process.pid
    say(f"pool ready after {ready:.1f} s, compiled after {time.monotonic() - t0:.1f} s; sidecar {sidecar}, "
        f"pool processes {[p.pid for p in psutil.Process(sidecar).children()]}")
    (marks / f"{attempt}-{rank}").write_text(str(os.getpid()))
    other = marks / f"{attempt}-{1 - rank}"
    deadline = time.monotonic() + WAIT_S
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if attempt == 0 and rank == 1:
        time.sleep(STEP_S)
        say("loss is NaN: raising")
        raise RuntimeError("loss is NaN at step 3")
    if attempt == 0:
        time.sleep(TRAIN_S)  # the agent's SIGTERM to this rank's process group ends it here
        return 0
    time.sleep(2)  # the restarted attempt trains briefly and ends normally
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
