"""Jobs: the runs of one launch, across hosts and launchers, grouped by the launchers' own ids.

A multi-node job writes one run per node (each node's launcher is its own
root, with its own run id and log). Each traced process records its
launcher's variables at start (process_start ``rank``: common/targets.py
RANK_ENV); a run's **identities** are what its processes carry:

- ``job``: ``WP_AUTOTRACE_JOB``, set by the user;
- ``slurm``: ``SLURM_JOB_ID`` (its steps, ``SLURM_STEP_ID``, are listed);
- ``torchelastic``: ``TORCHELASTIC_RUN_ID`` with ``MASTER_ADDR:MASTER_PORT``.
  A single-node launch (``WORLD_SIZE == LOCAL_WORLD_SIZE``) or torchrun's
  default id ``none`` with a loopback master names one host's launch only: the
  host joins the identity, so two unrelated single-node jobs on two hosts
  never merge;
- ``mpi``: Open MPI's ``OMPI_MCA_ess_base_jobid``, PMIx's ``PMIX_NAMESPACE``,
  MPICH/Hydra's ``PMI_JOBID``.

The rule: two runs are one job when they share an identity and their time
spans overlap (within ``SKEW_S``, for the hosts' clock skew). Two launches that
reuse an id at different times (a torchrun relaunched with the same
``--rdzv-id``, a constant ``WP_AUTOTRACE_JOB``) are therefore two jobs. A Slurm
job id is the scheduler's, never reused while its allocation lives: every step
of it is one job, however far apart. Grouping is transitive (union-find): a
Slurm job whose steps run torchrun joins both identities. Runs that share
nothing stay apart, each its own job of one run.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ...common.env import JOB_ENV
from ..fold.model import Run

# Two runs of one job on different hosts start and end on different clocks; NTP keeps
# them within milliseconds, a host without it within seconds. Relaunches that reuse an
# id come after the previous launch's end (its ranks had to exit), usually by more.
SKEW_S = 5.0
# torchrun's --rdzv-id when none is given: every launch has it.
DEFAULT_RDZV_ID = "none"
MPI_KEYS = ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_JOBID")
# Identity kinds whose id is unique for the life of the job (no time rule).
UNIQUE_KINDS = ("slurm", "run")
# How each kind reads in the report. "run": the command `wp-autotrace run` started, no traced root itself (a shell
# script of Python steps): its pid, host and status record's time (fold/finish.match_waits), one launch.
KIND_WORDS = {"job": "WP_AUTOTRACE_JOB", "slurm": "Slurm job", "torchelastic": "torchrun", "mpi": "MPI job",
              "run": "wp-autotrace run's command, pid"}


class Job:
    """Runs of one launch: their identities, in time order."""

    def __init__(self, runs: list[Run], identities: list[tuple[str, ...]]) -> None:
        self.runs = runs
        self.identities = identities

    @property
    def id(self) -> str:
        """The first identity in words (kind order as KIND_WORDS), else the run's own id."""
        if not self.identities:
            return f"run {self.runs[0].id or '?'}"
        return identity_text(self.identities[0])

    @property
    def hosts(self) -> list[str]:
        return sorted({h for r in self.runs for h in r.hosts})

    @property
    def start(self) -> float | None:
        starts = [r.start for r in self.runs if r.start is not None]
        return min(starts) if starts else None

    @property
    def end(self) -> float | None:
        ends = [r.end for r in self.runs if r.end is not None]
        return max(ends) if ends else None


def identity_text(ident: tuple[str, ...]) -> str:
    kind, value = ident[0], ident[1]
    words = KIND_WORDS.get(kind, kind)
    if kind == "torchelastic":
        where = f" @ {ident[2]}" if ident[2] else ""
        local = f" on {ident[3]}" if len(ident) > 3 else ""
        return f"{words} {value}{where}{local}"
    if kind == "run":
        return f"{words} {value} on {ident[2]}"
    return f"{words} {value}"


def _loopback(addr: str) -> bool:
    if addr in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def process_identities(rank: dict[str, Any], host: str) -> list[tuple[str, ...]]:
    """The launch identities in one process's launcher variables (process_start ``rank``)."""
    found: list[tuple[str, ...]] = []
    if rank.get(JOB_ENV):
        found.append(("job", str(rank[JOB_ENV])))
    if rank.get("SLURM_JOB_ID"):
        found.append(("slurm", str(rank["SLURM_JOB_ID"])))
    run_id = rank.get("TORCHELASTIC_RUN_ID")
    if run_id:
        addr, port = str(rank.get("MASTER_ADDR") or ""), str(rank.get("MASTER_PORT") or "")
        master = f"{addr}:{port}" if addr or port else ""
        size, local = rank.get("WORLD_SIZE"), rank.get("LOCAL_WORLD_SIZE")
        one_node = size is not None and size == local
        if one_node or (run_id == DEFAULT_RDZV_ID and _loopback(addr)):
            found.append(("torchelastic", str(run_id), master, host))
        else:
            found.append(("torchelastic", str(run_id), master))
    found.extend(("mpi", f"{k}={rank[k]}") for k in MPI_KEYS if rank.get(k))
    return found


def run_identities(run: Run) -> list[tuple[str, ...]]:
    """Every identity any of a run's processes carries, in KIND_WORDS order, each once."""
    seen: dict[tuple[str, ...], None] = {}
    if run.launch is not None:
        cmd = run.launch
        seen.setdefault(("run", str(cmd.get("root_pid")), str(cmd["host"]), repr(cmd["ts"])))
    for p in run.processes:
        if p.rank:
            for ident in process_identities(p.rank, p.host):
                seen.setdefault(ident)
    order = list(KIND_WORDS)
    return sorted(seen, key=lambda i: (order.index(i[0]) if i[0] in order else len(order), i))


def slurm_steps(job: Job) -> list[str]:
    steps = {str(p.rank["SLURM_STEP_ID"]) for r in job.runs for p in r.processes
             if p.rank and p.rank.get("SLURM_STEP_ID") is not None}
    return sorted(steps, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))


def _span(run: Run) -> tuple[float, float]:
    start = run.start if run.start is not None else 0.0
    return start, run.end if run.end is not None else start


def group(runs: list[Run]) -> list[Job]:
    """The runs grouped into jobs (see the module docstring), in order of their first run."""
    parent = list(range(len(runs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    idents = [run_identities(r) for r in runs]
    sharing: dict[tuple[str, ...], list[int]] = {}
    for i, found in enumerate(idents):
        for ident in found:
            sharing.setdefault(ident, []).append(i)
    for ident, members in sharing.items():
        members.sort(key=lambda i: _span(runs[i]))
        head, reach = members[0], _span(runs[members[0]])[1]
        for i in members[1:]:
            start, end = _span(runs[i])
            if ident[0] in UNIQUE_KINDS or start <= reach + SKEW_S:
                parent[find(i)] = find(head)
                reach = max(reach, end)
            else:  # a later launch that reused the id: a new job from here on
                head, reach = i, end
    groups: dict[int, list[int]] = {}
    for i in range(len(runs)):
        groups.setdefault(find(i), []).append(i)
    jobs = []
    for members in groups.values():
        union: dict[tuple[str, ...], None] = {}
        for i in members:
            for ident in idents[i]:
                union.setdefault(ident)
        jobs.append(Job([runs[i] for i in members], list(union)))
    return sorted(jobs, key=lambda j: (j.start if j.start is not None else 0.0, j.runs[0].id))
