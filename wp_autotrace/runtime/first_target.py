"""What a traced process loads with its first target module, wired to its Runtime: the target table,
the full finder in the front finder's place, and the recorder's shared state. (The Runtime, made by
bootstrap.new_runtime, is passed in: this module imports nothing of bootstrap's.)

Most traced processes never import a target module: this code is not unmarshalled at their start
(bootstrap.py holds only what every traced process runs at start, fork, exec and exit). Loaded by the front
finder at the first target import (finder(); or at start where a target module is already loaded or the user
added targets: bootstrap.install_finder), and by probes() (user targets: bootstrap.start_runtime). Nothing here
runs at a fork; at an exit only exit_counts (process_exit's counts, for a process whose probes counted calls).
"""

import _thread
import sys

from .sink import rare

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..common.targets import Target
    from .finder import TargetFinder
    from .recorder import Probes


_finder_lock = _thread.RLock()


def finder(rt: "Any", pytest_config: str) -> "TargetFinder":
    """rt's target finder, made on first use with the target table, in the front finder's place on
    sys.meta_path: most traced processes never import a target module, and never load either."""
    with _finder_lock:  # two threads may import their first target modules at once: one finder
        if rt._finder is None:
            make_finder(rt, pytest_config)
    return rt._finder  # type: ignore[no-any-return]


def probes(rt: "Any") -> "Probes":
    """rt's wrappers' shared state, made on first use."""
    if rt._probes is None:
        rt._probes = make_probes(rt, rare().INTERPRETER_MODULES)
    return rt._probes  # type: ignore[no-any-return]


def make_finder(rt: "Any", pytest_config: str) -> "TargetFinder":
    """The full finder with the target table, set as rt's finder (its wrappers share probes(rt)), in the front
    finder's place on sys.meta_path (first where the front was not), then patching what is already loaded;
    pytest_config (pytest's module that makes its plugin manager) gets the tracer's plugin registered when
    tracing. Called under the finder lock (finder())."""
    from ..common.targets import TARGETS
    from .finder import TargetFinder

    after: dict[str, Callable[[Any], None]] = {pytest_config: _register_pytest_plugin}
    if not rt.settings.trace:
        after.clear()

    def make_wrapper(target: "Target", label: str) -> "Any":
        return probes(rt).make_wrapper(target, label)

    def notify(kind: str, target: "Target", module: "Any") -> None:
        probes(rt).notify(kind, target, module, rt.env_watch.finish() if kind == "loaded" else None)

    finder = rt._finder = TargetFinder(TARGETS + rt.settings.extra_targets, make_wrapper, notify, rt.sink.error,
                                       after, rt.env_watch.check)
    meta = sys.meta_path
    if rt._front in meta:
        meta[meta.index(rt._front)] = finder
    finder.install()  # first on sys.meta_path (where the front was not), then patch what is loaded
    return finder


def make_probes(rt: "Any", interpreter_modules: "tuple[str, ...]") -> "Probes":
    """The wrappers' shared state for rt; from now on the sink holds its descriptor (a held fd, placed high,
    saves an open per call record) and the exit path has what it needs loaded (prepare_exit)."""
    from .held import hold
    from .recorder import Probes

    probes = Probes(rt.sink, rt.settings.stack, rt.settings.guard, _post_notice)
    prepare_exit(interpreter_modules)
    hold(rt.sink)
    return probes


def prepare_exit(names: "tuple[str, ...]") -> None:
    """Load what the exit path of a process that records calls needs (3.12+: the interpreters module, the
    first of names that imports, whose count of interpreters makes waiting for other threads' records safe),
    so that the exit imports nothing."""
    if sys.version_info >= (3, 12) and not any(name in sys.modules for name in names):
        for name in names:
            try:
                __import__(name)
                return
            except ImportError:
                continue


def exit_counts(probes: "Probes", fields: "dict[str, Any]") -> None:
    """process_exit's counts of the probes' calls into fields (its "counts" member in place): per target, with
    their times (count_times) and last callers (count_callers) where the probes kept them."""
    fields["counts"] = probes.counts
    if probes.count_times:
        fields["count_times"] = {k: [round(t, 3) for t in v] for k, v in probes.count_times.items()}
    if probes.count_callers:
        fields["count_callers"] = last_callers(probes.count_callers)


def last_callers(found: "dict[str, Any]") -> "dict[str, Any]":
    """Each last_caller target's last user (code, line), attributed (process_exit's count_callers)."""
    from .dists import attribute

    return {label: attribute({"file": code.co_filename, "line": line, "func": code.co_name})
            for label, (code, line) in ((k, v) for k, v in found.items() if v is not None)}


def _post_notice(info: "dict[str, Any]") -> None:
    from .guard import post_notice

    post_notice(info)


def _register_pytest_plugin(module: "Any") -> None:
    from .target_patches import install_pytest_plugin

    install_pytest_plugin(module, __package__.rpartition(".")[0] + ".pytest_plugin")
