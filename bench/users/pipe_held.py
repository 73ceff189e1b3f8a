"""pytorch/pytorch#87335 "[dynamo] avoid popen.communicate()": a harness that runs a compiling child with its
output captured through pipes waits long after the child crashed, "if we have worker processes running in the
child, and the child segfaults, those processes will stay alive ... Since those children have open handles to
the stdin/stderr pipe, communicate never returns."

Faithful on torch 2.13 CPU with a fork compile pool (TORCHINDUCTOR_WORKER_START=fork, the default when the
report was filed): the child makes its pool the way a GPU host's first Triton kernel does
(AsyncCompile.wait_pool_ready()), then dies of SIGSEGV. Its forked workers hold the harness's stdout/stderr
pipe until their parent-death watchdog notices (it polls every 60 s in 2.13). The harness prints when the
child died and when communicate() returned. Standalone: `python bench/users/pipe_held.py`.
"""
import os
import subprocess
import sys
import threading
import time

HARNESS_S = 100  # the harness's own bound on communicate()

if len(sys.argv) > 1 and sys.argv[1] == "child":
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
    os.environ.setdefault("TORCHINDUCTOR_WORKER_START", "fork")
    import torch  # noqa: F401
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel
    print("child: compiled; now it crashes (SIGSEGV)", flush=True)
    import ctypes
    ctypes.string_at(0)  # a real segfault (a null read), not a signal the program sends itself

start = time.monotonic()
child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "child"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
ended: dict[str, float] = {}
threading.Thread(target=lambda: ended.setdefault("child", (child.wait(), time.monotonic() - start)[1]),
                 daemon=True).start()
try:
    out, _ = child.communicate(timeout=HARNESS_S)
    print(f"harness: child ended at {ended.get('child', -1):.1f} s (status {child.returncode}); "
          f"communicate() returned at {time.monotonic() - start:.1f} s", flush=True)
except subprocess.TimeoutExpired:
    print(f"harness: communicate() still waiting after {HARNESS_S} s", flush=True)
