"""What a process's error records say: which are its own failure and which one job's its sidecar logged, the
jobs a worker ended abruptly in (BrokenProcessPool), and a module file named like a standard library module
(the usual cause of a sidecar's import failure). Endings and the sidecar findings read it.
"""

from __future__ import annotations

from typing import Any

from ..fold.model import Process

# Where a sidecar logs one job's failure (torch's done-callback for each job, SubprocMain._submit_inner): the job
# raised, or its worker ended abruptly (BrokenProcessPool, after which the sidecar makes new workers). The sidecar
# goes on serving: such an error is not its main() raising.
JOB_ERROR_FRAME = ("compile_worker/subproc_pool.py", "callback")


def own_errors(p: Process) -> list[dict[str, Any]]:
    """The process's error records that are its own failure, not one job's failure its sidecar logged."""
    path, func = JOB_ERROR_FRAME
    return [e for e in p.errors if not any(isinstance(f, dict) and f.get("func") == func
                                           and str(f.get("file", "")).endswith(path) for f in e.get("frames") or ())]


def broken_jobs(side: Process) -> list[dict[str, Any]]:
    """The sidecar's job errors (torch's job callback logged them, not its main()) that say a worker ended
    abruptly: BrokenProcessPool, before anything asked the sidecar to stop (torch 2.13's shutdown ends the
    workers at once: the jobs it cuts off are jobs-cut-off's, no worker lost)."""
    own = {id(e) for e in own_errors(side)}
    stop = side.served_at
    return [e for e in side.errors if id(e) not in own and e.get("exc_type") == "BrokenProcessPool"
            and (stop is None or e["ts"] < stop)]


def _stdlib_names() -> frozenset[str]:
    """The standard library's top-level module names: sys.stdlib_module_names (3.10+); on 3.9, which has no
    such set, the modules in this interpreter's standard library folders and its built-in ones, less the
    test package (3.10's set leaves it out). The same log then gets the same advice on every supported
    Python, as far as their standard libraries agree."""
    import sys

    names: frozenset[str] | None = getattr(sys, "stdlib_module_names", None)
    if names is None:
        import pkgutil
        import sysconfig

        folders = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
        folders |= {f"{f}/lib-dynload" for f in folders}
        names = frozenset(m.name for m in pkgutil.iter_modules(sorted(folders))) - {"test"}
        names |= frozenset(sys.builtin_module_names)
    return names


def shadowing(file: str) -> tuple[str, str] | None:
    """(name, folder) where the module file `file` is named like a standard library module but is not the
    standard library's (a stale backport in site-packages, a folder put on sys.path); None otherwise. folder is
    where the name is found (a package's parent folder)."""
    if not file.endswith(".py"):
        return None
    folder, _, base = file.rpartition("/")
    name = folder.rpartition("/")[2] if base == "__init__.py" else base[:-3]
    where = folder.rpartition("/")[0] if base == "__init__.py" else folder
    in_stdlib = "/lib/python" in file and not any(x in file.split("/") for x in ("site-packages", "dist-packages"))
    return None if in_stdlib or name not in _stdlib_names() else (name, where)
