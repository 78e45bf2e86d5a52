"""The ideal DP of an Inc-ILP window: the window's exact lexicographic optimum without an ILP.

A K-stage plan is a chain of ideals I_0 < I_1 < ... < I_{K-2} (I_b = the nodes of stages 0..b).
With per-node allowed stages [lo_v .. hi_v] (tightened by precedence until they are monotone
along every edge), I_b must hold every node with hi_v <= b and no node with lo_v > b: both sets
are ideals, and only the ideals between them are enumerated, by `ideal_lattice` from the first
over the nodes it may add. Nodes far from boundary b are fixed, so that interval is tiny even
where the whole graph's lattice has millions of ideals (NASNet's cells), unless the window is.
Such a window is told apart before its enumeration by a cheap lower bound on its ideals
(`ideals_lower_bound`), so `auto` hands it to the ILP at once instead of after 0.1-0.5 s.

Consecutive boundaries interact only through the nodes open across both (lo_v <= b-1, hi_v >=
b+1): I_{b-1} must be inside I_b there, and a node entering at b must allow stage b. Every other
pair of ideals of two neighbouring intervals is compatible, so a DP over the boundaries with one
(m_{b-1} x m_b) numpy matrix per boundary is exact for every objective, in two passes:

1. the least peak P*: min over chains of the largest stage weight w(I_b) - w(I_{b-1})
   (a bottleneck path);
2. among chains whose stages all stay <= P*, the lexicographically least (total off-cache bytes,
   largest cut(I_b)): sums and maxima compose monotonically, so keeping the best pair per ideal
   loses no optimum (the same argument as `order_split`).

With the window's start plan's peak (`peak_hi`), ideals that no chain within that peak can use
are never built (see `_layers`). The result is the ILP's on the same window
(`solve_partition(..., allowed=...)`), objective by objective, and it is proven optimal within
the window.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ideal_dp import IdealDpLimitError, ideal_lattice, ideal_partition, start_clock
from hiertune.solvers.ilp import (
    DEFAULT_MAX_IDEALS,
    EDGE_TPU_CACHE_BYTES,
    PartitionError,
    PartitionResult,
    boundary_comm_bytes,
    check_partition,
    evaluate_partition,
    has_one_order,
    propagate_allowed,
    stage_param_bytes,
)

WINDOW_MAX_IDEALS = 20_000
"""Ideals over all boundary intervals before a window is left to the ILP (`auto`)."""
WINDOW_MAX_PAIRS = 20_000_000
"""Ideal pairs over all boundaries (the DP's numpy work) before a window is left to the ILP."""
_CHUNK_PAIRS = 1 << 20  # pairs per numpy block: bounds the DP's memory
_INF = np.iinfo(np.int64).max // 4


def monotone_allowed(graph: OpGraph, num_stages: int, allowed: list[set[int]] | None) -> list[list[int]]:
    """`propagate_allowed` repeated until nothing changes: then every node's first and last allowed
    stage is at least its predecessors' (one pass can leave a gap in a non-contiguous set). Where
    every set it returns is an interval, as in an `adjacent` window, it is already the fixed point
    (each interval is exactly the pass's bounds, which are monotone along every edge)."""
    sets = propagate_allowed(graph, num_stages, allowed)
    while not all(ks[-1] - ks[0] < len(ks) for ks in sets):
        tighter = propagate_allowed(graph, num_stages, [set(ks) for ks in sets])
        if tighter == sets:
            return sets
        sets = tighter
    return sets


CHAIN_BOUND_MIN_WIDTH = 5
"""Widest ASAP level of a boundary interval from which its ideals are bounded below before they
are enumerated (narrower intervals are cheaper to enumerate than to bound)."""


def ideals_lower_bound(graph: OpGraph, free: list[int]) -> int:
    """At least this many ideals lie between a boundary interval's base and base + `free`.

    Chains C_1..C_m of free nodes, every node of one incomparable with every node of another,
    give prod(|C_i| + 1) distinct ideals (down-close one prefix per chain: its meet with each chain
    is that prefix). The chains grow from the widest ASAP level (an antichain: levels rise along
    every edge) outwards, a node joining the one chain it is comparable with throughout. On
    NASNet's cells (7 parallel branches of 4-8 ops) this proves in a millisecond that the interval
    holds millions of ideals, where enumerating the first 20,000 took 0.4 s."""
    level = graph.asap_levels()
    members = set(free)
    order = [v for v in graph.topological_order() if v in members]
    if not order:
        return 1  # the base alone
    succ, pred = graph.successors(), graph.predecessors()
    below = {v: 0 for v in order}  # descendants within the free nodes: a path between two free nodes
    # never leaves them, as allowed stages rise along every edge
    for v in reversed(order):
        for w in succ[v]:
            if w in members:
                below[v] |= (1 << w) | below[w]
    above = {v: 0 for v in order}
    for v in order:
        for u in pred[v]:
            if u in members:
                above[v] |= (1 << u) | above[u]
    widths: dict[int, list[int]] = {}
    for v in order:
        widths.setdefault(level[v], []).append(v)
    seed_level, seeds = max(widths.items(), key=lambda item: len(item[1]))
    chains = [1 << v for v in seeds]
    for v in sorted((v for v in order if level[v] != seed_level), key=lambda v: abs(level[v] - seed_level)):
        related = below[v] | above[v]
        touching = [i for i, chain in enumerate(chains) if chain & related]
        if len(touching) == 1 and not chains[touching[0]] & ~related:
            chains[touching[0]] |= 1 << v
    bound = 1
    for chain in chains:
        bound *= chain.bit_count() + 1
    return bound


def too_wide_to_enumerate(graph: OpGraph, free: list[int], level: np.ndarray, budget: int) -> bool:
    """The DP's test before enumerating a boundary interval: do the chains of its `free` nodes
    already prove more than `budget` ideals? Bounded only from an ASAP level of
    `CHAIN_BOUND_MIN_WIDTH` nodes (`level`: the graph's ASAP levels as an array)."""
    widest = int(np.bincount(level[free]).max()) if free else 0
    return widest >= CHAIN_BOUND_MIN_WIDTH and ideals_lower_bound(graph, free) > budget


class _Layer:
    """The ideals of one boundary interval (or the empty set / the whole graph at the ends)."""

    def __init__(self, masks: list[int], weight: list[int], cut: list[int], num_nodes: int):
        self.masks = masks
        self.weight = np.asarray(weight, dtype=np.int64)
        self.cut = np.asarray(cut, dtype=np.int64)
        self.size = np.fromiter((m.bit_count() for m in masks), dtype=np.int64, count=len(masks))
        self.num_nodes = num_nodes
        self._members: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.masks)

    def at_least(self, low: float) -> _Layer:
        """The ideals of at least `low` parameter bytes, in the same order."""
        keep = (self.weight >= low).tolist()
        if all(keep):
            return self
        return _Layer([m for m, k in zip(self.masks, keep) if k], self.weight[keep].tolist(),
                      self.cut[keep].tolist(), self.num_nodes)

    def members(self) -> np.ndarray:
        """Bool matrix: does ideal i hold node v. Built once per layer, as both of its
        neighbouring boundaries read it."""
        if self._members is None:
            self._members = _unpack(self.masks, self.num_nodes).astype(bool)
        return self._members


