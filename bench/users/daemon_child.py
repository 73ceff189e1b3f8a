"""pytorch/pytorch#115366 ("Using a torch.compile'd function in a multiprocessing subprocess causes process hang on
exit"), hpcaitech/ColossalAI#5987: a daemonic spawn child runs a torch.compile'd function; the parent puts None on
the queue and join()s the child, and the join never returns. The user asks: why does my child not exit, and what do
I change? (pytorch#184472, 2026-05, changed how a daemonic process makes its compile pool.)

Stand-in on torch 2.13 CPU, the report's program: the child compiles on its first item; its pool is made the way a
GPU host's first Triton kernel makes it (wait_pool_ready()). The parent's join is bounded by JOIN_S here (the
user's was not); a child still alive then is reported and left to multiprocessing's exit (daemonic: terminate()).
Standalone: `python bench/users/daemon_child.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

JOIN_S = float(os.environ.get("JOIN_S", "180"))


@torch.compile
def affine(x: torch.Tensor, a: float, b: float) -> torch.Tensor:
    return a * x + b


def run_fn(recv_q) -> None:  # noqa: ANN001 - a multiprocessing queue
    from torch._inductor.async_compile import AsyncCompile
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    while True:
        x = recv_q.get()
        if x is None:
            break
        affine(x.clone(), 3.0, 2.0)
    # Wall-clock stamps on both sides: the parent's join minus this is the child's exit, read by the program itself.
    print(f"child {os.getpid()} returns from run_fn at {time.time():.3f}", flush=True)


def main() -> None:
    ctx = mp.get_context("spawn")
    send_q = ctx.SimpleQueue()
    proc = ctx.Process(target=run_fn, args=(send_q,), daemon=True)
    proc.start()
    for _ in range(2):
        send_q.put(torch.randn(100, 100))
    send_q.put(None)
    start = time.monotonic()
    print("Waiting on subprocess...", flush=True)
    proc.join(JOIN_S)
    waited = time.monotonic() - start
    print(f"join returned at {time.time():.3f}", flush=True)
    if proc.is_alive():
        print(f"join timed out after {waited:.1f} s: child {proc.pid} still alive", flush=True)
    else:
        print(f"Done. child exit code {proc.exitcode} after {waited:.1f} s", flush=True)


if __name__ == "__main__":
    main()
