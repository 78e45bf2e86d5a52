"""Inc-ILP plans vs the libcoral (Edge TPU compiler) split, deployed and measured as pipelines.

For each zoo model small enough to convert here and K = 2..4 stages: both plans are computed on
the model's TFLite operator graph, the model is split by each (bit-exactness checked on the
first input), and the same random inputs are streamed through K Ray stage actors; the two plans
run alternately, `--repeats` times, best throughput kept (other tenants' load swings timings).
Reported side by side with ratios: throughput, end-to-end latency, per-stage parameter bytes,
peak stage parameters, off-cache parameters (8 MB Edge TPU cache) and the largest cut tensor.

    python bench/pipeline_plans.py [--models mobilenetv2,efficientnetb0,densenet121,inceptionv3]
                                   [--stages 2,3,4] [--inputs 40] [--repeats 2] [--gamma 10]

Writes bench/results/pipeline_plans.json and .png. The .tflite files come from
bench/zoo/make_zoo.py (runs/zoo/, or bench/models/ for the committed ones).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


DEFAULT_MODELS = "mobilenetv2,efficientnetb0,densenet121,inceptionv3"
RESULTS = ROOT / "bench" / "results"


def split_and_check(model: Path, graph, stages: list[int], out: Path) -> dict:
    """Split by `stages`, check bit-exactness on one random input, return the manifest."""
    from hiertune.platform.pipeline import random_inputs, run_sequential, run_whole_model
    from hiertune.solvers.tflite_segment import segment_tflite

    plan = {graph.nodes[v].name: s for v, s in enumerate(stages)}
    manifest = segment_tflite(model, plan, out)
    feed = random_inputs(manifest, 1, seed=1)[0]
    whole = run_whole_model(model, [feed[t.index] for t in manifest.model_inputs])
    split = run_sequential(manifest, out, feed)
    exact = all(np.array_equal(w, split[t.index]) for w, t in zip(whole, manifest.model_outputs))
    return {"manifest": manifest, "bit_exact": exact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--stages", default="2,3,4")
    parser.add_argument("--inputs", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gamma", type=float, default=10)
    parser.add_argument("--time-limit", type=float, default=120.0, help="ILP time limit per solve (s)")
    parser.add_argument("--out", default=str(RESULTS / "pipeline_plans.json"))
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm

    from hiertune.platform.pipeline import PipelineConfig, random_inputs, run_pipeline
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.solvers.baselines import libcoral_partition
    from hiertune.solvers.ilp import IlpConfig, evaluate_partition
    from hiertune.solvers.incilp import IncIlpConfig, inc_ilp
    from hiertune.solvers.zoo import tflite_graph_from_file, zoo_tflite_path

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    ks = [int(k) for k in args.stages.split(",")]
    init_ray(RayConfig(num_cpus=2))
    console = Console(width=170)
    work = Path(tempfile.mkdtemp(prefix="pipeline_plans_"))
    config = PipelineConfig(num_threads=1, item_timeout_s=120)
    cases = []
    single: dict[str, float] = {}
    bar = tqdm(total=len(models) * len(ks), desc="model x K", unit="case")
    for name in models:
        path = zoo_tflite_path(name, ROOT)
        graph = tflite_graph_from_file(path, name=name)
        # the unsplit model in one actor: what pipelining is measured against
        one = split_and_check(path, graph, [0] * graph.num_nodes, work / f"{name}_k1")
        one_feeds = random_inputs(one["manifest"], args.inputs, seed=2)
        single[name] = max(run_pipeline(one["manifest"], work / f"{name}_k1", one_feeds, config).throughput
                           for _ in range(args.repeats))
        for k in ks:
            t0 = time.perf_counter()
            inc = inc_ilp(graph, k, IncIlpConfig(gamma=args.gamma, ilp=IlpConfig(time_limit_s=args.time_limit)))
            inc_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            lib = libcoral_partition(graph, k)
            lib_s = time.perf_counter() - t0
            plans = {"incilp": inc.stages, "libcoral": lib}
            case = {"model": name, "stages": k, "nodes": graph.num_nodes, "single_stage_throughput_per_s": single[name],
                    "incilp_solve_s": inc_s, "libcoral_s": lib_s, "incilp_optimal_in_window": inc.optimal,
                    "incilp_initial": inc.initial_source, "incilp_window": inc.window_size, "plans": {}}
            segs = {}
            for label, stages in plans.items():
                out = work / f"{name}_k{k}_{label}"
                segs[label] = split_and_check(path, graph, stages, out)
                peak, off, comm = evaluate_partition(graph, stages, k, IlpConfig().cache_bytes)
                case["plans"][label] = {"objectives": {"peak_param_bytes": peak, "off_cache_bytes": off,
                                                       "max_comm_bytes": comm},
                                        "stage_param_bytes": [s.param_bytes for s in segs[label]["manifest"].segments],
                                        "bit_exact": segs[label]["bit_exact"], "runs": []}
            feeds = random_inputs(segs["incilp"]["manifest"], args.inputs, seed=2)
            for _ in range(args.repeats):
                for label in plans:
                    out = work / f"{name}_k{k}_{label}"
                    res = run_pipeline(segs[label]["manifest"], out, feeds, config)
                    case["plans"][label]["runs"].append(res.summary())
            for label in plans:
                runs = case["plans"][label]["runs"]
                best = max(runs, key=lambda r: r["throughput_per_s"])
                case["plans"][label]["throughput_per_s"] = best["throughput_per_s"]
                case["plans"][label]["e2e_p50_ms"] = min(r["e2e_p50_ms"] for r in runs)
                case["plans"][label]["stage_mean_ms"] = [s["mean_ms"] for s in best["stages"]]
                # the slowest stage bounds a pipeline's throughput when every stage has its own core
                case["plans"][label]["bottleneck_stage_ms"] = max(s["mean_ms"] for s in best["stages"])
            a, b = case["plans"]["incilp"], case["plans"]["libcoral"]
            case["ratios"] = {
                "throughput_incilp_over_libcoral": a["throughput_per_s"] / b["throughput_per_s"],
                "e2e_p50_libcoral_over_incilp": b["e2e_p50_ms"] / a["e2e_p50_ms"],
                "peak_param_libcoral_over_incilp": b["objectives"]["peak_param_bytes"] / max(a["objectives"]["peak_param_bytes"], 1),
                "max_comm_libcoral_over_incilp": b["objectives"]["max_comm_bytes"] / max(a["objectives"]["max_comm_bytes"], 1),
            }
            cases.append(case)
            bar.update()
    bar.close()

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

    summary = {
        "geomean_throughput_ratio": geomean([c["ratios"]["throughput_incilp_over_libcoral"] for c in cases]),
        "geomean_peak_param_ratio": geomean([c["ratios"]["peak_param_libcoral_over_incilp"] for c in cases]),
        "incilp_peak_le_libcoral_all": all(
            c["plans"]["incilp"]["objectives"]["peak_param_bytes"] <= c["plans"]["libcoral"]["objectives"]["peak_param_bytes"]
            for c in cases),
        "all_bit_exact": all(p["bit_exact"] for c in cases for p in c["plans"].values()),
    }
    result = {"benchmark": "pipeline_plans", "device": "cpu (LiteRT XNNPACK, 1 thread per stage, 2-core host)",
              "inputs": args.inputs, "repeats": args.repeats, "gamma": args.gamma,
              "command": "python " + " ".join(sys.argv), **summary, "cases": cases}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))

    table = Table(title="Inc-ILP vs libcoral plans, measured as CPU pipelines (ratios > 1: Inc-ILP better)")
    for col in ("model", "K", "thr K=1/s", "thr Inc-ILP/s", "thr libcoral/s", "thr ratio", "peak MB Inc-ILP", "peak MB libcoral",
                "peak ratio", "comm ratio", "exact"):
        table.add_column(col, justify="right")
    for c in cases:
        a, b, r = c["plans"]["incilp"], c["plans"]["libcoral"], c["ratios"]
        table.add_row(c["model"], str(c["stages"]), f"{c['single_stage_throughput_per_s']:.1f}", f"{a['throughput_per_s']:.1f}", f"{b['throughput_per_s']:.1f}",
                      f"{r['throughput_incilp_over_libcoral']:.2f}",
                      f"{a['objectives']['peak_param_bytes'] / 1e6:.2f}", f"{b['objectives']['peak_param_bytes'] / 1e6:.2f}",
                      f"{r['peak_param_libcoral_over_incilp']:.2f}", f"{r['max_comm_libcoral_over_incilp']:.2f}",
                      "yes" if a["bit_exact"] and b["bit_exact"] else "NO")
    console.print(table)
    console.print(f"geomean throughput ratio {summary['geomean_throughput_ratio']:.3f}, "
                  f"geomean peak-parameter ratio {summary['geomean_peak_param_ratio']:.3f}; wrote {out}")
    plot(cases, out.with_suffix(".png"))


def plot(cases: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{c['model']}\nK={c['stages']}" for c in cases]
    x = np.arange(len(cases))
    fig, axes = plt.subplots(2, 1, figsize=(max(8, len(cases) * 0.9), 7), sharex=True)
    axes[0].bar(x, [c["ratios"]["throughput_incilp_over_libcoral"] for c in cases], color="tab:blue")
    axes[0].set_ylabel("throughput ratio\nInc-ILP / libcoral")
    axes[1].bar(x, [c["ratios"]["peak_param_libcoral_over_incilp"] for c in cases], color="tab:orange")
    axes[1].set_ylabel("peak stage params\nlibcoral / Inc-ILP")
    for ax in axes:
        ax.axhline(1.0, color="k", lw=0.8)
    axes[1].set_xticks(x, labels, fontsize=7)
    fig.suptitle("Inc-ILP vs libcoral pipeline plans (CPU stage actors)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
