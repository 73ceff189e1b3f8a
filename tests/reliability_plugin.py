"""Pytest plugin that writes docs/reliability.md from the outcomes of a test run.

Only when WP_AUTOTRACE_WRITE_DOCS=1 is set, so ordinary runs never touch the
tree. Register it for the whole session with ``pytest_plugins =
["tests.reliability_plugin"]`` in tests/conftest.py; without that,
tests/test_reliability.py registers it itself when its first test starts, and
the table then holds that module's cases (and any that run after it).

One row per test function (parametrized cases folded into one row); the
"what is checked" column is the first line of the test's docstring, or
DESCRIPTIONS below for tests that have none.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import pytest

NAME = "wp-autotrace-reliability-table"
WRITE_ENV = "WP_AUTOTRACE_WRITE_DOCS"
DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"

# Files whose cases belong in the table, in this order.
FILES = ("test_reliability.py", "test_activation.py", "test_report.py", "test_sink.py", "test_hooks.py",
         "test_torch_e2e.py")

# What the cases without a docstring check (kept short: one table cell each).
DESCRIPTIONS = {
    "test_activation.py::test_off_imports_nothing":
        "WP_AUTOTRACE unset/0/false/off/empty: nothing of wp_autotrace is imported, no file written.",
    "test_activation.py::test_on_writes_start_and_exit_once":
        "Any true spelling of WP_AUTOTRACE: one process_start and one process_exit; log mode 0600.",
    "test_activation.py::test_default_log_path_is_in_cwd":
        "Without WP_AUTOTRACE_LOG the log is created in the working directory.",
    "test_activation.py::test_every_process_writes_to_one_log":
        "subprocess, fork and multiprocessing-spawn children append to the root's log after a chdir.",
    "test_activation.py::test_program_behaviour_unchanged":
        "Exit code, stdout and stderr (incl. a traceback) identical to an untraced run.",
    "test_activation.py::test_bad_log_path_one_line_and_untraced":
        "Log path in a missing/read-only dir, a symlink, directory, FIFO, /dev/full: one stderr line, "
        "program runs untraced and unchanged.",
    "test_activation.py::test_bad_settings_warn_and_use_defaults":
        "Bad WP_AUTOTRACE_* values (incl. code in TARGETS): one warning each, defaults used, nothing evaluated.",
    "test_activation.py::test_extra_targets_traced_and_exceptions_pass_through":
        "A traced function's exception reaches the caller unchanged and is recorded.",
    "test_activation.py::test_exec_into_traced_program_and_no_site":
        "exec keeps one process identity; -S and -I interpreters run unaffected.",
    "test_activation.py::test_argv_recorded_not_environment":
        "argv is recorded, environment values are not.",
    "test_activation.py::test_guard_alone_writes_nothing":
        "The guard without tracing writes no file and prints nothing.",
    "test_activation.py::test_python_version_supported": "The interpreter is one we support.",
    "test_report.py::test_seed_answers": "Report answers the seed scenario's questions from a synthetic log.",
    "test_report.py::test_logs_merge_by_host_and_pid": "Logs of several hosts merge by (host, pid).",
    "test_report.py::test_bad_lines_skipped_and_counted": "Garbage and torn lines are skipped and counted.",
    "test_report.py::test_nothing_usable_is_a_clear_error":
        "Missing, empty or recordless log: one clear error, non-zero exit, no traceback.",
    "test_report.py::test_json_has_stable_keys": "--json output keeps its documented keys.",
    "test_report.py::test_export_chrome": "The Chrome trace export is well-formed.",
    "test_report.py::test_export_loads_in_a_real_trace_reader": "The export loads in a real trace reader.",
    "test_report.py::test_report_never_raises":
        "Property-based: any mix of valid, cut, shuffled and garbage lines never makes the report raise.",
}


def _outcome(report: pytest.TestReport) -> str | None:
    """The outcome one phase report contributes, or None if it adds nothing."""
    if hasattr(report, "wasxfail"):
        if report.skipped:
            return "xfail"
        return "XPASS" if report.when == "call" else None
    if report.when == "call":
        return report.outcome
    if report.failed:
        return "error"
    if report.skipped and report.when == "setup":
        return "skipped"
    return None


class ReliabilityTable:
    """Collects one outcome per test and writes the markdown table at session end."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.reasons: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = _outcome(report)
        if outcome is None:
            return
        if self.outcomes.get(report.nodeid) not in (None, "passed"):
            return  # keep the first bad outcome (a teardown error after a failure, say)
        self.outcomes[report.nodeid] = outcome
        if outcome in ("xfail", "skipped"):
            reason = getattr(report, "wasxfail", "") or _skip_reason(report)
            self.reasons[report.nodeid] = str(reason)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if os.environ.get(WRITE_ENV, "").strip() != "1":
            return
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(self.render(list(session.items)))

    def render(self, items: list[Any]) -> str:
        """The whole document: one table per test file, then the known faults."""
        rows: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in FILES}
        for item in items:
            file = Path(str(item.fspath)).name
            if file not in rows or item.nodeid not in self.outcomes:
                continue
            func = getattr(item, "originalname", None) or item.name.partition("[")[0]
            row = rows[file].setdefault(func, {"doc": _description(file, func, item), "outcomes": [], "bad": []})
            outcome = self.outcomes[item.nodeid]
            row["outcomes"].append(outcome)
            if outcome != "passed":
                param = item.name[len(func):] or ""
                row["bad"].append((param, outcome, self.reasons.get(item.nodeid, "")))
        out = [
            "# Reliability: fault-injection results",
            "",
            "Generated by the test suite (`WP_AUTOTRACE_WRITE_DOCS=1 python -m pytest tests/`, "
            "see tests/reliability_plugin.py); do not edit by hand.",
            f"Last run: Python {platform.python_version()} on {sys.platform}, {_torch_version()}.",
            "",
            "Each case runs real interpreters with tracing on, compares exit code and output with an "
            "untraced run where that applies, and checks the log. `xfail` marks a known product fault "
            "reproduced by the case (see *Known faults*).",
        ]
        faults: list[str] = []
        for file, funcs in rows.items():
            if not funcs:
                continue
            out += ["", f"## tests/{file}", "", "| Case | What is checked | Result |", "|---|---|---|"]
            for func, row in funcs.items():
                result = _summary(row["outcomes"])
                out.append(f"| `{func}` | {_cell(row['doc'])} | {result} |")
                for param, outcome, reason in row["bad"]:
                    if outcome == "xfail":
                        faults.append(f"- `{file}::{func}{param}`: {reason}")
        if faults:
            out += ["", "## Known faults", "", *faults]
        return "\n".join(out) + "\n"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


def _description(file: str, func: str, item: Any) -> str:
    doc = getattr(getattr(item, "function", None), "__doc__", None)
    if doc and doc.strip():
        return doc.strip().splitlines()[0]
    return DESCRIPTIONS.get(f"{file}::{func}", func.removeprefix("test_").replace("_", " ") + ".")


def _summary(outcomes: list[str]) -> str:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    if len(counts) == 1:
        (outcome, n), = counts.items()
        return outcome if n == 1 else f"{outcome} ({n})"
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return "torch " + version("torch")
    except Exception:
        return "no torch"


def register(config: pytest.Config) -> ReliabilityTable:
    """Register the collector once per session; return the registered one."""
    existing = config.pluginmanager.get_plugin(NAME)
    if isinstance(existing, ReliabilityTable):
        return existing
    table = ReliabilityTable()
    config.pluginmanager.register(table, NAME)
    return table


def pytest_configure(config: pytest.Config) -> None:
    """Hook used when this module is listed in pytest_plugins."""
    register(config)
