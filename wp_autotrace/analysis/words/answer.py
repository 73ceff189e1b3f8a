"""The Answer: the user's question on the first screen — how many compile processes, why, and the fix they
can apply (a setting before a code change). Built from the report dict (report.analyze), so it reads only
what the report shows.

The findings come ranked (findings/rank.py: by what they cost, the worst first); the Answer leads with the
worst and the Findings section lists them in the same order.

The Answer is a few bullets (``answer_bullets``), each one sentence or two; render.py wraps them (and the
findings) to the width: the terminal's, or fmt.WIDTH (100) when not a terminal.
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import DATALOADER_WORKER, GUARDED_ROLES
from . import autotune, causes
from .fmt import MIB, costs_idle_text, seconds_text, site, size_text
from .sentences import pool_sentence

# Bullets of problems after the lead (the rest are in Findings).
MORE_PROBLEMS = 1
# Kinds told before anything else when they rank first (the run's pools, its exit code).
FIRST_KINDS = ("oom-killed",)
OVERRIDDEN = "setting-overridden"
# Kinds the pools' story tells (_pool_lead), not again as a problem bullet of their own.
POOL_KINDS = ("idle-pool", "nested-pools")
# The problems a kill can follow from: the main stood waiting (a hang, a wait at exit, the nesting's exit wait, a
# pool that never served), which a launcher ends by a SIGKILL after its timeout. A main killed after one is told
# under it, as what followed. Any other problem (memory held idle, device files, a zombie) ends nothing: the kill
# is told first, on its own; and pools left running after it follow from the kill (a killed main never reaches
# torch's atexit shutdown): told under it.
KILL_CAUSES = ("nested-pools", "fork-pool-hang", "pool-job-hang", "exit-hang", "slow-exit-wait", "child-exit-wait",
               "call-never-returned", "forked-compile-hang", "pool-ready-wait", "pool-wait-interrupted",
               "sidecar-never-served")
# What the pools scale with (pools_across.scales_with), in words.
SCALES = {"rank": ("per rank", "it grows with the rank count"),
          DATALOADER_WORKER: ("per DataLoader worker", "it grows with num_workers"),
          "test": ("per test process", "it grows with the test processes (pytest -n)"),
          "child": ("per child process", "it grows with the child processes")}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def _parts(a: dict[str, Any]) -> str:
    """'3 sidecars + 6 workers = 9 compile processes'; fork/spawn pools have no sidecar: their workers alone
    are the pools' processes."""
    parts = (f"{_plural(a['sidecars'], 'sidecar')} + {_plural(a['workers'], 'worker')} = "
             if a["sidecars"] else f"{_plural(a['workers'], 'worker')}, no sidecar: ")
    return f"{parts}{a['processes']} compile processes"


def _mem(a: dict[str, Any]) -> str:
    """', 717 MiB together at once' (memseries' one sum at one moment), or what of it was read."""
    at_once = a.get("at_once_bytes")
    mem = f", {size_text(at_once)} together at once" if at_once else ""
    if at_once and not a.get("at_once_all_read"):
        mem += " (of those read then: the watcher did not read them all at that moment)"
    return mem