def _mask(members: np.ndarray) -> int:
    """A bool array over the nodes as a bit mask (node v = bit v), packed in C rather than
    or-ed together node by node."""
    return int.from_bytes(np.packbits(members, bitorder="little").tobytes(), "little")


def _unpack(masks: list[int], num_nodes: int) -> np.ndarray:
    """`_mask` backwards, for many masks at once: a 0/1 uint8 matrix, row i = mask i's nodes."""
    nbytes = (num_nodes + 7) // 8
    raw = np.frombuffer(b"".join(m.to_bytes(nbytes, "little") for m in masks), dtype=np.uint8)
    return np.unpackbits(raw.reshape(len(masks), nbytes), axis=1, bitorder="little")[:, :num_nodes]


def _layers(graph: OpGraph, lo: np.ndarray, hi: np.ndarray, num_stages: int, max_ideals: int,
            deadline: float, peak_hi: float) -> list[_Layer]:
    """The ideals each I_b may be, from I_{-1} = {} to I_{K-1} = the whole graph; with `peak_hi`
    (a peak some plan in the window reaches) only those on a chain whose every stage might stay
    within it: I_b at most peak_hi heavier than the heaviest I_{b-1} (so the enumeration stops
    there) and at most peak_hi lighter than the lightest I_{b+1}."""
    n = graph.num_nodes
    layers = [_Layer([0], [0], [0], n)]
    budget = max_ideals
    level = np.asarray(graph.asap_levels(), dtype=np.int64)
    # boundary b's base (the nodes whose last allowed stage is <= b) is stage 0..b of the plan
    # "every node at its last allowed stage" (monotone along every edge), so that plan scores
    # every base's weight and outgoing bytes at once
    last = hi.tolist()
    base_weight = np.cumsum(stage_param_bytes(graph, last, num_stages)).tolist()
    base_cut = boundary_comm_bytes(graph, last, num_stages)
    for b in range(num_stages - 1):
        base = _mask(hi <= b)
        opened = np.flatnonzero((lo <= b) & (hi > b)).tolist()
        too_wide = IdealDpLimitError(f"the window of {graph.name!r} has more than {max_ideals} ideals around "
                                     f"boundary {b} (too wide for the window DP); use an ILP solver")
        if too_wide_to_enumerate(graph, opened, level, budget):
            raise too_wide
        try:
            lattice = ideal_lattice(graph, budget, deadline, base=base, free=set(opened),
                                    base_score=(base_weight[b], base_cut[b]),
                                    max_weight=int(layers[-1].weight.max()) + peak_hi, links=False)
        except IdealDpLimitError as err:
            if time.perf_counter() > deadline:
                raise
            raise too_wide from err
        budget -= lattice.size
        layers.append(_Layer(lattice.masks, lattice.weight, lattice.cut, n))
    layers.append(_Layer([(1 << n) - 1], [graph.total_param_bytes], [0], n))
    for b in range(num_stages - 1, 0, -1):
        layers[b] = layers[b].at_least(int(layers[b + 1].weight.min()) - peak_hi)
        if not len(layers[b]):
            raise PartitionError(f"the allowed stages admit no {num_stages}-stage plan of {graph.name!r} "
                                 f"with a peak of at most {peak_hi}")
    return layers


