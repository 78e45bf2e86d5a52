"""How likely one run of the broad suite's report half meets its targets, for a tuner of a given
true speed: the targets read single-seed ratios, and MetaSchedule's best alone moves from seed
to seed by more than most search changes move it.

The model: a tuner that is MetaSchedule, every case `f` times faster, with MetaSchedule's own
seed-to-seed spread. One case's ratio is then `f * MS_a / MS_b` for two seeds a, b of the same
case, drawn from the committed results' pairs of MetaSchedule runs (the broad suite's selection
half: 13 cases x 2 seeds; the quick suite's rerun: 7 operators x 3 seeds), either sign. Each
simulated report half has the committed report's cases (their family, kind and budget) and is
summarised by the suite's own `half_summary`, so every key is read as the targets read it.
`f = 1` is MetaSchedule against itself. A second set of rows (`by_speed_steady`) gives the tuner
no seed spread of its own: the same draws scaled by 1/sqrt(2), MetaSchedule's single-seed share of
a two-seed difference. No tuning runs: this reads committed JSON only.

    python bench/target_reach.py   # -> bench/results/target_reach.json and .png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from harl_vs_metaschedule import BROAD_REPORT, BROAD_SELECT, HARL, MS, half_summary  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SPEEDS = (1.0, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)


def seed_pairs(broad: dict[str, Any], quick: dict[str, Any]) -> dict[str, list[float]]:
    """log(MS best of seed a / seed b) for every two seeds of one case, per source."""
    def logs(bests_per_case: list[list[float]]) -> list[float]:
        return [math.log(a / b) for bests in bests_per_case for a, b in combinations(bests, 2)]

    select = [[r[MS]["best_ms"] for r in c["runs"]] for c in broad["cases"].values() if c["half"] == BROAD_SELECT]
    quick_bests = [[r[MS]["best_ms"] for r in op["runs"]] for op in quick["operators"].values()]
    return {"broad-select": logs(select), "quick": logs(quick_bests)}


def report_skeleton(broad: dict[str, Any]) -> list[dict[str, Any]]:
    """The committed report half's cases, without their runs."""
    return [{k: c[k] for k in ("key", "family", "kind", "trials")}
            for c in broad["cases"].values() if c["half"] == BROAD_REPORT]


def simulated_half(cases: list[dict[str, Any]], ratios: np.ndarray) -> dict[str, Any]:
    """`half_summary` of the report half with one run per case at the given latency ratios."""
    out = {}
    for case, ratio in zip(cases, ratios):
        run = {"seed": 0, "ratios": {"latency_ratio": float(ratio), "trials_ratio": 1.0, "reached": True,
                                     "time_to_quality_ratio": 1.0},
               HARL: {"best_ms": float(ratio)}, MS: {"best_ms": 1.0}}
        out[case["key"]] = {**case, "seeds": [0], "runs": [run]}
    return half_summary(out)


def targets_met(s: dict[str, Any]) -> dict[str, bool]:
    """The issue's latency targets on one report half."""
    return {
        "geomean_64": s["geomean_latency_ratio"] <= 0.90 and s["geomean_latency_ratio_ci90"][1] < 1.0,
        "geomean_256": (s["geomean_latency_ratio_256"] or math.inf) <= 0.90 and s["geomean_latency_ratio_256_ci90"][1] < 1.0,
        "worst": s["worst_latency_ratio"][1] <= 1.10,
        "families_lost": not s["families_lost"],
        "network_tasks_lost": not s["network_tasks_lost"],
    }


def reach(cases: list[dict[str, Any]], noise: np.ndarray, speeds: tuple[float, ...], draws: int, seed: int) -> dict[str, Any]:
    """Per speed: the chance of each latency target and of all of them, over `draws` report halves."""
    rng = np.random.default_rng(seed)
    out = {}
    for f in speeds:
        hits: dict[str, int] = {}
        worst, lost = [], []
        for _ in range(draws):
            eps = rng.choice(noise, size=len(cases)) * rng.choice((-1.0, 1.0), size=len(cases))
            s = simulated_half(cases, f * np.exp(eps))
            met = targets_met(s)
            met["all"] = all(met.values())
            for k, v in met.items():
                hits[k] = hits.get(k, 0) + v
            worst.append(s["worst_latency_ratio"][1])
            lost.append(len(s["families_lost"]))
        out[str(f)] = {"p_met": {k: v / draws for k, v in hits.items()},
                       "worst_latency_ratio_median": float(np.median(worst)),
                       "families_lost_median": float(np.median(lost))}
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speeds = [float(f) for f in result["by_speed"]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, key in enumerate(("geomean_64", "geomean_256", "worst", "families_lost", "network_tasks_lost", "all")):
        for rows, style in (("by_speed", "-"), ("by_speed_steady", ":")):
            ax.plot(speeds, [result[rows][str(f)]["p_met"][key] for f in speeds], style, marker="o", color=f"C{i}",
                    label=key if rows == "by_speed" else None, linewidth=2.5 if key == "all" else 1.2)
    ax.invert_xaxis()
    ax.set_xlabel("tuner latency / MetaSchedule's, every case (1.0 = MetaSchedule, another seed)")
    ax.set_ylabel("chance one report-half run meets it")
    ax.set_title("Report-half latency targets at one seed per case\n(solid: tuner with MetaSchedule's seed spread; dotted: none)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--broad", default=str(RESULTS / "harl_vs_metaschedule_broad.json"))
    p.add_argument("--quick", default=str(RESULTS / "harl_vs_metaschedule_quick_rerun.json"))
    p.add_argument("--draws", type=int, default=1000, help="simulated report halves per speed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "target_reach.json"))
    args = p.parse_args()

    broad = json.loads(Path(args.broad).read_text())
    pools = seed_pairs(broad, json.loads(Path(args.quick).read_text()))
    noise = np.array([v for pool in pools.values() for v in pool])
    cases = report_skeleton(broad)
    result = {
        "command": "python " + " ".join(sys.argv),
        "model": "ratio = f * MS_seed_a / MS_seed_b per case, pairs drawn from committed MetaSchedule runs, either sign",
        "noise": {name: {"pairs": len(v), "log_sd": float(np.std(np.r_[v, -np.array(v)]))} for name, v in pools.items()},
        "report_cases": {"64": sum(c["trials"] <= 64 for c in cases), "256": sum(c["trials"] > 64 for c in cases),
                         "families": len({c["family"] for c in cases if c["kind"] == "operator"}),
                         "network_tasks": sum(c["kind"] == "network_task" for c in cases)},
        "draws": args.draws,
        "by_speed": reach(cases, noise, SPEEDS, args.draws, args.seed),
        "by_speed_steady": reach(cases, noise / math.sqrt(2), SPEEDS, args.draws, args.seed),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    plot(result, Path(args.out).with_suffix(".png"))
    print(f"noise (log SD): {result['noise']}; report cases: {result['report_cases']}")
    keys = ("geomean_64", "geomean_256", "worst", "families_lost", "network_tasks_lost", "all")
    for rows, title in (("by_speed", "tuner with MetaSchedule's seed spread"), ("by_speed_steady", "tuner without seed spread")):
        print(f"\n{title}: chance of each target, median worst ratio and families lost")
        print(f"{'f':>5} " + " ".join(f"{k:>18}" for k in keys) + "  worst~  lost~")
        for f, row in result[rows].items():
            print(f"{f:>5} " + " ".join(f"{row['p_met'][k]:>18.3f}" for k in keys)
                  + f"  {row['worst_latency_ratio_median']:.2f}  {row['families_lost_median']:.0f}")


if __name__ == "__main__":
    main()
