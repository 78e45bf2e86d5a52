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
                   time_limit_s: float = 10.0, stop: StopSignal | None = None, pairs: bool = True) -> bool:
    """True when the band relaxation proves that no plan within `allowed` meets `caps`: band by
    band, the heaviest ideal the caps allow after the one before: first each band alone, then (if
    that proves nothing, and `pairs`) each with its neighbour's ideal inside it. False means
    only "not proven": a band whose knapsack runs out of time counts as its upper bound, and
    `stop` (set from another thread) ends the knapsack under way and gives up."""
    deadline = time.perf_counter() + time_limit_s
    pred, succ = graph.predecessors(), graph.successors()
    chained = caps.weights is not None and caps.stage_cap is not None
    w = np.asarray(caps.weights if caps.weights is not None else np.zeros(graph.num_nodes), dtype=np.int64)
    bands = boundary_bands(allowed, num_stages)
    for paired in ((False, True) if chained and pairs else (False,)):  # single bands first: often enough, and cheaper
        x = 0  # the largest weight the relaxation allows I_{b-1}
        for b, band in enumerate(bands):
            if stop is not None and stop.requested:
                return False
            if paired and b > 0:
                x_b = _largest_ideal_after(bands[b - 1], band, w, x, caps.stage_cap, pred, succ, caps, deadline, stop)
            else:
                x_b = _largest_ideal(band, w, x + caps.stage_cap if chained else math.inf, pred, succ, caps, deadline,
                                     stop)
            if x_b is None:
                return True
            x = x_b
        if chained and int(w.sum()) - x > caps.stage_cap:
            return True
    return False


def band_transfer_floor(graph: OpGraph, allowed: list[list[int]], num_stages: int) -> int:
    """A lower bound on the largest transfer of every plan within `allowed`: per band, the fewest
    bytes any of its ideals sends across (a minimum cut, by max-flow), the largest over the bands.
    Every plan's I_b is an ideal of band b, so it sends at least that band's minimum across b.

    The network (a closure problem): source = inside I_b, sink = outside. Each node is tied to its
    predecessors (w inside forces u inside: an uncuttable arc w -> u), the band's sure members to
    the source and its excluded nodes to the sink; a tensor made by u pays its bytes on the arc
    u -> a_t, and a_t is tied to each consumer, so the arc is cut exactly when u is inside and
    some consumer is not. On a whole graph the bands are everything and the bound is near 0; on
    a window whose fixed nodes pin every ideal of some band to a cell boundary it is the optimum
    (NASNetMobile at K = 8 and 16, in milliseconds: the widened window around that plan then
    needs no transfer solve)."""
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    n = graph.num_nodes
    arrays = _flow_arrays(graph)
    if num_stages < 2 or arrays is None:
        return 0
    src, dst, cap, uncut, size = arrays
    lo = np.fromiter((ks[0] for ks in allowed), dtype=np.int64, count=n)
    hi = np.fromiter((ks[-1] for ks in allowed), dtype=np.int64, count=n)
    source, sink = size - 2, size - 1
    best = 0
    for b in range(num_stages - 1):
        inside, outside = np.flatnonzero(hi <= b), np.flatnonzero(lo > b)
        rows = np.concatenate([src, np.full(inside.size, source), outside])
        cols = np.concatenate([dst, inside, np.full(outside.size, sink)])
        caps = np.concatenate([cap, np.full(inside.size + outside.size, uncut, dtype=np.int32)])
        network = csr_array((caps, (rows, cols)), shape=(size, size))
        best = max(best, int(maximum_flow(network, source, sink).flow_value))
    return best


def _flow_arrays(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int] | None:
    return graph.memo("band_bound.flow_arrays", _build_flow_arrays)