def across_sentence(a: dict[str, Any]) -> str:
    """'3 processes each made a compile pool (per rank): 3 sidecars + 6 workers = 9 compile processes, 717
    MiB together at once; it grows with the rank count.'; ranks a launcher restarted: restart_sentence."""
    if a.get("restart"):
        return restart_sentence(a, a["restart"])
    per, grows = SCALES.get(a.get("scales_with") or "", ("", ""))
    # processes of fewer ranks than processes (a rank started twice, its attempts not recorded): not more ranks
    fewer = a.get("scales_with") == "rank" and 0 < (a.get("ranks") or 0) < a["creators"]
    of = f" of {_plural(a['ranks'], 'rank')}" if fewer else ""
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
    lead = (f"{_plural(r['ranks'], 'rank')} each made a compile pool, {_times(len(tries))}" if same else
            f"{_plural(r['ranks'], 'rank')} made {a['pools']} compile pools in {len(tries)} attempts")
    # what the first restart followed: the failure of attempt 0, which may have made no pool
    failed = tries[0]["after"] if tries[0]["attempt"] > 0 else tries[0]["failed"]
    why = f", after {failed['rank']} {failed['words']} at {seconds_text(failed['at'])}" if failed else ""
    lead += f": {r['launcher'] or 'their launcher'} restarted them {_times(r['restarts'])}{why}."
    shapes = {(t["sidecars"], t["workers"], t["processes"]) for t in tries}
    if len(shapes) == 1:
        mems = [size_text(t["at_once_bytes"]) for t in tries[1:] if t.get("at_once_bytes")]
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
        out.append(f" {which} made {_plural(t['pools'], 'pool')} again: the new ranks started at "
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
    said = f"; at {seconds_text(a.get('counted_at'))} the run had {_plural(run, 'process')}" if run else ""
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


def _test_words(pool: dict[str, Any]) -> str:
    """' It was made by test T and outlived the N tests after it.' (pytest sessions), or ''."""
    test = pool.get("test")
    if not test:
        return ""
    n = len(pool.get("tests_outlived") or ())
    used = pool.get("tests_used") or []
    if used:  # named: they are the tests that share the pool's state (its settings, a dead sidecar)
        shown = used[:USED_NAMED]
        names = (", ".join(shown) + f" and {len(used) - len(shown)} more" if len(used) > len(shown)
                 else " and ".join([", ".join(shown[:-1]), shown[-1]]) if len(shown) > 1 else shown[0])
        return (f" It was made by test {test} and used again by {_plural(len(used), 'later test')}: "
                f"{names}" + (f" (it outlived {_plural(n, 'test')} in all)." if n > len(used) else "."))
    return f" It was made by test {test}" + (f" and outlived the {_plural(n, 'test')} after it." if n else ".")


# A benchmark an autotune subprocess never answered (findings/autotune.py): told with its own words.
AUTOTUNE_KILLED = "autotune-killed"
# Later tests that used a pool, named in the Answer (the Pools section names them all with -v).
USED_NAMED = 3


def no_pool_sentence(rep: dict[str, Any]) -> str:
    """Why no pool was made, from what was seen: compile_threads=1, CPU (C++) kernels, no compile at all."""
    why = rep.get("no_pool_why") or {}
    kind = why.get("kind")
    threads = why.get("compile_threads")
    if kind == "threads":
        return f"Compiled without a process pool: compile_threads={threads}, so inductor compiles in the process."
    if kind == "cpu":
        tools = why.get("toolchain") or 0
        built = f" ({tools} compiler processes ran under the compiling process)" if tools else ""
        return ("Compiled without a process pool: the kernels were C++ (CPU), which inductor builds in the "
                f"compiling process{built}; the pool starts with the first Triton kernel (GPU), "
                f"whatever compile_threads says (now compile_threads={threads if threads is not None else '?'}).")
    if kind == "no-compile":
        return ("No compile pool was made, and no compile was recorded (no torch.compile frame ran in a traced "
                "process).")
    if kind == "no-inductor":
        return "No compile pool was made (torch's inductor was not loaded in any traced process)."
    return "Compiled without a process pool: no traced process made a compile pool."


def growth_sentence(rep: dict[str, Any]) -> str:
    """How much each compiling process grew from torch._dynamo's import (where read before its first compile)
    and across its compiles (when no pool explains it)."""
    parts = []
    for e in (rep.get("compiling") or ())[:2]:
        before, after = e.get("before_bytes"), e.get("after_bytes")
        if not isinstance(before, int) or not isinstance(after, int):
            continue
        grew = round((after - before) / MIB)
        across = (f"{grew:+d} MiB across its {_plural(e['compiles'], 'compile')} ({size_text(before)} resident "
                  f"before the first, {size_text(after)} after the last)")
        imported = e.get("import_bytes")
        if not isinstance(imported, int):
            parts.append(f"{e['role']} {e['pid']} grew {across}")
            continue
        # torch.compile's lazy imports come before its first compile: the growth a user sees starts there
        total, lazy = round((after - imported) / MIB), round((before - imported) / MIB)
        parts.append(f"{e['role']} {e['pid']} grew {total:+d} MiB from importing torch._dynamo "
                     f"({size_text(imported)} at {e['import_s']:.1f} s): {lazy:+d} MiB before its first compile "
                     f"(importing dynamo and inductor, and what ran until {e['first_s']:.1f} s), then {across}")
    if not parts:
        return ""
    held = "no pool holds it: the compiling process itself does"
    return "; ".join(parts) + f"; {held}."


def _pool_lead(rep: dict[str, Any]) -> str:
    """The pools' story in one bullet: across processes, or the one pool."""
    pools = rep["pools"]
    a = rep.get("pools_across") or {}
    nested = [p for p in pools if p["creator_role"] in GUARDED_ROLES]
    if nested:
        first = next((p for p in pools if p["creator_role"] not in GUARDED_ROLES), pools[0])
        sites = sorted({site(p["caller"]) for p in nested})
        at = a.get("at_once_bytes")
        mem = f"; {size_text(at)} together at once" if at else ""
        return (f"{first['creator_role']} {first['creator_pid']} made a compile pool at {site(first['caller'])}; "
                f"{len(nested)} of the compile sidecars and workers then made pools of their own, from "
                f"{sites[0]}{' (+more sites)' if len(sites) > 1 else ''}: {len(pools)} pools nested "
                f"{rep['max_sidecar_depth']} deep{mem}.")
    if a.get("creators", 0) > 1:
        idle = rep["costs"].get("idle_mib_s")
        return across_sentence(a) + (f" They held {costs_idle_text(rep['costs'])} idle in all." if idle else "")
    pool = pools[0]
    # one process made its pools one after another (made again after a shutdown): each is told, in order
    again = [p for p in pools[1:] if (p["creator_pid"], p["run"]) == (pool["creator_pid"], pool["run"])]
    told = again[:AGAIN_TOLD]
    more = f" (+{len(pools) - 1 - len(told)} more pools)" if len(pools) > 1 + len(told) else ""
    return (pool_sentence(pool).rstrip(".") + f"{more}." + _test_words(pool)
            + "".join(" " + pool_sentence(p, again=True) for p in told))


# Later pools of the pools' one creator told in the Answer after its first (the Pools section has them all).
AGAIN_TOLD = 2



# The most runs the Answer answers one by one; the others are named, with how to get each one's.
RUNS_ANSWERED = 6
# A run's command line in its Answer header, cut to this many characters.
COMMAND_CHARS = 60


def runs_answer(rep: dict[str, Any], each: list[tuple[list[str], dict[str, Any]]]) -> str:
    """The Answer of a report over runs of several jobs (a glob over the logs of unrelated programs): each
    job's own Answer (its cause, its symptoms, its fix: a report of its runs alone) under a line naming it,
    first a bullet saying so. each: per job, in the report's order, its run ids and its own report."""
    ids = [r["id"] or "?" for r in rep["runs"]]
    out = [f"- These logs hold {len(ids)} runs that are not one launch: each is answered on its own below; the "
           "sections after the Answer take them together (`wp-autotrace report --run ID LOG...` gives one run's "
           "whole report)."]
    for run_ids, sub in each[:RUNS_ANSWERED]:
        command = str((sub["runs"][0]["command"] if sub["runs"] else "") or "?")
        command = command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 3] + "..."
        out.append(f"Run {', '.join(i or '?' for i in run_ids)} ({command}):")
        out.extend(sub["answer"].splitlines())
    rest = [i for run_ids, _ in each[RUNS_ANSWERED:] for i in run_ids]
    if rest:
        out.append(f"- {len(rest)} more run(s) not answered here ({', '.join(i or '?' for i in rest[:4])}"
                   f"{', ...' if len(rest) > 4 else ''}): `wp-autotrace report --run ID LOG...` answers each.")
    return "\n".join(out)


