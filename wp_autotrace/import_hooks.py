"""The meta-path finder that wraps targets the moment their module defines them.

A post-import hook fires after the module body has run, too late for the
bare ``AsyncCompile.warm_pool()`` at the bottom of torch 2.1 - 2.4's
codecache/async_compile, and too late for ``os.register_at_fork`` and
``atexit.register``, which capture functions at definition time. So target
modules are executed with a locals mapping that sees every top-level name
binding: when ``class AsyncCompile`` or ``def after_fork`` is bound, the
target is wrapped before the next statement runs. The module's code object
comes from its own loader, so bytecode caching and line numbers are intact.
"""

from __future__ import annotations

import sys
from _collections_abc import MutableMapping  # what collections.abc re-exports, already loaded by site

from .targets import CONFIG, IMPORT, Target

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Callable, Optional

    # make_wrapper(target, label) -> a wrapt wrapper function (wrapped, instance, args, kwargs)
    MakeWrapper = Callable[[Target, str], Callable[..., Any]]
    # notify(kind, target, module_or_None); kind is "import" or "loaded"
    Notify = Callable[[str, Target, Any], None]
    # report(where, exc): a contained tracer fault
    Report = Callable[[str, BaseException], None]

# Set on our wrappers only: wrapt keeps _self_* attributes on the proxy itself.
_MARK = "_self_wp_autotrace"


class _BindingNamespace(MutableMapping):  # type: ignore[type-arg]
    """Module-body locals that write through to the module dict, via on_bind."""

    __slots__ = ("_ns", "_on_bind")

    def __init__(self, ns: dict[str, Any], on_bind: Callable[[str, Any], Any]) -> None:
        self._ns = ns
        self._on_bind = on_bind

    def __getitem__(self, key: str) -> Any:
        return self._ns[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._ns[key] = self._on_bind(key, value)

    def __delitem__(self, key: str) -> None:
        del self._ns[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ns)

    def __len__(self) -> int:
        return len(self._ns)


class _PatchingLoader:
    """Wraps a module's loader to run its body under a _BindingNamespace."""

    def __init__(self, loader: Any, finder: TargetFinder) -> None:
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    def exec_module(self, module: Any) -> None:
        # The module's own code sees its real loader, not us.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._finder.exec_with_patching(self._loader, module)


class TargetFinder:
    """Meta-path finder for the modules in a target table; bails out by name."""

    def __init__(self, targets: tuple[Target, ...] | list[Target], make_wrapper: MakeWrapper,
                 notify: Notify, report: Report) -> None:
        self._by_module: dict[str, list[Target]] = {}
        for target in targets:
            self._by_module.setdefault(target.module, []).append(target)
        self._make_wrapper = make_wrapper
        self._notify = notify
        self._report = report
        self._busy: set[str] = set()

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

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        """Return the real spec with a patching loader, for target modules only."""
        if fullname not in self._by_module or fullname in self._busy:
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
        spec.loader = _PatchingLoader(spec.loader, self)
        return spec

    def invalidate_caches(self) -> None:
        """Nothing cached here; present for the finder protocol."""

    # -- patching ---------------------------------------------------------

    def exec_with_patching(self, loader: Any, module: Any) -> None:
        """Execute a target module's body, wrapping targets as they are bound."""
        name = module.__name__
        targets = self._by_module.get(name, [])
        for t in targets:
            if t.mode == IMPORT:
                self._contained("notify", self._notify, "import", t, module)
        code = None
        get_code = getattr(loader, "get_code", None)
        if get_code is not None:
            code = get_code(name)
        if code is None:
            # No code object to run ourselves (an extension, say): patch after.
            loader.exec_module(module)
        else:
            tops = {t.qualname.split(".")[0] for t in targets if t.qualname}

            def on_bind(key: str, value: Any) -> Any:
                if key in tops:
                    return self._contained("patch " + name, self.patch_value, name, key, value) or value
                return value

            exec(code, module.__dict__, _BindingNamespace(module.__dict__, on_bind))
        # Names bound behind our back (globals()[...] = ..., star imports).
        self._contained("patch " + name, self.patch_module, module)
        for t in targets:
            if t.mode == CONFIG:
                self._contained("notify", self._notify, "loaded", t, module)

    def patch_module(self, module: Any) -> None:
        """Wrap every target defined in an already-executed module."""
        ns = vars(module)
        for key in {t.qualname.split(".")[0] for t in self._by_module.get(module.__name__, []) if t.qualname}:
            if key in ns:
                new = self.patch_value(module.__name__, key, ns[key])
                if new is not None and new is not ns[key]:
                    setattr(module, key, new)

    def patch_value(self, module_name: str, key: str, value: Any) -> Any:
        """Wrap a top-level function, or the target methods of a class, in place.

        Returns the object to bind under ``key`` (a wrapper for functions,
        the same class for classes).
        """
        targets = [t for t in self._by_module.get(module_name, []) if t.qualname.split(".")[0] == key]
        if isinstance(value, type):
            methods = {t.qualname.split(".", 1)[1]: t for t in targets if "." in t.qualname}
            self._patch_class(value, methods)
            return value
        for t in targets:
            if t.qualname == key and callable(value) and not getattr(value, _MARK, False):
                return _function_wrapper(value, self._make_wrapper(t, f"{module_name}:{key}"))
        return value

    def _patch_class(self, cls: type, methods: dict[str, Target]) -> None:
        """Wrap the methods a class itself defines, and watch for subclasses."""
        for meth, t in methods.items():
            if "." in meth:
                continue  # nested classes are not targeted today
            raw = cls.__dict__.get(meth)
            if raw is None or getattr(raw, _MARK, False):
                continue
            label = f"{cls.__module__}:{cls.__qualname__}.{meth}"
            setattr(cls, meth, _function_wrapper(raw, self._make_wrapper(t, label)))
        if methods and not cls.__dict__.get("__wp_autotrace_watch__"):
            self._watch_subclasses(cls, methods)
            for sub in _all_subclasses(cls):
                self._patch_class(sub, methods)

    def _watch_subclasses(self, cls: type, methods: dict[str, Target]) -> None:
        """Wrap overriding methods of every later subclass, wherever defined.

        Out-of-tree backends subclass AsyncCompile (IPEX's XPUAsyncCompile)
        and override warm_pool/process_pool; __init_subclass__ runs as each
        subclass is created, before any of its code can call them.
        """
        original = cls.__dict__.get("__init_subclass__")
        finder = self

        def __init_subclass__(sub: Any, /, **kwargs: Any) -> None:
            if original is not None:
                original.__get__(None, sub)(**kwargs)
            else:
                super(cls, sub).__init_subclass__(**kwargs)  # type: ignore[arg-type]
            finder._contained("patch subclass", finder._patch_class, sub, methods)

        cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment,method-assign]
        cls.__wp_autotrace_watch__ = True  # type: ignore[attr-defined]

    def _contained(self, where: str, fn: Callable[..., Any], *args: Any) -> Optional[Any]:
        """Run fn; a failure is reported and swallowed, never raised into the host."""
        try:
            return fn(*args)
        except Exception as exc:
            self._report(where, exc)
            return None


