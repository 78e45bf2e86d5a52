"""`hiertune partition`: Inc-ILP pipeline partition of a DNN graph into K Edge TPU stages.

    hiertune partition --model resnet152 --stages 6 --gamma 10 --solver auto --out plan.json --plot plan.png
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from hiertune.commands.common import check_outputs
from hiertune.errors import HiertuneError
from hiertune.plotting import plot_path


def _gamma(text: str) -> float:
    if text.lower() in ("inf", "infinity", "exact"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gamma takes a number of levels or 'inf', not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("--gamma must be >= 0")
    return value


def _objectives(text: str) -> tuple[str, ...]:
    from hiertune.solvers.ilp import check_objectives

    try:
        return check_objectives([name.strip() for name in text.split(",") if name.strip()])
    except HiertuneError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def register(parser: argparse.ArgumentParser) -> None:
    from hiertune.commands.config_args import field_default
    from hiertune.solvers.incilp import IncIlpConfig

    def default(dotted: str) -> tuple:
        value, doc = field_default(IncIlpConfig, dotted)
        return value, f"{doc} (default: {value})"

    parser.add_argument("--model", required=True,
                        help="zoo model name (e.g. resnet152), a graph .json, a .tflite or an .onnx file")
    parser.add_argument("--form", choices=("keras", "tflite"), default="keras",
                        help="graph form of a zoo model: Keras layers (the paper's |V|) or TFLite ops")
    parser.add_argument("--stages", type=int, default=6, help="number of pipeline stages (Edge TPUs), 2..16 and more")
    gamma, gamma_help = default("gamma")
    parser.add_argument("--gamma", type=_gamma, default=float(gamma), help=gamma_help)
    solver, solver_help = default("ilp.solver")
    parser.add_argument("--solver", choices=("auto", "gurobi", "highs", "cpsat", "ideal-dp"), default=solver,
                        help=solver_help)
    initial, initial_help = default("initial")
    parser.add_argument("--initial", choices=("auto", "best", "pointer", "libcoral", "packed"), default=initial,
                        help=initial_help)
    window, window_help = default("window")
    parser.add_argument("--window", choices=("adjacent", "any"), default=window, help=window_help)
    parser.add_argument("--no-refine-cuts", action="store_true", help="start the window from the initial plan's "
                        "own cuts (the paper) instead of placing them exactly along its order first")
    rounds, rounds_help = default("rounds")
    parser.add_argument("--rounds", type=int, default=rounds, help=rounds_help)
    widen, widen_help = default("widen")
    parser.add_argument("--widen", type=int, default=widen, help=widen_help)
    recut, recut_help = default("recut")
    parser.add_argument("--recut", type=int, default=recut, help=recut_help)
    second, second_help = default("second_start_after_s")
    parser.add_argument("--second-start-after", type=float, default=second, metavar="SECONDS", help=second_help)
    band, band_help = default("ilp.band_check_after_s")
    parser.add_argument("--band-check-after", type=float, default=band, metavar="SECONDS", help=band_help)
    limit, limit_help = default("ilp.time_limit_s")
    parser.add_argument("--time-limit", type=float, default=limit, help=limit_help)
    threads, threads_help = default("ilp.threads")
    parser.add_argument("--threads", type=int, default=threads, help=threads_help)
    objectives, objectives_doc = field_default(IncIlpConfig, "ilp.objectives")
    parser.add_argument("--objectives", type=_objectives, default=objectives, metavar="NAME,...",
                        help=f"{objectives_doc} (default: {','.join(objectives)}); peak,off-cache,comm,macs "
                             "balances the stages' compute among the plans the paper's three tie on")
    cache, cache_doc = field_default(IncIlpConfig, "ilp.cache_bytes")
    parser.add_argument("--cache-mb", type=float, default=cache / 1024**2,
                        help=f"{cache_doc.replace('bytes', 'MiB')} (default: {cache / 1024**2:g})")
    parser.add_argument("--prove", action="store_true",
                        help="after the plan: solve the whole model with the plan as a complete start and "
                             "cold (time to proof of each), and the ideal DP where the graph is narrow")
    parser.add_argument("--out", type=Path, help="write the plan (node name -> stage, objectives) as JSON")
    parser.add_argument("--plot", type=plot_path, help="write a PNG of the partition")
    parser.add_argument("--no-ray", action="store_true", help="solve in this process instead of a Ray actor")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hiertune.solvers.baselines import libcoral_partition
    from hiertune.solvers.graph_source import load_graph
    from hiertune.solvers.ilp import PAPER_OBJECTIVES, IlpConfig, evaluate_partition
    from hiertune.solvers.incilp import IncIlpConfig
    from hiertune.solvers.plan_report import objectives_table, plan_dict, plot_partition, stage_table

    if args.stages < 1:
        raise HiertuneError(f"--stages must be at least 1 (got {args.stages})")
    if args.time_limit <= 0:
        raise HiertuneError(f"--time-limit must be positive (got {args.time_limit})")
    for flag, value, least in (("--threads", args.threads, 1), ("--rounds", args.rounds, 1), ("--widen", args.widen, 0),
                               ("--recut", args.recut, 0),
                               ("--cache-mb", args.cache_mb, 0), ("--second-start-after", args.second_start_after, 0),
                               ("--band-check-after", args.band_check_after, 0.01)):
        if value < least:
            raise HiertuneError(f"{flag} must be at least {least} (got {value:g})")
    if args.solver == "ideal-dp" and tuple(args.objectives) != PAPER_OBJECTIVES:
        raise HiertuneError(f"--solver ideal-dp minimises {','.join(PAPER_OBJECTIVES)} only: drop --objectives "
                            f"{','.join(args.objectives)} or use an ILP solver (cpsat, gurobi, highs)")
    console = Console()
    check_outputs(args, "out", "plot")
    graph = load_graph(args.model, args.form)
    if args.stages > graph.num_nodes:  # before Ray starts: the solver actor would only say the same
        raise HiertuneError(
            f"--stages {args.stages} must lie in 1..{graph.num_nodes} (the node count of {graph.name!r})"
        )
    cache = int(args.cache_mb * 1024**2)
    config = IncIlpConfig(
        gamma=args.gamma,
        initial=args.initial,
        window=args.window,
        rounds=args.rounds,
        widen=args.widen,
        recut=args.recut,
        second_start_after_s=args.second_start_after,
        refine_cuts=not args.no_refine_cuts,
        ilp=IlpConfig(solver=args.solver, time_limit_s=args.time_limit, threads=args.threads, cache_bytes=cache,
                      objectives=args.objectives, band_check_after_s=args.band_check_after),
    )
    where = "in-process" if args.no_ray else "Ray solver actor"
    with console.status(f"partitioning {graph.name} ({graph.num_nodes} nodes) into {args.stages} stages "
                        f"(gamma={args.gamma:g}, {where})"):
        result = _solve(graph, args.stages, config, args.no_ray)
    libcoral = libcoral_partition(graph, args.stages)
    libcoral_obj = evaluate_partition(graph, libcoral, args.stages, cache)

    console.print(stage_table(graph, result.stages, args.stages, cache,
                              f"{graph.name}: Inc-ILP plan, {args.stages} stages"))
    status = ("optimal" if math.isinf(result.gamma) else "window optimum") if result.optimal else "best in time"
    rows = [
        ("Inc-ILP" if not math.isinf(args.gamma) else f"exact ({result.solver})", result.objectives, status),
        (f"initial ({result.initial_source})", result.initial_objectives, "no ILP"),
        ("libcoral split", libcoral_obj, "Edge TPU"),
    ]
    if result.refined_objectives is not None:
        rows.insert(2, ("initial, exact cuts", result.refined_objectives, "order DP"))
    console.print(objectives_table(rows))
    size = "ideals" if result.solver == "ideal-dp" else "variables"
    if result.solver == "order-split":
        console.print(f"the graph has one topological order: every plan splits it, so the initial plan's exact cuts "
                      f"are the optimum and no window was solved; initial plan {result.init_seconds:.2f} s")
    else:
        console.print(f"solver {result.solver}: {result.solve_seconds:.2f} s in {result.rounds} window solve(s), {args.window} "
                      f"window {result.window_size}/{graph.num_nodes} nodes, {result.num_vars} {size}; "
                      f"initial plan {result.init_seconds:.2f} s")
    if result.widenings:
        console.print(f"the window bounded the solve: widened {result.widenings} time(s) in all, the widest to gamma {result.gamma:g}")
    if result.recuts:
        console.print(f"exact cuts along the window's plan beat it {result.recuts} time(s); the window was solved again from there")
    if result.fallback:
        console.print(f"[yellow]note:[/] {result.fallback}")
    proven = dict(zip(("peak", "off-cache", "comm"), result.proven))
    console.print("globally optimal: " + ("proven on all three objectives" if all(proven.values()) else
                  ", ".join(f"{k} {'proven' if v else 'not proven'}" for k, v in proven.items())
                  + " by the global bounds (--prove solves the whole model from this plan)"))
    proof = _prove(console, graph, args.stages, result, config.ilp) if args.prove else None
    if args.out:
        plan = plan_dict(
            graph, result.stages, args.stages, result.objectives,
            gamma=None if math.isinf(args.gamma) else args.gamma, widened_to_gamma=None if math.isinf(result.gamma) else result.gamma,
            recuts=result.recuts,
            solver=result.solver,
            optimal=result.optimal, solve_seconds=result.solve_seconds, window_size=result.window_size,
            cache_bytes=cache, initial_source=result.initial_source,
            initial_objectives=list(result.initial_objectives), libcoral_objectives=list(libcoral_obj),
            init_seconds=result.init_seconds, proven_optimal=proven, lower_bounds=list(result.lower_bounds),
            **({"proof": [run.to_dict() for run in proof]} if proof is not None else {}),
        )
        args.out.write_text(json.dumps(plan, indent=1))
        console.print(f"plan written to {args.out}")
    if args.plot:
        plot_partition(graph, {"Inc-ILP": result.stages, "libcoral": libcoral}, args.stages, cache, str(args.plot))
        console.print(f"plot written to {args.plot}")
    return 0


def _prove(console, graph, num_stages, result, ilp):
    """The whole model from the plan (hinted) and cold, and the ideal DP: time to proof of each."""
    from rich.table import Table

    from hiertune.solvers.certify import prove

    with console.status("proving: the whole model hinted with the plan, cold, and the ideal DP"):
        runs = prove(graph, num_stages, result.stages, result.objectives, ilp)
    table = Table(title="proof of global optimality")
    for col in ("method", "seconds", "proved an optimum", "plan is optimal", "note"):
        table.add_column(col)
    for run in runs:
        table.add_row(run.method, f"{run.seconds:.2f}", "yes" if run.optimal else "no",
                      "yes" if run.plan_is_optimal else "no", run.note[:60])
    console.print(table)
    return runs


def _solve(graph, num_stages, config, no_ray: bool):
    if no_ray:
        from hiertune.platform.solver_actor import pointer_inc_ilp

        return pointer_inc_ilp(graph, num_stages, config)
    import ray

    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.solver_actor import SolverActorConfig, start_solver_actor

    init_ray(RayConfig())
    actor = start_solver_actor(SolverActorConfig(resource="gurobi" if ray.cluster_resources().get("gurobi") else None))
    try:
        return ray.get(actor.inc_ilp.remote(graph, num_stages, config))
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, HiertuneError):
            raise HiertuneError(str(cause)) from None
        raise
