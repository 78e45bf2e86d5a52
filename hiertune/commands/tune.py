"""`hiertune tune`: HARL search on an operator or a whole network, resumable from its records.

    hiertune tune --workload GMM-S --trials 64 --records runs/gmm_s.jsonl --plot runs/gmm_s.png
    hiertune tune --model model.onnx --input-shape input:1x3x224x224 --trials 2000 --records runs/model.jsonl
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from hiertune.commands.common import add_runner_args, add_workload_args
from hiertune.plotting import plot_path


# The knobs a user tunes, as flags (everything else: --config FILE).
TUNE_FLAGS = {
    "trials": "trials", "seed": "seed", "c": "bandit.c", "tau": "bandit.tau", "lambda": "episode.lam",
    "rho": "episode.rho", "tracks": "episode.tracks", "topk": "candidates.topk", "cost-prior": "cost_model.prior",
}


def register(parser: argparse.ArgumentParser) -> None:
    from hiertune.commands.config_args import add_config_args
    from hiertune.platform.harl_search import ABLATIONS, HarlConfig

    add_workload_args(parser)
    add_config_args(parser, HarlConfig, TUNE_FLAGS)
    parser.add_argument("--ablation", action="append", default=[], choices=sorted(ABLATIONS), metavar="NAME",
                        help=f"switch a part of the search off (repeatable): {', '.join(sorted(ABLATIONS))}; "
                             "'paper' is the seed paper's search")
    parser.add_argument("--plot", type=plot_path, default=None, help="PNG: tuning curve and per-task trial allocation")
    add_runner_args(parser, default_records="runs/harl.jsonl")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hiertune.commands.common import (check_outputs, measure_default_schedules, progress_bar, setup_runner,
                                          workload_from_args)
    from hiertune.commands.config_args import config_from_args
    from hiertune.platform.harl_search import ABLATIONS, HarlConfig, HarlSearch
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    overrides = {k: v for name in args.ablation for k, v in ABLATIONS[name].items()}
    config = config_from_args(args, HarlConfig, overrides)
    config.validate()
    check_outputs(args, "records", "plot")
    console = Console()
    target = make_target(args.target)
    workload = workload_from_args(args, target)
    store = RecordStore(args.records)
    runner = setup_runner(args, target)
    try:
        console.print(f"[bold]HARL[/bold] {workload.name}: {len(workload.tasks)} task(s), {config.trials} trials -> {args.records}")
        search = HarlSearch(workload, target, runner, store, config)
        done = search.trials_done()
        if done:
            console.print(f"resuming {args.records}: {done} HARL trials already measured")
        bar = progress_bar(config.trials, done, f"HARL {workload.name}")

        def on_round(log: Any) -> None:
            bar.update(log.trials - bar.n)
            best = f"{log.weighted_s * 1e3:.4f} ms" if math.isfinite(log.weighted_s) else "-"
            bar.set_postfix_str(f"{log.task} best {best}")

        result = search.run(on_round=on_round)
        bar.close()
        defaults = measure_default_schedules(args, workload, target, runner, store)
    finally:
        runner.close()

    console.print(task_table(workload, store, config.candidates.topk))
    if result.exhausted:
        console.print(f"stopped at {result.trials} trials: every sketch of every task ran out of unmeasured schedules")
    console.print(
        f"search {result.search_s:.1f} s for {result.new_trials} new trials = "
        f"{result.search_s_per_trial:.3f} s/trial (RL + cost model + replay); measurement {result.measure_s:.1f} s"
    )
    if defaults:
        console.print(defaults)
    if args.plot:
        path = plot_run(workload, store, args.plot)
        console.print(f"plot -> {path}")
    return 0


def task_table(workload: Any, store: Any, first_batch: int) -> Any:
    """Per task: weight, trials given, best latency, speed-up of the best over the first batch."""
    from rich.table import Table

    from hiertune.platform.harl_search import TUNER

    table = Table(title=f"HARL on {workload.name}")
    for column in ("task", "weight", "trials", "best (ms)", "GFLOPS", "speed-up vs first batch"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for task in workload.tasks:
        trials = store.trials(task.name, tuner=TUNER)
        best = min((t.mean_s for t in trials), default=math.inf)
        first = min((t.mean_s for t in trials[:first_batch]), default=math.inf)
        ok = math.isfinite(best)
        table.add_row(
            task.name, str(task.weight), str(len(trials)), f"{best * 1e3:.4f}" if ok else "-",
            f"{task.flops / best / 1e9:.1f}" if ok else "-", f"{first / best:.2f}x" if ok and math.isfinite(first) else "-",
        )
    return table


def plot_run(workload: Any, store: Any, path: str) -> Path:
    """Tuning curve (weighted best latency vs trials) and per-task trial allocation (HARL Fig. 10)."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    import numpy as np

    from hiertune.platform.harl_search import TUNER
    from hiertune.platform.curves import tuning_curve

    points = tuning_curve(
        store, workload.task_flops, workload.task_weights, tuner=TUNER
    )
    finite = [p for p in points if math.isfinite(p.latency_s)]
    fig, (ax_curve, ax_alloc) = plt.subplots(1, 2, figsize=(12, 4.2))
    ax_curve.step([p.trial for p in finite], [p.latency_s * 1e3 for p in finite], where="post", label="HARL")
    ax_curve.set_xlabel("measured trials")
    ax_curve.set_ylabel("best (weighted) latency (ms)")
    ax_curve.set_title(f"tuning curve: {workload.name}")
    ax_curve.grid(alpha=0.3)
    # allocation over time: cumulative trials of each task along the run (HARL's Figure 10)
    names = [t.name for t in workload.tasks]
    order = [m.task for m in store.trials(tuner=TUNER)]
    cumulative = np.zeros((len(names), len(order)))
    index = {n: i for i, n in enumerate(names)}
    for j, task in enumerate(order):
        if j:
            cumulative[:, j] = cumulative[:, j - 1]
        if task in index:
            cumulative[index[task], j] += 1
    labels = [f"{t.name} (w={t.weight})" for t in workload.tasks]
    ax_alloc.stackplot(np.arange(1, len(order) + 1), cumulative, labels=labels)
    ax_alloc.set_xlabel("measured trials")
    ax_alloc.set_ylabel("trials given to each task (stacked)")
    ax_alloc.set_title("trial allocation per task")
    ax_alloc.legend(fontsize=6, loc="upper left", ncol=1 + len(names) // 12)
    return save_figure(fig, path, dpi=120)

