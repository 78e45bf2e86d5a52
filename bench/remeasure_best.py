"""Re-time the best schedule of each tuner side by side, in one process, and GEMMs against numpy.

A tuning run's best latency is the minimum of many noisy measurements on a shared machine, taken
at different times for the two tuners. Here the winners are compiled again (MetaSchedule's
database path, as `hiertune apply` does) and timed in alternation, round after round, with the
same thread count, so load swings hit all of them alike: the medians over the rounds give a
ratio that selection noise does not inflate. For GEMM tasks numpy's sgemm (np.matmul float32)
joins each round under the same thread limit (threadpoolctl). Start it in a process whose
environment has OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (they pin an older kernel); the
kernel threadpoolctl sees is in the output. Prints one JSON object.

    python bench/remeasure_best.py --threads 1 \
        --spec '{"GMM-L": {"harl": "runs/l_harl.jsonl", "metaschedule": "runs/l_ms.jsonl"}}'

A key "net:<network>" (e.g. "net:tiny-convnet") re-times the whole network end to end instead.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

MIN_REPEAT_S = 0.02  # each timing runs at least this long (tiny kernels need many calls)


def _timed(call: Callable[[], None]) -> float:
    """Mean seconds per call over at least MIN_REPEAT_S of back-to-back calls."""
    n, total = 0, 0.0
    start = time.perf_counter()
    while total < MIN_REPEAT_S:
        call()
        n += 1
        total = time.perf_counter() - start
    return total / n


def _order(labels: list[str], round_index: int) -> list[str]:
    """Contenders in turn, the order reversed every other round (no one always goes first)."""
    return labels if round_index % 2 == 0 else labels[::-1]


def _stats(times: list[float], flops: float) -> dict[str, float]:
    ordered = sorted(times)
    median = ordered[len(ordered) // 2]
    return {"median_s": median, "best_s": ordered[0], "gflops_median": flops / median / 1e9,
            "gflops_best": flops / ordered[0] / 1e9}


def remeasure(task: str, paths: dict[str, str], threads: int, rounds: int) -> dict[str, Any]:
    """Compile each records file's best for `task`, time them (and numpy for GEMMs) in alternation."""
    import numpy as np
    import tvm
    from threadpoolctl import threadpool_limits
    from tvm.s_tir import meta_schedule as ms

    from hiertune.workloads import estimate_flops
    from hiertune.platform.apply import _random_args
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=threads)
    dev = tvm.cpu()
    contenders: dict[str, Callable[[], None]] = {}
    out: dict[str, Any] = {"task": task}
    arrays: list[np.ndarray] = []
    reference = None
    for label, path in paths.items():
        store = RecordStore(path, writer=False)
        mod = store.workload_mod(task)
        if not arrays:
            out["flops"] = estimate_flops(mod)
            arrays = _random_args(mod["main"], np.random.default_rng(0))
            if task.startswith("GMM"):
                reference = np.matmul(arrays[0].astype(np.float64), arrays[1].astype(np.float64))
        sch = ms.tir_integration.compile_tir(store.to_database(), mod, target)
        if sch is None:
            out[label] = {"error": f"{path}: no record for {task}"}
            continue
        fn = tvm.compile(sch.mod, target=target)["main"]
        tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
        fn(*tensors)
        result = tensors[-1].numpy()
        if reference is None:  # not a GEMM: the first contender's output is the reference
            reference = result.astype(np.float64)
        best = store.best(task)
        out[label] = {"records_best_s": best.mean_s if best else None,
                      "max_abs_error": float(np.max(np.abs(result.astype(np.float64) - reference)))}
        contenders[label] = lambda fn=fn, tensors=tensors: fn(*tensors)
    if task.startswith("GMM"):
        a, b = (np.ascontiguousarray(x[0] if x.ndim == 3 else x) for x in arrays[:2])
        contenders["numpy"] = lambda: np.matmul(a, b)
    times: dict[str, list[float]] = {label: [] for label in contenders}
    with threadpool_limits(limits=threads):
        for call in contenders.values():
            call()  # warm up
        for r in range(rounds):
            for label in _order(list(contenders), r):
                times[label].append(_timed(contenders[label]))
    for label, series in times.items():
        out.setdefault(label, {}).update(_stats(series, out["flops"]))
    if "harl" in times and "metaschedule" in times:
        out["latency_ratio_median"] = out["harl"]["median_s"] / out["metaschedule"]["median_s"]
        out["latency_ratio_best"] = out["harl"]["best_s"] / out["metaschedule"]["best_s"]
    if "numpy" in times:
        for label in paths:
            if "median_s" in out.get(label, {}):
                out[label]["vs_numpy_median"] = out["numpy"]["median_s"] / out[label]["median_s"]
                out[label]["vs_numpy_best"] = out["numpy"]["best_s"] / out[label]["best_s"]
    return out


