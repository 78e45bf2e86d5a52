"""The exact DP over the graph's ideals: the same lexicographic optimum as CP-SAT on every
objective (tight caches included), hints only bound it, a graph with one topological order is
split exactly, the hinted whole-graph DP is the layered one, wide graphs stop with a clear error,
and `hiertune partition --solver ideal-dp` solves the whole graph. The window DP: CP-SAT's
optimum on the same window, and `auto` uses it where the window's lattice fits."""

from __future__ import annotations

import json
import random

import pytest

from hiertune.cli import main
from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.errors import HiertuneError
from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.graph import Edge, OpGraph, OpNode
from hiertune.solvers.ideal_dp import IdealDpLimitError, ideal_lattice, ideal_partition
from hiertune.solvers.ilp import (IlpConfig, PartitionError, check_partition, evaluate_partition, has_one_order,
                                  solve_partition)
from hiertune.solvers.incilp import window_allowed
from hiertune.solvers.order_split import refine_cuts
from hiertune.solvers.window_dp import (WINDOW_MAX_IDEALS, ideals_lower_bound, monotone_allowed, whole_graph_partition,
                                        window_partition)
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
        layered = whole_graph_partition(g, k, hint=libcoral_partition(g, k))
        exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120))
        assert cold.objectives == hinted.objectives == layered.objectives == exact.objectives
    lattice = ideal_lattice(g)
    assert lattice.weight[-1] == g.total_param_bytes and lattice.cut[0] == lattice.cut[-1] == 0


def _residual_chain(seed: int) -> OpGraph:
    """A chain of 24 ops with random parameter bytes and a skip edge from every third op three
    ahead: each op feeds the next, so the topological order is the only one."""
    rng = random.Random(seed)
    nodes = [OpNode(f"op{i}", "Conv2D", rng.randrange(1, 50_000)) for i in range(24)]
    edges = [Edge(i, i + 1, rng.randrange(1, 20_000)) for i in range(23)]
    edges += [Edge(i, i + 3, rng.randrange(1, 20_000)) for i in range(0, 21, 3)]
    return OpGraph(f"residual_chain_{seed}", nodes, edges)


