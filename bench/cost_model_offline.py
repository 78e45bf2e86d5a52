"""Cost-model variants judged offline, on schedules already measured: minutes, not an A/B run.

An in-loop A/B of a cost-model change costs 45 minutes per seed on the selection half. This
replays what the search asks of the model on records that runs of `harl_vs_metaschedule.py`
left behind (their --work-dir): for each operator, every schedule any run measured is pooled;
the model is trained on the first T trials of one HARL run (what it had seen at trial T) and
asked to rank the rest of the pool. Reported per variant, as geomeans over (operator, run):
* `top8`: best measured latency among the model's 8 top-ranked / best latency in the pool
  (HARL measures its top-K per round, so this is what a round could reach);
* `top1`: the same for the single top-ranked schedule;
* `spearman` over the pool, and `spearman_top20` over the pool's fastest 20 %: does it order
  the near-best, where the search is decided;
* for each variant, `top8_over_defaults`: its top8 / the defaults' top8 on the same training
  trials and pool, with a bootstrap 90 % interval over (operator, run).
Only selection-half records (shape index 1) should be fed in: variants are chosen here.

    python bench/cost_model_offline.py --records 'runs/broad_select/*_1_*/*.jsonl' \\
        --variant max_depth=6 --variant eta=0.1 --budgets 24 48
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from harl_vs_metaschedule import bootstrap_ci90, geomean  # noqa: E402
from trace_compare import spearman  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """`max_depth=6,eta=0.1` -> CostModelConfig overrides."""
    from hiertune.policies.cost_model import CostModelConfig

    fields = CostModelConfig.__dataclass_fields__
    out: dict[str, Any] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name not in fields:
            raise SystemExit(f"--variant {text}: {name!r} is not a CostModelConfig field ({', '.join(fields)})")
        out[name] = type(getattr(CostModelConfig(), name))(value)
    return text, out


def load_operator(family: str, files: list[str], target: Any) -> tuple[Any, list[list[tuple[Any, float]]], dict]:
    """The schedule space of `family` shape 1, each HARL run's trials in order, and the pool."""
    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.platform.records import RecordStore
    from hiertune.workloads import get_workload

    space = ScheduleSpace(get_workload(f"{family}:1", target).tasks[0].mod, target, seed=0)
    runs, pool = [], {}
    for path in files:
        rows = RecordStore(path, writer=False).schedules(space)
        for state, seconds in rows:
            pool.setdefault(state.key, (state, seconds))
        if "_harl_" in Path(path).name and rows:
            runs.append(rows)
    return space, runs, pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="glob of records files, quoted (operator dirs named FAM_1_*)")
    parser.add_argument("--variant", action="append", default=[], help="CostModelConfig overrides, e.g. max_depth=6")
    parser.add_argument("--budgets", type=int, nargs="+", default=[24, 48], help="trials the model has seen")
    parser.add_argument("--runs-per-operator", type=int, default=3, help="HARL runs used as training sources")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_model_offline.json")
    args = parser.parse_args()

    from tqdm import tqdm

    from hiertune.policies.cost_model import CostModel, CostModelConfig
    from hiertune.workloads.tvm_support import make_target

    variants = [("defaults", {})] + [parse_variant(v) for v in args.variant]
    target = make_target("llvm", num_cores=1)
    by_family: dict[str, list[str]] = defaultdict(list)
    for path in sorted(glob.glob(args.records)):
        by_family[Path(path).parent.name.split("_")[0]].append(path)
    if not by_family:
        raise SystemExit(f"--records {args.records}: no records files match")
    rows: list[dict[str, Any]] = []
    for family, files in tqdm(sorted(by_family.items()), desc="operators"):
        _, runs, pool = load_operator(family, files, target)
        rng = np.random.default_rng(0)
        sources = rng.choice(len(runs), size=min(args.runs_per_operator, len(runs)), replace=False)
        features: dict = {}  # shared across variants: extraction dominates the time
        for budget in args.budgets:
            for source in sources:
                train = runs[source][:budget]
                seen = {state.key for state, _ in train}
                test = [v for k, v in pool.items() if k not in seen]
                latency = np.array([t for _, t in test])
                fastest = latency <= np.quantile(latency, 0.2)
                for name, overrides in variants:
                    model = CostModel(replace(CostModelConfig(), **overrides))
                    model._features = features  # a private cache, shared on purpose: same space, same states
                    model.update([s for s, _ in train], [t for _, t in train])
                    pred = model.predict([s for s, _ in test])
                    order = np.argsort(-pred, kind="stable")
                    rows.append({"operator": family, "budget": budget, "source": int(source), "variant": name,
                                 "pool": len(test), "top8": float(latency[order[:8]].min() / latency.min()),
                                 "top1": float(latency[order[0]] / latency.min()),
                                 "spearman": spearman(pred, -latency),
                                 "spearman_top20": spearman(pred[fastest], -latency[fastest])})
    summary: dict[str, Any] = {}
    for budget in args.budgets:
        for name, _ in variants:
            sel = [r for r in rows if r["budget"] == budget and r["variant"] == name]
            summary[f"{name} @ {budget}"] = {
                "top8": geomean([r["top8"] for r in sel]), "top8_ci90": bootstrap_ci90([r["top8"] for r in sel]),
                "top1": geomean([r["top1"] for r in sel]),
                "spearman": float(np.mean([r["spearman"] for r in sel])),
                "spearman_top20": float(np.mean([r["spearman_top20"] for r in sel])), "pairs": len(sel)}
            if name != "defaults":  # paired: the same training trials and pool as the defaults row
                base = {(r["operator"], r["source"]): r["top8"] for r in rows
                        if r["budget"] == budget and r["variant"] == "defaults"}
                ratios = [r["top8"] / base[(r["operator"], r["source"])] for r in sel]
                summary[f"{name} @ {budget}"].update(
                    top8_over_defaults=geomean(ratios), top8_over_defaults_ci90=bootstrap_ci90(ratios))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"records": args.records, "summary": summary, "rows": rows}, indent=1))
    print(f"{'variant @ trials seen':32} {'top8':>6} {'top1':>6} {'rho':>6} {'rho top20%':>10}  top8 / defaults")
    for key, s in summary.items():
        paired = ""
        if "top8_over_defaults" in s:
            lo, hi = s["top8_over_defaults_ci90"]
            paired = f"{s['top8_over_defaults']:.3f} ({lo:.3f}-{hi:.3f})"
        print(f"{key:32} {s['top8']:6.3f} {s['top1']:6.3f} {s['spearman']:6.3f} {s['spearman_top20']:10.3f}  {paired}")
    plot(summary, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and its .png")


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(names) + 1.5))
    for ax, key, label in ((axes[0], "top8", "best of model's top 8 / pool best (lower is better)"),
                           (axes[1], "spearman_top20", "Spearman on the pool's fastest 20 % (higher is better)")):
        ax.barh(names, [summary[n][key] for n in names], color="tab:blue")
        ax.set_xlabel(label)
        ax.invert_yaxis()
    axes[1].set_yticklabels([])
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
