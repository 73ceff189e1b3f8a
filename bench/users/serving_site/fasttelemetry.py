"""A metrics library whose background thread holds its lock while it flushes (a network write, nearly all the
time), with no at-fork handler: a process forked meanwhile has the lock held, and no thread to release it."""
import threading
import time

LOCK = threading.Lock()


def flusher() -> None:
    while True:
        with LOCK:
            time.sleep(0.5)


def start() -> None:
    threading.Thread(target=flusher, daemon=True, name="telemetry").start()


def compile_kernel(name: str) -> str:
    """A kernel's compile that records a metric through the library (takes its lock)."""
    with LOCK:
        return name
