"""Does the cost model see a faster basin coming? Two HARL runs of one operator, one that found
a faster basin and one that did not.

Long runs of one operator can end in basins far apart (TBG:1 at 256 trials: 0.37-0.42 ms on
one seed, 0.65-0.69 ms on another, same code). Options that screen more schedules with the cost
model (larger start pools, evolutionary screens) only help if the model, trained on the slow
run's trials, scores the fast basin's schedules highly. This asks it directly, on records
`harl_vs_metaschedule.py` left behind:
* for each budget T: the model trained on the slow run's first T trials ranks the union of
  those trials and the fast run's schedules; where do the fast run's schedules that beat the
  slow run's final best rank, and how do their scores compare with the slow run's best;
* a bootstrap ensemble of such models (`--ensemble`): is the fast basin where the models
  disagree (their spread), which an upper-confidence pick would then favour (against
  `chance_rank_best`, where a random order puts the first basin schedule);
* optionally (`--screen P`): P random fills per sketch, the model's top `--measure` of them and
  as many random ones measured: can a large screened population reach the basin.
Writes JSON and a PNG (predicted score against measured speed, both runs, per pair).

    python bench/cost_model_blindspot.py --screen 1000 \\
        --pair TBG:1 runs/ab_late256/TBG_1_256_1/TBG_1_harl_defaults_1.jsonl \\
                     runs/ab_screen256/TBG_1_256_0/TBG_1_harl_defaults_0.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"


def load_run(space: Any, path: Path) -> list[tuple[Any, float]]:
    """A HARL run's measured schedules in trial order, failures left out."""
    from hiertune.platform.records import RecordStore

    rows = RecordStore(path, writer=False).schedules(space, tuner="harl")
    if not rows:
        raise SystemExit(f"{path}: no HARL trials of this workload could be read")
    return rows


def fit(train: list[tuple[Any, float]], features: dict) -> Any:
    from hiertune.policies.cost_model import CostModel

    model = CostModel()
    model._features = features  # a private cache, shared on purpose: same space, same states
    model.update([s for s, _ in train], [t for _, t in train])
    return model


def rank_of_basin(slow: list[tuple[Any, float]], fast: list[tuple[Any, float]], budget: int,
                  ensemble: int, features: dict, rng: np.random.Generator) -> dict[str, Any]:
    """Where the fast run's better schedules rank under models trained on the slow run's first trials."""
    train = slow[:budget]
    seen = {s.key for s, _ in train}
    other = [(s, t) for s, t in fast if s.key not in seen]
    goal = min(t for _, t in slow)  # the slow run's final best: what the basin beats
    better = np.array([t < goal for _, t in other])
    states = [s for s, _ in train] + [s for s, _ in other]
    score = np.asarray(fit(train, features).predict(states))
    rank = np.argsort(np.argsort(-score, kind="stable"), kind="stable")
    out: dict[str, Any] = {
        "budget": len(train), "pool": len(states), "basin_schedules": int(better.sum()),
        "basin_rank_best": int(rank[len(train):][better].min()) if better.any() else None,
        "basin_rank_median": float(np.median(rank[len(train):][better])) if better.any() else None,
        "basin_score_max": float(score[len(train):][better].max()) if better.any() else None,
        "train_best_score": float(score[int(np.argmin([t for _, t in train]))]),
        "top8_has_basin": int(sum(1 for i in np.argsort(-score)[:8] if i >= len(train) and better[i - len(train)])),
        # a random order's first basin schedule, for scale: ranks are 0-based
        "chance_rank_best": (len(states) + 1) / (int(better.sum()) + 1) - 1,
    }
    if ensemble > 1 and better.any():
        preds = []
        for _ in range(ensemble):  # bootstrap resamples of the training trials
            idx = rng.integers(0, len(train), len(train))
            preds.append(fit([train[i] for i in idx], features).predict(states))
        p = np.stack(preds)
        mean, spread = p.mean(0), p.std(0)
        basin, rest = spread[len(train):][better], spread[len(train):][~better]
        out["ensemble_spread_basin"] = float(basin.mean())
        out["ensemble_spread_rest"] = float(rest.mean()) if rest.size else None
        for k in (1, 2, 4):
            ucb = np.argsort(np.argsort(-(mean + k * spread), kind="stable"), kind="stable")
            out[f"ucb{k}_basin_rank_best"] = int(ucb[len(train):][better].min())
    return out