def _exit_words(rep: dict[str, Any]) -> str:
    """'The program exited with code 7.' when the main process's code is not 0 (run's waited status, else
    its process_exit); which run's, when the report holds several."""
    bad = [(r, c) for r in rep["runs"] if isinstance(c := r.get("exit_code"), int) and c > 0]
    if not bad:
        return ""
    run, c = bad[0]
    return (f"The program of run {run['id'] or '?'} exited with code {c}." if len(rep["runs"]) > 1 else
            f"The program exited with code {c}.")


# Findings the run-state sentence tells (_state_words): not again as a problem bullet.
STATE_KINDS = ("root-killed", "in-progress")


def _state_words(rep: dict[str, Any]) -> str:
    """How the run stands when not plainly ended: in progress, or the main process ended without exit."""
    states = {r["state"] for r in rep["runs"]}
    if "in progress" in states:
        return "The run is still in progress: what it leaves behind is not known yet."
    if "killed" in states:
        by = sorted({r["ended_by"] for r in rep["runs"] if r.get("ended_by")})
        lost = any(r.get("records_lost") for r in rep["runs"])
        ends = {p["pid"]: p["ending"]["kind"] for p in rep["processes"]}
        oom = any(r["state"] == "killed" and ends.get(r["root_pid"]) == "oom-kill" for r in rep["runs"])
        # a signal a traced process of the run sent it (its signal_sent record, derive/senders.py): who and where
        sent = next((p["ending"]["words"] for r in rep["runs"] if r["state"] == "killed" for p in rep["processes"]
                     if p["pid"] == r["root_pid"] and p["ending"]["kind"] == "signal" and "sender" in p["ending"]),
                    None)
        return (f"The main process was ended by {', '.join(by)}." if by else
                f"The main process was {sent}." if sent else
                "The main process ended without a process_exit in the log, where records were lost." if lost else
                "The main process was killed by the OOM killer (the cgroup's OOM kill count rose as it ended)."
                if oom else
                "The main process ended without process_exit (killed, or os._exit).")
    return ""


