"""The stage-partition ILP: backends agree on the lexicographic optimum, plans are valid, the
evaluator counts what the model counts, Gurobi's size-limited licence falls back to CP-SAT."""

from __future__ import annotations

import itertools
import random
import threading
import time
import warnings

import pytest

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.errors import HiertuneError
from hiertune.solvers.backends import (
    GUROBI_SIZE_LIMIT,
    BackendSettings,
    CpSatModel,
    StopSignal,
    gurobi_available,
    gurobi_full_licence,
    solve_linear,
)
from hiertune.solvers.linear import LinExpr, LinearModel
from hiertune.solvers.graph import Edge, OpGraph, OpNode
from hiertune.solvers.zoo import load_zoo_graph
from hiertune.solvers.ilp import (
    IlpConfig,
    PartitionError,
    build_model,
    check_partition,
    choose_solver,
    evaluate_partition,
    interval_peak_bound,
    solve_partition,
)

SOLVERS = ["gurobi", "highs", "cpsat"]


def small_graph(seed: int, n: int = 24) -> OpGraph:
    return generate_dag(seed, SyntheticDagConfig(num_nodes=n))


def valid_plans(graph: OpGraph, k: int, allowed: list[list[int]] | None = None) -> list[list[int]]:
    """Every plan with all k stages used, in dependency order, within `allowed` (by brute force)."""
    sets = allowed or [range(k)] * graph.num_nodes
    return [list(p) for p in itertools.product(range(k), repeat=graph.num_nodes)
            if all(s in ks for s, ks in zip(p, sets)) and len(set(p)) == k
            and all(p[e.src] <= p[e.dst] for e in graph.edges)]


def brute_force(graph: OpGraph, k: int, cache: int) -> tuple[int, int, int]:
    return min(evaluate_partition(graph, p, k, cache) for p in valid_plans(graph, k))


def test_evaluator_counts_each_tensor_once_per_boundary():
    # a -> b, a -> c (one tensor of 100 bytes read twice), b -> c (10 bytes)
    g = OpGraph("t", [OpNode("a", "X", 5), OpNode("b", "X", 7), OpNode("c", "X", 11)],
                [Edge(0, 1, 100), Edge(0, 2, 100), Edge(1, 2, 10)])
    assert evaluate_partition(g, [0, 1, 2], 3, cache_bytes=6) == (11, 1 + 5, 110)
    assert evaluate_partition(g, [0, 0, 1], 2, cache_bytes=100) == (12, 0, 110)
    with pytest.raises(PartitionError, match="breaks a dependency"):
        evaluate_partition(g, [1, 0, 1], 2)
    with pytest.raises(PartitionError, match="outside"):
        evaluate_partition(g, [0, 0, 2], 2)


def _direct_objectives(graph: OpGraph, stages: list[int], k: int, cache: int) -> tuple[int, int, int]:
    """The objectives counted edge by edge, without the evaluator's arrays."""
    mem = [0] * k
    for v, s in enumerate(stages):
        mem[s] += graph.nodes[v].param_bytes
    last: dict[tuple[int, int], int] = {}
    for e in graph.edges:  # one tensor per (producer, bytes), shipped to its last consumer's stage
        key = (e.src, e.tensor_bytes)
        last[key] = max(last.get(key, 0), stages[e.dst])
    comm = [sum(b for (u, b), w in last.items() if stages[u] <= cut < w) for cut in range(k - 1)]
    return max(mem), sum(max(0, m - cache) for m in mem), max(comm, default=0)


def test_evaluator_matches_a_direct_count_on_a_real_graph():
    g = load_zoo_graph("resnet50", "keras")
    order = g.topological_order()
    rng = random.Random(0)
    for k in (1, 2, 5):
        for _ in range(10):
            cuts = sorted(rng.sample(range(1, g.num_nodes), k - 1))
            stages = [0] * g.num_nodes
            for position, v in enumerate(order):
                stages[v] = sum(position >= c for c in cuts)
            assert evaluate_partition(g, stages, k, 2**20) == _direct_objectives(g, stages, k, 2**20)


