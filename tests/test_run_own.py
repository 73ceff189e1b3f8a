"""run/own.py: which runs of a shared log are `run`'s own, read from their main's parents, with a reader whose
processes the test sets (the live cases are test_run_knows.py's)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from wp_autotrace.cli.run.own import Own

ME, SINCE, HOST = 4000, 1000.0, "h1"
OLDER, NEWER = 10, 500  # start ticks: before run's (ME's), after


class Procs:
    """A host's processes as ProcReader.stat gives them: pid -> (ppid, start ticks)."""

    def __init__(self, procs: dict[int, tuple[int, int]], environs: dict[int, bytes] | None = None) -> None:
        self.procs, self.environs = procs, environs or {}

    @staticmethod
    def pids() -> set[int]:
        """None of them is in another pid namespace: the test's namespaced mains have no live process here."""
        return set()

    def stat(self, pid: int) -> dict[str, Any] | None:
        if pid not in self.procs:
            return None
        ppid, ticks = self.procs[pid]
        return {"pid": pid, "ppid": ppid, "start_ticks": ticks, "create_time": SINCE - 50 + ticks / 100}

    def environ(self, pid: int) -> bytes:
        return self.environs.get(pid, b"")


def _run(ppid: int, ns: int | None = None) -> Any:
    """A run whose main 7000 (parent ppid) began after run started its program; ns: the pid namespace the log's
    first traced process on the host wrote from (its records' `pidns`; None: the initial one, run's)."""
    run = SimpleNamespace(id="r1", run_exit=None, launch=None, command_exit=None, start=SINCE + 6.0,
                          root_pid=7000, real_host={}, home_ns={HOST: ns})
    run.root = SimpleNamespace(host=HOST, ppid=ppid, create_time=SINCE + 6.0, run=run)
    run.processes = [run.root]
    return run


def test_a_main_whose_shell_init_took_is_not_another_programs() -> None:
    """`run -- bash -c "bash -c 'python prog; true' & ..."`: the outer shell exits, the inner one, run's
    grandchild, lives on under init, older than run. Init is where every orphan goes, not who started the
    chain: the run is told by its start (run's own), not as another program's ('This run wrote no record')."""
    procs = {1: (0, 1), ME: (300, 400), 6000: (1, NEWER)}  # 6000: the inner shell, its parent gone
    own = Own(ME, SINCE, HOST, Procs(procs))
    run = _run(6000)
    assert own.parents_reach_me(run.root) is None
    assert own.of(run)


def test_a_main_below_an_older_shell_is_another_programs() -> None:
    """Another `run` started beside this one from a shell older than both: its main's parents reach that shell
    before this run: another's, as before."""
    procs = {1: (0, 1), 300: (1, OLDER), ME: (300, 400), 6000: (300, NEWER)}  # 6000: the other run
    own = Own(ME, SINCE, HOST, Procs(procs))
    assert own.parents_reach_me(_run(6000).root) is False
    assert not own.of(_run(6000))


def test_a_main_below_run_is_runs() -> None:
    procs = {1: (0, 1), ME: (300, 400), 6000: (ME, NEWER)}
    assert Own(ME, SINCE, HOST, Procs(procs)).parents_reach_me(_run(6000).root) is True


def test_run_as_pid_1_owns_what_init_took() -> None:
    """run is its pid namespace's init (a container's entry point): an orphan given to it is below it."""
    procs = {1: (0, 1), 6000: (1, NEWER)}
    own = Own(1, SINCE, HOST, Procs(procs))
    assert own.parents_reach_me(_run(6000).root) is True


def test_a_main_in_a_pid_namespace_of_its_own_is_not_read_by_host_pids() -> None:
    """`run -- unshare -p -f bash -c "bash -c 'python prog; true'"`: the main is pid 3 there, its parent pid 2
    there; this host's pid 2 (kthreadd) is older than run. Its pids are not this /proc's: not known, the run told
    by its start (run's own), not as another program's."""
    procs = {1: (0, 1), 2: (0, 1), ME: (300, 400)}
    own = Own(ME, SINCE, HOST, Procs(procs))
    assert own.my_ns is None  # the tests run in the initial pid namespace, as the records' missing pidns says
    run = _run(2, ns=4026532175)
    assert own.parents_reach_me(run.root) is None
    assert own.of(run)
    assert own.parents_reach_me(_run(2).root) is False  # the same pids in run's own namespace: an older parent


LOG = "/tmp/x.jsonl"
GIVEN = f"HOME=/root\0WP_AUTOTRACE=1\0WP_AUTOTRACE_LOG={LOG}\0".encode()  # what run gave its program


def test_a_main_whose_shell_a_subreaper_took_is_not_another_programs() -> None:
    """The same double fork under a subreaper (systemd --user, tini -s): the inner shell, run's grandchild, is
    handed to run's parent 200, older than run. It kept the environment run gave its program: not known (told by
    its start: run's own), not another program's."""
    procs = {1: (0, 1), 200: (1, OLDER), ME: (200, 400), 6000: (200, NEWER)}
    own = Own(ME, SINCE, HOST, Procs(procs, {6000: GIVEN}), LOG)
    run = _run(6000)
    assert own.parents_reach_me(run.root) is None
    assert own.of(run)


def test_a_main_below_another_run_of_the_same_parent_is_another_programs() -> None:
    """Another `run` (6000) started by run's own parent: older parent, one of run's, but 6000 has no environment
    run gave; and a process with it under an older process that is none of run's parents (no subreaper of run's
    took it). Both another's, as before."""
    procs = {1: (0, 1), 200: (1, OLDER), 300: (1, OLDER), ME: (200, 400), 6000: (200, NEWER), 6001: (300, NEWER)}
    own = Own(ME, SINCE, HOST, Procs(procs, {6000: b"HOME=/root\0WP_AUTOTRACE_LOG=/tmp/x.jsonl\0", 6001: GIVEN}), LOG)
    assert own.parents_reach_me(_run(6000).root) is False
    assert own.parents_reach_me(_run(6001).root) is False
    older_recorded = {1: (0, 1), 200: (1, OLDER), ME: (200, 400)}  # the log's own ppid older: another's, whatever env
    assert Own(ME, SINCE, HOST, Procs(older_recorded, {200: GIVEN}), LOG).parents_reach_me(_run(200).root) is False
