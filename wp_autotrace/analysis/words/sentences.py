"""Sentences shared by the text report, the page and the Answer: one pool's story, how it ended, a process.

They word the report dict (never the model): what is said lives here, on the ground of analysis, and
how it is laid out lives in present/.
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import GUARDED_ROLES
from .fmt import IDLE_AFTER_WORDS, UNKNOWN_IDLE, gap_words, idle_mib_s_text, pool_name, seconds_text, site, size_text


def covered_text(pool: dict[str, Any]) -> str:
    """', N of M processes read' when the pool's held figure sums only some of its processes alive then (the
    report's held_read of held_processes: the figure's own moment; older reports: the idle span's span_sampled of
    span_processes); the others count in no figure: nothing is estimated. '' when it read them all."""
    n, m = ((pool["held_read"], pool["held_processes"]) if pool.get("held_read") is not None
            else (pool.get("span_sampled"), pool.get("span_processes")))
    return f", {n} of {m} processes read" if isinstance(n, int) and isinstance(m, int) and n < m else ""


def floor_text(pss: int, n: Any, m: Any, read: str = "processes read", never: Any = 0,
               split: dict[str, Any] | None = None) -> tuple[str, str]:
    """('240 MiB', ''), or ('at least 240 MiB', ', 2 of 3 processes read') where a figure's moment read n of the m
    processes alive then (a peak's pools[].peak_read of peak_processes, a memory_at_once series' peak, the
    orphaned span's read of processes): the others count in no figure, so it is a floor. The same where its
    stretch had processes the watcher reads that it never read (never: pools[].peak_never_read, ', 2 processes
    never read'), or pools alive together at a moment whose own passes on either side of it sum to more (split:
    {'pools', 'at'}, ', 2 pools alive together at 13.1 s read in different passes'): mempeak.peak. Older
    reports carry none of these: the figure alone."""
    why = [f"{n} of {m} {read}"] if isinstance(n, int) and isinstance(m, int) and n < m else []
    if isinstance(never, int) and never > 0:
        why.append(f"{never} process{'es' if never > 1 else ''} never read")
    if split and split.get("pools"):
        why.append(f"{split['pools']} pools alive together at {seconds_text(split.get('at'))} read in different "
                   "passes")
    return (f"at least {size_text(pss)}", ", " + ", ".join(why)) if why else (size_text(pss), "")


def gaps_words(gaps: list[dict[str, Any]]) -> str:
    """', idle 51.5 s between its ready at 15.7 s and its first job at 67.2 s (+1 more idle gap of 17.0 s)': a
    pool's largest idle gap between its uses (the report's pools[].idle_gaps, derive/gaps.idle_gaps), the others
    counted; '' without gaps."""
    if not gaps:
        return ""
    big = max(gaps, key=lambda g: g["s"])
    rest = [g["s"] for g in gaps if g is not big]
    more = (f" (+{len(rest)} more idle gap{'s' if len(rest) > 1 else ''} of {sum(rest):.1f} s)" if rest else "")
    return f", idle {gap_words(seconds_text(big['from_s']), seconds_text(big['to_s']), big['s'], big['first'])}{more}"


def idle_cpu_words(pool: dict[str, Any]) -> str:
    """' (0.00 s of CPU over the 58.1 s of it the watcher read)': the pool's CPU while idle, where its samples
    show it (derive/pools.py, "idle CPU"); '' where they do not."""
    cpu = pool.get("idle_cpu")
    if not cpu:
        return ""
    return f" (its processes used {cpu['cpu_s']:.2f} s of CPU in the {cpu['to'] - cpu['from']:.1f} s of it read)"


def made_at(pool: dict[str, Any]) -> str:
    """Where the pool was made: its caller, and where that was called from when another pool of its creator was
    made at the same line ('train.py:21 (compile_step), called from train.py:35 (<module>)')."""
    outer = pool.get("called_from")
    return site(pool["caller"]) + (f", called from {site(outer)}" if outer else "")


def pool_sentence(pool: dict[str, Any], again: bool = False) -> str:
    """One pool's story in a sentence: who made it where, how long it lived and idled, its real memory. again:
    a later pool of the same creator ('made another compile pool'), told without the counts."""
    name = pool_name(pool)
    start, end = lifespan(pool)
    # no record shows it alive at the end of the log (derive/alive.py): its ending's words say when it was last seen
    kind = (pool.get("ending") or {}).get("kind")
    unseen = kind == "end-unseen"
    # nothing seen to live, or alive at the log's end: how it ended says so (its words, never said twice)
    lived = ("" if start is None or (end is None and kind in ("end-unseen", "running"))
             else f"; it lived {end - start:.1f} s" if end is not None
             else "; it was still running at the end of the log")
    gaps = pool.get("idle_gaps") or []
    idle = gaps_words(gaps)
    after = IDLE_AFTER_WORDS[pool.get("idle_after") or "job"]
    idle += f", idle {pool['idle_s']:.1f} s after {after}{idle_cpu_words(pool)}" if pool["idle_s"] >= 1 else \
        "" if pool.get("idle_known", True) else f", idle {UNKNOWN_IDLE}"
    idle += f" ({pool['idle_total_s']:.1f} s idle in all)" if gaps else ""
    orphan = pool.get("outlived_creator")
    if orphan:  # after its creator ended it was no idle pool: nobody could use or stop it
        idle += (f", outliving its creator by {orphan['s']:.1f} s (ended at {seconds_text(orphan['creator_end'])}; "
                 f"the pool at {seconds_text(orphan['end'])})")
    mem = ""
    if orphan and orphan.get("held_pss_bytes"):  # what it held once orphaned: the span told (derive/pools.py)
        told, part = floor_text(orphan["held_pss_bytes"], orphan.get("read"), orphan.get("processes"))
        mem = f", holding {told} real memory (PSS{part})"
    elif pool["held_pss_bytes"] and not unseen:  # "holding" is told of a pool alive at the end only
        floor = "at least " if covered_text(pool) else ""  # some processes unread: the figure is a floor
        mem = f", holding {floor}{size_text(pool['held_pss_bytes'])} real memory (PSS{covered_text(pool)})"
        idle_mib_s = pool.get("idle_total_mib_s") if gaps else pool["idle_mib_s"]
        if idle_mib_s and (pool["idle_s"] >= 1 or gaps):
            mem += f": {pool_idle_text(pool, idle_mib_s, gaps)} idle"
    elif pool["peak_pss_bytes"]:
        told, part = floor_text(pool["peak_pss_bytes"], pool.get("peak_read"), pool.get("peak_processes"),
                                never=pool.get("peak_never_read"))
        mem = f", peak {told} real memory (PSS{part})"
        if gaps and pool.get("idle_total_mib_s"):  # idle between its uses, none after its last job
            mem += f": {pool_idle_text(pool, pool['idle_total_mib_s'], gaps)} idle"
    by = shutdown_words(pool)
    what = ("an autotune pool" if pool.get("kind") == "autotune" else
            "a quack compile pool (torch._vendor.quack's precompile)" if pool.get("kind") == "quack" else
            "an FX-subprocess compile pool" if pool.get("fx_subprocess") else "a compile pool")
    if again:
        what = "another " + what.split(" ", 1)[1]
    return (f"{'Then ' if again else ''}{pool['creator_role']} {pool['creator_pid']} made {what} ({name}) "
            f"at {made_at(pool)} ({seconds_text(pool['created_at'])} in)"
            f"{lived}{idle}{mem}{quiesce_words(pool)}{by}.{'' if again else counts_words(pool)}")


def counts_words(pool: dict[str, Any]) -> str:
    """The pool counted as its user counts it, at the moment of its memory figure (derive/counts.py):
    ' At 4.7 s the pool and its main were 4 processes (main + sidecar + 2 workers), 11 threads (3 + 4 + 2 + 2);
    main 27842 held 245 MiB of its own beside the pool's 253 MiB: 498 MiB together (PSS).' '' without counts."""
    c = pool.get("counts")
    if not c:
        return ""
    threads = c["threads"]
    side = pool.get("sidecar_pid")
    alive = c.get("pids") or []  # the pool's processes alive at that moment (older reports: none listed)
    workers = [p for p in pool.get("worker_pids") or [] if p in alive] if alive else pool.get("worker_pids") or []
    members = ([side] if side is not None and (side in alive or not alive) else []) + list(workers)
    order = [str(p) for p in members] + sorted(k for k in threads if int(k) not in members)
    own, mine = c.get("creator_pss_bytes"), c.get("creator_threads")
    creator = own is not None or bool(c.get("creator_alive"))  # a ps line then, read or not
    counts = [mine] if own is not None and mine else []
    counts += [threads[k] for k in order if k in threads]
    defunct = _defunct_at(pool, c["at"])
    n = c["processes"] + creator + len(defunct)
    noun = "autotune subprocess" if pool.get("kind") == "autotune" else "worker"
    names = ([c["creator_role"]] if creator else []) + (["sidecar"] if side in members else []) + (
        [f"{len(workers)} {noun}{('es' if noun.endswith('s') else 's') * (len(workers) != 1)}"] if workers else [])
    extra = c["processes"] - len(members)
    names += [f"{extra} more"] if extra > 0 else []
    names += [f"{len(defunct)} defunct"] if defunct else []
    unread = f", {c['read']} of {c['processes']} pool processes read" if c["read"] < c["processes"] else ""
    # every process ps lists has its threads read, or the sum is of those that have: "at least"
    all_threads = len(counts) == n
    threads_text = (f", {'' if all_threads else 'at least '}{sum(counts)} threads ({' + '.join(map(str, counts))})"
                    if counts else "")
    # the pool and its maker, not all that ps lists of the run then (a launcher, other ranks' pools, compilers)
    who = f"the pool and its {c['creator_role']} were" if creator else "the pool was"
    text = f" At {seconds_text(c['at'])} {who} {n} processes ({' + '.join(names)}){threads_text}{unread}"
    if own is None:
        return text + "."
    pool_pss = c["pool_pss_bytes"]
    return (text + f"; {c['creator_role']} {c['creator_pid']} held {size_text(own)} of its own beside the "
            f"pool's {size_text(pool_pss)}: {size_text(own + pool_pss)} together (PSS).")


def _defunct_at(pool: dict[str, Any], at: float) -> list[dict[str, Any]]:
    """The pool's killed autotune subprocesses still defunct at `at`: `ps` lists them too (<defunct>)."""
    return [k for k in pool.get("kills") or () if isinstance(k.get("zombie_from"), (int, float))
            and k["zombie_from"] <= at and (k.get("zombie_to") is None or at < k["zombie_to"])]


