"""Compare a report's figures (report.json) with the independent probe's (probe.json, ticks.json) in one
case directory written by bench/users/probe.py; prints one JSON object per comparison and the Answer.

    python bench/users/score.py /tmp/users/ci_xdist

Tolerant of the report's JSON keys changing between versions: a key it cannot find reads as null.
"""
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe as P  # noqa: E402

MIB = 2**20


def mib(v: Any) -> Any:
    return round(v / MIB, 1) if isinstance(v, (int, float)) else v


def pct(tool: Any, truth: Any) -> Any:
    if not isinstance(tool, (int, float)) or not isinstance(truth, (int, float)) or not truth:
        return None
    return round(100.0 * (tool - truth) / truth, 1)


def probe_pools(out: Path) -> dict[int, dict[str, Any]]:
    ticks = json.loads((out / "ticks.json").read_text())
    for tk in ticks:
        tk["pools"] = {int(k): v for k, v in tk["pools"].items()}
    pr = P.Probe.__new__(P.Probe)
    pr.ticks, pr.main_end = ticks, json.loads((out / "probe.json").read_text())["main_end_s"]
    pools = {}
    for pool in P.pool_summary(pr):
        sid, a, b = pool["sidecar"], pool["idle_from"], pool["idle_to"]
        rows = [(tk["t"], tk["pools"][sid]["pss"]) for tk in ticks
                if sid in tk["pools"] and a is not None and a <= tk["t"] <= b]
        pool["idle_gib_s"] = round(sum((t2 - t1) * p1 for (t1, p1), (t2, _) in zip(rows, rows[1:])) / 2**30, 2)
        alone = [tk["pools"][sid]["pss"] for tk in ticks if sid in tk["pools"] and tk["pools"][sid]["n"] == 1
                 and tk["t"] > (a or 0)]
        pool["sidecar_alone_mib"] = round(max(alone) / MIB, 1) if alone else None
        pools[sid] = pool
    return pools


def main(out_s: str) -> None:
    out = Path(out_s)
    rep = json.loads((out / "report.json").read_text())
    prb = json.loads((out / "probe.json").read_text())
    truth = probe_pools(out)
    rows = []
    ticks = json.loads((out / "ticks.json").read_text())
    for p in rep.get("pools", []):
        sid = p.get("sidecar_pid")
        t = truth.get(sid, {})
        if sid is None and p.get("creator_pid") in truth:  # a fork pool the probe found itself (--fork-pool)
            t = truth[p["creator_pid"]]
        elif sid is None and p.get("worker_pids"):  # a pool without a sidecar (fork, spawn): its workers at once
            pids = {str(w) for w in p["worker_pids"]}
            sums = [sum(v for k, v in tk.get("pss_by_pid", {}).items() if k in pids) for tk in P.at_once(ticks)]
            t = {"peak_pss_mib": round(max(sums, default=0) / MIB, 1)}
        caller = p.get("caller") or {}
        rows.append({
            "pool": sid, "creator": f"{p.get('creator_role')} {p.get('creator_pid')}",
            "caller": f"{caller.get('file', '?').split('/')[-1]}:{caller.get('line')}",
            "idle_s": [p.get("idle_s"), t.get("idle_s"), pct(p.get("idle_s"), t.get("idle_s"))],
            # every idle stretch the report tells (its gaps between uses and the span after its last job): the
            # probe's one stretch is the pool's longest, which may be a gap (a notebook idle before its next cell)
            "idle_total_s": [p.get("idle_total_s"), t.get("idle_s"), pct(p.get("idle_total_s"), t.get("idle_s"))],
            "idle_total_gib_s": [None if p.get("idle_total_mib_s") is None else round(p["idle_total_mib_s"] / 1024, 2),
                                 t.get("idle_gib_s")],
            "held_mib": [mib(p.get("held_pss_bytes")), t.get("idle_pss_mib"),
                         pct(mib(p.get("held_pss_bytes")), t.get("idle_pss_mib")),
                         f"{p.get('span_sampled')}/{p.get('span_processes')} read"],
            "idle_gib_s": [None if p.get("idle_mib_s") is None else round(p["idle_mib_s"] / 1024, 2),
                           t.get("idle_gib_s")],
            "peak_mib": [mib(p.get("peak_pss_bytes")), t.get("peak_pss_mib"),
                         pct(mib(p.get("peak_pss_bytes")), t.get("peak_pss_mib"))],
            "sidecar_end": [p.get("sidecar_end"), t.get("last_seen"), p.get("sidecar_exit")],
            "sidecar_alone_after_workers_mib": t.get("sidecar_alone_mib"),
            "shutdown_by": p.get("shutdown_by"),
        })
    costs = rep.get("costs", {})
    prb.update(P.peaks_at_once(ticks))  # read again from the ticks: a run saved before torn ticks were left out
    summary = {
        "pools": [len(rep.get("pools", [])), len(truth)],
        "pools_peak_mib_at_once": [mib(costs.get("pool_peak_pss_bytes")), prb["peak_pools_pss_mib_at_once"],
                                   pct(mib(costs.get("pool_peak_pss_bytes")), prb["peak_pools_pss_mib_at_once"])],
        "program_peak_mib_at_once_probe": prb["peak_total_pss_mib_at_once"], "torn_ticks_probe": prb["torn_ticks"],
        "leftovers": [sorted(rep.get("leftover_pids", [])), sorted(prb["alive_after_main"])],
        "leftover_mib": [mib(costs.get("leftover_real_bytes") or costs.get("leftover_pss_bytes")),
                         round(sum(x["pss_alone_after_main_mib"] or 0 for x in prb["processes"]
                                   if x["pid"] in prb["alive_after_main"]), 1)],
        "zombies_probe": prb["zombies"],
        # ps lines and threads, as users count them: the report's peak concurrent processes beside the probe's
        "procs_at_once": [rep.get("max_concurrent_processes"), prb.get("max_procs_at_once")],
        "threads_at_once_probe": prb.get("max_threads_at_once"),
        "main_end_s_probe": prb.get("main_end_s"),
    }
    for r in rows:
        print(json.dumps(r))
    print(json.dumps(summary))
    print("ANSWER:", rep.get("answer", "")[:2000])


if __name__ == "__main__":
    main(sys.argv[1])
