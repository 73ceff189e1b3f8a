"""Trace-time facts for the report: swallowed errors in pool processes, callers by distribution.

Error capture (catch.py) runs in pool-serving roles only; the differential
tests start an interpreter as a traced descendant with a pool role and
compare it with the same program untraced. dists.py is tested in-process on
a fake site-packages folder.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.runtime import dists

from .conftest import STANDIN, clean_env, events, needs_torch, read_log, run_python, wait_for_watcher
from .procs import run_until

FAILING = textwrap.dedent('''
    import logging, sys, threading
    log = logging.getLogger("__main__")
    def inner():
        raise RuntimeError("prefetchable_cache value already set")
    try:
        inner()
    except Exception:
        log.exception("Uncaught exception in compile_worker subprocess")
    logging.getLogger("torch._inductor.compile_worker.subproc_pool").warning("only a warning")
    log.error("bad format %d", "x")  # logging reports its own formatting error; so must the run
    def boom():
        raise ValueError("in a thread")
    t = threading.Thread(target=boom, name="side")
    t.start(); t.join()
    print("out", flush=True)
    raise KeyError("uncaught")
''')


def descendant_env(log: Path, role: str, **extra: str) -> dict[str, str]:
    """The environment of a traced process that is not the root, started with a pool role.

    Only a root creates the log: made here as the root would (mode 0600).
    """
    if not log.exists():
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    return clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="r" * 12,
                     WP_AUTOTRACE_ROOT_PID="1", WP_AUTOTRACE_CHILD_ROLE=role,
                     WP_AUTOTRACE_SAMPLE_INTERVAL="0", **extra)


def test_errors_recorded_in_a_pool_role_output_unchanged(tmp_path: Path, log: Path) -> None:
    """compile-worker role: logged exception, thread exception and uncaught exception become
    error records; stdout, stderr and exit code are those of the untraced run."""
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    plain = run_python([str(script)], clean_env())
    traced = run_python([str(script)], descendant_env(log, "compile-worker"))
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 1 and "Uncaught exception in compile_worker" in plain.stderr
    assert "only a warning" in plain.stderr  # logging's last resort still prints: we add no handler
    recs = read_log(log)
    (start,) = events(recs, "process_start")
    assert start["role"] == "compile-worker"
    errors = events(recs, "error")
    assert [e["source"] for e in errors] == ["logging", "logging", "threading.excepthook", "excepthook"]
    logged, badly, threaded, uncaught = errors
    assert badly["message"] == "bad format %d" and badly["exc_type"] is None
    assert logged["logger"] == "__main__" and logged["level"] == "ERROR"
    assert (logged["exc_type"], logged["message"]) == ("RuntimeError", "prefetchable_cache value already set")
    assert logged["log_message"] == "Uncaught exception in compile_worker subprocess"
    assert logged["origin"] == {"file": str(script), "line": 5, "func": "inner"}
    assert logged["frames"][-1] == logged["origin"] and logged["frames"][0]["func"] == "<module>"
    assert (threaded["exc_type"], threaded["message"], threaded["logger"]) == ("ValueError", "in a thread", None)
    assert threaded["origin"]["func"] == "boom"
    assert (uncaught["exc_type"], uncaught["message"]) == ("KeyError", "'uncaught'")


def test_no_capture_outside_pool_roles(tmp_path: Path, log: Path) -> None:
    """A plain child: no error records, and logging is not imported on its behalf."""
    script = tmp_path / "failing.py"
    script.write_text("import sys\nprint('logging' in sys.modules, sys.excepthook is sys.__excepthook__)\n"
                      + FAILING)
    res = run_python([str(script)], descendant_env(log, ""))
    assert res.stdout.startswith("False True\n"), res.stderr
    recs = read_log(log)
    assert events(recs, "process_start")[0]["role"] == "child"
    assert not events(recs, "error")


def test_error_records_are_bounded(tmp_path: Path, log: Path) -> None:
    """A pool process failing every job writes at most MAX_ERRORS error records."""
    from wp_autotrace.runtime.catch import MAX_ERRORS

    script = tmp_path / "many.py"
    script.write_text("import logging\nfor i in range(500):\n"
                      "    logging.getLogger('__main__').error('job %d failed', i)\n")
    res = run_python([str(script)], descendant_env(log, "compile-sidecar"))
    assert res.returncode == 0
    errors = events(read_log(log), "error")
    assert len(errors) == MAX_ERRORS
    assert errors[0]["message"] == "job 0 failed" and errors[0]["exc_type"] is None
    assert errors[0]["origin"] == {"file": str(script), "line": 3, "func": "<module>"}


# -- dists ------------------------------------------------------------------


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake site-packages folder on sys.path, with fresh dists caches."""
    root = tmp_path / "site-packages"
    root.mkdir()

    def dist(folder: str, name: str, version: str, **files: str) -> None:
        info = root / folder
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        for fname, text in files.items():
            (info / fname.replace("_txt", ".txt").replace("_json", ".json")).write_text(text)

    for rel in ("torch_npu/_inductor/__init__.py", "yaml/loader.py", "six.py", "loose/x.py", "azure/core/a.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    dist("torch_npu-2.13.0.dist-info", "torch_npu", "2.13.0")
    dist("PyYAML-6.0.1.dist-info", "PyYAML", "6.0.1", top_level_txt="_yaml\nyaml\n")
    dist("six-1.16.0.dist-info", "six", "1.16.0", RECORD="six.py,sha256=x,1\nsix-1.16.0.dist-info/METADATA,,\n")
    dist("azure_core-1.30.dist-info", "azure-core", "1.30", RECORD="azure/core/a.py,,\n")
    # an editable install: its metadata here, its code in a checkout elsewhere
    checkout = tmp_path / "checkout dir"
    (checkout / "src" / "plug").mkdir(parents=True)
    (checkout / "src" / "plug" / "__init__.py").write_text("")
    url = "file://" + str(checkout).replace(" ", "%20")
    dist("plug-0.3.dev0.dist-info", "plug", "0.3.dev0",
         direct_url_json=f'{{"url": "{url}", "dir_info": {{"editable": true}}}}')
    dist("other-1.0.dist-info", "other", "1.0", direct_url_json='{"url": "file:///srv/wheels/other.whl"}')
    monkeypatch.syspath_prepend(str(root))
    for cache in (dists._by_file, dists._listings, dists._by_top, dists._scanned):
        monkeypatch.setattr(dists, cache_name(cache), {})
    monkeypatch.setattr(dists, "_editable_dirs", None)
    return root


def cache_name(cache: Any) -> str:
    return next(k for k, v in vars(dists).items() if v is cache)


def frame(path: Any, line: int = 3) -> dict[str, Any]:
    return {"file": str(path), "line": line, "func": "<module>"}


def test_dists_named_like_the_package(site: Path) -> None:
    caller = frame(site / "torch_npu/_inductor/__init__.py", 18)
    assert dists.attribute(caller) == {**caller, "dist": "torch_npu", "dist_version": "2.13.0",
                                       "rel": "torch_npu/_inductor/__init__.py"}
    assert "dist" not in caller  # a new dict: the stack's own frame is left as it was


def test_dists_found_by_top_level_or_record(site: Path) -> None:
    assert dists.attribute(frame(site / "yaml/loader.py"))["dist"] == "PyYAML"  # top_level.txt
    assert dists.attribute(frame(site / "six.py"))["dist_version"] == "1.16.0"  # RECORD, a single module
    assert dists.attribute(frame(site / "azure/core/a.py"))["dist"] == "azure-core"  # namespace package


def test_dists_editable_install(site: Path, tmp_path: Path) -> None:
    """An editable install is attributed by its direct_url.json; rel is below the checkout."""
    caller = frame(tmp_path / "checkout dir" / "src" / "plug" / "__init__.py")
    assert dists.attribute(caller) == {**caller, "dist": "plug", "dist_version": "0.3.dev0",
                                       "rel": "src/plug/__init__.py"}
    names = {found[0] for _, found in dists._editable()}
    assert "plug" in names and "other" not in names  # a direct URL that is not editable is no checkout
    # The checkout's scripts and examples are not the installed package.
    for path in ("examples/train.py", "src/other/x.py", "setup.py"):
        assert "dist" not in dists.attribute(frame(tmp_path / "checkout dir" / path))


def test_dists_unknown_files_keep_their_path(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for path in (site / "loose/x.py", tmp_path / "elsewhere.py", "relative/nowhere.py"):
        assert dists.attribute(frame(path)) == frame(path)
    assert dists.attribute(None) is None
    assert dists.attribute({"file": None, "line": 1, "func": "f"}) == {"file": None, "line": 1, "func": "f"}


def test_dists_cached_per_file_and_package(site: Path) -> None:
    dists.attribute(frame(site / "torch_npu/_inductor/__init__.py"))
    (site / "torch_npu-2.13.0.dist-info" / "METADATA").write_text("Name: changed\nVersion: 9\n")
    # a second file of the same package: no new metadata read
    assert dists.attribute(frame(site / "torch_npu/x.py"))["dist_version"] == "2.13.0"


def test_dists_src_of_command_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-W", "ignore", "-c", "\nimport torch; torch.x()\nmore"],
                        raising=False)
    monkeypatch.setattr(dists, "_by_file", {})
    assert dists.attribute(frame("<string>", 1))["src"] == "import torch; torch.x()"
    assert "src" not in dists.attribute(frame("<stdin>", 1))
    monkeypatch.setattr(sys, "orig_argv", ["python3", "script.py"], raising=False)
    monkeypatch.setattr(dists, "_by_file", {})
    assert dists.attribute(frame("<string>", 1)) == frame("<string>", 1)  # exec() in a script: unknown


def test_dists_on_the_oldest_python(tmp_path: Path) -> None:
    """3.9's importlib.metadata has what dists.py uses (no backport needed)."""
    pythons = sorted(Path.home().glob(".pyenv/versions/3.9.*/bin/python3.9"))
    if not pythons:
        pytest.skip("no Python 3.9 here")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from wp_autotrace.runtime import dists; "
            "print(dists.attribute({'file': sys.argv[2], 'line': 1, 'func': 'f'}))")
    root = Path(__file__).resolve().parent.parent
    info = tmp_path / "pkg_x-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: pkg-x\nVersion: 1.0\n")
    res = run_python(["-c", code, str(tmp_path), str(tmp_path / "pkg_x" / "m.py")],
                     clean_env(PYTHONPATH=str(root)), python=str(pythons[-1]))
    assert res.returncode == 0, res.stderr
    assert "'dist': 'pkg-x', 'dist_version': '1.0', 'rel': 'pkg_x/m.py'" in res.stdout


