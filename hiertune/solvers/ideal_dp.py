"""An exact dynamic program over the graph's ideals: the strongest exact baseline on narrow graphs.

Every stage prefix of a valid plan (the nodes of stages 0..b) is an ideal, a downward-closed node
set, and a K-stage plan is a chain of K + 1 ideals from the empty set to the whole graph. All
three objectives live on that chain: a stage's parameter bytes are the difference of two ideals'
weights, and the bytes crossing boundary b are exactly those of the tensors made inside ideal b
and read outside it (a function of the ideal alone). So a walk over the ideal lattice that adds
one node at a time, either to the open stage or to a new one, enumerates every plan; per state
(ideal, stage) only the Pareto front of (closed stages' off-cache bytes, open stage's bytes) is
kept, which loses no optimum (a smaller open stage and a smaller cost admit every completion the
larger ones do). The lexicographic objectives are solved in phases like the ILP's:

1. the least peak P*: bisection over P on a feasibility walk that keeps, per ideal, the fewest
   stages and then the lightest open stage (splitting a stage never raises the peak, so using at
   most K stages is enough);
2. the least off-cache total O* with every stage <= P*, on exactly K stages;
3. the least largest transfer: bisection over the ideals' cut values D, cutting only at ideals
   whose cut is <= D, until phase 2's optimum O* is still reached.

Chains, ResNets and DenseNets have about one ideal per node, Inception blocks a few hundred per
block; wide cells (NASNet) have millions, where `max_ideals` stops the DP with a clear error.
Where the graph has one topological order the lattice is a chain and the walk is the exact split
of that order (`order_split.split_order`, vectorised), which it then runs instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hiertune.errors import HiertuneError
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import (
    DEFAULT_MAX_IDEALS,
    EDGE_TPU_CACHE_BYTES,
    Objectives,
    PartitionError,
    PartitionResult,
    check_partition,
    evaluate_partition,
    has_one_order,
    tensors,
    topological_array,
)
from hiertune.solvers.order_split import split_order


class IdealDpLimitError(HiertuneError):
    """The graph has too many ideals (it is too wide) or the DP ran out of time."""


@dataclass
class IdealLattice:
    """The ideals in order of size (a topological order of the lattice), with their weights, cut
    bytes and one-node extensions."""

    weight: list[int]
    cut: list[int]
    children: list[list[tuple[int, int]]]  # (added node, child ideal index); empty without links
    masks: list[int]  # each ideal as a bit mask of its nodes

    @property
    def size(self) -> int:
        return len(self.weight)


@dataclass(frozen=True)
class BitGraph:
    """The graph as the lattice walk reads it, node sets as bit masks. Memoised per graph
    (`bit_graph`): a window DP builds one lattice per boundary, and rebuilding these for each
    took most of the window's time on large graphs."""

    param: list[int]
    bit: list[int]  # 1 << v, made once (a shift allocates a new big int)
    pred_mask: list[int]
    succ: list[list[int]]
    made_bytes: list[int]  # bytes of the tensors a node makes that someone reads
    reads: list[list[tuple[int, int]]]  # per node: (consumer mask, bytes) of the tensors it reads


def bit_graph(graph: OpGraph) -> BitGraph:
    return graph.memo("ideal_dp.bit_graph", _build_bit_graph)


def _build_bit_graph(graph: OpGraph) -> BitGraph:
    n = graph.num_nodes
    pred = graph.predecessors()
    made_bytes = [0] * n
    reads: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, nbytes, consumers in tensors(graph):
        made_bytes[u] += nbytes
        mask = sum(1 << w for w in consumers)
        for w in consumers:
            reads[w].append((mask, nbytes))
    return BitGraph(param=[v.param_bytes for v in graph.nodes], bit=[1 << v for v in range(n)],
                    pred_mask=[sum(1 << u for u in set(pred[v])) for v in range(n)],
                    succ=graph.successors(), made_bytes=made_bytes, reads=reads)


