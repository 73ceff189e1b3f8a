"""How the run stands, in the Answer's words: the program's exit code when not 0, and a run not plainly
ended (still in progress, or its main process ended without its process_exit: by whom, where the log says).
"""

from __future__ import annotations

from typing import Any

from .fmt import status_words, uncaught_words


def exit_code_words(rep: dict[str, Any]) -> str:
    """'The program exited with code 7.' when the main process's code is not 0 (run's waited status, else
    its process_exit), with the uncaught exception its process_exit names ('..., after an uncaught ValueError:
    boom.'); which run's, when the report holds several. Where the command `run` started is no run's
    root (a shell script of Python steps) and failed: its status, and its steps' (command_exit_words)."""
    command = command_exit_words(rep["runs"], rep.get("t0"))
    if command:  # the one command the user ran failed: its status first, its steps' own under it
        return command
    bad = [(r, c) for r in rep["runs"] if isinstance(c := r.get("exit_code"), int) and c > 0]
    if not bad:
        # an exception ended it and no `run` waited for its code: its process_exit names the exception
        failed = next((r for r in rep["runs"] if r.get("root_error") and r.get("exit_code") is None), None)
        if failed is None:
            return ""
        which = f"of run {failed['id'] or '?'} " if len(rep["runs"]) > 1 else ""
        return f"The program {which}ended by {uncaught_words(failed['root_error'])}."
    run, c = bad[0]
    # the exception its process_exit names is why, where one ended it: `run`'s code alone says less than no `run`
    after = f", after {uncaught_words(run['root_error'])}" if run.get("root_error") else ""
    return (f"The program of run {run['id'] or '?'} exited with code {c}{after}." if len(rep["runs"]) > 1 else
            f"The program exited with code {c}{after}.")


def command_exit_words(runs: list[dict[str, Any]], t0: float | None = None) -> str:
    """'The command wp-autotrace run started (pid 620: not traced, the runs here are its Python steps) exited with
    code 3.' where that command, no run's root (a shell script), did not end with 0; else ''. Then each step whose
    own records show a failure (step_failure), counted as the user counts them: its Python steps in start order;
    where a later step began after the failed one's main ended (t0: the report's, which root_end_s counts from), the
    script ran on, said so."""
    cmd = next((r["command_exit"] for r in runs if r.get("command_exit") and r["command_exit"]["status"] != 0), None)
    if cmd is None:
        return ""
    steps = sorted((r for r in runs if (r.get("command_exit") or {}).get("pid") == cmd["pid"]),
                   key=lambda r: r.get("start") or 0.0)
    numbered = [(i, r, how) for i, r in enumerate(steps, 1) if (how := step_failure(r))]
    failed = [f"its Python step {i} of {len(steps)} (`{r['command']}`, pid {r['root_pid']}) {how}"
              for i, r, how in numbered]
    # a step's sys.exit code is written nowhere (Python hands its exit handlers no code): not known, said so
    after = (f", after {' and '.join(failed)}" if failed else
             "; no record shows a step's own failure (a Python step's exit code is not recorded, only an uncaught "
             "exception or a signal that ended it)")
    if numbered and t0 is not None and (later := ran_on(steps, numbered[-1][0], t0)):
        # the records show the order only: a step that began after the failed one ended tells a script that went
        # on, whose own later command set its status, so "after" would read as the cause
        after = f"; {' and '.join(failed)}, and the script ran on ({later} began after it ended)"
    return (f"The command wp-autotrace run started (pid {cmd['pid']}: not traced, the runs here are its Python "
            f"steps) {status_words(cmd['status'])}{after}.")


def ran_on(steps: list[dict[str, Any]], failed: int, t0: float) -> str:
    """'its step 2 of 2' ('its step 2 of 4 and 2 more'): the steps (in start order, 1-based failed) that began after the
    main of step `failed` ended, as its records time it (t0 + root_end_s); '' where none did or its end is not
    known."""
    end = steps[failed - 1].get("root_end_s")
    if not isinstance(end, (int, float)):
        return ""
    ended = t0 + end
    later = [i for i, r in enumerate(steps, 1) if i > failed and (r.get("start") or 0.0) >= ended]
    if not later:
        return ""
    more = f" and {len(later) - 1} more" if len(later) > 1 else ""
    return f"its step {later[0]} of {len(steps)}{more}"


