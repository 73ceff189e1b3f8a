"""Lines that the text report and the page both show, worded from the report dict: a run's header (its
command, times, how it ended) and the findings with what to do. The presenters lay them out (text lines,
HTML), neither words them itself nor imports the other.
"""

from __future__ import annotations

import datetime
from typing import Any

from .fmt import pid_text, plural, status_words, uncaught_words, wrap
from .state import command_exit_words


def when_text(ts: Any) -> str:
    """A Unix time as UTC date and time; '?' for none."""
    if not isinstance(ts, (int, float)):
        return "?"
    try:
        return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ts:.0f}"

def run_lines(r: dict[str, Any]) -> list[str]:
    """One run's header (a `runs[]` entry of the report): command; root pid, hosts, times, state; python,
    torch, guard, durations; the inductor settings at import. The text report's and the page's."""
    out = [f"command:   {r['command'] or '?'}",
           f"root pid:  {r['root_pid'] or '?'}    host(s): {', '.join(r['hosts'])}    "
           f"{when_text(r['start'])} -> {when_text(r['end'])}    {state_text(r)}",
           f"python {r['python'] or '?'}    torch {r['torch'] or '?'}    "
           f"guard: {'nested-pools' if r['guard'] else 'off'}    {durations_text(r)}"]
    if r["inductor"]:
        out.append("inductor (at import): " + ", ".join(f"{k}={v}" for k, v in r["inductor"].items()))
    return out

def durations_text(r: dict[str, Any]) -> str:
    """'duration 19.7 s', or the program's apart from the run's when a process outlived it: 'program 19.7 s,
    run 73.5 s (until its last process ended)', or '(to its last record, 3 process(es) alive then)' where some were
    alive at the log's last record; with the program's exit code when not 0."""
    prog, run = r.get("program_s"), r["duration_s"]
    code = r.get("exit_code")
    exit_words = (f"    exit code {code}" if isinstance(code, int) and code > 0 else
                  f"    {status_words(code)}" if isinstance(code, int) and code < 0 else "")
    if isinstance(prog, (int, float)) and run - prog >= 1:
        # The run's last process ended only where none was alive at its last record; else the log stops first
        # (a leftover still running when the watcher left: the run lasts beyond it).
        alive = r.get("alive_at_last_record")
        until = f"to its last record, {alive} process(es) alive then" if alive else "until its last process ended"
        return f"program {prog:.1f} s, run {run:.1f} s ({until}){exit_words}"
    return f"duration {run:.1f} s{exit_words}"

def state_text(r: dict[str, Any]) -> str:
    """How the run ended, in words: ended / in progress / main process killed / end not seen."""
    state = r["state"]
    status = r.get("exit_status")  # what `wp-autotrace run` waited for (its run_exit record): evidence
    how = (f" by {r['ended_by']} (wp-autotrace run saw it)" if r.get("ended_by") else
           f" with exit code {status} (wp-autotrace run saw it)" if isinstance(status, int) and status > 0 else "")
    if state == "killed":
        # those it left running (the Findings' count), not every process a sample saw in the moment it ended
        after = f"; {r['left_running']} process(es) left running after it" if r.get("left_running") else ""
        if how:
            return f"main process ended{how}, without process_exit{after}"
        if r.get("root_ending"):  # a record names the signal (its wait status, a signal_sent, the OOM count)
            return f"main process {r['root_ending']}, without process_exit{after}"
        if r.get("root_changed"):  # then the log refused its records: its process_exit was one of them
            return f"main process ended without a process_exit in the log ({r['root_changed']}{after})"
        if r.get("records_lost") and not r.get("ended_by"):  # its process_exit may be a lost record
            return f"main process ended without a process_exit in the log ({r['records_lost']} records lost{after})"
        if r.get("end_unread"):  # no sample saw it alive: a change of its user or root, unseen, refuses its records
            return f"main process ended without a process_exit in the log ({r['end_unread']}; how it ended is not " \
                   f"known{after})"
        return f"main process ended without process_exit (killed, or os._exit{after})"
    error = uncaught_words(r["root_error"]) if r.get("root_error") else ""
    if state == "ended" and how:
        return f"ended{how}" + (f", after {error}" if error else "")
    if state == "in progress":
        return "in progress"
    if state == "ended" and r.get("exec_into"):
        return f"ended (the main process exec'd into {r['exec_into']}; its end seen by the watcher)"
    if state == "ended":
        return f"ended by {error}" if error else "ended"
    if r.get("alive_now") is False:  # the reader found its pid gone: it ended, its exit record not written
        if r.get("root_ending"):  # a record shows what ended it (a scheduler's signal to its job step)
            return f"main process {r['root_ending']}, without process_exit ({r['end_check']})"
        return f"ended without its exit record (no process_exit; {r['end_check']})"
    return "end not seen (no process_exit" + (f"; {r['end_check']})" if r.get("end_check") else ")")

