"""XGBoost cost model on real per-store features and real measured latencies of GEMM schedules."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from hiertune.errors import HiertuneError
from hiertune.workloads.tvm_support import make_target, prepare_tvm
from hiertune.policies.cost_model import CostModel, CostModelConfig, load_prior, neutral_score, prior_file, save_prior

prepare_tvm()


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.fixture(scope="module")
def measured():
    """60 random GEMM 1x128^3 schedules (all sketches), built and timed for real."""
    import tvm
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace

    target = make_target("llvm")
    space = ScheduleSpace(create_te_workload("GMM", 0), target, seed=0)
    rng = np.random.default_rng(0)
    states, seen = [], set()
    while len(states) < 60:
        s = space.random_state(len(states) % space.num_sketches, rng)
        if s.key not in seen:
            seen.add(s.key)
            states.append(s)
    dev = tvm.cpu()
    x = tvm.runtime.tensor(np.random.rand(1, 128, 128).astype("float32"), dev)
    y = tvm.runtime.tensor(np.random.rand(1, 128, 128).astype("float32"), dev)
    z = tvm.runtime.tensor(np.zeros((1, 128, 128), "float32"), dev)
    latencies = []
    for s in states:
        lib = tvm.compile(s.mod, target=target)
        latencies.append(float(np.median(lib.mod.time_evaluator("main", dev, number=5, repeat=3)(x, y, z).results)))
    return space, states, np.array(latencies)


def test_untrained_scores_are_deterministic(measured):
    _, states, _ = measured
    model = CostModel()
    a, b = model.predict(states), CostModel().predict(states)
    assert not model.trained
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all() and len(set(a.round(9))) > 50
    assert a[0] == neutral_score(states[0].key)


def test_model_learns_the_ranking(measured):
    _, states, lat = measured
    model = CostModel()
    t0 = time.perf_counter()
    model.update(states[:44], list(lat[:44]))
    train_s = time.perf_counter() - t0
    assert model.trained and model.num_samples == 44
    pred = model.predict(states)
    train_rho, test_rho = spearman(pred[:44], -lat[:44]), spearman(pred[44:], -lat[44:])
    print(f"train 44: {train_s:.2f} s; spearman(score, -latency) train {train_rho:.2f} held-out {test_rho:.2f}; "
          f"latency range {lat.min() * 1e6:.0f}-{lat.max() * 1e6:.0f} us")
    assert train_rho > 0.5
    assert test_rho > 0.0
    # the 4 best-predicted held-out schedules are faster than the held-out median
    top4 = 44 + np.argsort(-pred[44:])[:4]
    assert np.median(lat[top4]) < np.median(lat[44:])


def test_a_prior_of_measured_schedules_ranks_before_any_measurement_and_only_on_its_target(measured, tmp_path):
    """A prior holds another run's measured schedules: the model is trained on them before the
    tuned task has a trial, and the tuned task's own measurements still retrain it."""
    _, states, lat = measured
    path = tmp_path / "prior.npz"
    save_prior(path, {"GMM:0": (CostModel().features(states[:44]), list(lat[:44]))}, "llvm")
    tasks, kind = load_prior(path)
    assert kind == "llvm" and list(tasks) == ["GMM:0"] and len(tasks["GMM:0"][0]) == 44
    np.testing.assert_allclose(tasks["GMM:0"][1], lat[:44], rtol=1e-6)  # stored as float32
    model = CostModel(CostModelConfig(prior=str(path)))
    assert model.trained and model.num_samples == 0  # the prior is not the tuned task's data
    pred = model.predict(states[44:])
    top4 = 44 + np.argsort(-pred)[:4]
    assert np.median(lat[top4]) < np.median(lat[44:])
    model.update(states[44:48], list(lat[44:48]))
    assert model.num_samples == 4
    assert not CostModel(CostModelConfig(prior=str(path)), target_kind="cuda").trained  # measured on llvm
    with pytest.raises(HiertuneError, match="hiertune prior"):  # the CLI prints it as one line
        CostModel(CostModelConfig(prior=str(tmp_path / "missing.npz")))


def test_the_prior_setting_names_the_shipped_file_none_or_a_path_in_any_case():
    """A config file or CLI value may say "Builtin" or "NONE"; neither may be taken for a path."""
    assert prior_file("Builtin", "llvm") == prior_file("builtin", "llvm")
    assert prior_file("builtin", "llvm").endswith("cost_prior_llvm.npz")
    assert prior_file("NONE", "llvm") is None and prior_file(None, "llvm") is None
    assert prior_file("builtin", "no-such-target") is None  # no shipped prior for that kind
    assert prior_file("my/prior.npz", "llvm") == "my/prior.npz"


def test_predict_batch_of_64_and_failed_measurements(measured):
    _, states, lat = measured
    model = CostModel()
    lats = list(lat[:30])
    lats[0], lats[1] = math.inf, None  # failed builds/runs
    model.update(states[:30], lats)
    assert model.num_samples == 30
    batch = (states * 2)[:64]
    t0 = time.perf_counter()
    scores = model.predict(batch)
    first_ms = 1000 * (time.perf_counter() - t0)
    t0 = time.perf_counter()
    again = model.predict(batch)
    print(f"batch of 64: features + predict {first_ms:.0f} ms, cached features {1000 * (time.perf_counter() - t0):.1f} ms")
    assert scores.shape == (64,) and np.isfinite(scores).all()
    np.testing.assert_array_equal(scores, again)
    assert scores[0] == pytest.approx(scores[60])  # same state, same score
    # a failed schedule is scored below the measured best
    assert scores[0] < scores[int(np.argmin(lat[2:30])) + 2]


def test_a_schedule_gets_one_feature_vector_where_its_workload_repeats_a_buffer_name():
    """MetaSchedule's features order a store's tied buffers by name; TVM's depthwise conv names both
    inputs "placeholder", so one schedule's features followed memory addresses. Its workload is
    renamed, invisibly to records and tuning databases (structural hash)."""
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.testing.te_workload import CONFIGS
    from tvm.s_tir.meta_schedule.utils import shash2hex

    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.workloads.operators import operator_task

    builder, shapes = CONFIGS["DEP"]
    as_built = tvm.IRModule({"main": te.create_prim_func(builder(*shapes[1])).with_attr("global_symbol", "main")})
    assert [p.name for p in as_built["main"].params][:2] == ["placeholder", "placeholder"]
    task = operator_task("DEP:1")
    names = [p.name for p in task.mod["main"].params]
    assert len(set(names)) == len(names)
    assert shash2hex(task.mod) == shash2hex(as_built)

    space = ScheduleSpace(task.mod, make_target("llvm"), seed=0)
    rng = np.random.default_rng(0)
    states = [space.random_state(k % space.num_sketches, rng) for k in range(12)]
    first = CostModel().features(states)
    for _ in range(3):  # a fresh model extracts again, from fresh candidates
        for a, b in zip(first, CostModel().features(states)):
            np.testing.assert_array_equal(a, b)
