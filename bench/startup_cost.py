"""Start-up cost side by side, old code against new, in one alternating run (issue 23).

Builds pip-less venvs under a temp folder from the same base interpreter:
``bare`` (wp-autotrace not installed), ``new`` (this working tree's package and
its .pth line, copied as a wheel would install them) and ``old`` (the same from
a git ref, default ``main``), then times ``python -c pass`` in each variant,
alternating (the order rotates every round), and prints medians (wall, and CPU:
user+sys of the child, which waiting for a core on a loaded machine does not inflate)
and ratios.
The same run also times the .pth line alone (site.addpackage, tracer off) and
``python -X importtime``'s self time of each module the enabled non-root path
adds. Nothing here asserts.

Usage: python bench/startup_cost.py [--rounds N] [--ref REF] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WARMUP = 5  # rounds that only warm the page cache


def make_venv(root: Path, name: str, python: str, package: Path | None) -> Path:
    """A --without-pip venv; package (a wp_autotrace folder) copied into it with its .pth line."""
    venv = root / name
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    if package is not None:
        site = next((venv / "lib").glob("python3*/site-packages"))
        shutil.copytree(package, site / "wp_autotrace", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(package / "_bootstrap.pth", site / "wp_autotrace.pth")
        subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", str(site / "wp_autotrace")],
                       check=True, env=_clean())
    return venv


def export_ref(ref: str, dest: Path) -> Path:
    """The wp_autotrace folder of a git ref, unpacked under dest."""
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "wp_autotrace"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "wp_autotrace"


def _clean(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WP_AUTOTRACE", "PYTHON"))}
    env.update(extra)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s: user+sys) of one run, stdio on /dev/null. On a loaded machine the CPU time
    is the steadier figure: it does not count the time spent waiting for a core."""
    t0 = time.perf_counter()
    ru = spawned(argv, env)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def spawned(argv: list[str], env: dict[str, str]) -> resource.struct_rusage:
    """The rusage of one run (stdio on /dev/null; raises where it failed)."""
    dn = os.devnull
    actions = [(os.POSIX_SPAWN_OPEN, fd, dn, os.O_RDWR, 0) for fd in (0, 1, 2)]
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, ru = os.wait4(pid, 0)
    if status:
        raise RuntimeError(f"{argv} exited {status}")
    return ru


def importtime(python: str, env: dict[str, str], runs: int) -> dict[str, float]:
    """Median self µs per module under -X importtime."""
    per: dict[str, list[int]] = {}
    for _ in range(runs):
        err = subprocess.run([python, "-X", "importtime", "-c", "pass"], env=env, capture_output=True,
                             text=True).stderr
        for line in err.splitlines()[1:]:
            head, _, name = line.rpartition("|")
            per.setdefault(name.strip(), []).append(int(head.split(":")[1].split("|")[0]))
    return {k: statistics.median(v) for k, v in per.items()}


def pth_line_us(python: str, repeats: int) -> float:
    """site.addpackage of wp_autotrace.pth with the tracer off: median µs."""
    code = ("import site, time, statistics, os; d = next(p for p in site.getsitepackages() "
            "if os.path.exists(os.path.join(p, 'wp_autotrace.pth'))); t = []\n"
            f"for _ in range({repeats}):\n t0 = time.perf_counter(); site.addpackage(d, 'wp_autotrace.pth', set()); "
            "t.append(time.perf_counter() - t0)\nprint(statistics.median(t) * 1e6)")
    return float(subprocess.run([python, "-c", code], env=_clean(), capture_output=True, text=True,
                                check=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--ref", default="main")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-startup-"))
    try:
        log = tmp / "log.jsonl"
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))  # a descendant opens the log its root made
        base = sys.executable
        venvs = {"bare": make_venv(tmp, "bare", base, None),
                 "new": make_venv(tmp, "new", base, REPO / "wp_autotrace"),
                 "old": make_venv(tmp, "old", base, export_ref(args.ref, tmp / "ref"))}
        on = {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_RUN": "x",
              "WP_AUTOTRACE_ROOT_PID": "1"}
        variants = {
            "not installed": ("bare", _clean()),
            "installed, unset (new)": ("new", _clean()),
            "installed, unset (old)": ("old", _clean()),
            "enabled, non-root (new)": ("new", _clean(**on)),
            "enabled, non-root (old)": ("old", _clean(**on)),
        }
        wall: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(args.rounds + WARMUP):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                venv, env = variants[name]
                w, c = timed([str(venvs[venv] / "bin" / "python"), "-c", "pass"], env)
                if r >= WARMUP:
                    wall[name].append(w)
                    cpu[name].append(c)
        med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
        cmed = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
        quart = {k: statistics.quantiles(v, n=4) for k, v in wall.items()}
        py_new = str(venvs["new"] / "bin" / "python")
        py_old = str(venvs["old"] / "bin" / "python")
        it_new = importtime(py_new, _clean(**on), 15)
        it_old = importtime(py_old, _clean(**on), 15)
        it_off = importtime(py_new, _clean(), 15)
        added = {m: (it_old.get(m, 0), it_new.get(m, 0)) for m in sorted(set(it_new) | set(it_old))
                 if m not in it_off}
        out = {
            "rounds": args.rounds, "ref": args.ref, "load": os.getloadavg(),
            "median_ms": {k: round(v, 3) for k, v in med.items()},
            "cpu_median_ms": {k: round(v, 3) for k, v in cmed.items()},
            "cpu_unset_ratio_new": round(cmed["installed, unset (new)"] / cmed["not installed"], 4),
            "cpu_unset_ratio_old": round(cmed["installed, unset (old)"] / cmed["not installed"], 4),
            "cpu_nonroot_added_ms_new": round(cmed["enabled, non-root (new)"] - cmed["installed, unset (new)"], 3),
            "cpu_nonroot_added_ms_old": round(cmed["enabled, non-root (old)"] - cmed["installed, unset (old)"], 3),
            "p25_p75_ms": {k: [round(q[0] * 1e3, 2), round(q[2] * 1e3, 2)] for k, q in quart.items()},
            "unset_ratio_new": round(med["installed, unset (new)"] / med["not installed"], 4),
            "unset_ratio_old": round(med["installed, unset (old)"] / med["not installed"], 4),
            "nonroot_added_ms_new": round(med["enabled, non-root (new)"] - med["installed, unset (new)"], 3),
            "nonroot_added_ms_old": round(med["enabled, non-root (old)"] - med["installed, unset (old)"], 3),
            "pth_line_us": round(pth_line_us(py_new, 2000), 1),
            "importtime_self_us_old_new": added,
            "importtime_total_us_old_new": [sum(v[0] for v in added.values()), sum(v[1] for v in added.values())],
        }
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