def step_failure(r: dict[str, Any]) -> str:
    """How a run's main ended where its own records show a failure: a non-zero code (its process_exit's, or
    run's wait), the uncaught exception its process_exit names, the signal a record names (root_ending); else ''."""
    code = r.get("exit_code")
    if isinstance(code, int) and code != 0:
        return status_words(code)
    if r.get("root_error"):
        return f"ended by {uncaught_words(r['root_error'])}"
    ending = r.get("root_ending")
    return ending_said(ending) if r["state"] == "killed" and ending else ""


def ending_said(ending: str) -> str:
    """root_ending after 'The main process': its own words where they say how it ended unread ('ended as ...'),
    else after 'was' ('was killed by SIGKILL')."""
    return ending if ending.startswith(UNREAD_ENDS) else f"was {ending}"


# How a main whose own status went unread ended, as root_ending words it (its group's signal, its job step's end):
# said as they stand ("The main process ended as ..."), never after "was".
UNREAD_ENDS = ("ended as ", "ended after ")
# Findings the run-state sentence tells (state_words): not again as a problem bullet.
STATE_KINDS = ("root-killed", "in-progress")


def state_words(rep: dict[str, Any]) -> str:
    """How the run stands when not plainly ended: in progress, or the main process ended without exit."""
    states = {r["state"] for r in rep["runs"]}
    if "in progress" in states:
        return "The run is still in progress: what it leaves behind is not known yet."
    if "killed" in states:
        by = sorted({r["ended_by"] for r in rep["runs"] if r.get("ended_by")})
        lost = any(r.get("records_lost") for r in rep["runs"])
        changed = next((r["root_changed"] for r in rep["runs"] if r["state"] == "killed" and r.get("root_changed")),
                       None)
        unread = next((r["end_unread"] for r in rep["runs"] if r["state"] == "killed" and r.get("end_unread")), None)
        ends = {p["pid"]: p["ending"]["kind"] for p in rep["processes"]}
        oom = any(r["state"] == "killed" and ends.get(r["root_pid"]) == "oom-kill" for r in rep["runs"])
        # the signal that ended it, where a record names it: a traced process of the run sent it (its signal_sent
        # record, derive/senders.py: who and where) or its wait status, the watcher's reading of its zombie
        # or, its own status unread, the signal that ended the rest of its process group as it ended
        sent = next((r["root_ending"] for r in rep["runs"] if r["state"] == "killed" and r.get("root_ending")
                     and (ends.get(r["root_pid"]) == "signal" or r["root_ending"].startswith(UNREAD_ENDS))), None)
        return (f"The main process was ended by {', '.join(by)}." if by else
                f"The main process {ending_said(sent)}." if sent else
                f"The main process ended without a process_exit in the log: {changed}, after which the log refused "
                "its records; how it ended is not known." if changed else
                "The main process ended without a process_exit in the log, where records were lost." if lost else
                "The main process was killed by the OOM killer (the cgroup's OOM kill count rose as it ended)."
                if oom else
                f"The main process ended without a process_exit in the log: {unread}; how it ended is not known."
                if unread else
                "The main process ended without process_exit (killed, or os._exit).")
    return ""


def main_killed(rep: dict[str, Any]) -> bool:
    """Did a main process end without its process_exit (killed, os._exit), rather than still run?"""
    return any(r["state"] == "killed" for r in rep["runs"])


# What a kill of the main ends with it, when every process the finding names ended by the main's own signal.
BY_THE_KILL = ("call-never-returned", "pool-died")


def ended_by_the_kill(rep: dict[str, Any], f: dict[str, Any]) -> bool:
    """Did f follow from the main's kill: a kind the kill ends (BY_THE_KILL) whose every process is a killed main
    or ended by the signal that ended one, as the records show it (`run`'s waited status, a wait status)?"""
    if f["kind"] not in BY_THE_KILL or not f.get("pids"):
        return False
    ends = {p["pid"]: p["ending"] for p in rep["processes"]}
    killed = [r for r in rep["runs"] if r["state"] == "killed"]
    mains = {r["root_pid"] for r in killed}
    signals = {r["ended_by"] for r in killed if r.get("ended_by")}
    signals |= {ends[pid]["signal"] for pid in mains if ends.get(pid, {}).get("kind") == "signal"}
    return bool(signals) and all(pid in mains or (ends.get(pid, {}).get("kind") == "signal"
                                                  and ends[pid].get("signal") in signals) for pid in f["pids"])
