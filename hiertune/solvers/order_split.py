"""Exact cut placement along one topological order: the best plan that keeps a given node order.

Every valid plan is contiguous in some topological order (sort the nodes by stage, then by
position). So an initial plan fixes an order, and along that order the K - 1 cut positions can be
chosen exactly, for all three objectives, by bisection and dynamic programming in numpy (no
Python loop over positions):

1. the least peak stage parameter bytes (min-max split of the order's parameter sums, by
   bisection over a greedy O(K log N) test, 64 peaks per vectorised round);
2. among splits within that peak, the least total off-cache bytes, and then the least largest
   boundary transfer: (sum, max) pairs compose monotonically, so a DP over the cut positions
   stays exact. Only the cut positions that leave both sides splittable within the peak are
   visited (at the least peak they are few), and each step's best previous cut, per position,
   is the better of two range minima over a ranked key: a sort and two `minimum.reduceat` calls
   per step, not a (run length x positions) matrix (BERT-base at K = 16: 2.4 ms instead of
   19.8 ms, the same plans).

A pre-scheduler's errors are mostly *where* it cuts, not which order it emits, so placing its
cuts exactly turns a plan 10-50 % above the optimum peak into one that the Inc-ILP window can
finish (measured on the zoo: bench/incilp_vs_exact.py). The result is never worse than the
plan it came from, because that plan is one of the splits searched.
"""

from __future__ import annotations

import bisect

import numpy as np

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import EDGE_TPU_CACHE_BYTES, PartitionError, check_partition, graph_arrays, topological_array


def plan_order(graph: OpGraph, stages: list[int]) -> list[int]:
    """The topological order the plan is contiguous in: by stage, then by topological position."""
    topo = topological_array(graph)
    return topo[np.argsort(np.asarray(stages, dtype=np.int64)[topo], kind="stable")].tolist()


