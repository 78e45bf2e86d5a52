"""`hiertune sweep`: Ray Tune sweep of HARL's or Inc-ILP's knobs, one short tuning session per trial.

    hiertune sweep harl --param c=0.1,0.25,0.5 --param tau=64,256 --search grid --trials-per-session 16
    hiertune sweep harl --param c=0.05:0.5 --param rho=0.25:0.75 --search optuna --samples 8 --asha
    hiertune sweep incilp --model xception --stages 4 --param gamma=0,2,5,10 --search grid
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=("harl", "incilp"), help="what to tune: HARL search or Inc-ILP partition")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUES",
                        help="swept parameter: NAME=v1,v2,... or NAME=low:high (random/optuna); "
                             "harl: c, tau, lambda, rho, tracks, topk, max_steps; incilp: gamma")
    parser.add_argument("--search", choices=("random", "grid", "optuna"), default="random",
                        help="how points are chosen (grid: every combination of the values)")
    parser.add_argument("--samples", type=int, default=None,
                        help="trials (random/optuna, default 4) or repeats of each grid point (default 1)")
    parser.add_argument("--asha", action="store_true", help="HARL: ASHA stops weak sessions after few rounds")
    parser.add_argument("--concurrent", type=int, default=1,
                        help="trials at once (default 1: timings stay fair; raise it on a cluster)")
    parser.add_argument("--trial-cpus", type=float, default=1.0, help="CPUs each trial holds (HARL: runner cores)")
    parser.add_argument("--out", default="runs/sweep", help="directory for the Tune results, sweep.json and sweep.png")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (default: RAY_ADDRESS or local)")
    harl = parser.add_argument_group("harl sessions")
    harl.add_argument("--workload", default="GMM-S", help="operator or network each session tunes (GMM-S)")
    harl.add_argument("--target", default="llvm", help="'llvm' or 'cuda' (a GPU trial holds one GPU)")
    harl.add_argument("--trials-per-session", type=int, default=16, help="measured trials per session (16)")
    incilp = parser.add_argument_group("incilp sessions")
    incilp.add_argument("--model", help="zoo model name (e.g. xception), a graph .json or a .tflite file")
    incilp.add_argument("--form", choices=("keras", "tflite"), default="keras", help="graph form of a zoo model")
    incilp.add_argument("--stages", type=int, default=4, help="pipeline stages (4)")
    incilp.add_argument("--solver", choices=("auto", "gurobi", "highs", "cpsat"), default="auto")
    incilp.add_argument("--time-limit", type=float, default=120.0, help="seconds per solve (also the exact reference)")
    incilp.add_argument("--initial", choices=("auto", "best", "pointer", "libcoral", "packed"), default="auto",
                        help="initial plan of each Inc-ILP solve (auto: libcoral's split with exact cuts)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hiertune.commands.common import progress_bar
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.sweeps import SweepConfig, incilp_reference, parse_param, plot_sweep, run_sweep, sweep_table

    config = SweepConfig(
        kind=args.kind, params=[parse_param(args.kind, p) for p in args.param], search=args.search,
        samples=args.samples, asha=args.asha, concurrent=args.concurrent, trial_cpus=args.trial_cpus,
        out=args.out, seed=args.seed, workload=args.workload, target=args.target,
        trials_per_session=args.trials_per_session, model=args.model, form=args.form, stages=args.stages,
        solver=args.solver, time_limit_s=args.time_limit, initial=args.initial,
    )
    config.validate()
    console = Console()
    graph = reference = None
    if config.kind == "incilp":
        from hiertune.solvers.graph_source import load_graph

        graph = load_graph(config.model, config.form)
        with console.status(f"exact ILP of {graph.name} ({graph.num_nodes} nodes, {config.stages} stages): "
                            "the reference optimum"):
            reference, proven, seconds = incilp_reference(graph, config)
        console.print(f"reference: exact ILP {list(reference)} in {seconds:.2f} s"
                      + ("" if proven else " [yellow](time limit hit: best found, not proven optimal)[/]"))
    else:
        from hiertune.workloads import get_workload

        get_workload(config.workload)  # a bad name fails here, not in every trial
    init_ray(RayConfig(address=args.ray_address))
    total = config.num_samples * _grid_points(config)
    bar = progress_bar(total, 0, f"sweep {config.kind}")
    bar.unit = "session"
    try:
        result = run_sweep(config, on_trial=lambda trial: bar.update(1), graph=graph, reference=reference)
    finally:
        bar.close()
    console.print(sweep_table(config, result))
    best = ", ".join(f"{k}={v}" for k, v in result.best["config"].items())
    console.print(f"[bold]best:[/] {best} -> {config.metric} {result.best['metric']:.4g} "
                  f"({len(result.trials)} trials in {result.seconds:.1f} s)")
    out = Path(config.out)
    summary = {
        "kind": config.kind, "search": config.search, "metric": config.metric, "asha": config.asha,
        "params": {p.name: p.values if p.values is not None else [p.low, p.high] for p in config.params},
        "session": ({"workload": config.workload, "target": config.target, "trials": config.trials_per_session}
                    if config.kind == "harl" else
                    {"model": config.model, "stages": config.stages, "solver": config.solver,
                     "reference": result.reference}),
        "best": result.best, "trials": result.trials, "tune_dir": result.path, "seconds": result.seconds,
    }
    (out / "sweep.json").write_text(json.dumps(summary, indent=1, default=str))
    png = plot_sweep(config, result, out / "sweep.png")
    console.print(f"Tune results -> {result.path}\nsummary -> {out / 'sweep.json'}, plot -> {png}")
    return 0


def _grid_points(config) -> int:
    if config.search != "grid":
        return 1
    points = 1
    for p in config.params:
        points *= len(p.values or [1])
    return points
