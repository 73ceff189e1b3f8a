"""Pool roles a process can only say itself: the watcher takes an autotune worker's from its process_start (its
command line is multiprocessing's), and a helper multiprocessing starts inside a pool call (its resource tracker)
keeps its own role rather than the one the call hands its worker."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from wp_autotrace.watcher.logwatch import LogWatch


def test_an_autotune_worker_says_its_role_in_its_process_start(tmp_path: Path) -> None:
    """AutotuneProcessPool's spawned worker: the tree has it as a plain child; its process_start says
    autotune-worker, so the sampler reads its memory (pool_roles gives the live entry that role)."""
    log = tmp_path / "log.jsonl"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        watch = LogWatch(fd, str(log), "h", "r1", 100, 0)
        rec = {"event": "process_start", "ts": 1000.5, "pid": 201, "host": "h", "run": "r1", "role": "autotune-worker",
               "create_time": 1000.4}
        watch._read_record(json.dumps(rec).encode())
        live = {201: {"pid": 201, "create_time": 1000.4, "role": "child"}}
        watch.pool_roles(live, 1001.0)
        assert live[201]["role"] == "autotune-worker"
    finally:
        os.close(fd)


def test_a_resource_tracker_keeps_its_role_inside_a_pool_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handed autotune-worker role (WP_AUTOTRACE_CHILD_ROLE) does not make multiprocessing's resource tracker a
    pool process; the worker itself takes it."""
    from wp_autotrace.runtime import bootstrap

    for cmdline, role in ((["python", "-c", "from multiprocessing.resource_tracker import main;main(7)"],
                           "resource-tracker"),
                          (["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()",
                            "--multiprocessing-fork"], "autotune-worker")):
        monkeypatch.setattr(bootstrap, "own_argv", lambda c=cmdline: c)
        monkeypatch.setattr(sys, "argv", cmdline[1:2])
        monkeypatch.setenv(bootstrap.CHILD_ROLE_ENV, "autotune-worker")
        assert bootstrap.detect_role(False) == role


def test_a_worker_its_creator_names_as_it_starts_it_is_a_compile_worker_at_once(tmp_path: Path) -> None:
    """A fork/spawn compile pool's worker, still importing torch, has no role record yet: its creator's
    worker_spawned record (written as concurrent.futures started it) names it, and the watcher gives the live
    process that role at once (the sampler reads it while it imports); a later process that reused the pid (made
    after the record) is not given it."""
    log = tmp_path / "log.jsonl"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        watch = LogWatch(fd, str(log), "h", "r1", 100, 0)
        rec = {"v": 1, "event": "worker_spawned", "ts": 1000.5, "pid": 100, "host": "h", "role": "main",
               "worker_pid": 301}
        os.write(fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
        watch.scan()
        live = {301: {"pid": 301, "create_time": 1000.45, "role": "child"}}
        watch.pool_roles(live, 1001.0)
        assert live[301]["role"] == "compile-worker"
        os.write(fd, (json.dumps(dict(rec, ts=1002.0, worker_pid=302), separators=(",", ":")) + "\n").encode())
        watch.scan()
        reused = {302: {"pid": 302, "create_time": 1003.0, "role": "child"}}
        watch.pool_roles(reused, 1003.5)
        assert reused[302]["role"] == "child"
    finally:
        os.close(fd)


def test_only_a_torch_compile_executor_names_the_worker_it_starts() -> None:
    """The wrapper of concurrent.futures' _spawn_process: a real fork executor started with torch's compile
    initializer writes worker_spawned with the pid of the worker it just started (the one its _processes got);
    an executor without an initializer, one with a program's own initializer, and a program's own executor class
    (even with torch's initializer) write nothing."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from wp_autotrace.runtime.recorder import _spawning

    class Sink:
        def __init__(self) -> None:
            self.records: list[tuple[str, dict[str, object]]] = []

        def emit(self, event: str, **fields: object) -> None:
            self.records.append((event, fields))

        def error(self, where: str, exc: BaseException) -> None:
            raise AssertionError(f"{where}: {exc!r}")

    def _async_compile_initializer() -> None:
        pass

    def own_initializer() -> None:
        pass

    _async_compile_initializer.__module__ = "torch._inductor.async_compile"

    class Own(ProcessPoolExecutor):
        """A program's own executor class (its module is not the stdlib's nor torch's)."""

    ctx = multiprocessing.get_context("fork")
    spawn = ProcessPoolExecutor._spawn_process  # type: ignore[attr-defined]
    for initializer, cls, told in ((_async_compile_initializer, ProcessPoolExecutor, True),
                                   (None, ProcessPoolExecutor, False), (own_initializer, ProcessPoolExecutor, False),
                                   (_async_compile_initializer, Own, False)):
        sink = Sink()
        executor = cls(1, mp_context=ctx, initializer=initializer)
        try:
            _spawning(sink, spawn)(executor)  # type: ignore[arg-type]
            pids = list(executor._processes)  # type: ignore[attr-defined]
            assert len(pids) == 1
            want = [("worker_spawned", {"worker_pid": pids[0]})] if told else []
            assert sink.records == want, (initializer, cls, sink.records)
        finally:  # no manager thread was started (no submit): its shutdown would not stop the worker
            for worker in list(executor._processes.values()):  # type: ignore[attr-defined]
                worker.kill()
                worker.join(30)
            executor.shutdown(wait=True)
