"""The stage-partition ILP: K pipeline stages over an operator DAG, solved lexicographically.

Model (the seed paper's), written once as a neutral `LinearModel` for every backend, in the
cumulative form of the assignment x[v,k] (node v in stage k):
  binary y[v,b] = [s_v <= b] = sum_{k<=b} x[v,k] for the allowed stages b of v but its last,
  monotone (y[v,b] <= y[v,b']) for b < b'; x[v,k] = y[v,k] - y[v,k-1] is a linear expression;
  precedence: y[u,b] >= y[w,b] per edge and boundary (a two-term row);
  every stage holds at least one node (a pipeline of K real segments);
  (1) peak      P >= sum_v p_v x[v,k]                         minimise P, then fix P <= P*;
  (2) off-cache o_k >= sum_v p_v x[v,k] - cache, o_k >= 0       minimise sum o_k, fix <= O*;
  (3) comm      c[t,b] >= y[u,b] - y[w,b] for every consumer w of tensor t made by u
                M >= sum_t bytes_t c[t,b] per boundary b         minimise M.
The cumulative variables hold the same plans as binary x[v,k] with sum_k x[v,k] = 1, with one
variable fewer per node and no assignment row; on the zoo CP-SAT solves the whole graph about 2x
faster in this form (a node with two allowed stages, most of an Inc-ILP window, is one Boolean).
A tensor is one output of a producer, identified by (producer, bytes): the pipeline ships it
once per boundary however many later consumers read it. A per-node allowed-stage set (the
Inc-ILP window) turns most nodes into constants, which is what makes windows small.
"""

from __future__ import annotations

import bisect
import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.backends import (
    SOLVERS,
    BackendSettings,
    CpSatModel,
    GurobiSizeLimitError,
    default_cpsat_parameters,
    gurobi_available,
    gurobi_fits,
    gurobi_full_licence,
    solve_linear,
)
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.linear import LinearModel

log = logging.getLogger(__name__)

EDGE_TPU_CACHE_BYTES = 8 * 1024**2  # on-chip parameter cache of one Edge TPU
IDEAL_DP = "ideal-dp"  # the exact DP over the graph's ideals (or a window's), a backend beside the ILP's
DEFAULT_MAX_IDEALS = 200_000  # the DPs' lattice limit when asked for by name
Objectives = tuple[int, int, int]


class PartitionError(HiertuneError):
    """A partition request or plan that cannot be valid (bad K, broken precedence, empty window)."""


@dataclass
class IlpConfig:
    """How the partition ILP is solved."""

    solver: str = "auto"
    """Backend: auto (Gurobi when the model fits its licence, else CP-SAT), gurobi, highs, cpsat, ideal-dp (whole graph or window); auto solves an Inc-ILP window by the ideal DP when it fits."""
    time_limit_s: float = 300.0
    """Seconds for the whole lexicographic solve, all phases together."""
    mip_gap: float = 0.0
    """Relative MIP gap of each phase (0: fixing a phase's optimum needs the optimum)."""
    threads: int = 1
    """Solver threads."""
    cache_bytes: int = EDGE_TPU_CACHE_BYTES
    """Parameter cache per stage, bytes (parameters beyond it are off-cache)."""
    seed: int = 0
    """Solver random seed."""
    cpsat_parameters: dict[str, Any] = field(default_factory=default_cpsat_parameters)
    """Extra CP-SAT parameters ({} = CP-SAT's own defaults)."""


@dataclass
class PartitionResult:
    stages: list[int]
    objectives: Objectives  # (peak param bytes, off-cache bytes, max boundary comm bytes)
    solve_seconds: float
    optimal: bool  # every phase proven optimal (within the allowed sets)
    solver: str
    cpu_seconds: float = 0.0  # this process's CPU time: a fairer clock than wall time on a busy host
    num_vars: int = 0
    num_rows: int = 0
    phases: list[str] = field(default_factory=list)
    fallback: str | None = None  # why another solver than the requested one ran


