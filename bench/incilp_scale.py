"""Inc-ILP end to end against the strongest exact baselines, as graphs and stage counts grow.

Per case (graph, K): Inc-ILP at gamma 10 (and, where 10 misses the proven optimum, the smallest
of 20, 40, 80 that reaches it), timed end to end in wall seconds: initial plan (libcoral's split
for the default `auto` start; pointer-net inference too for `best`) + exact cut placement +
window solve(s), the window by its default backend (the window ideal DP where it fits). Against it,
every exact baseline of the whole graph, each cold and hinted with the cheapest initial plan
(libcoral's split with exact cuts, its time counted), the faster of the two counting:
CP-SAT with 1 and with 2 workers, Gurobi where the size-limited licence takes the model, and the
exact DP over the graph's ideals. The baselines run as a race: once one has proven the optimum,
each later run gets only as long as that proof took (it could not be the fastest otherwise). When
no baseline proves an optimum within the limit, the case is flagged (`unproven`) and each
baseline is charged its time to target: when its incumbent (the hint, a CP-SAT incumbent) first
became as good as Inc-ILP's plan from the default start, else the limit.

    python bench/incilp_scale.py                              # the full grid, 300 s per baseline
    python bench/incilp_scale.py --time-limit 60 --out bench/results/incilp_scale_reduced.json
    python bench/incilp_scale.py --redo-incilp                # Inc-ILP again, the stored baselines kept
    python bench/incilp_scale.py --rerun --models bert_base --stages 8 16   # cases again whole

Inc-ILP's window solve, like the CP-SAT baseline, runs on 1 and on 2 workers and the faster
counts (one worker is a single search strategy, two a portfolio: on some graphs one is 30x
faster than the other, in both directions; for the window DP, single-threaded, it is a repeat).
Each worker count's time is the median of three runs; every baseline is one run, the fastest of
its cold and hinted runs counting.

Cases run cheapest first (|V| x K), so a stopped run holds as many cases as it could. Results
are written after every case; a stopped run resumes from what it wrote.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.platform.solver_actor import pointer_inc_ilp
from hiertune.plotting import pyplot, save_figure
from hiertune.policies.pointer_net import PointerScheduler, default_scheduler, load_scheduler
from hiertune.solvers.backends import gurobi_available, gurobi_fits
from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.graph_source import load_graph
from hiertune.solvers.ideal_dp import IdealDpLimitError
from hiertune.solvers.ilp import (IlpConfig, PartitionError, build_model, evaluate_partition, prepare_graph,
                                  solve_partition)
from hiertune.solvers.incilp import IncIlpConfig
from hiertune.solvers.order_split import refine_cuts
from hiertune.solvers.zoo import load_zoo_graph, zoo_models
from hiertune.workloads.tvm_support import host_cpu

RESULTS = Path(__file__).parent / "results"
LARGE_NODES = 700
LARGE_STAGES = 8
TRIVIAL_EXACT_S = 0.05  # zoo cases whose exact solve is faster count as speed-up 1.0
WIDER_GAMMAS = (20, 40, 80)
# the graphs of today's sizes (bench/zoo/make_zoo.py); the rest of the zoo is the paper-era 14
NEW_GRAPHS = ("efficientnetb7", "efficientnetv2s", "convnexttiny", "nasnetlarge", "vit_b16", "bert_base")
SYNTHETIC = "synthetic:"


def default_cases(form: str, largest: int, many_stages: list[int]) -> list[tuple[str, int]]:
    """The new graphs and the zoo's `largest` graphs at every K of `many_stages`, the rest at K = 4."""
    sizes = sorted(((load_zoo_graph(m, form).num_nodes, m) for m in zoo_models(form)), reverse=True)
    big = {m for m in NEW_GRAPHS} | {m for _, m in [s for s in sizes if s[1] not in NEW_GRAPHS][:largest]}
    return [(m, k) for _, m in sizes for k in (many_stages if m in big else [4])]


def _load(model: str, form: str):
    if model.startswith(SYNTHETIC):
        return synthetic_graph(model)
    return load_zoo_graph(model, form) if model in zoo_models(form) else load_graph(model, form)


