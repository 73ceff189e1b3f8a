"""A one-module start-up floor: what a traced child cannot avoid paying, for bench/host_floor.py.

Installed into a bench venv as ``wp_floor.py`` with its own .pth line (``FLOOR_PTH``): when
WP_AUTOTRACE is on it installs a meta-path finder holding the target module names, writes a
preformatted process_start (argv, cwd, create time from /proc) and, at exit, a process_exit,
and sets the at-fork and atexit hooks. No checks, no redaction, no settings: a floor, never a tracer.
"""

import atexit
import os
import sys

FLOOR_PTH = ('import os; os.environ.get("WP_AUTOTRACE", "") not in ("", "0") '
             'and __import__("wp_floor").start()\n')
NAMES = frozenset(("torch._inductor.async_compile", "torch._inductor.codecache",
                   "torch._inductor.compile_worker.subproc_pool", "torch._inductor.autotune_process",
                   "torch._inductor.config", "torch._dynamo.convert_frame"))


class Finder:
    def find_spec(self, name, path=None, target=None):
        if name in NAMES:
            return None  # a real tracer would wrap the loader here
        return None


def _write(line):
    fd = os.open(os.environ["WP_AUTOTRACE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _exit():
    _write(f'\n{{"v":1,"event":"process_exit","ts":{_now()!r},"pid":{os.getpid()},"how":"exit"}}\n')


def _now():
    import time

    return time.time()


def start():
    sys.meta_path.insert(0, Finder())
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    stat = os.read(fd, 4096)
    os.close(fd)
    start_ticks = stat.rpartition(b")")[2].split()[19].decode()
    argv = ",".join('"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"' for a in sys.argv)
    _write(f'\n{{"v":1,"event":"process_start","ts":{_now()!r},"pid":{os.getpid()},"argv":[{argv}],'
           f'"cwd":"{os.getcwd()}","start_ticks":{start_ticks}}}\n')
    os.register_at_fork(after_in_child=lambda: None)
    atexit.register(_exit)
