"""The shapes of bootstrap's two records, for the type checker only: never imported when the program runs.

A traced start makes them as namespaces (``types.SimpleNamespace``: bootstrap.read_settings, bootstrap.new_runtime),
not as instances of classes: a class statement costs every traced start ~57-86K instructions more than the same
code as functions (BENCHMARKS.md, "start, thirteenth round"). The names and types of their fields live here; their
values, and the functions that act on a Runtime, in bootstrap.py.
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING, as in bootstrap.py: runtime/ keeps typing off its top level (tests/test_layers.py),
# and nothing here is needed when the program runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..common.targets import Target
    from .finder import TargetFinder
    from .sink import Sink


class Settings:
    """What the environment asks for, validated (bootstrap.read_settings)."""

    trace: bool
    guard: bool
    log: str | None
    stack: int
    interval: float
    extra_targets: tuple[Target, ...]
    redact: tuple[str, ...]  # name patterns whose argv/env values are masked in the log (redact.py)
    linger: float
    notes: list[str]  # what a bad value was replaced by: said in the root (bootstrap._say_notes)


class Runtime:
    """Everything one traced process holds (bootstrap.new_runtime)."""

    settings: Settings
    is_root: bool
    run_id: str
    host: str
    sink: Sink
    create_time: float | None  # set by bootstrap.write_start
    start_ticks: int | None  # with create_time: the kernel's start ticks it came from (a clock step leaves them)
    notice: str | None  # root only: the guard's notice file, read and removed at exit
    env_watch: Any  # who changed a variable inductor's config reads, until it loads (env.env_watch)
    _probes: Any  # made when a target module first loads (first_target.probes)
    _root: Any  # root.py, loaded by the root at start
    _finder: TargetFinder | None  # made by first_target.finder, at the first target module's import
    _front: Any  # the front finder (bootstrap._front_finder)
