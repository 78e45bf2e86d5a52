"""Inc-ILP against the exact ILP on the model zoo (the seed paper's Figures 7 and 8).

For every zoo model and K stages: the exact lexicographic ILP on the whole graph, libcoral's
parameter-count split, the initial plan alone (pointer net; "RL-only"), and Inc-ILP for each
gamma, all on the same solver. Records solve times, whether each Inc-ILP plan reached the exact
optimum on all three objectives, the RL-only gap and libcoral's objectives. Results are written
after every case, so an interrupted run keeps what it measured (and `--resume` skips it).

    python bench/incilp_vs_exact.py                 # all zoo models, K = 4, 5, 6, gamma = 0..10
    python bench/incilp_vs_exact.py --quick         # 3 small models, K = 4, 6, gamma 0, 5, 10
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from hiertune.solvers.baselines import exact_partition, libcoral_partition
from hiertune.solvers.ilp import IlpConfig, evaluate_partition
from hiertune.solvers.incilp import IncIlpConfig, default_scheduler, inc_ilp, initial_partition
from hiertune.solvers.zoo import load_zoo_graph, zoo_models

RESULTS = Path(__file__).parent / "results"
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
    initial: str = "auto"
    adjacent_only: bool = False
    out: Path = RESULTS / "incilp_vs_exact.json"
    plot: Path = RESULTS / "incilp_vs_exact.png"
    resume: bool = False


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def run_case(name: str, k: int, cfg: BenchConfig) -> dict[str, Any]:
    graph = load_zoo_graph(name, cfg.form)
    ilp = IlpConfig(solver=cfg.solver, time_limit_s=cfg.exact_time_limit_s, threads=cfg.threads)
    window_ilp = IlpConfig(solver=cfg.solver, time_limit_s=cfg.window_time_limit_s, threads=cfg.threads)
    t0 = time.perf_counter()
    init, source = initial_partition(graph, k, cfg.initial)
    init_s = time.perf_counter() - t0
    init_obj = evaluate_partition(graph, init, k, ilp.cache_bytes)
    libcoral = libcoral_partition(graph, k)
    lib_obj = evaluate_partition(graph, libcoral, k, ilp.cache_bytes)
    exact = exact_partition(graph, k, ilp)
    case: dict[str, Any] = {
        "model": name, "num_stages": k, "num_nodes": graph.num_nodes, "num_edges": len(graph.edges),
        "longest_path": graph.longest_path_length(),
        "exact": {"objectives": list(exact.objectives), "seconds": exact.solve_seconds, "optimal": exact.optimal,
                  "solver": exact.solver, "num_vars": exact.num_vars},
        "libcoral": {"objectives": list(lib_obj)},
        "initial": {"source": source, "objectives": list(init_obj), "seconds": init_s,
                    "peak_gap_pct": 100.0 * (init_obj[0] - exact.objectives[0]) / max(exact.objectives[0], 1)},
        "incilp": [],
    }
    for gamma in cfg.gammas:
        res = inc_ilp(graph, k, IncIlpConfig(gamma=gamma, initial="given", adjacent_only=cfg.adjacent_only, ilp=window_ilp), initial=init)
        total = res.solve_seconds + init_s
        case["incilp"].append({
            "gamma": gamma, "objectives": list(res.objectives), "seconds": res.solve_seconds,
            "seconds_with_init": total, "window_size": res.window_size, "num_vars": res.num_vars,
            "window_optimal": res.optimal,
            "reached_exact": tuple(res.objectives) <= tuple(exact.objectives),
            "speedup": exact.solve_seconds / total,
            "speedup_solve_only": exact.solve_seconds / max(res.solve_seconds, 1e-9),
        })
    return case


def summarize(cases: list[dict[str, Any]], gammas: list[float]) -> dict[str, Any]:
    def at(case: dict[str, Any], gamma: float) -> dict[str, Any] | None:
        return next((r for r in case["incilp"] if r["gamma"] == gamma), None)

    per_gamma = {}
    for gamma in gammas:
        rows = [r for c in cases if (r := at(c, gamma))]
        per_gamma[str(gamma)] = {
            "optimal_fraction": sum(r["reached_exact"] for r in rows) / len(rows) if rows else None,
            "geomean_speedup": geomean([r["speedup"] for r in rows]),
            "geomean_speedup_solve_only": geomean([r["speedup_solve_only"] for r in rows]),
        }
    per_k = {}
    for k in sorted({c["num_stages"] for c in cases}):
        ks = [c for c in cases if c["num_stages"] == k]
        rows = [r for c in ks if (r := at(c, 10))]
        per_k[str(k)] = {
            "optimal_fraction_gamma10": sum(r["reached_exact"] for r in rows) / len(rows) if rows else None,
            "geomean_speedup_gamma10": geomean([r["speedup"] for r in rows]),
            "mean_rl_only_peak_gap_pct": statistics.fmean(c["initial"]["peak_gap_pct"] for c in ks),
            "exact_all_proven_optimal": all(c["exact"]["optimal"] for c in ks),
        }
    g10 = per_gamma.get("10", {})
    beats_libcoral = [c["incilp"] and at(c, 10) and at(c, 10)["objectives"][0] <= c["libcoral"]["objectives"][0]
                      for c in cases]
    return {
        "optimal_fraction_gamma10": g10.get("optimal_fraction"),
        "geomean_speedup_gamma10": g10.get("geomean_speedup"),
        "geomean_speedup_gamma10_solve_only": g10.get("geomean_speedup_solve_only"),
        "libcoral_peak_matched_or_beaten_fraction": sum(map(bool, beats_libcoral)) / len(cases) if cases else None,
        "per_stages": per_k,
        "per_gamma": per_gamma,
    }


def plot(cases: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted({c["num_stages"] for c in cases})
    fig, axes = plt.subplots(2, max(len(ks), 1), figsize=(5 * max(len(ks), 1), 8), squeeze=False)
    for j, k in enumerate(ks):
        ax = axes[0][j]
        rows = [c for c in cases if c["num_stages"] == k]
        names = [c["model"] for c in rows]
        exact_s = [c["exact"]["seconds"] for c in rows]
        inc_s = [next((r["seconds_with_init"] for r in c["incilp"] if r["gamma"] == 10), float("nan")) for c in rows]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], exact_s, width=0.4, label="exact ILP")
        ax.bar([i + 0.2 for i in x], inc_s, width=0.4, label="Inc-ILP gamma=10")
        ax.set_yscale("log")
        ax.set_xticks(list(x), names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("solve time (s)")
        ax.set_title(f"K={k}: solve time (Fig. 7)")
        ax.legend(fontsize=8)
        ax = axes[1][j]
        gammas = sorted({r["gamma"] for c in rows for r in c["incilp"]})
        frac, speed = [], []
        for g in gammas:
            rs = [r for c in rows for r in c["incilp"] if r["gamma"] == g]
            frac.append(sum(r["reached_exact"] for r in rs) / len(rs))
            speed.append(geomean([r["speedup"] for r in rs]) or float("nan"))
        ax.plot(gammas, frac, "o-", color="tab:green", label="fraction optimal")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("gamma")
        ax.set_ylabel("fraction of models at the exact optimum")
        ax2 = ax.twinx()
        ax2.plot(gammas, speed, "s--", color="tab:blue", label="geomean speed-up")
        ax2.set_yscale("log")
        ax2.set_ylabel("geomean speed-up vs exact")
        ax.set_title(f"K={k}: optimality and speed-up vs gamma (Fig. 8)")
        lines = ax.get_lines() + ax2.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="center right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(cases: list[dict[str, Any]]) -> Table:
    t = Table(title="Inc-ILP (gamma=10) vs exact ILP, same solver")
    for col in ("model", "K", "|V|", "exact s", "Inc-ILP s", "speed-up", "optimal", "RL-only gap", "libcoral peak/opt"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for c in cases:
        r = next((r for r in c["incilp"] if r["gamma"] == 10), None)
        opt_peak = max(c["exact"]["objectives"][0], 1)
        t.add_row(
            c["model"], str(c["num_stages"]), str(c["num_nodes"]),
            f"{c['exact']['seconds']:.2f}" + ("" if c["exact"]["optimal"] else "*"),
            f"{r['seconds_with_init']:.2f}" if r else "-", f"{r['speedup']:.1f}x" if r else "-",
            ("yes" if r["reached_exact"] else "no") if r else "-",
            f"{c['initial']['peak_gap_pct']:.2f}%", f"{c['libcoral']['objectives'][0] / opt_peak:.3f}",
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
    p.add_argument("--initial", default="auto", choices=("auto", "pointer", "libcoral"))
    p.add_argument("--adjacent-only", action="store_true", help="re-opened nodes move only across their boundary")
    p.add_argument("--quick", action="store_true", help="3 small models, K = 4, 6, gamma 0, 5, 10, 60 s limit")
    p.add_argument("--resume", action="store_true", help="keep finished cases of an existing --out file")
    p.add_argument("--out", type=Path, default=RESULTS / "incilp_vs_exact.json")
    p.add_argument("--plot", type=Path, default=None)
    a = p.parse_args(argv)
    cfg = BenchConfig(models=a.models, form=a.form, stages=a.stages, gammas=[int(g) if g == int(g) else g for g in a.gammas],
                      solver=a.solver, exact_time_limit_s=a.time_limit, threads=a.threads, initial=a.initial,
                      adjacent_only=a.adjacent_only, out=a.out, plot=a.plot or a.out.with_suffix(".png"), resume=a.resume)
    if a.quick:
        cfg.models = cfg.models or QUICK_MODELS
        cfg.stages, cfg.gammas, cfg.exact_time_limit_s = [4, 6], [0, 5, 10], min(cfg.exact_time_limit_s, 60.0)
        if a.out == RESULTS / "incilp_vs_exact.json":
            cfg.out = RESULTS / "incilp_vs_exact_quick.json"
            cfg.plot = a.plot or cfg.out.with_suffix(".png")
    models = cfg.models or zoo_models(cfg.form)
    console = Console(width=140)
    if cfg.initial == "auto":
        default_scheduler()  # load the pointer net (torch import) once, outside the timed cases
    cases: list[dict[str, Any]] = []
    if cfg.resume and cfg.out.exists():
        cases = [c for c in json.loads(cfg.out.read_text())["cases"] if c["model"] in models]
    done = {(c["model"], c["num_stages"]) for c in cases}
    todo = [(m, k) for m in models for k in cfg.stages if (m, k) not in done]
    started = time.time()
    for name, k in tqdm(todo, desc="model x K", unit="case"):
        cases.append(run_case(name, k, cfg))
        _write(cfg, cases, started)
    _write(cfg, cases, started)
    plot(cases, summarize(cases, cfg.gammas), cfg.plot)
    console.print(table(cases))
    s = summarize(cases, cfg.gammas)
    console.print(f"gamma=10: optimal on {s['optimal_fraction_gamma10']:.0%} of model x K cases, geomean speed-up "
                  f"{s['geomean_speedup_gamma10']:.1f}x (solve only {s['geomean_speedup_gamma10_solve_only']:.1f}x); "
                  f"libcoral peak matched or beaten on {s['libcoral_peak_matched_or_beaten_fraction']:.0%}")
    console.print(f"wrote {cfg.out} and {cfg.plot}")
    return 0


def _write(cfg: BenchConfig, cases: list[dict[str, Any]], started: float) -> None:
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()}
    doc = {**summarize(cases, cfg.gammas), "config": config, "wall_seconds": time.time() - started, "cases": cases}
    cfg.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
