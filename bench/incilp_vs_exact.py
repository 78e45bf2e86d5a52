"""Inc-ILP against the exact ILP on the model zoo (the seed paper's Figures 7 and 8).

For every zoo model and K stages: the exact lexicographic ILP on the whole graph, libcoral's
parameter-count split, the initial plan alone (pointer net; "RL-only"), and Inc-ILP for each
gamma, all on the same solver. Records solve times, whether each Inc-ILP plan reached the exact
optimum on all three objectives, the RL-only gap and libcoral's objectives. Results are written
after every case, so an interrupted run keeps what it measured (and `--resume` skips it).

    python bench/incilp_vs_exact.py                 # all zoo models, K = 4, 5, 6, gamma = 0..10,
                                                    # initial plans: pointer net (headline), libcoral
    python bench/incilp_vs_exact.py --quick         # 3 small models, K = 4, 6, gamma 0, 5, 10
    python bench/incilp_vs_exact.py --copies 4 ...  # each model chained 4 times: how the speed-up
                                                    # grows with |V| beyond the zoo's sizes
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from summary_stats import geomean
from tqdm import tqdm

from hiertune.plotting import pyplot, save_figure
from hiertune.policies.pointer_net import default_scheduler
from hiertune.solvers.baselines import exact_partition, libcoral_partition
from hiertune.solvers.graph import Edge, OpGraph, OpNode
from hiertune.solvers.ilp import IlpConfig, evaluate_partition, prepare_graph, solve_partition
from hiertune.solvers.incilp import WINDOW_KINDS, IncIlpConfig, inc_ilp, initial_partition
from hiertune.solvers.order_split import refine_cuts
from hiertune.solvers.zoo import load_zoo_graph, zoo_models

RESULTS = Path(__file__).parent / "results"
PAPER_MIN_NODES = 134  # the seed paper's 10 ImageNet models have 134..782 nodes
QUICK_MODELS = ["mobilenet", "mobilenetv2", "resnet50"]


@dataclass
class BenchConfig:
    models: list[str] = field(default_factory=list)  # empty: every zoo model of the form
    form: str = "keras"
    stages: list[int] = field(default_factory=lambda: [4, 5, 6])
    gammas: list[float] = field(default_factory=lambda: list(range(11)))
    solver: str = "cpsat"
    exact_time_limit_s: float = 600.0
    window_time_limit_s: float = 120.0
    threads: int = 1
    # first = headline; "+cuts": the initial plan's cuts placed exactly along its order (the default
    # Inc-ILP start); without it, the paper's plain start
    initials: list[str] = field(default_factory=lambda: ["pointer+cuts", "pointer", "libcoral+cuts", "libcoral"])
    window: str = "adjacent"  # where re-opened nodes may go (IncIlpConfig.window)
    copies: int = 1  # each model chained this many times (chained_copies)
    rounds: int = 1
    repeat: int = 3  # each timed solve runs this often; the fastest run counts (as timeit advises)
    out: Path = RESULTS / "incilp_vs_exact.json"
    plot: Path = RESULTS / "incilp_vs_exact.png"
    resume: bool = False
    checkpoint: dict[str, Any] = field(default_factory=dict)  # the pointer net used (filled by main)


@contextlib.contextmanager
def _no_gc():
    """Timed regions run without Python's cyclic garbage collector, as `timeit` does: a full
    collection here costs about 70 ms (the zoo graphs and the pointer net are many live objects)
    and lands on whichever solve happens to trigger it (one ResNet152 window measured 94 ms
    instead of 7). It runs between the timed regions instead."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fastest(repeat: int, run, cpu_seconds=lambda result: result.cpu_seconds):
    """The result of `run()` whose CPU time was smallest over `repeat` runs, each without the
    garbage collector. Solves and the seeded pointer net are deterministic, so the runs differ only
    in how much the host and the process's warm-up got in the way; the minimum is the own cost."""
    best = None
    for _ in range(max(repeat, 1)):
        with _no_gc():
            result = run()
        if best is None or cpu_seconds(result) < cpu_seconds(best):
            best = result
    return best


