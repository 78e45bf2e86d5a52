"""Inc-ILP plans vs the libcoral (Edge TPU compiler) split, deployed and measured as pipelines.

For each zoo model small enough to convert here and K = 2..4 stages: both plans are computed on
the model's TFLite operator graph, the model is split by each (bit-exactness checked on the
first input), and the same random inputs are streamed through K Ray stage actors; the two plans
run alternately, `--repeats` times, best throughput kept (other tenants' load swings timings).
Reported side by side with ratios: throughput, end-to-end latency, per-stage parameter bytes,
peak stage parameters, off-cache parameters (8 MB Edge TPU cache), the largest cut tensor and
the slowest stage's MACs. `--objectives` adds Inc-ILP variants solved in other lexicographic
orders (e.g. with the per-stage MACs objective), each from both initial plans.

    python bench/pipeline_plans.py [--models mobilenetv2,efficientnetb0,densenet121,inceptionv3]
                                   [--stages 2,3,4] [--inputs 40] [--repeats 2] [--gamma 10]
                                   [--objectives "peak,off-cache,comm;peak,off-cache,macs,comm"]

Writes bench/results/pipeline_plans.json and .png. The .tflite files come from
bench/zoo/make_zoo.py (runs/zoo/, or bench/models/ for the committed ones).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from summary_stats import geomean  # noqa: E402


# Inc-ILP variants per objective order: the default (pointer-net start when its checkpoint loads)
# and one warm-started from libcoral's own split, so the window can only improve on the baseline.
STARTS = {"incilp": "auto", "incilp_lc": "libcoral"}
PAPER_ORDER = "peak,off-cache,comm"


def variants(orders: list[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """label -> (initial plan, objective order); the paper's order keeps the plain labels."""
    return {(label if order == PAPER_ORDER else f"{label}@{order}"): (initial, tuple(order.split(",")))
            for order in orders for label, initial in STARTS.items()}

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
    parser.add_argument("--objectives", default=PAPER_ORDER,
                        help="';'-separated lexicographic orders, one Inc-ILP variant pair each (see hiertune partition --help)")
    parser.add_argument("--out", default=str(RESULTS / "pipeline_plans.json"))
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm

    from hiertune.platform.pipeline import PipelineConfig, random_inputs, run_pipeline
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.solvers.baselines import libcoral_partition
    from hiertune.solvers.ilp import IlpConfig, check_objectives, evaluate_partition, stage_macs
    from hiertune.platform.solver_actor import pointer_inc_ilp
    from hiertune.solvers.incilp import IncIlpConfig
    from hiertune.solvers.zoo import tflite_graph_from_file, zoo_tflite_path

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    ks = [int(k) for k in args.stages.split(",")]
    orders = [",".join(check_objectives(o.split(","))) for o in args.objectives.split(";") if o.strip()]
    plan_variants = variants(orders)
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
            case = {"model": name, "stages": k, "nodes": graph.num_nodes,
                    "single_stage_throughput_per_s": single[name], "plans": {}}
            plans: dict[str, list[int]] = {}
            for label, (initial, order) in plan_variants.items():
                t0 = time.perf_counter()
                inc = pointer_inc_ilp(graph, k, IncIlpConfig(gamma=args.gamma, initial=initial,
                                                     ilp=IlpConfig(time_limit_s=args.time_limit, objectives=order)))
                plans[label] = inc.stages
                case[label] = {"solve_s": time.perf_counter() - t0, "optimal_in_window": inc.optimal,
                               "initial": inc.initial_source, "window": inc.window_size,
                               "initial_objectives": list(inc.initial_objectives)}
            plans["libcoral"] = libcoral_partition(graph, k)
            segs = {}
            for label, stages in plans.items():
                out = work / f"{name}_k{k}_{label}"
                segs[label] = split_and_check(path, graph, stages, out)
                peak, off, comm = evaluate_partition(graph, stages, k, IlpConfig().cache_bytes)
                macs = stage_macs(graph, stages, k)
                case["plans"][label] = {"objectives": {"peak_param_bytes": peak, "off_cache_bytes": off,
                                                       "max_comm_bytes": comm, "max_stage_macs": max(macs)},
                                        "stage_macs": macs,
                                        "stage_param_bytes": [s.param_bytes for s in segs[label]["manifest"].segments],
                                        "bit_exact": segs[label]["bit_exact"], "runs": []}
            feeds = random_inputs(segs["libcoral"]["manifest"], args.inputs, seed=2)
            for _ in range(args.repeats):
                for label in plans:  # alternate the plans: load swings hit all of them alike
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
            b = case["plans"]["libcoral"]
            case["ratios"] = {}
            for label in plan_variants:
                a = case["plans"][label]
                case["ratios"][label] = {
                    "throughput_over_libcoral": a["throughput_per_s"] / b["throughput_per_s"],
                    "e2e_p50_libcoral_over": b["e2e_p50_ms"] / a["e2e_p50_ms"],
                    "peak_param_libcoral_over": b["objectives"]["peak_param_bytes"] / max(a["objectives"]["peak_param_bytes"], 1),
                    "max_comm_libcoral_over": b["objectives"]["max_comm_bytes"] / max(a["objectives"]["max_comm_bytes"], 1),
                    "max_stage_macs_libcoral_over": b["objectives"]["max_stage_macs"] / max(a["objectives"]["max_stage_macs"], 1),
                }
            cases.append(case)
            bar.update()
    bar.close()

    summary = {}
    for label in plan_variants:
        summary[label] = {
            "geomean_throughput_ratio": geomean([c["ratios"][label]["throughput_over_libcoral"] for c in cases]),
            "geomean_peak_param_ratio": geomean([c["ratios"][label]["peak_param_libcoral_over"] for c in cases]),
            "geomean_max_stage_macs_ratio": geomean([c["ratios"][label]["max_stage_macs_libcoral_over"] for c in cases]),
            "peak_le_libcoral_all": all(
                c["plans"][label]["objectives"]["peak_param_bytes"] <= c["plans"]["libcoral"]["objectives"]["peak_param_bytes"]
                for c in cases),
        }
    summary["all_bit_exact"] = all(p["bit_exact"] for c in cases for p in c["plans"].values())
    result = {"benchmark": "pipeline_plans", "device": "cpu (LiteRT XNNPACK, 1 thread per stage, 2-core host)",
              "inputs": args.inputs, "repeats": args.repeats, "gamma": args.gamma, "objective_orders": orders,
              "command": "python " + " ".join(sys.argv), **summary, "cases": cases}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))

    table = Table(title="Inc-ILP (gamma=%g) vs libcoral plans as CPU pipelines; ratios > 1: Inc-ILP better" % args.gamma)
    for col in ("model", "K", "plan", "thr/s", "thr ratio", "bottleneck ms", "max-stage MMACs", "MACs ratio",
                "peak MB", "max comm KB", "exact"):
        table.add_column(col, justify="left" if col == "plan" else "right")
    for c in cases:
        for label, p in c["plans"].items():
            r = c["ratios"].get(label)
            table.add_row(c["model"], str(c["stages"]), label, f"{p['throughput_per_s']:.1f}",
                          f"{r['throughput_over_libcoral']:.2f}" if r else "1", f"{p['bottleneck_stage_ms']:.1f}",
                          f"{p['objectives']['max_stage_macs'] / 1e6:.1f}",
                          f"{r['max_stage_macs_libcoral_over']:.2f}" if r else "1",
                          f"{p['objectives']['peak_param_bytes'] / 1e6:.2f}", f"{p['objectives']['max_comm_bytes'] / 1e3:.1f}",
                          "yes" if p["bit_exact"] else "NO")
    console.print(table)
    for label in plan_variants:
        sm = summary[label]
        console.print(f"{label}: geomean throughput ratio {sm['geomean_throughput_ratio']:.3f}, geomean peak-parameter "
                      f"ratio {sm['geomean_peak_param_ratio']:.3f}, geomean max-stage-MACs ratio "
                      f"{sm['geomean_max_stage_macs_ratio']:.3f}, peak <= libcoral everywhere: {sm['peak_le_libcoral_all']}")
    console.print(f"wrote {out}")
    plot(cases, list(plan_variants), out.with_suffix(".png"))


