"""Fault injection, re-entrancy: traced calls inside traced calls, and targets the tracer itself uses.

How every case runs, and docs/reliability.md: tests/reliability_plugin.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .conftest import (
    SYNTH_TARGETS,
    check_lines,
    clean_env,
    events,
    run_python,
    seq_complete,
    traced_env,
)

# -- re-entrancy -------------------------------------------------------------


def test_wrapped_calling_wrapped_and_deep_recursion(tmp_path: Path, synth: Path) -> None:
    """A wrapped function calling another, and one recursing 200 deep: correct results, parent links, all returns."""
    code = "import synthmod; print(synthmod.outer(1), synthmod.rec(200))"
    base = {"PYTHONPATH": str(synth)}
    log = tmp_path / "nest.jsonl"
    plain = run_python(["-c", code], clean_env(**base))
    traced = run_python(["-c", code], traced_env(log, WP_AUTOTRACE_TARGETS=SYNTH_TARGETS, **base))
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.stdout == "4 200\n"
    recs = check_lines(log)
    calls = {c["call_id"]: c for c in events(recs, "call")}
    returns = {r["call_id"] for r in events(recs, "return")}
    assert set(calls) == returns and len(calls) == 2 + 201
    outer = next(c for c in calls.values() if c["target"] == "synthmod:outer")
    inner = next(c for c in calls.values() if c["target"] == "synthmod:inner")
    assert inner["parent_call"] == outer["call_id"] and "parent_call" not in outer
    recs_calls = sorted((c for c in calls.values() if c["target"] == "synthmod:rec"), key=lambda c: c["call_id"])
    assert "parent_call" not in recs_calls[0]
    assert all(b["parent_call"] == a["call_id"] for a, b in zip(recs_calls, recs_calls[1:]))
    assert not events(recs, "tracer_error")


SELF_USE = textwrap.dedent('''
    import asyncio, itertools, json, os, sys, threading, time
    import synthmod
    out = []
    def body():
        out.append(json.loads(json.dumps({"k": [1, 2]}))["k"][1])
        out.append(time.time() > 0 and time.perf_counter() >= 0 and time.monotonic() > 0)
        out.append(os.getpid() > 0 and threading.current_thread().name != "")
        out.append(sys._getframe() is not None)
        out.append(synthmod.work(1))
    t = threading.Thread(target=body)
    t.start(); t.join()
    body()
    pid = os.fork()
    if pid == 0:
        body()
        os._exit(0)
    os.waitpid(pid, 0)
    os.write(1, b"write ok\\n")
    async def f():
        return 5
    print(out, asyncio.run(f()), flush=True)
''')

SELF_TARGETS = [
    "json:dumps", "json:loads", "os:write", "time:time", "time:monotonic", "sys:_getframe",
    # Each of these once broke the tracer or the program (fixed: bound at import, wrapt loaded first).
    "os:getpid", "time:perf_counter", "threading:current_thread",
]


@pytest.mark.parametrize("target", SELF_TARGETS)
def test_target_the_tracer_itself_uses(target: str, tmp_path: Path, synth: Path) -> None:
    """Tracing a function the tracer uses (json.dumps, os.write, ...): no recursion, no hang, same output."""
    script = tmp_path / "selfuse.py"
    script.write_text(SELF_USE)
    base = {"PYTHONPATH": str(synth)}
    log = tmp_path / "self.jsonl"
    plain = run_python([str(script)], clean_env(**base), timeout=30)
    assert plain.returncode == 0, plain.stderr
    traced = run_python([str(script)], traced_env(log, WP_AUTOTRACE_TARGETS=f"{target},synthmod:work", **base),
                        timeout=30)
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    recs = check_lines(log)
    seq_complete(recs)
    assert len(recs) < 2000, "records multiplied: the tracer traced itself"
    assert not events(recs, "tracer_error")
    assert {c["target"] for c in events(recs, "call")} >= {"synthmod:work"}