def chained_copies(graph: OpGraph, copies: int) -> OpGraph:
    """`copies` copies of the graph in a row: every sink of copy i feeds every source of copy
    i + 1, each such edge carrying the model's input tensor (its largest source out-edge), as if
    the next copy took an image-sized result. Real layers and real branching, at |V| the zoo does
    not reach: where the exact ILP's time grows with the graph and the windows' does not."""
    if copies == 1:
        return graph
    n, succ, pred = graph.num_nodes, graph.successors(), graph.predecessors()
    sinks = [v for v in range(n) if not succ[v]]
    sources = [v for v in range(n) if not pred[v]]
    link_bytes = max((e.tensor_bytes for e in graph.edges if not pred[e.src]), default=0)
    nodes, edges = [], []
    for i in range(copies):
        nodes += [OpNode(f"{v.name}#{i}", v.op, v.param_bytes) for v in graph.nodes]
        edges += [Edge(e.src + i * n, e.dst + i * n, e.tensor_bytes) for e in graph.edges]
        if i:
            edges += [Edge(a + (i - 1) * n, b + i * n, link_bytes) for a in sinks for b in sources]
    return OpGraph(f"{graph.name}x{copies}", nodes, edges, source=graph.source, dtype=graph.dtype)


def _timed_initial(graph, k: int, wanted: str) -> tuple[list[int], str, float, float]:
    """The initial plan of `wanted` ("pointer", "libcoral+cuts", ...), its resolved name and the
    wall and CPU seconds it took (pointer-net inference, plus the exact cut placement)."""
    source, _, cuts = wanted.partition("+")
    t0, c0 = time.perf_counter(), time.process_time()
    scheduler = default_scheduler() if source in ("auto", "pointer", "best") else None
    init, resolved = initial_partition(graph, k, source, scheduler=scheduler)
    if cuts:
        init, resolved = refine_cuts(graph, init, k), f"{resolved}+cuts"
    return init, resolved, time.perf_counter() - t0, time.process_time() - c0


def run_case(name: str, k: int, cfg: BenchConfig, prior_exact: dict[str, Any] | None = None) -> dict[str, Any]:
    """Exact ILP once; then, per initial-plan source, Inc-ILP at every gamma. Speed-ups use CPU
    time (the host is shared: wall time swings with other tenants' load); wall times are kept too.
    `prior_exact` reuses an earlier run's exact solve of the same case (same solver and limit)."""
    graph = chained_copies(load_zoo_graph(name, cfg.form), cfg.copies)
    prepare_graph(graph)  # memoised graph structures: built untimed, so neither side pays for them
    ilp = IlpConfig(solver=cfg.solver, time_limit_s=cfg.exact_time_limit_s, threads=cfg.threads)
    window_ilp = IlpConfig(solver=cfg.solver, time_limit_s=cfg.window_time_limit_s, threads=cfg.threads)
    libcoral = libcoral_partition(graph, k)
    if prior_exact is None:
        res = _fastest(cfg.repeat, lambda: exact_partition(graph, k, ilp))
        prior_exact = {"objectives": list(res.objectives), "seconds": res.solve_seconds,
                       "cpu_seconds": res.cpu_seconds, "optimal": res.optimal, "solver": res.solver,
                       "num_vars": res.num_vars}
    exact = prior_exact
    opt = tuple(exact["objectives"])
    case: dict[str, Any] = {
        "model": name, "copies": cfg.copies, "num_stages": k, "num_nodes": graph.num_nodes, "num_edges": len(graph.edges),
        "longest_path": graph.longest_path_length(),
        "exact": exact,
        "libcoral": {"objectives": list(evaluate_partition(graph, libcoral, k, ilp.cache_bytes))},
        "variants": {},
    }
    for wanted in cfg.initials:
        init, source, init_s, init_cpu = _fastest(cfg.repeat, lambda: _timed_initial(graph, k, wanted),
                                                  cpu_seconds=lambda timed: timed[3])
        if source in case["variants"]:
            continue  # `auto` fell back to a source already measured
        init_obj = evaluate_partition(graph, init, k, ilp.cache_bytes)
        runs = []
        for gamma in cfg.gammas:
            inc_config = IncIlpConfig(gamma=gamma, initial="given", window=cfg.window,
                                      rounds=cfg.rounds, refine_cuts=False, ilp=window_ilp)
            # `init` is already refined when the variant asks for it
            res = _fastest(cfg.repeat, lambda: inc_ilp(graph, k, inc_config, initial=init))
            runs.append({
                "gamma": gamma, "objectives": list(res.objectives), "window_size": res.window_size,
                "num_vars": res.num_vars, "window_optimal": res.optimal, "rounds": res.rounds,
                "reached_exact": tuple(res.objectives) <= opt,
                "seconds": res.solve_seconds, "cpu_seconds": res.cpu_seconds,
                "speedup": exact["cpu_seconds"] / max(res.cpu_seconds, 1e-6),
                "speedup_with_init": exact["cpu_seconds"] / max(res.cpu_seconds + init_cpu, 1e-6),
                "speedup_wall": exact["seconds"] / max(res.solve_seconds, 1e-6),
            })
        case["variants"][source] = {
            "initial": {"objectives": list(init_obj), "seconds": init_s, "cpu_seconds": init_cpu,
                        "reached_exact": tuple(init_obj) <= opt,
                        "peak_gap_pct": 100.0 * (init_obj[0] - opt[0]) / max(opt[0], 1)},
            "incilp": runs,
        }
    return case