def _main_killed(rep: dict[str, Any]) -> bool:
    """Did a main process end without its process_exit (killed, os._exit), rather than still run?"""
    return any(r["state"] == "killed" for r in rep["runs"])


def answer_bullets(rep: dict[str, Any], order: list[dict[str, Any]]) -> list[str]:
    """The Answer as bullets (unwrapped), worst first: why no pool (and the compiling process's growth) when
    none was made; the program's exit code when not 0; the worst problems by cost, the pools' story told
    where their own problem ranks (else after the problems); then the first thing to do. order: rep's
    findings ranked (findings/rank.py), the worst first."""
    # a process the kernel killed for memory is the user's question whatever else happened: before the pools;
    # so is a setting overridden where no pool was made (why did it compile in one process?): before the no-pool
    # sentence, which says only the value in effect
    first = [f for f in order[:1] if f["kind"] in FIRST_KINDS or (f["kind"] == OVERRIDDEN and not rep["pools"])]
    bullets = [headline(rep, f) for f in first]
    if not rep["pools"]:
        bullets.append(no_pool_sentence(rep))
        grew = growth_sentence(rep)
        if grew:
            bullets.append(grew)
    exit_words = _exit_words(rep)
    if exit_words:
        bullets.append(exit_words)
    state = _state_words(rep)
    problems = [f for f in order if f["severity"] != "info" and not (state and f["kind"] in STATE_KINDS)
                and f not in first]
    units = causes.units(rep, problems)[:1 + MORE_PROBLEMS - len(first)]
    # a main killed (a launcher's SIGKILL after a hang) while the pools had a problem it can follow from: that
    # cause leads, the main's ending is told under it as what followed; the pools' own idle cost is no such cause
    killed = bool(state and rep["pools"] and _main_killed(rep))
    cause_at = next((i for i, (lead, _) in enumerate(units) if lead["kind"] in KILL_CAUSES), None) \
        if killed else None
    under = [state] if cause_at is not None else []
    if any(lead["kind"] == "leftovers" and lead["cost"].get("children_left") for lead, _ in units):
        state, under = "", []  # the leftovers' bullet tells the kill as their cause
    # what the kill left running follows from it: told under it
    left = [u for u in units if u[0]["kind"] == "leftovers"] if killed and state and cause_at is None else []
    if state and not under:
        bullets.append(state + (" What follows from it:" if left else ""))
    for lead, symptoms in left:
        bullets += [SUB + headline(rep, f, under_cause=True) for f in (lead, *symptoms[:SYMPTOMS_TOLD])]
    units = [u for u in units if u not in left]
    told, counted = False, 0
    # a cause leads its symptoms (causes.py), told under it, the pair where the worst of them ranks
    for i, (lead, symptoms) in enumerate(units):
        then = under if i == cause_at else []
        if lead["kind"] in POOL_KINDS and rep["pools"]:
            if not told:
                bullets.append(_pool_lead(rep) + (" What follows from it:" if symptoms or then else ""))
            told = True
        elif lead["kind"] == AUTOTUNE_KILLED and autotune.cause_words(rep):
            # the hung benchmark and torch's kill (the cause), the zombie it left under it (its own figures)
            after = autotune.symptom_words(rep)
            bullets.append(autotune.cause_words(rep) + (" What follows from it:" if after else ""))
            bullets += [SUB + x for x in after]
            symptoms = [g for g in symptoms if g["kind"] != "zombies"]  # told just now, with its own figures
        else:
            bullets.append(headline(rep, lead) + (" What follows from it:" if symptoms[:SYMPTOMS_TOLD] else ""))
        bullets += [SUB + headline(rep, f, under_cause=True) for f in symptoms[:SYMPTOMS_TOLD]]
        bullets += [SUB + s for s in then]
        counted += 1 + min(len(symptoms), SYMPTOMS_TOLD)
    counted += sum(1 + min(len(symptoms), SYMPTOMS_TOLD) for _, symptoms in left)
    if rep["pools"] and not told:
        bullets.append(_pool_lead(rep))
    if len(problems) > counted:
        bullets.append(f"{len(problems) - counted} more under Findings.")
    fix = fix_first(rep, order)
    if fix:
        bullets.append(f"Fix first: {fix}.")
    return [b if b.startswith(SUB) else f"- {b}" for b in bullets]


