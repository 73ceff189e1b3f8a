"""wp-autotrace: see which processes start PyTorch inductor's compile pools, and why.

Install it, then run an unmodified program with ``WP_AUTOTRACE=1``; the ``.pth`` file installed beside the
package activates tracing in every Python process of the run. Nothing of it stays imported when tracing is off.

This module is also the one file a traced start (and the .pth line's test of a false word) loads of the
package before the start modules: the .pth line calls ``wp_autotrace._preload.start()``, and ``_preload`` is
this module under a second name in sys.modules (as os.path is posixpath), set below, so importing it finds no
second file (one file costs a start ~0.3M instructions); the name is the one the line has called since the
start pack, so a line and a package of different versions (an older copy first on sys.path) still meet.
A plain ``import wp_autotrace`` (the command, the watcher) pays for the loader's code too: ~0.30M instructions
(an empty package 0.43M, this one 0.73M: cachegrind, `python -P -c "import ..."` over `pass`, a bench venv).

The start modules' loader: a traced start's modules loaded from one cached file. A traced process that
imports no target module needs eight modules of this package (START) to run bootstrap.start() and its exit.
Found and loaded one by one through importlib's path finder, each cost about 0.25M instructions beside its
own code (the path search, its spec, its pyc's stat, read and check, the module locks): a fifth of a traced
child's whole start-up (docs/scale.md). Here their code objects are kept together in one file beside their
pycs (the pack: ``_startpack.py``'s pyc slot, ``__pycache__/_startpack.<cache tag>.pyc``, a name pip
uninstall removes; or sys.pycache_prefix's mirror of it) and read in one go.

Invariants:

- Each module is made as importlib's path finder makes it (the same spec, SourceFileLoader, __file__,
  __cached__, __path__, parent attribute, the spec's _initializing; tests/test_preload.py compares them) and runs
  its own code, compiled from its own source: the pack is only a cache, each fact keeps its one home in its module.
  Each module made costs a start ~57K instructions beside its code (its stat, path, spec, loader, module), and
  ~0.11M with its own imports and globals (BENCHMARKS.md, "start, sixteenth round"): a module is in START only
  where every traced start runs its code.
- START's code modules (all but its PACKAGES) run as ONE module where the pack holds the joined module's code
  (JOINED: tools/join_start.py writes it from their sources, which stay the rooms): made as importlib would make
  bootstrap's from that file, in sys.modules and as its parent's attribute under each of their names before its
  body runs, so an import of any of them, and a test's patch of its globals, reaches the code that runs. The pack
  holds it only where its first line fingerprints the sources as they are (packwrite.py; an edit not joined again
  runs each source's own code), and it is made only where none of them is in sys.modules yet.
- The pack is used only when it was written by this Python (magic number, cache tag and -O level in its
  name) for these sources (and the joined file) in this folder, each one's size and mtime_ns as when read.
  Anything else (missing, unreadable, corrupt, stale) loads the modules one by one through their
  loaders, which read or write their pycs as importlib would, and then writes a fresh pack atomically
  (a temporary file renamed over it; packwrite.py, imported for that write only) unless bytecode may not be
  written (-B, PYTHONDONTWRITEBYTECODE).
- LATER's modules (code a plain start never runs that a forked child, an exec, a signal or an exit with no
  descriptor free may need) are stamped and packed with START's, their code kept as marshalled bytes (or, where
  the pack was not current, the code object their loader read) and made by later() at their first need from
  memory: no import statement, no module lock, no file (tests/test_activation.py). Without a current pack (-B and
  PYTHONDONTWRITEBYTECODE, common in containers, never write one) their loader reads their code at start, with
  START's: a read at first need would find no descriptor free at an exit with the table full, and the exit record
  (or the note that says it was lost) went with it.
- A module already in sys.modules is never loaded again. A source that is not a file (a zip, a frozen
  or sourceless install) leaves the rest to the plain import statement.
- Nothing here raises for the cache; what a module's own body raises propagates as from an import.

PYTEST_DONT_REWRITE: a traced pytest session loads wp_autotrace.pytest_plugin and would warn that this
package was imported (by the .pth) before it could rewrite its asserts: a difference on the host's output.
Nothing here needs rewriting.
"""

__version__ = "0.1.0"

import marshal
import os
import sys

# Not typing.TYPE_CHECKING: importing typing costs every traced process milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, ModuleType
    from typing import Any

