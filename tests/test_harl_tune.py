"""Small real HARL tuning runs: records, resume, numerics of the best schedule, task spreading.

Real TVM builds through the Ray runner actor, real PPO and XGBoost; budgets of 16-24 trials.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hiertune.commands.tune import plot_run, task_table
from conftest import harl_config
from hiertune.platform.harl_search import TUNER, HarlSearch
from hiertune.workloads import Workload, get_workload
from hiertune.workloads.operators import operator_task
from hiertune.platform.records import RecordStore
from hiertune.platform.runners import RunnerConfig, create_runner
from hiertune.workloads.tvm_support import make_target

pytestmark = pytest.mark.slow

SMALL = {"tracks": 4, "lam": 4, "max_steps": 12, "topk": 8, "seed": 0}


@pytest.fixture(scope="module")
def runner(ray_session):
    runner = create_runner(RunnerConfig(target="llvm", num_cpus=1, number=2, min_repeat_ms=10))
    yield runner
    runner.close()


def run_harl(workload: Workload, store: RecordStore, runner, trials: int, **overrides):
    target = make_target("llvm")
    config = harl_config(trials=trials, **{**SMALL, **overrides})
    search = HarlSearch(workload, target, runner, store, config)
    return search, search.run()


def best_schedule_matches_numpy(store: RecordStore, task: str) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = store.workload_mod(task)
    target = make_target("llvm")
    sch = ms.tir_integration.compile_tir(store.to_database(), mod, target)
    assert sch is not None, "the records hold no schedule for the task"
    lib = tvm.compile(sch.mod, target=target)
    shapes = [[int(d) for d in info.shape] for info in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype("float32") for s in shapes[:2])
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros(shapes[2], "float32"), dev)
    lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-3)


def test_tune_writes_records_resumes_and_best_compiles(tmp_path, runner) -> None:
    path = tmp_path / "gmm.jsonl"
    workload = get_workload("GMM-S")
    _, first = run_harl(workload, RecordStore(path), runner, trials=16)
    assert first.new_trials == 16 and first.trials == 16
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    measures = [line for line in lines if line["kind"] == "measure"]
    assert len(measures) == 16 and all(m["tuner"] == TUNER for m in measures)
    assert sum(m["latencies_s"] is not None for m in measures) >= 12  # nearly all build and run
    assert math.isfinite(first.best_s["GMM-S"])
    assert first.search_s > 0 and first.search_s_per_trial < 10

    # resume: the budget counts what is there, nothing is measured twice, the bandits remember
    store = RecordStore(path)
    resumed = HarlSearch(workload, make_target("llvm"), runner, store, harl_config(trials=24, **SMALL))
    assert resumed.trials_done() == 16 and resumed.bandits.progress[0].trials == 16
    assert resumed.cost_model.num_samples == 16
    assert 1 <= sum(w.t for w in resumed.bandits.sketch_windows) <= 2  # the two rounds (merged if one sketch)
    second = resumed.run()
    assert second.new_trials == 8 and second.trials == 24
    keys = [m.key for m in store.trials("GMM-S")]
    assert len(keys) == 24 == len(set(keys))
    assert second.best_s["GMM-S"] <= first.best_s["GMM-S"]
    # a finished budget runs nothing
    _, third = run_harl(workload, RecordStore(path), runner, trials=24)
    assert third.new_trials == 0

    best_schedule_matches_numpy(store, "GMM-S")


def test_two_task_workload_spreads_trials(tmp_path, runner) -> None:
    small, other = operator_task("GMM-S"), operator_task("GMM:1")
    other.weight = 2
    workload = Workload(name="two-gemms", tasks=[small, other])
    store = RecordStore(tmp_path / "two.jsonl")
    _, result = run_harl(workload, store, runner, trials=20, topk=4)
    assert result.trials == 20
    assert all(n >= 4 for n in result.task_trials.values()), result.task_trials
    assert sum(result.task_trials.values()) == 20
    assert [r.task for r in result.rounds[:2]] == [small.name, other.name]  # SW-UCB: each arm once first
    assert math.isfinite(result.rounds[-1].weighted_s)
    table = task_table(workload, store, first_batch=4)
    assert table.row_count == 2
    png = plot_run(workload, store, str(tmp_path / "two.png"))
    assert png.stat().st_size > 10_000


def test_a_prior_built_from_a_runs_records_trains_the_next_runs_model(tmp_path, runner, capsys) -> None:
    """`hiertune prior` on one run's records; a later HARL run on another task starts from it:
    its cost model is trained before its first trial, on data that is not its own."""
    from hiertune.cli import main

    records = tmp_path / "gmm_s.jsonl"
    run_harl(get_workload("GMM-S"), RecordStore(records), runner, trials=8, prior=None)
    prior = tmp_path / "prior.npz"
    assert main(["prior", "--records", str(records), "--out", str(prior)]) == 0
    assert "1 task(s), 8 schedules" in " ".join(capsys.readouterr().out.split())  # rich wraps lines
    config = harl_config(trials=8, **{**SMALL, "prior": str(prior)})
    search = HarlSearch(get_workload("GMM-M"), make_target("llvm"), runner, RecordStore(tmp_path / "m.jsonl"), config)
    assert search.cost_model.trained and search.cost_model.num_samples == 0
    untrained = HarlSearch(get_workload("GMM-M"), make_target("llvm"), runner, RecordStore(tmp_path / "n.jsonl"),
                           harl_config(trials=8, **{**SMALL, "prior": None}))
    assert not untrained.cost_model.trained

    assert main(["prior", "--records", str(records), "--out", str(tmp_path / "prior.json")]) == 2  # not an .npz
    assert "a prior is an .npz file" in " ".join(capsys.readouterr().err.split())
