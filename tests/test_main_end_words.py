"""How a run's main process ended, told once: the Run line, the Answer and the Findings read one fact
(findings/mainend.py), and none of them says more than a record shows."""

from __future__ import annotations

from pathlib import Path

from .logs import report
from .test_answer_text import _group_termed_unread_main


def test_findings_tell_a_main_ended_with_its_group_as_the_run_line_does(tmp_path: Path) -> None:
    """A main reaped unread as SIGTERM ended the rest of its process group: the root-killed finding says what the
    Run line and the Answer say (the group's signal, and that its own status was not read), never 'killed, or
    os._exit', and its cause is the sender of that signal, not os._exit in the code."""
    rep = report(_group_termed_unread_main(), tmp_path)
    (run,) = rep["runs"]
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert run["root_ending"] and run["root_ending"].startswith("ended as SIGTERM"), run
    assert "The main process 100 ended as SIGTERM ended the rest of its process group at 6.0 s (2 process(es), " \
           "their wait statuses; its own status was not read)" in killed["text"], killed
    assert "os._exit" not in killed["text"] and "os._exit" not in killed["advice"], killed
    assert "find what sent SIGTERM to its process group" in killed["advice"], killed