# A symptom's bullet under its cause's (render.answer_lines indents its continuation lines deeper).
SUB = "  - "
# Symptoms told under their cause in the Answer; the others are under Findings.
SYMPTOMS_TOLD = 3


# Findings about the pools' own cost: the fix is the pool's, and who can act on it depends on who made it.
POOL_COST_KINDS = ("idle-pool", "child-exit-wait", "slow-exit-wait", "leftovers", "pool-device-files")
SHUTDOWN = "torch._inductor.async_compile.shutdown_compile_workers"
FX_SHUTDOWN = "torch._inductor.compile_fx_subproc._SubprocessFxCompile.process_pool().shutdown"


def fix_first(rep: dict[str, Any], order: list[dict[str, Any]]) -> str:
    """The first thing to do, by who can act: the worst finding's advice; but where its cost is the pools'
    and a line of an installed library (not the user's code) made every pool, the setting the user can
    apply comes first and the library is named; in a pytest session, advice in test terms."""
    acted = [f for f in order if f["advice"] and f["severity"] != "info"]
    # the main's ending is told under the pools' problem (answer_bullets): the fix is that problem's
    top = next((f for f in acted if not (rep["pools"] and f["kind"] in STATE_KINDS)), acted[0] if acted else None)
    if top is None:
        return ""
    pools = rep["pools"]
    nested = next((f for f in order if f["kind"] == "nested-pools" and f["advice"]), None)
    cause = causes.root_cause(rep, top, order)
    if nested is not None and (cause is nested or top["kind"] in POOL_COST_KINDS):  # the cause's fix first
        then = str(nested["advice"]).rstrip(".")
        if top["kind"] == "leftovers" and "cleanup" in top["advice"]:
            return f"end what is left with `wp-autotrace cleanup LOG`; then stop the cause: {then}"
        return then
    if cause is not None and cause["advice"]:  # a symptom ranked first: its cause's fix
        then = str(cause["advice"]).rstrip(".")
        left = top["kind"] == "leftovers" and "cleanup" in top["advice"]
        return f"end what is left with `wp-autotrace cleanup LOG`; then stop the cause: {then}" if left else then
    # leftovers of a main killed alone: the kill is the cause (findings/runs.py), not the pools the children made
    if pools and top["kind"] in POOL_COST_KINDS and not top["cost"].get("children_left"):
        theirs = [p["made_in"] for p in pools if p.get("made_in")]
        if len(theirs) == len(pools):
            return _settings_first(rep, theirs[0])
        if any(p.get("test") for p in pools):
            return _test_terms(rep)
    return str(top["advice"]).rstrip(".")