def _build_flow_arrays(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int] | None:
    """The band-independent arcs of `band_transfer_floor`'s network (node ids: the graph's nodes,
    then one per tensor, then source and sink), the capacity that stands for "uncuttable" and the
    network's size; None where the bytes do not fit max-flow's 32-bit capacities."""
    from hiertune.solvers.ilp import graph_arrays

    a, n = graph_arrays(graph), graph.num_nodes
    total = int(a.nbytes.sum())
    if total >= 2**29:  # a sum of uncuttable arcs must still fit int32
        return None
    uncut = total + 1
    aux = n + np.arange(a.producer.size)
    per_tensor = np.diff(np.append(a.first_consumer, a.consumers.size))
    src = np.concatenate([a.edge_dst, a.producer, np.repeat(aux, per_tensor)])
    dst = np.concatenate([a.edge_src, aux, a.consumers])
    cap = np.concatenate([np.full(a.edge_src.size, uncut), a.nbytes, np.full(a.consumers.size, uncut)]).astype(np.int32)
    pairs = np.unique(np.stack([src, dst]), axis=1, return_index=True)[1]  # a repeated arc would sum its capacities
    return src[pairs], dst[pairs], cap[pairs], uncut, n + a.producer.size + 2


class _BandIdeal:
    """Band b's ideal I_b in a CP-SAT model: a Boolean per free node, closed under predecessors,
    within the transfer cap; `weight` is w(I_b) as a linear expression."""

    def __init__(self, model, band: Band, w: np.ndarray, pred: list[list[int]], succ: list[list[int]],
                 caps: Caps, name: str, transfer_of: list[Tensor] | None = None):
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
        self.transfer = 0  # bytes crossing b, as an expression (with a transfer cap or `transfer_of`)
        if caps.transfer_cap is not None or transfer_of is not None:
            sure, terms = 0, []
            for u, nbytes, consumers in (caps.tensors if caps.transfer_cap is not None else transfer_of) or []:
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
            self.transfer = sure + sum(terms)
            if caps.transfer_cap is not None:
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


def _nested(before: _BandIdeal, after: _BandIdeal, stage_cap: int) -> list:
    """Rows for consecutive ideals: `before` inside `after`, the stage between them within the cap
    (constants come out as bools, for `_require`)."""
    rows = [before.member(v) <= after.member(v) for v in set(before.index) | set(after.index)]
    return [*rows, after.weight - before.weight <= stage_cap]