def remeasure_network(name: str, paths: dict[str, str], threads: int, rounds: int) -> dict[str, Any]:
    """The whole network end to end: compiled with each records file (MetaSchedule's
    compile_relax, untuned tasks by its DLight fallback), run on the Relax VM in alternation."""
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from hiertune.workloads.networks import relax_module
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=threads)
    dev = tvm.cpu()
    mod = relax_module(name, target)
    shapes = [[int(x) for x in p.ty.shape] for p in mod["main"].params]  # relax Var: its TensorType
    rng = np.random.default_rng(0)
    inputs = [tvm.runtime.tensor(rng.standard_normal(shape).astype("float32"), dev) for shape in shapes]
    out: dict[str, Any] = {"network": name}
    contenders: dict[str, Callable[[], None]] = {}
    reference = None
    for label, path in paths.items():
        executable = ms.relax_integration.compile_relax(RecordStore(path, writer=False).to_database(), mod, target, params=None)
        vm = relax.VirtualMachine(executable, dev)
        result = vm["main"](*inputs)
        result = (result if hasattr(result, "numpy") else result[0]).numpy()  # one output, or a tuple
        reference = result if reference is None else reference
        out[label] = {"max_abs_diff_vs_first": float(np.max(np.abs(result - reference)))}
        contenders[label] = lambda vm=vm: vm["main"](*inputs)
    times: dict[str, list[float]] = {label: [] for label in contenders}
    for call in contenders.values():
        call()
    for r in range(rounds):
        for label in _order(list(contenders), r):
            times[label].append(_timed(contenders[label]))
    for label, series in times.items():
        ordered = sorted(series)
        out[label].update({"median_s": ordered[len(ordered) // 2], "best_s": ordered[0]})
    if "harl" in times and "metaschedule" in times:
        out["latency_ratio_median"] = out["harl"]["median_s"] / out["metaschedule"]["median_s"]
        out["latency_ratio_best"] = out["harl"]["best_s"] / out["metaschedule"]["best_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help='JSON: {"TASK": {"label": "records.jsonl", ...}, ...}')
    parser.add_argument("--threads", type=int, default=1, help="TVM_NUM_THREADS and the BLAS thread limit")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # before TVM starts its thread pool

    from threadpoolctl import threadpool_info, threadpool_limits

    from hiertune.workloads.tvm_support import prepare_tvm

    prepare_tvm()
    with threadpool_limits(limits=args.threads):
        blas = [{k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads")} for p in threadpool_info()]
    result: dict[str, Any] = {
        "threads": args.threads, "rounds": args.rounds, "min_repeat_s": MIN_REPEAT_S, "blas": blas,
        "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TVM_NUM_THREADS")},
        "load_average_at_start": os.getloadavg(), "tasks": {},
    }
    for task, paths in json.loads(args.spec).items():
        if task.startswith("net:"):
            result["network"] = remeasure_network(task.removeprefix("net:"), paths, args.threads, args.rounds)
        else:
            result["tasks"][task] = remeasure(task, paths, args.threads, args.rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
