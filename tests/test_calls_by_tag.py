"""The calls by tag (Model.tagged, View.tagged, Model.of_tags) are the filter of the calls by tag, in their order:
for every tag and pairs of tags, of the whole model and of a view of one run."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from wp_autotrace.analysis.derive.view import View
from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.read.logread import stream_logs

from .logs import LogWriter

SP = "torch._inductor.compile_worker.subproc_pool:SubprocPool"
AC = "torch._inductor.async_compile:AsyncCompile"


def _log() -> LogWriter:
    """Two runs, each a main and a sidecar whose calls of several tags interleave (a blocked one among them)."""
    w = LogWriter()
    for run, base in (("r1", 100), ("r2", 500)):
        w.add(0, base, 1, "main", "process_start", argv=["train.py"], forked=False, run=run, root_pid=base)
        w.add(0.1, base + 1, base, "compile-sidecar", "process_start", argv=["x"], forked=False, run=run,
              root_pid=base)
        cid = 0
        for i in range(6):
            for pid, target in ((base, f"{AC}.wait_pool_ready"), (base + 1, f"{SP}.wakeup"),
                                (base, f"{AC}.wakeup"), (base + 1, f"{SP}.quiesce")):
                cid += 1
                w.add(1 + i + cid * 0.01, pid, base, "main", "call", target=target, call_id=cid, thread="MainThread")
                if i % 2:
                    w.add(1.005 + i + cid * 0.01, pid, base, "main", "return", call_id=cid, duration_s=0.005)
        w.add(9, base, 1, "main", "blocked", target=f"{SP}.shutdown", call_id=99, thread="MainThread",
              action="refused")
    return w


def test_calls_by_tag_are_the_filter_of_the_calls(tmp_path: Path) -> None:
    model = build(stream_logs([str(_log().write(tmp_path / "tags.jsonl"))]).records)
    tags = sorted({c.tag for c in model.calls})
    assert len(tags) >= 5
    runs = sorted(model.runs.values(), key=lambda r: r.id)
    for view in (View(model, runs, 0.0), View(model, runs[1:], 0.0)):
        for n in (1, 2, 3):
            for chosen in combinations([*tags, "no-such-tag"], n):
                want = [c for c in view.calls if c.tag in chosen]
                assert view.tagged(*chosen) == want, chosen
    assert len(View(model, runs[1:], 0.0).calls) < len(model.calls)
    for chosen in combinations(tags, 2):
        assert model.of_tags(*chosen) == [c for c in model.calls if c.tag in chosen]