def lifespan(pool: dict[str, Any]) -> tuple[float | None, float | None]:
    """(start, end) of the pool's processes, seconds from the first record: its sidecar's; a fork/spawn pool's
    first worker's start and last worker's end (None while one runs)."""
    if pool.get("kind") not in ("executor", "autotune", "quack"):  # a sidecar's; else its members' (no sidecar)
        start, end = pool["sidecar_start"], pool["sidecar_end"]
        return (start if isinstance(start, (int, float)) else None, end if isinstance(end, (int, float)) else None)
    starts = [w["start"] for w in pool["workers"] if w["start"] is not None]
    ends = [w["end"] for w in pool["workers"]]
    return (min(starts) if starts else None,
            max(ends) if ends and all(e is not None for e in ends) else None)


def quiesce_words(pool: dict[str, Any]) -> str:
    """What a quiesce in the idle span left: '; user code quiesced it at 78.2 s: its workers stopped, its
    sidecar still held 240 MiB (PSS, read at 90.1 s)'; '' without a quiesce or a reading after it."""
    after = pool.get("after_quiesce")
    quiesced = [q for q in pool.get("quiesced") or () if after and q["at"] <= after["at"]]
    if not after or not quiesced:
        return ""
    return (f"; {quiesced[0]['by']} quiesced it at {seconds_text(quiesced[0]['at'])}: its workers stopped, "
            f"its sidecar still "
            f"held {size_text(after['sidecar_pss_bytes'])} (PSS, read at {seconds_text(after['at'])})")


