"""The PEP 829 ``wp_autotrace.start`` file (Python 3.15+), simulated on older Pythons.

site in 3.15+ reads ``<name>.start`` files beside the ``.pth`` files; each
non-blank, non-# line is a ``pkg.mod:callable`` entry point, resolved with
``pkgutil.resolve_name`` and called with no arguments, after every ``.pth``
import line has run. A ``<name>.start`` beside ``<name>.pth`` suppresses that
``.pth``'s import lines (3.15-3.17); from 3.18 import lines never run. The
child interpreters below do what site would, on a temporary site dir holding
our two files; on 3.15+ they call the real ``site.addsitedir``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT, clean_env, events, read_log, run_python

PTH = ROOT / "wp_autotrace" / "_bootstrap.pth"
START = ROOT / "wp_autotrace" / "_bootstrap.start"
ENTRY = "wp_autotrace_start:start"
BOOTSTRAP = "wp_autotrace.runtime.bootstrap"

# Mirrors CPython 3.15's site.StartupState: read .pth files (sorted), then .start
# files (sorted); run .pth import lines unless a same-named .start exists
# (mode "pep829") or always (mode "both"); then call every entry point.
SIMULATE = textwrap.dedent('''
    import json, os, pkgutil, re, sys
    sitedir, mode, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    os.environ.update(env)  # on only now: the installed .pth saw it off at startup
    if mode == "real":
        import site
        site.addsitedir(sitedir)
    else:
        def lines(path):
            with open(path, "rb") as f:
                text = f.read().decode("utf-8-sig")
            return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]
        names = sorted(n for n in os.listdir(sitedir) if not n.startswith("."))
        imports = {n[:-4]: [s for s in lines(os.path.join(sitedir, n)) if s.startswith(("import ", "import\\t"))]
                   for n in names if n.endswith(".pth")}
        entries = {n[:-6]: lines(os.path.join(sitedir, n)) for n in names if n.endswith(".start")}
        for stem, found in imports.items():
            if mode == "pep829" and stem in entries:
                continue
            for line in found:
                exec(line)
        for found in entries.values():
            for entry in found:
                assert re.fullmatch(r"[A-Za-z_][\\w.]*:[A-Za-z_][\\w.]*", entry), entry
                pkgutil.resolve_name(entry)()
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("wp_autotrace"))))
''')


def site_dir(tmp_path: Path) -> Path:
    """Our two files as the wheel installs them (force-include names)."""
    d = tmp_path / "site-packages"
    d.mkdir()
    shutil.copy(PTH, d / "wp_autotrace.pth")
    shutil.copy(START, d / "wp_autotrace.start")
    return d


def simulate(tmp_path: Path, mode: str, **env: str) -> tuple[list[str], Any]:
    """Run SIMULATE in a fresh interpreter whose own startup saw tracing off; returns (modules, result)."""
    if mode == "real" and sys.version_info < (3, 15):
        pytest.skip("site reads .start files from Python 3.15")
    res = run_python(["-c", SIMULATE, str(site_dir(tmp_path)), mode, json.dumps(env)], clean_env(),
                     timeout=60, cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return json.loads(res.stdout), res


def test_start_file_format() -> None:
    """The .start file is one PEP 829 entry point line."""
    raw = START.read_bytes()
    lines = [s.strip() for s in raw.decode("utf-8").splitlines()]
    assert [s for s in lines if s and not s.startswith("#")] == [ENTRY]
    import pkgutil

    assert callable(pkgutil.resolve_name(ENTRY))


@pytest.mark.parametrize("mode", ["pep829", "both", "real"])
def test_on_activates_exactly_once(mode: str, tmp_path: Path) -> None:
    """With both .pth and .start read, tracing activates exactly once."""
    log = tmp_path / "run.jsonl"
    modules, _ = simulate(tmp_path, mode, WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                          WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    assert "wp_autotrace.runtime.bootstrap" in modules
    recs = read_log(log)
    assert len(events(recs, "process_start")) == 1 and len(events(recs, "process_exit")) == 1, recs


@pytest.mark.parametrize("mode", ["pep829", "both", "real"])
def test_off_imports_only_the_tiny_entry_module(mode: str, tmp_path: Path) -> None:
    """Off, the .start entry point imports only wp_autotrace_start (a top-level module: not the package)."""
    modules, _ = simulate(tmp_path, mode)
    # site imports the entry point's module to resolve it; nothing heavier may follow.
    assert modules == ["wp_autotrace_start"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site-packages"]


def test_the_entry_point_module_imports_nothing(tmp_path: Path) -> None:
    """From 3.15 site imports wp_autotrace_start in every interpreter, off too: it imports nothing beyond what
    an interpreter has loaded, not the package (its loader: ~0.3M instructions) nor a stdlib file
    (`from __future__ import annotations` was one: ~0.6M)."""
    code = ("import sys; before = set(sys.modules); import wp_autotrace_start; "
            "print(sorted(set(sys.modules) - before - {'wp_autotrace_start'}))")
    res = run_python(["-c", code], clean_env(), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "[]", (res.stdout, res.stderr)


def pth_starts(env: dict[str, str], runs: int = 1) -> int:
    """Run the .pth line `runs` times, as site would, its import handing over to the real _preload.start() in a
    fresh copy of the package (_preload is its second name) whose load_and_start() only counts and whose
    _forget() is a no-op (here it would take
    this process's own modules away; tests/test_activation.py checks it from outside): how many times did it
    call load_and_start()?"""
    import importlib.util

    import wp_autotrace  # noqa: F401  (the copy's body gives the package in sys.modules its second name)

    called: list[bool] = []
    spec = importlib.util.find_spec("wp_autotrace")
    assert spec is not None and spec.loader is not None
    preload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(preload)
    preload.load_and_start = lambda: called.append(True)  # type: ignore[attr-defined]
    preload._forget = lambda: None  # type: ignore[attr-defined]
    package = types.SimpleNamespace(_preload=preload)

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        return package if name == "wp_autotrace._preload" else __import__(name, *args, **kwargs)

    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        for _ in range(runs):
            exec(PTH.read_text(), {"__builtins__": {"__import__": fake_import}})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return len(called)


def pth_says_on(env: dict[str, str]) -> bool:
    """Whether the .pth line, run once, calls start()."""
    return pth_starts(env) > 0


VALUES = [None, "", "0", "1", "TRUE", " yes ", "off", "2", "nested-pools"]


@pytest.mark.parametrize("guard", VALUES)
@pytest.mark.parametrize("trace", VALUES)
def test_entry_point_decides_like_the_pth(trace: str | None, guard: str | None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The .start entry point's on/off test equals the .pth line's for every setting."""
    env = {k: v for k, v in (("WP_AUTOTRACE", trace), ("WP_AUTOTRACE_GUARD", guard)) if v is not None}
    import wp_autotrace_start as _site

    for key in ("WP_AUTOTRACE", "WP_AUTOTRACE_GUARD"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _site.wanted() == pth_says_on(env)


@pytest.mark.parametrize("env", [{"WP_AUTOTRACE": "1"}, {"WP_AUTOTRACE_GUARD": "nested-pools"}, {"WP_AUTOTRACE": "0"}])
def test_the_line_run_twice_starts_at_most_once(env: dict[str, str]) -> None:
    """site reads a venv's site-packages twice (site.venv, then site.main; CPython 3.9-3.13), so the line runs
    twice in every venv start: the second run does not call start() again; off, it stays off."""
    assert pth_starts(env, runs=2) == int(pth_says_on(env))
