#!/usr/bin/env python3
"""Read released device-plugin wheels and write docs/plugin-coverage.md.

Maintainer tool, not part of the test run. For each release of torch_npu,
intel-extension-for-pytorch, vllm and vllm-ascend listed below it downloads
the wheel with ``pip download --no-deps`` into a cache folder (never
installed, never imported: members are read with zipfile, parsed with ast)
and reports, with file:line:

* every call of warm_pool / maybe_warm_pool / process_pool / SubprocPool(...)
  / shutdown_compile_workers (and ``process_pool().submit(...)``);
* every AsyncCompile subclass and the methods it overrides;
* every change of TORCH_DEVICE_BACKEND_AUTOLOAD, TORCH_WARM_POOL and
  TORCHINDUCTOR_COMPILE_THREADS;
* what runs at import: a walk from the dist's ``torch.backends`` entry point
  (what ``import torch`` calls) through module-level imports and calls of the
  wheel's own functions, tracking the two switches, to every warm_pool reached;
* whether the default targets (wp_autotrace/common/targets.py, with the subclass
  rule of wp_autotrace/runtime/finder.py) catch each pool entry point;
* a summary table (one row per release and its behaviour "shape") that
  tests/test_plugins.py compares with wp_autotrace/analysis/derive/plugins.py.

Usage::

    python tools/check_plugins.py [--cache DIR] [--output docs/plugin-coverage.md] [--only torch_npu]

Nothing from the wheels is written to the repository, only the report.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wp_autotrace.common.targets import TARGETS  # noqa: E402

DEFAULT_CACHE = Path.home() / ".cache" / "wp-autotrace-plugins"
# The last release of every minor on the index (no 2.2 exists), the seed's
# 2.1.0.post8, and the first release of each minor where the inductor
# integration changed shape (2.6 - 2.10).
RELEASES: dict[str, tuple[str, ...]] = {
    "torch_npu": (
        "2.1.0.post8", "2.1.0.post17", "2.3.1.post6", "2.4.0.post4", "2.5.1.post1", "2.6.0", "2.6.0.post5",
        "2.7.1", "2.7.1.post11", "2.8.0", "2.8.0.post5", "2.9.0", "2.9.1", "2.10.0", "2.10.0.post7",
        "2.11.0.post3", "2.12.0.post3", "2.13.0", "2.14.0",
    ),
    # The index holds 2.6.0, 2.7.0, 2.8.0, all CPU builds; 2.7.0 skipped (same shape, saves ~100 MB).
    "intel_extension_for_pytorch": ("2.6.0", "2.8.0"),
    "vllm": ("0.33.0",),
    # 0.9.1 is the newest with an x86_64 or aarch64 wheel for cp311 on the index.
    "vllm_ascend": ("0.9.1",),
}  # fmt: skip
PYTHONS = ("3.11", "3.10", "3.9", "3.8")
ARCHES = ("x86_64", "aarch64")
PLATFORM_TAGS = ("manylinux2014_{a}", "manylinux_2_17_{a}", "manylinux_2_28_{a}", "manylinux_2_31_{a}",
                 "manylinux_2_35_{a}")
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "plugin-coverage.md"
DOWNLOAD_TIMEOUT_S = 600  # IPEX / vllm wheels are a few hundred MB

WATCHED = ("TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCH_WARM_POOL", "TORCHINDUCTOR_COMPILE_THREADS")
AUTOLOAD, WARM = WATCHED[0], WATCHED[1]
WARM_CALLS = frozenset({"warm_pool", "maybe_warm_pool"})
POOL_CALLS = WARM_CALLS | {"process_pool", "SubprocPool", "shutdown_compile_workers"}
# Cheap text filter before parsing a member of a large wheel.
KEYWORDS = (b"warm_pool", b"AsyncCompile", b"SubprocPool", b"process_pool", b"shutdown_compile_workers",
            *(k.encode() for k in WATCHED))
MAX_CALL_DEPTH = 40  # import-time call chains deeper than this are not followed


# -- fetching -----------------------------------------------------------------


def find_cached(cache: Path, dist: str, version: str) -> Path | None:
    """A wheel of dist==version already in the cache, preferring x86_64 cp311."""
    found = sorted(cache.glob(f"{dist}-{version}-*.whl"),
                   key=lambda p: ("x86_64" not in p.name, "cp311" not in p.name))
    return found[0] if found else None


def fetch(cache: Path, dist: str, version: str) -> tuple[Path | None, str]:
    """The cached wheel, downloading it (nice, bounded) on first use; and how it was found."""
    wheel = find_cached(cache, dist, version)
    if wheel:
        return wheel, "cached"
    cache.mkdir(parents=True, exist_ok=True)
    for py in PYTHONS:
        for arch in ARCHES:
            plats = [a for t in PLATFORM_TAGS for a in ("--platform", t.format(a=arch))]
            cmd = ["nice", "-n", "10", sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                   "--only-binary=:all:", "--python-version", py, *plats, "-d", str(cache),
                   f"{dist.replace('_', '-')}=={version}"]
            try:
                subprocess.run(cmd, check=True, capture_output=True, timeout=DOWNLOAD_TIMEOUT_S)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                continue
            wheel = find_cached(cache, dist, version)
            if wheel:
                return wheel, f"downloaded (python {py}, {arch})"
    return None, "no wheel on the index for cp3.8-3.11 x86_64/aarch64"


# -- reading one source file --------------------------------------------------


class Site(NamedTuple):
    """One finding in a wheel's sources."""

    kind: str  # "call", "env", "subclass"
    name: str  # called name / env key / class name
    file: str
    line: int
    func: str  # enclosing qualname, "<module>" at top level
    detail: str  # receiver, new value, base and overrides
    gate: str  # watched env keys tested by enclosing ifs