# ------------------------------------------------------------------------------ evaluation
def tensors(graph: OpGraph) -> list[tuple[int, int, list[int]]]:
    """The graph's tensors as (producer, bytes, consumers); edges of one producer with equal
    bytes are one tensor read by several consumers. Computed once per graph."""
    return graph.memo("ilp.tensors", _group_tensors)


def _group_tensors(graph: OpGraph) -> list[tuple[int, int, list[int]]]:
    groups: dict[tuple[int, int], list[int]] = {}
    for e in graph.edges:
        consumers = groups.setdefault((e.src, e.tensor_bytes), [])
        if e.dst not in consumers:
            consumers.append(e.dst)
    return [(u, b, ws) for (u, b), ws in groups.items()]


@dataclass(frozen=True)
class GraphArrays:
    """The graph as numpy arrays, so a plan is checked and scored without a Python loop (Inc-ILP
    scores plans many times per window)."""

    param: np.ndarray  # per node
    edge_src: np.ndarray
    edge_dst: np.ndarray
    producer: np.ndarray  # per tensor
    nbytes: np.ndarray
    consumers: np.ndarray  # every tensor's consumers, one tensor after another
    first_consumer: np.ndarray  # where each tensor's run starts in `consumers`


def _graph_arrays(graph: OpGraph) -> GraphArrays:
    def ints(values) -> np.ndarray:
        return np.fromiter(values, dtype=np.int64)

    tens = tensors(graph)
    sizes = [len(ws) for _, _, ws in tens]
    return GraphArrays(
        param=ints(v.param_bytes for v in graph.nodes),
        edge_src=ints(e.src for e in graph.edges),
        edge_dst=ints(e.dst for e in graph.edges),
        producer=ints(u for u, _, _ in tens),
        nbytes=ints(b for _, b, _ in tens),
        consumers=ints(w for _, _, ws in tens for w in ws),
        first_consumer=np.cumsum([0] + sizes[:-1], dtype=np.int64) if tens else np.zeros(0, dtype=np.int64),
    )


def graph_arrays(graph: OpGraph) -> GraphArrays:
    return graph.memo("ilp.arrays", _graph_arrays)


def _stage_array(graph: OpGraph, stages: list[int] | np.ndarray, num_stages: int) -> np.ndarray:
    """`stages` as an int array, after the checks of `check_partition`."""
    if len(stages) != graph.num_nodes:
        raise PartitionError(f"plan has {len(stages)} stages for {graph.num_nodes} nodes of {graph.name!r}")
    s = np.asarray(stages, dtype=np.int64)
    bad = np.flatnonzero((s < 0) | (s >= num_stages))
    if bad.size:
        v = int(bad[0])
        raise PartitionError(f"node {graph.nodes[v].name!r} has stage {s[v]}, outside 0..{num_stages - 1}")
    arrays = graph_arrays(graph)
    broken = np.flatnonzero(s[arrays.edge_src] > s[arrays.edge_dst])
    if broken.size:
        u, w = int(arrays.edge_src[broken[0]]), int(arrays.edge_dst[broken[0]])
        raise PartitionError(
            f"plan breaks a dependency: {graph.nodes[u].name!r} (stage {s[u]}) feeds "
            f"{graph.nodes[w].name!r} (stage {s[w]})"
        )
    return s


def check_partition(graph: OpGraph, stages: list[int], num_stages: int) -> None:
    """Raise PartitionError unless `stages` assigns every node a stage in range, in dependency order."""
    _stage_array(graph, stages, num_stages)


def _stage_memory(arrays: GraphArrays, s: np.ndarray, num_stages: int) -> np.ndarray:
    mem = np.zeros(num_stages, dtype=np.int64)
    np.add.at(mem, s, arrays.param)
    return mem


