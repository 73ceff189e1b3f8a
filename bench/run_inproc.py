"""bench/run.py's in-process and watcher groups: call overhead, log sink, sampler, report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import venvs  # noqa: E402
from run_common import Report, _host_procs, clean_env, med, quartiles, rotated, run_worker, spread  # noqa: E402

CALL_TARGET_US = 8  # issue 32: a traced call (call + return records, shallow stack) at most 8 µs over untraced
DEEP_TARGET_US = 20  # the same under 60 library frames


def bench_micro(made: dict[str, Path], repeats: int, calls: int, rep: Report) -> None:
    """Traced (call+return, stack) and counted call cost over an untraced call."""
    res = run_worker(made["pkg"], "micro", repeats, calls)
    deep, shallow = res["deep"], res["shallow"]
    floor = shallow["floor_us"]
    lo, hi = shallow["traced_over_p25_p75_us"]
    parts = res.get("parts_us") or {}
    steps = "; ".join(f"{k} {v:.2f} µs" for k, v in parts.items())
    rep.issue_row("call", f"+{shallow['traced_over_us']:.1f} µs (p25–p75 {lo:.1f}–{hi:.1f})",
                  shallow["traced_over_us"] <= CALL_TARGET_US,
                  f"the traced call's steps, each timed alone in the same run (sum {sum(parts.values()):.1f} µs): "
                  f"{steps or 'not measured'}; a naive writer (two ~10-field records json.dumps'd and os.write'n "
                  f"each call, no stack walk, no wrapper) costs {floor:.1f} µs")
    rep.row(f"the same, caller under {res['depth']} library frames (as under torch.compile)",
            f"+{deep['traced_over_us']:.1f} µs (floor here {floor:.1f} µs)", f"≤ {DEEP_TARGET_US} µs",
            deep["traced_over_us"] <= DEEP_TARGET_US,
            f"the shallow call's +{shallow['traced_over_us']:.1f} µs (above) plus "
            f"{deep['traced_over_us'] - shallow['traced_over_us']:.1f} µs for the walk through {res['depth']} library "
            "frames to the caller, this run")
    counted = max(shallow["counted_over_us"], deep["counted_over_us"])
    rep.row("counted high-frequency call (COUNT, no stack), over untraced", f"+{counted:.2f} µs", "≤ 5 µs",
            counted <= 5)
    lines = [f"In-process: TargetFinder + Probes + Sink (stack limit {res['stack_limit']}, the default) "
             f"on a synthetic classmethod; {repeats} alternating repeats of {calls} traced / "
             f"{calls * 20} other calls; median µs per call. *deep*: the caller sits under {res['depth']} "
             "library frames, which the caller search walks (as under torch.compile); *shallow*: directly "
             f"under the benchmark. Mean record size {res['record_bytes']} B. *floor*: in the same run, the "
             "work no tracer writing JSON lines avoids: two ~10-field records (one with an 8-frame stack) "
             "built, json.dumps'd and os.write'n, no stack walk, no wrapper. "
             f"Tracer errors: {res['errors'] or 'none'}.",
             "", "| stack | untraced µs | traced µs | counted µs |", "|---|---|---|---|"]
    lines += [f"| {d} | {res[d]['plain_us']} | {res[d]['traced_us']} | {res[d]['counted_us']} |"
              for d in ("shallow", "deep")]
    if parts:
        lines += ["", "Where a shallow traced call's microseconds go (each step timed alone, same run, median µs "
                  "per traced call):", "", "| step | µs |", "|---|---|"]
        lines += [f"| {step} | {us} |" for step, us in parts.items()]
    rep.detail("Call overhead", lines)


# The floor of many processes appending JSON lines to one O_APPEND fd, as the sink issue measured it on the
# 2-core bench machine (quoted by commit 93f8ae5, 2026-11-30); this harness does not measure it again.
SINK_FLOOR_LINES_S = 120_000


def bench_sink(made: dict[str, Path], writers: int, records: int, rep: Report) -> None:
    """Many writer processes appending through Sink: throughput, torn and lost records."""
    res = run_worker(made["pkg"], "sink", writers, records, timeout=1200)
    ok = res["records_per_s"] >= 100_000 and res["torn"] == 0 and res["lost"] == 0 and res["bad_exit"] == 0
    rep.row(f"{writers} writer processes × {records:,} records through Sink",
            f"{res['records_per_s']:,} records/s, {res['torn']} torn, {res['lost']} lost",
            "≥ 100k records/s, 0 torn, 0 lost", ok,
            f"json-encoded lines through one O_APPEND fd run at about {SINK_FLOOR_LINES_S:,} lines/s on 2 cores")
    rep.detail("Log sink", [f"{writers} forked processes start together and each emit {records:,} `call` records "
                            f"(1 in 100 with a 64-frame stack, ~7 KB); {res['mb']} MB in {res['elapsed_s']} s. "
                            "Then every line must parse as JSON and every (pid, seq) be present exactly once. "
                            f"Writers with a non-zero exit (a dropped record): {res['bad_exit']}."])


class HostLoad:
    """`sleep` processes outside the traced tree (children of this driver), to bring the host to
    ~N processes; killed and reaped here on exit, so no zombie is left to init."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> HostLoad:
        dn = subprocess.DEVNULL
        try:
            for _ in range(self.total - _host_procs()):  # the worker and its 40 descendants come on top
                self.procs.append(subprocess.Popen(["sleep", "900"], stdin=dn, stdout=dn, stderr=dn))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def bench_sampler(made: dict[str, Path], levels: list[int], duration: float, repeats: int, rep: Report) -> None:
    """Watcher process CPU at the default interval, and its sample vs psutil's walk as the host grows."""
    results = []
    for level in levels:
        with HostLoad(level):
            results.append(run_worker(made["pkg"], "sampler", duration, repeats, timeout=600))
    busiest = [r for r in results if r["host_procs"] >= 1000] or results[-1:]
    worst = max(r["thread_cpu_pct"] for r in busiest)
    rep.row(f"watcher process at 0.1 s, ~{busiest[0]['descendants']} descendants, host ≥ 1,000 processes",
            f"{worst:.2f}% of one core", "≤ 0.5% of one core", worst <= 0.5,
            f"one `Watcher.tree.sample()` of the {busiest[0]['descendants']} descendants costs "
            f"{busiest[0]['proc_walk_ms']} ms in this run: at 10 samples/s, {busiest[0]['proc_walk_ms']:.2f}% of a "
            f"core of the watcher process's {worst:.2f}% (which also lists /proc every 2 s, growing with the host)")
    lines = [f"The watcher (ProcReader) with {results[0]['descendants']} descendants (8 shells × 4 `sleep`), "
             "the host filled with `sleep` processes outside the traced tree. Walk cost: median of "
             f"{repeats} alternating calls of `Watcher.tree.sample()` and `psutil.Process().children(recursive=True)`; "
             f"CPU: the real watcher process for {duration:g} s, from /proc/PID/stat (utime + stime).",
             "", "| host processes | Watcher.tree.sample (children files) ms | psutil children(recursive) ms | "
             "watcher process CPU % of one core | samples |", "|---|---|---|---|---|"]
    lines += [f"| {r['host_procs']} | {r['proc_walk_ms']} | {r['psutil_ms']} | {r['thread_cpu_pct']} | "
              f"{r['thread_samples']} in {r['thread_s']} s |" for r in results]
    rep.detail("Process-tree sampler", lines)


