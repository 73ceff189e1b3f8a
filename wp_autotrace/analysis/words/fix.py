"""The Answer's "Fix first": the first thing to do, by who can act on it (the worst finding's advice, its
cause's where it is a symptom; the setting before a library's code; in a pytest session, test terms).
"""

from __future__ import annotations

from typing import Any

from . import causes
from .state import STATE_KINDS, ended_by_the_kill

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
    killed = next((f for f in acted if f["kind"] == "root-killed"), None)
    # what the kill ended, no symptom of another cause (the nesting's calls stay the nesting's): told under the
    # kill (answer_bullets), whose fix comes first
    if killed is not None and cause is None and ended_by_the_kill(rep, top):
        return str(killed["advice"]).rstrip(".")
    if nested is not None and (cause is nested or top["kind"] in POOL_COST_KINDS):  # the cause's fix first
        then = str(nested["advice"]).rstrip(".")
        if top["kind"] == "leftovers" and "cleanup" in top["advice"]:
            return f"end what is left with `wp-autotrace cleanup LOG`; then stop the cause: {then}"
        return then
    if cause is not None and cause["advice"]:  # a symptom ranked first: its cause's fix
        then = str(cause["advice"]).rstrip(".")
        # not twice where the cause's own fix ends what is left (a job's program its pool left: leftovers.orphan_advice)
        left = top["kind"] == "leftovers" and "cleanup" in top["advice"] and "cleanup" not in then
        return f"end what is left with `wp-autotrace cleanup LOG`; then stop the cause: {then}" if left else then
    # leftovers of a main killed alone: the kill is the cause (findings/leftovers.py), not the pools the children made
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