def _at(case: dict[str, Any], source: str, gamma: float) -> dict[str, Any] | None:
    variant = case["variants"].get(source)
    return next((r for r in variant["incilp"] if r["gamma"] == gamma), None) if variant else None


def summarize_variant(cases: list[dict[str, Any]], source: str, gammas: list[float]) -> dict[str, Any]:
    cases = [c for c in cases if source in c["variants"]]

    def stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "optimal_fraction": sum(r["reached_exact"] for r in rows) / len(rows) if rows else None,
            "geomean_speedup": geomean([r["speedup"] for r in rows]),
            "geomean_speedup_with_init": geomean([r["speedup_with_init"] for r in rows]),
            "geomean_speedup_wall": geomean([r["speedup_wall"] for r in rows]),
        }

    per_gamma = {str(g): stats([r for c in cases if (r := _at(c, source, g))]) for g in gammas}
    per_k = {}
    for k in sorted({c["num_stages"] for c in cases}):
        ks = [c for c in cases if c["num_stages"] == k]
        s10 = stats([r for c in ks if (r := _at(c, source, 10))])
        paper = stats([r for c in ks if c["num_nodes"] >= PAPER_MIN_NODES and (r := _at(c, source, 10))])
        per_k[str(k)] = {
            "optimal_fraction_gamma10": s10["optimal_fraction"],
            "geomean_speedup_gamma10": s10["geomean_speedup"],
            # the same, over the models of the paper's size range only (VGG16 and MobileNet are smaller)
            "geomean_speedup_gamma10_paper_sizes": paper["geomean_speedup"],
            "geomean_speedup_gamma10_with_init": s10["geomean_speedup_with_init"],
            "mean_rl_only_peak_gap_pct": statistics.fmean(c["variants"][source]["initial"]["peak_gap_pct"] for c in ks),
            "exact_all_proven_optimal": all(c["exact"]["optimal"] for c in ks),
        }
    g10 = per_gamma.get("10", {})
    beats = [(r := _at(c, source, 10)) is not None and r["objectives"][0] <= c["libcoral"]["objectives"][0]
             for c in cases]
    return {
        "cases": len(cases),
        "optimal_fraction_gamma10": g10.get("optimal_fraction"),
        "geomean_speedup_gamma10": g10.get("geomean_speedup"),
        "geomean_speedup_gamma10_with_init": g10.get("geomean_speedup_with_init"),
        "geomean_speedup_gamma10_wall": g10.get("geomean_speedup_wall"),
        "libcoral_peak_matched_or_beaten_fraction": sum(beats) / len(cases) if cases else None,
        "per_stages": per_k,
        "per_gamma": per_gamma,
    }


