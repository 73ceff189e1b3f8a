"""What each released device plugin does to compile pools, as data.

Read from the released wheels by tools/check_plugins.py, which writes the
evidence (file:line for every call and switch) to docs/plugin-coverage.md;
tests/test_plugins.py checks that every release listed there falls in a row
here with the same shape. A row spans the releases read that share a shape,
first and last inclusive: a release between two rows was not read and has no
known behaviour. Used by the report (`advice_for`) when a warm_pool caller's
frame names its distribution and version (frame keys `dist`, `dist_version`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported by this module
if TYPE_CHECKING:
    from typing import Any

# Pool entry points a plugin calls, as "module:qualname" rows of targets.py that
# record them: AsyncCompile subclasses' overriding methods are wrapped through the
# subclass rule of runtime/finder.py, so the AsyncCompile row covers them.
_AC = "torch._inductor.async_compile"
WARM_POOL = f"{_AC}:AsyncCompile.warm_pool"
PROCESS_POOL = f"{_AC}:AsyncCompile.process_pool"
SHUTDOWN = f"{_AC}:shutdown_compile_workers"
SUBPROC_POOL = "torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__"

GUARD_HINT = "or run with WP_AUTOTRACE_GUARD=nested-pools"


class Behaviour:
    """One distribution's releases first..last (inclusive) that behave alike towards compile pools.

    A plain class rather than a NamedTuple: this module is data, read by
    the report; typing stays out of it like the rest of the package's tables.
    """

    __slots__ = ("dist", "first", "last", "shape", "nests", "behaviour", "fix", "entry_points")

    def __init__(self, dist: str, first: str, last: str, shape: str, behaviour: str, fix: str,
                 nests: bool = False, entry_points: tuple[str, ...] = ()) -> None:
        self.dist = dist
        self.first = first
        self.last = last
        # The shape name tools/check_plugins.py gives these releases (see the document).
        self.shape = shape
        # One sentence, read after "<dist> <version> ".
        self.behaviour = behaviour
        # One sentence: what to do about it.
        self.fix = fix
        # Whether its own sidecars load it again and warm another pool.
        self.nests = nests
        # Pool entry points it calls, as "module:qualname" target rows.
        self.entry_points = entry_points

    def __repr__(self) -> str:
        return f"Behaviour({self.dist!r}, {self.first!r}..{self.last!r}, {self.shape!r})"

    def covers(self, version: str) -> bool:
        """Whether version lies within first..last."""
        return version_key(self.first) <= version_key(version) <= version_key(self.last)


_NO_POOL = ("never calls warm_pool() or builds a compile pool (read from the released wheel)",
            "Nested pools in this run come from another caller: look at the other warm_pool callers.")
_SUBCLASS = (
    "builds its own compile pool only when it compiles, in CustomAsyncCompile.process_pool() "
    "(a SubprocPool, recorded through the AsyncCompile subclass rule), and never warms one at import",
    "It does not nest pools; nested pools in this run come from another caller.")
_LAZY_RESET = (
    "calls AsyncCompile.warm_pool() when torch_npu._inductor is first imported (at the first compile, not "
    "during import torch) with TORCH_DEVICE_BACKEND_AUTOLOAD=0 around it, so its sidecar does not load it again",
    "It starts one pool and does not nest; set TORCHINDUCTOR_COMPILE_THREADS=1 to start none.")
_LAZY_GATED = (
    _LAZY_RESET[0] + ", and only when TORCH_WARM_POOL is unset or \"1\"",
    "It starts one pool and does not nest; set TORCH_WARM_POOL=0 (or TORCHINDUCTOR_COMPILE_THREADS=1) "
    "to start none.")
_NPU_POOLS = (WARM_POOL, PROCESS_POOL, SUBPROC_POOL, SHUTDOWN)

PLUGINS: tuple[Behaviour, ...] = (
    Behaviour("torch_npu", "2.1.0.post8", "2.6.0", "no-pool", *_NO_POOL),
    Behaviour("torch_npu", "2.6.0.post5", "2.7.1", "subclass-pool", *_SUBCLASS,
              entry_points=(PROCESS_POOL, SUBPROC_POOL, SHUTDOWN)),
    Behaviour("torch_npu", "2.7.1.post11", "2.7.1.post11", "lazy-warm-skipped+subclass-pool",
              "imports torch_npu._inductor, whose warm_pool() is gated on TORCH_WARM_POOL, after setting "
              "TORCH_WARM_POOL=0 itself, so it warms no pool; it builds one in CustomAsyncCompile.process_pool() "
              "when it compiles",
              "It does not nest pools; nested pools in this run come from another caller.",
              entry_points=_NPU_POOLS),
    Behaviour("torch_npu", "2.8.0", "2.8.0", "no-pool", *_NO_POOL),
    Behaviour("torch_npu", "2.8.0.post5", "2.8.0.post5", "lazy-warm-reset+subclass-pool",
              _LAZY_RESET[0] + ", but the call is not gated on TORCH_WARM_POOL (its own __init__ sets it to 0, "
              "and torch starts sidecars with it at 0): a compile worker that unpickles one of its jobs imports "
              "torch_npu._inductor and starts a pool of its own",
              "Upgrade (no release read from 2.9.1 on warms a pool ungated), set "
              "TORCHINDUCTOR_COMPILE_THREADS=1, or run with WP_AUTOTRACE_GUARD=nested-pools.",
              entry_points=_NPU_POOLS),
    Behaviour("torch_npu", "2.9.0", "2.9.0", "no-pool", *_NO_POOL),
    Behaviour("torch_npu", "2.9.1", "2.10.0", "subclass-pool", *_SUBCLASS,
              entry_points=(PROCESS_POOL, SUBPROC_POOL, SHUTDOWN)),
    Behaviour("torch_npu", "2.10.0.post7", "2.10.0.post7", "lazy-warm-reset-gated+compile-warm+subclass-pool",
              *_LAZY_GATED, entry_points=_NPU_POOLS),
    Behaviour("torch_npu", "2.11.0.post3", "2.12.0.post3", "lazy-warm-reset-gated+subclass-pool", *_LAZY_GATED,
              entry_points=_NPU_POOLS),
    Behaviour("torch_npu", "2.13.0", "2.13.0", "lazy-warm-reset-gated+compile-warm+subclass-pool", *_LAZY_GATED,
              entry_points=_NPU_POOLS),
    Behaviour("torch_npu", "2.14.0", "2.14.0", "lazy-warm-reset-gated+subclass-pool", *_LAZY_GATED,
              entry_points=_NPU_POOLS),
    # PyPI's IPEX wheels are CPU builds: no inductor pool code (XPU builds are on Intel's index).
    Behaviour("intel_extension_for_pytorch", "2.6.0", "2.8.0", "no-pool", *_NO_POOL),
    Behaviour("vllm", "0.33.0", "0.33.0", "no-pool",
              "never calls warm_pool(); it sets TORCHINDUCTOR_COMPILE_THREADS=1 at import (vllm/env_override.py), "
              "which keeps inductor from starting a compile pool at all",
              _NO_POOL[1]),
    Behaviour("vllm_ascend", "0.9.1", "0.9.1", "no-pool", *_NO_POOL),
)

# Pre-release phases, ordered before the release itself (rank 0).
_PRE_RANK = {"dev": -4, "a": -3, "alpha": -3, "b": -2, "beta": -2, "c": -1, "rc": -1, "pre": -1, "preview": -1}
_RELEASE_PARTS = 4  # 2.1 == 2.1.0 == 2.1.0.0


def version_key(version: str) -> tuple[int, ...]:
    """A sortable key for a PEP 440-style version: release, pre-release, post-release.

    Enough for the plugins' own versions ("2.1.0.post8", "0.9.1rc1",
    "2.13.0+cpu"); no dependency on `packaging`. The local part is ignored.
    """
    text = version.strip().lower().lstrip("v").split("+")[0].replace("-", ".").replace("_", ".")
    release: list[int] = []
    pre = (0, 0)
    post = 0
    for part in text.split("."):
        digits = len(part) - len(part.lstrip("0123456789"))
        if digits and pre == (0, 0) and not post:  # "1rc1": the release number, then a tag
            release.append(int(part[:digits]))
            part = part[digits:]
        tag = part.rstrip("0123456789")
        number = int(part[len(tag):] or 0)
        if tag in ("post", "r", "rev"):
            post = number + 1  # .post0 still sorts after the release
        elif tag in _PRE_RANK:
            pre = (_PRE_RANK[tag], number)
    release += [0] * (_RELEASE_PARTS - len(release))
    return (*release[:_RELEASE_PARTS], *pre, post)


def normalize_dist(name: str) -> str:
    """Distribution name as the table spells it: "torch-npu", "Torch.NPU" -> "torch_npu"."""
    return name.strip().lower().replace("-", "_").replace(".", "_")


def known_behaviour(dist: str, version: str) -> Behaviour | None:
    """The table row for dist at version, or None when that release was not read."""
    name = normalize_dist(dist)
    for row in PLUGINS:
        if row.dist == name and row.covers(version):
            return row
    return None


def advice_for(dist: str, version: str) -> str | None:
    """The sentence the nested-pools finding adds for a caller in dist==version, or None if unknown."""
    row = known_behaviour(dist, version)
    if row is None:
        return None
    text = f"{dist} {version} {row.behaviour}."
    if row.nests:
        text += f" {row.fix} ({GUARD_HINT})."
    else:
        text += f" {row.fix}"
    return text


def advice_for_frame(frame: dict[str, Any] | None) -> str | None:
    """advice_for() from a caller frame record (`dist`, `dist_version`: docs/contracts.md, "Caller attribution")."""
    if not frame or not frame.get("dist") or not frame.get("dist_version"):
        return None
    return advice_for(str(frame["dist"]), str(frame["dist_version"]))
