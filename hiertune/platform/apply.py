"""Apply tuned records: compile a task with its best schedule (TVM's own database path) and check it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.platform.records import RecordStore
from hiertune.workloads.tvm_support import target_device

# A tuned task matches its reference when max |tuned - ref| <= APPLY_RTOL * max |ref|. Tighter than a
# model's check (compile_model.RTOL): one operator, no long chain of float32 roundings behind it.
APPLY_RTOL = 1e-4


@dataclass
class ApplyReport:
    task: str
    best_latency_s: float
    max_abs_error: float
    reference: str  # "numpy" or "untuned TVM build"
    ok: bool


def _random_args(func: Any, rng: np.random.Generator) -> list[np.ndarray]:
    from tvm.s_tir import meta_schedule as ms

    args = []
    for info in ms.arg_info.ArgInfo.from_prim_func(func):
        _, dtype, shape = info.as_json()
        args.append(rng.uniform(-1, 1, size=[int(x) for x in shape]).astype(str(dtype)))
    return args


def _run(rt_mod: Any, arrays: list[np.ndarray], target: Any) -> list[np.ndarray]:
    import tvm

    dev = target_device(target)
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    rt_mod["main"](*tensors)
    return [t.numpy() for t in tensors]


def numpy_reference(task: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    """numpy's answer for the GEMM family (batch_matmul_nkkm: Z[b] = X[b] @ Y[b])."""
    if task.startswith("GMM"):
        return np.matmul(arrays[0].astype(np.float64), arrays[1].astype(np.float64))
    return None


def apply_best(store: RecordStore, task: str, target: Any, seed: int = 0) -> ApplyReport:
    """Compile `task` with the records' best schedule via MetaSchedule's database, run, compare."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    best = store.best(task)
    if best is None:
        raise HiertuneError(f"{store.path} has no successful measurement for task {task!r}; tune it first")
    mod = store.workload_mod(task)
    database = store.to_database()
    sch = ms.tir_integration.compile_tir(database, mod, target)
    if sch is None:
        raise HiertuneError(f"MetaSchedule found no record for {task!r} in {store.path} for target {target}")
    tuned = tvm.compile(sch.mod, target=target)
    rng = np.random.default_rng(seed)
    arrays = _random_args(mod["main"], rng)
    outputs = _run(tuned, [a.copy() for a in arrays], target)
    expected = numpy_reference(task, arrays)
    reference = "numpy"
    if expected is None:
        reference = "untuned TVM build"
        expected = _run(tvm.compile(mod, target=target), [a.copy() for a in arrays], target)[-1]
    error = float(np.max(np.abs(outputs[-1].astype(np.float64) - expected)))
    scale = float(np.max(np.abs(expected))) or 1.0
    # Relative only, as the model check: an absolute term would pass any wrong output of a task
    # whose outputs are tiny (a softmax over many classes).
    return ApplyReport(task, best.mean_s, error, reference, error <= APPLY_RTOL * scale)