def _src(node: ast.AST) -> str:
    return ast.unparse(node).replace("\n", " ")[:80]


def _env_key(node: ast.AST) -> str | None:
    """The watched key of an ``os.environ[...]`` subscript, or None."""
    if isinstance(node, ast.Subscript) and _src(node.value) in ("os.environ", "environ"):
        key = node.slice
        if isinstance(key, ast.Constant) and key.value in WATCHED:
            return str(key.value)
    return None


def _called_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


class SiteVisitor(ast.NodeVisitor):
    """Collects Sites from one module, keeping the enclosing function and if-gates."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.stack: list[str] = []
        self.gates: list[str] = []
        self.sites: list[Site] = []

    def _add(self, kind: str, name: str, node: ast.AST, detail: str) -> None:
        func = ".".join(self.stack) or "<module>"
        gate = ",".join(sorted(set(self.gates)))
        self.sites.append(Site(kind, name, self.file, getattr(node, "lineno", 0), func, detail, gate))

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.stack.append(name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [_src(b) for b in node.bases]
        if any(b.split(".")[-1].endswith("AsyncCompile") for b in bases):
            meths = [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            self._add("subclass", node.name, node, f"({', '.join(bases)}) defines {', '.join(meths) or 'nothing'}")
        self._scoped(node, node.name)

    def visit_If(self, node: ast.If) -> None:
        keys = [k for k in WATCHED if k in _src(node.test) or k in ast.unparse(node.test)]
        self.visit(node.test)
        self.gates.extend(keys)
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        del self.gates[len(self.gates) - len(keys):]

    def visit_Call(self, node: ast.Call) -> None:
        name = _called_name(node)
        f = node.func
        if name in POOL_CALLS:
            self._add("call", name, node, _src(f))
        elif name == "submit" and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) \
                and _called_name(f.value) == "process_pool":
            self._add("call", "process_pool().submit", node, _src(f))
        elif name == "register" and any(isinstance(a, ast.Name) and a.id in POOL_CALLS for a in node.args):
            self._add("call", "shutdown_compile_workers", node, _src(node))
        elif name in ("setdefault", "pop", "update", "putenv", "unsetenv") and node.args:
            keys = [k for k in WATCHED if k in _src(node)]
            for k in keys:
                self._add("env", k, node, _src(node))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            key = _env_key(t)
            if key:
                self._add("env", key, node, f"= {_src(node.value)}")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            key = _env_key(t)
            if key:
                self._add("env", key, node, "del")
        self.generic_visit(node)


# -- what runs at import --------------------------------------------------------


class Step(NamedTuple):
    """One import-time effect of a statement, in execution order."""

    kind: str  # "import", "env", "warm", "call"
    target: str  # module / env key / warm name / called function name
    value: str  # env: new value; warm: gate keys
    line: int


class Module(NamedTuple):
    """A parsed wheel member."""

    name: str
    file: str  # path inside the wheel
    tree: ast.Module
    is_pkg: bool


def module_name(member: str) -> tuple[str, bool] | None:
    """Dotted module name of a wheel member and whether it is a package."""
    if not member.endswith(".py") or ".dist-info/" in member or ".data/" in member:
        return None
    parts = member[:-3].split("/")
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts.pop()
    return (".".join(parts), is_pkg) if all(p.isidentifier() for p in parts) else None


def _from_base(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    pkg = mod.name.split(".") if mod.is_pkg else mod.name.split(".")[:-1]
    pkg = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(pkg + ([node.module] if node.module else []))


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in _src(node.test) and "__main__" in _src(node.test)


def collect_steps(mod: Module, body: list[ast.stmt], gates: tuple[str, ...] = ()) -> list[Step]:
    """Import-time steps of a statement list (not into function bodies; all branches taken)."""
    steps: list[Step] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_main_guard(node):
            continue
        if isinstance(node, ast.Import):
            steps += [Step("import", a.name, "", node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(mod, node)
            steps.append(Step("import", base, "", node.lineno))
            steps += [Step("import", f"{base}.{a.name}", "", node.lineno) for a in node.names]
        elif isinstance(node, ast.If):
            inner = gates + tuple(k for k in WATCHED if k in _src(node.test))
            steps += _expr_steps(node.test, gates)
            steps += collect_steps(mod, node.body + node.orelse, inner)
            continue
        if isinstance(node, ast.ClassDef):
            steps += collect_steps(mod, node.body, gates)
            continue
        children = [getattr(node, f) for f in ("body", "orelse", "finalbody")
                    if isinstance(getattr(node, f, None), list)]
        if children:  # try / with / for / while: the header, then every block
            for h in getattr(node, "handlers", []):
                children.append(h.body)
            for field in ("items", "iter", "test"):
                value = getattr(node, field, None)
                for expr in value if isinstance(value, list) else [value] if value is not None else []:
                    steps += _expr_steps(expr, gates)
            for block in children:
                steps += collect_steps(mod, block, gates)
            continue
        if isinstance(node, ast.Assign):
            steps += [Step("env", k, _src(node.value), node.lineno) for k in map(_env_key, node.targets) if k]
        steps += _expr_steps(node, gates)
    return steps


def _expr_steps(node: ast.AST, gates: tuple[str, ...]) -> list[Step]:
    """Calls inside one simple statement or expression (not into lambdas)."""
    steps: list[Step] = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        name = _called_name(sub)
        if name in WARM_CALLS:
            steps.append(Step("warm", name, ",".join(gates), sub.lineno))
        elif name == "import_module" and sub.args and isinstance(sub.args[0], ast.Constant):
            steps.append(Step("import", str(sub.args[0].value), "", sub.lineno))
        elif isinstance(sub.func, ast.Name):
            steps.append(Step("call", name, "", sub.lineno))
        elif name in ("setdefault", "putenv", "pop") and sub.args and isinstance(sub.args[0], ast.Constant) \
                and sub.args[0].value in WATCHED:
            value = _src(sub.args[1]) if len(sub.args) > 1 and name != "pop" else "(unset)"
            steps.append(Step("env", str(sub.args[0].value), value, sub.lineno))
    return steps


class WarmAt(NamedTuple):
    """A warm_pool call reached by an import walk."""

    file: str
    line: int
    chain: tuple[str, ...]  # modules and functions from the walk's start
    autoload: str  # TORCH_DEVICE_BACKEND_AUTOLOAD at the call ("" = unset) and where set
    warm: str  # TORCH_WARM_POOL at the call, same form
    gate: str  # watched keys tested by enclosing ifs


class ImportWalk:
    """Follows what importing a module runs: module bodies, imports, calls of the wheel's own functions."""

    def __init__(self, modules: Modules, env: dict[str, tuple[str, str]] | None = None) -> None:
        self.modules = modules
        self.env: dict[str, tuple[str, str]] = dict(env or {})
        self.done: set[str] = set()
        self.called: set[tuple[str, str]] = set()
        self.chain: list[str] = []
        self.warms: list[WarmAt] = []

    def import_module(self, name: str) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            m = ".".join(parts[:i])
            if m in self.modules and m not in self.done and len(self.chain) < MAX_CALL_DEPTH:
                self.done.add(m)
                self.chain.append(m)
                mod = self.modules[m]
                self.run(mod, collect_steps(mod, mod.tree.body))
                self.chain.pop()

    def call(self, mod: Module, fname: str) -> None:
        """Run a function of the wheel by name, as seen from mod (a def there or a from-import)."""
        where = self._binding(mod, fname)
        if where is None or where in self.called or len(self.chain) >= MAX_CALL_DEPTH:
            return
        self.called.add(where)
        self.import_module(where[0])
        target = self.modules.get(where[0])
        func = next((n for n in target.tree.body if isinstance(n, ast.FunctionDef) and n.name == where[1]), None) \
            if target else None
        if target is None or func is None:
            return
        self.chain.append(f"{where[0]}.{where[1]}()")
        self.run(target, collect_steps(target, func.body))
        self.chain.pop()

    def _binding(self, mod: Module, name: str) -> tuple[str, str] | None:
        for node in mod.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return mod.name, name
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        return _from_base(mod, node), a.name
        return None

    def run(self, mod: Module, steps: list[Step]) -> None:
        for s in steps:
            if s.kind == "import":
                self.import_module(s.target)
            elif s.kind == "env":
                self.env[s.target] = (s.value, f"{mod.file}:{s.line}")
            elif s.kind == "call":
                self.call(mod, s.target)
            else:
                self.warms.append(WarmAt(mod.file, s.line, tuple(self.chain), self._env(AUTOLOAD), self._env(WARM),
                                         s.value))

    def _env(self, key: str) -> str:
        value = self.env.get(key)
        return f"{value[0]} ({value[1]})" if value else ""