# The modules bootstrap.start() imports, each after the ones it imports (tests/test_activation.py holds
# what a traced start loads; tests/test_preload.py that this list is that set and in this order).
START = ("wp_autotrace.runtime", "wp_autotrace.common", "wp_autotrace.common.core", "wp_autotrace.common.env",
         "wp_autotrace.common.redact", "wp_autotrace.runtime.host_patches", "wp_autotrace.runtime.sink",
         "wp_autotrace.runtime.bootstrap")
# Modules kept in the pack as their marshalled code and made at their first need (later()), never at start: code a
# plain traced start never runs that a forked child, an exec, a signal or an exit with no descriptor free may need,
# where an import may hang (a module lock a vanished parent thread held) or fail (no descriptor free). Each imports
# only START modules; a START module that needs one reaches it through later() (runtime/sink.py rare()).
LATER = ("wp_autotrace.runtime.sink_rare", "wp_autotrace.runtime.host_calls")
PACKAGES = ("wp_autotrace.runtime", "wp_autotrace.common")  # START's first: the rest of START is its code modules
# START's code modules as ONE generated module (tools/join_start.py; the sources stay the rooms): a pack written where
# it was made from the sources as they are holds its code in place of theirs, and load() makes it once, in sys.modules
# under each of their names (a module made and its imports of the others cost a start ~0.11M each; its docstrings
# and annotations, left out there, ~0.3M: BENCHMARKS.md, "start, eighteenth round")
JOINED = "wp_autotrace.runtime._start_joined"
# The layout: (format, magic, folder, ((name, mtime_ns, ctime_ns, size), ...), ((pyc path, code), ...), joined),
# START's modules then LATER's (stamps: then JOINED's), each LATER module's code marshalled (bytes: read with the
# pack, a copy, not unmarshalled); joined: (its pyc path, its code), each code module's code then None, or None
_FORMAT = 4
# A LATER module not made yet: (source path, pyc path, its code: marshalled from the pack, else the code object its
# loader read at start)
later_code: "dict[str, tuple[str, str, Any]]" = {}


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: list[bytes] = []
        # Its size and one byte more: the whole file in one read, into a buffer of its size (a 1 MiB buffer cut
        # down after the read maps and unmaps memory, ~30 us of a traced start); a short read is the end, asked once
        # more with one byte; more reads if it grew meanwhile. No buffer of 128 KiB or more (the pack's own is its
        # size, under that): glibc's malloc maps one on its own and, freeing it, raises its mapping threshold to
        # that size for the rest of the process, so a traced host's later allocations of such sizes stayed on its
        # heap where untraced they are mapped and given back at free (the probe of 1 MiB that was here did that)
        want = os.fstat(fd).st_size + 1
        while True:
            chunk = os.read(fd, want)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            want = 1 if len(chunk) < want else 1 << 16
    finally:
        os.close(fd)


def _new_module(name: str, path: str, cached: str) -> "ModuleType":
    """The module importlib's path finder makes for this source before running it (spec_from_file_location
    and module_from_spec's attributes, in their order), built directly: those two cost ~0.1M instructions
    a module. cached is its pyc's path (cache_from_source's, kept in the pack). Built by hand only on the
    Pythons whose module_from_spec it was checked against (3.9-3.13: tests/test_preload.py on each)."""
    boot = sys.modules["_frozen_importlib"]
    loader = sys.modules["_frozen_importlib_external"].SourceFileLoader(name, path)
    is_package = name in PACKAGES
    spec = boot.ModuleSpec(name, loader, origin=path, is_package=is_package)
    if is_package:
        spec.submodule_search_locations.append(path.rpartition(os.sep)[0])  # importlib's _path_split's folder
    if sys.version_info >= (3, 14):  # importlib's own attributes there (3.15 sets no __cached__): ~40K more
        spec.has_location = True
        spec.cached = cached
        made: ModuleType = boot.module_from_spec(spec)
        return made
    # has_location's and cached's own slots, as their setters fill them (a Python call each: ~13K a start), and
    # parent as its property answers it, on the Pythons this module is built by hand for
    spec._set_fileattr = True
    spec._cached = cached
    module = type(sys)(name)  # its __dict__ starts as __name__, __doc__, __package__, __loader__, __spec__
    attrs = module.__dict__
    attrs.update(__loader__=loader, __package__=name if is_package else name.rpartition(".")[0], __spec__=spec)
    if is_package:
        attrs["__path__"] = spec.submodule_search_locations
    attrs.update(__file__=path, __cached__=cached)
    return module


