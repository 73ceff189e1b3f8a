"""End to end: the bundled stand-in backend traced, then the report's text read as a user would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.logread import read_logs
from wp_autotrace.render import render_text
from wp_autotrace.report import analyze

from .conftest import STANDIN, clean_env, needs_torch
from .procs import run_until_records
from .test_capture import SEED_E2E_TIMEOUT

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

# Seconds the main process gets after SIGINT to run its exit handlers (and write its exit records).
GRACE_S = 4


def test_seed_report_names_the_error_and_the_backend(tmp_path: Path) -> None:
    """The report of the seed scenario says what the nested sidecar raised and whose code warmed the pools."""
    log = tmp_path / "seed.jsonl"
    script = tmp_path / "train.py"
    script.write_text("import time, torch\ntime.sleep(600)\n")
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), PYTHONPATH=str(STANDIN),
                    TORCHINDUCTOR_COMPILE_THREADS="2")

    def ready(recs: list[dict[str, Any]]) -> bool:
        return any(r["event"] == "error" and r["role"] == "compile-sidecar" for r in recs)

    reached, stderr = run_until_records([sys.executable, str(script)], env, log, ready, SEED_E2E_TIMEOUT,
                                        grace=GRACE_S)
    assert reached, stderr
    data = read_logs([str(log)])
    rep = analyze(data)
    text = render_text(rep, data.skipped)
    findings = text.split("== Findings\n")[1].split("\n\n")[0]
    assert "RuntimeError: prefetchable_cache value already set" in findings, text
    assert "wp-standin-backend 0.1.0: wp_standin_backend/_inductor/__init__.py:3 (<module>)" in findings, text
    assert "sidecar-never-served" in {f["kind"] for f in rep["findings"]}
    assert len(text.splitlines()) <= 70, text
