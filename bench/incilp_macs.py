"""The slowest stage's compute (MACs) of partition plans against libcoral's split, per objective order.

For each model file (.tflite / .onnx; `--hf` exports Hugging Face models with random weights to
ONNX under runs/onnx/ on first use) and each K: libcoral's parameter-count split (the Edge TPU
compiler's), the exact whole-graph plan and the Inc-ILP plan (libcoral start) in every objective
order of `--orders`. Reports the paper's three objectives, each stage's MACs and the ratio
libcoral max-stage MACs / plan max-stage MACs (> 1: the plan's slowest stage computes less).

    python bench/incilp_macs.py [--models bench/models/mobilenetv2.tflite]
                                [--hf resnet-50,vit-base:4,bert-base-uncased:4] [--stages 2,3,4]
                                [--orders "peak,off-cache,comm;peak,off-cache,comm,macs;peak,off-cache,macs,comm"]

Writes bench/results/incilp_macs.json and .png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from summary_stats import geomean  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ONNX_DIR = ROOT / "runs" / "onnx"
DEFAULT_ORDERS = "peak,off-cache,comm;peak,off-cache,comm,macs;peak,off-cache,macs,comm"


def export_hf(spec: str) -> Path:
    """`name[:layers]` from hiertune's Hugging Face table as ONNX (random weights, batch 1)."""
    import torch

    from hiertune.workloads.models import hf_torch_model

    name, _, layers = spec.partition(":")
    module, example, label, _ = hf_torch_model(name, layers=int(layers) if layers else None)
    path = ONNX_DIR / f"{label}.onnx"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(module, (example,), str(path), dynamo=False, opset_version=17)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(ROOT / "bench" / "models" / "mobilenetv2.tflite"),
                        help="comma-separated .tflite / .onnx files")
    parser.add_argument("--hf", default="", help="comma-separated hf models as name[:layers], exported to ONNX")
    parser.add_argument("--stages", default="2,3,4")
    parser.add_argument("--orders", default=DEFAULT_ORDERS, help="';'-separated objective orders")
    parser.add_argument("--gamma", type=float, default=10)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--out", default=str(RESULTS / "incilp_macs.json"))
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm

    from hiertune.solvers.baselines import libcoral_partition
    from hiertune.solvers.graph_source import load_graph
    from hiertune.solvers.ilp import IlpConfig, check_objectives, evaluate_partition, solve_partition, stage_macs
    from hiertune.solvers.incilp import IncIlpConfig, inc_ilp

    paths = [Path(m) for m in args.models.split(",") if m.strip()]
    paths += [export_hf(s.strip()) for s in args.hf.split(",") if s.strip()]
    orders = [check_objectives(o.split(",")) for o in args.orders.split(";") if o.strip()]
    ks = [int(k) for k in args.stages.split(",")]
    cases = []
    for path in paths:
        graph = load_graph(path)
        for k in tqdm(ks, desc=graph.name, unit="K"):
            case = {"model": graph.name, "file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
                    "nodes": graph.num_nodes, "total_macs": graph.total_macs, "stages": k, "plans": {}}
            plans = {"libcoral": (libcoral_partition(graph, k), 0.0, True)}
            for order in orders:
                ilp = IlpConfig(solver="cpsat", objectives=order, time_limit_s=args.time_limit)
                t0 = time.perf_counter()
                exact = solve_partition(graph, k, ilp)
                plans[f"exact@{','.join(order)}"] = (exact.stages, time.perf_counter() - t0, exact.optimal)
                t0 = time.perf_counter()
                inc = inc_ilp(graph, k, IncIlpConfig(gamma=args.gamma, initial="libcoral", ilp=ilp))
                plans[f"incilp@{','.join(order)}"] = (inc.stages, time.perf_counter() - t0, inc.optimal)
            base = max(stage_macs(graph, plans["libcoral"][0], k))
            for label, (stages, seconds, optimal) in plans.items():
                peak, off, comm = evaluate_partition(graph, stages, k, IlpConfig().cache_bytes)
                macs = stage_macs(graph, stages, k)
                case["plans"][label] = {"peak_param_bytes": peak, "off_cache_bytes": off, "max_comm_bytes": comm,
                                        "stage_macs": macs, "max_stage_macs": max(macs),
                                        "max_stage_macs_libcoral_over": base / max(max(macs), 1),
                                        "seconds": seconds, "optimal": optimal}
            cases.append(case)

    labels = list(cases[0]["plans"]) if cases else []

    summary = {label: geomean([c["plans"][label]["max_stage_macs_libcoral_over"] for c in cases]) for label in labels}
    result = {"benchmark": "incilp_macs", "gamma": args.gamma, "orders": [",".join(o) for o in orders],
              "command": "python " + " ".join(sys.argv), "geomean_max_stage_macs_libcoral_over": summary, "cases": cases}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))

    console = Console(width=170)
    table = Table(title=f"slowest stage's MACs: libcoral vs exact and Inc-ILP (gamma={args.gamma:g}) plans per objective order")
    for col in ("model", "K", "plan", "peak MB", "off-cache MB", "max comm KB", "stage MMACs", "libcoral/plan"):
        table.add_column(col, justify="left" if col in ("plan", "stage MMACs") else "right")
    for c in cases:
        for label, p in c["plans"].items():
            table.add_row(c["model"], str(c["stages"]), label, f"{p['peak_param_bytes'] / 1e6:.2f}",
                          f"{p['off_cache_bytes'] / 1e6:.2f}", f"{p['max_comm_bytes'] / 1e3:.1f}",
                          " ".join(f"{m / 1e6:.1f}" for m in p["stage_macs"]), f"{p['max_stage_macs_libcoral_over']:.2f}")
    console.print(table)
    for label, ratio in summary.items():
        console.print(f"{label}: geomean libcoral / plan max-stage MACs {ratio:.3f}")
    console.print(f"wrote {out}")
    plot(cases, labels, out.with_suffix(".png"))


def plot(cases: list[dict], labels: list[str], path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    x = np.arange(len(cases))
    w = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(max(8, len(cases) * 0.25 * len(labels)), 4.5))
    for j, label in enumerate(labels):
        ax.bar(x + (j - (len(labels) - 1) / 2) * w, [c["plans"][label]["max_stage_macs_libcoral_over"] for c in cases],
               w, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylabel("max-stage MACs\nlibcoral / plan")
    ax.set_xticks(x, [f"{c['model']}\nK={c['stages']}" for c in cases], fontsize=7)
    ax.legend(fontsize=7)
    ax.set_title("the slowest stage's compute against libcoral's split (> 1: plan better)")
    save_figure(fig, path, dpi=120)


if __name__ == "__main__":
    main()