def screen(space: Any, model: Any, population: int, measure: int, rng: np.random.Generator) -> dict[str, Any]:
    """Measure the `model`'s top picks of a large random population against random picks of it."""
    from hiertune.platform.runners import MeasureInput, Measurer, RunnerConfig

    fills = [space.random_state(sk, rng) for sk in range(space.num_sketches) for _ in range(population)]
    score = np.asarray(model.predict(fills))
    top = np.argsort(-score, kind="stable")[:measure]
    rand = rng.choice(len(fills), measure, replace=False)
    measurer = Measurer(RunnerConfig(target="llvm", num_cpus=1))

    def timed(idx: np.ndarray) -> list[float]:
        results = measurer.measure([MeasureInput.from_schedule(fills[i].sch) for i in idx])
        return sorted(r.mean_s * 1e3 for r in results if r.latencies_s)

    return {"fills": len(fills), "top_ms": timed(top), "random_ms": timed(rand),
            "top_sketches": [int(fills[i].sketch) for i in top]}


def plot(pairs: list[tuple[str, list, list, Any]], path: Path) -> None:
    """Per pair: the score of the model trained on the whole slow run against measured speed."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.6 * len(pairs), 4.2), squeeze=False)
    for ax, (label, slow, fast, model) in zip(axes[0], pairs):
        goal = min(t for _, t in slow)
        for rows, name, colour in ((slow, "slow run (trained on)", "tab:blue"), (fast, "fast run", "tab:orange")):
            score = np.asarray(model.predict([s for s, _ in rows]))
            ax.scatter([goal / t for _, t in rows], score, s=9, alpha=0.6, label=name, color=colour)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("slow run's best / latency (right of the line: faster)")
        ax.set_title(label, fontsize=10)
    axes[0][0].set_ylabel("cost model score, trained on the slow run")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.suptitle("Does the cost model see the faster basin?")
    save_figure(fig, path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs=3, action="append", required=True, metavar=("WORKLOAD", "SLOW", "FAST"),
                        help="an operator (e.g. TBG:1), the records of the run that missed the basin and of the "
                             "run that found it; repeat for more pairs")
    parser.add_argument("--budgets", type=int, nargs="+", default=[64, 128, 256], help="slow-run trials trained on")
    parser.add_argument("--ensemble", type=int, default=8, help="bootstrap models (0: none)")
    parser.add_argument("--screen", type=int, default=0, help="random fills per sketch to screen (0: skip)")
    parser.add_argument("--measure", type=int, default=16, help="screened and random fills measured")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_model_blindspot.json")
    args = parser.parse_args()
    for _, *paths in args.pair:
        for path in paths:
            if not Path(path).is_file():
                raise SystemExit(f"--pair: {path}: no such records file (a --work-dir file of harl_vs_metaschedule.py)")

    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.workloads import get_workload
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=1)
    results, drawn = [], []
    for workload, slow_path, fast_path in args.pair:
        space = ScheduleSpace(get_workload(workload, target).tasks[0].mod, target, seed=0)
        slow, fast = load_run(space, Path(slow_path)), load_run(space, Path(fast_path))
        features: dict = {}
        rng = np.random.default_rng(0)
        budgets = sorted({min(b, len(slow)) for b in args.budgets})
        result: dict[str, Any] = {
            "workload": workload, "slow": slow_path, "fast": fast_path,
            "slow_best_ms": min(t for _, t in slow) * 1e3, "fast_best_ms": min(t for _, t in fast) * 1e3,
            "budgets": [rank_of_basin(slow, fast, b, args.ensemble, features, rng) for b in budgets]}
        whole = fit(slow, features)  # the model after the whole slow run: screens and is drawn
        if args.screen:
            result["screen"] = screen(space, whole, args.screen, args.measure, rng)
            result["screen"]["trained_on"] = len(slow)
        results.append(result)
        drawn.append((f"{workload}: {len(slow)} / {len(fast)} trials", slow, fast, whole))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"pairs": results}, indent=1))
    plot(drawn, args.out.with_suffix(".png"))
    for r in results:
        print(f"{r['workload']}: slow best {r['slow_best_ms']:.3f} ms, fast best {r['fast_best_ms']:.3f} ms")
        for b in r["budgets"]:
            print(f"  trained on {b['budget']:3d}: basin {b['basin_schedules']} of {b['pool']}, first at rank "
                  f"{b['basin_rank_best']} (chance {b['chance_rank_best']:.0f}, ucb2 {b.get('ucb2_basin_rank_best')}), "
                  f"basin's top score {b['basin_score_max']:.2f} vs slow best's {b['train_best_score']:.2f}")
        if "screen" in r:
            s = r["screen"]
            print(f"  screened {s['fills']} fills: top-{args.measure} best {s['top_ms'][0]:.3f} ms, "
                  f"random best {s['random_ms'][0]:.3f} ms")
    print(f"wrote {args.out} and its .png")


if __name__ == "__main__":
    main()