def _crossing_bytes(nbytes: np.ndarray, first: np.ndarray, last: np.ndarray, num_stages: int) -> np.ndarray:
    """Bytes per boundary when tensor t crosses boundaries first[t] .. last[t] - 1 (last >= first):
    a difference array over the boundaries, summed up."""
    diff = np.zeros(num_stages + 1, dtype=np.int64)
    np.add.at(diff, first, nbytes)
    np.add.at(diff, last, -nbytes)
    return np.cumsum(diff)[: max(num_stages - 1, 0)]


def _boundary_comm(arrays: GraphArrays, s: np.ndarray, num_stages: int) -> np.ndarray:
    """A tensor crosses boundaries stage(producer) .. last consumer's stage - 1."""
    if num_stages < 2 or arrays.producer.size == 0:
        return np.zeros(max(num_stages - 1, 0), dtype=np.int64)
    first = s[arrays.producer]
    last = np.maximum(np.maximum.reduceat(s[arrays.consumers], arrays.first_consumer), first)
    return _crossing_bytes(arrays.nbytes, first, last, num_stages)


def stage_param_bytes(graph: OpGraph, stages: list[int], num_stages: int) -> list[int]:
    s = np.asarray(stages, dtype=np.int64)
    return _stage_memory(graph_arrays(graph), s, num_stages).tolist()


def boundary_comm_bytes(graph: OpGraph, stages: list[int], num_stages: int) -> list[int]:
    """Bytes crossing each boundary b (between stage b and b+1)."""
    s = np.asarray(stages, dtype=np.int64)
    return _boundary_comm(graph_arrays(graph), s, num_stages).tolist()


def evaluate_partition(
    graph: OpGraph, stages: list[int], num_stages: int, cache_bytes: int = EDGE_TPU_CACHE_BYTES
) -> Objectives:
    """(peak stage param bytes, total off-cache bytes, largest boundary comm bytes) of a valid plan."""
    s = _stage_array(graph, stages, num_stages)
    arrays = graph_arrays(graph)
    mem = _stage_memory(arrays, s, num_stages)
    comm = _boundary_comm(arrays, s, num_stages)
    return (int(mem.max()), int(np.maximum(mem - cache_bytes, 0).sum()),
            int(comm.max()) if comm.size else 0)


# ------------------------------------------------------------------------------ the model
def propagate_allowed(graph: OpGraph, num_stages: int, allowed: list[set[int]] | None) -> list[list[int]]:
    """Allowed stages per node, tightened by precedence (no feasible plan is lost).

    Only nodes with a choice are walked (in topological order): a node with one allowed stage
    keeps it or makes the model infeasible, which one vectorised check over the edges finds. An
    Inc-ILP window is a few hundred such nodes in a graph of up to ~800, solved in milliseconds.
    """
    n = graph.num_nodes
    if allowed is None:
        sets = [list(range(num_stages))] * n
    else:
        if len(allowed) != n:
            raise PartitionError(f"allowed has {len(allowed)} sets for {n} nodes of {graph.name!r}")
        sets = [sorted(k for k in a if 0 <= k < num_stages) for a in allowed]
    for v, ks in enumerate(sets):
        if not ks:
            raise PartitionError(f"node {graph.nodes[v].name!r} has no allowed stage")
    lo = np.fromiter((ks[0] for ks in sets), dtype=np.int64, count=n)
    hi = np.fromiter((ks[-1] for ks in sets), dtype=np.int64, count=n)
    order = graph.memo("ilp.order", _order_array)
    free = order[lo[order] < hi[order]].tolist()
    pred, succ = graph.predecessors(), graph.successors()
    low, high = lo.tolist(), hi.tolist()
    for v in free:
        for u in pred[v]:
            if low[u] > low[v]:
                low[v] = low[u]
    for v in reversed(free):
        for w in succ[v]:
            if high[w] < high[v]:
                high[v] = high[w]
    lo, hi = np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)
    arrays = graph_arrays(graph)
    broken = np.flatnonzero((lo[arrays.edge_src] > lo[arrays.edge_dst]) | (hi[arrays.edge_src] > hi[arrays.edge_dst]))
    if broken.size:  # a fixed node below a predecessor's earliest stage, or above a successor's latest
        u, w = int(arrays.edge_src[broken[0]]), int(arrays.edge_dst[broken[0]])
        raise PartitionError(
            f"the allowed stages of {graph.nodes[u].name!r} and of its consumer {graph.nodes[w].name!r} "
            "admit no plan in dependency order; widen the allowed sets"
        )
    out = list(sets)
    for v in free:
        kept = [k for k in sets[v] if low[v] <= k <= high[v]]
        if not kept:
            raise PartitionError(
                f"no stage of node {graph.nodes[v].name!r} is consistent with its dependencies' allowed stages"
            )
        out[v] = kept
    return out