def autoload_off(w: WarmAt) -> bool:
    """The call runs with the autoload switch at a constant "0": its sidecars will not load the plugin."""
    return w.autoload.startswith(("'0'", '"0"'))


def skipped(w: WarmAt) -> bool:
    """The call is gated on TORCH_WARM_POOL, which the plugin itself set to "0" before it."""
    return WARM in w.gate and w.warm.startswith(("'0'", '"0"'))


# -- one release ------------------------------------------------------------------


class Release(NamedTuple):
    """What one wheel does to compile pools."""

    dist: str
    version: str
    wheel: str
    entry: str  # the torch.backends entry point ("" if none): what `import torch` runs
    sites: list[Site]
    at_import: list[WarmAt]  # warm calls reached during `import torch`
    lazy: list[WarmAt]  # module-level warm calls in modules imported later (first compile)
    imports: dict[str, dict[str, str]]  # file -> local name -> module it came from


class Modules(dict):  # type: ignore[type-arg]
    """Module name -> Module, each member parsed on first use (a wheel has ~2,000; a walk reads ~300)."""

    def __getitem__(self, name: str) -> Module:
        value = super().__getitem__(name)
        if isinstance(value, Module):
            return value
        member, data, is_pkg = value
        try:
            tree = ast.parse(data, member)
        except (SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])  # not Python 3.11 syntax: read as empty
        mod = Module(name, member, tree, is_pkg)
        self[name] = mod
        return mod

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
        return self[name] if name in self else default  # noqa: SIM401 (our __getitem__ parses)

    def named(self) -> list[Module]:
        """The modules whose text names a pool or a switch: the only ones with sites."""
        return [self[n] for n, v in list(self.items())
                if isinstance(v, Module) or any(k in v[1] for k in KEYWORDS)]