def summarize(cases: list[dict[str, Any]], gammas: list[float]) -> dict[str, Any]:
    """Headline keys from the first initial-plan source measured (the pointer net when it exists)."""
    sources = list(dict.fromkeys(s for c in cases for s in c["variants"]))
    variants = {s: summarize_variant(cases, s, gammas) for s in sources}
    head = variants[sources[0]] if sources else {}
    return {
        "headline_initial": sources[0] if sources else None,
        "optimal_fraction_gamma10": head.get("optimal_fraction_gamma10"),
        "geomean_speedup_gamma10": head.get("geomean_speedup_gamma10"),
        "speedup_definition": "exact-ILP CPU seconds / Inc-ILP window-solve CPU seconds, same solver; "
                              "'_with_init' adds the initial plan's CPU time, '_wall' uses wall time",
        "by_initial": variants,
    }


def plot(cases: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """Top row (Fig. 7): exact vs Inc-ILP gamma=10 CPU seconds per model, per K. Bottom row
    (Fig. 8): fraction at the exact optimum and geomean speed-up against gamma, per initial plan."""
    plt = pyplot()
    sources = list(summary["by_initial"])
    ks = sorted({c["num_stages"] for c in cases})
    fig, axes = plt.subplots(2, max(len(ks), 1), figsize=(5.5 * max(len(ks), 1), 8.5), squeeze=False)
    for j, k in enumerate(ks):
        rows = [c for c in cases if c["num_stages"] == k]
        ax = axes[0][j]
        x = list(range(len(rows)))
        width = 0.8 / (1 + len(sources))
        ax.bar([i - 0.4 + width / 2 for i in x], [c["exact"]["cpu_seconds"] for c in rows], width=width,
               label="exact ILP")
        for n, src in enumerate(sources, start=1):
            vals = [(r := _at(c, src, 10)) and r["cpu_seconds"] or float("nan") for c in rows]
            ax.bar([i - 0.4 + width * (n + 0.5) for i in x], vals, width=width, label=f"Inc-ILP g=10 ({src})")
        ax.set_yscale("log")
        ax.set_xticks(x, [c["model"] for c in rows], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("solve CPU seconds")
        ax.set_title(f"K={k}: solve time (Fig. 7)")
        ax.legend(fontsize=7)
        ax = axes[1][j]
        ax2 = ax.twinx()
        # the top row's colours (after the exact ILP's blue); a fourth start used to be dropped here
        for src, color in zip(sources, ("tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")):
            gammas = sorted({r["gamma"] for c in rows if src in c["variants"] for r in c["variants"][src]["incilp"]})
            frac, speed = [], []
            for g in gammas:
                rs = [r for c in rows if (r := _at(c, src, g))]
                frac.append(sum(r["reached_exact"] for r in rs) / len(rs))
                speed.append(geomean([r["speedup"] for r in rs]) or float("nan"))
            ax.plot(gammas, frac, "o-", color=color, label=f"fraction optimal ({src})")
            ax2.plot(gammas, speed, "s--", color=color, alpha=0.6, label=f"geomean speed-up ({src})")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("gamma")
        ax.set_ylabel("fraction of models at the exact optimum")
        ax2.set_yscale("log")
        ax2.set_ylabel("geomean speed-up vs exact (CPU)")
        ax.set_title(f"K={k}: optimality and speed-up vs gamma (Fig. 8)")
        lines = ax.get_lines() + ax2.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize=7, loc="lower right")
    copies = max((c.get("copies", 1) for c in cases), default=1)
    if copies > 1:
        fig.suptitle(f"every model chained {copies} times (--copies {copies})")
    save_figure(fig, path, dpi=110)


def table(cases: list[dict[str, Any]], source: str) -> Table:
    t = Table(title=f"Inc-ILP (gamma=10, initial plan: {source}) vs exact ILP, same solver, CPU seconds")
    for col in ("model", "K", "|V|", "exact s", "Inc-ILP ms", "init s", "speed-up", "window", "optimal",
                "RL-only peak gap", "libcoral peak/opt"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for c in cases:
        r = _at(c, source, 10)
        if r is None:
            continue
        init = c["variants"][source]["initial"]
        opt_peak = max(c["exact"]["objectives"][0], 1)
        t.add_row(
            c["model"], str(c["num_stages"]), str(c["num_nodes"]),
            f"{c['exact']['cpu_seconds']:.2f}" + ("" if c["exact"]["optimal"] else "*"),
            f"{r['cpu_seconds'] * 1000:.1f}", f"{init['cpu_seconds']:.2f}", f"{r['speedup']:.1f}x",
            f"{r['window_size']}", "yes" if r["reached_exact"] else "no",
            f"{init['peak_gap_pct']:.2f}%", f"{c['libcoral']['objectives'][0] / opt_peak:.3f}",
        )
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=[])
    p.add_argument("--form", choices=("keras", "tflite"), default="keras")
    p.add_argument("--stages", type=int, nargs="*", default=[4, 5, 6])
    p.add_argument("--gammas", type=float, nargs="*", default=[float(g) for g in range(11)])
    p.add_argument("--solver", default="cpsat", choices=("cpsat", "highs", "gurobi"))
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds per exact lexicographic solve")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--initial", nargs="+", default=BenchConfig().initials,
                   choices=[f"{s}{c}" for s in ("auto", "pointer", "libcoral") for c in ("", "+cuts")],
                   help="initial-plan sources to compare; the first gives the headline numbers")
    p.add_argument("--window", choices=WINDOW_KINDS, default=BenchConfig.window,
                   help="where re-opened nodes may go: across their boundary (adjacent) or any stage")
    p.add_argument("--rounds", type=int, default=1, help="Inc-ILP window rounds (the paper: 1)")
    p.add_argument("--copies", type=int, default=1,
                   help="chain each model this many times (|V| x copies; copy i's outputs feed copy i+1)")
    p.add_argument("--repeat", type=int, default=BenchConfig.repeat,
                   help="runs per timed solve (exact and every window); the fastest counts")
    p.add_argument("--quick", action="store_true", help="3 small models, K = 4, 6, gamma 0, 5, 10, 60 s limit")
    p.add_argument("--resume", action="store_true", help="keep finished cases of an existing --out file")
    p.add_argument("--out", type=Path, default=RESULTS / "incilp_vs_exact.json")
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument("--reuse-exact", type=Path, help="take the exact solves from an earlier result JSON")
    p.add_argument("--replot", action="store_true",
                   help="no solving: recompute the summary keys of --out, redraw its PNG and tables")
    a = p.parse_args(argv)
    if a.copies < 1:
        p.error(f"--copies {a.copies}: chain each model at least once")
    cfg = BenchConfig(models=a.models, form=a.form, stages=a.stages,
                      gammas=[int(g) if g == int(g) else g for g in a.gammas], solver=a.solver,
                      exact_time_limit_s=a.time_limit, threads=a.threads, initials=a.initial,
                      window=a.window, rounds=a.rounds, copies=a.copies, repeat=a.repeat, out=a.out, plot=a.plot or a.out.with_suffix(".png"),
                      resume=a.resume)
    if a.quick:
        cfg.models = cfg.models or QUICK_MODELS
        cfg.stages, cfg.gammas, cfg.exact_time_limit_s = [4, 6], [0, 5, 10], min(cfg.exact_time_limit_s, 60.0)
        if a.out == RESULTS / "incilp_vs_exact.json":
            cfg.out = RESULTS / "incilp_vs_exact_quick.json"
            cfg.plot = a.plot or cfg.out.with_suffix(".png")
    models = cfg.models or zoo_models(cfg.form)
    console = Console(width=150)
    if not a.replot and any(i.split("+")[0] in ("auto", "pointer") for i in cfg.initials):
        default_scheduler()  # load the pointer net (torch import) once, outside the timed cases
        cfg.checkpoint = _checkpoint_id()
    cases: list[dict[str, Any]] = []
    if a.replot:  # recompute the summary keys from the stored cases; nothing is solved again
        doc = json.loads(cfg.out.read_text())
        doc.update(summarize(doc["cases"], doc["config"]["gammas"]))
        cfg.out.write_text(json.dumps(doc, indent=1))
        return _report(console, doc["cases"], doc["config"]["gammas"], cfg)
    if cfg.resume and cfg.out.exists():
        cases = [c for c in json.loads(cfg.out.read_text())["cases"]
                 if c["model"] in models and c.get("copies", 1) == cfg.copies]
    done = {(c["model"], c["num_stages"]) for c in cases}
    todo = [(m, k) for m in models for k in cfg.stages if (m, k) not in done]
    prior: dict[tuple[str, int], dict[str, Any]] = {}
    if a.reuse_exact:
        prior = {(c["model"], c["num_stages"]): c["exact"] for c in json.loads(a.reuse_exact.read_text())["cases"]
                 if c.get("copies", 1) == cfg.copies}  # the same graphs only
    _warm_up_solver(cfg.solver)
    started = time.time()
    for name, k in tqdm(todo, desc="model x K", unit="case"):
        cases.append(run_case(name, k, cfg, prior.get((name, k))))
        _write(cfg, cases, started)
    _write(cfg, cases, started)
    return _report(console, cases, cfg.gammas, cfg)


