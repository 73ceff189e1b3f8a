"""The kernels' stand-in that the compile-time cases share (cpu_quota.py, threads_clobbered.py): KERNELS jobs of
about half a CPU-second each, compiled the way torch 2.13 would at the job's compile_threads."""
import hashlib
import time

KERNELS = 4
KERNEL_ROUNDS = 2_500_000  # about 0.45 s of one CPU here, unthrottled


def compile_kernel() -> bytes:
    """A Triton compile's stand-in: about half a CPU-second in one thread (a stdlib function, so the pool's
    workers can unpickle it)."""
    return hashlib.pbkdf2_hmac("sha256", b"kernel", b"salt", KERNEL_ROUNDS)


def compile_kernels(config, async_compile) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """With compile_threads above 1, make the pool as a GPU host's first Triton kernel does (wait_pool_ready(),
    printing how long it took) and run each kernel as a job in it; else compile each in this process, one after
    another. Returns (when the first compile began, when the kernels began)."""
    t0 = time.monotonic()
    if config.compile_threads > 1:
        async_compile.wait_pool_ready()  # first Triton kernel
        print(f"compile pool ready: {time.monotonic() - t0:.1f} s", flush=True)
        pool = async_compile.process_pool()
        t1 = time.monotonic()
        jobs = [pool.submit(hashlib.pbkdf2_hmac, "sha256", b"kernel", b"salt", KERNEL_ROUNDS) for _ in range(KERNELS)]
        [j.result(timeout=600) for j in jobs]
    else:
        t1 = time.monotonic()
        [compile_kernel() for _ in range(KERNELS)]
    return t0, t1