@dataclass
class PartitionModel:
    """The built model plus the maps from stages to variable values (for hints and decoding)."""

    graph: OpGraph
    num_stages: int
    cache_bytes: int
    allowed: list[list[int]]
    lm: LinearModel = field(default_factory=LinearModel)
    cum: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, j) -> y[v, allowed[v][j]]
    peak_var: int = -1
    off_vars: list[int] = field(default_factory=list)
    comm_vars: dict[tuple[int, int], int] = field(default_factory=dict)  # (tensor index, boundary)
    max_comm_var: int = -1
    phase_sizes: list[tuple[int, int]] = field(default_factory=list)  # (vars, rows) after each phase

    def y(self, v: int, b: int) -> tuple[int, dict[int, int]]:
        """[s_v <= b] as constant + terms: the cumulative variable of v's last allowed stage <= b."""
        ks = self.allowed[v]
        if b >= ks[-1]:
            return 1, {}
        if b < ks[0]:
            return 0, {}
        return 0, {self.cum[v, bisect.bisect_right(ks, b) - 1]: 1}

    def x(self, v: int, j: int) -> tuple[int, dict[int, int]]:
        """[s_v = allowed[v][j]] as constant + terms: y at that stage minus y at the one before."""
        last = len(self.allowed[v]) - 1
        const, terms = (1, {}) if j == last else (0, {self.cum[v, j]: 1})
        if j > 0:
            terms[self.cum[v, j - 1]] = -1
        return const, terms

    def values(self, stages: list[int], phase: int) -> list[int]:
        """Variable values of the plan `stages` for the first `phase` phases (a solver hint)."""
        vals = [0] * self.phase_sizes[phase - 1][0]
        for (v, j), i in self.cum.items():
            vals[i] = int(stages[v] <= self.allowed[v][j])
        mem = stage_param_bytes(self.graph, stages, self.num_stages)
        vals[self.peak_var] = max(mem)
        if phase >= 2:
            for k, i in enumerate(self.off_vars):
                vals[i] = max(0, mem[k] - self.cache_bytes)
        if phase >= 3:
            tens = tensors(self.graph)
            for (t, b), i in self.comm_vars.items():
                u, _, consumers = tens[t]
                vals[i] = int(stages[u] <= b < max(stages[w] for w in consumers))
            vals[self.max_comm_var] = max(boundary_comm_bytes(self.graph, stages, self.num_stages), default=0)
        return vals

    def decode(self, values: list[int]) -> list[int]:
        """Each node's stage: its first allowed stage whose cumulative variable is set."""
        stages = [ks[-1] for ks in self.allowed]
        for (v, j), i in self.cum.items():  # in (v, j) order: the first set j wins
            if values[i] and stages[v] == self.allowed[v][-1]:
                stages[v] = self.allowed[v][j]
        return stages


