"""What every finding shares: the Finding record and the few phrases several findings build."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ..derive.plugins import advice_for_frame
from ..words.fmt import site

if TYPE_CHECKING:
    from ..derive.view import View

class Finding(NamedTuple):
    """One finding: a stable kind, how bad, one sentence, the evidence, what to do, what it cost."""

    kind: str
    severity: str  # "problem", "warning" or "info"
    text: str
    pids: list[int]
    evidence: list[str]
    advice: str
    cost: dict[str, Any]
    # The finding in one short sentence for the Answer, where its text is too long to be told there whole and
    # a cut at a clause would drop what the user asked (which worker held a hung job); "": the text's own clauses.
    headline: str = ""


def sites_text(calls: Any) -> str:
    sites = sorted({site(c.caller) for c in calls})
    return ", ".join(sites[:3]) + (f" (+{len(sites) - 3} more)" if len(sites) > 3 else "")


def roles_text(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


def plugin_advice(calls: Any, generic: str) -> str:
    """The known behaviour and fix of each plugin release among the callers (plugins.py), then generic."""
    known: list[str] = []
    for c in calls:
        text = advice_for_frame(c.caller)
        if text and text not in known:
            known.append(text)
    if not known:
        return generic
    return " ".join(known[:2]) + f" In general: {generic}"


def in_ranks(v: View, procs: Any) -> str:
    """' in rank 0, 1' (the ranks the processes belong to), or ''."""
    ranks = sorted({v.rank_of[p.index] for p in procs if p.index in v.rank_of})
    if not ranks:
        return ""
    names = [r.removeprefix("rank ") for r in ranks]
    return f" in {'rank' if len(names) == 1 else 'ranks'} {', '.join(names[:8])}" + (
        f" (+{len(names) - 8} more)" if len(names) > 8 else "")
