"""bench scripts answer --help with their usage and refuse what they do not take (issue #28, item 16):
bench/import_cost.py --help ended in a traceback (int('--help')); bench/logsafe.py ignored it and ran."""

from __future__ import annotations

import pytest

from .conftest import ROOT, clean_env, run_python

SCRIPTS = ("import_cost.py", "logsafe.py", "start_census.py", "start_inline.py", "start_bound.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_usage_and_runs_nothing(script: str) -> None:
    """--help: exit 0, a usage line and the module's description on stdout, nothing measured."""
    res = run_python([str(ROOT / "bench" / script), "--help"], clean_env(), timeout=120)
    assert (res.returncode, res.stderr) == (0, ""), res.stderr
    assert res.stdout.startswith(f"usage: {script}") and "Traceback" not in res.stdout
    assert " us" not in res.stdout and " ms" not in res.stdout.split("options:")[-1]  # no figure printed


@pytest.mark.parametrize(("script", "args"), [("import_cost.py", ["many"]), ("logsafe.py", ["--bogus"])])
def test_a_wrong_argument_is_a_usage_error(script: str, args: list[str]) -> None:
    """A wrong argument: argparse's exit 2 and one error line, not a traceback and not a run."""
    res = run_python([str(ROOT / "bench" / script), *args], clean_env(), timeout=120)
    assert res.returncode == 2 and "error:" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert res.stdout == ""