def test_a_revalidated_graph_is_evaluated_afresh():
    g = OpGraph("t", [OpNode("a", "X", 5), OpNode("b", "X", 7), OpNode("c", "X", 11)], [Edge(0, 1, 100)])
    assert evaluate_partition(g, [0, 1, 1], 2) == (18, 0, 100)
    g.edges.append(Edge(0, 2, 40))  # a new tensor: the memoised structures must not hide it
    g.validate()
    assert evaluate_partition(g, [0, 1, 1], 2) == (18, 0, 140)


@pytest.mark.parametrize("seed", [3, 11])
def test_ilp_matches_brute_force(seed):
    g = small_graph(seed, n=8)
    cache = g.total_param_bytes // 4
    want = brute_force(g, 3, cache)
    for solver in SOLVERS:
        res = solve_partition(g, 3, IlpConfig(solver=solver, cache_bytes=cache, time_limit_s=30))
        assert res.optimal and res.solver == solver
        assert res.objectives == want, solver


@pytest.mark.parametrize("seed,k", [(1, 3), (7, 4)])
def test_backends_reach_the_same_lexicographic_optimum(seed, k):
    g = small_graph(seed, n=26)
    cache = g.total_param_bytes // (k + 1)  # some stages spill, so the off-cache phase has work
    results = {s: solve_partition(g, k, IlpConfig(solver=s, cache_bytes=cache, time_limit_s=60)) for s in SOLVERS}
    objectives = {s: r.objectives for s, r in results.items()}
    assert len(set(objectives.values())) == 1, objectives
    for r in results.values():
        assert r.optimal
        check_partition(g, r.stages, k)
        assert sorted(set(r.stages)) == list(range(k))  # every stage holds a node
        assert evaluate_partition(g, r.stages, k, cache) == r.objectives


@pytest.mark.parametrize("seed", [3, 11])
def test_cumulative_model_with_gaps_in_the_allowed_stages(seed):
    """The model encodes a node's stage by cumulative variables over its allowed stages only; with
    gaps ({0, 2}, {1, 3}) every valid plan must map to variable values and back, and the optimum
    must equal brute force over the same sets."""
    g = small_graph(seed, n=8)
    k = 4
    shapes = [{0, 2}, {0, 1, 3}, {1, 3}, {0, 1, 2, 3}, {2}, {0, 2, 3}, {1, 2, 3}, {3}]
    allowed = [shapes[v % len(shapes)] for v in range(g.num_nodes)]
    cache = g.total_param_bytes // 5
    model = build_model(g, k, cache, allowed)
    plans = valid_plans(g, k, model.allowed)
    assert plans, "these fixed seeds were chosen so the allowed sets admit plans"
    for plan in plans:
        assert model.decode(model.values(plan, 3)) == plan
    want = min(evaluate_partition(g, p, k, cache) for p in plans)
    for solver in ("cpsat", "highs"):
        res = solve_partition(g, k, IlpConfig(solver=solver, cache_bytes=cache, time_limit_s=30), allowed=allowed)
        assert res.optimal and res.objectives == want, solver
        assert all(s in ks for s, ks in zip(res.stages, allowed))


def test_allowed_sets_are_respected_and_propagated():
    g = small_graph(5, n=20)
    k = 3
    allowed = [{0, 1, 2} for _ in range(g.num_nodes)]
    order = g.topological_order()
    allowed[order[0]] = {0}
    allowed[order[-1]] = {2}
    res = solve_partition(g, k, IlpConfig(solver="cpsat"), allowed=allowed)
    assert res.stages[order[0]] == 0 and res.stages[order[-1]] == 2
    fixed_all = solve_partition(g, k, IlpConfig(solver="cpsat"), allowed=[{s} for s in res.stages])
    assert fixed_all.stages == res.stages and fixed_all.num_vars == 2 + k  # only objective variables left