def _run(names: "tuple[str, ...]", module: "ModuleType", code: "CodeType") -> None:
    """exec the module's code as importlib does (under each of names: the joined module's, in sys.modules before its
    body runs, as a parent's attribute after): in sys.modules while it runs, out again if it raises, its spec's
    _initializing true meanwhile and false after (importlib's _load_unlocked): every import statement that finds a
    module in sys.modules asks its spec for _initializing (CPython's import_ensure_initialized), and a spec without
    it raised and cleared an AttributeError there (~5K instructions an import of a start module: 50K a start)."""
    spec: Any = module.__spec__
    spec._initializing = True
    try:
        for name in names:
            sys.modules[name] = module
        try:
            exec(code, module.__dict__)
        except BaseException:
            for name in names:
                sys.modules.pop(name, None)
            raise
    finally:
        spec._initializing = False
    for name in names:
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)


def load() -> None:
    """Put every START module in sys.modules (from the pack when it is current), in START's order."""
    base = os.path.dirname(__file__)
    try:
        ext = sys.modules["_frozen_importlib_external"]
        stamps = []
        paths = []  # made once: the stamps' and the modules'
        for name in START + LATER + (JOINED,):
            # By slicing and concatenation, inline: os.path.join's Python-level checks cost ~15K instructions a
            # call (twice a module: ~0.3M a start), and a helper or a comprehension each its own code object
            path = base + os.sep + name.partition(".")[2].replace(".", os.sep)
            path += os.sep + "__init__.py" if name in PACKAGES else ".py"
            st = os.stat(path)
            paths.append(path)
            # ctime too: an installer that keeps an archive's mtimes can put a new source of the old size and
            # mtime_ns (and compile its pyc anew), but no utime sets a ctime back
            stamps.append((name, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
        # The pack's path: _startpack.py's pyc slot, which pip uninstall removes. Its folder, cache tag and -O level
        # are this package's own pyc path's (importlib made it by cache_from_source at this start, as it would the
        # pack's); cache_from_source itself costs a start ~20K instructions.
        folder, sep, own = (__spec__.cached or "").rpartition(os.sep)
        pack = (folder + sep + "_startpack" + own[8:] if own.startswith("__init__.") and folder else
                ext.cache_from_source(base + os.sep + "_startpack.py"))
    except (OSError, KeyError, ValueError, AttributeError, NotImplementedError):
        return  # not plain source files here: bootstrap's own import statement loads them
    want = (_FORMAT, ext.MAGIC_NUMBER, base, tuple(stamps))
    try:
        fmt, magic, folder, got_stamps, entries, joined = marshal.loads(_read(pack))
        current = (fmt, magic, folder, got_stamps) == want and len(entries) == len(START + LATER)
    except Exception:  # missing, unreadable or not a pack of ours: it is only a cache
        current, entries, joined = False, (), None
    mixed = False  # a code module imported before this start (by another .pth): the rest each from its source
    if current and joined is not None:
        for name in START[len(PACKAGES):]:
            if name in sys.modules:
                mixed = True
    made = []
    for i, name in enumerate(LATER, len(START)):  # first: a START module's body may look its LATER module up
        path = paths[i]
        cached, code = entries[i] if current else _read_later(ext, name, path)
        later_code[name] = (path, cached, code)
    for i, name in enumerate(START):
        loaded = sys.modules.get(name)
        if current and loaded is not None:
            continue
        path = paths[i]
        if current:
            cached, code = entries[i]
            if code is None and not mixed:  # joined: made at the first code module's turn (bootstrap's), under all
                if joined is not None:
                    _run(START[len(PACKAGES):], _new_module(START[-1], paths[-1], joined[0]), joined[1])
                    joined = None
                continue
            if code is None:  # the pack stays as it is: current, only this process cannot use the joined module
                cached = ext.cache_from_source(path)
                code = ext.SourceFileLoader(name, path).get_code(name)
        else:  # the module's own loader reads its pyc (or compiles its source and writes the pyc)
            cached = ext.cache_from_source(path)
            code = ext.SourceFileLoader(name, path).get_code(name)
            made.append((cached, code))
        if loaded is None:
            _run((name,), _new_module(name, path, cached), code)
    # Where the pack's folder cannot be written (an install the user does not own) no start writes one: none
    # imports the writer either (a file more, ~0.5M instructions)
    if not current and not sys.dont_write_bytecode and os.access(pack.rpartition(os.sep)[0], os.W_OK):
        # The writer is a module of its own (a start whose pack is current, nearly every one, never runs it: ~23K
        # instructions), out of sys.modules again after: this start leaves the modules one that read its pack leaves
        try:
            from . import packwrite
            packwrite.write_pack(pack, want, made, paths, base + os.sep + "__init__.py")
        except ImportError:  # a partial install: the pack is only a cache
            pass
        finally:
            sys.modules.pop(__name__ + ".packwrite", None)
            globals().pop("packwrite", None)


def _read_later(ext: "Any", name: str, path: str) -> "tuple[str, Any]":
    """A LATER module's (pyc path, code) where the pack is not current (read now, for the pack about to be written and
    for later(): -B too, whose starts have no pack): its pyc's marshalled code where the header (PEP 552) is
    importlib's timestamp check's for this source (~0.2M less a module than get_code's unmarshal, for a -B start that
    may never need it); else get_code's code object."""
    cached = ext.cache_from_source(path)
    try:
        code = _read(cached)
    except OSError:  # no pyc (or unreadable): get_code compiles the source
        code = b""
    st = os.stat(path)
    if code[:12] != ext.MAGIC_NUMBER + bytes(4) + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") or (
            int.from_bytes(code[12:16], "little") != st.st_size & 0xFFFFFFFF):
        return cached, ext.SourceFileLoader(name, path).get_code(name)
    return cached, code[16:]


def later(name: str) -> "ModuleType":
    """The LATER module name: sys.modules' own, else made now from its marshalled code as load() makes the START
    modules (no import statement: no module lock, no file: safe in a forked child, a signal's path, an exit with
    no descriptor free), else (load() never ran: a plain import of the start modules) imported. Two threads at
    once may each make one; a LATER module holds functions and constants only (its state lives in the module
    that calls it), so either serves."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    entry = later_code.get(name)
    if entry is None:
        __import__(name)
        return sys.modules[name]
    path, cached, code = entry
    module = _new_module(name, path, cached)
    _run((name,), module, marshal.loads(code) if type(code) is bytes else code)
    return module


def load_and_start() -> None:
    """Load the start modules, then bootstrap.start() (which never raises): start()'s call, once it has tested."""
    load()
    __import__("wp_autotrace.runtime.bootstrap")
    sys.modules["wp_autotrace.runtime.bootstrap"].start()  # type: ignore[attr-defined]


# What leaves tracing off (common/env.py FALSE_WORDS, which is not imported here: off, nothing more loads).
_FALSE = ("", "0", "false", "no", "off")
_handed = False  # start() called load_and_start(): the line's second run in a venv returns at once


# The line tests only whether either variable is set, since site compiles its text at every interpreter start
# (~12K instructions a token); every other test is here, compiled once, in the module every traced start loads.
# Measured (bench/pth_line.py, instructions over no .pth, in a venv, whose site runs the line twice): the line
# costs a traced start 0.16M beyond the import it needs anyway (1.06M when it compiled these tests from its
# text); a false word costs the package imported and dropped twice, which is rare (figure: docs/scale.md).
def start() -> None:
    """The .pth line's call, made when WP_AUTOTRACE or WP_AUTOTRACE_GUARD is set at all (and, 3.15+,
    wp_autotrace_start.start()'s after its own test): load_and_start() once per process, in its main
    interpreter, when either is not a false word (wp_autotrace_start.wanted()'s test; bootstrap's
    read_settings() reads them so too); otherwise _forget(), so that such an interpreter ends with the import
    state it has untraced. Never raises:
    load_and_start() does not; the rest reads dicts."""
    global _handed
    if _handed:
        return
    env = os.environ
    # wp_autotrace_start.in_main_interpreter()'s test (why it is right on each Python: there; it is not imported here).
    is_main = sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter")
    if ((env.get("WP_AUTOTRACE", "").strip().lower() not in _FALSE
         or env.get("WP_AUTOTRACE_GUARD", "").strip().lower() not in _FALSE)
            and (is_main() if is_main is not None else "_signal" in sys.modules)):
        _handed = True
        load_and_start()
    else:
        _forget()


def _forget() -> None:
    """Undo the line's import: this package and its second name out of sys.modules, with the path finder's
    entry for its folder, unless another of its modules is loaded (then only the name)."""
    modules = sys.modules
    modules.pop(_ALIAS, None)
    if modules.get(__name__) is not _preload:
        return
    for name in modules:  # a loop: a generator is a code object more for every start to load
        if name.startswith(__name__ + "."):
            return
    del modules[__name__]
    for folder in __path__:  # type: ignore[name-defined]  # a package's, set before its body runs
        sys.path_importer_cache.pop(folder, None)


# The .pth line's import, `wp_autotrace._preload`, finds this module here once its package is imported, and
# its attribute `_preload`: no second file. Set last: a body that raised above leaves no second name.
_ALIAS = __name__ + "._preload"
_preload = sys.modules[_ALIAS] = sys.modules[__name__]
