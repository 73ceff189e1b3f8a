#!/usr/bin/env python3
"""Check wp-autotrace's target table against the sources of every supported torch release.

Maintainer tool, not part of the test run. For each release it downloads the
small macOS-arm64 CPU wheel (without installing it) into a cache folder,
extracts only the Python sources it needs into a temporary folder, and reports:

* every default target and whether it resolves (``wp_autotrace.cli.doctor.resolve``);
* pool entry points found by ``ast`` that no target row covers;
* module-level (import-time) calls to ``warm_pool`` / ``maybe_warm_pool``.

Usage::

    python tools/check_targets.py [--cache DIR] [--output docs/torch-coverage.md] [--releases 2.9.1 ...]

Nothing from torch's sources is written to the repository, only the report.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import fnmatch
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wp_autotrace.cli.doctor.resolve import Resolution, resolve  # noqa: E402
from wp_autotrace.common.targets import TARGETS, Target  # noqa: E402

RELEASES = (
    "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1",
    "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1",
)  # fmt: skip
PLATFORMS = ("macosx_14_0_arm64", "macosx_11_0_arm64")
PYTHON_VERSION = "3.11"
DEFAULT_CACHE = Path.home() / ".cache" / "wp-autotrace-wheels"

# Wheel members to extract (fnmatch's "*" also matches "/").
EXTRACT = ("torch/__init__.py", "torch/_inductor/*.py", "torch/_vendor/quack/*.py",
           # the rows outside inductor: dynamo's compile of a frame, a DataLoader worker's loop
           "torch/_dynamo/__init__.py", "torch/_dynamo/convert_frame.py", "torch/utils/data/_utils/worker.py")
# Folders (under the extraction root) scanned for entry points and warm calls.
SCAN_DIRS = ("torch/_inductor", "torch/_vendor/quack")

ENTRY_FUNCS = frozenset(
    {"warm_pool", "process_pool", "_start_pool", "_new_pool", "_async_compile_initializer", "maybe_warm_pool"}
)
ENTRY_CLASSES = ("SubprocPool", "TuningProcess*", "AutotuneProcessPool")
POPEN_MARKERS = ("__main__.py", "__autotune_main__", "_compile_worker")
WARM_CALLS = frozenset({"warm_pool", "maybe_warm_pool"})

# The releases that were installed and run traced, not only read (newest first): what ran on each, and what it
# showed. Kept by hand here (the tool renders it; nothing here is measured by the tool): rerun the named tests
# with that release's interpreter (bench/versions.sh says how) and update the row.
LIVE_RUNS: tuple[tuple[str, str, str], ...] = (
    ("2.14.1", "the CUDA build (`pip install torch==2.14.1`), run on the CPU; 2026-12-05",
     "The torch test files with its pytest: test_pool_kinds 11, test_torch_pools 2, test_torch_e2e 6, "
     "test_scenarios 6, test_pool_busy 1, test_pool_tests 1 passed. Failed first, then fixed in the tests: "
     "test_counts and test_answer's 14808 case (the Answer's '1.0 GiB' / '1.2 GiB' against a MiB-only expectation), "
     "test_endings' group SIGTERM (2.14 fails the lost job at once with RuntimeError, its pool knowing its sidecar "
     "gone, where 2.13's waited out its timeout: the scenario expects each release's; the report was right on both). "
     "Seen once, not again in two reruns: the 14808 case counted 8 "
     "workers across its 3 pools where the test's ps saw 6 (log lost). No target moved: every row's line read from "
     "the installed Linux sources equals the table's. Seen firing in the kept logs (the 14808 and group-SIGTERM "
     "runs): AsyncCompile.wait_pool_ready, process_pool, after_fork, shutdown_compile_workers, "
     "SubprocPool.__init__/shutdown, SubprocMain.__init__/main/_start_pool/_shutdown/_shutdown_pool, "
     "_async_compile_initializer (cw.utils, each worker), TrackedProcessPoolExecutor.__init__, concurrent.futures' "
     "worker start, job loop, exit join and executor shutdown; not _on_sidecar_death (its reader thread saw the "
     "sidecar gone first). Later, the AutotuneProcessPool e2e (test_pool_kinds, its worker's loop watched in the "
     "autotune-worker role): failed first on 2.14's AutotuneProcessPool.submit, which wraps every job in "
     "_run_with_subprocess_env and which warm_up calls (fixed: the job named by the function it carries, a submit "
     "inside warm_up counted as its one job); then passed, its worker's job loop seen firing"),
    ("2.13.0", "the CPU build CI installs; every CI run", "every test file, the torch-marked ones included (CI)"),
    ("2.3.1", "the CUDA build from PyPI, run on the CPU; 2026-12-05",
     "test_legacy_pools and test_jobs_torchrun passed. The torch scenario tests need what 2.3 lacks "
     "(torch._inductor.async_compile, wait_pool_ready, a sidecar, TORCHINDUCTOR_WORKER_START, the FX-subprocess "
     "pool, 2.8's autotune process): test_torch_e2e 6, test_torch_pools 2, test_torchrun 1, test_counts 1, "
     "test_pool_kinds 11 failed so, by design. The default pool (import-time warm_pool, fork executor) live beside "
     "the probe, bench/users/legacy_fork_pool.py: answered once V1-V5 were fixed; V6-V7 found beside it "
     "(docs/users.md, 'torch 2.3.1, live'). "
     "Seen firing: codecache:AsyncCompile.warm_pool, process_pool, wait, _async_compile_initializer (each worker), "
     "concurrent.futures' worker start, exit join and executor shutdown, _compile, the config"),
    ("2.2.2", "the CUDA build from PyPI, run on the CPU; 2026-12-05",
     "test_legacy_pools and test_jobs_torchrun passed. Failed by what 2.2 lacks, as on 2.3.1 (async_compile, a "
     "sidecar, TORCHINDUCTOR_WORKER_START, the FX-subprocess pool, 2.8's autotune pool): test_torch_pools 2, "
     "test_torch_e2e 6, test_pool_kinds 13 (1 passed), test_scenarios 5 (1 passed), test_counts 1 (2 passed), "
     "test_torchrun 1. The default pool live beside the probe (bench/users/legacy_fork_pool.py): told busy while the "
     "main compiled (V8: no _pool_set, so a CPU wait's pending jobs were unknown), answered once fixed "
     "(docs/users.md, 'torch 2.2.2 and 2.1.2, live'). No target moved: every row's line read from the installed "
     "sources equals the table's. Seen firing: codecache:AsyncCompile.warm_pool, process_pool, wait, "
     "_async_compile_initializer (each worker), concurrent.futures' worker start, exit join and executor shutdown, "
     "_compile, the config; in the test files also the DataLoader worker loop and TuningProcessPool.__init__"),
    ("2.1.2", "the CUDA build from PyPI, run on the CPU; 2026-12-05",
     "test_legacy_pools and test_jobs_torchrun passed; the rest failed by what 2.1 lacks, as on 2.2.2 (also 2.1's "
     "autotune process takes no device): test_torch_pools 2, test_torch_e2e 6, test_pool_kinds 13 (1 passed), "
     "test_scenarios 5 (1 passed), test_counts 1 (2 passed), test_torchrun 1. The default pool live beside the "
     "probe: answered (V8 fixed first); its workers, started with process_pool's inner init(), took the "
     "compile-worker role from their job loop (V2, until then shown on a stand-in only). "
     "TORCHINDUCTOR_WORKER_START=spawn exported was told nowhere (V9: 2.1 has no worker_start_method), now told. "
     "No target moved: every row's line read from the installed sources equals the table's. Seen firing: "
     "codecache:AsyncCompile.warm_pool, process_pool, wait, concurrent.futures' worker start, exit join and "
     "executor shutdown, _compile, the config (no worker_start_method in it)"),
)

# "module:qualname" of an entry point -> why no target row needs to cover it.
# Add an entry only when wrapping it would add nothing; a real gap wants a row
# in wp_autotrace/common/targets.py instead.
EXPLAINED: dict[str, str] = {}

MODULE_ABBREV = (
    ("torch._inductor.compile_worker.", "cw."),
    ("torch._inductor.", ""),
    ("torch._vendor.", "_vendor."),
)


class EntryPoint(NamedTuple):
    """A definition or Popen call that can start a pool, found in the sources."""

    module: str
    qualname: str  # of the definition, or of the function holding the Popen call
    line: int
    kind: str  # "def", "class" or "Popen"


class WarmCall(NamedTuple):
    """A warm_pool / maybe_warm_pool call that runs when its module is imported."""

    path: str
    line: int
    text: str


class Report(NamedTuple):
    """Everything found for one release; wheel is None when it was not checked."""

    release: str
    wheel: str | None
    resolutions: list[Resolution]
    uncovered: list[EntryPoint]
    warm_calls: list[WarmCall]


def cached_wheel(release: str, cache: Path) -> Path | None:
    """The wheel for a release already in the cache, if any."""
    found = sorted(cache.glob(f"torch-{release}-*.whl"))
    return found[0] if found else None


def fetch_wheel(release: str, cache: Path) -> Path | None:
    """Return the cached wheel for a release, downloading it first if needed (None on failure)."""
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cached_wheel(release, cache)
    for platform in PLATFORMS:
        if wheel is not None:
            break
        cmd = [sys.executable, "-m", "pip", "download", f"torch=={release}", "--no-deps", "--only-binary=:all:"]
        cmd += ["--platform", platform, "--python-version", PYTHON_VERSION, "-d", str(cache), "-q"]
        print(f"  {shlex.join(cmd[1:])}", file=sys.stderr)
        subprocess.run(cmd, check=False)
        wheel = cached_wheel(release, cache)
    return wheel


def extract_sources(wheel: Path, dest: Path) -> None:
    """Extract only the Python files the checks read from a wheel into dest."""
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if any(fnmatch.fnmatch(name, pattern) for pattern in EXTRACT):
                zf.extract(name, dest)


def module_name(root: Path, path: Path) -> str:
    """Dotted module name of a source file under root."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _mentions_marker(node: ast.AST) -> bool:
    """Whether any string constant under node contains one of POPEN_MARKERS."""
    return any(
        isinstance(sub, ast.Constant) and isinstance(sub.value, str) and any(m in sub.value for m in POPEN_MARKERS)
        for sub in ast.walk(node)
    )


