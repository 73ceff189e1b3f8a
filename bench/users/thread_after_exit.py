"""huggingface/diffusers#3764 ("Using torch.compile as instructed in 0.17 release note results in
BackendCompilerFailed: cannot schedule new futures after interpreter shutdown"): the user's renderer runs its
loop in a thread (`renderer.py ... loop_thread`) started by a main thread that then returned; the first compile
in that thread failed in inductor's `async_compile` with concurrent.futures' `RuntimeError: cannot schedule new
futures after interpreter shutdown`. Python 3.9+ refuses new work to every concurrent.futures executor once the
main thread has returned (threading's atexit runs before it joins the other threads); the thread's work goes on,
its compile does not. The user asks: why does compiling fail, and only in the renderer?

Stand-ins on torch 2.13 CPU: the main thread starts the renderer (a non-daemon thread, as the user's) and returns;
the renderer waits until the main thread has ended, then makes the compile pool (wait_pool_ready(), a GPU host's
first Triton kernel: it still starts, as a SubprocPool's sidecar is a Popen, not an executor) and compiles (C++
kernels through inductor's thread pool, refused). It prints when the main thread ended and when the compile
failed. The control is `JOIN=1` (the main thread joins the renderer before returning: the compile works).
Standalone: `python bench/users/thread_after_exit.py`.
"""
import os
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

T0 = time.monotonic()


def loop_thread() -> None:
    main = threading.main_thread()
    if os.environ.get("JOIN") != "1":
        main.join()  # the user's main thread returned long before the first frame was rendered
        print(f"renderer: main thread ended at {time.monotonic() - T0:.1f} s", flush=True)
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    print(f"renderer: compile pool ready at {time.monotonic() - T0:.1f} s", flush=True)
    frame = torch.compile(lambda x: (x.sin() + 1).cos() * 2)
    try:
        out = frame(torch.randn(64))
    except Exception as e:
        print(f"renderer: compile failed at {time.monotonic() - T0:.1f} s: {type(e).__name__}: "
              f"{str(e).splitlines()[0]}", flush=True)
        raise
    print(f"renderer: frame rendered ({float(out.sum()):.3f})", flush=True)


renderer = threading.Thread(target=loop_thread, name="renderer")
renderer.start()
print(f"main: renderer started at {time.monotonic() - T0:.1f} s; main thread returns", flush=True)
if os.environ.get("JOIN") == "1":
    renderer.join()
