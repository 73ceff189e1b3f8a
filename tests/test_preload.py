"""The start modules' pack (the loader in wp_autotrace/__init__.py): the same modules as importlib makes, never stale.

Each test copies the package into its own folder (no pycs, no pack) and runs a fresh, untraced interpreter
that imports that copy, so the pack it writes is its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wp_autotrace

from .conftest import clean_env, read_log, run_python

ROOT = Path(__file__).resolve().parent.parent

# What a module looks like after its import: every attribute importlib's path finder sets, in order.
DESCRIBE = r'''
import json, sys
def describe(name):
    m = sys.modules[name]
    s = m.__spec__
    return {"keys": list(vars(m))[:8], "file": m.__file__, "cached": m.__cached__, "package": m.__package__,
            "path": getattr(m, "__path__", None), "loader": [type(m.__loader__).__name__, m.__loader__.name,
            m.__loader__.path], "same_loader": m.__loader__ is s.loader, "spec": [s.name, s.origin, s.cached,
            s.parent, s.has_location, s.submodule_search_locations, s.loader_state, type(s).__name__,
            getattr(s, "_initializing", None)],
            "path_is_spec's": getattr(m, "__path__", None) is s.submodule_search_locations,
            "names": sorted(vars(m)), "parent_attr": getattr(sys.modules[name.rpartition(".")[0]],
            name.rpartition(".")[2], None) is m}
'''

LOAD = DESCRIBE + r'''
imported = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        imported.append(name)
sys.meta_path.insert(0, Watch())
import wp_autotrace._preload as p
p.load()
at_start = sorted(set(p.LATER) & set(sys.modules))
for n in p.LATER:
    p.later(n)
print(json.dumps({"imported": imported, "at_start": at_start, "modules": {n: describe(n) for n in p.START + p.LATER},
                  "ids": {n: id(sys.modules[n]) for n in p.START + p.LATER}}))
'''

PLAIN = DESCRIBE + r'''
import wp_autotrace._preload as p
import wp_autotrace.runtime.bootstrap
print(json.dumps({"modules": {n: describe(n) for n in p.START + p.LATER}}))
'''


def _copy(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "wp_autotrace", site / "wp_autotrace", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def _run(site: Path, code: str, *flags: str) -> dict:  # type: ignore[type-arg]
    env = clean_env(PYTHONPATH=str(site))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the pack is written only where pycs may be
    res = run_python([*flags, "-c", code], env, cwd=site)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _pack(site: Path) -> Path:
    found = sorted((site / "wp_autotrace" / "__pycache__").glob("_startpack.*.pyc"))
    assert len(found) == 1, found
    return found[0]


# What the pack's start made of core.py: its PRELOAD_PROBE, a line the tests append to the copied source.
_PROBE = ("import wp_autotrace._preload as p; p.load(); import sys; "
          "print(sys.modules['wp_autotrace.common.core'].PRELOAD_PROBE)")


def _probed_site(tmp_path: Path) -> tuple[Path, Path]:
    """A copied install whose common/core.py (a START module) says PRELOAD_PROBE = 1, started once through the
    pack (which writes it)."""
    site = _copy(tmp_path)
    probed = site / "wp_autotrace" / "common" / "core.py"
    with probed.open("a") as f:
        f.write("PRELOAD_PROBE = 1\n")
    assert _run(site, _PROBE) == 1
    return site, probed


def test_modules_from_the_pack_are_the_ones_importlib_makes(tmp_path: Path) -> None:
    """Written (no pack yet: each source run) and read (pack current: START's code modules are the joined module):
    every START package and LATER module has importlib's spec, loader, __file__, __cached__, __path__, attribute order
    and names; the joined module is made as importlib would make bootstrap's from the joined file, under each code
    module's name (sys.modules, its parent's attribute) and holds each one's names; no START module went through a
    finder; a LATER module is not made by load() and is made alike by later(), through no finder either."""
    site = _copy(tmp_path)
    plain = _run(site, PLAIN)["modules"]
    assert not list((site / "wp_autotrace" / "__pycache__").glob("_startpack.*.pyc"))  # a plain import writes none
    first = _run(site, LOAD)
    stamp = _pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino
    second = _run(site, LOAD)
    assert (_pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino) == stamp  # read, not written again
    for got in (first, second):
        assert not [n for n in got["imported"] if n in plain], got["imported"]  # each START module after its imports
        assert got["at_start"] == []
    assert first["modules"] == plain
    assert plain["wp_autotrace.runtime.bootstrap"]["cached"].startswith(str(site))
    from wp_autotrace import JOINED, PACKAGES, START

    code = START[len(PACKAGES):]
    assert {n: m for n, m in second["modules"].items() if n not in code} == {n: m for n, m in plain.items()
                                                                              if n not in code}
    joined = second["modules"][START[-1]]
    path = str(site.joinpath(*JOINED.split(".")).with_suffix(".py"))
    cached = importlib.util.cache_from_source(path)
    assert (joined["file"], joined["cached"], joined["loader"]) == (path, cached, ["SourceFileLoader", START[-1], path])
    assert joined["spec"][:3] == [START[-1], path, cached] and joined["package"] == "wp_autotrace.runtime"
    for name in code:
        assert second["ids"][name] == second["ids"][START[-1]] and second["modules"][name]["parent_attr"], name
        # but __annotations__: the join leaves annotations out (tools/join_start.py)
        assert set(plain[name]["names"]) - {"__annotations__"} <= set(joined["names"]), name


def test_a_changed_source_is_run_and_the_pack_written_again(tmp_path: Path) -> None:
    """A pack older than one of its sources is never used: the changed module runs its new code."""
    site, probed = _probed_site(tmp_path)
    before = _pack(site).read_bytes()
    with probed.open("a") as f:
        f.write("PRELOAD_PROBE = 2\n")
    st = probed.stat()
    os.utime(probed, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a coarse clock: still later
    assert _run(site, _PROBE) == 2
    assert _pack(site).read_bytes() != before


def test_a_corrupt_pack_is_replaced_and_no_write_under_dont_write_bytecode(tmp_path: Path) -> None:
    """A pack that is not ours (garbage, or the slot's own pyc as an install compiles it) is ignored and written
    anew; -B leaves none behind but loads all the same."""
    site = _copy(tmp_path)
    code = "import wp_autotrace._preload as p; p.load(); import sys; print(sorted(set(p.START) - set(sys.modules)))"
    assert _run(site, code, "-B") == []
    assert not (site / "wp_autotrace" / "__pycache__").exists() or not _pack_list(site)
    assert _run(site, code) == []
    pack = _pack(site)
    subprocess.run([sys.executable, "-m", "py_compile", str(site / "wp_autotrace" / "_startpack.py")], check=True,
                   env=clean_env())  # what pip's compile at install leaves in the pack's slot: a real pyc
    assert pack.read_bytes()[:4] == importlib.util.MAGIC_NUMBER
    assert _run(site, code) == []
    assert pack.read_bytes()[:4] != importlib.util.MAGIC_NUMBER  # the pack again
    pack.write_bytes(b"\x00not a pack")
    assert _run(site, code) == []
    assert _pack(site).read_bytes() != b"\x00not a pack"
    assert not [p for p in pack.parent.iterdir() if p.name.startswith(pack.name + ".")]  # no temporary left


_SAME = ("import json, sys, wp_autotrace._preload as p; p.load(); m = sys.modules; c = m['wp_autotrace.common.core']; "
         "print(json.dumps([c.__dict__.get('PRELOAD_PROBE'), c is m['wp_autotrace.runtime.sink'], "
         "sorted(set(p.START) - set(m))]))")


def test_a_source_edited_after_the_join_runs_its_own_code_from_the_pack(tmp_path: Path) -> None:
    """The joined module was made from the sources as they were: after an edit (not joined again) the pack holds
    each source's own code, and a start that reads it runs the edited code (its modules made one by one)."""
    site, _ = _probed_site(tmp_path)
    stamp = _pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino
    assert _run(site, _SAME) == [1, False, []]
    assert (_pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino) == stamp  # read, not written again


def test_a_code_module_imported_before_the_start_is_kept_and_the_rest_made_each_on_its_own(tmp_path: Path) -> None:
    """A START code module already in sys.modules (imported before the start: by another .pth) stays the one
    there; the joined module is not made over it, nor beside it (two copies of one module's state): each of the
    rest is made from its own source, and the pack, current, is not written again."""
    site = _copy(tmp_path)
    assert _run(site, _SAME) == [None, False, []]  # writes the pack
    assert _run(site, _SAME) == [None, True, []]  # reads it: joined
    stamp = _pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino
    code = ("import json, sys, wp_autotrace.common.env as before, wp_autotrace._preload as p; p.load(); "
            "m = sys.modules; print(json.dumps([m['wp_autotrace.common.env'] is before, "
            "before.__file__.endswith('env.py'), "
            "m['wp_autotrace.common.core'] is m['wp_autotrace.runtime.sink'], sorted(set(p.START) - set(m))]))")
    assert _run(site, code) == [True, True, False, []]
    assert (_pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino) == stamp  # still current: not written again


def _pack_list(site: Path) -> list[Path]:
    return sorted((site / "wp_autotrace" / "__pycache__").glob("_startpack.*.pyc"))


def test_start_lists_what_bootstrap_imports() -> None:
    """START and LATER are every module of the package that importing bootstrap loads (but the package and _preload):
    imported so, not from the pack, a START module loads its LATER module with itself."""
    code = ("import sys; import wp_autotrace._preload as p; before = set(sys.modules); "
            "import wp_autotrace.runtime.bootstrap; print(sorted(m for m in set(sys.modules) - before "
            "if m.startswith('wp_autotrace')))")
    res = run_python(["-c", code], clean_env(), cwd=ROOT)
    assert res.returncode == 0, res.stderr
    from wp_autotrace._preload import LATER, START
    assert sorted(START + LATER) == json.loads(res.stdout.replace("'", '"'))
    assert sys.executable  # the interpreter under test ran it


def test_processes_that_write_the_pack_at_once_leave_one_whole_pack(tmp_path: Path) -> None:
    """Eight interpreters started together with no pack each write one (a run's sidecar and workers start
    so): every one loads all START modules, one current pack is left (the next start reads it, writes
    nothing) and no temporary file."""
    site = _copy(tmp_path)
    assert _run(site, "import wp_autotrace.runtime.bootstrap; print(0)") == 0  # the pycs, as an install makes them
    env = clean_env(PYTHONPATH=str(site))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = "import wp_autotrace._preload as p; p.load(); import sys; print(sorted(set(p.START) - set(sys.modules)))"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=site, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs) and outs == [("[]\n", "")] * 8, outs
    pack = _pack(site)
    stamp = pack.stat().st_mtime_ns, pack.stat().st_ino
    assert _run(site, code) == []
    assert (pack.stat().st_mtime_ns, pack.stat().st_ino) == stamp
    assert [p.name for p in pack.parent.iterdir() if p.name.startswith("_startpack.")] == [pack.name]


