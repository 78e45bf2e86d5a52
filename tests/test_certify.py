"""Certificates: global lower bounds never exceed the optimum, a plan meeting them is reported
proven, and `prove` times the whole model hinted and cold plus the ideal DP, all agreeing."""

from __future__ import annotations

import pytest

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.solvers.certify import global_lower_bounds, prove, proven_by_bounds
from hiertune.solvers.graph import Edge, OpGraph, OpNode
from hiertune.solvers.ilp import IlpConfig, solve_partition
from hiertune.solvers.incilp import IncIlpConfig, inc_ilp

ILP = IlpConfig(solver="cpsat", time_limit_s=60)


@pytest.mark.parametrize("seed", [1, 4])
def test_global_bounds_never_exceed_the_optimum(seed):
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=30))
    for k in (2, 4):
        for cache in (10**12, g.total_param_bytes // (2 * k)):
            exact = solve_partition(g, k, IlpConfig(solver="cpsat", cache_bytes=cache))
            bounds = global_lower_bounds(g, k, cache)
            assert all(b <= o for b, o in zip(bounds, exact.objectives))


def test_a_node_larger_than_the_cache_bounds_the_off_cache_total():
    # the 100-byte node spills 60 bytes over a 40-byte cache wherever it goes, though 3 caches
    # hold more than the 130 bytes in all
    nodes = [OpNode("big", "X", 100), OpNode("a", "X", 20), OpNode("b", "X", 10)]
    g = OpGraph("one_big", nodes, [Edge(0, 1, 5), Edge(1, 2, 5)])
    assert global_lower_bounds(g, 3, 40)[1] == 60
    assert solve_partition(g, 3, IlpConfig(solver="cpsat", cache_bytes=40)).objectives[1] == 60


def test_a_plan_meeting_every_bound_is_proven_without_a_solve():
    # two independent chains of equal weight: 2 stages split them with nothing crossing
    nodes = [OpNode(f"n{i}", "X", 10) for i in range(6)]
    g = OpGraph("two_chains", nodes, [Edge(0, 1, 5), Edge(1, 2, 5), Edge(3, 4, 5), Edge(4, 5, 5)])
    res = inc_ilp(g, 2, IncIlpConfig(gamma=1, initial="libcoral", ilp=ILP))
    assert res.objectives == (30, 0, 0) and res.proven == (True, True, True)
    assert proven_by_bounds((31, 0, 0), res.lower_bounds) == (False, True, False)


def test_prove_agrees_across_hinted_cold_and_the_ideal_dp():
    g = generate_dag(7, SyntheticDagConfig(num_nodes=40))
    res = inc_ilp(g, 3, IncIlpConfig(gamma=3, initial="libcoral", ilp=ILP))
    runs = prove(g, 3, res.stages, res.objectives, ILP)
    assert [r.method for r in runs] == ["cpsat hinted", "cpsat cold", "ideal-dp hinted"]
    optimum = {tuple(r.objectives) for r in runs}
    assert len(optimum) == 1 and all(r.optimal for r in runs)
    assert all(r.plan_is_optimal == (tuple(res.objectives) in optimum) for r in runs)