def _report(console: Console, cases: list[dict[str, Any]], gammas: list[float], cfg: BenchConfig) -> int:
    s = summarize(cases, gammas)
    plot(cases, s, cfg.plot)
    for source, v in s["by_initial"].items():
        console.print(table(cases, source))
        console.print(f"initial plan {source}, gamma=10: exact optimum reached on {v['optimal_fraction_gamma10']:.0%} "
                      f"of {v['cases']} model x K cases; geomean speed-up {v['geomean_speedup_gamma10']:.1f}x "
                      f"(with the initial plan's time {v['geomean_speedup_gamma10_with_init']:.1f}x, wall "
                      f"{v['geomean_speedup_gamma10_wall']:.1f}x); libcoral peak matched or beaten on "
                      f"{v['libcoral_peak_matched_or_beaten_fraction']:.0%}")
    console.print(markdown_summary(s), markup=False, highlight=False)
    console.print(f"results in {cfg.out}, figure {cfg.plot}")
    return 0


def markdown_summary(summary: dict[str, Any]) -> str:
    """Per initial plan and K: the README's table."""
    lines = ["| initial plan | K | optimal at gamma=10 | geomean speed-up (solve) | on the paper's sizes | "
             "with initial plan | RL-only peak gap |", "|---|---|---|---|---|---|---|"]
    for source, v in summary["by_initial"].items():
        for k, row in v["per_stages"].items():
            lines.append(f"| {source} | {k} | {row['optimal_fraction_gamma10']:.0%} | "
                         f"{row['geomean_speedup_gamma10']:.1f}x | {_times(row['geomean_speedup_gamma10_paper_sizes'])} | "
                         f"{row['geomean_speedup_gamma10_with_init']:.1f}x | "
                         f"{row['mean_rl_only_peak_gap_pct']:.1f}% |")
    return "\n".join(lines)