def _threads_now(rep: dict[str, Any]) -> str:
    threads = next((r["inductor"].get("compile_threads") for r in rep["runs"] if r.get("inductor")), None)
    return f" (now compile_threads={threads})" if threads is not None else ""


def _settings_first(rep: dict[str, Any], made: dict[str, Any]) -> str:
    where = f"{made['rel']}:{made['line']}" if made.get("line") is not None else made["rel"]
    dist = f"{made['dist']} {made['version']}".rstrip()
    fx = sum(1 for p in rep["pools"] if p.get("fx_subprocess"))
    if fx == len(rep["pools"]):  # torch makes it whatever compile_threads says; shutdown_compile_workers() leaves it
        return ("unset TORCHINDUCTOR_FX_COMPILE_MODE in the environment that starts the program (the processes it "
                "starts inherit it): each compiles in-process and no FX-subprocess pool is made (compile_threads=1 "
                f"does not stop it). The pool is made inside {dist} ({where}), not your code: calling "
                f"{FX_SHUTDOWN}() after its last compile is a change to that library")
    also = "; the FX-subprocess pool stays even so: unset TORCHINDUCTOR_FX_COMPILE_MODE" if fx else ""
    return (f"set TORCHINDUCTOR_COMPILE_THREADS=1 in the environment that starts the program (the processes it "
            f"starts inherit it): each compiles in-process and no pool is made{_threads_now(rep)}. The pools "
            f"are made inside {dist} ({where}), not your code: calling {SHUTDOWN}() after its last compile is "
            f"a change to that library{also}")


def _test_terms(rep: dict[str, Any]) -> str:
    if any(p.get("tests_used") for p in rep["pools"]):
        # the later tests reach the pool made before them: a shutdown fixture only has the next compile make a
        # new pool (with the settings torch read at import); what stops it is a process per test, or no pool
        return (f"stop the tests sharing the pool: run each compile test in its own process (pytest-forked's "
                f"--forked, or a pytest session of its own), or TORCHINDUCTOR_COMPILE_THREADS=1 for "
                f"the suite (no pool is made){_threads_now(rep)}; a fixture that calls {SHUTDOWN}() does not "
                "stop it: the next compile makes a new pool")
    return (f"shut the pool down when the compile tests end: a fixture (module or session scope) or a teardown "
            f"that calls {SHUTDOWN}(); or run the compile tests in their own process (a separate pytest "
            f"session, or pytest-forked); or TORCHINDUCTOR_COMPILE_THREADS=1 for the suite{_threads_now(rep)}")