def synthetic_graph(name: str):
    """`synthetic:KIND:NODES:SEED` (KIND chain or branchy): a seeded random DAG of the pointer
    net's generator at today's sizes, a graph no setting was chosen on (the held-out check)."""
    try:
        _, kind, nodes, seed = name.split(":")
        branchy = {"chain": 0.0, "branchy": 1.0}[kind]
        return generate_dag(int(seed), SyntheticDagConfig(num_nodes=int(nodes), branchy_prob=branchy))
    except (ValueError, KeyError):
        raise SystemExit(f"{name!r}: a synthetic graph is synthetic:chain|branchy:NODES:SEED, "
                         "e.g. synthetic:chain:1000:11") from None


def _incilp(graph, k: int, gamma: float, initial: str, limit: float) -> dict[str, Any]:
    """Inc-ILP with its default window backend on 1 and on 2 workers (for the window DP, a repeat),
    the faster of those with the best plan counting (the exact CP-SAT baseline gets the same choice).
    Each is the median of `INCILP_REPEATS` runs (see there)."""
    runs = [_median_run(graph, k, gamma, initial, limit, threads) for threads in (1, 2)]
    best = min(runs, key=lambda r: (r["objectives"], r["seconds"]))
    return {**best, "seconds_by_workers": [r["seconds"] for r in runs]}


INCILP_REPEATS = 3
"""Inc-ILP runs per worker count, the median counting. One run is not a measurement where the window
goes to a multi-threaded solver: NASNetLarge at K = 16 took 18-96 s over eight runs of one plan
(CP-SAT's portfolio and the band check race). Where the repeats' plans differ, the worst one counts."""


