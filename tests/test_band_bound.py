"""The band bound: never excludes a window's true optimum (checked against CP-SAT's proven window
optima on random DAGs, for the peak and for the transfer after the peak), and on a wide real
window (NASNetMobile, where the window DP does not fit) it proves CP-SAT's incumbents optimal,
giving the same plan as the solve without it. Its greedy dive returns only plans within the
window and the caps, and on NASNetLarge's K = 16 window finds the optimum peak the bound holds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag
from hiertune.solvers.band_bound import (
    Caps,
    band_transfer_floor,
    boundary_bands,
    greedy_plan,
    least_open_cap,
    no_plan_within,
)
from hiertune.solvers.ideal_dp import ideal_lattice
from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.ilp import IlpConfig, graph_arrays, propagate_allowed, solve_partition, tensors
from hiertune.solvers.incilp import window_allowed
from hiertune.solvers.order_split import refine_cuts
from hiertune.solvers.zoo import load_zoo_graph


def _window(graph, k: int, gamma: float, window: str = "adjacent") -> tuple[list[int], list[list[int]]]:
    start = refine_cuts(graph, libcoral_partition(graph, k), k)
    return start, propagate_allowed(graph, k, window_allowed(graph, start, k, gamma, window))


@pytest.mark.parametrize("seed", [1, 4, 9, 12])
@pytest.mark.parametrize("k,window", [(3, "adjacent"), (5, "adjacent"), (4, "any")])
def test_the_band_bound_never_excludes_the_window_optimum(seed, k, window):
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=60))
    start, allowed = _window(g, k, gamma=2, window=window)
    exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=60, band_check_after_s=math.inf),
                            allowed=allowed, hint=start)
    assert exact.optimal
    peak, _, comm = exact.objectives
    param = graph_arrays(g).param
    assert not no_plan_within(g, allowed, k, Caps(weights=param, stage_cap=peak))  # the optimum is within
    assert not no_plan_within(g, allowed, k, Caps(weights=param, stage_cap=peak, tensors=tensors(g),
                                                  transfer_cap=comm))


def test_bands_hold_the_nodes_each_boundary_may_move():
    allowed = [[0], [0, 1], [1, 2], [0, 1, 2], [2]]
    inside_0, inside_1 = (band.inside.tolist() for band in boundary_bands(allowed, 3))
    assert inside_0 == [True, False, False, False, False] and inside_1 == [True, True, False, False, False]
    assert [band.free for band in boundary_bands(allowed, 3)] == [[1, 3], [2, 3]]


def test_a_wide_window_is_proven_by_the_band_bound_with_the_same_plan():
    g = load_zoo_graph("nasnetmobile", "tflite")
    k = 4
    start, allowed = _window(g, k, gamma=10)
    assert sum(len(a) > 1 for a in allowed) > 200  # a window the DP cannot enumerate
    plain = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120, band_check_after_s=math.inf),
                            allowed=allowed, hint=start)
    banded = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120, band_check_after_s=0.05),
                             allowed=allowed, hint=start)
    assert plain.optimal and banded.optimal
    assert banded.objectives == plain.objectives
    assert any("band bound" in line and "proved it" in line for line in banded.phases), banded.phases
    # the proven peak is a real lower bound of the window: one byte less is excluded
    param = graph_arrays(g).param
    assert no_plan_within(g, allowed, k, Caps(weights=param, stage_cap=int(banded.objectives[0]) - 1))
    assert np.bincount(banded.stages, weights=param, minlength=k).max() == banded.objectives[0]


@pytest.mark.parametrize("seed", [2, 5, 7, 11, 13])
@pytest.mark.parametrize("k,window", [(3, "adjacent"), (5, "adjacent"), (4, "any")])
def test_the_transfer_floor_is_the_largest_of_the_bands_least_cuts(seed, k, window):
    """Against enumeration: every ideal of a small DAG, kept per band where it holds the band's
    sure nodes and nothing beyond its free ones; the floor is the largest band minimum of the cut."""
    g = generate_dag(seed, SyntheticDagConfig(num_nodes=16))
    _, allowed = _window(g, k, gamma=0, window=window)
    lattice = ideal_lattice(g, 10**6)
    floor = 0
    for band in boundary_bands(allowed, k):
        sure = sum(1 << v for v in np.flatnonzero(band.inside).tolist())
        may = sure | sum(1 << v for v in band.free)
        floor = max(floor, min(c for m, c in zip(lattice.masks, lattice.cut) if m & sure == sure and not m & ~may))
    assert band_transfer_floor(g, allowed, k) == floor


def test_a_window_whose_bands_pin_the_transfer_is_solved_at_the_floor():
    """NASNetMobile at K = 8: every ideal of some band sends at least the window's optimum, so the
    transfer phase starts at its optimum as its lower bound; wider, the phase needs no solve."""
    g = load_zoo_graph("nasnetmobile", "tflite")
    k = 8
    start, allowed = _window(g, k, gamma=10)
    floor = band_transfer_floor(g, allowed, k)
    assert floor > 0
    assert band_transfer_floor(g, [list(range(k))] * g.num_nodes, k) == 0  # no window: no floor
    res = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120), allowed=allowed, hint=start)
    assert res.optimal and res.objectives[2] == floor
    again = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=120),
                            allowed=propagate_allowed(g, k, window_allowed(g, res.stages, k, 20)), hint=res.stages)
    assert again.objectives == res.objectives and "comm: at its lower bound" in again.phases


def test_neighbouring_pairs_close_what_single_bands_leave_open():
    """NASNetLarge at K = 16 from the pointer net's start: the window's optimum peak is 5,712,336 B
    (CP-SAT proves it after minutes). Each band alone allows a plan one byte below it; with the
    neighbour's ideal inside each band's, none is left, while the optimum itself stays allowed."""
    from hiertune.policies.pointer_net import default_scheduler
    from hiertune.solvers.band_bound import _largest_ideal

    g, k, optimum = load_zoo_graph("nasnetlarge", "tflite"), 16, 5_712_336
    scheduler = default_scheduler()
    if scheduler is None:
        pytest.skip("no shipped pointer-net checkpoint")
    start = refine_cuts(g, scheduler.partition(g, k), k)
    allowed = propagate_allowed(g, k, window_allowed(g, start, k, 10))
    param = graph_arrays(g).param
    below = Caps(weights=param, stage_cap=optimum - 1)
    x = 0  # the single-band chain
    for band in boundary_bands(allowed, k):
        x = _largest_ideal(band, param, x + below.stage_cap, g.predecessors(), g.successors(), below, math.inf)
        assert x is not None
    assert int(param.sum()) - x <= below.stage_cap  # single bands: not excluded
    assert no_plan_within(g, allowed, k, below, time_limit_s=60)  # pairs: excluded
    assert not no_plan_within(g, allowed, k, Caps(weights=param, stage_cap=optimum), time_limit_s=60)


@pytest.mark.parametrize("seed", [1, 4, 9, 12])
def test_the_greedy_dive_returns_only_plans_within_the_window_and_its_caps(seed):
    g, k = generate_dag(seed, SyntheticDagConfig(num_nodes=60)), 5
    start, allowed = _window(g, k, gamma=2)
    param = graph_arrays(g).param
    exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=60, band_check_after_s=math.inf),
                            allowed=allowed, hint=start)
    found = 0
    for cap in (exact.objectives[0], int(np.bincount(start, weights=param, minlength=k).max())):
        plan = greedy_plan(g, allowed, k, Caps(weights=param, stage_cap=cap), deadline=math.inf)
        if plan is None:
            continue
        found += 1
        assert all(plan[v] in ks for v, ks in enumerate(allowed))
        assert all(plan[e.src] <= plan[e.dst] for e in g.edges)
        assert np.bincount(plan, weights=param, minlength=k).max() <= cap
    assert found  # at the start's own peak at least, the dive finds a plan
    assert greedy_plan(g, allowed, k, Caps(weights=param, stage_cap=exact.objectives[0] - 1), math.inf) is None


def test_the_dive_finds_the_optimum_peak_the_bound_holds():
    """NASNetLarge at K = 16 from libcoral's start: CP-SAT takes about a minute to find the
    window's optimum peak, 5,724,432 B; the bisection over single bands finds that value as the
    least one left open, and the dive a plan at it (seconds)."""
    g, k, optimum = load_zoo_graph("nasnetlarge", "tflite"), 16, 5_724_432
    start, allowed = _window(g, k, gamma=10)
    param = graph_arrays(g).param
    peak = int(np.bincount(start, weights=param, minlength=k).max())
    caps_at = lambda cap: Caps(weights=param, stage_cap=cap)  # noqa: E731
    floor = least_open_cap(g, allowed, k, caps_at, optimum - 1000, lambda: peak - 1, pairs=False, deadline=math.inf)
    assert floor == optimum
    plan = greedy_plan(g, allowed, k, caps_at(floor), deadline=math.inf)
    assert plan is not None and np.bincount(plan, weights=param, minlength=k).max() == optimum
