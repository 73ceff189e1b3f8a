"""The Answer: the user's question on the first screen — how many compile processes, why, and the fix they
can apply (a setting before a code change). Built from the report dict (report.analyze), so it reads only
what the report shows.

The findings come ranked (findings/rank.py: by what they cost, the worst first); the Answer leads with the
worst and the Findings section lists them in the same order.

The Answer is a few bullets (``answer_bullets``), each one sentence or two; render.py wraps them (and the
findings) to the width: the terminal's, or fmt.WIDTH (100) when not a terminal.

This module orders the bullets and tells the pools' story; each bullet's words have their own module: across.py
(pools made by several processes, a launcher's restarts), headline.py (a finding as one bullet), state.py (the
exit code, a run not plainly ended), fix.py ("Fix first").
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import GUARDED_ROLES
from . import autotune, causes
from .across import across_sentence
from .fix import fix_first
from .fmt import MIB, costs_idle_text, plural, site, size_text
from .headline import headline
from .sentences import pool_sentence
from .state import STATE_KINDS, ended_by_the_kill, exit_code_words, main_killed, state_words

# Bullets of problems after the lead (the rest are in Findings).
MORE_PROBLEMS = 1
# Kinds told before anything else when they rank first (the run's pools, its exit code): each is what ended the
# program, so its exit line (an uncaught BrokenProcessPool, a code) follows it as the symptom.
FIRST_KINDS = ("oom-killed", "spawn-main-reimport")
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
        return (f" It was made by test {test} and used again by {plural(len(used), 'later test')}: "
                f"{names}" + (f" (it outlived {plural(n, 'test')} in all)." if n > len(used) else "."))
    return f" It was made by test {test}" + (f" and outlived the {plural(n, 'test')} after it." if n else ".")


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
    if kind == "refused":
        return _refused_sentence(why)
    if kind == "no-compile":
        return ("No compile pool was made, and no compile was recorded (no torch.compile frame ran in a traced "
                "process).")
    if kind == "untraced":
        return untraced_pools_sentence(rep["untraced_pools"])
    if kind == "no-inductor":
        return "No compile pool was made (torch's inductor was not loaded in any traced process)."
    return "Compiled without a process pool: no traced process made a compile pool."


def _refused_sentence(why: dict[str, Any]) -> str:
    """no_pool_why's "refused": the call that makes the pool returned without one; with a fork or spawn start
    method the daemon rule is the reason torch 2.13 has, and worker_start_method=subprocess is its way out."""
    who, caller = f"{why['label']} {why['pid']}", why.get("caller")
    at = f" at {site(caller)}" if caller else ""
    # what compiled there only where a compile record shows it (a process may only have asked for the pool)
    compiled = why.get("compiles")
    said = (f"{'Compiled without a process pool' if compiled else 'No compile pool was made'}: {who}'s "
            f"AsyncCompile.wait_pool_ready(){at} ({why['at_s']:.1f} s in), the call that makes the pool, returned "
            f"at once without one (compile_threads={why.get('compile_threads')}), so " + (
                "its kernels compiled in that process." if compiled else
                "a compile there would run in that process (no compile was recorded in it)."))
    if not why.get("daemon_rule"):
        return (f"{said} torch declined the pool there (worker_start_method={why.get('start_method')}; Triton's "
                "proton profiling, when on, forces compiles into the process).")
    return (f"{said} With worker_start_method={why['start_method']} torch makes no pool in a daemonic "
            "multiprocessing process (a DataLoader worker, a Process(daemon=True): such a process may not have "
            "children). Set torch._inductor.config.worker_start_method = \"subprocess\" (or "
            "TORCHINDUCTOR_WORKER_START=subprocess, the default): its sidecar is started with Popen, outside that "
            "rule; or make the process non-daemonic.")


# Untraced pools named one by one in the Answer; the rest are counted.
UNTRACED_NAMED = 3


def untraced_pools_sentence(pools: list[dict[str, Any]], also: bool = False) -> str:
    """Pools the watcher saw whose processes wrote no record (rep's untraced_pools): what ran, under which
    process, and why who made it is not known; where the process it ran under wrote none either, what would
    trace it (a traced one that made it without a record has no such fix). also: beside recorded pools."""
    def one(e: dict[str, Any]) -> str:
        workers = len(e["worker_pids"])
        under = (f" under {e['parent_label']} {e['parent_pid']}" + ("" if e["parent_traced"] else " (untraced)")
                 if e["parent_label"] else f" under pid {e['parent_pid']}" if e["parent_pid"] else "")
        return f"sidecar {e['sidecar_pid']} + {plural(workers, 'worker')}{under}"
    shown = "; ".join(one(e) for e in pools[:UNTRACED_NAMED]) + (
        f" (+{len(pools) - UNTRACED_NAMED} more)" if len(pools) > UNTRACED_NAMED else "")
    them = "them" if len(pools) > 1 else "it"
    why = ("no traced process wrote a record of making " + them) if all(e["parent_traced"] for e in pools) else (
        f"the process{'es' if len(pools) > 1 else ''} {'they' if len(pools) > 1 else 'it'} ran under wrote no "
        "record either (as when a launcher gives its child an environment of its own, without WP_AUTOTRACE, or "
        f"that Python has no wp-autotrace installed). To see who made {them}, pass WP_AUTOTRACE=1 (and "
        "WP_AUTOTRACE_LOG) into the environment it starts with and run again")
    lead = "Also" if also else "No traced process made a compile pool, but"
    return (f"{lead} {plural(len(pools), 'compile pool')} ran untraced "
            f"(the watcher saw {them}): {shown}. Who made {them} and from which line is not known: {why}.")


def growth_sentence(rep: dict[str, Any]) -> str:
    """How much each compiling process grew from torch._dynamo's import (where read before its first compile)
    and across its compiles (when no pool explains it)."""
    parts = []
    for e in (rep.get("compiling") or ())[:2]:
        before, after = e.get("before_bytes"), e.get("after_bytes")
        if not isinstance(before, int) or not isinstance(after, int):
            continue
        grew = round((after - before) / MIB)
        across = (f"{grew:+d} MiB across its {plural(e['compiles'], 'compile')} ({size_text(before)} resident "
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
    more = f" (+{plural(len(pools) - 1 - len(told), 'more pool')})" if len(pools) > 1 + len(told) else ""
    return (pool_sentence(pool).rstrip(".") + f"{more}." + _test_words(pool)
            + "".join(" " + pool_sentence(p, again=True) for p in told))


# Later pools of the pools' one creator told in the Answer after its first (the Pools section has them all).
AGAIN_TOLD = 2



# The most runs the Answer answers one by one; the others are named, with how to get each one's.
RUNS_ANSWERED = 6
# A run's command line in its Answer header, cut to this many characters.
COMMAND_CHARS = 60


def runs_answer(rep: dict[str, Any], each: list[tuple[list[str], dict[str, Any], bool]]) -> str:
    """The Answer of a report over runs of several jobs (a glob over the logs of unrelated programs): each
    job's own Answer (its cause, its symptoms, its fix: a report of its runs alone) under a line naming it,
    first a bullet saying so. each: per job, the worst first (findings/rank.py report_key), its run ids,
    its own report (the first RUNS_ANSWERED only) and whether it had a problem; the rest are named, those with a
    problem first, and counted."""
    ids = [r["id"] or "?" for r in rep["runs"]]
    out = [f"- These logs hold {len(ids)} runs that are not one launch: each is answered on its own below; the "
           "sections after the Answer take them together (`wp-autotrace report --run ID LOG...` gives one run's "
           "whole report)."]
    for run_ids, sub, _ in each[:RUNS_ANSWERED]:
        command = str((sub["runs"][0]["command"] if sub["runs"] else "") or "?")
        command = command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 3] + "..."
        out.append(f"Run {', '.join(i or '?' for i in run_ids)} ({command}):")
        out.extend(sub["answer"].splitlines())
    rest = [i for run_ids, _, _ in each[RUNS_ANSWERED:] for i in run_ids]
    troubled = sum(len(run_ids) for run_ids, _, bad in each[RUNS_ANSWERED:] if bad)
    if rest:
        out.append(f"- {len(rest)} more run(s) not answered here, {troubled} of them with a problem "
                   f"({', '.join(i or '?' for i in rest[:4])}{', ...' if len(rest) > 4 else ''}): "
                   "`wp-autotrace report --run ID LOG...` answers each.")
    return "\n".join(out)



def answer_bullets(rep: dict[str, Any], order: list[dict[str, Any]]) -> list[str]:
    """The Answer as bullets (unwrapped), worst first: why no pool (and the compiling process's growth) when
    none was made; the worst problems by cost, the pools' story told where their own problem ranks (else after
    the problems); how the program ended when not plainly (its exit code, an uncaught exception); then the first
    thing to do. order: rep's
    findings ranked (findings/rank.py), the worst first."""
    # a process the kernel killed for memory is the user's question whatever else happened: before the pools;
    # so is a setting overridden where no pool was made (why did it compile in one process?): before the no-pool
    # sentence, which says only the value in effect
    first = [f for f in order[:1] if f["kind"] in FIRST_KINDS or (f["kind"] == OVERRIDDEN and not rep["pools"])]
    bullets, below = _first_bullets(rep, first, order)
    if not rep["pools"]:
        bullets.append(no_pool_sentence(rep))
        grew = growth_sentence(rep)
        if grew:
            bullets.append(grew)
    state = state_words(rep)
    problems = [f for f in order if f["severity"] != "info" and not (state and f["kind"] in STATE_KINDS)
                and f not in first and f not in below]
    units = causes.units(rep, problems)[:1 + MORE_PROBLEMS - len(first)]
    # a main killed (a launcher's SIGKILL after a hang) while the pools had a problem it can follow from: that
    # cause leads, the main's ending is told under it as what followed; the pools' own idle cost is no such cause
    killed = bool(state and rep["pools"] and main_killed(rep))
    # what the kill itself ended (a call open in the main, a pool whose sidecar the same signal ended) is no cause
    # of it: a time limit's group SIGTERM mid-compile is told first, those under it
    by_kill = [u for u in units if ended_by_the_kill(rep, u[0])] if killed else []
    cause_at = next((i for i, (lead, _) in enumerate(units) if lead["kind"] in KILL_CAUSES and (lead, _) not in
                     by_kill), None) if killed else None
    under = [state] if cause_at is not None else []
    if any(lead["kind"] == "leftovers" and lead["cost"].get("children_left") for lead, _ in units):
        state, under = "", []  # the leftovers' bullet tells the kill as their cause
    # what the kill left running follows from it: told under it
    left = [u for u in units if u[0]["kind"] == "leftovers" or u in by_kill] if killed and state and cause_at is None \
        else []
    if state and not under:
        bullets.append(state + (" What follows from it:" if left else ""))
    for lead, symptoms in left:
        bullets += [SUB + headline(rep, f, under_cause=True) for f in (lead, *symptoms[:SYMPTOMS_TOLD])]
    units = [u for u in units if u not in left]
    told, counted = False, 0
    # a cause leads its symptoms (causes.py), told under it, the pair where the worst of them ranks
    for i, (lead, symptoms) in enumerate(units):
        then = under if i == cause_at else []
        # an exit that waited for a sidecar still starting is told under that pool: the pool's start was the wait
        starting = bool((lead.get("cost") or {}).get("waited_for_start")) and not told
        if (lead["kind"] in POOL_KINDS or starting) and rep["pools"]:
            if not told:
                bullets.append(_pool_lead(rep) + (" What follows from it:" if symptoms or then or starting else ""))
            bullets += [SUB + headline(rep, lead, under_cause=True)] if starting else []
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
    if rep["pools"] and rep.get("untraced_pools"):  # beside the recorded pools: told, never left out
        bullets.append(untraced_pools_sentence(rep["untraced_pools"], also=True))
    # how the program ended (its exit code, or the exception no `run` waited for) is what the user saw: told after
    # the causes, never above them (a Ctrl-C that interrupted torch's exit wait is that wait's symptom, under it)
    exit_words = exit_code_words(rep)
    if exit_words:
        bullets.append(exit_words)
    if len(problems) > counted:
        bullets.append(f"{len(problems) - counted} more under Findings.")
    fix = fix_first(rep, order)
    if fix:
        bullets.append(f"Fix first: {fix}.")
    return [b if b.startswith(SUB) else f"- {b}" for b in bullets]


def _first_bullets(rep: dict[str, Any], first: list[dict[str, Any]],
                   order: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The bullets of the findings told before everything (FIRST_KINDS), each with what follows from it
    (causes.py) under it, and those symptoms, told here and nowhere else in the Answer: a spawned child's
    re-imported main leads the warm_pool its unguarded top level called there."""
    bullets: list[str] = []
    below: list[dict[str, Any]] = []
    rest = [f for f in order if f["severity"] != "info" and f not in first]
    for f in first:
        symptoms = [g for g in rest if causes.root_cause(rep, g, [f, *rest]) is f][:SYMPTOMS_TOLD]
        bullets.append(headline(rep, f) + (" What follows from it:" if symptoms else ""))
        bullets += [SUB + headline(rep, g, under_cause=True) for g in symptoms]
        below += symptoms
    return bullets, below


# A symptom's bullet under its cause's (render.answer_lines indents its continuation lines deeper).
SUB = "  - "
# Symptoms told under their cause in the Answer; the others are under Findings.
SYMPTOMS_TOLD = 3
