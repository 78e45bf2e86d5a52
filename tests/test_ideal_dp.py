"""The exact DP over the graph's ideals: the same lexicographic optimum as CP-SAT on every
objective (tight caches included), hints only bound it, wide graphs stop with a clear error,
and `hiertune partition --solver ideal-dp` solves the whole graph."""

from __future__ import annotations

import json

import pytest

from hiertune.cli import main
from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.errors import HiertuneError
from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.ideal_dp import IdealDpLimitError, ideal_lattice, ideal_partition
from hiertune.solvers.ilp import IlpConfig, PartitionError, check_partition, evaluate_partition, solve_partition
from hiertune.solvers.zoo import load_zoo_graph


@pytest.mark.parametrize("seed", [0, 3, 7])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_ideal_dp_equals_cpsat_on_all_three_objectives(seed, k):
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=24))
    for cache in (10**12, g.total_param_bytes // (2 * k)):  # everything fits / every stage spills
        dp = ideal_partition(g, k, cache)
        exact = solve_partition(g, k, IlpConfig(solver="cpsat", cache_bytes=cache, time_limit_s=60))
        assert exact.optimal and dp.optimal
        check_partition(g, dp.stages, k)
        assert sorted(set(dp.stages)) == list(range(k))
        assert dp.objectives == exact.objectives == evaluate_partition(g, dp.stages, k, cache)


def test_ideal_dp_on_a_real_graph_with_a_hint_and_many_stages():
    g = load_zoo_graph("inceptionv3", "tflite")
    for k in (4, 16):
        cold = ideal_partition(g, k)
        hinted = ideal_partition(g, k, hint=libcoral_partition(g, k))
        exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120))
        assert cold.objectives == hinted.objectives == exact.objectives
    lattice = ideal_lattice(g)
    assert lattice.weight[-1] == g.total_param_bytes and lattice.cut[0] == lattice.cut[-1] == 0


def test_wide_graph_stops_with_a_clear_error_and_windows_are_refused():
    with pytest.raises(IdealDpLimitError, match="more than 1000 ideals"):
        ideal_lattice(load_zoo_graph("nasnetmobile", "tflite"), max_ideals=1000)
    g = generate_dag(1, SyntheticDagConfig(num_nodes=12))
    with pytest.raises(PartitionError, match="whole graph only"):
        solve_partition(g, 2, IlpConfig(solver="ideal-dp"), allowed=[{0}] + [{0, 1}] * 11)
    assert solve_partition(g, 3, IlpConfig(solver="ideal-dp")).solver == "ideal-dp"
    assert isinstance(IdealDpLimitError("x"), HiertuneError)


def test_partition_command_with_the_ideal_dp(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["partition", "--model", "resnet50", "--form", "tflite", "--stages", "8", "--gamma", "inf",
                 "--solver", "ideal-dp", "--no-ray", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    g = load_zoo_graph("resnet50", "tflite")
    exact = solve_partition(g, 8, IlpConfig(solver="cpsat"))
    assert plan["solver"] == "ideal-dp" and plan["optimal"]
    assert plan["objectives"]["peak_param_bytes"] == exact.objectives[0]
    capsys.readouterr()
    assert main(["partition", "--model", "resnet50", "--solver", "ideal-dp", "--no-ray"]) == 2
    assert "pass --gamma inf" in capsys.readouterr().err
