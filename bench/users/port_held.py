"""A server restarted after a crash cannot bind its port: "Address already in use", for about a minute.

Public reports: vllm-project/vllm#9737 ('"Address already in use" for 1 minute after crash (since 0.6.2)': "after
the server dies (due to an exception/crash or hitting ctrl-c), for about a minute, it fails to start again with
OSError: [Errno 98] Address already in use ... upon crash Kubernetes immediately restarts the container"), #7514 (a
`while true; do vllm serve ...; done` loop that prints "error while attempting to bind on address" several times
before the server starts), and the mechanism: tenstorrent/tt-inference-server#3640 ("prevents orphaned workers from
holding disaggregation ports after the parent is killed"), llm-d-incubation/llm-d-fast-model-actuation#560 ("With
the default 'fork' on Linux a forked child holds duplicate fds for those sockets"). A compile pool whose workers
are forked from the server (TORCHINDUCTOR_WORKER_START=fork; the default of torch 2.1-2.3) copies every fd the
server had open at that moment, its listening socket too, whatever its close-on-exec flag. When the server dies
hard, the workers live on until their parent-death watchdog looks (every 60 s in torch 2.13), holding the port.
The user asks: what holds my port after the crash, for how long, and what do I change?

Stand-ins on torch 2.13 CPU: the supervisor (the traced main: k8s's restart, or the run.sh loop) starts the
server; the server binds PORT (socket.create_server: SO_REUSEADDR, so TIME_WAIT is no cause), makes its pool the
way a GPU host's first Triton kernel does (wait_pool_ready()), serves briefly, then aborts (SIGABRT: what a CUDA
error or NCCL's watchdog does). The supervisor restarts it at once; the new server retries its bind every second,
as the run.sh loop does, and prints each failure; once bound it serves briefly and exits cleanly.
Standalone: `python bench/users/port_held.py` (PORT: 18473).
"""
import os
import socket
import subprocess
import sys
import time

PORT = int(os.environ.get("PORT", "18473"))
BIND_TRIES = 100  # the restarted server's bound on its bind retries, one a second
SERVE_S = 3


def server(first: bool) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
    os.environ.setdefault("TORCHINDUCTOR_WORKER_START", "fork")
    t0 = time.monotonic()
    for attempt in range(BIND_TRIES):
        try:
            sock = socket.create_server(("127.0.0.1", PORT))
            break
        except OSError as e:
            print(f"server: bind 127.0.0.1:{PORT} failed ({e.strerror}), try {attempt + 1}", flush=True)
            time.sleep(1)
    else:
        print(f"server: gave up binding after {BIND_TRIES} tries", flush=True)
        sys.exit(1)
    print(f"server: listening on {PORT} ({time.monotonic() - t0:.1f} s after it started)", flush=True)
    import torch  # noqa: F401
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel
    print("server: model compiled, serving", flush=True)
    time.sleep(SERVE_S)
    if first:
        print("server: CUDA error: an illegal memory access was encountered (abort)", flush=True)
        os.abort()
    sock.close()
    print("server: shutting down", flush=True)


if len(sys.argv) > 1 and sys.argv[1] == "server":
    server(sys.argv[2] == "first")
    sys.exit(0)

start = time.monotonic()
for run in ("first", "restart"):
    code = subprocess.call([sys.executable, os.path.abspath(__file__), "server", run], timeout=300)
    print(f"supervisor: server ({run}) exited with {code} at {time.monotonic() - start:.1f} s; "
          + ("restarting it" if run == "first" else "done"), flush=True)
