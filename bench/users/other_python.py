"""An application that bundles its Python runtime and whose sys.executable names another one: the compile sidecar,
started as `sys.executable .../compile_worker/__main__.py` with PYTHONPATH set to the main's sys.path, runs the
platform's Python against the bundle's standard library and dies as it starts; the first compile waits for a pool
that is never ready.

Public reports: pytorch/pytorch#159382 and pytorch/pytorch#160008 ("Set PYTHONHOME for inductor subprocesses ... If
they're part of an application that bundles the Python runtime, then they should use the bundled runtime to keep
their view of the world consistent"; the first version was reverted because "inductor subprocesses ... in venvs"
then looked for the CPython headers inside the venv), and the embedding hosts whose sys.executable is not the Python
that runs the code (unbit/uwsgi#670 "sys.executable and getting the value of the virtualenv config inside a
process"; celery/billiard#182, multiprocessing's set_executable for "a subprocess in a different virtualenv").
On torch 2.13 the main waits for the pool's ready job (wait_pool_ready, 120 s per compile by default), then raises
TimeoutError; the sidecar's own error is on the job's stderr only. The user asks: why does the first compile hang
in the packaged application and not from a plain `python`, and what do I change?

Stand-in: the application's launcher sets sys.executable to the platform's Python (PLATFORM_PYTHON, 3.9 here; the
bundle's runtime is this venv's 3.11), as an embedding host does, before torch loads. The pool is made the way a GPU
host's first Triton kernel makes it (wait_pool_ready(), bounded here by READY_S). The control is the same run
without the launcher's change (WP_USERS_KEEP_EXECUTABLE=1).
Standalone: `python bench/users/other_python.py`.
"""
import os
import sys
import time

T0 = time.monotonic()
PLATFORM_PYTHON = os.environ.get("WP_USERS_PLATFORM_PYTHON", "/work/venvs/py39/bin/python")
BUNDLED = sys.executable
if not os.environ.get("WP_USERS_KEEP_EXECUTABLE"):
    sys.executable = PLATFORM_PYTHON  # the launcher's view of "the" Python (an embedding host's binary, uwsgi's)
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

READY_S = 20  # torch's default is 120 s per compile

print(f"running on {BUNDLED} (Python {sys.version.split()[0]}); sys.executable {sys.executable}", flush=True)
t0 = time.monotonic()
try:
    AsyncCompile.wait_pool_ready(timeout=READY_S)  # first Triton kernel
    print(f"compile pool ready: {time.monotonic() - t0:.1f} s", flush=True)
except TimeoutError:
    print(f"first compile: TimeoutError after {time.monotonic() - t0:.1f} s waiting for the compile pool",
          flush=True)
    raise
