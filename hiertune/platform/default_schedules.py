"""TVM's own schedule for a task, measured once beside the tuned ones, so a compiled model never
runs a kernel slower than TVM would give it untuned.

Why: for a task without records, `compile` falls back to TVM's default. On a GPU that default is
DLight's hand-written rules (a GEMV kernel for a batch-1 dense layer, a cross-thread reduction
for a softmax), and a short search can end above it: MetaScheduleApplyDatabase would still apply
the best record it has. Stored as an ordinary record (its trace replays through MetaSchedule's
database like any other), the default competes with the tuned schedules for the task's best, and
`compile` keeps whichever measured faster. On CPU the default is the loops as written, which any
tuned schedule beats, so `measure_defaults` only runs there when asked.
"""

from __future__ import annotations

from typing import Any

from hiertune.platform.records import MeasureRecord, RecordStore, trace_key, tuning_record_json
from hiertune.platform.runners import MeasureInput
from hiertune.workloads import Workload
from hiertune.workloads.tvm_support import is_gpu_target

TUNER = "default"  # the records' tuner field: not a tuner's trial, never counted in a budget


def dlight_rules() -> list[Any]:
    """DLight's GPU rules in TVM's own order (the CUDA pipeline's), first match wins."""
    from tvm.s_tir import dlight as dl

    return [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()]


def default_schedule(mod: Any, target: Any) -> Any:
    """The schedule TVM compiles `mod["main"]` with when it has no record: DLight's first matching
    rule on a GPU, the unscheduled loops on CPU. None where no rule applies."""
    from tvm import s_tir

    if not is_gpu_target(target):
        sch = s_tir.Schedule(mod)
        # MetaSchedule's databases skip a record whose trace is empty; looking up the root block
        # is a traced no-op that keeps "the loops as written" as a record.
        sch.get_sblock("root")
        return sch
    func = mod["main"]
    for rule in dlight_rules():
        with target:
            space = rule.apply(func, target, False)
        if space is not None:
            return space if isinstance(space, s_tir.Schedule) else space[0]
    return None


def measure_defaults(workload: Workload, target: Any, runner: Any, store: RecordStore) -> list[MeasureRecord]:
    """Measure each task's default schedule once (tasks already measured are skipped: resumable)."""
    store.expect_timing(runner.config.timing)
    done = {m.task for m in store.trials(tuner=TUNER)}
    todo = []
    for task in workload.tasks:
        sch = default_schedule(task.mod, target) if task.name not in done else None
        if sch is not None:
            store.add_workload(task.name, task.mod, task.weight)
            todo.append((task, sch, _record_json(task.mod, sch, target)))
    results = runner.measure([MeasureInput.from_schedule(sch) for _, sch, _ in todo]) if todo else []
    records = []
    for (task, sch, record), result in zip(todo, results):
        latencies = result.latencies_s if result.ok else None
        measured = MeasureRecord(task=task.name, key=trace_key(sch.trace), record=[record[0], latencies, *record[2:]],
                                 latencies_s=latencies, error=None if result.ok else (result.error or "failed"),
                                 build_s=result.build_s, run_s=result.run_s, tuner=TUNER)
        store.append(measured)
        records.append(measured)
    return records


def _record_json(mod: Any, sch: Any, target: Any) -> list[Any]:
    """The schedule as a `TuningRecord.as_json()` list (run_secs filled in after measuring)."""
    from tvm.s_tir import meta_schedule as ms

    record = ms.database.TuningRecord(sch.trace, ms.database.Workload(mod), None, target,
                                      ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
    return tuning_record_json(record)
