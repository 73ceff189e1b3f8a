"""An autotune pool's kills in the Answer's words (the report dict's pools[].kills: derive/autotune.py): the
hung benchmark and torch's SIGKILL first (the cause), the zombie it left under its creator under it."""

from __future__ import annotations

from typing import Any

from .fmt import seconds_text, site


def killed(rep: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pool, kill) for every kill of the report's autotune pools, in the pools' order."""
    return [(pool, k) for pool in rep.get("pools") or () for k in pool.get("kills") or ()]


def cause_words(rep: dict[str, Any]) -> str:
    """'Autotune subprocess 997 gave no answer to a benchmark for 4.0 s (the wait at train.py:24): main 714 killed it
    with SIGKILL at 9.7 s (get's timeout) and started 1169 in its place.'"""
    found = killed(rep)
    if not found:
        return ""
    pool, k = found[0]
    who = f"{pool['creator_role']} {pool['creator_pid']}"
    waited = f" for {k['waited_s']:.1f} s" if k.get("waited_s") is not None else ""
    at = f" (the wait at {site(k['caller'])})" if k.get("caller") else ""
    how = "with SIGKILL" if k.get("signal") in (None, "SIGKILL") else f"({k['signal']})"
    text = (f"Autotune subprocess {k['pid']} gave no answer to a benchmark{waited}{at}: {who} killed it {how} at "
            f"{seconds_text(k['at'])}, on its timeout")
    if k.get("replacement_pid") is not None:
        text += f", and started {k['replacement_pid']} in its place"
    more = f" ({len(found) - 1} more killed: under Findings)" if len(found) > 1 else ""
    return text + more + "."


def symptom_words(rep: dict[str, Any]) -> list[str]:
    """What followed from the kill, counted as `ps` shows it: the killed subprocess left defunct under its
    creator while the creator lived (torch's kill() never waits)."""
    out = []
    for pool, k in killed(rep)[:1]:
        if not k.get("zombie_under_creator") or k.get("zombie_from") is None:
            continue
        who = f"{pool['creator_role']} {pool['creator_pid']}"
        start, end = k["zombie_from"], k.get("zombie_to")
        until = (f"until {who} ended at {seconds_text(end)}" if end is not None and k.get("zombie_until_creator_end")
                 else f"until it was reaped at {seconds_text(end)}" if end is not None else "to the end of the log")
        span = f" ({end - start:.1f} s)" if end is not None else ""
        out.append(f"{k['pid']} stayed a zombie under {who} (`ps` lists it <defunct>) from {seconds_text(start)} "
                   f"{until}{span}: torch's TuningProcess.kill() never waits for it.")
    return out
