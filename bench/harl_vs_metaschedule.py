"""HARL vs MetaSchedule's evolutionary search on one workload and budget, side by side in one run.

Both tuners measure through the same Ray runner actor; a timing proxy around it splits each run's
wall time into measurement (build + run) and search (everything else: for HARL the RL, cost model
and replay, for MetaSchedule the evolutionary search and its cost model). Writes
bench/results/harl_vs_ms_<workload>.json and a PNG with both tuning curves.

    python bench/harl_vs_metaschedule.py --workload GMM-S --trials 64 --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


class TimedRunner:
    """Passes `measure` through to the real runner and adds up the seconds spent in it."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.measure_s = 0.0

    def measure(self, inputs: list[Any]) -> list[Any]:
        start = time.perf_counter()
        try:
            return self.runner.measure(inputs)
        finally:
            self.measure_s += time.perf_counter() - start


def run_pair(workload_name: str, trials: int, seed: int, runner: Any, work: Path, elite: float) -> dict[str, Any]:
    from hiertune.envs.harl_search import TUNER as HARL, HarlConfig, HarlSearch
    from hiertune.envs.workloads import get_workload
    from hiertune.platform.curves import tuning_curve
    from hiertune.platform.ms_baseline import TUNER as MS, BaselineConfig, run_baseline
    from hiertune.platform.records import RecordStore
    from hiertune.platform.tvm_support import make_target

    target = make_target("llvm")
    workload = get_workload(workload_name, target)
    flops = {t.name: t.flops for t in workload.tasks}
    weights = {t.name: t.weight for t in workload.tasks}
    out: dict[str, Any] = {}
    for tuner in (HARL, MS):
        store = RecordStore(work / f"{tuner}_{seed}.jsonl")
        timed = TimedRunner(runner)
        start = time.perf_counter()
        extra: dict[str, Any] = {}
        if tuner == HARL:
            search = HarlSearch(workload, target, timed, store, HarlConfig(trials=trials, seed=seed, elite_fraction=elite))
            result = search.run()
            extra = {"loop_search_s_per_trial": result.search_s_per_trial}
        else:
            run_baseline(workload, target, timed, store, BaselineConfig(trials=trials, seed=seed, work_dir=str(work / f"ms_{seed}")))
        wall = time.perf_counter() - start
        points = tuning_curve(store, flops, weights, tuner=tuner)
        n = len(points)
        out[tuner] = {
            "trials": n,
            "best_ms": points[-1].latency_s * 1e3 if points else math.inf,
            "first_batch_best_ms": points[min(7, n - 1)].latency_s * 1e3 if points else math.inf,
            "curve_ms": [p.latency_s * 1e3 for p in points],
            "wall_s": wall,
            "measure_s": timed.measure_s,
            "search_s": wall - timed.measure_s,
            "search_s_per_trial": (wall - timed.measure_s) / max(n, 1),
            **extra,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="GMM-S")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--elite-starts", type=float, default=0.5, help="HARL's share of tracks starting from measured bests")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.console import Console
    from rich.table import Table

    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import RunnerConfig, create_runner

    init_ray(RayConfig())
    runner = create_runner(RunnerConfig(target="llvm", num_cpus=1))
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="harl_vs_ms_") as tmp:
            for seed in args.seeds:
                runs.append({"seed": seed, **run_pair(args.workload, args.trials, seed, runner, Path(tmp), args.elite_starts)})
    finally:
        runner.close()

    table = Table(title=f"HARL vs MetaSchedule, {args.workload}, {args.trials} trials")
    for col in ("seed", "tuner", "best (ms)", "first 8 (ms)", "search s/trial", "measure s", "wall s"):
        table.add_column(col, justify="right")
    for run in runs:
        for tuner in ("harl", "metaschedule"):
            r = run[tuner]
            table.add_row(str(run["seed"]), tuner, f"{r['best_ms']:.4f}", f"{r['first_batch_best_ms']:.4f}",
                          f"{r['search_s_per_trial']:.3f}", f"{r['measure_s']:.1f}", f"{r['wall_s']:.1f}")
    mean = lambda tuner, key: sum(run[tuner][key] for run in runs) / len(runs)  # noqa: E731
    ratios = {
        "best_latency_harl_over_ms": mean("harl", "best_ms") / mean("metaschedule", "best_ms"),
        "search_s_per_trial_harl_over_ms": mean("harl", "search_s_per_trial") / mean("metaschedule", "search_s_per_trial"),
    }
    console = Console()
    console.print(table)
    console.print(ratios)

    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"harl_vs_ms_{args.workload.replace(':', '_')}"
    summary = {"workload": args.workload, "trials": args.trials, "elite_starts": args.elite_starts, "runs": runs, "ratios": ratios}
    (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=1))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        for tuner, style in (("harl", "-"), ("metaschedule", "--")):
            curve = run[tuner]["curve_ms"]
            ax.step(range(1, len(curve) + 1), curve, style, where="post", label=f"{tuner} seed {run['seed']}")
    ax.set_xlabel("measured trials")
    ax.set_ylabel("best latency (ms)")
    ax.set_title(f"{args.workload}: HARL vs MetaSchedule")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{stem}.png", dpi=120)
    console.print(f"-> {RESULTS / stem}.json / .png")


if __name__ == "__main__":
    main()
