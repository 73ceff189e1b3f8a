"""bench/run.py's table (issue 32): the issue's six figures come first, in the issue's order, whatever order the
groups ran in; a figure whose group did not run says so; a missed target is followed by the floor its group
measured, and a met one by nothing. Run in a child: the bench modules go on sys.path by their short names."""

from __future__ import annotations

import json

from .conftest import ROOT, clean_env, run_python

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from run_common import ISSUE32, Report
from run_output import summary
rep = Report()
rep.row("an older figure", "3 ms", "<= 5 ms", True)
rep.issue_row("call", "+9.0 us", False, "FLOOR-CALL 7.5 us")   # measured before the report's rows
rep.issue_row("report_cpu", "0.9x", True, "FLOOR-REPORT")
print(json.dumps({"figures": [f for f, _, _ in ISSUE32.values()], "lines": summary(rep)}))
"""


def test_issue_rows_first_in_order_and_only_misses_explained() -> None:
    res = run_python(["-c", CHILD, str(ROOT / "bench")], clean_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.splitlines()[-1])  # the rows are also printed as they are measured
    rows = [line for line in out["lines"] if line.startswith("| ") and not line.startswith("| figure")]
    figures = [row.split(" | ")[0][2:] for row in rows]
    assert figures == [*out["figures"], "an older figure"]
    assert len(out["figures"]) == 6 and out["figures"][0].startswith("`report --json`, 1M records")
    by = dict(zip(figures, rows))
    assert "0.9x" in by[out["figures"][0]] and "| yes |" in by[out["figures"][0]]
    assert "not measured (group `watcher` not run)" in by["watcher, 1,000 idle run processes"]
    assert "+9.0 us" in by["traced call, shallow stack"] and "**NO**" in by["traced call, shallow stack"]
    text = "\n".join(out["lines"])
    assert "- **traced call, shallow stack**: FLOOR-CALL 7.5 us." in text
    assert "FLOOR-REPORT" not in text  # a met target needs no floor
