"""Can the cost model rank a task's sketches against each other, and from whose data? Offline.

HARL's sketch bandit judges most sketches by one to three random fills and then spends most of
the budget in one sketch, so its cost model is fitted on schedules of that sketch. MetaSchedule's
64 trials spread over every sketch. On pairs of one HARL and one MetaSchedule run of the same
case (the records `harl_vs_metaschedule.py` leaves in its --work-dir), this fits the model
(`CostModel`, with and without the shipped prior) on
* one tuner's schedules and ranks the other's (`harl->ms`, `ms->harl`: Spearman of the score
  against throughput): which data teaches more about schedules it has not seen;
* all but one sketch of both tuners' schedules and scores the held-out sketch (`loso_*`): with
  data from the other sketches, does the best score per sketch order the sketches by their true
  bests (`loso_order`, Spearman over sketches) and name the best one (`loso_names_best`)?
No measurement: the records' latencies are the ground truth. A minute per pair.

    python bench/cost_model_across_sketches.py \\
        --pair bert-2l/layer_norm runs/broad_networks_cold_s1/bert-2l_layer_norm/layer_norm_{harl,metaschedule}_1.jsonl \\
        --pair SFM:2 runs/broad_report_shipped_seed1/SFM_2/SFM_2_{harl,metaschedule}_1.jsonl \\
        --out bench/results/cost_model_across_sketches.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_compare import pair_schedules, readable, spearman  # noqa: E402 - the case's task, built as the suite builds it

OUT = Path(__file__).resolve().parent / "results" / "cost_model_across_sketches.json"
PRIORS = ("none", "builtin")
MIN_SCHEDULES = 8  # a tuner's schedules a case needs (records of another task read back as none)


def fitted(prior: str, rows: list[tuple[Any, float]]) -> Any:
    from hiertune.policies.cost_model import CostModel, CostModelConfig

    model = CostModel(CostModelConfig(prior=prior))
    model.update([s for s, _ in rows], [t for _, t in rows])
    return model


def rank_across(rows_in: list[tuple[Any, float]], rows_out: list[tuple[Any, float]], prior: str) -> float:
    scores = fitted(prior, rows_in).predict([s for s, _ in rows_out])
    return spearman(scores, -np.array([t for _, t in rows_out]))


def leave_one_sketch_out(rows: list[tuple[Any, float]], prior: str) -> dict[str, Any]:
    sketches = sorted({s.sketch for s, _ in rows})
    true_best = {k: min(t for s, t in rows if s.sketch == k) for k in sketches}
    top_score = {}
    for k in sketches:
        model = fitted(prior, [(s, t) for s, t in rows if s.sketch != k])
        top_score[k] = float(np.max(model.predict([s for s, _ in rows if s.sketch == k])))
    order = spearman(np.array([top_score[k] for k in sketches]), -np.array([true_best[k] for k in sketches]))
    best, named = min(true_best, key=true_best.get), max(top_score, key=top_score.get)
    return {"loso_order": order, "loso_names_best": best == named, "best_sketch": best, "named_sketch": named}


def plot(result: dict[str, Any], path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    cases = result["cases"]
    fig, axes = plt.subplots(1, len(PRIORS), figsize=(5 * len(PRIORS), 4.5), sharey=True)
    for ax, prior in zip(axes, PRIORS, strict=True):
        for kind, network, marker in (("operators", False, "o"), ("network tasks", True, "s")):
            for many, colour in ((False, "tab:blue"), (True, "tab:red")):
                picked = [c[f"prior={prior}"] for c in cases
                          if ("/" in c["workload"]) == network and (c["sketches"] > 4) == many]
                if picked:
                    ax.scatter([r["harl->ms"] for r in picked], [r["ms->harl"] for r in picked], marker=marker,
                               color=colour, alpha=0.75, label=f"{kind}, {'> 4' if many else '<= 4'} sketches")
        ax.plot([-1, 1], [-1, 1], color="grey", lw=0.8)
        ax.set_xlabel("Spearman, fitted on HARL's trials, ranking MetaSchedule's")
        ax.set_title(f"prior: {prior}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Spearman, fitted on MetaSchedule's trials, ranking HARL's")
    axes[-1].legend(fontsize=8, loc="lower right")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs=3, action="append", required=True, metavar=("WORKLOAD", "HARL", "MS"),
                        help="a case (DEP:2, or a network task such as bert-2l/layer_norm) and its two records files")
    parser.add_argument("--label", action="append", default=[], help="a label per --pair (default: the workload)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    result: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "cases": []}
    for i, (workload, harl, ms) in enumerate(args.pair):
        space, schedules = pair_schedules(workload, {"harl": harl, "metaschedule": ms})
        sketches, data = space.num_sketches, {"harl": readable(schedules["harl"]), "ms": readable(schedules["metaschedule"])}
        if min(len(rows) for rows in data.values()) < MIN_SCHEDULES:
            print(f"{workload}: fewer than {MIN_SCHEDULES} schedules of a tuner read back into its sketches "
                  f"({ {k: len(v) for k, v in data.items()} }), left out", flush=True)
            continue
        case = {"label": args.label[i] if i < len(args.label) else workload, "workload": workload, "harl": harl,
                "ms": ms, "sketches": sketches, "schedules": {k: len(v) for k, v in data.items()}}
        for prior in PRIORS:
            case[f"prior={prior}"] = {"harl->ms": rank_across(data["harl"], data["ms"], prior),
                                      "ms->harl": rank_across(data["ms"], data["harl"], prior),
                                      **leave_one_sketch_out(data["harl"] + data["ms"], prior)}
        result["cases"].append(case)
        print(json.dumps({k: v for k, v in case.items() if k not in ("harl", "ms")}), flush=True)
    for prior in PRIORS:
        rows = [c[f"prior={prior}"] for c in result["cases"]]
        result[f"median_prior={prior}"] = {key: float(np.median([r[key] for r in rows]))
                                           for key in ("harl->ms", "ms->harl", "loso_order")}
        result[f"median_prior={prior}"]["loso_names_best"] = sum(r["loso_names_best"] for r in rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps({k: v for k, v in result.items() if k.startswith("median")}))
    print(f"JSON -> {args.out}")


if __name__ == "__main__":
    main()
