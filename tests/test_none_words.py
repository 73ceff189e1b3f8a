"""No report shows a Python None, or a 0, where a figure or a name is not known: every finding's scenario, whole
and cut (a log read mid-run, a copy cut short), in the text, --verbose and the HTML page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wp_autotrace.analysis.present.html import render_html
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .test_model import SCENARIO_READERS, SCENARIOS, with_killed_main_fork_pool

# 'None was seen to stay', 'None of its workers': English; 'end (None)', 'sidecar None (', '="None"': Python's
PYTHON_NONE = re.compile(r"\bNone\b(?! [a-z])|\bnan\b")


def _logs() -> list[tuple[str, object, object]]:
    out = [(kind, make, SCENARIO_READERS.get(kind)) for kind, make in sorted(SCENARIOS.items())]
    return out + [("killed-main-fork-pool", lambda: with_killed_main_fork_pool(None, True), None)]


@pytest.mark.parametrize(("kind", "make", "reader"), _logs(), ids=[k for k, _, _ in _logs()])
def test_no_report_says_none(kind: str, make: object, reader: object, tmp_path: Path) -> None:
    w = make()  # type: ignore[operator]
    whole = w.write(tmp_path / "log.jsonl")
    lines = whole.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[: len(lines) // 2]))
    for log in (whole, cut):
        rep = analyze(read_logs([str(log)]), None, getattr(w, "waited", None), reader)  # type: ignore[arg-type]
        text = render_text(rep, {})
        for name, out in (("text", text), ("verbose", render_text(rep, {}, verbose=True)),
                          ("html", render_html(rep, text))):
            said = [out[max(m.start() - 60, 0):m.end() + 20] for m in PYTHON_NONE.finditer(out)]
            assert not said, (log.name, name, said[:3])
            # a pool none of whose workers was seen (no watcher, a cut log): no count of 0 (the page's pool label)
            assert "+ 0 workers" not in out, (log.name, name)