def test_bad_requests_are_clear():
    g = small_graph(2, n=5)
    with pytest.raises(PartitionError, match="at least as many nodes"):
        solve_partition(g, 6)
    with pytest.raises(PartitionError, match="at least 1"):
        solve_partition(g, 0)
    with pytest.raises(Exception, match="unknown solver"):
        solve_partition(g, 2, IlpConfig(solver="cplex"))
    with pytest.raises(PartitionError, match="no stage|no node|widen"):
        solve_partition(g, 2, allowed=[{0}] * g.num_nodes)


def chain(n: int) -> OpGraph:
    nodes = [OpNode(f"n{i}", "CONV_2D", 1000 + (i * 7919) % 5000) for i in range(n)]
    return OpGraph("chain", nodes, [Edge(i, i + 1, 100 + i) for i in range(n - 1)])


@pytest.mark.skipif(not gurobi_available(), reason="gurobipy not importable")
def test_gurobi_size_limit_falls_back_to_cpsat():
    if gurobi_full_licence():
        pytest.skip("a full Gurobi licence is installed: no size limit to hit")
    g = chain(450)
    k = 5
    model = build_model(g, k, 8 * 1024**2, None)
    assert model.lm.num_vars > GUROBI_SIZE_LIMIT
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = solve_partition(g, k, IlpConfig(solver="gurobi", time_limit_s=60))
    assert res.solver == "cpsat" and res.fallback and "size limit" in res.fallback
    assert any("10010" in str(w.message) or "size limit" in str(w.message) for w in caught)
    check_partition(g, res.stages, k)
    # auto goes straight to CP-SAT on a big model and to Gurobi on a small one
    assert choose_solver("auto", model) == ("cpsat", None)
    assert choose_solver("auto", build_model(small_graph(1, 20), 3, 8 * 1024**2, None))[0] == "gurobi"


def test_a_start_at_a_phase_lower_bound_skips_that_solve():
    # four equal nodes in a chain, 2 stages: the even split meets the peak's lower bound (total / K)
    g = OpGraph("even", [OpNode(f"n{i}", "X", 10) for i in range(4)], [Edge(i, i + 1, 5 + i) for i in range(3)])
    config = IlpConfig(solver="cpsat", cache_bytes=1000)
    res = solve_partition(g, 2, config, hint=[0, 0, 1, 1])
    assert res.phases[0] == "peak: at its lower bound" and res.phases[1] == "off-cache: at its lower bound"
    assert res.optimal and res.objectives == solve_partition(g, 2, config).objectives == (20, 0, 6)
    res = solve_partition(g, 2, config, hint=[0, 1, 1, 1])  # peak 30 > 20: solved, and improved
    assert not res.phases[0].endswith("lower bound") and res.objectives == (20, 0, 6)