def interval_peak_bound(param: list[int], allowed: list[list[int]], num_stages: int) -> int:
    """The peak's lower bound from stage intervals: the nodes whose allowed stages all lie in
    stages a..b fill those b - a + 1 stages, so some stage holds at least their mean. a = b gives
    a stage's fixed nodes, the whole range the even split; in a window the intervals between
    them are what bind (the nodes near a boundary can only go to its two sides)."""
    lo = np.fromiter((ks[0] for ks in allowed), dtype=np.int64, count=len(allowed))
    hi = np.fromiter((ks[-1] for ks in allowed), dtype=np.int64, count=len(allowed))
    weights = np.asarray(param, dtype=np.int64)
    best = 0
    for a in range(num_stages):
        inside = weights * (lo >= a)
        for b in range(a, num_stages):
            best = max(best, -(-int(inside[hi <= b].sum()) // (b - a + 1)))
    return best


def _add_scaled(expr: tuple[int, dict[int, int]], const: int, terms: dict[int, int],
                factor: int) -> tuple[int, dict[int, int]]:
    """expr + factor * (const + terms), for expressions kept as (constant, {var: coefficient})."""
    total, acc = expr
    for i, c in terms.items():
        acc[i] = acc.get(i, 0) + factor * c
    return total + factor * const, acc


def _order_array(graph: OpGraph) -> np.ndarray:
    return np.asarray(graph.topological_order(), dtype=np.int64)


def _node_pairs(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """Producer and consumer of every distinct (src, dst) edge: one precedence per pair."""
    arrays = graph_arrays(graph)
    pairs = np.unique(np.stack([arrays.edge_src, arrays.edge_dst], axis=1), axis=0)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def prepare_graph(graph: OpGraph) -> None:
    """Build the structures every solve of `graph` memoises (tensors, arrays, neighbour lists), so
    a timed solve does not pay for them: the first solve of a graph would otherwise look slower
    than the ones after it (benchmarks call this before timing either side)."""
    graph_arrays(graph)
    graph.predecessors()
    graph.successors()
    graph.asap_levels()  # the Inc-ILP window's levels
    graph.memo("ilp.node_pairs", _node_pairs)
    graph.memo("ilp.order", _order_array)


def build_model(graph: OpGraph, num_stages: int, cache_bytes: int, allowed: list[set[int]] | None) -> PartitionModel:
    if num_stages < 1:
        raise PartitionError(f"--stages must be at least 1 (got {num_stages})")
    if num_stages > graph.num_nodes:
        raise PartitionError(
            f"{num_stages} stages need at least as many nodes; {graph.name!r} has {graph.num_nodes}"
        )
    K = num_stages
    pm = PartitionModel(graph, K, cache_bytes, propagate_allowed(graph, K, allowed))
    lm, A = pm.lm, pm.allowed
    arrays = graph_arrays(graph)
    param = arrays.param.tolist()
    total = sum(param)
    lo = np.fromiter((ks[0] for ks in A), dtype=np.int64, count=len(A))
    hi = np.fromiter((ks[-1] for ks in A), dtype=np.int64, count=len(A))
    fixed = lo == hi

    # phase 1: cumulative variables, non-empty stages, precedence, peak. Each stage's node count
    # and parameter bytes are linear in the cumulative variables: a constant (fixed nodes, and
    # the x[v,k] = 1 - y[v,k'] of a node's last stage) plus terms.
    fixed_count = np.bincount(lo[fixed], minlength=K).tolist()
    fixed_mem = np.zeros(K, dtype=np.int64)
    np.add.at(fixed_mem, lo[fixed], arrays.param[fixed])
    fixed_mem = fixed_mem.tolist()
    count = [(0, {}) for _ in range(K)]
    mem = [(fixed_mem[k], {}) for k in range(K)]
    for v in np.flatnonzero(~fixed).tolist():
        ks = A[v]
        for j in range(len(ks) - 1):
            pm.cum[v, j] = lm.add_var(0, 1, f"y[{v},{ks[j]}]")
            if j:
                lm.add_row({pm.cum[v, j - 1]: 1, pm.cum[v, j]: -1}, hi=0)  # y[v,b] <= y[v,b']
        for j, k in enumerate(ks):
            const, terms = pm.x(v, j)
            count[k] = _add_scaled(count[k], const, terms, 1)
            mem[k] = _add_scaled(mem[k], const, terms, param[v])
    for k in range(K):
        if fixed_count[k]:
            continue
        const, terms = count[k]
        if not terms and const < 1:
            raise PartitionError(f"stage {k} can hold no node under the allowed stages: widen the window")
        lm.add_row(terms, 1 - const)
    pair_src, pair_dst = graph.memo("ilp.node_pairs", _node_pairs)
    open_pairs = np.flatnonzero(lo[pair_dst] < np.minimum(hi[pair_src], K - 1))  # others: both ends fixed
    for u, w in zip(pair_src[open_pairs].tolist(), pair_dst[open_pairs].tolist()):
        for b in range(A[w][0], min(A[u][-1], K - 1)):
            cu, tu = pm.y(u, b)
            cw, tw = pm.y(w, b)
            terms = dict(tu)
            for i, c in tw.items():
                terms[i] = terms.get(i, 0) - c
            lm.add_row(terms, cw - cu)  # y(u,b) - y(w,b) >= 0
    peak_lb = max(max(param), interval_peak_bound(param, A, K))
    pm.peak_var = lm.add_var(peak_lb, max(total, peak_lb), "peak")
    for k in range(K):
        const, terms = mem[k]
        lm.add_row({pm.peak_var: 1, **{i: -c for i, c in terms.items()}}, const)  # P - mem_k >= 0
    pm.phase_sizes.append((lm.num_vars, lm.num_rows))

    # phase 2: off-cache bytes per stage
    for k in range(K):
        const, terms = mem[k]
        o = lm.add_var(max(0, fixed_mem[k] - cache_bytes), total, f"off[{k}]")
        pm.off_vars.append(o)
        lm.add_row({o: 1, **{i: -c for i, c in terms.items()}}, const - cache_bytes)  # o_k >= mem_k - cache
    pm.phase_sizes.append((lm.num_vars, lm.num_rows))

    # phase 3: communication across each boundary. Tensor t of producer u crosses boundary b
    # surely when u is in a stage <= b and some consumer w in one > b whatever the free nodes
    # do (hi_u <= b < max_w lo_w): a constant, summed over all tensors at once. It may
    # cross only for lo_u <= b < max_w hi_w; those boundaries get a variable c[t,b] with one
    # row per consumer that can still be after b.
    tens = tensors(graph)
    comm_terms: list[dict[int, int]] = [{} for _ in range(K - 1)]
    const_comm = [0] * (K - 1)
    if tens:
        first, reach_lo, reach_hi = arrays.first_consumer, lo[arrays.consumers], hi[arrays.consumers]
        last_lo, last_hi = np.maximum.reduceat(reach_lo, first), np.maximum.reduceat(reach_hi, first)
        sure_from = hi[arrays.producer]
        const_comm = _crossing_bytes(arrays.nbytes, sure_from, np.maximum(last_lo, sure_from), K).tolist()
        open_tensors = (lo[arrays.producer] < last_hi) & ((sure_from > lo[arrays.producer]) | (last_hi > last_lo))
        for t in np.flatnonzero(open_tensors & (arrays.nbytes > 0)).tolist():
            u, nbytes, consumers = tens[t]
            for b in range(int(lo[u]), int(last_hi[t])):
                if sure_from[t] <= b < last_lo[t]:
                    continue  # a sure crossing, counted above
                cu, tu = pm.y(u, b)
                c = lm.add_var(0, 1, f"c[{t},{b}]")
                pm.comm_vars[t, b] = c
                for w in consumers:
                    if hi[w] <= b:
                        continue  # w is surely at or before b: its row would be c >= y_u - 1
                    cw, tw = pm.y(w, b)
                    row = {c: 1, **{i: -coef for i, coef in tu.items()}}
                    for i, coef in tw.items():
                        row[i] = row.get(i, 0) + coef
                    lm.add_row(row, cu - cw)  # c >= y(u,b) - y(w,b)
                comm_terms[b][c] = nbytes
    max_const = max(const_comm, default=0)
    pm.max_comm_var = lm.add_var(max_const, max(int(arrays.nbytes.sum()), max_const), "max_comm")
    for b in range(K - 1):
        row = {pm.max_comm_var: 1}
        row.update({i: -nb for i, nb in comm_terms[b].items()})
        lm.add_row(row, const_comm[b])
    pm.phase_sizes.append((lm.num_vars, lm.num_rows))
    return pm


def _phase_model(pm: PartitionModel, phase: int, bounds: list[tuple[dict[int, int], int]]) -> LinearModel:
    nv, nr = pm.phase_sizes[phase - 1]
    lm = LinearModel(pm.lm.lb[:nv], pm.lm.ub[:nv], pm.lm.names[:nv], pm.lm.rows[:nr])
    for terms, hi in bounds:
        lm.add_row(terms, hi=hi)
    return lm


# ------------------------------------------------------------------------------ solving
def choose_solver(requested: str, pm: PartitionModel) -> tuple[str, str | None]:
    """Resolve `auto` and an unusable Gurobi to a backend; the second value says why it changed."""
    if requested not in ("auto", *SOLVERS):
        raise HiertuneError(f"unknown solver {requested!r}; choose one of auto, {', '.join(SOLVERS)}, {IDEAL_DP}")
    if requested not in ("auto", "gurobi"):
        return requested, None
    if not gurobi_available():
        why = "gurobipy is not installed or its licence does not validate; using CP-SAT"
        return "cpsat", (why if requested == "gurobi" else None)
    if gurobi_fits(pm.lm, extra_rows=2) or gurobi_full_licence():
        return "gurobi", None
    if requested == "auto":
        return "cpsat", None
    return "gurobi", None  # try it: errno 10010 decides and triggers the fallback


def solve_partition(
    graph: OpGraph,
    num_stages: int,
    config: IlpConfig | None = None,
    allowed: list[set[int]] | None = None,
    hint: list[int] | None = None,
) -> PartitionResult:
    """Lexicographically optimal K-stage partition within the allowed stage sets. `ideal-dp`
    solves the whole graph (`ideal_dp.ideal_partition`) or a window (`window_dp.window_partition`);
    `auto` solves a window (some allowed set narrowed) by the window DP when its ideal intervals
    fit `window_dp.WINDOW_MAX_IDEALS`, else, like a whole graph, by Gurobi or CP-SAT. The
    result's `solver` names the method that ran."""
    config = config or IlpConfig()
    window = allowed is not None and any(len(a) < num_stages for a in allowed)
    if config.solver == IDEAL_DP:
        from hiertune.solvers.ideal_dp import ideal_partition
        from hiertune.solvers.window_dp import window_partition

        if window:
            return window_partition(graph, num_stages, allowed, config.cache_bytes, config.time_limit_s,
                                    max_ideals=DEFAULT_MAX_IDEALS, max_pairs=DEFAULT_MAX_IDEALS**2)
        return ideal_partition(graph, num_stages, config.cache_bytes, hint, config.time_limit_s)
    dp_note = None
    if config.solver == "auto" and window:
        from hiertune.solvers.ideal_dp import IdealDpLimitError
        from hiertune.solvers.window_dp import window_partition

        try:  # a window's intervals are usually tiny: the DP is exact and far faster than the ILP
            return window_partition(graph, num_stages, allowed, config.cache_bytes, config.time_limit_s)
        except IdealDpLimitError as err:
            dp_note = f"ideal-dp: {err}; solved by the ILP"
    start = time.perf_counter()
    cpu_start = time.process_time()
    pm = build_model(graph, num_stages, config.cache_bytes, allowed)
    solver, fallback = choose_solver(config.solver, pm)
    if fallback:
        _warn(fallback)
    if hint is not None:
        check_partition(graph, hint, num_stages)
        if any(hint[v] not in ks for v, ks in enumerate(pm.allowed)):
            hint = None  # outside the window: useless as a start
    try:
        stages, objectives, optimal, phases = _lexicographic(pm, solver, config, start, hint)
    except GurobiSizeLimitError as err:
        fallback = f"{err}; falling back to CP-SAT"
        _warn(fallback)
        solver = "cpsat"
        stages, objectives, optimal, phases = _lexicographic(pm, solver, config, start, hint)
    if dp_note:
        phases.insert(0, dp_note)
    return PartitionResult(
        stages=stages,
        objectives=objectives,
        solve_seconds=time.perf_counter() - start,
        optimal=optimal,
        solver=solver,
        cpu_seconds=time.process_time() - cpu_start,
        num_vars=pm.lm.num_vars,
        num_rows=pm.lm.num_rows,
        phases=phases,
        fallback=fallback,
    )


def _warn(message: str) -> None:
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _lexicographic(
    pm: PartitionModel, solver: str, config: IlpConfig, start: float, hint: list[int] | None
) -> tuple[list[int], Objectives, bool, list[str]]:
    graph, K, cache = pm.graph, pm.num_stages, pm.cache_bytes
    deadline = start + config.time_limit_s
    bounds: list[tuple[dict[int, int], int]] = []
    stages = hint
    optimal = True
    phases: list[str] = []
    objective_of_phase = [
        {pm.peak_var: 1},
        {o: 1 for o in pm.off_vars},
        {pm.max_comm_var: 1},
    ]
    lower_bounds = _phase_lower_bounds(pm)
    cpsat_model = CpSatModel()  # each phase's model extends the last: CP-SAT copies only what is new
    current = evaluate_partition(graph, stages, K, cache) if stages is not None else None  # of `stages`
    for phase in (1, 2, 3):
        name = ("peak", "off-cache", "comm")[phase - 1]
        if current is not None and current[phase - 1] <= lower_bounds[phase - 1]:
            phases.append(f"{name}: at its lower bound")  # the plan is provably optimal here: no solve
        else:
            lm = _phase_model(pm, phase, bounds)
            settings = BackendSettings(
                time_limit_s=max(deadline - time.perf_counter(), 0.5),
                mip_gap=config.mip_gap,
                threads=config.threads,
                seed=config.seed,
                cpsat_parameters=config.cpsat_parameters,
            )
            out = solve_linear(solver, lm, objective_of_phase[phase - 1], settings,
                               pm.values(stages, phase) if stages is not None else None, cpsat_model)
            phases.append(f"{name}: {out.status} {out.seconds:.2f}s")
            if out.values is None:
                if stages is None:
                    raise PartitionError(
                        f"{solver} found no partition of {graph.name!r} into {K} stages within "
                        f"{config.time_limit_s:g} s; raise the time limit or use Inc-ILP (--gamma)"
                    )
                optimal = False
            else:
                new = pm.decode(out.values)
                new_objectives = evaluate_partition(graph, new, K, cache)
                if current is None or _better(new_objectives, current, phase):
                    stages, current = new, new_objectives
                optimal = optimal and out.optimal
        if phase == 1:  # fix this phase's optimum for the next ones
            pm.lm.ub[pm.peak_var] = min(pm.lm.ub[pm.peak_var], current[0])
        elif phase == 2:
            bounds.append(({o: 1 for o in pm.off_vars}, current[1]))
    assert stages is not None and current is not None
    return stages, current, optimal, phases


def _phase_lower_bounds(pm: PartitionModel) -> tuple[int, int, int]:
    """Bounds no plan of the model can beat, per phase: a start that meets one needs no solve.

    The peak's is the model's own (`interval_peak_bound`, at least the largest node); off-cache
    bytes are at least each stage's fixed excess over the cache and the total excess over K
    caches; the largest transfer is at least what must cross some boundary.
    """
    lb = pm.lm.lb
    total_excess = max(0, pm.graph.total_param_bytes - pm.num_stages * pm.cache_bytes)
    return (int(lb[pm.peak_var]), max(total_excess, int(sum(lb[o] for o in pm.off_vars))),
            int(lb[pm.max_comm_var]))


def _better(a: Objectives, b: Objectives, phase: int) -> bool:
    return a[:phase] <= b[:phase]