def findings_lines(rep: dict[str, Any], verbose: bool = False, width: int | None = None) -> list[str]:
    """Each finding, worst first (findings/rank.py, as report.py orders them), with its advice, wrapped to width
    (verbose: every pid and the evidence); none: no_finding_line."""
    if not rep["findings"]:
        return wrap(no_finding_line(rep["runs"], rep.get("t0"), unseen_ends(rep)), width)
    return [line for f in rep["findings"] for line in finding_lines(f, verbose, width)]


# The no-finding line's lead where the program did not end well (its ending follows, unless told already).
NO_FINDING = "- No finding about its processes or pools"


def unseen_ends(rep: dict[str, Any]) -> dict[str | None, list[int]]:
    """The report's processes that ended with no exit record that anything explains (no_exit_pids), by the signal
    their wait status names (their ending's: a zombie's, or read through a pidfd once reaped); None: no status read."""
    pids = set(rep.get("no_exit_pids") or ())
    out: dict[str | None, list[int]] = {}
    for p in rep["processes"]:
        if p["pid"] in pids:
            ending = p.get("ending") or {}
            out.setdefault(ending.get("signal") if ending.get("kind") == "signal" else None, []).append(p["pid"])
    return out


def no_finding_line(runs: list[dict[str, Any]], t0: float | None = None,
                    unseen: dict[str | None, list[int]] | None = None) -> str:
    """The line for a report without findings: 'Nothing unusual', unless a program failed (its exit code) or traced
    processes ended with no exit record that anything explains (`unseen`: unseen_ends; a child crashed, its parent
    reaped it at once: its end is a problem no finding tells)."""
    line = _no_finding(runs, t0)
    if not unseen:
        return line
    n = len({pid for pids in unseen.values() for pid in pids})
    parts = [f"{_pids(pids)} by {sig}" for sig, pids in sorted((s, p) for s, p in unseen.items() if s)]
    if None in unseen:
        parts.append(f"{_pids(unseen[None])}, killed or crashed (how, the log does not say)")
    told = f"{plural(n, 'traced process')} ended without an exit record: {'; '.join(parts)}"
    return f"{NO_FINDING}; {told}." if line == NOTHING_UNUSUAL else f"{line} Also {told}."


def _pids(pids: list[int]) -> str:
    return f"pid {pids[0]}" if len(set(pids)) == 1 else f"pids {pid_text(pids)}"


NOTHING_UNUSUAL = "- Nothing unusual."


def _no_finding(runs: list[dict[str, Any]], t0: float | None) -> str:
    command = command_exit_words(runs, t0)
    if command:  # not about a shell script of Python steps that failed: its status, its failed steps'
        return f"{NO_FINDING}. {command}"
    failed = next((r for r in runs if isinstance(r.get("exit_code"), int) and r["exit_code"] != 0), None)
    # over several runs (one log that `run` appended to again), the run whose program it was: never a word that
    # reads as the last run's
    if failed is not None:  # not "Nothing unusual" about a program that failed
        bad = failed["exit_code"]
        return (f"{NO_FINDING}; {_program(runs, failed)} exited with code {bad}."
                if bad > 0 else f"{NO_FINDING}; {_program(runs, failed)} was {status_words(bad)}.")
    ended = next((r for r in runs if r.get("root_error")), None)
    if ended is not None:  # nor about one an exception ended, its code unrecorded (no `run` waited for it)
        return f"{NO_FINDING}; {_program(runs, ended)} ended by {uncaught_words(ended['root_error'])}."
    return NOTHING_UNUSUAL


def _program(runs: list[dict[str, Any]], r: dict[str, Any]) -> str:
    """'the program', or 'the program of run ID' where the report holds several runs."""
    return f"the program of run {r.get('id') or '?'}" if len(runs) > 1 else "the program"


def finding_lines(f: dict[str, Any], verbose: bool = False, width: int | None = None) -> list[str]:
    """One finding: its text, 'what to do' (its advice), and with verbose its pids and evidence."""
    out = wrap(f"- {f['text']}", width)
    if f["advice"]:
        out.extend(wrap(f"  what to do: {f['advice']}", width, "    "))
    if verbose and len(f["pids"]) > 1:
        out.append(f"  pids: {', '.join(map(str, f['pids']))}")
    if verbose:
        out.extend(f"  evidence: {e}" for e in f["evidence"])
    return out