@pytest.mark.parametrize("seed", [2, 5, 9])
def test_interval_peak_bound_never_exceeds_the_optimum(seed):
    g = small_graph(seed, n=8)
    k = 3
    allowed = [{0}, {0, 1}, {0, 1}, {1}, {1, 2}, {1, 2}, {1, 2}, {2}]  # a window: nodes beside two cuts
    model = build_model(g, k, 10**12, allowed)
    plans = valid_plans(g, k, model.allowed)
    assert plans, "these fixed seeds were chosen so the window admits plans"
    best_peak = min(evaluate_partition(g, p, k, 10**12)[0] for p in plans)
    param = [v.param_bytes for v in g.nodes]
    bound = interval_peak_bound(param, model.allowed, k)
    assert bound <= best_peak
    assert bound >= -(-sum(param) // k)  # never weaker than the even split


def test_cpsat_parameters_reach_the_solver_and_bad_ones_are_named():
    g = small_graph(4, n=10)
    tuned = solve_partition(g, 3, IlpConfig(solver="cpsat"))
    plain = solve_partition(g, 3, IlpConfig(solver="cpsat", cpsat_parameters={}))
    assert tuned.objectives == plain.objectives and tuned.optimal and plain.optimal
    with pytest.raises(HiertuneError, match="no_such_field"):
        solve_partition(g, 3, IlpConfig(solver="cpsat", cpsat_parameters={"no_such_field": 1}))


def test_a_stop_signal_ends_a_running_solve_with_its_incumbents_kept():
    """The band bound stops a solve from another thread: the solve must return soon after, with
    the incumbents it reported, not run to its limit. Number partitioning of 30-bit integers
    with an odd total proves its optimum (a difference of 1) only after a long search. (Gurobi,
    whose `terminate` the signal calls, rounds such coefficients to a false optimum of 0.)"""
    rng = random.Random(3)
    numbers = [rng.randrange(1 << 30) for _ in range(40)]
    numbers[0] += 1 - sum(numbers) % 2  # an odd total: no perfect split, the LP bound 0 never closes
    lm = LinearModel()
    side = [lm.add_var(0, 1) for _ in numbers]
    diff = lm.add_var(0, sum(numbers))
    total = LinExpr(sum(numbers), {v: -2 * n for v, n in zip(side, numbers)})
    lm.add_le(total, LinExpr.var(diff))  # diff >= |sum(numbers) - 2 * sum(side)|
    lm.add_le(LinExpr(0) - total, LinExpr.var(diff))
    found: list[list[int]] = []
    stop = StopSignal()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    t0 = time.perf_counter()
    out = solve_linear("cpsat", lm, {diff: 1}, BackendSettings(time_limit_s=60, stop=stop, on_solution=found.append))
    assert time.perf_counter() - t0 < 10
    assert not out.optimal and out.values is not None and found
    assert out.objective <= lm.objective_value({diff: 1}, found[0])


def test_cpsat_model_copy_follows_extensions_and_restarts_on_a_different_model():
    """The phases share CP-SAT's copy of the model: an extended model (new rows, a tightened
    bound) must solve as if copied afresh, and an unrelated model must not inherit old rows."""
    settings = BackendSettings(time_limit_s=10)
    lm = LinearModel()
    x, y = lm.add_var(0, 10), lm.add_var(0, 10)
    lm.add_row({x: 1, y: 1}, lo=7)  # x + y >= 7
    shared = CpSatModel()
    assert solve_linear("cpsat", lm, {x: 1}, settings, cpsat_model=shared).objective == 0
    lm.ub[y] = 4  # a tightened bound, as after a phase
    lm.add_row({x: 1, y: -1}, hi=0)  # x <= y, so x >= 3
    assert solve_linear("cpsat", lm, {x: 1}, settings, cpsat_model=shared).objective == 3
    lm.ub[y] = 3
    assert solve_linear("cpsat", lm, {x: 1}, settings, cpsat_model=shared).values is None  # x >= 4 > y
    lm.rows.pop()
    fresh = solve_linear("cpsat", lm, {x: 1}, settings)
    again = solve_linear("cpsat", lm, {x: 1}, settings, cpsat_model=shared)  # a row removed: copied afresh
    assert again.objective == fresh.objective == 4 and len(shared.proto.constraints) == 1
    other = LinearModel()
    z = other.add_var(2, 5)
    assert solve_linear("cpsat", other, {z: 1}, settings, cpsat_model=shared).values == [2]
    assert len(shared.proto.constraints) == 0 and len(shared.proto.variables) == 1


def _tied_chain() -> OpGraph:
    """Six ops in a chain, parameters only at the ends and nothing worth shipping: every 2-stage
    cut ties on the paper's three objectives, while the MACs make the middle cut the balanced one."""
    params, macs = [10, 0, 0, 0, 0, 10], [100, 100, 100, 100, 100, 100]
    return OpGraph("tied", [OpNode(f"n{i}", "CONV_2D", p, m) for i, (p, m) in enumerate(zip(params, macs))],
                   [Edge(i, i + 1, 0) for i in range(5)])


def test_the_macs_objective_picks_the_balanced_plan_among_ties():
    g = _tied_chain()
    lopsided = [0, 1, 1, 1, 1, 1]
    paper = solve_partition(g, 2, IlpConfig(solver="cpsat"), hint=lopsided)
    assert paper.stages == lopsided and paper.max_stage_macs == 500  # all three at their bounds: kept
    for solver in SOLVERS:
        res = solve_partition(g, 2, IlpConfig(solver=solver, objectives=("peak", "off-cache", "comm", "macs")),
                              hint=lopsided)
        assert res.optimal and res.objectives == paper.objectives  # the paper's three do not get worse
        assert res.max_stage_macs == 300 < paper.max_stage_macs, solver
        assert res.stages == [0, 0, 0, 1, 1, 1] and res.key == (*paper.objectives, 300)


def test_objective_order_is_configurable_and_checked():
    # a chain: a (40 B, 10 MACs) -> b (1 B, 100) -> c (1 B, 100), two stages
    g = OpGraph("order", [OpNode("a", "X", 40, 10), OpNode("b", "X", 1, 100), OpNode("c", "X", 1, 100)],
                [Edge(0, 1, 4), Edge(1, 2, 4)])
    for solver in ("cpsat", "highs"):
        peak_first = solve_partition(g, 2, IlpConfig(solver=solver, objectives=("peak", "macs")))
        assert peak_first.stages == [0, 1, 1] and peak_first.key == (40, 200)
        macs_first = solve_partition(g, 2, IlpConfig(solver=solver, objectives=("macs", "peak")))
        assert macs_first.stages == [0, 0, 1] and macs_first.key == (110, 41)
        assert macs_first.objectives == (41, 0, 4) and macs_first.max_stage_macs == 110
    for bad in ((), ("peak", "peak"), ("peak", "latency")):
        with pytest.raises(PartitionError, match="--objectives"):
            solve_partition(g, 2, IlpConfig(objectives=bad))
    with pytest.raises(PartitionError, match="--objectives"):  # the ideal DP does the paper's three only
        solve_partition(g, 2, IlpConfig(solver="ideal-dp", objectives=("peak", "off-cache", "comm", "macs")))
    with pytest.raises(PartitionError, match="no per-operator MACs"):
        solve_partition(small_graph(1, 8), 2, IlpConfig(objectives=("peak", "macs")))


def test_expression_rows_read_as_written():
    lm = LinearModel()
    x, y = lm.add_var(0, 10), lm.add_var(0, 10)
    lm.add_ge(LinExpr.var(x) - 3, LinExpr.var(y) + LinExpr(2))  # x - 3 >= y + 2
    lm.add_le(LinExpr.var(x) + LinExpr.var(y), 12)
    assert lm.rows == [({x: 1, y: -1}, 5, float("inf")), ({x: 1, y: 1}, float("-inf"), 12)]
    lm.add_ge(LinExpr.var(x) - LinExpr.var(x), -1)  # a constant row that holds is dropped
    with pytest.raises(ValueError, match="infeasible"):
        lm.add_ge(LinExpr(1), 2)
    assert solve_linear("cpsat", lm, {y: -1}, BackendSettings(time_limit_s=10)).values == [8, 3]


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_incumbent_is_handed_over_as_a_valid_plan(solver):
    """The time-to-target hook (bench/incilp_scale.py): each plan found on the way is a valid
    partition, none is better than the optimum, and the last one is the optimum."""
    g = small_graph(7, n=26)
    cache = g.total_param_bytes // 5
    seen: list[list[int]] = []
    res = solve_partition(g, 4, IlpConfig(solver=solver, cache_bytes=cache, time_limit_s=60), on_incumbent=seen.append)
    assert res.optimal and seen
    keys = []
    for plan in seen:
        check_partition(g, plan, 4)
        keys.append(evaluate_partition(g, plan, 4, cache))
    assert min(keys) == res.objectives == keys[-1]