def _largest_ideal_after(before: Band, band: Band, w: np.ndarray, x_before: int, stage_cap: int,
                         pred: list[list[int]], succ: list[list[int]], caps: Caps, deadline: float,
                         stop: StopSignal | None = None) -> int | None:
    """An upper bound on the largest w(I_b) over pairs I_{b-1} <= I_b of the two bands' ideals with
    w(I_{b-1}) <= x_before (its bound) and stage b = w(I_b) - w(I_{b-1}) <= stage_cap: containment
    kept between neighbours, so at least as tight as `_largest_ideal` at cap x_before + stage_cap."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    prev = _BandIdeal(model, before, w, pred, succ, caps, "prev")
    cur = _BandIdeal(model, band, w, pred, succ, caps, "cur")
    if not (prev.feasible and cur.feasible):
        return None
    if not _require(model, [*_nested(prev, cur, stage_cap), prev.weight <= x_before]):
        return None
    return _solve_max(model, cur.weight, x_before + stage_cap, deadline, stop)


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
                   caps: Caps, deadline: float, stop: StopSignal | None = None) -> int | None:
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
    return _solve_max(model, ideal.weight, int(cap) if math.isfinite(cap) else base + free_weight, deadline, stop)


class _Solved:
    """One CP-SAT response, read like `CpSolver` after a solve."""

    def __init__(self, response):
        self.response = response

    @property
    def status(self):
        return self.response.status

    def value(self, var) -> int:
        return int(self.response.solution[var.index])


def _solve(model, deadline: float, stop: StopSignal | None) -> _Solved:
    """CP-SAT on `model` (one worker, until `deadline`), ended early, as at its time limit, once
    `stop` is set. Solved through a `SolveWrapper` made before the stop is attached, so a stop
    that comes before the search starts still ends it (`CpSolver.stop_search` is a no-op then)."""
    from ortools.sat.python import cp_model_helper as cmh

    params = cmh.SatParameters()
    params.num_workers = 1
    params.max_time_in_seconds = float(max(deadline - time.perf_counter(), 0.01))
    wrapper = cmh.SolveWrapper()
    wrapper.set_parameters(params)
    if stop is not None:
        stop.attach(wrapper.stop_search)
    try:
        return _Solved(wrapper.solve(model.proto))
    finally:
        if stop is not None:
            stop.detach()


def _solve_max(model, weight, loosest: int, deadline: float, stop: StopSignal | None = None) -> int | None:
    """max `weight` over `model` as an upper bound: None when infeasible, the solver's bound when
    it runs out of time (or is stopped), `loosest` when it decides nothing."""
    from ortools.sat.python import cp_model

    fixed = isinstance(weight, int)  # no free node weighs anything: feasibility only
    if not fixed:
        model.maximize(weight)
    solved = _solve(model, deadline, stop)
    status = solved.status
    if status == cp_model.INFEASIBLE:
        return None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # not decided: the loosest it can be
        return loosest
    if fixed:
        return weight
    if status == cp_model.OPTIMAL:
        return int(round(solved.response.objective_value))
    return int(math.floor(solved.response.best_objective_bound + 1e-6))


def least_open_cap(graph: OpGraph, allowed: list[list[int]], num_stages: int, caps_at: Callable[[int], Caps],
                   floor: int, ceiling: Callable[[], int], pairs: bool, deadline: float,
                   stop: StopSignal | None = None) -> int:
    """The least value in [floor, ceiling()] that the band relaxation does not exclude, by
    bisection over the cap (`caps_at(c)`: every plan's value <= c); `ceiling()` is asked again
    after each probe (a solver beside it may find better plans meanwhile). `floor` must be a
    value no plan beats; what comes back is one too: every cap below it is excluded. Stopped
    early (deadline, `stop`), it is only a lower end of the search."""
    top = ceiling()
    lo, hi = floor, top
    fresh = False  # a new incumbent: probe just below it first, as a full check (pairs too)
    stopped = lambda: stop is not None and stop.requested  # noqa: E731
    while lo < hi and not stopped() and time.perf_counter() < deadline:
        mid = top if fresh else (lo + hi) // 2
        if no_plan_within(graph, allowed, num_stages, caps_at(mid), deadline - time.perf_counter(), stop,
                          pairs or fresh):
            lo = mid + 1  # with a fresh top: lo passes hi, the new incumbent is optimal
        elif not stopped() and not fresh:  # a probe cut short excludes nothing, and says nothing either
            hi = mid
        now = ceiling()
        fresh, top = now < top, now
        hi = min(hi, top)
    return lo


def greedy_plan(graph: OpGraph, allowed: list[list[int]], num_stages: int, caps: Caps, deadline: float,
                stop: StopSignal | None = None, look: int = 2,
                tensors: list[Tensor] | None = None) -> list[int] | None:
    """A plan within `caps` (stage weights and transfers), or None when this dive finds none.

    Boundary by boundary, I_b is fixed as the first ideal of a chain over bands b..b+look (the
    first holding I_{b-1}, each within the caps after the one before, the whole graph's tail
    within the stage cap once the chain reaches the last band) whose last ideal is as heavy as
    possible: filling the stages ahead up to the cap leaves the least for the stages after, and
    the look-ahead keeps I_b from taking a shape its successors cannot extend (with look = 0 the
    dive fails on NASNetLarge's K = 16 window at its optimum peak, with look = 2 it finds it).
    At the least cap the relaxation leaves open (`least_open_cap`) a plan found is optimal: the
    band bound's primal side, for windows whose solver is slow to *find* that plan. With
    `tensors`, each I_b is then, among those chains, one that sends the fewest bytes across b:
    the next phase (the largest transfer) starts from this plan, and a max-weight I_b picked
    blindly leaves CP-SAT a worse transfer to win back there."""
    from ortools.sat.python import cp_model

    if caps.weights is None or caps.stage_cap is None:
        return None
    w = np.asarray(caps.weights, dtype=np.int64)
    total, cap = int(w.sum()), int(caps.stage_cap)
    pred, succ = graph.predecessors(), graph.successors()
    bands = boundary_bands(allowed, num_stages)
    last = len(bands) - 1
    held = np.zeros(graph.num_nodes, dtype=bool)  # I_{b-1}
    held_weight = 0
    stages = [num_stages - 1] * graph.num_nodes
    for b in range(len(bands)):
        if (stop is not None and stop.requested) or time.perf_counter() >= deadline:
            return None
        model = cp_model.CpModel()
        chain = [_BandIdeal(model, bands[c], w, pred, succ, caps, f"I{c}", tensors if c == b else None)
                 for c in range(b, min(b + look, last) + 1)]
        first = chain[0]
        if not all(ideal.feasible for ideal in chain) or any(first.surely(v) is False for v in np.flatnonzero(held)):
            return None
        rows = [first.z[first.index[v]] == 1 for v in np.flatnonzero(held).tolist() if v in first.index]
        rows.append(first.weight - held_weight <= cap)
        for before, after in zip(chain, chain[1:]):
            rows += _nested(before, after, cap)
        if b + len(chain) - 1 == last:
            rows.append(total - chain[-1].weight <= cap)
        if not _require(model, rows):
            return None
        if not isinstance(chain[-1].weight, int):
            model.maximize(chain[-1].weight)
        solved = _solve(model, deadline, stop)
        if solved.status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        if tensors is not None and not isinstance(first.transfer, int) and not isinstance(chain[-1].weight, int):
            heaviest = int(round(solved.response.objective_value))
            for ideal in chain:
                for z in ideal.z:
                    model.add_hint(z, solved.value(z))
            model.add(chain[-1].weight >= heaviest)
            model.minimize(first.transfer)
            solved = _solve(model, deadline, stop)
            if solved.status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                return None
        now = bands[b].inside.copy()
        for v, i in first.index.items():
            now[v] |= bool(solved.value(first.z[i]))
        for v in np.flatnonzero(now & ~held).tolist():
            stages[v] = b
        held, held_weight = now, int(w[now].sum())
    return stages if total - held_weight <= cap else None


SEARCH_AFTER = 5.0
"""The search for the least open value and its dive (`BandCheck._search`) starts this many
`min_s` into the solve: once the solve's first two slices (1x, 4x) have ended unproven. It holds
a core, and the GIL that the solver's Python callbacks wait for, beside the solver, so a solve
that proves its window by then should not pay for it (docs/incilp.md has the measurement)."""


class BandCheck(threading.Thread):
    """A running solve's incumbents checked against the band bound in a thread of its own, so the
    solver searches on undisturbed (CP-SAT's and Gurobi's solves release the GIL): from its start
    on, each incumbent better than the last one checked is tested for "no plan has a value below
    it", each check given as long as the solve has run since `since` (at least `min_s`). Once that
    holds, `stop` ends the solve and `proven` holds the incumbent's values. Checked only between
    the solve's slices, an incumbent found early in a long slice waited for the slice's end."""

    def __init__(self, graph: OpGraph, allowed: list[list[int]], num_stages: int,
                 value_of: Callable[[list[int]], int], caps_below: Callable[[int], Caps], stop: StopSignal,
                 since: float, min_s: float, deadline: float, floor: int = 0,
                 plan_values: Callable[[list[int]], list[int] | None] | None = None,
                 dive_tensors: list[Tensor] | None = None):
        super().__init__(name="band-check", daemon=True)
        self._problem = (graph, allowed, num_stages)
        self._value_of, self._caps_below, self._stop_signal = value_of, caps_below, stop
        self._since, self._min_s, self._deadline = since, min_s, deadline
        self._floor = floor  # a value no plan beats: the phase's lower bound, raised by the search
        self._plan_values = plan_values  # a plan (stages) as the solver's values; None: not a solution
        self._dive_tensors = dive_tensors  # the dive's tie-break: fewest bytes across each boundary
        self._searched = plan_values is None  # the search for the least open value has run to its end
        self.dived = False  # the proven plan came from the search's dive, not from the solver
        self._wake = threading.Condition()
        self._latest: list[int] | None = None  # the newest incumbent not yet taken
        self._done = False
        self._halt = StopSignal()  # ends the thread's own knapsack solves once the solve has returned
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
        self._halt.set()
        self.join()

    def run(self) -> None:
        again: list[int] | None = None  # an incumbent whose check ran out of time: checked again at once
        best: list[int] | None = None  # the best incumbent checked: where the search starts
        search_at = self._since + SEARCH_AFTER * self._min_s
        while True:
            with self._wake:
                # a timed-out check waits for nothing; otherwise a better incumbent, the search or the end
                until = -math.inf if again is not None else min(
                    search_at if best is not None and not self._searched else math.inf, self._deadline)
                self._wake.wait_for(lambda: self._done or self._latest is not None,
                                    timeout=max(until - time.perf_counter(), 0.0))
                if self._done:
                    return
                values, self._latest = self._latest, None
            if values is None and best is not None and not self._searched and time.perf_counter() >= search_at:
                self._search(best, self._value_of(best))
                if self.proven is not None:
                    self._stop_signal.set()
                    return
                continue
            if values is None:  # no better incumbent: the timed-out check's turn, else the end
                if again is None or time.perf_counter() >= self._deadline:
                    return
                values = again
            value = self._value_of(values)
            if values is not again and self.checked and value >= self.checked[-1]:
                continue  # the same value would get the same answer
            t0 = time.perf_counter()
            limit = min(max(self._min_s, t0 - self._since), max(self._deadline - t0, 0.1))  # at most the solve so far
            proven = no_plan_within(*self._problem, self._caps_below(value), limit, self._halt)
            spent = time.perf_counter() - t0
            self.seconds += spent
            self.checked.append(value)
            if proven:
                self.proven = values
                self._stop_signal.set()
                return
            best = values
            # a check that used its whole time may only have been too short: again at once, given the
            # solve's time so far, which doubles it (waiting for 4x the time idled while the proof was near)
            again = values if spent >= 0.9 * limit else None

    def _search(self, values: list[int], value: int) -> None:
        """The single bands' least open value below the best incumbent's (the floor rises with
        each proof) and a greedy plan at it, which is then optimal: for windows whose solver
        finds the optimum slowly while the bound holds it (NASNetLarge at K = 16: a minute of
        CP-SAT against seconds here). Incumbents that come meanwhile are checked in full (pairs
        too) and lower the ceiling; the best of them is proven once the floor reaches it. Pairs
        are not bisected: each probe costs about twice a single band's, and the core they hold
        slowed the solver beside it more than they helped (docs/incilp.md)."""
        t0 = time.perf_counter()
        best = [values, value]

        def ceiling() -> int:
            with self._wake:
                latest, self._latest = self._latest, None
            if latest is not None:
                value = self._value_of(latest)
                if value < best[1]:
                    best[:] = [latest, value]
            return best[1] - 1

        caps_at = lambda cap: self._caps_below(cap + 1)  # noqa: E731 - every plan's value <= cap
        try:
            self._floor = max(self._floor, least_open_cap(*self._problem, caps_at, self._floor, ceiling,
                                                          False, self._deadline, self._halt))
            if self._halt.requested:
                return
            if self._floor >= best[1]:  # nothing below the best incumbent
                self.proven = best[0]
                return
            plan = greedy_plan(*self._problem, caps_at(self._floor), self._deadline, self._halt,
                               tensors=self._dive_tensors)
            found = None if plan is None else self._plan_values(plan)
            if found is not None and self._value_of(found) <= self._floor:
                self.proven, self.dived = found, True
                return
            self._searched = True
        finally:
            self.seconds += time.perf_counter() - t0
            self.checked.append(best[1])
