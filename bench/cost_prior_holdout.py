"""How well the shipped cost-model prior ranks an operator family it has never seen.

For each family in `hiertune/data/cost_prior_llvm.npz`, the cost model is trained on the other
families' schedules alone and ranks the held-out family's measured schedules (Spearman against
throughput), over all of them and over random draws of 16 (a first measured batch). Beside it,
the model trained on half of the family's own schedules (alone, and with the other families'
as the prior joins them in a search), ranking the other half. `--extra FILE` asks whether a larger
prior ranks an unseen family better: FILE's tasks (other shapes, say) join the other families'
schedules, the held-out family's own left out (kept with `--extra-keeps-family`: its other shapes
seen, as a user's prior holds them), and the same scores are taken again (`..._extra`).
Seconds on one core; no measurement (the prior's latencies are the ground truth).

    python bench/cost_prior_holdout.py
    python bench/build_cost_prior.py --records 'runs/prior_extra/*.jsonl' --out runs/prior_extra.npz  # shapes 0, 3
    python bench/cost_prior_holdout.py --extra runs/prior_extra.npz --out bench/results/cost_prior_holdout_extra.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from trace_compare import spearman

OUT = Path(__file__).resolve().parent / "results" / "cost_prior_holdout.json"


def scores_from(tasks: dict, kind: str, held_out: list[np.ndarray], folder: Path) -> np.ndarray:
    """A cost model trained on `tasks` alone (as a prior), scoring `held_out` schedules."""
    from hiertune.policies.cost_model import CostModel, CostModelConfig, save_prior

    path = folder / "prior.npz"
    save_prior(path, tasks, kind)
    return CostModel(CostModelConfig(prior=str(path)), target_kind=kind).score_features(held_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prior", default=None, help="a prior .npz (default: the shipped llvm prior)")
    parser.add_argument("--extra", default=None, help="a prior .npz whose tasks (other shapes) join the training set")
    parser.add_argument("--extra-keeps-family", action="store_true",
                        help="--extra's tasks of the held-out family stay in (another shape of a seen operator)")
    parser.add_argument("--draws", type=int, default=200, help="random 16-schedule batches per family")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    from hiertune.policies.cost_model import load_prior
    from hiertune.resources import data_path
    from hiertune.workloads.operators import operator_family

    prior = args.prior or str(data_path("cost_prior_llvm.npz"))
    tasks, kind = load_prior(prior)
    extra = load_prior(args.extra)[0] if args.extra else {}
    rng = np.random.default_rng(0)
    families = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (features, costs) in tasks.items():
            throughput = 1.0 / np.asarray(costs, dtype=np.float64)
            others = {n: t for n, t in tasks.items() if n != name}
            pred = scores_from(others, kind, features, Path(tmp))
            draws = [rng.choice(len(costs), 16, replace=False) for _ in range(args.draws)]
            batch = np.array([spearman(pred[d], throughput[d]) for d in draws])
            half = rng.permutation(len(costs))
            train, test = half[: len(half) // 2], half[len(half) // 2:]
            own = scores_from({name: ([features[i] for i in train], costs[train])}, kind,
                              [features[i] for i in test], Path(tmp))
            both = scores_from({**others, name: ([features[i] for i in train], costs[train])}, kind,
                               [features[i] for i in test], Path(tmp))
            top8 = np.argsort(-pred)[:8]
            if extra:
                more = {f"extra:{n}": t for n, t in extra.items()
                        if args.extra_keeps_family or operator_family(n) != operator_family(name)}
                pred_extra = scores_from({**others, **more}, kind, features, Path(tmp))
                batch_extra = np.array([spearman(pred_extra[d], throughput[d]) for d in draws])
                top8_extra = np.argsort(-pred_extra)[:8]
            families[name] = {
                "schedules": len(costs),
                "spearman_held_out": spearman(pred, throughput),
                "spearman_16_median": float(np.median(batch)),
                "share_16_at_or_below_0": float(np.mean(batch <= 0)),
                "top8_median_latency_over_median": float(np.median(costs[top8]) / np.median(costs)),
                "spearman_own_half": spearman(own, throughput[test]),
                "spearman_own_half_with_others": spearman(both, throughput[test]),
            }
            if extra:
                families[name].update({
                    "extra_tasks": sorted(more),
                    "spearman_held_out_extra": spearman(pred_extra, throughput),
                    "spearman_16_median_extra": float(np.median(batch_extra)),
                    "top8_median_latency_over_median_extra": float(np.median(costs[top8_extra]) / np.median(costs)),
                })
            f = families[name]
            print(f"{name:8s} held out {f['spearman_held_out']:+.2f} (16-draws median {f['spearman_16_median']:+.2f}, "
                  f"<= 0 in {f['share_16_at_or_below_0']:.0%}), own half {f['spearman_own_half']:+.2f} "
                  f"(with the others {f['spearman_own_half_with_others']:+.2f}), "
                  f"top 8 / median latency {f['top8_median_latency_over_median']:.2f}"
                  + (f"; with --extra: held out {f['spearman_held_out_extra']:+.2f}, 16-draws median "
                     f"{f['spearman_16_median_extra']:+.2f}, top 8 / median {f['top8_median_latency_over_median_extra']:.2f}"
                     if extra else ""), flush=True)
    command = "python " + " ".join(["bench/cost_prior_holdout.py", *sys.argv[1:]])
    result = {"command": command, "prior": Path(prior).name, "extra": args.extra, "target_kind": kind,
              "families": families}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    plot(families, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


def plot(families: dict, path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    names = list(families)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 3.5))
    bars = {"spearman_held_out": "trained on the other families", "spearman_own_half": "on half its own",
            "spearman_own_half_with_others": "on half its own and the others"}
    if "spearman_held_out_extra" in families[names[0]]:
        bars["spearman_held_out_extra"] = "on the other families and --extra"
    width = 0.8 / len(bars)
    for i, (key, label) in enumerate(bars.items()):
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, [families[n][key] for n in names], width, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, names, rotation=45)
    ax.set_ylabel("Spearman vs measured throughput")
    ax.set_title("cost-model prior: ranking a family it has never seen")
    ax.legend(fontsize=8, ncol=len(bars), loc="upper center", bbox_to_anchor=(0.5, -0.22))
    save_figure(fig, path)


if __name__ == "__main__":
    main()
