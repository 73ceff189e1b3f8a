"""Regenerate docs/report.md's generated parts: the table of finding kinds (analysis/findings/kinds.py) and, with
--samples, the sample reports, from real traced runs on this machine (torch 2.13 CPU); and README's sample Answer,
which is the first sample's Answer (one home: the sample a real run printed, so README cannot keep words the report
no longer says).

    python tools/report_doc.py             # the kinds table and README's Answer (fast; tests/test_report_doc.py
                                           # checks both)
    python tools/report_doc.py --samples   # also run the samples (about 2 minutes) and paste their reports

The samples: one job that keeps its compile pool idle (as a GPU host's first Triton kernel makes it:
AsyncCompile.wait_pool_ready() on CPU), and the bundled example (examples/run_example.py, 45 s): a backend
that warms a pool at import, so sidecars nest under sidecars. Each report is `wp-autotrace report LOG`
into a pipe (100 columns), paths shortened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "report.md"
README = ROOT / "README.md"
KINDS = ("<!-- kinds:start (tools/report_doc.py) -->\n", "<!-- kinds:end -->")
SAMPLES = ("<!-- samples:start (tools/report_doc.py --samples) -->\n", "<!-- samples:end -->")
README_ANSWER = ("<!-- answer-sample: docs/report.md's first sample's Answer, written by tools/report_doc.py; do not "
                 "edit -->\n", "<!-- /answer-sample -->")
TIMEOUT_S = 600

IDLE_JOB = textwrap.dedent('''
    import time
    import torch
    import torch._inductor.config as cfg
    from torch._inductor.async_compile import AsyncCompile

    cfg.quiesce_async_compile_pool = False
    AsyncCompile.wait_pool_ready()  # the first Triton kernel on a GPU host
    time.sleep(8)  # the job goes on without compiling
''')


def replace_between(text: str, marks: tuple[str, str], body: str) -> str:
    start = text.index(marks[0]) + len(marks[0])
    end = text.index(marks[1], start)
    return text[:start] + body + text[end:]


def readme_answer(doc: str) -> str:
    """README's sample: the Answer of docs/report.md's first sample (up to its Run section)."""
    samples = doc.split(SAMPLES[0], 1)[1].split(SAMPLES[1], 1)[0]
    first = samples.split("```\n", 2)[1]
    return "```\n" + first.split("\n== Run\n", 1)[0] + "```\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WP_AUTOTRACE", "TORCHINDUCTOR_"))}
    env.update(extra)
    return env


def _report(log: Path, tmp: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", str(log)], env=_env(),
                         capture_output=True, text=True, timeout=TIMEOUT_S).stdout
    site = str(Path(sys.executable).resolve().parent.parent)
    return out.replace(str(tmp), "…").replace(str(ROOT), ".").replace(site, ".venv")


def idle_sample(tmp: Path) -> str:
    script, log = tmp / "train_idle.py", tmp / "idle.jsonl"
    script.write_text(IDLE_JOB)
    subprocess.run([sys.executable, str(script)], cwd=tmp, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
                   capture_output=True, env=_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log),
                                                 TORCHINDUCTOR_COMPILE_THREADS="4"), check=True)
    _wait_watcher(log)
    return _report(log, tmp)


def example_sample(tmp: Path) -> str:
    subprocess.run([sys.executable, str(ROOT / "examples" / "run_example.py"), "45"], cwd=tmp, env=_env(),
                   capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, check=True)
    return _report(tmp / "wp_autotrace-example.jsonl", tmp)


def _wait_watcher(log: Path) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and b'"watcher_exit"' not in log.read_bytes():
        time.sleep(0.2)


def samples_text() -> str:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        idle = idle_sample(tmp)
        example = example_sample(tmp)
    return ("A job that keeps its compile pool idle (`TORCHINDUCTOR_COMPILE_THREADS=4`, one compile, then 8 s "
            "of other work):\n\n```\n" + idle + "```\n\nThe bundled example (`python examples/run_example.py "
            "45`): a backend that warms a pool at import, so sidecars nest under sidecars:\n\n```\n" + example
            + "```\n")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from wp_autotrace.analysis.findings.kinds import kinds_table

    text = replace_between(DOC.read_text(), KINDS, kinds_table())
    if "--samples" in sys.argv:
        text = replace_between(text, SAMPLES, samples_text())
    DOC.write_text(text)
    README.write_text(replace_between(README.read_text(), README_ANSWER, readme_answer(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
