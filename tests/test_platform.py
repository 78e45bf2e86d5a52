"""The measurement platform with real TVM builds and measurements through real Ray actors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from hiertune.errors import HiertuneError, ResourceUnavailableError
from hiertune.workloads.tvm_support import make_target, prepare_tvm

prepare_tvm()

import tvm  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from hiertune.workloads import get_workload  # noqa: E402
from hiertune.platform.ms_baseline import BaselineConfig, run_baseline  # noqa: E402
from hiertune.platform.records import RecordStore  # noqa: E402
from hiertune.platform.runners import MeasureInput, Measurer, RunnerConfig, create_runner  # noqa: E402


FLOAT32 = "float32"  # a name, not a string annotation: pyflakes reads those as type names


@T.prim_func
def _crashes_at_run(A: T.Buffer((16,), FLOAT32)):
    for i in range(16):
        A[i] = T.call_extern("float32", "hiertune_no_such_symbol", A[i])


def _input(mod: tvm.IRModule) -> MeasureInput:
    return MeasureInput(mod, ms.arg_info.ArgInfo.from_prim_func(mod["main"]))


def _gemm_sketches(target) -> list[MeasureInput]:
    mod = get_workload("GMM-S").tasks[0].mod
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", num_threads=1)
    return [MeasureInput.from_schedule(sch) for sch in ctx.generate_design_space()]


@pytest.fixture(scope="module")
def target():
    return make_target("llvm", num_cores=1)


@pytest.fixture(scope="module")
def cpu_runner(ray_session):
    runner = create_runner(RunnerConfig(num_cpus=1))
    yield runner
    runner.close()


def test_runner_actor_measures_real_candidates(cpu_runner, target):
    results = cpu_runner.measure(_gemm_sketches(target))
    assert len(results) == 3
    assert all(r.ok and 0 < r.mean_s < 1.0 for r in results), results


def test_crashing_candidate_fails_alone_and_the_batch_goes_on(cpu_runner, target):
    bad = _input(tvm.IRModule({"main": _crashes_at_run.with_attr("global_symbol", "main")}))
    good = _gemm_sketches(target)[0]
    results = cpu_runner.measure([bad, good])
    assert not results[0].ok and results[0].error
    assert results[1].ok


def test_build_timeout_is_a_failed_result_not_an_exception(target):
    measurer = Measurer(RunnerConfig(build_timeout_s=0.001))
    results = measurer.measure(_gemm_sketches(target)[:2])
    assert [r.ok for r in results] == [False, False]
    assert all("build" in r.error.lower() for r in results)


def test_gpu_runner_without_gpu_errors_within_seconds(ray_session):
    start = time.monotonic()
    with pytest.raises(ResourceUnavailableError, match="GPU"):
        create_runner(RunnerConfig(target="cuda", device="gpu"))
    assert time.monotonic() - start < 10


def test_edgetpu_actor_without_free_edgetpu_errors_within_seconds(ray_session):
    import ray

    from hiertune.platform.placement import start_actor
    from hiertune.platform.ray_runtime import require_resource

    @ray.remote
    class Probe:
        def ready(self) -> bool:
            return True

    start = time.monotonic()
    with pytest.raises(ResourceUnavailableError, match="edgetpu"):  # no node declares 2
        require_resource("edgetpu", 2, what="a 2-TPU stage")
    holder = start_actor(Probe, "edgetpu", num_cpus=0, what="first")  # takes the only one
    with pytest.raises(ResourceUnavailableError, match="not placed"):
        start_actor(Probe, "edgetpu", num_cpus=0, timeout_s=3, what="second")
    ray.kill(holder)
    assert time.monotonic() - start < 20


def test_records_stream_to_disk_during_the_run_and_apply_matches_numpy(ray_session, cpu_runner, target, tmp_path):
    records = tmp_path / "gemm.jsonl"
    store = RecordStore(records)
    seen_on_disk: list[int] = []

    def count_lines(task: str, n: int) -> None:
        seen_on_disk.append(sum(1 for line in records.read_text().splitlines() if '"kind":"measure"' in line))

    workload = get_workload("GMM-S")
    ran = run_baseline(workload, target, cpu_runner, store,
                       BaselineConfig(trials=8, batch=4, work_dir=str(tmp_path / "ms")), on_measured=count_lines)
    assert ran == 8
    assert seen_on_disk[0] >= 4 and seen_on_disk[0] < 8  # first batch on disk before the run ended

    reloaded = RecordStore(records)
    assert len(reloaded.trials()) == 8
    assert {m.extra.get("timing") for m in reloaded.trials()} == {"cold"}  # the CPU runner's default
    with pytest.raises(HiertuneError, match="timed cold.*resume it with --cache-flush"):
        reloaded.expect_timing("warm")  # a warm resume would rank on two scales: refused
    db = reloaded.to_database()
    assert len(db.get_all_tuning_records()) == sum(m.ok for m in reloaded.trials())

    from hiertune.platform.apply import apply_best

    report = apply_best(reloaded, "GMM-S", target)
    assert report.reference == "numpy" and report.ok, report


def test_killed_run_resumes_without_remeasuring(tmp_path):
    records = tmp_path / "resume.jsonl"
    cmd = [sys.executable, "-m", "hiertune.cli", "baseline", "--workload", "GMM-S", "--trials", "12",
           "--batch", "4", "--records", str(records), "--no-ray"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if records.exists() and records.read_text().count('"kind":"measure"') >= 4:
            break
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [json.loads(line)["key"] for line in records.read_text().splitlines() if '"kind":"measure"' in line]
    assert 4 <= len(before) < 12
    with records.open("a") as f:  # a writer killed mid-line leaves a torn tail
        f.write('{"kind":"measure","task":"GMM-S","ke')

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming" in done.stdout
    store = RecordStore(records)
    keys = [m.key for m in store.trials()]
    assert len(keys) == 12
    assert keys[: len(before)] == before
    assert len(set(keys)) == len(keys)  # nothing measured twice


def test_corrupt_lines_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"kind":"workload","task":"t","weight":1,"workload":[]}\nnot json\n{"kind":"measure","task":"t"')
    with pytest.warns(UserWarning, match="corrupt record"):
        store = RecordStore(path)
    assert store.tasks() == ["t"] and store.trials() == []
    from hiertune.platform.records import MeasureRecord

    store.append(MeasureRecord(task="t", key="k1", record=[], latencies_s=[1e-3]))  # after the torn tail
    with pytest.warns(UserWarning):
        again = RecordStore(path)
    assert [m.key for m in again.trials()] == ["k1"]


def test_a_records_file_with_another_program_under_a_task_name_is_refused(tmp_path):
    """Resuming into a file whose task of the same name is another program (an earlier import's
    layout, another shape) would spend the budget on trials that never apply: refused, by name."""
    path = tmp_path / "r.jsonl"
    small, large = get_workload("GMM:0").tasks[0].mod, get_workload("GMM:1").tasks[0].mod
    RecordStore(path).add_workload("gemm", small)
    store = RecordStore(path)
    store.add_workload("gemm", small)  # the same program: reused
    with pytest.raises(HiertuneError, match="holds task 'gemm' as another program.*new --records file"):
        store.add_workload("gemm", large)
    assert path.read_text().count('"kind":"workload"') == 1


def test_bad_inputs_give_one_clear_error():
    with pytest.raises(HiertuneError, match="unknown workload 'NOPE'"):
        get_workload("NOPE")
    with pytest.raises(HiertuneError, match="not the old"):
        make_target("llvm -mcpu=skylake")
    with pytest.raises(HiertuneError, match="not a valid TVM target"):
        make_target("nosuchkind")


def test_an_operator_name_in_any_form_names_its_family():
    """A prior's leave-one-family-out split reads families from task names, GEMM aliases included."""
    from hiertune.workloads.operators import operator_family

    assert operator_family("GMM-S") == operator_family("gmm:1") == operator_family("GEMM-L") == "GMM"
    assert operator_family("C2D:2:b16") == "C2D"
    assert operator_family("resnet50/fused_conv2d_add") is None


