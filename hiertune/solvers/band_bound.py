"""The band bound: a fast proof that no plan of an Inc-ILP window beats a given objective value.

A K-stage plan is a chain of ideals I_0 <= ... <= I_{K-2} (I_b = the nodes in stages 0..b). In a
window, I_b must hold every node whose allowed stages all lie at or before b and may hold only
the nodes with an allowed stage at or before b: its *band*. Stage k's parameter bytes are
w(I_k) - w(I_{k-1}); the bytes crossing boundary b depend on I_b alone.

Drop the containment between neighbouring ideals and every I_b ranges over its own band: a
relaxation, so what it excludes no real plan reaches. In it, "every stage <= P" reads
x_0 <= P, x_b <= x_{b-1} + P, W - x_{K-2} <= P for the ideal weights x_b, and each constraint
only caps x_b from above by a quantity growing in x_{b-1}: taking each x_b as large as its band
allows (an exact precedence-constrained knapsack per band, by CP-SAT) is exact for the relaxation.
A transfer cap M adds "bytes crossing b <= M" to band b's knapsack. If the greedy chain breaks,
no plan in the window has every stage <= P (and every transfer <= M).

Tighter, and what `no_plan_within` tries when the single bands prove nothing: keep the
containment between neighbours only. By
induction every real plan has w(I_{b-1}) <= x_{b-1}, so x_b = max w(I_b) over pairs
I_{b-1} <= I_b of the two bands' ideals with w(I_{b-1}) <= x_{b-1} and w(I_b) - w(I_{b-1}) <= P
is again an upper bound (one CP-SAT model of two bands per boundary). Where neighbouring bands
overlap (many stages) the pair excludes what the single band allows: on NASNetLarge at K = 16
the single bands left a peak 6,384 B below the window's optimum open, the pairs prove it.

Why: on a wide graph (NASNet's cells) the window's ILP finds its optimum fast and then spends
minutes proving it (CP-SAT and Gurobi alike), while the window's fixed nodes often make this
relaxation tight (measured in docs/incilp.md). On a whole graph (every node free at every
boundary) the bands are the whole graph and the bound falls to about the even split, so it is for
windows only.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hiertune.solvers.backends import StopSignal
from hiertune.solvers.graph import OpGraph

Tensor = tuple[int, int, list[int]]  # (producer, bytes, consumers), as `ilp.tensors` gives them


@dataclass(frozen=True)
class Caps:
    """What every plan must meet: each stage's sum of `weights` <= `stage_cap`, each boundary's
    transfer (over `tensors`) <= `transfer_cap`; a None cap is no constraint."""

    weights: np.ndarray | None = None
    stage_cap: int | None = None
    tensors: list[Tensor] | None = None
    transfer_cap: int | None = None


@dataclass(frozen=True)
class Band:
    """Boundary b's band: the nodes every I_b holds, and the nodes it may hold."""

    inside: np.ndarray  # bool per node: allowed stages all <= b
    free: list[int]  # nodes with allowed stages on both sides of b


def boundary_bands(allowed: list[list[int]], num_stages: int) -> list[Band]:
    """One band per boundary 0..K-2 from sorted per-node allowed stages."""
    lo = np.fromiter((ks[0] for ks in allowed), dtype=np.int64, count=len(allowed))
    hi = np.fromiter((ks[-1] for ks in allowed), dtype=np.int64, count=len(allowed))
    return [Band(hi <= b, np.flatnonzero((lo <= b) & (hi > b)).tolist()) for b in range(num_stages - 1)]


def no_plan_within(graph: OpGraph, allowed: list[list[int]], num_stages: int, caps: Caps,
                   time_limit_s: float = 10.0, cancelled: Callable[[], bool] = lambda: False) -> bool:
    """True when the band relaxation proves that no plan within `allowed` meets `caps`: band by
    band, the heaviest ideal the caps allow after the one before: first each band alone, then (if
    that proves nothing) each with its neighbour's ideal inside it. False means
    only "not proven": a band whose knapsack runs out of time counts as its upper bound, and
    `cancelled()` (asked before each band) gives up."""
    deadline = time.perf_counter() + time_limit_s
    pred, succ = graph.predecessors(), graph.successors()
    chained = caps.weights is not None and caps.stage_cap is not None
    w = np.asarray(caps.weights if caps.weights is not None else np.zeros(graph.num_nodes), dtype=np.int64)
    bands = boundary_bands(allowed, num_stages)
    for paired in ((False, True) if chained else (False,)):  # single bands first: often enough, and cheaper
        x = 0  # the largest weight the relaxation allows I_{b-1}
        for b, band in enumerate(bands):
            if cancelled():
                return False
            if paired and b > 0:
                x_b = _largest_ideal_after(bands[b - 1], band, w, x, caps.stage_cap, pred, succ, caps, deadline)
            else:
                x_b = _largest_ideal(band, w, x + caps.stage_cap if chained else math.inf, pred, succ, caps, deadline)
            if x_b is None:
                return True
            x = x_b
        if chained and int(w.sum()) - x > caps.stage_cap:
            return True
    return False


