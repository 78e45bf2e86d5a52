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


def register(parser: argparse.ArgumentParser) -> None:
    add_workload_args(parser)
    parser.add_argument("--trials", type=int, default=64, help="measured trials in total, resumed ones included")
    parser.add_argument("--c", type=float, default=0.25, help="SW-UCB exploration weight (default 0.25)")
    parser.add_argument("--tau", type=int, default=256, help="SW-UCB window length (default 256)")
    parser.add_argument("--lambda", dest="lam", type=int, default=20, help="adaptive-stopping period in steps (20)")
    parser.add_argument("--rho", type=float, default=0.5, help="fraction of live tracks stopped each period (0.5)")
    parser.add_argument("--tracks", type=int, default=8, help="schedule tracks per round (8)")
    parser.add_argument("--topk", type=int, default=8, help="candidates measured per round (8)")
    parser.add_argument("--min-tracks", type=int, default=2, help="a round ends below this many live tracks (2)")
    parser.add_argument("--max-steps", type=int, default=60, help="cap on track steps per round; fixed-length length (60)")
    parser.add_argument("--elite-starts", type=float, default=0.5,
                        help="share of tracks starting from the best measured schedules; 0 = all random fills (0.5)")
    parser.add_argument("--elite-late", type=float, default=0.75,
                        help="the elite share grows linearly to this as the budget is spent (0.75)")
    parser.add_argument("--start-pool", type=int, default=8,
                        help="random fills per random track start; the best-predicted one starts the track (8)")
    parser.add_argument("--epsilon", type=float, default=0.2,
                        help="chance per measured slot of a random visited schedule instead of a top-K one (0.2)")
    parser.add_argument("--elite-other-sketches", type=int, default=0,
                        help="elite tracks per other sketch, from its best measured schedule (0)")
    parser.add_argument("--cross-sketch", type=int, default=0,
                        help="measured slots per round for the best-predicted fills of the task's other sketches (0)")
    parser.add_argument("--no-sketch-warmup", action="store_true",
                        help="don't spread a task's first batch over all its sketches")
    parser.add_argument("--no-sketch-renormalise", action="store_true",
                        help="keep sketch rewards as they were when earned (not rescaled by the task's best)")
    parser.add_argument("--no-whole-moves", action="store_true",
                        help="tile edits move one prime factor at a time (the paper's edit), never a whole level")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed-length", action="store_true", help="ablation: no adaptive stopping")
    parser.add_argument("--no-subgraph-bandit", action="store_true", help="ablation: tasks round-robin")
    parser.add_argument("--plot", type=plot_path, default=None, help="PNG: tuning curve and per-task trial allocation")
    add_runner_args(parser, default_records="runs/harl.jsonl")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hiertune.commands.common import check_outputs, progress_bar, setup_runner, workload_from_args
    from hiertune.platform.harl_search import HarlConfig, HarlSearch
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    config = HarlConfig(
        trials=args.trials, c=args.c, tau=args.tau, lam=args.lam, rho=args.rho, tracks=args.tracks,
        topk=args.topk, min_tracks=args.min_tracks, max_steps=args.max_steps, fixed_length=args.fixed_length,
        elite_fraction=args.elite_starts, elite_fraction_late=args.elite_late, start_pool=args.start_pool,
        epsilon=args.epsilon, cross_sketch=args.cross_sketch,
        elite_other_sketches=args.elite_other_sketches, sketch_warmup=not args.no_sketch_warmup,
        sketch_renormalise=not args.no_sketch_renormalise, whole_tile_moves=not args.no_whole_moves,
        subgraph_bandit=not args.no_subgraph_bandit, seed=args.seed,
    )
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
    finally:
        runner.close()

    console.print(task_table(workload, store, config.topk))
    if result.exhausted:
        console.print(f"stopped at {result.trials} trials: every sketch of every task ran out of unmeasured schedules")
    console.print(
        f"search {result.search_s:.1f} s for {result.new_trials} new trials = "
        f"{result.search_s_per_trial:.3f} s/trial (RL + cost model + replay); measurement {result.measure_s:.1f} s"
    )
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