def read_modules(wheel: Path, keep_all: bool) -> Modules:
    """The wheel's Python members (only those naming a pool or switch unless keep_all), unparsed."""
    modules = Modules()
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            named = module_name(member)
            if named is None:
                continue
            data = zf.read(member)
            if keep_all or any(k in data for k in KEYWORDS):
                modules[named[0]] = (member, data, named[1])
    return modules


def backends_entry(wheel: Path) -> str:
    """The ``torch.backends`` entry point ("module:function"), read from the dist-info."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(names[0]).decode() if names else ""
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[torch.backends]" and "=" in line:
            return line.split("=", 1)[1].strip()
    return ""


def file_imports(mod: Module) -> dict[str, str]:
    """Top-level and nested from-imports of a module: local name -> source module."""
    found: dict[str, str] = {}
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                found[a.asname or a.name] = _from_base(mod, node)
    return found


def analyse(dist: str, version: str, wheel: Path) -> Release:
    """Read one wheel: sites, and what its import and its lazily imported modules run."""
    entry = backends_entry(wheel)
    modules = read_modules(wheel, keep_all=bool(entry))
    sites: list[Site] = []
    named = modules.named()
    for mod in named:
        visitor = SiteVisitor(mod.file)
        visitor.visit(mod.tree)
        sites += visitor.sites
    at_import: list[WarmAt] = []
    env: dict[str, tuple[str, str]] = {}
    if entry:
        walk = ImportWalk(modules)
        ep_mod, _, ep_func = entry.partition(":")
        walk.import_module(ep_mod)
        if ep_mod in modules and ep_func:
            walk.call(modules[ep_mod], ep_func)
        at_import, env = walk.warms, walk.env
    reached = {(w.file, w.line) for w in at_import}
    lazy: list[WarmAt] = []
    for s in sites:
        if s.kind == "call" and s.name in WARM_CALLS and s.func == "<module>" and (s.file, s.line) not in reached:
            # imported later, by the first compile: after `import torch` left the switches as they are now
            later = ImportWalk(modules, env)
            later.import_module(next(m.name for m in named if m.file == s.file))
            lazy += [w for w in later.warms if (w.file, w.line) == (s.file, s.line)]
    imports = {m.file: file_imports(m) for m in named}
    return Release(dist, version, wheel.name, entry, sites, at_import, lazy, imports)


def shape(rel: Release) -> str:
    """A short name for what the release does, the key plugins.py's rows are matched on."""
    parts = []
    for label, warms in (("import-warm", rel.at_import), ("lazy-warm", rel.lazy)):
        if warms:
            running = [w for w in warms if not skipped(w)]
            if not running:
                parts.append(label + "-skipped")
            else:
                parts.append(label + ("-reset" if all(autoload_off(w) for w in running) else "")
                             + ("-gated" if any(WARM in w.gate for w in running) else ""))
    if any(s.kind == "call" and s.name in WARM_CALLS and s.func != "<module>" for s in rel.sites):
        parts.append("compile-warm")
    if any(s.kind == "subclass" for s in rel.sites):
        parts.append("subclass-pool" if any(s.name == "SubprocPool" for s in rel.sites) else "subclass")
    return "+".join(parts) or "no-pool"