def _call_name(call: ast.Call) -> str:
    """The called name: "f" for f(...), "attr" for x.attr(...), "" otherwise."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return ""


class _Scanner(ast.NodeVisitor):
    """Collect entry points and import-time warm calls of one module."""

    def __init__(self, module: str, path: str) -> None:
        self.module, self.path = module, path
        self.scope: list[tuple[str, ast.AST]] = []  # (qualname part, node) from outside in
        self.entries: list[EntryPoint] = []
        self.warm_calls: list[WarmCall] = []

    def qualname(self, name: str = "") -> str:
        """Python-style qualname of name inside the current scope (of the scope itself if name is "")."""
        parts: list[str] = []
        for part, node in self.scope:
            parts.append(part)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                parts.append("<locals>")
        if parts and parts[-1] == "<locals>" and not name:
            parts.pop()
        return ".".join([*parts, name] if name else parts)

    def _visit_scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append((node.name, node))
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ENTRY_FUNCS:
            self.entries.append(EntryPoint(self.module, self.qualname(node.name), node.lineno, "def"))
        self._visit_scope(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(fnmatch.fnmatchcase(node.name, pattern) for pattern in ENTRY_CLASSES):
            self.entries.append(EntryPoint(self.module, self.qualname(node.name), node.lineno, "class"))
        self._visit_scope(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        in_function = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for _, n in self.scope)
        if name == "Popen":
            # The command is often built a few lines earlier, so look through
            # the whole enclosing function, not only the call's arguments.
            holder = next((n for _, n in reversed(self.scope) if not isinstance(n, ast.ClassDef)), None)
            if _mentions_marker(holder if holder is not None else node):
                self.entries.append(EntryPoint(self.module, self.qualname(), node.lineno, "Popen"))
        elif name in WARM_CALLS and not in_function:
            self.warm_calls.append(WarmCall(self.path, node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def scan_sources(root: Path) -> tuple[list[EntryPoint], list[WarmCall]]:
    """Find pool entry points and import-time warm calls in the extracted sources."""
    files = sorted(p for d in SCAN_DIRS for p in (root / d).rglob("*.py"))
    files.insert(0, root / "torch" / "__init__.py")
    entries: list[EntryPoint] = []
    warm_calls: list[WarmCall] = []
    for path in files:
        if not path.is_file():
            continue
        scanner = _Scanner(module_name(root, path), str(path.relative_to(root)))
        scanner.visit(ast.parse(path.read_bytes(), filename=str(path)))
        entries += scanner.entries
        warm_calls += scanner.warm_calls
    return entries, warm_calls


def is_covered(entry: EntryPoint, found: set[tuple[str, str]]) -> bool:
    """Whether a resolved target row covers an entry point.

    A def is covered by a row naming it; a class by a row naming one of its
    methods; a Popen call by a row naming the function that holds it, or any
    function around that one.
    """
    if entry.kind == "class":
        return any(mod == entry.module and qual.startswith(entry.qualname + ".") for mod, qual in found)
    parts = entry.qualname.split(".")
    return any((entry.module, ".".join(parts[:i])) in found for i in range(len(parts), 0, -1))


def check_release(release: str, cache: Path) -> Report:
    """Download, extract and check one release."""
    wheel = fetch_wheel(release, cache)
    if wheel is None:
        return Report(release, None, [], [], [])
    with tempfile.TemporaryDirectory(prefix=f"torch-{release}-") as tmp:
        root = Path(tmp)
        extract_sources(wheel, root)
        resolutions = resolve(str(root), TARGETS)
        entries, warm_calls = scan_sources(root)
    found = {(r.target.module, r.target.qualname) for r in resolutions if r.name_found}
    uncovered = [e for e in entries if not is_covered(e, found)]
    return Report(release, wheel.name, resolutions, uncovered, warm_calls)


def short_module(module: str) -> str:
    """Abbreviate a torch module name for the tables."""
    for prefix, short in MODULE_ABBREV:
        if module.startswith(prefix):
            return short + module[len(prefix) :]
    return module


def target_label(target: Target) -> str:
    """Table label of a target: `module:qualname` (module only for import/config rows)."""
    return f"`{short_module(target.module)}:{target.qualname}`" if target.qualname else f"`{target.module}`"


def found_cell(res: Resolution) -> str:
    """The found? cell of a per-release row."""
    if res.name_found:
        return "yes"
    return "no (name)" if res.module_found else "no (module)"


def render_live() -> list[str]:
    """The releases run traced (LIVE_RUNS), as a section: the table below says where names are, this one where
    they were seen to work."""
    out = ["## Run live", "",
           "Installed and traced on this project's machine (x86_64, Python 3.11), not only read from a wheel.", "",
           "| release | build, when | what ran, and what it showed |", "|---|---|---|"]
    out += [f"| {release} | {build} | {what} |" for release, build, what in LIVE_RUNS]
    return out + [""]


def render(reports: list[Report], command: str) -> str:
    """Render all reports as one Markdown document."""
    today = datetime.date.today().isoformat()
    out = [
        "# Target coverage by torch release",
        "",
        f"Generated on {today} by `{command}` from the PyPI macOS-arm64 cp{PYTHON_VERSION.replace('.', '')} "
        "wheels' Python sources (downloaded, never installed). Do not edit by hand; rerun the tool.",
        "",
        "Module abbreviations: `cw.` = `torch._inductor.compile_worker.`; other `torch._inductor.` names are "
        "shown without that prefix. A target whose module is not in a release is skipped at run time, "
        "so `no` is expected for rows that belong to other releases.",
        "",
        *render_live(),
        "## Summary",
        "",
    ]
    checked = [r for r in reports if r.wheel]
    missing = [r.release for r in reports if not r.wheel]
    if missing:
        out += [f"Not checked (download failed): {', '.join(missing)}.", ""]
    out += [
        "Line of each target's definition; `·` = absent, `mod` = module present (import/config rows).",
        "",
        "| target | " + " | ".join(r.release for r in checked) + " |",
        "|---|" + "---|" * len(checked),
    ]
    targets = [res.target for res in checked[0].resolutions] if checked else []
    for i, target in enumerate(targets):
        cells = []
        for r in checked:
            res = r.resolutions[i]
            cells.append(str(res.line) if res.line else ("mod" if res.name_found else "·"))
        out.append(f"| {target_label(target)} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Unexplained uncovered entry points per release: "
        + ", ".join(f"{r.release}: {sum(1 for e in r.uncovered if _key(e) not in EXPLAINED)}" for r in checked)
        + ".",
        "",
    ]
    for r in reports:
        out += [f"## torch {r.release}", ""]
        if not r.wheel:
            out += ["Not checked: the wheel could not be downloaded.", ""]
            continue
        out += [f"Wheel: `{r.wheel}`", "", "| target | found? | line |", "|---|---|---|"]
        for res in r.resolutions:
            out.append(f"| {target_label(res.target)} | {found_cell(res)} | {res.line or ''} |")
        out += ["", "**Entry points no target covers:**", ""]
        for e in r.uncovered or []:
            why = EXPLAINED.get(_key(e))
            suffix = f" — explained: {why}" if why else " — **unexplained**"
            out.append(f"- `{e.module}:{e.qualname}:{e.line}` ({e.kind}){suffix}")
        if not r.uncovered:
            out.append("- none")
        out += ["", "**Import-time warm calls:**", ""]
        out += [f"- `{w.path}:{w.line}` `{w.text}`" for w in r.warm_calls] or ["- none"]
        out.append("")
    return "\n".join(out)


def _key(entry: EntryPoint) -> str:
    """Key of an entry point in EXPLAINED."""
    return f"{entry.module}:{entry.qualname}"


def main(argv: list[str] | None = None) -> int:
    """Run the checks and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheel cache (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=Path("docs/torch-coverage.md"), help="report file")
    parser.add_argument("--releases", nargs="+", default=list(RELEASES), metavar="X.Y.Z", help="releases to check")
    args = parser.parse_args(argv)
    reports = []
    for release in args.releases:
        print(f"torch {release}", file=sys.stderr)
        reports.append(check_release(release, args.cache))
    command = shlex.join(["python", "tools/check_targets.py", *(sys.argv[1:] if argv is None else argv)])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(reports, command), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0 if all(r.wheel for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
