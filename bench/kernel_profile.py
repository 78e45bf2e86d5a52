"""Where a tuned TVM model loses to ONNX Runtime: time per kernel category, side by side.

TVM: the tuned model (records applied as `hiertune compile` does) run in the Relax VM with an
instrument that times every packed call; ONNX Runtime: its own profiler on the same ONNX file
(the one `hiertune benchmark` exported). Both at one thread, random inputs, the median of each
kernel's time over the runs (the instrument's Python callback adds a few microseconds per call), summed per category (conv, matmul/dense, norm, softmax, pooling,
elementwise, layout). ORT fuses differently (Conv+Add+Relu is one node, MatMul+Add one Gemm-like
FusedMatMul) and runs convolutions in a blocked NCHWc layout, so the categories are by the main operator of each kernel, not one-to-one nodes.

    python bench/kernel_profile.py --model hf:resnet-50 --library runs/models_e2e/quick/resnet-50_harl.so \\
        --onnx runs/models_e2e/quick/hf-resnet-50.onnx --json bench/results/kernel_profile_resnet-50.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# first matching keyword wins, so "fused_conv2d_add_relu" is conv and "layer_norm" is norm
CATEGORIES = [
    ("conv", ("conv",)),
    ("matmul/dense", ("matmul", "dense", "gemm", "batch_matmul", "linear")),
    ("norm", ("layer_norm", "layernorm", "batch_norm", "batchnorm", "normalization", "group_norm")),
    ("softmax", ("softmax",)),
    ("pooling", ("pool", "mean", "reducemean", "adaptive_avg")),
    ("layout", ("reshape", "transpose", "concat", "split", "take", "gather", "squeeze", "expand",
                "broadcast", "strided_slice", "slice", "shape", "cast", "where", "full", "flatten")),
]


def category(name: str) -> str:
    """The kernel's category from its name (TVM's fused function or ORT's op type)."""
    if name.startswith("vm.builtin"):
        return "vm builtins"  # the Relax VM's allocations and shape checks, no ORT counterpart
    if name.startswith("ReorderInput") or name.startswith("ReorderOutput"):
        return "layout"  # ORT's NCHW <-> NCHWc conversions around its blocked convolutions
    words = re.sub(r"\d+", "", name.lower()).removeprefix("fused_")
    hits = [(words.find(k), cat) for cat, keys in CATEGORIES for k in keys if k in words]
    return min(hits)[1] if hits else "elementwise"


def tvm_profile(executable: Any, arrays: list[np.ndarray], runs: int) -> dict[str, float]:
    """Median seconds per kernel symbol over `runs` calls of main (the instrument times each call)."""
    import tvm
    from tvm import relax

    dev = tvm.cpu()
    vm = relax.VirtualMachine(executable, dev)
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    samples: dict[str, list[float]] = defaultdict(list)
    per_run: dict[str, float] = defaultdict(float)
    started: dict[str, float] = {}

    def instrument(func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
        if before:
            started[symbol] = time.perf_counter()
        else:
            per_run[symbol] += time.perf_counter() - started.pop(symbol, time.perf_counter())
        return 0  # VMInstrumentReturnKind.NO_OP: run the call as usual

    vm["main"](*tensors)  # warm-up, outside the instrument
    vm.set_instrument(tvm.runtime.convert(instrument))
    for _ in range(runs):
        per_run.clear()
        vm["main"](*tensors)
        for symbol, seconds in per_run.items():
            samples[symbol].append(seconds)
    return {symbol: float(np.median(s)) for symbol, s in samples.items()}


def ort_profile(onnx_path: Path, arrays: list[np.ndarray], runs: int, work: Path) -> dict[str, float]:
    """Median seconds per ORT node over `runs` runs (ORT's profiler), keyed 'op_type:node'."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "ort_profile")
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    session.run(None, feeds)  # warm-up
    for _ in range(runs):
        session.run(None, feeds)
    trace_file = Path(session.end_profiling())
    trace = json.loads(trace_file.read_text())
    trace_file.unlink()  # ORT's raw trace: large, and summarised below
    samples: dict[str, list[float]] = defaultdict(list)
    for event in trace:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            op = event.get("args", {}).get("op_name", "?")
            samples[f"{op}:{event['name'].removesuffix('_kernel_time')}"].append(event["dur"] * 1e-6)
    # the warm-up run is in the trace too: drop each node's first sample
    return {key: float(np.median(s[1:] or s)) for key, s in samples.items()}


def by_category(kernels: dict[str, float], name_of: Any = lambda k: k) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for key, seconds in kernels.items():
        out[category(name_of(key))] += seconds
    return dict(out)


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from hiertune.cli import build_parser
    from hiertune.commands.common import model_from_args
    from hiertune.platform.compile_model import build_tuned
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", type=Path, help="the tuned model's records (JSONL), compiled here")
    source.add_argument("--library", type=Path, help="the tuned model as `hiertune compile` wrote it (.so)")
    parser.add_argument("--onnx", type=Path, required=True, help="the model as ONNX (hiertune benchmark's export)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write the per-category and per-kernel times here")
    parser.add_argument("--target", default='{"kind": "llvm", "num-cores": 1}')
    args, model_argv = parser.parse_known_args()
    model_args = build_parser().parse_args(["compile", *model_argv, "--records", "x", "--out", "x.so"])
    model = model_from_args(model_args)
    target = make_target(args.target)
    arrays = model.random_inputs()
    from hiertune.platform.e2e_bench import set_threads

    set_threads(1)
    if args.library:
        import tvm

        executable = tvm.runtime.load_module(str(args.library))
    else:
        executable = build_tuned(model, RecordStore(args.records, writer=False).to_database(), target)
    tvm_kernels = tvm_profile(executable, arrays, args.runs)
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        ort_kernels = ort_profile(args.onnx, arrays, args.runs, Path(work))
    tvm_cat = by_category(tvm_kernels)
    ort_cat = by_category(ort_kernels, lambda k: k.split(":")[0])
    table = Table(title=f"{model.name}: median ms per run by kernel category, 1 thread")
    for column in ("category", "TVM tuned", "ONNX Runtime", "TVM / ORT"):
        table.add_column(column, justify="right" if column != "category" else "left")
    rows = []
    for cat in sorted(set(tvm_cat) | set(ort_cat), key=lambda c: -max(tvm_cat.get(c, 0), ort_cat.get(c, 0))):
        t, o = tvm_cat.get(cat, 0.0) * 1e3, ort_cat.get(cat, 0.0) * 1e3
        rows.append({"category": cat, "tvm_ms": round(t, 3), "ort_ms": round(o, 3),
                     "ratio": round(t / o, 2) if o > 0 else None})
        table.add_row(cat, f"{t:.3f}", f"{o:.3f}", f"{t / o:.2f}" if o > 0 else "-")
    table.add_row("total", f"{sum(tvm_cat.values()) * 1e3:.3f}", f"{sum(ort_cat.values()) * 1e3:.3f}", "")
    Console().print(table)
    if args.json:
        top = lambda kernels: sorted(({"kernel": k, "ms": round(v * 1e3, 4)} for k, v in kernels.items()),
                                     key=lambda r: -r["ms"])[:15]
        args.json.write_text(json.dumps({"model": model.name, "tuned": str(args.library or args.records), "runs": args.runs,
                                         "categories": rows, "tvm_top": top(tvm_kernels), "ort_top": top(ort_kernels),
                                         "command": " ".join(sys.argv)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