def nesting(rel: Release) -> str:
    """Whether this release's own sidecars load it again and warm another pool."""
    running = [w for w in rel.at_import if not skipped(w)]
    if any(not autoload_off(w) for w in running):
        return "yes: warm_pool during import torch with autoload on; every sidecar repeats it"
    if running:
        return "no: autoload is 0 around its warm_pool, so its sidecar does not load it"
    return "no: nothing warms a pool during import torch"


# -- does the default target table catch it ---------------------------------------------

_TORCH_POOL_MODULES = ("torch._inductor.async_compile", "torch._inductor.codecache",
                       "torch._inductor.compile_worker.subproc_pool")
TARGETED = {(t.module, t.qualname) for t in TARGETS}


def _target_for(qualname: str) -> str:
    mods = [m for m in _TORCH_POOL_MODULES if (m, qualname) in TARGETED]
    return f"{qualname} ({', '.join(m.rsplit('.', 1)[-1] for m in mods)})" if mods else ""


def caught(site: Site, imports: dict[str, str]) -> str:
    """Which default target records this site, or why none does."""
    if site.kind == "subclass":
        base = site.detail[1:].split(")")[0].split(",")[0].split(".")[-1]
        origin = imports.get(base, "")
        meths = site.detail.split(" defines ")[1].split(", ")
        hits = [m for m in meths if _target_for(f"AsyncCompile.{m}")]
        if not origin.startswith("torch._inductor"):
            return f"subclass rule does not apply: base {base} from {origin or '?'}"
        return "subclass rule wraps " + (", ".join(f"{site.name}.{m}" for m in hits) or "nothing (no target method)")
    if site.kind != "call":
        return ""
    name = site.name.replace("().submit", "")
    if name == "SubprocPool":
        return "yes: " + _target_for("SubprocPool.__init__") if _target_for("SubprocPool.__init__") else "NO"
    qual = name if name in ("shutdown_compile_workers", "maybe_warm_pool") else f"AsyncCompile.{name}"
    found = _target_for(qual)
    return f"yes: {found}" if found else f"NO: no target row {qual}"


