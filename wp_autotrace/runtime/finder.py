"""The meta-path finder that wraps targets the moment their module defines them.

A post-import hook fires after the module body has run, too late for the
bare ``AsyncCompile.warm_pool()`` at the bottom of torch 2.1 - 2.4's
codecache/async_compile, and too late for ``os.register_at_fork`` and
``atexit.register``, which capture functions at definition time. So while a
target module's body runs (with its own dict as globals and locals, exactly as
importlib runs it), three hooks are in place: ``builtins.__build_class__``
wraps a target class's methods as the class statement completes (and the
module's top-level target functions defined above it: torch 2.2 - 2.3's
import-time warm hands its pool the compile initializer defined there), and
``os.register_at_fork`` / ``atexit.register`` are handed the wrapper of a
target function the module registers. Every other target is wrapped right
after the body. The hooks act only on code of the module being executed and
are always restored; they live in target_patches.py, listed with the tracer's
other host patches in host_patches.py.
"""

import os
import sys

from ..common.targets import CONFIG, IMPORT, Target
from .sink import imported_by_tracer, warn
from .target_patches import install_body_hooks, restore_body_hooks

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    # make_wrapper(target, label) -> wrap(raw, method): the wrapper of raw (method: its first
    # argument is the instance or class)
    MakeWrapper = Callable[[Target, str], Callable[[Any, bool], Any]]
    # notify(kind, target, module_or_None); kind is "import" or "loaded"
    Notify = Callable[[str, Target, Any], None]
    # report(where, exc): a contained tracer fault
    Report = Callable[[str, BaseException], None]

# The code of _PatchingLoader.exec_module is compiled under importlib's own file
# name: CPython strips importlib's frames (up to _call_with_frames_removed) from
# a failing import's traceback, and so strips this one with them.
_IMPORTLIB_FILE = "<frozen importlib._bootstrap>"
_EXEC_MODULE_SOURCE = """
def exec_module(self, module):
    module.__loader__ = self._loader  # the module's own code sees its real loader, not us
    if module.__spec__ is not None:
        module.__spec__.loader = self._loader
    get_code = getattr(self._loader, "get_code", None)
    code = get_code(module.__name__) if get_code is not None else None
    self._finder.before_body(module, code)
    done = False
    try:
        if code is None:
            self._loader.exec_module(module)
        else:
            _call_with_frames_removed(exec, code, module.__dict__)
        done = True
    finally:
        self._finder.after_body(module, code, done)
"""


class _PatchingLoader:
    """Wraps a module's loader to run its body with the target hooks in place."""

    def __init__(self, loader: "Any", finder: "TargetFinder") -> None:
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name: str) -> "Any":
        return getattr(self._loader, name)

    def create_module(self, spec: "Any") -> "Any":
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    exec_module: "Any" = None  # compiled by _loader_ready, when the first target module loads


def _loader_ready() -> None:
    """Compile _PatchingLoader.exec_module once, when a target module first loads.

    Not at import: the compiler's first use costs about 1 ms, paid by every
    traced process, most of which never load a target. Two threads may both
    compile it: the results are alike.
    """
    if _PatchingLoader.exec_module is None:
        # importlib._bootstrap is _frozen_importlib, loaded in every interpreter (importing
        # the importlib package would cost start-up time).
        namespace = {"_call_with_frames_removed": vars(sys.modules["_frozen_importlib"])["_call_with_frames_removed"]}
        exec(compile(_EXEC_MODULE_SOURCE, _IMPORTLIB_FILE, "exec"), namespace)
        _PatchingLoader.exec_module = namespace["exec_module"]