def ideal_lattice(graph: OpGraph, max_ideals: int = DEFAULT_MAX_IDEALS,
                  deadline: float = float("inf"), base: int = 0, free: set[int] | None = None,
                  base_score: tuple[int, int] = (0, 0), max_weight: float = float("inf"),
                  links: bool = True) -> IdealLattice:
    """Every ideal of `graph` between `base` (an ideal, as a node bit mask; index 0) and `base`
    plus the `free` nodes (default: all), built breadth first; with the defaults the empty set is
    first and the whole graph last. `free` must be closed under predecessors within the free nodes
    and `base` (true of a window's boundary interval). `base_score`: the base's parameter bytes and
    the bytes it sends out, from the caller, which scores all of its bases in one numpy pass.
    `max_weight`: only ideals of at most these parameter bytes (a superset is never lighter, so
    every such ideal is still reached through lighter ones). `links=False` leaves `children` empty:
    the window DP pairs whole layers and never walks them, and on wide intervals (ViT-B/16's at
    K = 16) building one list per ideal and a pair per extension was half the enumeration's time."""
    n = graph.num_nodes
    bits = bit_graph(graph)
    param, one, pred_mask, succ = bits.param, bits.bit, bits.pred_mask, bits.succ
    made_bytes, read = bits.made_bytes, bits.reads
    outside_base = ~base
    free_nodes = sorted(free) if free is not None else [v for v in range(n) if outside_base >> v & 1]
    is_free = bytearray(n)
    for v in free_nodes:
        is_free[v] = 1
    masks, weight, cut = [base], [base_score[0]], [base_score[1]]
    ready: list[tuple[int, ...]] = [tuple(v for v in free_nodes if not pred_mask[v] & outside_base)]
    children: list[list[tuple[int, int]]] = [[]] if links else []
    index: dict[int, int] = {base: 0}
    frontier = [0]
    while frontier:
        nxt: list[int] = []
        for i in frontier:
            ideal, ready_i, below, made = masks[i], ready[i], weight[i], cut[i]
            for at, v in enumerate(ready_i):
                child = ideal | one[v]
                j = index.get(child)
                if j is None:
                    heavier = below + param[v]
                    if heavier > max_weight:
                        continue
                    j = len(masks)
                    if j >= max_ideals:
                        raise IdealDpLimitError(
                            f"{graph.name!r} has more than {max_ideals} ideals (its widest layers are too "
                            "wide for the ideal DP); use an ILP solver (cpsat, gurobi) instead")
                    index[child] = j
                    masks.append(child)
                    weight.append(heavier)
                    sent = made + made_bytes[v]
                    for mask, nbytes in read[v]:  # tensors whose every consumer is now inside
                        if mask & child == mask:  # (no ~child: a complement allocates a big int)
                            sent -= nbytes
                    cut.append(sent)
                    # v's successors that v was the last free predecessor of become ready; none of
                    # them was ready before (v was outside), so the tuple needs no de-duplication
                    rest = ready_i[:at] + ready_i[at + 1:]
                    grown = [w for w in succ[v] if is_free[w] and pred_mask[w] & child == pred_mask[w]]
                    ready.append(tuple(sorted(rest + tuple(grown))) if grown else rest)
                    if links:
                        children.append([])
                    nxt.append(j)
                if links:
                    children[i].append((v, j))
        if time.perf_counter() > deadline:
            raise IdealDpLimitError(f"the ideal DP of {graph.name!r} ran out of time building the lattice")
        frontier = nxt
    return IdealLattice(weight, cut, children, masks)


def _fits_in_stages(lattice: IdealLattice, param: list[int], peak: int, num_stages: int) -> bool:
    """Can every stage stay <= `peak` with at most K stages? Per ideal: fewest stages, then the
    lightest open stage."""
    best: list[tuple[int, int] | None] = [None] * lattice.size
    best[0] = (0, 0)  # the empty ideal: stage 0 open and empty (a first node never cuts)
    for i, state in enumerate(best):
        if state is None:
            continue
        k, h = state
        for v, j in lattice.children[i]:
            p = param[v]
            cand = (k, h + p) if h + p <= peak else (k + 1, p) if (p <= peak and i) else None
            if cand is not None and (best[j] is None or cand < best[j]):
                best[j] = cand
    final = best[-1]
    return final is not None and final[0] <= num_stages - 1


def _least_off_cache(lattice: IdealLattice, param: list[int], peak: int, max_cut: float, num_stages: int,
                     cache: int, deadline: float) -> tuple[int, tuple] | None:
    """The least off-cache total over exactly K stages, each <= `peak`, cutting only at ideals whose
    cut is <= `max_cut`; with the last walk entry (c, h, k, node, parent) for the plan."""
    K = num_stages
    fronts: list[list[list[tuple]] | None] = [None] * lattice.size
    fronts[0] = [[(0, 0, 0, -1, None)]] + [[] for _ in range(K - 1)]
    for i in range(lattice.size - 1):  # the whole graph, last, has no extension
        per_stage = fronts[i]
        if per_stage is None:
            continue
        fronts[i] = None  # a state is read once: free it (its entries live on through parents)
        cut_ok = i > 0 and lattice.cut[i] <= max_cut
        if i % 2048 == 0 and time.perf_counter() > deadline:
            raise IdealDpLimitError("the ideal DP ran out of time")
        for v, j in lattice.children[i]:
            p = param[v]
            target = fronts[j]
            for k, front in enumerate(per_stage):
                for entry in front:
                    c, h = entry[0], entry[1]
                    if h + p <= peak:
                        target = _insert(target, fronts, j, K, k, (c, h + p, k, v, entry))
                    if cut_ok and k + 1 < K and p <= peak:
                        target = _insert(target, fronts, j, K, k + 1,
                                         (c + max(0, h - cache), p, k + 1, v, entry))
    final = fronts[-1]
    if final is None or not final[K - 1]:
        return None
    entry = min(final[K - 1], key=lambda e: e[0] + max(0, e[1] - cache))
    return entry[0] + max(0, entry[1] - cache), entry


