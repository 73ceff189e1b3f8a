"""Both exports stream (issue 28 item 7): what they hold is the run model and one chunk of output, never the
whole document (which, as dicts and then one string, was about ten times the log's size).

Memory is measured with tracemalloc (Python's own allocations: deterministic, unlike RSS on a loaded
machine) while `export` runs in this process, and compared with the log's size with a generous factor;
the output must still be one valid JSON document with every span or event. bench/export_memory.py
measures peak RSS of the real command on a 200 MiB log.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from wp_autotrace.analysis.export import jsonout
from wp_autotrace.analysis.export.chrome import write_chrome_trace
from wp_autotrace.analysis.export.otlp import write_otlp
from wp_autotrace.analysis.read.logread import stream_logs
from wp_autotrace.cli.main import main

from .logs import AC, PLUGIN, SP, T0

PROCESSES = 50
CALLS_PER_PROCESS = 150  # 15,000 records, about 4 MB
# Python objects held, over the log's size. Made whole, the OTLP document held about 8 times the log
# (its dicts, then its text), the Chrome one 4 times (the log's records, then the events); streamed,
# both hold the model, about half the log.
HELD_OVER_LOG = 1.5


def big_log(path: Path) -> tuple[Path, int]:
    """A run: a main, PROCESSES workers, each with CALLS_PER_PROCESS call/return pairs. Also how many
    spans its OTLP export holds."""
    lines = []
    seq: dict[int, int] = {}

    def add(t: float, pid: int, ppid: int, role: str, event: str, **fields: object) -> None:
        seq[pid] = seq.get(pid, -1) + 1
        lines.append(json.dumps({"v": 1, "event": event, "ts": T0 + t, "pid": pid, "ppid": ppid, "host": "h1",
                                 "role": role, "seq": seq[pid], **fields}))

    run = {"run": "big", "root_pid": 10}
    add(0, 10, 1, "main", "process_start", argv=["python", "train.py"], forked=False, **run)
    add(0.1, 10, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", tag="pool-create", call_id=1,
        thread="MainThread", stack=[PLUGIN], caller=PLUGIN)
    for w in range(PROCESSES):
        add(0.2 + w * 1e-3, 100 + w, 10, "compile-worker", "process_start", argv=["python"], forked=True, **run)
    for i in range(CALLS_PER_PROCESS):
        for w in range(PROCESSES):
            t = 1 + (i * PROCESSES + w) * 1e-2  # 100 records a second: the reorder window holds few
            add(t, 100 + w, 10, "compile-worker", "call", target=f"{AC}:AsyncCompile.wait_pool_ready",
                tag="wait-pool-ready", call_id=i, thread=f"worker-{w}", stack=[PLUGIN], caller=PLUGIN)
            add(t + 1e-3, 100 + w, 10, "compile-worker", "return", call_id=i, duration_s=1e-3)
    path.write_text("\n".join(lines) + "\n")
    return path, 1 + PROCESSES + 1 + PROCESSES * CALLS_PER_PROCESS


def _peak(argv: list[str]) -> int:
    """The most memory the command holds while it runs; the code it imports is not what it holds (the same
    command run once before, on a small log, imports it: a test run alone measured the report stack's modules)."""
    small = Path(argv[1]).with_name("small.jsonl")
    small.write_text("\n".join(Path(argv[1]).read_text().splitlines()[:50]) + "\n")
    warm = [a if a != argv[1] else str(small) for a in argv]
    warm[warm.index("-o") + 1] += ".warm"
    assert main(warm) == 0
    tracemalloc.start()
    try:
        assert main(argv) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["otlp", "chrome"])
def test_export_holds_less_than_the_log(tmp_path: Path, fmt: str) -> None:
    log, spans = big_log(tmp_path / "big.jsonl")
    out = tmp_path / "out.json"
    peak = _peak(["export", str(log), "--format", fmt, "-o", str(out)])
    size = log.stat().st_size
    assert peak < HELD_OVER_LOG * size, f"{fmt}: held {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB log"
    doc = json.loads(out.read_text())  # one valid document
    if fmt == "otlp":
        assert sum(len(rs["scopeSpans"][0]["spans"]) for rs in doc["resourceSpans"]) == spans
    else:
        assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X") == PROCESSES * CALLS_PER_PROCESS + 1


@pytest.mark.parametrize("write", [write_otlp, write_chrome_trace])
def test_output_goes_out_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: object) -> None:
    """The writer is handed the document in pieces of about CHUNK_CHARS as it is made, never in one."""
    monkeypatch.setattr(jsonout, "CHUNK_CHARS", 4096)
    log, _ = big_log(tmp_path / "big.jsonl")
    pieces: list[int] = []
    text: list[str] = []

    def out(piece: str) -> None:
        pieces.append(len(piece))
        text.append(piece)

    write(stream_logs([str(log)]), out)  # type: ignore[operator]
    total = sum(pieces)
    assert len(pieces) >= total // (2 * 4096) and max(pieces) < 4096 + 2**16, (len(pieces), max(pieces))
    json.loads("".join(text))