FULL_RECORDS = 1_000_000  # issue 32's log size; --quick uses fewer


def bench_report(made: dict[str, Path], records: int, rounds: int, rep: Report) -> None:
    """report --json against a bare json.loads pass of the same lines, side by side (bench/report_big.py),
    msgspec installed (the fast path) and the json path as a second row; the floor is the same run's C
    decoder alone and the fold's stages."""
    import report_big

    res = report_big.measure(str(venvs.python_of(made["pkg"])), records, rounds)
    rows = res["rows"]
    bare, fast, slow = rows["bare json.loads of each line"], rows["report --json (fast path)"], \
        rows["report --json (json path)"]
    fixed = rows[report_big.FIXED]
    scale = "" if res["records"] == FULL_RECORDS else f"; {res['records']:,} records in this run"
    mid, lo, hi = quartiles([c / b for c, b in zip(fast["cpu_s_each"], bare["cpu_s_each"])])
    fl = report_big.floor(res)
    rep.issue_row("report_cpu", f"{mid:.2f}× (p25–p75 {lo:.2f}–{hi:.2f}{scale})", mid <= report_big.TARGET_CPU,
                  f"in the same run, a C decoder alone (bare msgspec decode of each line) is {fl['decoder']:.2f}× "
                  f"the bare json.loads pass; the reader's time-order stream {fl['stream']:.2f}×; the run model's "
                  f"fold adds {fl['fold_adds']:.2f}× (Python run once per record); the rest (the report, start-up) "
                  f"{fl['rest']:.2f}×, of which a {report_big.SMALL_RECORDS:,}-record log's whole report (fixed) is "
                  f"{fl['fixed']:.2f}× (Details: Report against a bare parse)")
    rep.issue_row("report_mem", f"{fast['peak_over_log']:.2f}× ({fast['peak_rss_mib']} MiB for a "
                  f"{res['log_bytes'] / 2**20:.0f} MiB log{scale})", fast["peak_over_log"] <= report_big.TARGET_RSS,
                  f"in the same run, a bare json.loads pass of the same lines peaks at {bare['peak_over_log']:.2f}× "
                  f"({bare['peak_rss_mib']} MiB); the report of a {report_big.SMALL_RECORDS:,}-record log at "
                  f"{fixed['peak_over_log']:.2f}× ({fixed['peak_rss_mib']} MiB: interpreter and modules, a fixed "
                  "cost whatever the log's size)")
    smid, slo, shi = quartiles([c / b for c, b in zip(slow["cpu_s_each"], bare["cpu_s_each"])])
    rep.row("the same, json path (msgspec not installed): CPU / peak memory over the log's size",
            f"{smid:.2f}× (p25–p75 {slo:.2f}–{shi:.2f}) / {slow['peak_over_log']:.2f}×", "report it", None)
    section = report_big.markdown(res)
    rep.detail("Report against a bare parse", section.split("\n", 4)[4].rsplit(report_big.END, 1)[0].splitlines())


