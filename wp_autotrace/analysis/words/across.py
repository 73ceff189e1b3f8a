"""The pools across processes in words: how many processes made a compile pool and what each pool is made
of, what they held together at one moment, what that scales with (ranks, DataLoader workers, tests), and a
launcher's restarts of its ranks with what each restart cost (derive/facts.py pools_across, derive/attempts.py).
The Answer's lead where several processes made pools.
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import DATALOADER_WORKER
from .fmt import plural, seconds_text, size_text
from .sentences import floor_text

# What the pools scale with (pools_across.scales_with), in words.
SCALES = {"rank": ("per rank", "it grows with the rank count"),
          DATALOADER_WORKER: ("per DataLoader worker", "it grows with num_workers"),
          "test": ("per test process", "it grows with the test processes (pytest -n)"),
          "child": ("per child process", "it grows with the child processes")}



def _parts(a: dict[str, Any]) -> str:
    """'3 sidecars + 6 workers = 9 compile processes'; fork/spawn pools have no sidecar: their workers alone
    are the pools' processes."""
    parts = (f"{plural(a['sidecars'], 'sidecar')} + {plural(a['workers'], 'worker')} = "
             if a["sidecars"] else f"{plural(a['workers'], 'worker')}, no sidecar: ")
    return f"{parts}{a['processes']} compile processes"


def _mem(a: dict[str, Any]) -> str:
    """', 717 MiB together at once' (memseries' one sum at one moment), or what of it was read; 'at least' where
    a floor beyond that moment too (View.at_once_keys: processes never read, pools read in different passes)."""
    at_once = a.get("at_once_bytes")
    if not at_once:
        return ""
    _, beyond = floor_text(at_once, None, None, never=a.get("at_once_never_read"), split=a.get("at_once_split"))
    whole = a.get("at_once_all_read") and not beyond
    mem = f", {'' if whole else 'at least '}{size_text(at_once)} together at once"
    if not a.get("at_once_all_read"):
        mem += " (of those read then: the watcher did not read them all at that moment" + (
            f"; {beyond[2:]}" if beyond else "") + ")"
    elif beyond:
        mem += f" ({beyond[2:]})"
    return mem


def _mem_figure(a: dict[str, Any]) -> str:
    """'430 MiB', or 'at least 430 MiB' where _mem would call the sum a floor (not all read at its moment,
    processes never read, pools read in different passes): a restart's later attempts, told in a few words."""
    figure, beyond = floor_text(a["at_once_bytes"], None, None, never=a.get("at_once_never_read"),
                                split=a.get("at_once_split"))
    return figure if a.get("at_once_all_read") or beyond else f"at least {figure}"


def across_sentence(a: dict[str, Any]) -> str:
    """'3 processes each made a compile pool (per rank): 3 sidecars + 6 workers = 9 compile processes, 717
    MiB together at once; it grows with the rank count.'; ranks a launcher restarted: restart_sentence."""
    if a.get("restart"):
        return restart_sentence(a, a["restart"])
    per, grows = SCALES.get(a.get("scales_with") or "", ("", ""))
    # processes of fewer ranks than processes (a rank started twice, its attempts not recorded): not more ranks
    fewer = a.get("scales_with") == "rank" and 0 < (a.get("ranks") or 0) < a["creators"]
    of = f" of {plural(a['ranks'], 'rank')}" if fewer else ""
    return (f"{a['creators']} processes{of} each made a compile pool{f' ({per})' if per else ''}: "
            f"{_parts(a)}{_mem(a)}{_across_counts(a)}" + (f"; {grows}" if grows else "") + ".")


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _nth(i: int) -> str:
    """The (i + 1)-th's word: 'first' for 0."""
    if i < len(ORDINALS):
        return ORDINALS[i]
    n = i + 1
    return f"{n}{'th' if n % 100 in (11, 12, 13) else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def restart_sentence(a: dict[str, Any], r: dict[str, Any]) -> str:
    """'2 ranks each made a compile pool, twice: torchrun restarted them once, after rank 1 exited (code 1) at
    186.1 s. Each time 2 sidecars + 4 workers = 6 compile processes, 468 MiB together at once ...; it grows
    with the rank count. The restart made the pools again: ...' (derive/attempts.py: counted per attempt, the
    memory at once of each attempt's pools alone)."""
    tries = r["attempts"]
    same = all(t["pools"] == r["ranks"] for t in tries)
    lead = (f"{plural(r['ranks'], 'rank')} each made a compile pool, {_times(len(tries))}" if same else
            f"{plural(r['ranks'], 'rank')} made {a['pools']} compile pools in {len(tries)} attempts")
    # what the first restart followed: the failure of attempt 0, which may have made no pool
    failed = tries[0]["after"] if tries[0]["attempt"] > 0 else tries[0]["failed"]
    why = f", after {failed['rank']} {failed['words']} at {seconds_text(failed['at'])}" if failed else ""
    lead += f": {r['launcher'] or 'their launcher'} restarted them {_times(r['restarts'])}{why}."
    shapes = {(t["sidecars"], t["workers"], t["processes"]) for t in tries}
    if len(shapes) == 1:
        # a later attempt's sum is a floor as the first's is (_mem): "at least" where it was
        mems = [_mem_figure(t) for t in tries[1:] if t.get("at_once_bytes")]
        first = tries[0].get("at_once_bytes")
        # each attempt's own sum at one moment: the later ones told where they differ from the first
        each = f" Each time {_parts(tries[0])}{_mem(tries[0])}" + (
            f" ({', '.join(mems)} the {' and '.join(_nth(i + 1) for i in range(len(mems)))} time)"
            if first and len(mems) == len(tries) - 1 and set(mems) != {size_text(first)} else "")
    else:
        each = " T" + "; ".join(f"the {_nth(i)} time {_parts(t)}{_mem(t)}" for i, t in enumerate(tries))[1:]
    return lead + each + f"{_across_counts(a)}; it grows with the rank count." + _restart_cost(tries, r["restarts"])