def _compatible(prev: _Layer, cur: _Layer, lo: np.ndarray, hi: np.ndarray,
                sets: list[list[int]], b: int, cols: slice) -> np.ndarray:
    """(i, j) pairs of ideals that can be I_{b-1} and I_b: a non-empty stage b, containment and
    stage b allowed on the nodes open across both boundaries."""
    ok = cur.size[None, cols] > prev.size[:, None]
    both = np.flatnonzero((lo <= b - 1) & (hi >= b + 1))
    if both.size:
        a_prev = prev.members()[:, both].astype(np.float32)
        a_cur = cur.members()[cols][:, both].astype(np.float32)
        ok &= (a_prev @ (1.0 - a_cur).T) == 0  # I_{b-1} inside I_b
        barred = np.fromiter((b not in sets[v] for v in both.tolist()), dtype=bool, count=both.size)
        if barred.any():  # entering at b where b is not allowed
            ok &= ((1.0 - a_prev[:, barred]) @ a_cur[:, barred].T) == 0
    return ok


def _blocks(prev: _Layer, cur: _Layer):
    step = max(1, _CHUNK_PAIRS // max(len(prev), 1))
    for start in range(0, len(cur), step):
        yield slice(start, min(start + step, len(cur)))


def window_partition(graph: OpGraph, num_stages: int, allowed: list[set[int]] | None, cache_bytes: int,
                     time_limit_s: float = 300.0, max_ideals: int = WINDOW_MAX_IDEALS,
                     max_pairs: int = WINDOW_MAX_PAIRS, peak_hi: float = float("inf")) -> PartitionResult:
    """The lexicographically optimal plan with every node in one of its allowed stages (see the
    module docstring); IdealDpLimitError when the window's intervals are too large for the DP.
    `peak_hi`: the peak of a plan within the allowed stages (the window's start), which no optimum
    exceeds: the ideals that cannot lie on a chain within it are never built."""
    K, n = num_stages, graph.num_nodes
    start, cpu_start, deadline = start_clock(graph, K, time_limit_s)
    sets = monotone_allowed(graph, K, allowed)
    lo = np.fromiter((ks[0] for ks in sets), dtype=np.int64, count=n)
    hi = np.fromiter((ks[-1] for ks in sets), dtype=np.int64, count=n)
    layers = _layers(graph, lo, hi, K, max_ideals, deadline, peak_hi)
    pairs = sum(len(a) * len(b) for a, b in zip(layers, layers[1:]))
    if pairs > max_pairs:
        raise IdealDpLimitError(f"the window of {graph.name!r} has {pairs} ideal pairs (more than {max_pairs})")
    compat = [[(cols, _compatible(prev, cur, lo, hi, sets, b, cols)) for cols in _blocks(prev, cur)]
              for b, (prev, cur) in enumerate(zip(layers, layers[1:]))]

    peak = np.zeros(1, dtype=np.int64)  # phase 1: the least largest stage per ideal
    for (prev, cur), blocks in zip(zip(layers, layers[1:]), compat):
        nxt = np.full(len(cur), _INF, dtype=np.int64)
        for cols, ok in blocks:
            stage = cur.weight[None, cols] - prev.weight[:, None]
            cand = np.where(ok, np.maximum(peak[:, None], stage), _INF)
            nxt[cols] = cand.min(axis=0)
        peak = nxt
        if time.perf_counter() > deadline:
            raise IdealDpLimitError(f"the window DP of {graph.name!r} ran out of time (peak phase)")
    best_peak = int(peak[0])
    if best_peak >= _INF:
        raise PartitionError(f"the allowed stages admit no {K}-stage plan of {graph.name!r}; widen the window")

    off = np.zeros(1, dtype=np.int64)  # phase 2: the least (off-cache total, largest cut) per ideal
    comm = np.zeros(1, dtype=np.int64)
    parents: list[np.ndarray] = []
    for b, ((prev, cur), blocks) in enumerate(zip(zip(layers, layers[1:]), compat)):
        new_off = np.full(len(cur), _INF, dtype=np.int64)
        new_comm = np.full(len(cur), _INF, dtype=np.int64)
        parent = np.zeros(len(cur), dtype=np.int64)
        for cols, ok in blocks:
            stage = cur.weight[None, cols] - prev.weight[:, None]
            ok = ok & (stage <= best_peak) & (off[:, None] < _INF)
            cand = np.where(ok, off[:, None] + np.maximum(stage - cache_bytes, 0), _INF)
            lowest = cand.min(axis=0)
            tie = np.where((cand == lowest[None, :]) & ok, comm[:, None], _INF)
            parent[cols] = tie.argmin(axis=0)
            new_off[cols] = lowest
            new_comm[cols] = tie.min(axis=0)
        reached = new_off < _INF
        if b < K - 1:  # the cut after stage b
            new_comm = np.where(reached, np.maximum(new_comm, cur.cut), _INF)
        off, comm = new_off, new_comm
        parents.append(parent)
    chain, j = [], 0
    for layer, parent in zip(reversed(layers[1:]), reversed(parents)):
        chain.append(layer.masks[j])
        j = int(parent[j])
    chain.reverse()  # I_0 < ... < I_{K-1}: a node's stage is the number of them it is not in
    stages = (len(chain) - _unpack(chain, n).sum(axis=0, dtype=np.int64)).tolist()
    objectives = evaluate_partition(graph, stages, K, cache_bytes)
    size = sum(len(layer) for layer in layers[1:-1])
    return PartitionResult(
        stages=stages, objectives=objectives, solve_seconds=time.perf_counter() - start, optimal=True,
        solver="ideal-dp", cpu_seconds=time.process_time() - cpu_start, num_vars=size,
        phases=[f"window ideals: {size}, pairs: {pairs}", f"peak {best_peak}", f"off-cache {int(off[0])}",
                f"comm {int(comm[0])}"],
    )


def whole_graph_partition(graph: OpGraph, num_stages: int, cache_bytes: int = EDGE_TPU_CACHE_BYTES,
                          hint: list[int] | None = None, time_limit_s: float = 300.0,
                          max_ideals: int = DEFAULT_MAX_IDEALS) -> PartitionResult:
    """The whole graph's exact DP over ideals in its fastest form. With a `hint`, first the layered
    DP above with every node free and only the ideals that a chain within the hint's peak can use:
    from a good hint (libcoral's split with exact cuts) that is a few hundred ideals per boundary
    on narrow branchy graphs (Inception-ResNet, ConvNeXt, ViT), where the lattice walk visits
    every ideal in each bisection step. Where the layers exceed the window DP's limits, without a
    hint, and on a graph with one topological order (its exact split), the walk
    (`ideal_dp.ideal_partition`)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    if hint is not None and not has_one_order(graph):  # one order: the walk's exact split is faster
        check_partition(graph, hint, num_stages)
        peak = evaluate_partition(graph, hint, num_stages, cache_bytes)[0]
        try:
            res = window_partition(graph, num_stages, None, cache_bytes, time_limit_s, peak_hi=peak)
            return replace(res, phases=[f"ideals within the hint's peak: {res.num_vars}", *res.phases[1:]])
        except IdealDpLimitError:
            if time.perf_counter() - start >= time_limit_s:
                raise
    left = time_limit_s - (time.perf_counter() - start)
    res = ideal_partition(graph, num_stages, cache_bytes, hint, left, max_ideals)
    # a layered attempt that gave up counts in the solve's time
    return replace(res, solve_seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu_start)
