"""A server whose SIGTERM handler drains its in-flight requests, stopped by a SIGTERM to every process of its group.

Public report: ai-dynamo/dynamo#791 ("Graceful shutdown does not work well for TensorRTLLM Worker": "Even if I don't
do anything when handling sigterm the ongoing requests stop ... I see that a bunch of LLM api torch inductor
processes die, which likely causes this", with `ps` showing the `compile_worker/__main__.py` sidecar and workers
beside the worker). A service manager's stop signals every process of the service, not only its main: systemd's
default KillMode=control-group, a container init run with -g, slurm's scancel. The main catches SIGTERM and goes on
draining; the compile pool's sidecar and workers take the default action and die. A request in the drain that needs
a kernel (a new input shape: a recompile) then never gets it: torch 2.13's pool does not notice its sidecar's end
(the main holds both ends of its pipes), so each such compile waits until the request's timeout (WAIT_S). The user
asks: why do my in-flight requests fail during a graceful shutdown, and what do I change?

The request waits for its kernel as a compiled module does, in torch's AsyncCompile.wait(), bounded by torch's own
compile_worker_wait_timeout (TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT, what torch's CI sets "so a stuck compile
doesn't burn the whole shard budget"): the traced wait records torch's RuntimeError ("did not complete within 30s")
and how long it waited. `WAIT=own`: the program's own Future.result(timeout) instead, as before: a concurrent.futures
call, outside torch, which no record shows (the log then has only the submits to the dead pool).

Stand-ins on torch 2.13 CPU: the pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready());
a kernel compile is time.sleep in a worker. The server serves SERVE_S, then a request with a new shape starts a
compile; while it is in flight the service is stopped: the program sends SIGTERM to its own process group through
libc (as the service manager does, from outside: no process of the program is its sender, and os.killpg's traced
wrapper would log one). The handler only marks the drain; the server finishes its in-flight requests (the compile in
flight, then one more new shape queued behind it) and exits 0, logging each failed request, as a graceful server
does. Standalone: `python bench/users/graceful_drain.py` (run it as its own process group: a shell job, or setsid).
The controls: `STOP=main` (SIGTERM to the main only, as KillMode=mixed does: its exit shuts the pool down) and
`HANDLER=shutdown` (the handler calls shutdown_compile_workers(): the compile in flight fails at once, the next one
makes a new pool).
"""
import ctypes
import os
import signal
import sys
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor import config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers  # noqa: E402

SERVE_S = float(os.environ.get("SERVE_S", "15"))  # the server serves (the pool idle) this long
COMPILE_S = 4.0  # a new shape's kernel compile, in a worker
WAIT_S = 30.0  # a request's bound on its compile (a server's request timeout)
STOP = os.environ.get("STOP", "group")  # "group": every process of the service; "main": the main only
HANDLER = os.environ.get("HANDLER", "")  # "shutdown": the handler drops the pool (shutdown_compile_workers())
WAIT = os.environ.get("WAIT", "torch")  # "torch": AsyncCompile.wait() bounded by torch's timeout; "own": result()
config.compile_worker_wait_timeout = int(WAIT_S)
T0 = time.monotonic()
draining: list[float] = []


def stamp() -> str:
    return f"{time.monotonic() - T0:6.1f} s"


def on_sigterm(signum: int, frame: object) -> None:
    """The server's graceful stop: accept no new request, finish the ones in flight (dynamo#791's handler did
    nothing at all; the requests in flight still failed)."""
    draining.append(time.monotonic())
    print(f"{stamp()} SIGTERM caught: draining the requests in flight", flush=True)
    if HANDLER == "shutdown":  # the report's other way: the next compile makes a new pool
        shutdown_compile_workers()
        print(f"{stamp()} the handler shut the compile pool down", flush=True)


def stop_service() -> None:
    """What the service manager's stop does, from outside the program: libc's kill, not os.kill."""
    target = -os.getpgid(0) if STOP == "group" else os.getpid()
    print(f"{stamp()} the service is stopped: SIGTERM to {'its process group' if STOP == 'group' else 'its main'}",
          flush=True)
    if ctypes.CDLL(None, use_errno=True).kill(target, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), f"kill({target}, SIGTERM)")


def request(shape: str) -> None:
    """One request whose shape needs a new kernel: its compile goes to inductor's pool (AsyncCompile.process_pool(),
    as a kernel's compile asks for it); a server logs a failure and goes on with its next request."""
    print(f"{stamp()} request {shape}: compiling its kernel", flush=True)
    try:
        kernel = AsyncCompile.process_pool().submit(time.sleep, COMPILE_S)
        if WAIT == "own":
            kernel.result(timeout=WAIT_S)
        else:  # a compiled module's wait on its kernels
            AsyncCompile().wait({"triton_poi_fused_" + shape.strip("[]").replace(", ", "_"): kernel})
        print(f"{stamp()} request {shape}: served", flush=True)
    except Exception as e:  # noqa: BLE001 - the server logs what the pool raised
        print(f"{stamp()} request {shape} FAILED: {type(e).__name__}: {e}", flush=True)


def main() -> int:
    signal.signal(signal.SIGTERM, on_sigterm)
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    pool = AsyncCompile.process_pool()
    print(f"{stamp()} main {os.getpid()}, process group {os.getpgid(0)}, sidecar {pool.process.pid}", flush=True)
    request("[8, 128]")  # the warm-up shape
    print(f"{stamp()} serving", flush=True)
    time.sleep(SERVE_S)
    # The stop arrives while the next request's compile is in flight (a thread of the program stands in for the
    # service manager: it sends through libc, so no record names the program as the sender).
    stopper = threading.Timer(1.0, stop_service)
    stopper.start()
    request("[16, 128]")  # in flight when the stop comes
    request("[24, 128]")  # queued behind it: still the drain's to finish
    stopper.join()
    while not draining and time.monotonic() - T0 < WAIT_S * 3:
        time.sleep(0.1)
    print(f"{stamp()} drained; exiting", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