# -- the document ---------------------------------------------------------------------

SUMMARY_HEADER = "| dist | version | shape | at import torch | sidecars re-import it | pool subclasses |"
SUMMARY_RULE = "|---|---|---|---|---|---|"


def _warm_text(w: WarmAt) -> str:
    gate = f"; gated on {w.gate}" if w.gate else ""
    if WARM not in w.gate:
        gate += ("; not gated on TORCH_WARM_POOL, so it also runs in a compile worker that imports this module "
                 "(e.g. unpickling one of the plugin's jobs)")
    state = "skipped (TORCH_WARM_POOL=0 set by the plugin)" if skipped(w) else "runs"
    return (f"`{w.file}:{w.line}` {state}; TORCH_DEVICE_BACKEND_AUTOLOAD = {w.autoload or 'unset'}, "
            f"TORCH_WARM_POOL = {w.warm or 'unset'}{gate}; via {' → '.join(w.chain)}")


def summary_row(rel: Release) -> str:
    running = [w for w in rel.at_import if not skipped(w)]
    at_import = (f"warm_pool at {running[0].file}:{running[0].line}" if running
                 else "warm_pool skipped" if rel.at_import else "no warm_pool")
    subs = sorted({s.name for s in rel.sites if s.kind == "subclass"})
    return f"| {rel.dist} | {rel.version} | {shape(rel)} | {at_import} | {nesting(rel).split(':')[0]} | " \
           f"{', '.join(subs) or '-'} |"


def release_section(rel: Release) -> list[str]:
    lines = [f"### {rel.dist} {rel.version}", "", f"Wheel `{rel.wheel}`; shape **{shape(rel)}**.", ""]
    runs = f"entry point `{rel.entry}`" if rel.entry else "nothing (no torch.backends entry point)"
    lines.append(f"- `import torch` runs: {runs}.")
    lines += [f"- warm_pool during import torch: {_warm_text(w)}" for w in rel.at_import]
    lines += [f"- warm_pool when its module is first imported (later, at the first compile): {_warm_text(w)}"
              for w in rel.lazy]
    lines.append(f"- Sidecars re-import it (nesting): {nesting(rel)}.")
    sites = sorted(rel.sites, key=lambda s: (s.file, s.line))
    if sites:
        lines += ["", "| file:line | in | what | detail | gated on | default targets |", "|---|---|---|---|---|---|"]
        for s in sites:
            what = {"env": f"sets {s.name}", "subclass": f"class {s.name}"}.get(s.kind, f"{s.name}()")
            detail = s.detail.replace("|", "\\|")
            lines.append(f"| `{s.file}:{s.line}` | {s.func} | {what} | `{detail}` | {s.gate or '-'} | "
                         f"{caught(s, rel.imports.get(s.file, {})) or '-'} |")
    else:
        lines.append("- No pool call, AsyncCompile subclass or watched switch anywhere in its sources.")
    return lines + [""]