def _median_run(graph, k: int, gamma: float, initial: str, limit: float, threads: int) -> dict[str, Any]:
    runs = sorted((_incilp_run(graph, k, gamma, initial, limit, threads) for _ in range(INCILP_REPEATS)),
                  key=lambda r: r["seconds"])
    median = runs[len(runs) // 2]
    worst = max(runs, key=lambda r: r["objectives"])
    chosen = median if worst["objectives"] == median["objectives"] else {**worst, "seconds": median["seconds"]}
    return {**chosen, "seconds_runs": [r["seconds"] for r in runs]}


def _incilp_run(graph, k: int, gamma: float, initial: str, limit: float, threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    res = pointer_inc_ilp(graph, k, IncIlpConfig(gamma=gamma, initial=initial,
                                                 ilp=IlpConfig(threads=threads, time_limit_s=limit)))
    return {"gamma": gamma, "workers": threads, "seconds": time.perf_counter() - t0, "init_seconds": res.init_seconds,
            "window_seconds": res.solve_seconds, "objectives": list(res.objectives),
            "window_solver": res.solver, "initial_source": res.initial_source, "initial_objectives": list(res.initial_objectives),
            "window_size": res.window_size, "window_optimal": res.optimal, "proven_by_bounds": list(res.proven),
            "widened_to_gamma": res.gamma, "widenings": res.widenings, "recuts": res.recuts}


def _baseline(graph, k: int, solver: str, threads: int, limit: float, hinted: bool,
              target: tuple[int, ...]) -> dict[str, Any]:
    """One exact baseline run. Every plan it holds on the way is kept with its time (the hint as
    soon as it is ready; each CP-SAT incumbent), so a run that proves nothing in time is charged
    when its incumbent first became as good as `target`, Inc-ILP's plan (time to target)."""
    t0 = time.perf_counter()
    found: list[tuple[float, list[int]]] = []
    hint = refine_cuts(graph, libcoral_partition(graph, k), k) if hinted else None
    if hint is not None:
        found.append((time.perf_counter() - t0, hint))
    on_incumbent = lambda plan: found.append((time.perf_counter() - t0, plan))  # noqa: E731
    try:
        res = solve_partition(graph, k, IlpConfig(solver=solver, threads=threads,
                                                  time_limit_s=max(limit - (time.perf_counter() - t0), 0.01)),
                              hint=hint, on_incumbent=on_incumbent)
    except (IdealDpLimitError, PartitionError) as err:  # too many ideals; no plan within a (capped) limit
        return {"seconds": time.perf_counter() - t0, "optimal": False, "objectives": None, "note": str(err),
                "limit_s": limit, "seconds_to_target": None}
    seconds = time.perf_counter() - t0
    cache = IlpConfig().cache_bytes
    to_target = next((t for t, plan in found if evaluate_partition(graph, plan, k, cache) <= target), None)
    if to_target is None and tuple(res.objectives) <= target:
        to_target = seconds  # the DPs report no incumbents: their plan counts when they return
    return {"seconds": seconds, "optimal": res.optimal, "objectives": list(res.objectives),
            "solver": res.solver, "note": res.fallback or "", "limit_s": limit, "seconds_to_target": to_target}


def _exact_baselines(graph, k: int, limit: float, target: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    """Every exact baseline, cold and hinted, as a race: once one has proven the optimum, each
    later run gets only that long (a slower proof cannot change the fastest exact time; the
    run is marked `capped`). The DP runs first, as it is the fastest where the graph is narrow."""
    specs = [("ideal-dp", "ideal-dp", 1), ("cpsat-1", "cpsat", 1), ("cpsat-2", "cpsat", 2)]
    if gurobi_available() and gurobi_fits(build_model(graph, k, IlpConfig().cache_bytes, None).lm, extra_rows=2):
        specs.append(("gurobi", "gurobi", 1))
    baselines: dict[str, dict[str, Any]] = {}
    fastest = limit
    for name, solver, threads in specs:
        runs = {}
        for mode in ("cold", "hinted"):
            runs[mode] = _baseline(graph, k, solver, threads, fastest, mode == "hinted", target)
            runs[mode]["capped"] = fastest < limit
            if runs[mode]["optimal"]:
                fastest = min(fastest, runs[mode]["seconds"])
        proven = [r for r in runs.values() if r["optimal"]]
        reached = [r["seconds_to_target"] for r in runs.values() if r["seconds_to_target"] is not None]
        best = min(proven or [r for r in runs.values() if r["objectives"]] or list(runs.values()),
                   key=lambda r: (r["objectives"] or [math.inf], r["seconds"]))
        baselines[name] = {**runs, "optimal": bool(proven), "objectives": best["objectives"],
                           # unproven: the time it was given (the limit, or the race's cap)
                           "seconds": min(r["seconds"] for r in proven) if proven else max(r["limit_s"] for r in runs.values()),
                           "seconds_to_target": min(reached) if reached else None}
    return baselines


def pointer_plan(graph, k: int, optimum: list[int] | None, scheduler: PointerScheduler | None = None) -> dict[str, Any]:
    """The pointer net's own plan (greedy plus 8 samples, the best kept; no cuts, no window), its
    inference time, and its peak's gap to the proven optimum (`pointer_gap_pct`).
    `scheduler`: another checkpoint than the shipped one."""
    t0 = time.perf_counter()
    stages = (scheduler or default_scheduler()).partition(graph, k)
    seconds = time.perf_counter() - t0
    objectives = evaluate_partition(graph, stages, k, IlpConfig().cache_bytes)
    gap = 100.0 * (objectives[0] - optimum[0]) / max(optimum[0], 1) if optimum else None
    return {"objectives": list(objectives), "seconds": seconds, "peak_gap_pct": gap}


def run_case(model: str, form: str, k: int, limit: float) -> dict[str, Any]:
    graph = _load(model, form)
    prepare_graph(graph)  # memoised structures: built untimed, for every side alike
    first = _incilp(graph, k, 10, IncIlpConfig().initial, limit)  # its plan is the baselines' target
    baselines = _exact_baselines(graph, k, limit, tuple(first["objectives"]))
    proven = [b for b in baselines.values() if b["optimal"]]
    optimum = tuple(proven[0]["objectives"]) if proven else None
    if proven:
        fastest_name = min((n for n, b in baselines.items() if b["optimal"]), key=lambda n: baselines[n]["seconds"])
        fastest = baselines[fastest_name]["seconds"]
    else:  # nothing proven: each baseline is charged its time to Inc-ILP's quality, else the limit
        reached = {n: b["seconds_to_target"] for n, b in baselines.items() if b["seconds_to_target"] is not None}
        fastest_name = min(reached, key=reached.__getitem__) if reached else None
        fastest = reached[fastest_name] if reached else limit
    case: dict[str, Any] = {"model": model, "form": form, "num_stages": k,
                            "group": _group(model), "num_nodes": graph.num_nodes,
                            "num_edges": len(graph.edges), "baselines": baselines,
                            "optimum": list(optimum) if optimum else None,
                            "fastest_exact": fastest, "fastest_exact_name": fastest_name,
                            "fastest_exact_is_time_to_target": not proven,
                            "unproven": not proven, "incilp": {}, "pointer": pointer_plan(graph, k, optimum),
                            "host_cpu": host_cpu()}  # a speed-up holds only between runs on one kind of CPU
    incilp_variants(case, graph, limit, first)
    return case


def _group(model: str) -> str:
    return "new" if model in NEW_GRAPHS else "synthetic" if model.startswith(SYNTHETIC) else "zoo"


def incilp_variants(case: dict[str, Any], graph, limit: float, first: dict[str, Any] | None = None) -> None:
    """Inc-ILP's runs of a case (the default start, then `best`; wider gammas where gamma 10
    misses the optimum), judged against the case's baselines, which are left as they are."""
    k, optimum = case["num_stages"], case["optimum"] and tuple(case["optimum"])
    for variant, initial in (("default", IncIlpConfig().initial), ("best", "best")):
        run = first if variant == "default" and first else _incilp(graph, k, 10, initial, limit)
        runs = [run]
        for gamma in WIDER_GAMMAS:
            if optimum is None or tuple(runs[-1]["objectives"]) <= optimum:
                break
            runs.append(_incilp(graph, k, gamma, initial, limit))
        case["incilp"][variant] = {"gamma10": run, "wider": runs[1:],
                                   "reached_optimum": None if optimum is None else tuple(run["objectives"]) <= optimum,
                                   "gamma_to_optimum": next((r["gamma"] for r in runs if optimum is not None
                                                             and tuple(r["objectives"]) <= optimum), None)}
        best_exact = [b["objectives"] for b in case["baselines"].values() if b["objectives"] is not None]
        case["incilp"][variant]["not_worse_than_baselines"] = all(
            tuple(run["objectives"]) <= tuple(o) for o in best_exact)
        case["incilp"][variant]["speedup_e2e"] = case["fastest_exact"] / max(run["seconds"], 1e-6)


def redo_incilp(doc: dict[str, Any], wanted: set[tuple[str, int]], form: str, limit: float,
                save: Callable[[], None]) -> list[tuple[str, int]]:
    """After a change to Inc-ILP alone: rerun Inc-ILP on the wanted cases whose optimum some
    baseline proved (their baselines' times do not depend on Inc-ILP's plan, which was their
    target only until the optimum was proven), keep their baselines. An unproven case keeps its
    baselines too when the default start's new plan is the one they were timed to; otherwise it
    is dropped to run again whole, as is a case whose baselines ran on another kind of CPU (or
    one not recorded): sessions may land on different hosts, the exact baselines ran 2x slower
    on one than on another, and a speed-up of times taken on two hosts means nothing. Returns
    those. `save` writes the document after each case."""
    again, host = [], host_cpu()
    for case in list(doc["cases"]):
        key = (case["model"], case["num_stages"])
        if key not in wanted:
            continue
        if case.get("host_cpu") != host:
            doc["cases"].remove(case)
            again.append(key)
            continue
        graph = _load(case["model"], case.get("form", form))
        prepare_graph(graph)
        first = None
        if case["optimum"] is None:
            first = _incilp(graph, case["num_stages"], 10, IncIlpConfig().initial, limit)
            if first["objectives"] != case["incilp"]["default"]["gamma10"]["objectives"]:  # a new target
                doc["cases"].remove(case)
                again.append(key)
                continue
        case["incilp"] = {}
        incilp_variants(case, graph, limit, first)
        save()
    return again


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(max(v, 1e-9)) for v in values)) if values else None


def summarize(cases: list[dict[str, Any]], variant: str = "default") -> dict[str, Any]:
    inc = [c["incilp"][variant] for c in cases]
    proven = [(c, i) for c, i in zip(cases, inc) if c["optimum"] is not None]
    unproven = [(c, i) for c, i in zip(cases, inc) if c["optimum"] is None]
    large = [i["speedup_e2e"] for c, i in zip(cases, inc)
             if c["num_nodes"] >= LARGE_NODES or c["num_stages"] >= LARGE_STAGES]
    zoo = [1.0 if c["fastest_exact"] < TRIVIAL_EXACT_S else i["speedup_e2e"]
           for c, i in zip(cases, inc) if c["num_stages"] == 4 and c["form"] == "tflite"
           and c.get("group", "zoo") == "zoo"]
    gaps = [c["pointer"]["peak_gap_pct"] for c, _ in proven if c.get("pointer")]
    return {
        "optimal_fraction": sum(bool(i["reached_optimum"]) for _, i in proven) / len(proven) if proven else None,
        "unproven_not_worse": (sum(i["not_worse_than_baselines"] for _, i in unproven) / len(unproven)
                               if unproven else None),
        "geomean_speedup_e2e_large": _geomean(large),
        "geomean_speedup_e2e_zoo": _geomean(zoo),
        "pointer_gap_pct": statistics.fmean(gaps) if gaps else None,  # the same for either start
        "pointer_ms_per_1000_nodes": _geomean([1e6 * c["pointer"]["seconds"] / c["num_nodes"]
                                               for c in cases if c.get("pointer")]),
        # the initial plan (libcoral; pointer-net inference for `best`; exact cuts) per 1,000 nodes
        "initial_plan_ms_per_1000_nodes": _geomean([1e6 * i["gamma10"]["init_seconds"] / c["num_nodes"]
                                                    for c, i in zip(cases, inc)]),
        "num_cases": len(cases), "num_cases_proven": len(proven), "num_cases_large": len(large),
    }


def plot(cases: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, variant in zip(axes, ("default", "best")):
        for k in sorted({c["num_stages"] for c in cases}):
            pts = [(c["num_nodes"], c["incilp"][variant]["speedup_e2e"]) for c in cases if c["num_stages"] == k]
            ax.scatter(*zip(*pts), label=f"K = {k}", s=22)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("|V| (TFLite operators)")
        ax.set_ylabel("fastest exact baseline / Inc-ILP, end to end")
        ax.set_yscale("log")
        ax.set_title(f"Inc-ILP start: {'auto (libcoral)' if variant == 'default' else 'best (pointer net + libcoral)'}")
        ax.legend(fontsize=8)
    save_figure(fig, path)


def report(console: Console, cases: list[dict[str, Any]]) -> None:
    table = Table(title="Inc-ILP (gamma 10) end to end vs the fastest exact baseline (wall s)")
    for col in ("model", "|V|", "K", "fastest exact", "s", "Inc-ILP s", "init s", "speed-up", "optimum", "flag"):
        table.add_column(col)
    for c in cases:
        run = c["incilp"]["default"]
        table.add_row(c["model"], str(c["num_nodes"]), str(c["num_stages"]), str(c["fastest_exact_name"]),
                      f"{c['fastest_exact']:.3f}", f"{run['gamma10']['seconds']:.3f}",
                      f"{run['gamma10']['init_seconds']:.3f}", f"{run['speedup_e2e']:.2f}x",
                      {True: "yes", False: f"no (gamma {run['gamma_to_optimum']})", None: "?"}[run["reached_optimum"]],
                      "unproven" if c["unproven"] else "")
    console.print(table)


def redo_pointer_plans(out: Path, form: str, checkpoint: Path | None) -> int:
    """A new checkpoint's `pointer_gap_pct` without rerunning the solvers: each case's optimum is
    stored, so only the pointer net's plans are redone. The `best` start's Inc-ILP runs keep the
    plans of the checkpoint they ran with; `pointer_checkpoint` says which one the gaps are for."""
    doc = json.loads(out.read_text())
    scheduler = load_scheduler(checkpoint) if checkpoint else default_scheduler()
    for case in tqdm(doc["cases"], desc="pointer plans", unit="case"):
        case["pointer"] = pointer_plan(_load(case["model"], case.get("form", form)), case["num_stages"],
                                       case["optimum"], scheduler)
    doc["pointer_checkpoint"] = str(checkpoint or "hiertune/data/pointer_net.pt")
    doc.update(summarize(doc["cases"]))
    out.write_text(json.dumps(doc, indent=1))
    gaps = {}
    for case in doc["cases"]:
        if case["pointer"]["peak_gap_pct"] is not None:
            gaps.setdefault(case["num_stages"], []).append(case["pointer"]["peak_gap_pct"])
    Console().print({"pointer_gap_pct": doc["pointer_gap_pct"],
                     "by K": {k: round(statistics.fmean(v), 2) for k, v in sorted(gaps.items())}})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--form", default="tflite", choices=("tflite", "keras"))
    p.add_argument("--models", nargs="*", default=None,
                   help="zoo names or graph files (.json/.tflite/.onnx), each at every K of --stages")
    p.add_argument("--stages", type=int, nargs="*", default=[4, 8, 16])
    p.add_argument("--largest", type=int, default=4, help="the zoo's largest graphs run at every K; the rest at K = 4")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds per baseline run")
    p.add_argument("--out", type=Path, default=RESULTS / "incilp_scale.json")
    p.add_argument("--note", default="", help="a label stored in the JSON (e.g. why the run is reduced)")
    p.add_argument("--pointer-only", action="store_true",
                   help="redo only every case's pointer-net plan and gap (against the stored optimum), run no solver")
    p.add_argument("--redo-incilp", action="store_true",
                   help="rerun Inc-ILP (not the baselines) on the --models x --stages cases already stored, "
                        "after a change to Inc-ILP alone; unproven cases run again whole")
    p.add_argument("--rerun", action="store_true",
                   help="run the --models x --stages cases already stored again whole, baselines included, "
                        "after a change that speeds up a baseline too (the ideal DP's lattice, the hint's cuts)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="with --pointer-only: a pointer-net checkpoint to score instead of the shipped one")
    a = p.parse_args(argv)
    if a.pointer_only:
        return redo_pointer_plans(a.out, a.form, a.checkpoint)
    cases_wanted = ([(m, k) for m in a.models for k in a.stages] if a.models
                    else default_cases(a.form, a.largest, a.stages))
    console = Console(width=160)
    default_scheduler()  # load the pointer net (torch import) once, outside every timed run
    doc: dict[str, Any] = json.loads(a.out.read_text()) if a.out.exists() else {"cases": []}
    command = "python bench/incilp_scale.py " + " ".join(argv or __import__("sys").argv[1:])
    earlier = doc.get("config", {}).get("commands", [])
    stages = sorted(set(doc.get("config", {}).get("stages", [])) | set(a.stages))  # over every invocation
    doc["config"] = {"form": a.form, "time_limit_s": a.time_limit, "stages": stages, "largest": a.largest,
                     "note": a.note or doc.get("config", {}).get("note", ""), "commands": earlier + [command]}  # every invocation that added cases
    def save() -> None:
        doc.update(summarize(doc["cases"]))
        doc["best_start"] = summarize(doc["cases"], "best")
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))  # after every case: a stopped run resumes here

    if a.redo_incilp:
        redone = redo_incilp(doc, set(cases_wanted), a.form, a.time_limit, save)
        console.print(f"Inc-ILP rerun on the stored cases; run again whole: {redone or 'none'}")
    if a.rerun:
        wanted = set(cases_wanted)
        doc["cases"] = [c for c in doc["cases"] if (c["model"], c["num_stages"]) not in wanted]
    done = {(c["model"], c["num_stages"]) for c in doc["cases"]}
    todo = sorted(((m, k) for m, k in cases_wanted if (m, k) not in done),
                  key=lambda mk: _load(mk[0], a.form).num_nodes * mk[1])
    for model, k in tqdm(todo, desc="cases", unit="case"):
        doc["cases"].append(run_case(model, a.form, k, a.time_limit))
        save()
    if doc["cases"]:
        save()
        plot(doc["cases"], a.out.with_suffix(".png"))
        report(console, doc["cases"])
        console.print({k: doc[k] for k in ("optimal_fraction", "unproven_not_worse", "geomean_speedup_e2e_large",
                                           "geomean_speedup_e2e_zoo", "pointer_gap_pct")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