def _warm_up_solver(solver: str) -> None:
    """One small untimed solve: the solver's first calls in a process import and initialise it
    (about 0.1 s for CP-SAT), which would otherwise land on the first case's exact time. A
    two-stage VGG16 solve was not enough (the next VGG16 K = 4 solve still took 17 ms, not 9);
    MobileNet at K = 4 is (50 ms)."""
    solve_partition(load_zoo_graph("mobilenet", "keras"), 4, IlpConfig(solver=solver))


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"  # None: no model of the paper's sizes was run


def _checkpoint_id() -> dict[str, Any]:
    """Which pointer-net checkpoint the run used (it may be retrained between runs)."""
    import hashlib

    try:
        from hiertune.policies.pointer_net import DEFAULT_CHECKPOINT
    except ImportError:
        return {}
    path = Path(DEFAULT_CHECKPOINT)
    if not path.exists():
        return {}
    return {"path": str(path.name), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
            "mtime": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))}


def _write(cfg: BenchConfig, cases: list[dict[str, Any]], started: float) -> None:
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items() if k != "checkpoint"}
    config["cpsat_parameters"] = IlpConfig().cpsat_parameters  # both sides solve with these
    doc = {**summarize(cases, cfg.gammas), "config": config, "pointer_checkpoint": cfg.checkpoint,
           "wall_seconds": time.time() - started, "cases": cases}
    cfg.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