INTRO = """\
# Device plugins and compile pools: what each release does

Generated by `tools/check_plugins.py` ({date}) from the released wheels, read with
`zipfile` and `ast` (never installed, never imported). Do not edit by hand: rerun the
tool. `wp_autotrace/analysis/derive/plugins.py` holds the same findings as data; tests/test_plugins.py
checks that its table matches the summary below.

How to read it. *At import torch*: what the `torch.backends` entry point (which
`import torch` calls in torch ≥ 2.5 unless `TORCH_DEVICE_BACKEND_AUTOLOAD=0`) runs, followed
statically through module-level imports, `importlib.import_module("…")` and calls of the
wheel's own functions, all branches taken. *Sidecars re-import it*: a compile sidecar runs
`import torch` with the environment of the process that warmed the pool; when
`TORCH_DEVICE_BACKEND_AUTOLOAD` is `"0"` at the `warm_pool()` call the sidecar does not load
the plugin again, otherwise it does, and a warm_pool at import then nests pools without end
(the seed scenario). *Lazy*: a module-level `warm_pool()` in a module the plugin imports only
later (e.g. `torch_npu._inductor`, imported when inductor first compiles for the device).
Shapes: `no-pool`; `import-warm[-reset][-gated]` / `lazy-warm[-reset][-gated]` /
`…-skipped` (gated on `TORCH_WARM_POOL` which the plugin itself set to `"0"` first).
*-gated* matters beyond the main process: torch's `SubprocPool` starts its sidecar with
`TORCH_WARM_POOL=0` ("safeguard against creating a SubprocPool in the subprocess"), so a
gated `warm_pool()` never runs in a sidecar or its workers, while an ungated one runs
wherever its module is imported, including a compile worker that unpickles one of the
plugin's jobs (torch_npu's `CustomAsyncCompile` submits `_worker_compile`, defined in
`torch_npu._inductor.…codecache`, whose import runs `torch_npu/_inductor/__init__.py`):
that worker starts a sidecar of its own, autoload reset or not (tests/fixtures/plugins/wp_fx_jobs
reproduces it);
`compile-warm` (a `warm_pool()` inside a function); `subclass-pool` (an `AsyncCompile`
subclass whose `process_pool()` builds its own `SubprocPool`).
Limits: a static walk; imports by computed name (`pkgutil.iter_modules` loops) are not
followed. For torch_npu ≥ 2.7 the module holding the import-time `warm_pool()`,
`torch_npu._inductor`, is imported from inside functions only (2.13:
`torch_npu/utils/_dynamo.py` `_InductorNpuRegistry.register_inductor_npu`, run by the NPU
backend scope of the first compile), so it is listed as *lazy*: it warms a pool in the
process that compiles, not during `import torch`, and never in a sidecar.

## Summary

"""


def coverage_section(releases: list[Release]) -> list[str]:
    """Whether the default targets catch every pool entry point found, over all releases."""
    verdicts = [(rel, s, caught(s, rel.imports.get(s.file, {}))) for rel in releases for s in rel.sites
                if s.kind == "subclass" or (s.kind == "call" and s.name != "process_pool().submit")]
    missed = [(rel, s, v) for rel, s, v in verdicts if not v.startswith(("yes", "subclass rule wraps"))
              or v.endswith("nothing (no target method)")]
    out = ["## Default targets", "",
           f"{len(verdicts)} pool entry points (calls of warm_pool / process_pool / SubprocPool / "
           f"shutdown_compile_workers and AsyncCompile subclasses) in {len(releases)} releases; "
           f"{len(verdicts) - len(missed)} caught by the default targets (wp_autotrace/common/targets.py, "
           "with the AsyncCompile subclass rule of wp_autotrace/runtime/finder.py)."]
    out += [f"- NOT caught: {rel.dist} {rel.version} `{s.file}:{s.line}` {s.name}: {v}" for rel, s, v in missed]
    nesting_ones = [f"{r.dist} {r.version}" for r in releases if nesting(r).startswith("yes")]
    warming = [f"{r.dist} {r.version}" for r in releases if any(not skipped(w) for w in r.at_import)]
    out += ["", f"Releases that warm a pool during `import torch`: {', '.join(warming) or 'none'}. "
            f"Releases whose own sidecars load them again (nesting): {', '.join(nesting_ones) or 'none'}."]
    return out + [""]


