"""A tuned model out: the whole Relax model built with tuning records through MetaSchedule's database.

The records go first into a MetaSchedule `JSONDatabase` folder and the model is compiled from that
folder (MetaScheduleApplyDatabase, then Relax's lowering), so a plain TVM user can rebuild it.
The shared library loads with `tvm.runtime.load_module` + `relax.VirtualMachine`, hiertune absent.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.platform.default_schedules import TUNER as DEFAULT_TUNER, dlight_rules
from hiertune.platform.records import RecordStore
from hiertune.workloads import Workload
from hiertune.workloads.models import Model
from hiertune.workloads.tvm_support import is_gpu_target, target_device

# Outputs match the source framework when max |tvm - ref| <= RTOL * max |ref|, per output. Relative
# only: random weights can give a model outputs of 1e-20 (MobileNetV2), where any absolute term
# would pass every output, right or wrong.
RTOL = 1e-3
# Target attributes that change the code a record's schedule produces; others (num-cores) may differ.
_TARGET_KEYS = ("kind", "mcpu", "arch")


@dataclass
class TaskStatus:
    name: str
    weight: int
    tuned: bool
    best_s: float | None
    tuner: str


@dataclass
class CheckResult:
    reference: str  # the framework compared against
    max_abs_error: float
    scale: float  # max |ref| of the output with the largest error relative to its scale
    ok: bool

    @property
    def tolerance(self) -> float:
        return RTOL * self.scale


def target_signature(target_json: Any) -> dict[str, str]:
    """The attributes of a target (tvm Target or its exported dict) a schedule depends on."""
    data = target_json.export() if hasattr(target_json, "export") else dict(target_json)
    return {key: str(data[key]) for key in _TARGET_KEYS if key in data}


def check_records_target(store: RecordStore, target: Any) -> None:
    """Refuse records tuned for another target: their schedules would apply silently and be wrong or slow."""
    wanted = target_signature(target)
    for measure in store.measures:
        if not measure.ok:
            continue
        found = target_signature(measure.record[2])
        if any(found.get(k) != v for k, v in wanted.items()):
            raise HiertuneError(
                f"--records {store.path} were tuned for target {found}, not {wanted}; tune again for this "
                "target or pass the one they were tuned for with --target"
            )


def write_json_database(store: RecordStore, folder: Path) -> Any:
    """Every successful measurement of `store` as a MetaSchedule JSONDatabase folder (replaced if present)."""
    from tvm.s_tir import meta_schedule as ms

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    database = ms.database.JSONDatabase(work_dir=str(folder))
    memory = store.to_database()
    for record in memory.get_all_tuning_records():
        database.commit_workload(record.workload.mod)
        database.commit_tuning_record(record)
    return database


def task_status(workload: Workload, database: Any, store: RecordStore, target: Any) -> list[TaskStatus]:
    """Which tasks run a tuned schedule; the rest run TVM's default (measured, where its record is
    the task's best, `tuner` "default"; else unmeasured)."""
    status = []
    for task in workload.tasks:
        recorded = database.query_ir_module(task.mod, target, task.name) is not None
        best = store.best(task.name) if task.name in store.workloads else None
        found = recorded and best is not None
        status.append(TaskStatus(task.name, task.weight, found and best.tuner != DEFAULT_TUNER,
                                 best.mean_s if found else None, best.tuner if found else ""))
    return status


def build_tuned(model: Model, database: Any, target: Any) -> Any:
    """The model's VM executable with the database's schedules applied (`schedule_tuned`).

    `compile_relax` would fuse a second time first, and on TVM 0.27 CPU its result ran as slowly
    as the untuned model, so its steps are spelled out here.
    """
    import tvm
    from tvm import relax

    scheduled = schedule_tuned(model, database, target)
    with target, tvm.transform.PassContext(opt_level=3):
        return relax.build(scheduled, target=target, relax_pipeline=tvm.transform.Sequential(_lowering(target)))


