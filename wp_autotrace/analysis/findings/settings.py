"""Findings about what the user set against what was in effect: the environment a process started with
(process_start's `env`) beside inductor's settings as torch._inductor.config loaded (the `config` record)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Process

# The variables torch reads into a setting at config's import, and that setting's name.
READ_AT_IMPORT = (("TORCHINDUCTOR_COMPILE_THREADS", "compile_threads"),
                  ("TORCHINDUCTOR_WORKER_START", "worker_start_method"))


def _compile_s(p: Process) -> tuple[int, float]:
    """p's finished compiles that are not inside another (dynamo's _compile), and their seconds together."""
    done = [c for c in p.calls.values() if c.tag == targets.COMPILE and c.end is not None
            and (c.parent is None or c.parent.tag != targets.COMPILE)]
    return len(done), sum(c.end - c.ts for c in done if c.end is not None)


def setting_overridden(v: View) -> Finding | None:
    """A process started with a pool variable set (TORCHINDUCTOR_COMPILE_THREADS=4) whose setting was another
    value when torch._inductor.config loaded (compile_threads=1): something in the process changed it first
    (a library's import, typically). Says both values and what its compiles then took; the log does not say
    what changed it."""
    for p in v.procs:
        settings = next((s for q, s, _ in (p.run.configs if p.run is not None else []) if q is p), None)
        if not settings:
            continue
        for var, name in READ_AT_IMPORT:
            started, loaded = p.env.get(var), settings.get(name)
            if started is None or loaded is None or str(started).strip() == str(loaded):
                continue
            n, seconds = _compile_s(p)
            value = str(started).strip() if str(started).strip().isdigit() else repr(str(started))
            took = (f" Its {n} compile{'s' if n != 1 else ''} then took {seconds:.1f} s"
                    + (" in the process itself: with compile_threads=1 inductor makes no compile pool."
                       if name == "compile_threads" and str(loaded) == "1" else ".")) if n else ""
            return Finding(
                "setting-overridden", "warning",
                f"{p.role} {p.pid} started with {var}={started} in its environment, but inductor's {name} was "
                f"{loaded!s} when torch._inductor.config loaded: something in the process changed it before that "
                f"import (an imported library, typically; the log does not say which).{took}",
                [p.pid], [f"process_start env {var}={started}", f"config record {name}={loaded}"],
                f"set it in code after the imports, before the first compile: torch._inductor.config.{name} = "
                f"{value} (torch reads it when the pool is made); or find the import that sets "
                f"os.environ[{var!r}] and set the variable again after it",
                {})
    return None
