"""bench/run.py's process groups: start-up and resident memory of `python -c pass`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import venvs  # noqa: E402
from run_common import Report, clean_env, med, quartiles, rotated, run_worker, spawn_timed, spread  # noqa: E402


def startup_variants(made: dict[str, Path], tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (argv, env) for `python -c pass` in each configuration."""
    bare, pkg = str(venvs.python_of(made["bare"])), str(venvs.python_of(made["pkg"]))
    log = str(tmp / "startup.jsonl")
    # A descendant only opens the log its root created (0600, this user's): make it, as a root would.
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    on = {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": log}
    return {
        "not installed": ([bare, "-c", "pass"], clean_env()),
        "installed, unset": ([pkg, "-c", "pass"], clean_env()),
        "enabled, non-root": ([pkg, "-c", "pass"],
                              clean_env(**on, WP_AUTOTRACE_RUN="x", WP_AUTOTRACE_ROOT_PID="1")),
        "enabled, root": ([pkg, "-c", "pass"], clean_env(**on)),
    }


STARTUP_TARGET_MS = 1.5  # issue 32: a traced (enabled, non-root) child starts at most 1.5 ms slower than unset
ROOT_MS = 60  # the root also starts the watcher (docs/guarantees.md)
QUICK_ROUNDS_BELOW = 100  # fewer rounds than this: a --quick run, fewer -X importtime runs too


def _nonroot_row(made: dict[str, Path], variants: dict[str, tuple[list[str], dict[str, str]]],
                 wall: dict[str, list[float]], cpu: dict[str, list[float]], runs: int, rep: Report) -> None:
    """Issue 32's start-up figure: enabled non-root minus unset, round by round; its floor is the self time
    of the modules the enabled path imports (`-X importtime`, bench/startup_cost.py's reading), same run."""
    import startup_cost

    diffs = [(a - b) * 1e3 for a, b in zip(wall["enabled, non-root"], wall["installed, unset"])]
    cdiff = (med(cpu["enabled, non-root"]) - med(cpu["installed, unset"])) * 1e3
    mid, lo, hi = quartiles(diffs)
    py = str(venvs.python_of(made["pkg"]))
    on = startup_cost.importtime(py, variants["enabled, non-root"][1], runs)
    off = startup_cost.importtime(py, variants["installed, unset"][1], runs)
    added = sorted(((us, m) for m, us in on.items() if m not in off), reverse=True)
    total = sum(us for us, _ in added) / 1e3
    top = ", ".join(f"{m} {us / 1e3:.2f}" for us, m in added[:5])
    rep.issue_row("startup", f"+{mid:.2f} ms (p25–p75 {lo:.2f}–{hi:.2f}; CPU +{cdiff:.2f} ms)",
                  mid <= STARTUP_TARGET_MS,
                  f"`-X importtime` self time of the {len(added)} modules the enabled path imports (median of {runs} "
                  f"runs, this run): {total:.2f} ms ({top} ms, the largest); the wall difference less that: "
                  f"{mid - total:.2f} ms (the activation's code outside module bodies, exit, and this run's noise)")


def bench_startup(made: dict[str, Path], rounds: int, tmp: Path, rep: Report) -> None:
    """`python -c pass`: not installed / installed-unset / enabled non-root / enabled root."""
    variants = startup_variants(made, tmp)
    for name, (argv, env) in variants.items():  # each must run clean before it is timed
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if out.returncode or out.stderr:
            raise RuntimeError(f"start-up variant {name!r} is not clean: {out.returncode} {out.stderr[-2000:]}")
    wall: dict[str, list[float]] = {n: [] for n in variants}
    cpu: dict[str, list[float]] = {n: [] for n in variants}
    names = list(variants)
    for r in range(rounds + 5):
        for name in rotated(names, r):
            w, c, status = spawn_timed(*variants[name])
            if status:
                raise RuntimeError(f"start-up variant {name!r} exited {status}")
            if r >= 5:  # the first rounds warm the page cache
                wall[name].append(w)
                cpu[name].append(c)
    base, unset = med(wall["not installed"]), med(wall["installed, unset"])
    pth = run_worker(made["pkg"], "pth", 2000)
    ratio = unset / base
    rep.row("start-up, installed but WP_AUTOTRACE unset / not installed", f"{ratio:.3f}×", "≤ 1.01", ratio <= 1.01,
            f"the .pth line alone costs {pth['wp_autotrace.pth']:.0f} µs in `site` (this run, tracer off), "
            f"{pth['wp_autotrace.pth'] / (base * 1e6) * 100:.2f}% of a start-up; the two variants' wall p25–p75: "
            f"{spread(wall['not installed'], 1e3)} and {spread(wall['installed, unset'], 1e3)} ms")
    _nonroot_row(made, variants, wall, cpu, 5 if rounds < QUICK_ROUNDS_BELOW else 15, rep)
    extra = (med(wall["enabled, root"]) - unset) * 1e3
    rep.row("start-up, enabled, root (never imports torch), over unset", f"+{extra:.1f} ms", f"≤ +{ROOT_MS} ms",
            extra <= ROOT_MS)
    lines = [f"`python -c pass`, {rounds} alternating rounds (after 5 warm-up rounds); median (p25–p75).", "",
             "| variant | wall ms | CPU ms (user+sys) |", "|---|---|---|"]
    lines += [f"| {n} | {spread(wall[n], 1e3)} | {spread(cpu[n], 1e3)} |" for n in names]
    lines += ["", "What site itself spends on each .pth line with the tracer off (`site.addpackage`, median of 2000, "
              "in the pkg venv): " + ", ".join(f"`{k}` {v:.0f} µs" for k, v in pth.items())
              + f" — {pth['wp_autotrace.pth'] / (base * 1e6) * 100:.2f}% of a not-installed start-up."]
    rep.detail("Start-up", lines)


RSS_CODE = ("import time; time.sleep(0.3); "
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])")


def bench_rss(made: dict[str, Path], rounds: int, tmp: Path, rep: Report) -> None:
    """VmRSS 0.3 s into a process that never imports torch: unset vs enabled (non-root, root)."""
    variants = {k: v for k, v in startup_variants(made, tmp).items() if k != "not installed"}
    kb: dict[str, list[float]] = {n: [] for n in variants}
    for r in range(rounds):
        for name in rotated(list(variants), r):
            argv, env = variants[name]
            out = subprocess.run([*argv[:-2], "-c", RSS_CODE], env=env, capture_output=True, text=True, timeout=60)
            kb[name].append(float(out.stdout.split()[-1]))
    unset = med(kb["installed, unset"])
    for name in ("enabled, non-root", "enabled, root"):
        extra = (med(kb[name]) - unset) / 1024
        rep.row(f"RSS added, {name} process that never imports torch", f"+{extra:.2f} MB", "≤ 3 MB", extra <= 3)
    lines = ["VmRSS 0.3 s after start of `python -c 'time.sleep(0.3)'`, median of "
             f"{rounds} alternating runs.", "", "| variant | VmRSS MB |", "|---|---|"]
    lines += [f"| {n} | {spread(v, 1 / 1024)} |" for n, v in kb.items()]
    rep.detail("Resident memory", lines)