# Restarts told one by one in the Answer (the rest are in --json's pools_across.restart).
RESTARTS_TOLD = 2


def _restart_cost(tries: list[dict[str, Any]], restarts: int) -> str:
    """What each restart cost: the pools made again, how long each took to be ready, when the new ranks'
    compiles were done (and how long after the failure of the attempt just before: "after", which may have
    made no pool), and what the attempt with pools before it left alive. A restart is named by its count."""
    out = []
    for i in range(1, min(len(tries), RESTARTS_TOLD + 1)):
        before, t = tries[i - 1], tries[i]
        failed = t.get("after")
        ready = (f", their pools ready {' and '.join(f'{x:.1f} s' for x in t['ready_s'])} after they were made"
                 if t.get("ready_s") else "")
        done = ""
        if t.get("compiled_at") is not None:
            after = (f" ({t['compiled_at'] - failed['at']:.1f} s after {failed['rank']} ended)"
                     if failed and failed.get("at") is not None else "")
            done = f", and their compiles done again at {seconds_text(t['compiled_at'])}{after}"
        left = before.get("left_alive")
        whose = f"the {_nth(before['attempt'])} attempt's pool processes"
        kept = ("" if left is None else f"; none of {whose} was alive when they started" if left == 0
                else f"; {left} of {whose} were alive when they started")
        which = "The restart" if restarts == 1 else f"The {_nth(t['attempt'] - 1)} restart"
        out.append(f" {which} made {plural(t['pools'], 'pool')} again: the new ranks started at "
                   f"{seconds_text(t['started_at'])}{ready}{done}{kept}.")
    return "".join(out)


# The processes that made the pools, by what their number scales with (facts._scales_with).
MAKERS = {"rank": "ranks", "dataloader-worker": "DataLoader workers", "test": "test processes",
          "child": "child processes"}


def _across_counts(a: dict[str, Any]) -> str:
    """'; at 63.8 s the run had 14 processes: the 3 ranks and their 9 pool processes ran 41 threads and held
    1.4 GiB together (PSS; the ranks 735 MiB of their own)' at that one moment (derive/facts.py): every process
    of the run alive then is a ps line, but only the makers and their pools were read; '' unread."""
    makers = MAKERS.get(a.get("scales_with") or "", "processes that made them")
    own, threads, mine = a.get("creators_pss_bytes"), a.get("pool_threads"), a.get("creators_threads")
    if own is None and threads is None:
        return ""
    least = "" if a.get("pool_threads_all") else "at least "
    run = a.get("run_processes")
    said = f"; at {seconds_text(a.get('counted_at'))} the run had {plural(run, 'process')}" if run else ""
    pools = a.get("pool_processes_alive", a["processes"])
    if threads is not None and own is not None and mine is not None:
        who = makers if makers in MAKERS.values() else "makers"
        said += (f"{':' if said else ';'} the {a.get('creators_alive', a['creators'])} {who} and their {pools} "
                 f"pool processes ran {least}{threads + mine} threads")
        if a.get("at_once_bytes"):
            said += (f" and held {size_text(own + a['at_once_bytes'])} together (PSS; the {who} "
                     f"{size_text(own)} of their own)")
    elif threads is not None:
        said += f"{':' if said else ';'} the pools' {pools} processes ran {least}{threads} threads"
    return said