WATCHER_TARGET_PCT = 1.0  # issue 32: the watcher of 1,000 idle run processes at most 1% of one core
WATCHER_PROCS = 1000


def bench_watcher(made: dict[str, Path], duration: float, rounds: int, tmp: Path, rep: Report) -> None:
    """The real watcher's CPU with 1,000 idle run processes, alternating round by round with the same watcher
    of no run process (its fixed cost per tick, the floor), by bench/watcher_cost.py's driver."""
    import watcher_cost

    py = str(venvs.python_of(made["pkg"]))
    got: dict[int, list[dict[str, float]]] = {WATCHER_PROCS: [], 0: []}
    for r in range(rounds):
        for n in rotated(list(got), r):
            out = subprocess.run([py, "-c", watcher_cost.DRIVER, str(n), str(duration), str(tmp / f"w{n}-{r}.jsonl")],
                                 env=clean_env(), cwd=tmp, capture_output=True, text=True, timeout=duration + 300,
                                 stdin=subprocess.DEVNULL)
            if out.returncode:
                raise RuntimeError(f"watcher_cost driver failed ({out.returncode}):\n{out.stderr[-2000:]}")
            got[n].append(json.loads(out.stdout.strip().splitlines()[-1]))
    mid, lo, hi = quartiles([s["cpu_pct"] for s in got[WATCHER_PROCS]])
    idle = med([s["cpu_pct"] for s in got[0]])
    rep.issue_row("watcher", f"{mid:.2f}% of a core (p25–p75 {lo:.2f}–{hi:.2f})", mid <= WATCHER_TARGET_PCT,
                  f"the same watcher with no run process costs {idle:.2f}% of a core in this run (its fixed "
                  f"cost: 10 ticks a second); the {WATCHER_PROCS:,} idle processes add {mid - idle:.2f}%, "
                  f"{(mid - idle) * 10 / WATCHER_PROCS * 1e3:.1f} µs of CPU per process per second")
    lines = [f"bench/watcher_cost.py's driver in the pkg venv: N `sleep` children of a root that starts the real "
             f"watcher (interval 0.1 s), its utime+stime from /proc over {duration:g} s after its first samples; "
             f"{rounds} alternating round(s) of N = {WATCHER_PROCS:,} and N = 0; median (p25–p75).", "",
             "| run processes | watcher CPU % of one core | log KB per minute | host processes |", "|---|---|---|---|"]
    lines += [f"| {n:,} | {spread([s['cpu_pct'] for s in v])} | {med([s['log_kb_per_min'] for s in v]):.1f} | "
              f"{v[0]['host_procs']} |" for n, v in got.items()]
    rep.detail("Watcher of idle run processes", lines)
