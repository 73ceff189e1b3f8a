"""docs/report.md lists every finding kind the code can say, and its generated parts are current
(tools/report_doc.py writes them: the kinds table always, the samples from real runs with --samples); README's
sample Answer is the first sample's."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from wp_autotrace.analysis.findings.kinds import KINDS, kinds_table

from .conftest import ROOT

DOC = ROOT / "docs" / "report.md"
README = ROOT / "README.md"
WIDTH = 100
# What makes a Finding: the class, and findings/endings.py's helper that passes its arguments on.
FINDING_MAKERS = ("Finding", "_finding")


def emitted_kinds() -> set[str]:
    """The kinds a finding function can return: the first argument of every Finding(...) (or _finding(...))
    in the package."""
    found = set()
    for path in (ROOT / "wp_autotrace").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in FINDING_MAKERS and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found.add(node.args[0].value)
    return found


def test_every_finding_kind_is_listed() -> None:
    """A new finding kind must be added to analysis/findings/kinds.py (and so to docs/report.md)."""
    assert emitted_kinds() == set(KINDS)
    text = DOC.read_text()
    assert kinds_table() in text, "docs/report.md's kinds table is stale: run python tools/report_doc.py"
    assert all(f"`{kind}`" in text for kind in KINDS)


def test_the_generator_leaves_the_page_as_it_is(tmp_path: Path) -> None:
    """tools/report_doc.py (without --samples) reproduces the committed pages: nothing hand-edited in their
    generated parts (docs/report.md's kinds table, README's sample Answer)."""
    before = {page: page.read_text() for page in (DOC, README)}
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "report_doc.py")], capture_output=True, text=True,
                         timeout=120)
    after = {page: page.read_text() for page in before}
    for page, text in before.items():
        page.write_text(text)
    assert res.returncode == 0, res.stderr
    assert after == before


def test_readme_answer_is_the_first_samples() -> None:
    """README's sample Answer is, line for line, the Answer of docs/report.md's first sample (a real run's):
    words the report no longer prints cannot stay in README."""
    readme = README.read_text()
    block = readme.split("<!-- answer-sample:", 1)[1].split("<!-- /answer-sample -->", 1)[0].split("\n", 1)[1]
    sample = DOC.read_text().split("<!-- samples:start", 1)[1].split("```\n", 2)[1].split("\n== Run\n", 1)[0]
    assert block == "```\n" + sample + "```\n"


def test_samples_are_real_reports_that_fit_100_columns() -> None:
    """The samples were pasted from `wp-autotrace report` into a pipe: an Answer of bullets, and every line of
    the Answer and Findings within 100 columns."""
    text = DOC.read_text()
    samples = text.split("<!-- samples:start", 1)[1].split("<!-- samples:end -->", 1)[0]
    reports = [block.split("```", 1)[0] for block in samples.split("```\n")[1::2]]
    assert len(reports) >= 2
    for report in reports:
        lines = report.splitlines()
        assert lines[0] == "== Answer" and lines[1].startswith("- ")
        section = report.split("== Run")[0] + report.split("== Findings", 1)[1].split("\n\n", 1)[0]
        assert all(len(line) <= WIDTH for line in section.splitlines()), section