def _all_subclasses(cls: type) -> list[type]:
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


_wrapper_class: Any = None


def _picklable_wrapper_class() -> Any:
    """A wrapt.FunctionWrapper that pickles by reference, as the wrapped function does.

    Spawn-mode pools pickle their initializer (functools.partial of
    _async_compile_initializer) to send it to the child; a plain wrapt proxy
    refuses to pickle, which would break the host's pool. wrapt is imported
    here, so only processes that load a target module pay for it.
    """
    global _wrapper_class
    if _wrapper_class is None:
        import wrapt

        class BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[misc,type-arg]
            def __reduce_ex__(self, protocol: Any) -> Any:
                owner = self._self_instance if self._self_instance is not None else self._self_owner
                return getattr, (owner, self.__name__)

        class Wrapper(wrapt.FunctionWrapper):  # type: ignore[misc,type-arg]
            __bound_function_wrapper__ = BoundWrapper

            def __reduce_ex__(self, protocol: Any) -> Any:
                return self.__qualname__  # pickle looks it up in its module: this wrapper

        _wrapper_class = Wrapper
    return _wrapper_class


def _function_wrapper(raw: Any, wrapper: Callable[..., Any]) -> Any:
    """A function wrapper that keeps classmethod/staticmethod binding and pickling."""
    wrapped = _picklable_wrapper_class()(raw, wrapper)
    setattr(wrapped, _MARK, True)
    return wrapped