class TargetFinder:
    """Meta-path finder for the modules in a target table; bails out by name."""

    def __init__(self, targets: "tuple[Target, ...] | list[Target]", make_wrapper: "MakeWrapper",
                 notify: "Notify", report: "Report",
                 after_load: "dict[str, Callable[[Any], None]] | None" = None,
                 on_import: "Callable[[str], None] | None" = None) -> None:
        self._by_module: dict[str, list[Target]] = {}
        for target in targets:
            self._by_module.setdefault(target.module, []).append(target)
        # module name -> what to call with the module once its body ran (no target of its own: no body hooks)
        self._after_load = dict(after_load or {})
        self._make_wrapper = make_wrapper
        self._notify = notify
        self._report = report
        self._busy: set[str] = set()
        self._on_import = on_import  # told of every import's start (common/env.env_watch's check)

    # -- installation -----------------------------------------------------

    def install(self) -> None:
        """Put the finder first on sys.meta_path and patch modules already loaded."""
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)
        for name in list(self._by_module):
            module = sys.modules.get(name)
            if module is not None:
                self._contained("patch loaded " + name, self.patch_module, module)

    def uninstall(self) -> None:
        """Remove the finder (wrapped objects stay wrapped)."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    # -- finder protocol --------------------------------------------------

    def find_spec(self, fullname: str, path: "Any" = None, target: "Any" = None) -> "Any":
        """Return the real spec with a patching loader, for target modules only.

        A top-level module that the tracer's own code imports (psutil,
        threading, json, ...) is looked up without the cwd and sys.path[0], so a
        file there cannot shadow it.
        """
        if self._on_import is not None:
            self._on_import(fullname)  # first: every import, the tracer's own included
        if path is None and imported_by_tracer(fullname, 2):
            return trusted_spec(fullname)
        if (fullname not in self._by_module and fullname not in self._after_load) or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _loader_ready()
        spec.loader = _PatchingLoader(spec.loader, self)
        return spec

    def invalidate_caches(self) -> None:
        """Nothing cached here; present for the finder protocol."""

    # -- patching ---------------------------------------------------------

    def before_body(self, module: "Any", code: "Any") -> None:
        """Notify imports and put the hooks in place (code: what will run; None: the loader runs it)."""
        for t in self._by_module.get(module.__name__, []):
            if t.mode == IMPORT:
                self._contained("notify", self._notify, "import", t, module)
        if code is not None and module.__name__ in self._by_module:
            install_body_hooks(module.__dict__, self, module.__name__)

    def after_body(self, module: "Any", code: "Any", done: bool) -> None:
        """Take the hooks away (always), then wrap what the body defined (if it finished)."""
        if code is not None and module.__name__ in self._by_module:
            restore_body_hooks(module.__dict__)
        if not done:
            return  # the body raised: the import fails as it would untraced
        after = self._after_load.get(module.__name__)
        if after is not None:
            self._contained("after " + module.__name__, after, module)
        self._contained("patch " + module.__name__, self.patch_module, module)
        for t in self._by_module.get(module.__name__, []):
            if t.mode == CONFIG:
                self._contained("notify", self._notify, "loaded", t, module)

    def patch_module(self, module: "Any") -> None:
        """Wrap every target defined in an already-executed module."""
        ns = vars(module)
        for key in {t.qualname.split(".")[0] for t in self._by_module.get(module.__name__, []) if t.qualname}:
            if key in ns:
                new = self.patch_value(module.__name__, key, ns[key])
                if new is not ns[key]:
                    setattr(module, key, new)

    def wrap_function(self, module_name: str, fn: "Any") -> "Any":
        """The wrapper of fn if it is a top-level function target of module_name (body hooks)."""
        key = getattr(fn, "__name__", None)
        if not isinstance(key, str) or getattr(fn, "__qualname__", None) != key:
            return fn
        value = self._contained("patch " + module_name, self.patch_value, module_name, key, fn)
        if value is None or value is fn:
            return fn
        module = sys.modules.get(module_name)
        if module is not None and vars(module).get(key) is fn:
            setattr(module, key, value)
        return value

    def wrap_defined(self, module_name: str, ns: "dict[str, Any]") -> None:
        """Wrap the top-level function targets already bound in a module body that is still running (body
        hooks, at each class it builds); the rest are wrapped as the body ends (patch_module)."""
        for t in self._by_module.get(module_name, []):
            fn = ns.get(t.qualname) if t.qualname and "." not in t.qualname else None
            if fn is not None:
                ns[t.qualname] = self.wrap_function(module_name, fn)

    def patch_value(self, module_name: str, key: str, value: "Any") -> "Any":
        """Wrap a top-level function, or the target methods of a class, in place.

        Returns the object to bind under ``key`` (a wrapper for functions,
        the same class for classes).
        """
        targets = [t for t in self._by_module.get(module_name, []) if t.qualname.split(".")[0] == key]
        if isinstance(value, type):
            methods = {t.qualname.split(".", 1)[1]: t for t in targets if "." in t.qualname}
            self._patch_class(value, methods)
            return value
        from .recorder import is_wrapper

        for t in targets:
            if t.qualname == key and callable(value) and not is_wrapper(value):
                wrapper = self._make_wrapper(t, f"{module_name}:{key}")(value, False)
                _rebind_home(value, wrapper)
                return wrapper
        return value

    def _patch_class(self, cls: "type", methods: "dict[str, Target]") -> None:
        """Wrap the methods a class itself defines, and watch for subclasses."""
        for meth, t in methods.items():
            if "." in meth:
                continue  # nested classes are not targeted today
            raw = cls.__dict__.get(meth)
            if raw is not None:
                label = f"{cls.__module__}:{cls.__qualname__}.{meth}"
                new = self._wrap_attribute(raw, t, label)
                if new is not raw:
                    setattr(cls, meth, new)
        if methods and not cls.__dict__.get("__wp_autotrace_watch__"):
            self._watch_subclasses(cls, methods)
            for sub in _all_subclasses(cls):
                self._patch_class(sub, methods)

    def _wrap_attribute(self, raw: "Any", t: "Target", label: str) -> "Any":
        """What a class attribute becomes: a wrapped function, classmethod, staticmethod,
        property (getter, setter, deleter traced as calls) or cached_property; anything
        else is left alone, with one warning."""
        from .recorder import is_wrapper

        def wrap(fn: "Any", suffix: str = "") -> "Any":
            if fn is None or is_wrapper(fn):
                return fn
            return self._make_wrapper(t, label + suffix)(fn, True)

        kind = type(raw)
        if kind is _FunctionType:
            return wrap(raw)
        if kind is classmethod:
            return raw if is_wrapper(raw.__func__) else classmethod(wrap(raw.__func__))
        if kind is staticmethod:
            return raw if is_wrapper(raw.__func__) else staticmethod(self._make_wrapper(t, label)(raw.__func__, False))
        if kind is property:
            return property(wrap(raw.fget), wrap(raw.fset, ".setter"), wrap(raw.fdel, ".deleter"), raw.__doc__)
        if kind.__name__ == "cached_property" and kind.__module__ == "functools":
            raw.func = wrap(raw.func)
            return raw
        warn(f"target {label} is a {kind.__qualname__}, not a function: not traced", "target " + label)
        return raw

    def _watch_subclasses(self, cls: "type", methods: "dict[str, Target]") -> None:
        """Wrap overriding methods of every later subclass, wherever defined.

        Out-of-tree backends subclass AsyncCompile (IPEX's XPUAsyncCompile)
        and override warm_pool/process_pool; __init_subclass__ runs as each
        subclass is created, before any of its code can call them.
        """
        original = cls.__dict__.get("__init_subclass__")
        finder = self

        def __init_subclass__(sub: "Any", /, **kwargs: "Any") -> None:
            if original is not None:
                original.__get__(None, sub)(**kwargs)
            else:
                super(cls, sub).__init_subclass__(**kwargs)  # type: ignore[arg-type]
            finder._contained("patch subclass", finder._patch_class, sub, methods)

        cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment,method-assign]
        cls.__wp_autotrace_watch__ = True  # type: ignore[attr-defined]

    def _contained(self, where: str, fn: "Callable[..., Any]", *args: "Any") -> "Optional[Any]":
        """Run fn; a failure is reported and swallowed, never raised into the host."""
        try:
            return fn(*args)
        except Exception as exc:
            self._report(where, exc)
            return None


# Our own finders (this one, bootstrap's front) are never asked for a trusted spec.
_PACKAGE = __name__.split(".")[0] + "."


def trusted_spec(name: str) -> "Any":
    """name's spec from sys.path without the cwd and the script's folder (sys.path[0]).

    Other finders (built-in, frozen, an editable install's) are asked next; a
    spec of theirs that points into an untrusted folder is refused.
    """
    path_finder = sys.modules["_frozen_importlib_external"].PathFinder  # importing importlib here would recurse
    untrusted = {"", ".", os.getcwd()}
    if not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)) and sys.path:
        untrusted.add(sys.path[0])
    spec = path_finder.find_spec(name, [p for p in sys.path if isinstance(p, str) and p not in untrusted])
    if spec is not None:
        return spec
    folders = tuple(os.path.join(os.path.abspath(p), "") for p in untrusted)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if finder is path_finder or type(finder).__module__.startswith(_PACKAGE) or find is None:
            continue
        spec = find(name, None)
        if spec is not None and not str(spec.origin or "").startswith(folders):
            return spec
    raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _all_subclasses(cls: "type") -> "list[type]":
    """Every subclass of cls created so far, depth first."""
    found: list[type] = []
    try:
        stack: list[type] = list(type.__subclasses__(cls))
    except TypeError:
        return found
    while stack:
        sub = stack.pop()
        if sub not in found:
            found.append(sub)
            stack.extend(type.__subclasses__(sub))
    return found


_FunctionType = type(_all_subclasses)


def _rebind_home(raw: "Any", wrapper: "Any") -> None:
    """Bind wrapper where raw lives by its own __module__/__qualname__ too.

    A re-export (``from .impl import f``) or an alias (``public = _impl``) then
    pickles as untraced, by that name: pickle looks the name up and must find the
    very object it was given. The two names stay one object, as untraced.
    """
    qualname = getattr(raw, "__qualname__", None)
    home = sys.modules.get(getattr(raw, "__module__", None) or "")
    if home is None or not isinstance(qualname, str) or "." in qualname or "<" in qualname:
        return
    try:
        if vars(home).get(qualname) is raw:
            setattr(home, qualname, wrapper)
    except (AttributeError, TypeError):
        pass
