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
