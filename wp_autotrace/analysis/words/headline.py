"""A finding told as one bullet of the Answer: the finding's own text, cut at a clause when it is longer than
a bullet may be (Findings below has all of it), and the leftovers with their cause.
"""

from __future__ import annotations

from typing import Any

from .fmt import plural, size_text


def _killed_launcher(rep: dict[str, Any], f: dict[str, Any]) -> str:
    """Leftovers whose cause is their main killed alone (findings/leftovers.py): the kill first, the children that ran
    on, the pools they made under it with what those held, then what was left in all."""
    c = f["cost"]
    kids, pools = c["children_left"], c.get("pools_left") or 0
    held = f", {size_text(c['pools_left_bytes'])}" if c.get("pools_left_bytes") else ""
    made = (f", with the {plural(pools, 'compile pool')} they made ({c['pool_procs_left']} processes{held})"
            if pools else "")
    real = rep["costs"].get("leftover_real_bytes")
    about = "at least" if rep["costs"].get("leftover_at_least") else "about"
    mem = f" ({about} {size_text(real)})" if real else ""
    n = c["processes"]
    were = "process was" if n == 1 else "processes were"
    return (f"The main process {c['main_how']}, which ends that one process: its {kids} child "
            f"{'process' if kids == 1 else 'processes'} ran on{made}; {n} {were} left running after it{mem}.")


# The longest problem bullet told in the Answer: longer findings are cut at a clause (the whole is below); a
# symptom's, under its cause, shorter.
HEADLINE_CHARS = 220
SYMPTOM_CHARS = 140


def headline(rep: dict[str, Any], f: dict[str, Any], under_cause: bool = False) -> str:
    """A problem in a sentence for the Answer: the leftovers with their cause (not again when told under it),
    else the finding's own text, cut at a clause when long (Findings has all of it)."""
    if f["kind"] == "leftovers" and f["cost"].get("children_left"):
        return _killed_launcher(rep, f)
    if f["kind"] == "leftovers":
        real = rep["costs"].get("leftover_real_bytes")
        about = "at least" if rep["costs"].get("leftover_at_least") else "about"  # View.left_sum_at_least
        read = f["cost"].get("left_read_text", "")
        mem = f" ({about} {size_text(real)}{read.replace(' (', ': ', 1)[:-1] if read else ''})" if real else ""
        nested = [e for e in rep["warm_pool_callers"] if e["depth"] > 0]
        cause = (f": compile sidecars that made pools of their own, nested {rep['max_sidecar_depth']} deep"
                 if nested and rep["max_sidecar_depth"] > 1 and not under_cause else "")
        if f["cost"].get("orphans_short"):  # a pool's job's program, re-parented: what it is, under its cause too
            cause = f": {f['cost']['orphans_short']}"
        elif f["cost"].get("dead_pool_workers"):  # a dead sidecar's workers: no pool left to stop them
            cause = ": the dead pool's workers, which nothing stopped"
        n, stopped = f["cost"]["processes"], f["cost"].get("stopped")
        were = "process was" if n == 1 else "processes were"
        # a stopped one (SIGSTOP, state T) runs nothing: left behind, not running
        left = ("left behind, stopped (state T)," if stopped == n else
                f"left behind ({stopped} stopped, state T)" if stopped else "left running")
        return f"{n} {were} {left} after the main process{mem}{cause}."
    text = str(f["text"])
    limit = SYMPTOM_CHARS if under_cause else HEADLINE_CHARS
    if len(text) <= limit:
        return text
    if f.get("headline") and (not under_cause or len(str(f["headline"])) <= HEADLINE_CHARS):
        # written for the Answer: under its cause too, where it fits a lead's length (a lost job's wait)
        return str(f["headline"])
    out = _cut(text, limit)
    if len(out) < limit // 2:
        # the clause that fit sat inside an aside (a sender's "(os.kill at …)"), and closing it left the subject
        # alone: the text without its asides keeps the clause that answers. Only then: an aside may be a
        # qualifier ("(how, the log does not say)", "(1 of 2 read)") that a longer cut keeps.
        plain = _cut(_without_asides(text), limit)
        out = plain if len(plain) > len(out) else out
    return out


def _cut(text: str, limit: int) -> str:
    """text within limit: cut at the last clause that fits (a whole clause, no "(…)" left: Findings has the
    rest), else at a word."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(mark, 0, limit) for mark in ("; ", ": ", ", e.g. "))
    if cut > limit // 3:
        return _closed(text[:cut]).rstrip(".") + "."
    return _closed(text[:limit].rsplit(" ", 1)[0]) + " …"


def _without_asides(text: str) -> str:
    """text with each outermost " (…)" taken out (nested ones with it); an unclosed one is kept as written."""
    # the parentheses inside an aside count whatever precedes them
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(" and (depth or text[i - 1:i] == " "):  # "worker(s)" is a word, not an aside
            if depth == 0:
                out.append(text[start:i].rstrip(" "))
                start = i
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                start = i + 1
    out.append(text[start:])
    return "".join(out)


def _closed(cut: str) -> str:
    """A cut text with no parenthesis left open: cut again before the last one it opened (a list cut in its
    middle reads as whole, "(1 process_pool, 5 …")."""
    while cut.count("(") > cut.count(")") and " (" in cut:
        cut = cut[:cut.rfind(" (")]
    return cut
