"""`hiertune pipeline`: split a TFLite model by a plan and stream inputs through one Ray actor per stage.

    hiertune pipeline --model m.tflite --plan plan.json --inputs 100 [--device cpu|edgetpu]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True,
                        help="the whole model: an int8 .tflite file, or a zoo name (bench/models/, runs/zoo/)")
    parser.add_argument("--plan", required=True, help="JSON plan: operator node -> stage (from `hiertune partition`)")
    parser.add_argument("--inputs", type=int, default=50, help="number of random inputs to stream (default 50)")
    parser.add_argument("--device", choices=["cpu", "edgetpu"], default="cpu",
                        help="run stages on CPU actors, or on actors holding an `edgetpu` with its delegate")
    parser.add_argument("--threads", type=int, default=1, help="interpreter threads per stage (default 1)")
    parser.add_argument("--out-dir", default=None, help="where the stage models go (default runs/pipeline/<model>)")
    parser.add_argument("--json", default=None, help="write the measurements here (default <out-dir>/pipeline.json)")
    parser.add_argument("--check", action="store_true", help="compare every output with the unsplit model (bit-exact)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds an input may take through the pipe")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm

    from hiertune.commands.common import check_outputs
    from hiertune.errors import HiertuneError
    from hiertune.platform.pipeline import PipelineConfig, random_inputs, run_pipeline, run_whole_model
    from hiertune.platform.ray_runtime import init_ray
    from hiertune.solvers.tflite_segment import load_plan, segment_tflite

    if args.inputs < 1:
        raise HiertuneError(f"--inputs {args.inputs}: stream at least one input")
    check_outputs(args, "json")
    remote_cluster = bool(os.environ.get("RAY_ADDRESS"))
    if args.device == "edgetpu" and not remote_cluster:
        from hiertune.platform.edgetpu import require_edgetpu_runtime

        require_edgetpu_runtime()  # before splitting or starting Ray: one clear error
    model = Path(args.model)
    if model.suffix != ".tflite" and not model.exists():
        from hiertune.solvers.zoo import zoo_tflite_path

        model = zoo_tflite_path(args.model)
    out_dir = Path(args.out_dir or f"runs/pipeline/{model.stem}")
    plan = load_plan(args.plan)
    manifest = segment_tflite(model, plan, out_dir)
    console = Console()
    console.print(f"split {model} into {manifest.num_stages} stages under {out_dir}")
    feeds = random_inputs(manifest, args.inputs, seed=args.seed)
    config = PipelineConfig(device=args.device, num_threads=args.threads, item_timeout_s=args.timeout,
                            probe_on_driver=not remote_cluster)  # on a cluster each stage host probes
    init_ray()
    with tqdm(total=args.inputs, desc="pipeline", unit="input") as bar:
        result = run_pipeline(manifest, out_dir, feeds, config, on_result=lambda i, item, actors: bar.update())
    summary = {"model": str(model), "plan": str(args.plan), "device": args.device, **result.summary()}
    if args.check:
        exact = 0
        for feed, out in zip(feeds, result.outputs):
            whole = run_whole_model(model, [feed[t.index] for t in manifest.model_inputs], num_threads=args.threads)
            exact += all(np.array_equal(w, out[t.index]) for w, t in zip(whole, manifest.model_outputs))
        summary["bit_exact_outputs"] = exact
    table = Table(title=f"{model.stem}: {manifest.num_stages}-stage pipeline on {args.device}")
    for col in ("stage", "ops", "param MB", "mean ms", "p50 ms", "max ms"):
        table.add_column(col, justify="right")
    for s in summary["stages"]:
        table.add_row(str(s["stage"]), str(s["ops"]), f"{s['param_bytes'] / 1e6:.2f}",
                      f"{s['mean_ms']:.2f}", f"{s['p50_ms']:.2f}", f"{s['max_ms']:.2f}")
    console.print(table)
    console.print(f"end-to-end mean {summary['e2e_mean_ms']:.2f} ms, p50 {summary['e2e_p50_ms']:.2f} ms; "
                  f"throughput {summary['throughput_per_s']:.1f} inputs/s over {args.inputs} inputs")
    if args.check:
        console.print(f"bit-exact vs the unsplit model: {summary['bit_exact_outputs']}/{args.inputs}")
    json_path = Path(args.json or out_dir / "pipeline.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(summary, indent=1))
    console.print(f"wrote {json_path}")
    if args.check and summary["bit_exact_outputs"] != args.inputs:
        return 1
    return 0