def test_a_source_installed_again_with_its_old_mtime_and_size_is_run_anew(tmp_path: Path) -> None:
    """An installer that keeps the archive's mtimes (a reproducible wheel's fixed date, tar, rsync -t) can
    put a new version whose changed module has the old one's size and mtime_ns and compile its pyc anew,
    while a pack stays where nothing removed it (tar, rsync: pip's uninstall does remove it): the plain
    import runs the new code, so must the pack's start. The source's ctime, which no utime can set back,
    tells the install apart."""
    site, probed = _probed_site(tmp_path)
    st = probed.stat()
    text = probed.read_text()
    probed.unlink()  # the uninstall, then the new version's file
    probed.write_text(text.replace("PRELOAD_PROBE = 1\n", "PRELOAD_PROBE = 2\n"))
    os.utime(probed, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (probed.stat().st_size, probed.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    _run(site, f"import py_compile; py_compile.compile({str(probed)!r}, doraise=True); print(1)")
    assert _run(site, "import wp_autotrace.common.core as v; print(v.PRELOAD_PROBE)") == 2  # untraced
    assert _run(site, _PROBE) == 2


# Under -B no pack is written; load() keeps each LATER module's code as its pyc holds it (marshalled), or, where the
# pyc is not this source's, as its loader compiles it.
_LATER_PROBE = ("import json, wp_autotrace as p; p.load(); name = 'wp_autotrace.runtime.sink_rare'; "
                "kind = type(p.later_code[name][2]).__name__; "
                "print(json.dumps([kind, getattr(p.later(name), 'PRELOAD_PROBE', None)]))")


def test_under_dont_write_bytecode_a_later_module_is_its_pyc_only_while_the_pyc_is_its_sources(tmp_path: Path) -> None:
    """-B: a LATER module's pyc, where its header names the source's mtime and size, is kept as bytes (no unmarshal
    at start); a source changed since (same folder, a new mtime) is compiled by its loader and runs its new code."""
    site = _copy(tmp_path)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "wp_autotrace")], check=True, env=clean_env())
    assert _run(site, _LATER_PROBE, "-B") == ["bytes", None]
    rare = site / "wp_autotrace" / "runtime" / "sink_rare.py"
    with rare.open("a") as f:
        f.write("PRELOAD_PROBE = 1\n")
    st = rare.stat()
    os.utime(rare, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert _run(site, _LATER_PROBE, "-B") == ["code", 1]


_PACK_SLOT = ("import json, importlib.util, wp_autotrace._preload as p; p.load(); import sys; "
              "print(json.dumps([importlib.util.cache_from_source(p.__file__.rpartition('/')[0] + '/_startpack.py'), "
              "sorted(set(p.START) - set(sys.modules))]))")


def test_the_pack_is_in_its_slot_under_each_optimization_level_and_pycache_prefix(tmp_path: Path) -> None:
    """The pack is _startpack.py's pyc slot as cache_from_source names it in that interpreter (its -O level, its
    sys.pycache_prefix folder; the loader derives it from the package's own pyc path), written at the first start
    and read, not written again, at the next."""
    site = _copy(tmp_path)
    for flags, extra in (((), {}), (("-O",), {}), (("-OO",), {}), ((), {"PYTHONPYCACHEPREFIX": str(tmp_path / "pc")}),
                         (("-O",), {"PYTHONPYCACHEPREFIX": str(tmp_path / "pc")})):
        env = clean_env(PYTHONPATH=str(site), **extra)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        first = run_python([*flags, "-c", _PACK_SLOT], env, cwd=site)
        assert first.returncode == 0 and first.stderr == "", first.stderr
        slot, missing = json.loads(first.stdout)
        assert missing == [] and Path(slot).read_bytes()[:4] != importlib.util.MAGIC_NUMBER, (flags, extra)  # a pack
        stamp = os.stat(slot).st_mtime_ns, os.stat(slot).st_ino
        again = run_python([*flags, "-c", _PACK_SLOT], env, cwd=site)
        assert json.loads(again.stdout) == [slot, []] and (os.stat(slot).st_mtime_ns, os.stat(slot).st_ino) == stamp
    packs = [p for p in (tmp_path / "pc").rglob("_startpack.*.pyc")]
    assert len(packs) == 2 and len(_pack_list(site)) == 3  # "", opt-1, opt-2 beside the package; two under the prefix


_WRITER = ("import json, sys\nimported = []\nclass Watch:\n    def find_spec(self, name, path=None, target=None):\n"
           "        imported.append(name)\nsys.meta_path.insert(0, Watch())\n"
           "import wp_autotrace._preload as p\np.load()\n"
           "print(json.dumps(['wp_autotrace.packwrite' in imported, 'wp_autotrace.packwrite' in sys.modules, "
           "hasattr(p, 'packwrite'), sorted(set(p.START) - set(sys.modules)), sorted(sys.modules)]))")


def test_only_a_start_that_writes_the_pack_imports_its_writer_and_leaves_it_out_of_sys_modules(tmp_path: Path) -> None:
    """The pack's writer (packwrite.py) is imported by a start that writes a pack, and by no other: not by one that
    reads a current pack, nor under -B or where the pack's folder cannot be written (no pack written: a pycache prefix
    below a file, which even root cannot write). The start that imported it takes it out of sys.modules and the
    package again: it leaves the modules a start that read its pack leaves."""
    site = _copy(tmp_path)
    assert _run(site, _WRITER, "-B")[:4] == [False, False, False, []]
    (tmp_path / "file").touch()
    env = clean_env(PYTHONPATH=str(site), PYTHONPYCACHEPREFIX=str(tmp_path / "file" / "pyc"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    unwritable = run_python(["-c", _WRITER], env, cwd=site)
    assert unwritable.stderr == "" and json.loads(unwritable.stdout)[:4] == [False, False, False, []]
    assert not _pack_list(site)
    wrote = _run(site, _WRITER)
    assert wrote[:4] == [True, False, False, []]
    stamp = _pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino
    read = _run(site, _WRITER)
    assert read[:4] == [False, False, False, []]
    assert wrote[4] == read[4]  # nothing the writer imported (its checksum's) is left in the host's sys.modules
    assert (_pack(site).stat().st_mtime_ns, _pack(site).stat().st_ino) == stamp


# Whether a block just over glibc's default mapping threshold (128 KiB) is mapped on its own: mallinfo2's count of
# mapped blocks, before and while it lives (null where the C library has no mallinfo2: not glibc 2.33+)
_MAPPED = r'''
import ctypes, json
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
info = getattr(ctypes.CDLL(None), "mallinfo2", None)
if info is not None:
    info.restype = Info
    before = info().hblks
    block = bytes(132000)
    print(json.dumps(info().hblks - before))
else:
    print("null")
'''


def test_a_traced_start_leaves_the_hosts_malloc_mapping_as_untraced(tmp_path: Path) -> None:
    """A traced start, the one that writes the pack included, leaves glibc's malloc serving a block just over 128 KiB
    as an untraced process does: mapped on its own, given back at free. The loader once probed the pack's end with a
    1 MiB read, whose buffer's free raised glibc's mapping threshold to 1 MiB for the rest of the host's process; a
    pack grown past 128 KiB would do the same with its own buffer: this fails then too. The sources' pycs are there,
    as pip compiles them at install: a start that must compile the joined source first (an install without pycs, an
    edit) maps and frees larger blocks in CPython's compiler, as compiling any source of that size does: not held."""
    site = _copy(tmp_path)
    read = ("wp_autotrace", *wp_autotrace.START, *wp_autotrace.LATER, wp_autotrace.JOINED, "wp_autotrace.packwrite")
    folders = [site.joinpath(*name.split(".")) for name in read]
    subprocess.run([sys.executable, "-m", "py_compile", *[str(f / "__init__.py" if f.is_dir() else f.with_suffix(".py"))
                                                          for f in folders]], check=True)
    log = tmp_path / "log.jsonl"
    log.touch(mode=0o600)  # a descendant opens the log its root made
    untraced = clean_env(PYTHONPATH=str(site))
    traced = clean_env(PYTHONPATH=str(site), WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="r",
                       WP_AUTOTRACE_ROOT_PID="1")
    for env in (untraced, traced):
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the pack is written only where pycs may be
    plain = run_python(["-S", "-c", _MAPPED], untraced, cwd=tmp_path)
    assert plain.stderr == "", plain.stderr
    if json.loads(plain.stdout) != 1:
        pytest.skip(f"this C library does not map such a block on its own here ({plain.stdout.strip()})")
    code = "import wp_autotrace._preload as p\np.start()\n" + _MAPPED
    runs = [run_python(["-S", "-c", code], traced, cwd=tmp_path) for _ in range(3)]  # the pack written, then read
    assert [(r.stderr, r.stdout) for r in runs] == [("", "1\n")] * 3
    assert len(_pack_list(site)) == 1
    assert [r["event"] for r in read_log(log)] == ["process_start", "process_exit"] * 3  # traced indeed