def _insert(target, fronts, j: int, K: int, k: int, entry: tuple):
    """Add `entry` to the Pareto front of (ideal j, stage k) over (cost, open bytes)."""
    if target is None:
        target = fronts[j] = [[] for _ in range(K)]
    front = target[k]
    c, h = entry[0], entry[1]
    for other in front:
        if other[0] <= c and other[1] <= h:
            return target  # dominated
    front[:] = [o for o in front if not (c <= o[0] and h <= o[1])]
    front.append(entry)
    return target


def _plan(graph: OpGraph, entry: tuple) -> list[int]:
    stages = [0] * graph.num_nodes
    while entry is not None and entry[3] >= 0:
        stages[entry[3]] = entry[2]
        entry = entry[4]
    return stages


def start_clock(graph: OpGraph, num_stages: int, time_limit_s: float) -> tuple[float, float, float]:
    """Check the stage count against the graph, then (wall start, CPU start, wall deadline)."""
    if not 1 <= num_stages <= graph.num_nodes:
        raise PartitionError(f"--stages {num_stages} must lie in 1..{graph.num_nodes} (the node count of {graph.name!r})")
    start = time.perf_counter()
    return start, time.process_time(), start + time_limit_s


def ideal_partition(graph: OpGraph, num_stages: int, cache_bytes: int = EDGE_TPU_CACHE_BYTES,
                    hint: list[int] | None = None, time_limit_s: float = 300.0,
                    max_ideals: int = DEFAULT_MAX_IDEALS) -> PartitionResult:
    """The lexicographically optimal K-stage plan of the whole graph (see the module docstring).
    A `hint` (any valid plan) bounds the bisections from above."""
    K = num_stages
    start, cpu_start, deadline = start_clock(graph, K, time_limit_s)
    if has_one_order(graph):  # the lattice is one chain: the walk over it is a split of that order
        stages = split_order(graph, topological_array(graph).tolist(), K, cache_bytes)
        objectives = evaluate_partition(graph, stages, K, cache_bytes)
        return PartitionResult(
            stages=stages, objectives=objectives, solve_seconds=time.perf_counter() - start, optimal=True,
            solver="ideal-dp", cpu_seconds=time.process_time() - cpu_start, num_vars=graph.num_nodes + 1,
            phases=[f"ideals: {graph.num_nodes + 1} (one topological order: its exact split)",
                    f"peak {objectives[0]}", f"off-cache {objectives[1]}", f"comm {objectives[2]}"],
        )
    lattice = ideal_lattice(graph, max_ideals, deadline)
    param = [v.param_bytes for v in graph.nodes]
    upper: Objectives | None = None
    if hint is not None:
        check_partition(graph, hint, K)
        upper = evaluate_partition(graph, hint, K, cache_bytes)
    lo = max(max(param), -(-sum(param) // K))
    hi = upper[0] if upper else sum(param)
    while lo < hi:  # phase 1
        mid = (lo + hi) // 2
        if _fits_in_stages(lattice, param, mid, K):
            hi = mid
        else:
            lo = mid + 1
        if time.perf_counter() > deadline:
            raise IdealDpLimitError(f"the ideal DP of {graph.name!r} ran out of time (peak phase)")
    peak = lo
    phase2 = _least_off_cache(lattice, param, peak, float("inf"), K, cache_bytes, deadline)
    assert phase2 is not None, "a peak that fits in at most K stages fits in exactly K"
    off, entry = phase2
    cuts = sorted(set(lattice.cut[1:-1]))
    if upper is not None and upper[:2] == (peak, off):  # the hint reaches O*: D need not exceed its comm
        cuts = [c for c in cuts if c <= upper[2]]
    lo_i, hi_i = 0, len(cuts) - 1
    best = entry
    while lo_i <= hi_i:  # phase 3: the least D whose walk still reaches O*
        mid = (lo_i + hi_i) // 2
        found = _least_off_cache(lattice, param, peak, cuts[mid], K, cache_bytes, deadline)
        if found is not None and found[0] <= off:
            best, hi_i = found[1], mid - 1
        else:
            lo_i = mid + 1
    stages = _plan(graph, best)
    objectives = evaluate_partition(graph, stages, K, cache_bytes)
    return PartitionResult(
        stages=stages, objectives=objectives, solve_seconds=time.perf_counter() - start, optimal=True,
        solver="ideal-dp", cpu_seconds=time.process_time() - cpu_start, num_vars=lattice.size,
        phases=[f"ideals: {lattice.size}", f"peak {peak}", f"off-cache {off}", f"comm {objectives[2]}"],
    )
