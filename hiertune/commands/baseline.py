"""`hiertune baseline`: MetaSchedule's evolutionary search on a workload, with our runners and records."""

from __future__ import annotations

import argparse

from hiertune.commands.common import add_runner_args, add_workload_args
from hiertune.plotting import plot_path


def register(parser: argparse.ArgumentParser) -> None:
    add_workload_args(parser)
    parser.add_argument("--trials", type=int, default=64, help="measured trials in total (resumes count)")
    parser.add_argument("--batch", type=int, default=16, help="candidates measured per search round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=plot_path, help="write the tuning curve as PNG here")
    add_runner_args(parser, default_records="runs/baseline.jsonl")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hiertune.commands.common import (check_outputs, measure_default_schedules, progress_bar, setup_runner,
                                          workload_from_args)
    from hiertune.platform.curves import curve_table, plot_curves, tuning_curve
    from hiertune.platform.ms_baseline import TUNER, BaselineConfig, run_baseline
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    console = Console()
    check_outputs(args, "records", "plot")
    target = make_target(args.target)
    workload = workload_from_args(args, target)
    store = RecordStore(args.records)
    runner = setup_runner(args, target)
    done = len(store.trials(tuner=TUNER))
    if done:
        console.print(f"resuming {args.records}: {done} MetaSchedule trials already measured")
    bar = progress_bar(args.trials, done, f"MetaSchedule {workload.name}")
    config = BaselineConfig(trials=args.trials, batch=args.batch, seed=args.seed,
                            work_dir=str(store.path.parent / "ms_work"))
    try:
        run_baseline(workload, target, runner, store, config, on_measured=lambda task, n: bar.update(n))
        defaults = measure_default_schedules(args, workload, target, runner, store)
    finally:
        bar.close()
        runner.close()
    flops = workload.task_flops
    weights = workload.task_weights
    points = tuning_curve(store, flops, weights, tuner=TUNER)
    console.print(curve_table(points, args.batch, f"MetaSchedule on {workload.name} ({target.kind.name})"))
    if defaults:
        console.print(defaults)
    if args.plot:
        console.print(f"curve written to {plot_curves({'MetaSchedule': points}, args.plot, workload.name)}")
    return 0
