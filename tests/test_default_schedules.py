"""TVM's default schedule as a measured record: it replays through MetaSchedule's database, is
measured once per task, and `compile` reports it as the task's schedule where it is the best."""

from __future__ import annotations

from hiertune.workloads.tvm_support import make_target, prepare_tvm

prepare_tvm()

import tvm  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from hiertune.platform.apply import apply_best  # noqa: E402
from hiertune.platform.compile_model import task_status  # noqa: E402
from hiertune.platform.default_schedules import TUNER, default_schedule, measure_defaults  # noqa: E402
from hiertune.platform.records import MeasureRecord, RecordStore, trace_key, tuning_record_json  # noqa: E402
from hiertune.platform.runners import RunnerConfig, create_runner  # noqa: E402
from hiertune.workloads import get_workload  # noqa: E402
from hiertune.workloads.models import load_model, model_workload  # noqa: E402


def test_dlight_defaults_round_trip_through_a_records_file_on_cuda(tmp_path):
    """No GPU needed: each task's DLight schedule, stored as a JSON record (the convolutions' carry
    an IndexMap) and replayed by MetaSchedule from the reloaded file, is DLight's kernel."""
    target = make_target("cuda")
    workload = model_workload(load_model("tiny-convnet"), target)
    store = RecordStore(tmp_path / "defaults.jsonl")
    schedules = {}
    for task in workload.tasks:
        sch = schedules[task.name] = default_schedule(task.mod, target)
        assert sch is not None and len(sch.trace.insts) > 0  # a GPU kernel needs thread bindings
        record = ms.database.TuningRecord(sch.trace, ms.database.Workload(task.mod), [1e-5], target,
                                          ms.arg_info.ArgInfo.from_prim_func(task.mod["main"]))
        store.add_workload(task.name, task.mod, task.weight)
        store.append(MeasureRecord(task=task.name, key=trace_key(sch.trace), record=tuning_record_json(record),
                                   latencies_s=[1e-5], tuner=TUNER))
    assert any("transform_layout" in str(sch.trace).lower() for sch in schedules.values())
    database = RecordStore(tmp_path / "defaults.jsonl", writer=False).to_database()
    for task in workload.tasks:
        replayed = ms.tir_integration.compile_tir(database, task.mod, target)
        assert replayed is not None
        tvm.ir.assert_structural_equal(replayed.mod["main"].without_attr("tirx.is_scheduled"),
                                       schedules[task.name].mod["main"].without_attr("tirx.is_scheduled"))


def test_defaults_are_measured_once_and_compile_reports_the_default_where_it_is_best(tmp_path):
    target = make_target("llvm", num_cores=1)
    workload = get_workload("GMM-S")
    store = RecordStore(tmp_path / "gemm.jsonl")
    runner = create_runner(RunnerConfig(num_cpus=1), use_ray=False)  # no work_dir: it would set TMPDIR here
    try:
        first = measure_defaults(workload, target, runner, store)
        again = measure_defaults(workload, target, runner, store)
    finally:
        runner.close()
    assert [r.tuner for r in first] == [TUNER] and first[0].ok and again == []

    reloaded = RecordStore(tmp_path / "gemm.jsonl", writer=False)
    assert reloaded.trials(tuner="harl") == []  # not a tuner's trial: no budget counts it
    [status] = task_status(workload, reloaded.to_database(), reloaded, target)
    assert not status.tuned and status.tuner == TUNER and status.best_s == first[0].mean_s
    assert apply_best(reloaded, "GMM-S", target).ok  # the default's record compiles and computes the GEMM