# -- end to end ---------------------------------------------------------------

# s; a bound, not a sleep (run_until returns once the first nested sidecar has died): ~10 s in on an idle
# machine, 70 s in on a 2-core box at load 20-70, where the main's own torch import took 41 s (the same bound
# as test_torch_e2e's nested chain)
SEED_E2E_TIMEOUT = 150
# Seconds the main process gets after SIGINT before it is killed: a bound, not a sleep (run_until waits for its
# exit). Its exit handlers never end here: torch's atexit shutdown waits (up to 300 s) on its sidecar, whose own
# shutdown waits on the sidecar below, and each link's import starts one more; so the main is killed, alone first
# (root_first), which the watcher sees, and the Answer tells that killed main, its open calls and the chain under
# the nesting.
SEED_GRACE_S = 30


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
def test_seed_scenario_error_and_dist(tmp_path: Path, log: Path) -> None:
    """Seed scenario: a nested sidecar's main() dies with the prefetchable_cache RuntimeError, recorded with its
    origin; the backend's warm_pool call names its distribution and version; the report text says both."""
    script = tmp_path / "train.py"
    script.write_text("import time, torch\ntime.sleep(600)\n")
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), PYTHONPATH=str(STANDIN),
                    TORCHINDUCTOR_COMPILE_THREADS="2")

    def ready(recs: list[dict[str, Any]]) -> bool:
        return any(r["event"] == "error" and r["role"] == "compile-sidecar" for r in recs)

    res, reached = run_until([sys.executable, str(script)], env, log, ready, SEED_E2E_TIMEOUT, interrupts=1,
                             interrupt_wait=SEED_GRACE_S, root_first=True)
    assert reached, res.stderr[-3000:]
    # the watcher outlives the kill: it writes the chain's ends and its exit after run_until returns, and a report
    # read before them told the main's end unseen, or the chain left running under other pids
    wait_for_watcher(log, timeout=60)
    recs = read_log(log)
    error = next(e for e in events(recs, "error") if e["role"] == "compile-sidecar")
    assert (error["source"], error["logger"]) == ("logging", "__main__")
    assert (error["exc_type"], error["message"]) == ("RuntimeError", "prefetchable_cache value already set")
    assert error["origin"]["file"].endswith("torch/utils/_functools.py")
    assert error["frames"][0]["func"] == "main"
    warm = [c for c in events(recs, "call") if c["target"].endswith("AsyncCompile.warm_pool")]
    assert warm
    for c in warm:
        assert (c["caller"]["dist"], c["caller"]["dist_version"]) == ("wp-standin-backend", "0.1.0")
        assert c["caller"]["rel"] == "wp_standin_backend/_inductor/__init__.py"
        assert c["caller"]["file"] == str(STANDIN / "wp_standin_backend" / "_inductor" / "__init__.py")
    # The report, read as a user would: what the nested sidecar raised, and whose code warmed the pools.
    data = read_logs([str(log)])
    rep = analyze(data)
    text = render_text(rep, data.skipped)
    findings = text.split("== Findings\n")[1].split("\n\n")[0]
    assert "RuntimeError: prefetchable_cache value already set" in findings, text
    assert "wp-standin-backend 0.1.0: wp_standin_backend/_inductor/__init__.py:3 (<module>)" in findings, text
    assert "sidecar-never-served" in {f["kind"] for f in rep["findings"]}
    assert len(text.splitlines()) <= 76, text  # the Answer is a few bullets now (issue 31): up to 6 lines
    # the cause first, its symptoms under it: the nesting leads; the sidecar that died as it started (its import
    # started a pool) and what that death left (calls never returned, the main's end) are told under it, never as
    # a second lead; "Fix first" is the nesting's; no "(…)" nor an empty exception's "(KeyboardInterrupt: )"
    lines = [x for x in rep["answer"].splitlines() if not x.startswith("- The program exited with code")]
    assert "made pools of their own" in lines[0] and lines[0].endswith("What follows from it:"), lines
    leads = [x for x in lines if x.startswith("- ") and not x.startswith("- Fix first")]
    assert not any("never served" in x for x in leads), lines
    assert any("never served" in x for x in lines if x.startswith("  - ")), lines
    fix = next(x for x in lines if x.startswith("- Fix first: "))
    assert "keep it out of the sidecars" in fix, fix
    assert "(…)" not in text and "KeyboardInterrupt: )" not in text, text


# -- ranks --------------------------------------------------------------------


def test_rank_variables_in_process_start(tmp_path: Path, log: Path) -> None:
    """process_start carries the launcher's rank variables that are set, and no rank field without them."""
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0",
                    RANK="3", LOCAL_RANK="1", WORLD_SIZE="8", SLURM_PROCID="3", MASTER_PORT="29500")
    for name in ("GROUP_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    assert run_python(["-c", "pass"], env).returncode == 0
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID"):
        env.pop(name)
    assert run_python(["-c", "pass"], env).returncode == 0
    first, second = events(read_log(log), "process_start")
    assert first["rank"] == {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "3",
                             "MASTER_PORT": "29500"}  # a launch identity beside a rank
    assert "rank" not in second