class _BandIdeal:
    """Band b's ideal I_b in a CP-SAT model: a Boolean per free node, closed under predecessors,
    within the transfer cap; `weight` is w(I_b) as a linear expression."""

    def __init__(self, model, band: Band, w: np.ndarray, pred: list[list[int]], succ: list[list[int]],
                 caps: Caps, name: str):
        self.band = band
        self.index = {v: i for i, v in enumerate(band.free)}
        self.z = [model.new_bool_var(f"{name}[{v}]") for v in band.free]
        self.feasible = True
        for v, i in self.index.items():
            for u in pred[v]:  # an ideal holds every predecessor of its nodes
                if self.surely(u) is False:
                    model.add(self.z[i] == 0)
                elif u in self.index:
                    model.add_implication(self.z[i], self.z[self.index[u]])
            if any(self.surely(s) for s in succ[v]):
                model.add(self.z[i] == 1)
        if caps.transfer_cap is not None:
            sure, terms = 0, []
            for u, nbytes, consumers in caps.tensors or []:
                if nbytes == 0 or self.surely(u) is False or all(self.surely(c) for c in consumers):
                    continue
                if self.surely(u) and any(self.surely(c) is False for c in consumers):
                    sure += nbytes  # surely crosses b
                    continue
                cross = model.new_bool_var(f"{name}.cross[{u}]")
                for c in consumers:
                    if not self.surely(c):
                        model.add(cross >= self.member(u) - self.member(c))
                terms.append(nbytes * cross)
            self.feasible = sure <= caps.transfer_cap
            if terms:
                model.add(sum(terms) <= caps.transfer_cap - sure)
        self.base = int(w[band.inside].sum())
        self.weight = self.base + sum(int(w[v]) * self.z[i] for v, i in self.index.items() if w[v])

    def surely(self, v: int) -> bool | None:
        """True / False when v is surely in / out of I_b; None when it is free."""
        return None if v in self.index else bool(self.band.inside[v])

    def member(self, v: int):
        state = self.surely(v)
        return self.z[self.index[v]] if state is None else int(state)


