"""`hiertune demo`: the whole TVM side end to end, small: local Ray, one CPU runner actor, a 128^3 GEMM.

HARL and MetaSchedule's evolutionary search each get the same measured-trial budget on the same
runner; the best HARL schedule is then compiled through MetaSchedule's database and checked
against numpy. Records go to runs/demo/ (a second run resumes them).
"""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="GMM-S", help="operator to tune (default: 128^3 GEMM)")
    parser.add_argument("--trials", type=int, default=32, help="measured trials per tuner")
    parser.add_argument("--out", default="runs/demo", help="folder for records and the plot")
    parser.add_argument("--target", default="llvm")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from hiertune.commands.common import ensure_writable, progress_bar
    from hiertune.platform.harl_search import TUNER as HARL, HarlConfig, HarlSearch
    from hiertune.workloads import get_workload
    from hiertune.platform.apply import apply_best
    from hiertune.platform.curves import plot_curves, tuning_curve
    from hiertune.platform.ms_baseline import TUNER as MS, BaselineConfig, run_baseline
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.records import RecordStore
    from hiertune.platform.runners import RunnerConfig, create_runner
    from hiertune.workloads.tvm_support import make_target

    console = Console()
    out = Path(args.out)
    for name in ("harl.jsonl", "metaschedule.jsonl"):
        ensure_writable(out / name, "--out")
    target = make_target(args.target)
    workload = get_workload(args.workload, target)
    console.print(f"[bold]hiertune demo[/]: {workload.name}, {args.trials} measured trials per tuner, {target.kind.name} ({target.attrs.get('mcpu', '')})")
    resources = init_ray(RayConfig())
    console.print(f"Ray up: {resources.get('CPU', 0):g} CPUs")
    runner = create_runner(RunnerConfig(target=args.target, num_cpus=1, work_dir=str(out / "tmp")))
    stores = {HARL: RecordStore(out / "harl.jsonl"), MS: RecordStore(out / "metaschedule.jsonl")}
    try:
        bar = progress_bar(args.trials, len(stores[HARL].trials(tuner=HARL)), f"HARL {workload.name}")
        harl = HarlSearch(workload, target, runner, stores[HARL], HarlConfig(trials=args.trials))
        result = harl.run(on_round=lambda log: bar.update(log.trials - bar.n))
        bar.close()
        bar = progress_bar(args.trials, len(stores[MS].trials(tuner=MS)), f"MetaSchedule {workload.name}")
        run_baseline(workload, target, runner, stores[MS], BaselineConfig(trials=args.trials, batch=8, work_dir=str(out / "ms_work")),
                     on_measured=lambda task, n: bar.update(n))
        bar.close()
    finally:
        runner.close()

    flops = workload.task_flops
    curves = {name: tuning_curve(store, flops, tuner=name) for name, store in stores.items()}
    table = Table(title=f"{workload.name}: best after {args.trials} measured trials")
    for column in ("tuner", "best latency (ms)", "GFLOPS", "search s / trial"):
        table.add_column(column, justify="right")
    for name, points in curves.items():
        per_trial = f"{result.search_s_per_trial:.2f}" if name == HARL and result.new_trials else "-"
        table.add_row(name, f"{points[-1].latency_s * 1e3:.4f}", f"{points[-1].gflops:.1f}", per_trial)
    console.print(table)
    plot = plot_curves({"HARL": curves[HARL], "MetaSchedule": curves[MS]}, out / "curve.png", workload.name)
    report = apply_best(stores[HARL], workload.tasks[0].name, target)
    console.print(
        f"best HARL schedule compiled from the records: max |error| vs {report.reference} = "
        f"{report.max_abs_error:.1e} ({'OK' if report.ok else 'MISMATCH'}); curve: {plot}; records: {out}/"
    )
    return 0 if report.ok else 1