def render(releases: list[Release], notes: list[str], date: str) -> str:
    out = [INTRO.format(date=date).rstrip("\n") + "\n", SUMMARY_HEADER, SUMMARY_RULE]
    out += [summary_row(r) for r in releases]
    out += ["", *coverage_section(releases), FROM_SOURCE]
    out += ["", "## Not read", ""] + [f"- {n}" for n in notes] if notes else []
    out += ["", "## Releases", ""]
    for rel in releases:
        out += release_section(rel)
    return "\n".join(out).rstrip() + "\n"


def parse_summary(text: str) -> list[tuple[str, str, str]]:
    """(dist, version, shape) of every summary row of a plugin-coverage document."""
    rows: list[tuple[str, str, str]] = []
    lines = text.splitlines()
    if SUMMARY_HEADER not in lines:
        return rows
    for line in lines[lines.index(SUMMARY_HEADER) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--only", action="append", help="dist name(s) to read (default: all)")
    args = ap.parse_args(argv)
    releases: list[Release] = []
    notes: list[str] = []
    for dist, versions in RELEASES.items():
        if args.only and dist not in args.only:
            continue
        for version in versions:
            wheel, how = fetch(args.cache, dist, version)
            print(f"{dist} {version}: {how}", file=sys.stderr)
            if wheel is None:
                notes.append(f"{dist} {version}: {how}")
                continue
            releases.append(analyse(dist, version, wheel))
    notes += NOT_READ
    date = datetime.date.today().isoformat()
    args.output.write_text(render(releases, notes, date))
    print(f"wrote {args.output} ({len(releases)} releases); command: "
          f"{shlex.join(['python', 'tools/check_plugins.py', *(argv if argv is not None else sys.argv[1:])])}",
          file=sys.stderr)
    return 0


# Read from a source repository because no wheel with the code is on the index (kept by hand).
FROM_SOURCE = """\
## IPEX XPU builds (from source, not from a wheel)

The XPU builds of intel-extension-for-pytorch (`2.x+xpu`) are published on Intel's own index,
not on the one read here, and the PyPI wheels (CPU builds) contain no inductor pool code. The
XPU code was read from the source repository instead: intel/intel-extension-for-pytorch,
`intel_extension_for_pytorch/_inductor/xpu/codecache.py` (e.g. commit e91835cc; the file has
several versions on the xpu branches):

- `class XPUAsyncCompile(AsyncCompile)` (AsyncCompile imported from `torch._inductor.codecache`,
  i.e. torch ≤ 2.3) overrides `process_pool()` (static, `lru_cache(1)`) to build its own
  fork-context `ProcessPoolExecutor` (in some versions with `_async_compile_initializer`, in
  others a local watchdog `init`), and `triton()`, which calls `self.process_pool().submit(...)`.
- The module ends with a bare `XPUAsyncCompile.warm_pool()` at import, with no autoload reset.
  IPEX has no `torch.backends` entry point (it is imported explicitly) and its pool is a fork
  pool, not a sidecar, so nothing imports it again: no nesting, but one pool per process that
  imports IPEX's inductor package.
- Default targets: `XPUAsyncCompile.process_pool` is wrapped by the subclass rule (codecache's
  `AsyncCompile.process_pool` row), and `warm_pool` is AsyncCompile's own (wrapped). Workers
  started with the local `init` initializer get no `compile-worker` role from
  `_async_compile_initializer` (they are still recorded as forked children).
"""

# Releases deliberately not read, and why (shown in the document).
NOT_READ = [
    "torch_npu 2.2.x: no release on the index.",
    "intel-extension-for-pytorch 2.7.0: on the index, not read (CPU build like 2.6.0 and 2.8.0; ~100 MB).",
    "intel-extension-for-pytorch XPU builds (`+xpu`, with `XPUAsyncCompile`): not on this index (Intel publishes "
    "them on its own index); the PyPI wheels read here are CPU builds with no inductor pool code.",
    "vllm-ascend 0.11.0 - 0.23.0.post1: listed by `pip index`, but no cp311 x86_64/aarch64 wheel to read.",
]


if __name__ == "__main__":
    sys.exit(main())