def _killed_launcher(rep: dict[str, Any], f: dict[str, Any]) -> str:
    """Leftovers whose cause is their main killed alone (findings/runs.py): the kill first, the children that ran
    on, the pools they made under it with what those held, then what was left in all."""
    c = f["cost"]
    kids, pools = c["children_left"], c.get("pools_left") or 0
    held = f", {size_text(c['pools_left_bytes'])}" if c.get("pools_left_bytes") else ""
    made = (f", with the {_plural(pools, 'compile pool')} they made ({c['pool_procs_left']} processes{held})"
            if pools else "")
    real = rep["costs"].get("leftover_real_bytes")
    about = "at least" if rep["costs"].get("leftover_at_least") else "about"
    mem = f" ({about} {size_text(real)})" if real else ""
    n = rep["leftover_count"]
    were = "process was" if n == 1 else "processes were"
    return (f"The main process {c['main_how']}, which ends that one process: its {kids} child "
            f"{'process' if kids == 1 else 'processes'} ran on{made}; {n} {were} left running after it{mem}.")


# The longest problem bullet told in the Answer: longer findings are cut at a clause (the whole is below); a
# symptom's, under its cause, shorter.
HEADLINE_CHARS = 220
SYMPTOM_CHARS = 140


def headline(rep: dict[str, Any], f: dict[str, Any], under_cause: bool = False) -> str:
    """A problem in a sentence for the Answer: the leftovers with their cause (not again when told under it),
    else the finding's own text, cut at a clause when long (Findings has all of it)."""
    if f["kind"] == "leftovers" and f["cost"].get("children_left"):
        return _killed_launcher(rep, f)
    if f["kind"] == "leftovers":
        real = rep["costs"].get("leftover_real_bytes")
        about = "at least" if rep["costs"].get("leftover_at_least") else "about"  # View.left_sum_at_least
        read = f["cost"].get("left_read_text", "")
        mem = f" ({about} {size_text(real)}{read.replace(' (', ': ', 1)[:-1] if read else ''})" if real else ""
        nested = [e for e in rep["warm_pool_callers"] if e["depth"] > 0]
        cause = (f": compile sidecars that made pools of their own, nested {rep['max_sidecar_depth']} deep"
                 if nested and rep["max_sidecar_depth"] > 1 and not under_cause else "")
        n = rep["leftover_count"]
        were = "process was" if n == 1 else "processes were"
        return f"{n} {were} left running after the main process{mem}{cause}."
    text = str(f["text"])
    limit = SYMPTOM_CHARS if under_cause else HEADLINE_CHARS
    if len(text) <= limit:
        return text
    if f.get("headline") and (not under_cause or len(str(f["headline"])) <= HEADLINE_CHARS):
        # written for the Answer: under its cause too, where it fits a lead's length (a lost job's wait)
        return str(f["headline"])
    out = _cut(text, limit)
    if len(out) < limit // 2:
        # the clause that fit sat inside an aside (a sender's "(os.kill at …)"), and closing it left the subject
        # alone: the text without its asides keeps the clause that answers. Only then: an aside may be a
        # qualifier ("(how, the log does not say)", "(1 of 2 read)") that a longer cut keeps.
        plain = _cut(_without_asides(text), limit)
        out = plain if len(plain) > len(out) else out
    return out


def _cut(text: str, limit: int) -> str:
    """text within limit: cut at the last clause that fits (a whole clause, no "(…)" left: Findings has the
    rest), else at a word."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(mark, 0, limit) for mark in ("; ", ": ", ", e.g. "))
    if cut > limit // 3:
        return _closed(text[:cut]).rstrip(".") + "."
    return _closed(text[:limit].rsplit(" ", 1)[0]) + " …"


def _without_asides(text: str) -> str:
    """text with each outermost " (…)" taken out (nested ones with it); an unclosed one is kept as written."""
    # the parentheses inside an aside count whatever precedes them
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(" and (depth or text[i - 1:i] == " "):  # "worker(s)" is a word, not an aside
            if depth == 0:
                out.append(text[start:i].rstrip(" "))
                start = i
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                start = i + 1
    out.append(text[start:])
    return "".join(out)


def _closed(cut: str) -> str:
    """A cut text with no parenthesis left open: cut again before the last one it opened (a list cut in its
    middle reads as whole, "(1 process_pool, 5 …")."""
    while cut.count("(") > cut.count(")") and " (" in cut:
        cut = cut[:cut.rfind(" (")]
    return cut