def cut_comm_bytes(graph: OpGraph, order: list[int]) -> np.ndarray:
    """comm[c]: bytes of the tensors that cross a cut after the first c nodes of `order`."""
    n = graph.num_nodes
    arrays = graph_arrays(graph)
    pos = np.empty(n, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
    diff = np.zeros(n + 2, dtype=np.float64)
    if arrays.producer.size:
        p = pos[arrays.producer]
        q = np.maximum.reduceat(pos[arrays.consumers], arrays.first_consumer)
        crosses = q > p  # a tensor crosses every cut c with p < c <= q
        np.add.at(diff, p[crosses] + 1, arrays.nbytes[crosses])
        np.add.at(diff, q[crosses] + 1, -arrays.nbytes[crosses])
    return np.cumsum(diff)[: n + 1]


def _prefix(graph: OpGraph, order: list[int]) -> np.ndarray:
    """Parameter bytes of the first c nodes of `order`, c = 0..N."""
    params = graph_arrays(graph).param[np.asarray(order, dtype=np.int64)].astype(np.float64)
    return np.concatenate([[0.0], np.cumsum(params)])


def least_peak(prefix: np.ndarray, num_stages: int) -> float:
    """The least peak over splits of the order into `num_stages` non-empty runs: bisection on the
    peak, each test whether K greedy runs (each as long as it fits) hold the whole order; when
    fewer do, splitting some further to exactly K never raises the peak, as K <= N."""
    params = np.diff(prefix)
    largest, total = int(params.max()), int(prefix[-1])
    lo = max(largest, -(-total // num_stages))
    # greedy runs within ceil(total / K) + the largest node each end above total / K (the next
    # node did not fit), so K of them hold the order: the bisection starts from that bound
    hi = min(total, -(-total // num_stages) + largest)
    while lo < hi:  # up to 64 peaks tested at once, in K vectorised steps: ~6 bits per round
        peaks = np.unique(np.linspace(lo, hi, num=min(hi - lo + 1, 64)).astype(np.int64))
        fits = _reach(prefix, peaks, num_stages)[-1] >= params.size  # monotone in the peak, true at hi
        short = peaks[~fits]
        lo, hi = (int(short.max()) + 1 if short.size else lo), int(peaks[np.argmax(fits)])
    return float(lo)


def _reach(prefix: np.ndarray, peak: float | np.ndarray, num_stages: int) -> np.ndarray:
    """reach[m]: the longest prefix of the order that m runs within `peak` can hold (greedy: each
    run as long as it fits), for m = 0..num_stages; for an array of peaks, one column per peak.
    Once the whole order is held, more runs hold no more (the search stays at its end)."""
    at = np.zeros(np.shape(peak), dtype=np.int64)
    reach = [at]
    for _ in range(num_stages):
        at = np.searchsorted(prefix, prefix[at] + peak, side="right") - 1
        reach.append(at)
    return np.stack(reach)


def split_order(graph: OpGraph, order: list[int], num_stages: int,
                cache_bytes: int = EDGE_TPU_CACHE_BYTES) -> list[int]:
    """The lexicographically best plan whose stages are consecutive runs of `order`."""
    n, K = graph.num_nodes, num_stages
    if sorted(order) != list(range(n)):
        raise PartitionError(f"order must list each of the {n} nodes of {graph.name!r} once")
    if not 1 <= K <= n:
        raise PartitionError(f"num_stages={K} must lie in 1..{n} (the node count of {graph.name!r})")
    prefix = _prefix(graph, order)
    comm = cut_comm_bytes(graph, order)

    best_peak = least_peak(prefix, K)

    # Phase 2: least (off-cache sum, largest cut comm) with every stage within best_peak. The
    # DP's state after stages 0..k is the end j of stage k; only ends from which both the
    # prefix (k + 1 runs) and the suffix (K - k - 1 runs) fit within best_peak can be on a
    # plan, and as best_peak is the least peak that window is narrow. Stage k + 1 = order[i:j]
    # fits for i in a range [a_j, j - 1] whose ends rise with j, and its off-cache bytes are 0
    # for i >= s_j (the stage fits the cache) and prefix[j] - prefix[i] - cache below s_j. So
    # the best i is the better of two range minima, each of a key that does not depend on j:
    # (off_sum[i], comm key, i) above s_j and (off_sum[i] - prefix[i], comm key, i) below it.
    # Ties keep the first i, as a plan's first stages then end earliest.
    reach = _reach(prefix, best_peak, K).tolist()
    reach_back = _reach(prefix[-1] - prefix[::-1], best_peak, K).tolist()
    lo = [max(k + 1, n - reach_back[K - k - 1]) for k in range(K)]  # ends of stage k on some plan
    hi = [min(reach[k + 1], n - (K - k - 1)) for k in range(K)]
    first_start = np.searchsorted(prefix, prefix - best_peak, side="left")
    cache_start = np.searchsorted(prefix, prefix - cache_bytes, side="left")

    ends = np.arange(lo[0], hi[0] + 1)
    off_sum = np.maximum(prefix[ends] - cache_bytes, 0.0)  # indexed by end - lo[k]
    comm_max = np.zeros(ends.size)
    starts: list[tuple[int, np.ndarray]] = []  # (lo[k], where stage k begins for each end of it)
    for k in range(1, K):
        ends = np.arange(lo[k], hi[k] + 1)
        prev_ends = np.arange(lo[k - 1], hi[k - 1] + 1)
        tie = np.maximum(comm_max, comm[prev_ends])  # the largest cut so far, cutting at i
        first = np.maximum(first_start[ends], lo[k - 1]) - lo[k - 1]  # the range of i, as
        last = np.minimum(ends - 1, hi[k - 1]) - lo[k - 1]  # positions in prev_ends
        split = np.clip(cache_start[ends] - lo[k - 1], first, last + 1)  # i >= split: in cache
        fits = _range_best(off_sum, tie, split, last)
        fits_off = np.where(fits >= 0, off_sum[fits], np.inf)
        if best_peak <= cache_bytes:  # no stage within the peak spills: `fits` covers every i
            best, off_sum = fits, fits_off
        else:
            spills = _range_best(off_sum - prefix[prev_ends], tie, first, split - 1)
            spills_off = np.where(spills >= 0, off_sum[spills] + prefix[ends] - prefix[prev_ends[spills]]
                                  - cache_bytes, np.inf)
            take_spill = (spills_off < fits_off) | ((spills_off == fits_off) & (spills >= 0) & (
                (tie[spills] < tie[fits]) | ((tie[spills] == tie[fits]) & (spills < fits))))
            best = np.where(take_spill, spills, fits)
            off_sum = np.where(take_spill, spills_off, fits_off)
        comm_max = np.where(best >= 0, tie[best], np.inf)
        starts.append((lo[k], prev_ends[np.maximum(best, 0)]))

    cuts = [n]
    for first_end, start in reversed(starts):
        cuts.append(int(start[cuts[-1] - first_end]))
    cuts.append(0)
    cuts.reverse()  # cuts[k] .. cuts[k + 1] is stage k
    stage = np.empty(n, dtype=np.int64)
    stage[np.asarray(order, dtype=np.int64)] = np.repeat(np.arange(K), np.diff(cuts))
    stages = stage.tolist()
    check_partition(graph, stages, K)
    return stages


def _range_best(value: np.ndarray, tie: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Per query q, the i in [first[q], last[q]] with the least (value[i], tie[i], i), or -1 where
    that range is empty: every element ranked once (lexsort), then one `minimum.reduceat` over
    all ranges (O(sum of their lengths) in C, not a Python loop)."""
    m = value.size
    order = np.lexsort((np.arange(m), tie, value))
    rank = np.empty(m + 1, dtype=np.int64)
    rank[order] = np.arange(m)
    rank[m] = m  # a sentinel, so that every range end + 1 is a valid index
    empty = last < first
    bounds = np.empty(2 * first.size, dtype=np.int64)
    bounds[0::2] = np.where(empty, 0, first)
    bounds[1::2] = np.where(empty, 0, last + 1)
    least = np.minimum.reduceat(rank, bounds)[0::2]
    return np.where(empty | (least >= m), -1, order[np.minimum(least, m - 1)])


def can_beat(graph: OpGraph, order: list[int], num_stages: int, current: tuple[int, int, int],
             off_floor: int) -> bool:
    """Might a split of `order` beat `current`, the (peak, off-cache, comm) of one of its splits?
    False only when none can: a test of well under a millisecond, where `split_order`'s DP takes
    several on orders whose runs are long (one huge node setting the peak leaves every other stage
    loose). A better split has a lower peak, or the same peak and a lower off-cache total, or both
    and a lower largest cut; with the off-cache total at `off_floor` (a global lower bound) the
    last needs K runs within the peak that cut only where less than `current`'s comm crosses,
    which a greedy walk (each run as long as it fits, ending at such a cut) decides."""
    peak, off, comm = current
    prefix, n = _prefix(graph, order), len(order)
    if _reach(prefix, peak - 1, num_stages)[-1] >= n or off > off_floor:  # a lower peak fits
        return True
    cuts = np.flatnonzero(cut_comm_bytes(graph, order)[1:n] < comm) + 1  # positions 1..n-1
    if cuts.size < num_stages - 1:
        return False
    at = 0
    for _ in range(num_stages):
        end = int(np.searchsorted(prefix, prefix[at] + peak, side="right")) - 1
        if end >= n:
            return True
        i = int(np.searchsorted(cuts, end, side="right")) - 1
        if i < 0 or cuts[i] <= at:
            return False
        at = int(cuts[i])
    return False


def packed_order(graph: OpGraph, num_stages: int, peak_hi: int) -> list[int]:
    """A topological order whose K runs pack the stages: list scheduling as bin packing.

    `split_order` is exact along one order, and an order that walks branch by branch (libcoral's,
    the topological one) leaves parallel branches (NASNet's cells, branchy DAGs) unable to share a
    stage evenly. Here each stage is filled from the ready nodes (all predecessors placed), the
    largest that still fits under a peak P first (first-fit decreasing; ties by ASAP level), and P
    is bisected between the trivial bound and `peak_hi` (a peak already reached) for the least at
    which K stages hold the graph. Pure Python, O(N log N) per test: tens of ms at 500-1,500
    nodes, so Inc-ILP asks for it only where its window is an ILP anyway (`incilp.packed_start_pays`)."""
    param = [int(p) for p in graph_arrays(graph).param]
    asap = graph.asap_levels()
    pred, succ = graph.predecessors(), graph.successors()

    def fill(peak: int) -> list[int] | None:
        waiting = [len(p) for p in pred]
        ready = sorted((param[v], -asap[v], -v) for v in range(graph.num_nodes) if not waiting[v])
        order: list[int] = []
        for _ in range(num_stages):
            room = peak
            while ready:
                i = bisect.bisect_right(ready, (room, 1, 1)) - 1  # the largest ready node that fits
                if i < 0:
                    break
                weight, _, minus_v = ready.pop(i)
                room -= weight
                order.append(-minus_v)
                for w in succ[-minus_v]:
                    waiting[w] -= 1
                    if not waiting[w]:
                        bisect.insort(ready, (param[w], -asap[w], -w))
            if not ready:
                return order
        return None

    lo = max(max(param, default=0), -(-sum(param) // num_stages))
    hi = max(int(peak_hi), lo)
    best = fill(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        order = fill(mid)
        if order is None:
            lo = mid + 1
        else:
            hi, best = mid, order
    return best if best is not None else graph.topological_order()


def refine_cuts(graph: OpGraph, stages: list[int], num_stages: int,
                cache_bytes: int = EDGE_TPU_CACHE_BYTES) -> list[int]:
    """`stages` with its cuts moved to the exact best positions along its own order."""
    return split_order(graph, plan_order(graph, stages), num_stages, cache_bytes)