@pytest.mark.parametrize("k", [2, 4])
def test_a_graph_with_one_topological_order_is_solved_as_its_exact_split(k):
    """Chains with skip edges (residual blocks without parallel branches): the DP's lattice is one
    chain, and the split of that order it runs instead is CP-SAT's optimum."""
    chains = [_residual_chain(seed) for seed in range(3)]
    for g in chains:
        assert has_one_order(g)
        assert ideal_lattice(g).size == g.num_nodes + 1
        for cache in (10**12, g.total_param_bytes // (2 * k)):
            dp = ideal_partition(g, k, cache)
            exact = solve_partition(g, k, IlpConfig(solver="cpsat", cache_bytes=cache, time_limit_s=60))
            assert "one topological order" in dp.phases[0] and dp.optimal
            assert dp.objectives == exact.objectives
    assert has_one_order(load_zoo_graph("densenet121", "tflite"))
    assert not has_one_order(load_zoo_graph("inceptionv3", "tflite"))


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_the_hinted_whole_graph_dp_is_the_layered_dp_with_the_walks_optimum(seed):
    """With a hint, the whole graph's DP is the layered window DP over every node, pruned by the
    hint's peak: the lattice walk's optimum on every objective."""
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=30))
    assert not has_one_order(g)
    for k in (3, 5):
        for cache in (10**12, g.total_param_bytes // (2 * k)):
            hint = refine_cuts(g, libcoral_partition(g, k), k, cache)
            walk = ideal_partition(g, k, cache)
            layered = whole_graph_partition(g, k, cache, hint=hint)
            assert layered.phases[0].startswith("ideals within the hint's peak")
            assert layered.optimal and layered.objectives == walk.objectives
            assert solve_partition(g, k, IlpConfig(solver="ideal-dp", cache_bytes=cache),
                                   hint=hint).objectives == walk.objectives


def test_wide_graph_stops_with_a_clear_error():
    with pytest.raises(IdealDpLimitError, match="more than 1000 ideals"):
        ideal_lattice(load_zoo_graph("nasnetmobile", "tflite"), max_ideals=1000)
    g = generate_dag(1, SyntheticDagConfig(num_nodes=12))
    assert solve_partition(g, 3, IlpConfig(solver="ideal-dp")).solver == "ideal-dp"
    assert isinstance(IdealDpLimitError("x"), HiertuneError)


def _allowed_equal_on_every_objective(g, k, allowed, cache):
    dp = window_partition(g, k, allowed, cache, max_ideals=10**6, max_pairs=10**9)
    exact = solve_partition(g, k, IlpConfig(solver="cpsat", cache_bytes=cache, time_limit_s=60), allowed=allowed)
    assert exact.optimal and dp.optimal and dp.solver == "ideal-dp"
    assert all(dp.stages[v] in allowed[v] for v in range(g.num_nodes))
    assert sorted(set(dp.stages)) == list(range(k))
    assert dp.objectives == exact.objectives == evaluate_partition(g, dp.stages, k, cache)


@pytest.mark.parametrize("seed,k,gamma,window", [(0, 3, 1, "adjacent"), (3, 5, 2, "adjacent"), (7, 4, 1, "any"),
                                                 (7, 5, 3, "adjacent"), (0, 5, 6, "any")])  # the last: wide
def test_window_dp_equals_cpsat_on_the_same_window(seed, k, gamma, window):
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=36))
    allowed = window_allowed(g, libcoral_partition(g, k), k, gamma, window)
    assert any(len(a) < k for a in allowed) and any(len(a) > 1 for a in allowed)
    for cache in (10**12, g.total_param_bytes // (2 * k)):  # everything fits / every stage spills
        _allowed_equal_on_every_objective(g, k, allowed, cache)


def test_a_start_plan_peak_prunes_the_window_lattice_without_changing_its_optimum():
    """Bounded by the start plan's peak (as `solve_partition` does with its hint), the window DP
    builds fewer ideals on a real graph and finds the same optimum as without the bound, which on
    random DAGs is also CP-SAT's."""
    g = load_zoo_graph("inceptionv3", "tflite")
    plan = refine_cuts(g, libcoral_partition(g, 4), 4)
    allowed = window_allowed(g, plan, 4, 10)
    free = window_partition(g, 4, allowed, IlpConfig().cache_bytes)
    bounded = window_partition(g, 4, allowed, IlpConfig().cache_bytes, peak_hi=evaluate_partition(g, plan, 4)[0])
    assert bounded.objectives == free.objectives and bounded.num_vars < free.num_vars
    for seed in (0, 3, 7):
        g = generate_dag(seed, SyntheticDagConfig(num_nodes=36))
        plan = libcoral_partition(g, 4)
        allowed = window_allowed(g, plan, 4, 1)
        for cache in (10**12, g.total_param_bytes // 8):
            exact = solve_partition(g, 4, IlpConfig(solver="cpsat", cache_bytes=cache), allowed=allowed)
            dp = window_partition(g, 4, allowed, cache, max_ideals=10**6, max_pairs=10**9,
                                  peak_hi=evaluate_partition(g, plan, 4)[0])
            assert dp.objectives == exact.objectives
            assert solve_partition(g, 4, IlpConfig(solver="ideal-dp", cache_bytes=cache), allowed=allowed,
                                   hint=plan).objectives == exact.objectives


def test_window_dp_honours_allowed_sets_with_gaps():
    """A node allowed stages {0, 2} only (not 1): the DP may not place it in between."""
    g = generate_dag(4, SyntheticDagConfig(num_nodes=20))
    k = 3
    plan = libcoral_partition(g, k)
    allowed = window_allowed(g, plan, k, 2)
    gapped = [v for v in range(g.num_nodes) if allowed[v] == {0, 1, 2}]
    assert gapped
    for v in gapped:
        allowed[v] = {0, 2}
    for cache in (10**12, g.total_param_bytes // (2 * k)):
        try:
            _allowed_equal_on_every_objective(g, k, allowed, cache)
        except PartitionError:  # no plan: the ILP must agree
            with pytest.raises(PartitionError):
                solve_partition(g, k, IlpConfig(solver="cpsat", cache_bytes=cache), allowed=allowed)


def test_auto_solves_a_narrow_window_by_the_dp_and_a_wide_one_by_the_ilp():
    g = load_zoo_graph("densenet121", "tflite")
    k = 4
    plan = refine_cuts(g, libcoral_partition(g, k), k)
    allowed = window_allowed(g, plan, k, 10)
    auto = solve_partition(g, k, IlpConfig(time_limit_s=60), allowed=allowed, hint=plan)
    exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=60), allowed=allowed, hint=plan)
    assert auto.solver == "ideal-dp" and auto.optimal and auto.objectives == exact.objectives
    wide = load_zoo_graph("nasnetmobile", "tflite")  # its cells: too many ideals in a window
    plan = refine_cuts(wide, libcoral_partition(wide, 8), 8)
    res = solve_partition(wide, 8, IlpConfig(time_limit_s=60), allowed=window_allowed(wide, plan, 8, 10), hint=plan)
    assert res.solver != "ideal-dp" and "ideal-dp" in res.phases[0]
    with pytest.raises(IdealDpLimitError):
        window_partition(wide, 8, window_allowed(wide, plan, 8, 10), IlpConfig().cache_bytes)


def test_ideals_lower_bound_never_exceeds_the_lattice_and_spots_wide_cells():
    """The chain bound that lets `auto` skip enumerating a window too wide for the DP: a true lower
    bound (random DAGs, every node free), and above the DP's limit on NASNet's cells."""
    for seed in range(40):
        g = generate_dag(seed, SyntheticDagConfig(num_nodes=24))
        assert 1 <= ideals_lower_bound(g, list(range(g.num_nodes))) <= ideal_lattice(g, 10**6).size
    wide = load_zoo_graph("nasnetmobile", "tflite")
    plan = refine_cuts(wide, libcoral_partition(wide, 8), 8)
    sets = monotone_allowed(wide, 8, window_allowed(wide, plan, 8, 10))
    free = [v for v, ks in enumerate(sets) if ks[0] <= 0 < ks[-1]]
    assert ideals_lower_bound(wide, free) > WINDOW_MAX_IDEALS


def test_partition_command_with_the_ideal_dp(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["partition", "--model", "resnet50", "--form", "tflite", "--stages", "8", "--gamma", "inf",
                 "--solver", "ideal-dp", "--no-ray", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    g = load_zoo_graph("resnet50", "tflite")
    exact = solve_partition(g, 8, IlpConfig(solver="cpsat"))
    assert plan["solver"] == "ideal-dp" and plan["optimal"]
    assert plan["objectives"]["peak_param_bytes"] == exact.objectives[0]
    window = tmp_path / "window.json"  # a window (the default gamma) by the window DP
    assert main(["partition", "--model", "resnet50", "--form", "tflite", "--stages", "4", "--solver", "ideal-dp",
                 "--no-ray", "--out", str(window)]) == 0
    assert json.loads(window.read_text())["solver"] == "ideal-dp"


def test_auto_leaves_a_window_with_the_macs_objective_to_the_ilp():
    """The window DP minimises the paper's three objectives only: another order goes to the ILP."""
    g = load_zoo_graph("mobilenetv2", "tflite")
    k = 4
    plan = refine_cuts(g, libcoral_partition(g, k), k)
    allowed = window_allowed(g, plan, k, 10)
    assert solve_partition(g, k, IlpConfig(time_limit_s=60), allowed=allowed).solver == "ideal-dp"
    order = ("peak", "off-cache", "comm", "macs")
    res = solve_partition(g, k, IlpConfig(objectives=order, time_limit_s=60), allowed=allowed)
    assert res.solver != "ideal-dp" and res.optimal
    with pytest.raises(PartitionError, match="in that order only"):
        solve_partition(g, k, IlpConfig(solver="ideal-dp", objectives=order), allowed=allowed)