def _largest_ideal_after(before: Band, band: Band, w: np.ndarray, x_before: int, stage_cap: int,
                         pred: list[list[int]], succ: list[list[int]], caps: Caps, deadline: float) -> int | None:
    """An upper bound on the largest w(I_b) over pairs I_{b-1} <= I_b of the two bands' ideals with
    w(I_{b-1}) <= x_before (its bound) and stage b = w(I_b) - w(I_{b-1}) <= stage_cap: containment
    kept between neighbours, so at least as tight as `_largest_ideal` at cap x_before + stage_cap."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    prev = _BandIdeal(model, before, w, pred, succ, caps, "prev")
    cur = _BandIdeal(model, band, w, pred, succ, caps, "cur")
    if not (prev.feasible and cur.feasible):
        return None
    held = [prev.member(v) <= cur.member(v) for v in set(prev.index) | set(cur.index)]  # I_{b-1} inside I_b
    if not _require(model, [*held, prev.weight <= x_before, cur.weight - prev.weight <= stage_cap]):
        return None
    return _solve_max(model, cur.weight, x_before + stage_cap, deadline)


def _require(model, constraints: list) -> bool:
    """Adds each constraint; one between constants is a bool: False when it fails."""
    for constraint in constraints:
        if isinstance(constraint, (bool, np.bool_)):
            if not constraint:
                return False
        else:
            model.add(constraint)
    return True


def _largest_ideal(band: Band, w: np.ndarray, cap: float, pred: list[list[int]], succ: list[list[int]],
                   caps: Caps, deadline: float) -> int | None:
    """An upper bound on the largest w(I) <= cap over the band's ideals that meet the transfer
    cap; None when no such ideal exists."""
    from ortools.sat.python import cp_model

    base = int(w[band.inside].sum())
    if base > cap:
        return None
    free_weight = int(w[band.free].sum())
    if caps.transfer_cap is None and base + free_weight <= cap:
        return base + free_weight  # every free node fits: the band's largest ideal
    model = cp_model.CpModel()
    ideal = _BandIdeal(model, band, w, pred, succ, caps, "in")
    if not ideal.feasible:
        return None
    if math.isfinite(cap) and not _require(model, [ideal.weight <= int(cap)]):
        return None
    return _solve_max(model, ideal.weight, int(cap) if math.isfinite(cap) else base + free_weight, deadline)


def _solve_max(model, weight, loosest: int, deadline: float) -> int | None:
    """max `weight` over `model` as an upper bound: None when infeasible, the solver's bound when
    it runs out of time, `loosest` when it decides nothing."""
    from ortools.sat.python import cp_model

    fixed = isinstance(weight, int)  # no free node weighs anything: feasibility only
    if not fixed:
        model.maximize(weight)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(deadline - time.perf_counter(), 0.01)
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # not decided: the loosest it can be
        return loosest
    if fixed:
        return weight
    if status == cp_model.OPTIMAL:
        return int(round(solver.objective_value))
    return int(math.floor(solver.best_objective_bound + 1e-6))


class BandCheck(threading.Thread):
    """A running solve's incumbents checked against the band bound in a thread of its own, so the
    solver searches on undisturbed (CP-SAT's and Gurobi's solves release the GIL): from its start
    on, each incumbent better than the last one checked is tested for "no plan has a value below
    it", each check given as long as the solve has run since `since` (at least `min_s`). Once that
    holds, `stop` ends the solve and `proven` holds the incumbent's values. Checked only between
    the solve's slices, an incumbent found early in a long slice waited for the slice's end."""

    def __init__(self, graph: OpGraph, allowed: list[list[int]], num_stages: int,
                 value_of: Callable[[list[int]], int], caps_below: Callable[[int], Caps], stop: StopSignal,
                 since: float, min_s: float, deadline: float):
        super().__init__(name="band-check", daemon=True)
        self._problem = (graph, allowed, num_stages)
        self._value_of, self._caps_below, self._stop_signal = value_of, caps_below, stop
        self._since, self._min_s, self._deadline = since, min_s, deadline
        self._wake = threading.Condition()
        self._latest: list[int] | None = None  # the newest incumbent not yet taken
        self._done = False
        self.proven: list[int] | None = None
        self.checked: list[int] = []  # the values checked, in order
        self.seconds = 0.0  # spent checking

    def offer(self, values: list[int]) -> None:
        """A new incumbent (the solver's solution callback)."""
        with self._wake:
            self._latest = values
            self._wake.notify()

    def finish(self) -> None:
        """The solve has returned: a check under way gives up at its next band."""
        with self._wake:
            self._done = True
            self._wake.notify()
        self.join()

    def run(self) -> None:
        again: list[int] | None = None  # an incumbent whose check ran out of time: checked again later
        again_at = math.inf
        while True:
            with self._wake:
                until = min(again_at, self._deadline)
                self._wake.wait_for(lambda: self._done or self._latest is not None,
                                    timeout=max(until - time.perf_counter(), 0.0))
                if self._done:
                    return
                values, self._latest = self._latest, None
            if values is None:  # no better incumbent: the timed-out check's turn, else the end
                if again is None or time.perf_counter() >= self._deadline:
                    return
                values = again
            value = self._value_of(values)
            if values is not again and self.checked and value >= self.checked[-1]:
                continue  # the same value would get the same answer
            t0 = time.perf_counter()
            limit = min(max(self._min_s, t0 - self._since), max(self._deadline - t0, 0.1))  # at most the solve so far
            proven = no_plan_within(*self._problem, self._caps_below(value), limit, lambda: self._done)
            spent = time.perf_counter() - t0
            self.seconds += spent
            self.checked.append(value)
            if proven:
                self.proven = values
                self._stop_signal.set()
                return
            # a check that used its whole time may only have been too short: again with 4x as long
            again, again_at = (values, self._since + 4 * limit) if spent >= 0.9 * limit else (None, math.inf)