def schedule_tuned(model: Model, database: Any, target: Any) -> Any:
    """The fused module (the one tasks were extracted from) with the database's schedules applied,
    ready for lowering. CPU: the weight re-layouts those schedules chose (`RewriteLayout`) are split
    out of the kernels and folded into the constants, so they run once here, not every inference.
    GPU: tasks without records get DLight's default schedules (they must be scheduled to run at all)."""
    import tvm
    from tvm import relax

    from hiertune.workloads.networks import fuse_for_tasks

    with target, database, tvm.transform.PassContext(opt_level=3):
        scheduled = relax.transform.MetaScheduleApplyDatabase()(fuse_for_tasks(model.relax_mod, target))
        if is_gpu_target(target):
            from tvm.s_tir import dlight as dl

            return dl.ApplyDefaultSchedule(*dlight_rules())(scheduled)
        return tvm.transform.Sequential([relax.transform.SplitLayoutRewritePreproc(),
                                         relax.transform.FoldConstant()])(scheduled)


def _lowering(target: Any) -> list[Any]:
    """Relax's dataflow lowering and finalisation for the target (no legalisation or fusion: done)."""
    from tvm.relax import pipeline

    try:
        return pipeline.dataflow_lower_passes(target) + pipeline.finalize_passes(target)
    except AttributeError:  # TVM 0.27's dispatcher misses the CPU backend's lists; they live here
        from tvm.relax.backend.cpu_generic import pipeline as cpu

        return cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target)


def build_untuned(model: Model, target: Any) -> Any:
    """The model through TVM's default Relax pipeline, no records: the reference a user starts from."""
    import tvm

    return tvm.compile(model.relax_mod, target=target)


def vm_outputs(result: Any) -> list[np.ndarray]:
    """A Relax VM's return value (one tensor or a nested tuple) as a flat list of numpy arrays."""
    if hasattr(result, "numpy"):
        return [result.numpy()]
    flat: list[np.ndarray] = []
    for item in result:
        flat += vm_outputs(item)
    return flat


def run_vm(executable_or_module: Any, arrays: list[np.ndarray], target: Any) -> list[np.ndarray]:
    import tvm
    from tvm import relax

    dev = target_device(target)
    vm = relax.VirtualMachine(executable_or_module, dev)
    return vm_outputs(vm["main"](*[tvm.runtime.tensor(a, dev) for a in arrays]))


def check_outputs(model: Model, executable: Any, target: Any, seed: int = 0) -> CheckResult:
    """The compiled model against the source framework on random inputs, within RTOL/ATOL."""
    arrays = model.random_inputs(seed)
    reference, expected = model.reference(arrays)
    actual = run_vm(executable, arrays, target)
    if len(actual) != len(expected):
        raise HiertuneError(f"model {model.name}: TVM returned {len(actual)} outputs, {reference} {len(expected)}")
    worst = CheckResult(reference, 0.0, 0.0, True)
    for got, want in zip(actual, expected):
        want = np.asarray(want, dtype=np.float64)
        error = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        if relative_error(error, scale) >= relative_error(worst.max_abs_error, worst.scale):
            worst = CheckResult(reference, error, scale, True)
    return replace(worst, ok=worst.max_abs_error <= worst.tolerance)


def relative_error(error: float, scale: float) -> float:
    """An output's error over its scale (an all-zero reference allows no error at all)."""
    return error / scale if scale else (math.inf if error else 0.0)


def compile_records(model: Model, workload: Workload, store: RecordStore, target: Any, out: Path,
                    folder: Path) -> list[TaskStatus]:
    """Records -> JSONDatabase folder -> tuned shared library at `out`; returns which tasks ran tuned."""
    check_records_target(store, target)
    database = write_json_database(store, folder)
    status = task_status(workload, database, store, target)
    build_tuned(model, database, target).export_library(str(out))
    return status


def default_database_folder(out: Path) -> Path:
    return out.with_name(out.stem + "_database")
