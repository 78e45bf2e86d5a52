"""RL-only gap: the shipped pointer net's plans vs the exact ILP optimum, synthetic and zoo graphs.

    python bench/pointer_net_gap.py --synthetic 40 --models mobilenet,mobilenetv2,efficientnetb0 \
        --stages 4,5,6 --samples 8

Why: Inc-ILP's speed comes from starting the exact solve from a good partition; this measures
how good the pre-scheduler alone is (the seed paper reports 1.88% / 1.12% / 4.50% gap for
K = 4 / 5 / 6). Peak per-stage parameter memory is the first, dominant objective, so the gap is
reported on it; `lex_optimal` says whether all three objectives matched the exact optimum.
Writes bench/results/pointer_net_gap.json and .png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from hiertune.envs.synthetic_dags import generate_dags
from hiertune.policies.pointer_net import SchedulerConfig, load_default_scheduler
from hiertune.solvers.ilp import IlpConfig, evaluate_partition, solve_partition
from hiertune.solvers.zoo import load_zoo_graph

RESULTS = Path(__file__).resolve().parent / "results"


def run_case(graph, k: int, scheds: dict, ilp: IlpConfig) -> dict:
    t0 = time.perf_counter()
    exact = solve_partition(graph, k, ilp)
    row = {"graph": graph.name, "nodes": graph.num_nodes, "k": k, "exact": list(exact.objectives),
           "exact_optimal": exact.optimal, "exact_seconds": round(time.perf_counter() - t0, 3)}
    for name, sched in scheds.items():
        t0 = time.perf_counter()
        plan = sched.partition(graph, k)
        secs = time.perf_counter() - t0
        obj = evaluate_partition(graph, plan, k, ilp.cache_bytes)
        row[name] = {"objectives": list(obj), "seconds": round(secs, 3),
                     "peak_gap": obj[0] / exact.objectives[0] - 1.0 if exact.objectives[0] else 0.0,
                     "lex_optimal": tuple(obj) <= tuple(exact.objectives)}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--synthetic", type=int, default=40, help="held-out synthetic DAGs (|V|=30)")
    ap.add_argument("--seed", type=int, default=777, help="synthetic seed (training used 0)")
    ap.add_argument("--models", default="mobilenet,xception,mobilenetv2,resnet50,efficientnetb0,inceptionv3,densenet121")
    ap.add_argument("--stages", default="4,5,6")
    ap.add_argument("--samples", type=int, default=8, help="best-of-N sampled plans (0: greedy only)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="exact solve limit per phase (s)")
    ap.add_argument("--out", default=str(RESULTS / "pointer_net_gap.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ks = [int(k) for k in args.stages.split(",")]
    scheds = {"greedy": load_default_scheduler(SchedulerConfig(samples=0))}
    if args.samples > 0:
        scheds[f"best_of_{args.samples}"] = load_default_scheduler(SchedulerConfig(samples=args.samples))
    ilp = IlpConfig(solver="cpsat", time_limit_s=args.time_limit)
    from tqdm import tqdm

    cases = [("synthetic", g, k) for g in generate_dags(args.synthetic, args.seed) for k in ks]
    cases += [("zoo", load_zoo_graph(m), k) for m in args.models.split(",") if m for k in ks]
    rows = []
    for kind, g, k in tqdm(cases, desc="exact vs pointer net", unit="case"):
        rows.append({"set": kind, **run_case(g, k, scheds, ilp)})

    summary: dict[str, dict] = {}
    for kind in ("synthetic", "zoo"):
        for k in ks:
            sel = [r for r in rows if r["set"] == kind and r["k"] == k]
            if not sel:
                continue
            summary[f"{kind}_K{k}"] = {
                name: {"peak_gap_mean": float(np.mean([r[name]["peak_gap"] for r in sel])),
                       "peak_gap_max": float(np.max([r[name]["peak_gap"] for r in sel])),
                       "lex_optimal_fraction": float(np.mean([r[name]["lex_optimal"] for r in sel])),
                       "seconds_mean": float(np.mean([r[name]["seconds"] for r in sel]))}
                for name in scheds
            } | {"exact_seconds_mean": float(np.mean([r["exact_seconds"] for r in sel])), "cases": len(sel)}
    meta = load_default_scheduler().meta
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "rows": rows,
                               "checkpoint_command": meta.get("command"), "args": vars(args)}, indent=1))
    _table(summary, scheds)
    _plot(summary, scheds, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


def _table(summary: dict, scheds: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="pointer net vs exact ILP (peak per-stage parameter memory)")
    for col in ["case", "n", "exact s"] + [f"{s} gap / lex-opt / s" for s in scheds]:
        t.add_column(col)
    for case, d in summary.items():
        t.add_row(case, str(d["cases"]), f"{d['exact_seconds_mean']:.2f}",
                  *[f"{100 * d[s]['peak_gap_mean']:.2f}% / {d[s]['lex_optimal_fraction']:.2f} / "
                    f"{d[s]['seconds_mean']:.2f}" for s in scheds])
    Console().print(t)


def _plot(summary: dict, scheds: dict, path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    cases = list(summary)
    x = np.arange(len(cases))
    w = 0.8 / len(scheds)
    fig, ax = plt.subplots(figsize=(max(6, len(cases) * 1.1), 4))
    for i, s in enumerate(scheds):
        ax.bar(x + i * w, [100 * summary[c][s]["peak_gap_mean"] for c in cases], w, label=s)
    ax.set_xticks(x + w * (len(scheds) - 1) / 2, cases, rotation=30, ha="right")
    ax.set_ylabel("peak-memory gap to exact optimum (%)")
    ax.set_title("Pointer-net pre-scheduler: RL-only gap")
    ax.legend()
    save_figure(fig, path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
