"""How often a HARL round sets a new best, by round kind, after the task's best has stalled.

Why: an A/B of final latencies over the selection half has a noise floor of about +-7 % at 26
pairs (runs of one config differ by 0.2 in log), so an option that changes a few rounds of a
run cannot show there. Whether those rounds find anything can: a round either beats the best
measured before it or not. This reads the records of A/B runs (`harl_vs_metaschedule.py
--space-option ...`: each arm's records file is in its JSON) and counts, for the rounds that
follow `--stall` searched rounds without a new best, how many set one and by how much.

Round kinds, from the records' `extra`: W warm-up batch (random fills), S searched round (the
bandit's sketch), P spread round (`episode.spread_rounds`), E exploration round
(`episode.stall_rounds`).

    python bench/round_hits.py runs/ab_stall.json --stall 2
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any


def round_kind(extra: dict[str, Any]) -> str:
    if extra.get("explore"):
        return "E"
    if extra.get("spread"):
        return "P"
    return "W" if extra.get("searched") is None else "S"


def rounds(records: Path) -> list[tuple[str, float]]:
    """(kind, best latency in s) per HARL round of one records file, in order."""
    from hiertune.platform.records import RecordStore

    out: dict[Any, list] = {}
    for r in RecordStore(records, writer=False).trials(tuner="harl"):
        entry = out.setdefault(r.extra.get("round"), [round_kind(r.extra), math.inf])
        entry[1] = min(entry[1], min(r.latencies_s) if r.latencies_s else math.inf)
    return [(kind, best) for kind, best in out.values()]


def after_stall(run: list[tuple[str, float]], stall: int) -> list[tuple[str, float | None]]:
    """(kind, speed-up over the best before it or None) for each round after `stall` searched
    rounds in a row without a new best; a new best or an exploration round starts the count again."""
    best, stalled, out = math.inf, 0, []
    for kind, latency in run:
        hit = latency < best
        if kind != "W" and stalled >= stall:
            out.append((kind, best / latency if hit and math.isfinite(best) else None))
        if hit or kind == "E":
            stalled = 0
        elif kind == "S":
            stalled += 1
        best = min(best, latency)
    return out


def summarise(ab_files: list[Path], stall: int) -> dict[str, dict[str, Any]]:
    """Per arm and round kind: rounds after a stall, how many set a new best, their median speed-up."""
    seen: dict[str, list[float | None]] = {}
    for path in ab_files:
        for tag, cases in json.loads(path.read_text()).get("ab", {}).items():
            for case in cases.values():
                for arm in ("defaults", "option"):
                    records = Path(case[arm]["records"])
                    if not records.exists():
                        raise SystemExit(f"{path}: the records of {arm} ({records}) are gone; rerun the A/B")
                    for kind, gain in after_stall(rounds(records), stall):
                        seen.setdefault(f"{tag} | {arm} | {kind}", []).append(gain)
    return {key: {"rounds": len(gains), "new_best": sum(g is not None for g in gains),
                  "rate": sum(g is not None for g in gains) / len(gains),
                  "median_speedup": statistics.median(g for g in gains if g is not None) if any(gains) else None}
            for key, gains in sorted(seen.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ab_json", nargs="+", type=Path, help="A/B JSON files of harl_vs_metaschedule.py")
    parser.add_argument("--stall", type=int, default=2, help="searched rounds without a new best before a round counts")
    parser.add_argument("--out", type=Path, help="write the summary here as JSON")
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    summary = summarise(args.ab_json, args.stall)
    table = Table(title=f"rounds after {args.stall} searched rounds without a new best")
    for col in ("option", "arm", "kind", "rounds", "new best", "rate", "median speed-up"):
        table.add_column(col, justify="right", overflow="fold")
    for key, s in summary.items():
        table.add_row(*key.split(" | "), str(s["rounds"]), str(s["new_best"]), f"{s['rate']:.2f}",
                      "-" if s["median_speedup"] is None else f"{s['median_speedup']:.3f}")
    Console().print(table)
    if args.out:
        args.out.write_text(json.dumps({"stall": args.stall, "inputs": [str(p) for p in args.ab_json],
                                        "round_hits": summary}, indent=1))


if __name__ == "__main__":
    main()
