"""Exact cut placement along a node order: it is the best contiguous split (checked by brute force),
it equals the exact ILP where the order is forced (a chain), and it never worsens a plan; the
packed order packs parallel branches, and Inc-ILP asks for it where its window is an ILP."""

from __future__ import annotations

import itertools

import pytest

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.solvers.baselines import exact_partition, libcoral_partition
from hiertune.solvers.graph import Edge, OpGraph, OpNode
from hiertune.solvers.ilp import IlpConfig, PartitionError, check_partition, evaluate_partition
from hiertune.solvers.incilp import IncIlpConfig, inc_ilp, packed_plan, window_needs_ilp
from hiertune.solvers.certify import global_lower_bounds
from hiertune.solvers.order_split import can_beat, packed_order, plan_order, refine_cuts, split_order
from hiertune.solvers.zoo import load_zoo_graph

ILP = IlpConfig(solver="cpsat", time_limit_s=60)
SMALL_CACHE = 60_000  # small enough that the off-cache objective matters on these graphs


def brute_force_split(graph: OpGraph, order: list[int], k: int, cache: int) -> tuple:
    """Best objectives over every split of `order` into k non-empty consecutive runs."""
    n, best = graph.num_nodes, None
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        stages = [0] * n
        for s in range(k):
            for p in range(bounds[s], bounds[s + 1]):
                stages[order[p]] = s
        obj = evaluate_partition(graph, stages, k, cache)
        best = obj if best is None or obj < best else best
    return best


@pytest.mark.parametrize("seed,k", [(1, 3), (5, 4), (8, 2)])
def test_split_is_the_best_contiguous_split_of_its_order(seed, k):
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=13))
    order = g.topological_order()
    stages = split_order(g, order, k, SMALL_CACHE)
    check_partition(g, stages, k)
    assert sorted(set(stages)) == list(range(k))  # no empty stage, as in the ILP
    assert evaluate_partition(g, stages, k, SMALL_CACHE) == brute_force_split(g, order, k, SMALL_CACHE)


def test_on_a_chain_the_split_is_the_exact_optimum():
    params = [5, 40, 7, 30, 30, 2, 60, 9, 11, 25, 3, 44]
    nodes = [OpNode(name=f"n{i}", op="CONV_2D", param_bytes=p * 1000) for i, p in enumerate(params)]
    edges = [Edge(i, i + 1, 1000 * (i % 4 + 1)) for i in range(len(params) - 1)]
    chain = OpGraph(name="chain", nodes=nodes, edges=edges)
    for k in (2, 3, 5):
        split = split_order(chain, chain.topological_order(), k, SMALL_CACHE)
        exact = exact_partition(chain, k, IlpConfig(solver="cpsat", cache_bytes=SMALL_CACHE))
        assert evaluate_partition(chain, split, k, SMALL_CACHE) == exact.objectives


def test_refined_plan_keeps_its_order_and_never_loses():
    g = load_zoo_graph("resnet50")
    for k in (4, 6):
        plan = libcoral_partition(g, k)
        refined = refine_cuts(g, plan, k)
        assert evaluate_partition(g, refined, k) <= evaluate_partition(g, plan, k)
        along = [refined[v] for v in plan_order(g, plan)]
        assert along == sorted(along)  # the new stages are consecutive runs of the plan's order


def test_inc_ilp_refines_by_default_and_reaches_the_optimum():
    g = load_zoo_graph("resnet50")
    exact = exact_partition(g, 4, ILP)
    res = inc_ilp(g, 4, IncIlpConfig(gamma=10, initial="libcoral", ilp=ILP))
    assert res.refined_objectives is not None and res.refined_objectives <= res.initial_objectives
    assert res.objectives == exact.objectives
    plain = inc_ilp(g, 4, IncIlpConfig(gamma=10, initial="libcoral", refine_cuts=False, ilp=ILP))
    assert plain.refined_objectives is None


@pytest.mark.parametrize("cache", [SMALL_CACHE, 10**12])
def test_can_beat_says_no_only_when_no_split_of_the_order_beats_the_plan(cache):
    """The cheap test before the DP: never "no" where the DP finds a better split, and "no" often
    enough to spare the DP (on the exact-cut plans, the best splits of their orders, it may say no)."""
    said_no = 0
    for seed in range(6):
        g = generate_dag(seed, SyntheticDagConfig(num_nodes=60))
        for k in (2, 4, 6):
            floor = global_lower_bounds(g, k, cache)[1]
            for plan in (libcoral_partition(g, k), refine_cuts(g, libcoral_partition(g, k), k, cache)):
                order, current = plan_order(g, plan), evaluate_partition(g, plan, k, cache)
                better = evaluate_partition(g, split_order(g, order, k, cache), k, cache) < current
                if not can_beat(g, order, k, current, floor):
                    assert not better, (seed, k)
                    said_no += 1
    assert said_no > 0  # it does spare the DP


def test_bad_order_and_stage_count_are_clear_errors():
    g = generate_dag(2, SyntheticDagConfig(num_nodes=10))
    with pytest.raises(PartitionError, match="each of the 10 nodes"):
        split_order(g, [0, 1, 2], 2)
    with pytest.raises(PartitionError, match="num_stages=11"):
        split_order(g, g.topological_order(), 11)


def test_packed_order_is_topological_and_packs_parallel_branches_below_libcoral():
    g = load_zoo_graph("nasnetlarge")  # cells of parallel branches: the topological order walks them one by one
    k = 16
    libcoral = evaluate_partition(g, refine_cuts(g, libcoral_partition(g, k), k), k)
    order = packed_order(g, k, libcoral[0])
    position = {v: i for i, v in enumerate(order)}
    assert sorted(order) == list(range(g.num_nodes))
    assert all(position[e.src] < position[e.dst] for e in g.edges)
    packed = packed_plan(g, k, libcoral[0])
    check_partition(g, packed, k)
    lower = global_lower_bounds(g, k, IlpConfig().cache_bytes)
    assert lower[0] <= evaluate_partition(g, packed, k)[0] < libcoral[0]


def test_auto_asks_for_the_packed_plan_only_where_the_window_is_an_ilp():
    wide, narrow = load_zoo_graph("nasnetlarge"), load_zoo_graph("resnet50")
    assert window_needs_ilp(wide, refine_cuts(wide, libcoral_partition(wide, 16), 16), 10)
    assert not window_needs_ilp(narrow, refine_cuts(narrow, libcoral_partition(narrow, 4), 4), 10)
    result = inc_ilp(narrow, 4, IncIlpConfig(initial="packed", ilp=ILP))
    assert result.initial_source == "packed"
    assert result.objectives == exact_partition(narrow, 4, ILP).objectives
