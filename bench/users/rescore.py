"""Re-derive a probe's pool figures from its saved ticks (bench/users/probe.py writes ticks.json): the longest
idle stretch, the PSS at once over it, and its integral (GiB·s), for comparing with the report's."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe as P  # noqa: E402


def main(out: str) -> None:
    ticks = json.loads((Path(out) / "ticks.json").read_text())
    for tk in ticks:
        tk["pools"] = {int(k): v for k, v in tk["pools"].items()}
    pr = P.Probe.__new__(P.Probe)
    pr.ticks, pr.main_end = ticks, json.loads((Path(out) / "probe.json").read_text())["main_end_s"]
    for pool in P.pool_summary(pr):
        sid, a, b = pool["sidecar"], pool["idle_from"], pool["idle_to"]
        rows = [(tk["t"], tk["pools"][sid]["pss"]) for tk in ticks if sid in tk["pools"] and a and a <= tk["t"] <= b]
        gib_s = sum((t2 - t1) * p1 for (t1, p1), (t2, _) in zip(rows, rows[1:])) / 2**30
        print(json.dumps({**pool, "idle_gib_s": round(gib_s, 2)}))


if __name__ == "__main__":
    main(sys.argv[1])