def shutdown_words(pool: dict[str, Any]) -> str:
    """How the pool ended, in the words its evidence allows (analysis/derive/poolends.py): "BY shut it down" only when
    the request returned and its sidecar ended after it."""
    words = (pool.get("ending") or {}).get("words")
    return f"; {words}" if words else ""


def process_words(p: dict[str, Any]) -> str:
    """A process for people: role and label (traced), real name (untraced), rank, launcher."""
    if p["launcher"]:
        what = f"launcher ({p['label']})"
    elif p["traced"] is None:  # its records may be under another row (a pid namespace the watcher could not read)
        what = f"{p['label']} (traced: not known)"
    elif not p["traced"]:
        what = f"{p['label']} (untraced{'' if p['role'] == 'child' else ' ' + p['role']})"
    elif p["role"] in GUARDED_ROLES or p["role"] in ("resource-tracker", "forkserver"):
        what = p["role"]
    elif p["forked"] and p["role"] == "child":
        what = f"child (forked from {p['label']})"
    else:
        what = f"{p['role']} ({p['label']})"
    pids = p.get("host_pids")
    if pids:  # its namespace pid: which host process it was, its start time alone says (pidns.unproven)
        what += f" (may be host pid {', '.join(map(str, pids[:-1]))} or {pids[-1]}: the same start, not proven " \
            "which)" if len(pids) > 1 else f" (may be host pid {pids[0]}: the same start, not proven)"
    return what + (f" {p['rank_label']}" if p.get("rank_label") else "")


def pool_idle_text(pool: dict[str, Any], mib_s: float, gaps: list[Any]) -> str:
    """A pool's idle MiB·s as its sentence and the Pools line give it: over its idle span, with its gaps where
    it had any (its totals; else the span alone)."""
    if gaps:
        return idle_mib_s_text(mib_s, pool.get("idle_total_unread_s") or 0.0, pool["idle_total_s"])
    return idle_mib_s_text(mib_s, pool.get("idle_unread_s") or 0.0, pool["idle_s"])