def test_cli_reports_errors_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hiertune.cli", "baseline", "--workload", "C9D",
                          "--records", str(tmp_path / "x.jsonl"), "--no-ray"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "unknown workload" in out.stderr


def test_apply_on_a_file_without_records_is_an_error_not_an_empty_table(tmp_path, capsys):
    from hiertune.cli import main

    path = tmp_path / "r.jsonl"
    path.write_text("not json\n")
    with pytest.warns(UserWarning, match="corrupt record"):
        assert main(["apply", "--records", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no tuning records" in err[0]


def test_network_workload_has_weighted_tasks():
    workload = get_workload("tiny-convnet")
    assert len(workload.tasks) >= 3
    assert sum(t.weight for t in workload.tasks) > len(workload.tasks)  # a repeated subgraph
    assert np.all([t.flops >= 0 for t in workload.tasks])


def test_integer_and_boolean_arguments_are_filled_with_their_working_value() -> None:
    """Indices in range and masks / flags set: a zero flag would let a schedule skip the work it
    guards and be measured far faster than it runs in the model."""
    from tvm.s_tir.meta_schedule.arg_info import TensorInfo

    from hiertune.platform.runners import alloc_arguments_in_range

    infos = [TensorInfo("float32", [4, 4]), TensorInfo("int8", [4, 1]), TensorInfo("int64", [8]),
             TensorInfo("bool", [3])]
    (args,) = alloc_arguments_in_range(tvm.cpu(), [info.as_json() for info in infos], 1)
    assert np.all(args[1].numpy() == 1) and np.all(args[2].numpy() == 1) and np.all(args[3].numpy())
    assert np.std(args[0].numpy()) > 0  # floats stay MetaSchedule's random fill


def test_a_gather_is_measured_with_in_range_indices() -> None:
    """An embedding lookup reads its int64 indices: MetaSchedule's random fill puts them out of
    bounds and the measurement crashes, so the task could never be tuned."""
    from tvm import te

    table = te.placeholder((1000, 64), name="table")
    indices = te.placeholder((128,), dtype="int64", name="indices")
    out = te.compute((128, 64), lambda i, j: table[indices[i], j], name="take")
    func = te.create_prim_func([table, indices, out]).with_attr("global_symbol", "main")
    runner = create_runner(RunnerConfig(target="llvm", num_cpus=1, number=1, min_repeat_ms=0), use_ray=False)
    try:
        (result,) = runner.measure([MeasureInput.from_schedule(tvm.s_tir.Schedule(tvm.IRModule({"main": func})))])
    finally:
        runner.close()
    assert result.ok, result.error