def plot(cases: list[dict], labels: list[str], path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    ticks = [f"{c['model']}\nK={c['stages']}" for c in cases]
    x = np.arange(len(cases))
    w = 0.8 / len(labels)
    fig, axes = plt.subplots(3, 1, figsize=(max(8, len(cases) * 0.3 * len(labels)), 9), sharex=True)
    for j, label in enumerate(labels):
        offset = (j - (len(labels) - 1) / 2) * w
        for ax, key in zip(axes, ("throughput_over_libcoral", "peak_param_libcoral_over", "max_stage_macs_libcoral_over")):
            ax.bar(x + offset, [c["ratios"][label][key] for c in cases], w, label=label)
    axes[0].set_ylabel("throughput ratio\nplan / libcoral")
    axes[1].set_ylabel("peak stage params\nlibcoral / plan")
    axes[2].set_ylabel("max-stage MACs\nlibcoral / plan")
    for ax in axes:
        ax.axhline(1.0, color="k", lw=0.8)
    axes[0].legend(fontsize=7)
    axes[2].set_xticks(x, ticks, fontsize=7)
    fig.suptitle("Inc-ILP vs libcoral pipeline plans (CPU stage actors)")
    save_figure(fig, path, dpi=120)


if __name__ == "__main__":
    main()
