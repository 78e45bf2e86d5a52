"""The stage-partition ILP: K pipeline stages over an operator DAG, solved lexicographically.

Model (the seed paper's), written once as a neutral `LinearModel` for every backend, in the
cumulative form of the assignment x[v,k] (node v in stage k):
  binary y[v,b] = [s_v <= b] = sum_{k<=b} x[v,k] for the allowed stages b of v but its last,
  monotone (y[v,b] <= y[v,b']) for b < b'; x[v,k] = y[v,k] - y[v,k-1] is a linear expression;
  precedence: y[u,b] >= y[w,b] per edge and boundary (a two-term row);
  every stage holds at least one node (a pipeline of K real segments);
  (1) peak      P >= sum_v p_v x[v,k]                         minimise P, fix P <= P*;
  (2) off-cache o_k >= sum_v p_v x[v,k] - cache, o_k >= 0       minimise sum o_k, fix <= O*;
  (3) comm      c[t,b] >= y[u,b] - y[w,b] for every consumer w of tensor t made by u
                M >= sum_t bytes_t c[t,b] per boundary b         minimise M, fix M <= M*;
  (4) macs      C >= sum_v macs_v x[v,k]   (not the paper's; opt-in)   minimise C.
Each objective is one phase (`_peak_phase`, ...), built as its own block of variables and rows
over `LinExpr`s; `IlpConfig.objectives` picks the phases and their order, and every phase's
optimum is fixed the same way: a row `objective <= optimum` after that phase's rows.
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
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.backends import (
    SOLVERS,
    BackendSettings,
    CpSatModel,
    GurobiSizeLimitError,
    StopSignal,
    default_cpsat_parameters,
    gurobi_available,
    gurobi_fits,
    gurobi_full_licence,
    solve_linear,
)
from hiertune.solvers.band_bound import BandCheck, Caps, band_transfer_floor
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.linear import LinExpr, LinearModel, SolveOutcome

log = logging.getLogger(__name__)

EDGE_TPU_CACHE_BYTES = 8 * 1024**2  # on-chip parameter cache of one Edge TPU
IDEAL_DP = "ideal-dp"  # the exact DP over the graph's ideals (or a window's), a backend beside the ILP's
DEFAULT_MAX_IDEALS = 200_000  # the DPs' lattice limit when asked for by name
Objectives = tuple[int, int, int]
PAPER_OBJECTIVES = ("peak", "off-cache", "comm")  # the seed paper's lexicographic order
OBJECTIVES = (*PAPER_OBJECTIVES, "macs")  # macs: the largest per-stage MACs (not in the paper)


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
    objectives: tuple[str, ...] = PAPER_OBJECTIVES
    """Lexicographic objectives in solve order, out of peak, off-cache, comm, macs (macs: the slowest stage's MACs, needs a .tflite/.onnx graph; the ideal DP solves the paper's order only)."""
    band_check_after_s: float = 1.0
    """Windows only: from this many seconds into a peak, comm or macs phase, a thread beside the
    solver checks each better incumbent against the band bound (`solvers/band_bound.py`, a
    relaxation that keeps each stage prefix in its band and drops most containment between them);
    once no window plan can beat one, the solver is stopped and the phase is optimal. The solve also restarts
    from its incumbent at this time, then 4x, 16x, ... later. Wide windows find their optimum fast
    and prove it slowly; a window that solves within this time never pays for a check. inf: never."""


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
    max_stage_macs: int = 0  # the slowest stage's MACs (0 when the graph carries none)
    key: tuple[int, ...] = ()  # the configured objectives' values in solve order: what was minimised


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
    macs: np.ndarray  # per node
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
        macs=ints(v.macs for v in graph.nodes),
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


def stage_macs(graph: OpGraph, stages: list[int], num_stages: int) -> list[int]:
    """MACs per stage (the compute that sets a pipeline stage's time)."""
    s = np.asarray(stages, dtype=np.int64)
    macs = np.zeros(num_stages, dtype=np.int64)
    np.add.at(macs, s, graph_arrays(graph).macs)
    return macs.tolist()


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


def evaluate_objectives(graph: OpGraph, stages: list[int], num_stages: int, cache_bytes: int,
                        objectives: tuple[str, ...] = PAPER_OBJECTIVES) -> tuple[int, ...]:
    """The values of `objectives` (names out of OBJECTIVES) for a valid plan, in that order: the
    key a lexicographic solve in that order minimises."""
    peak, off, comm = evaluate_partition(graph, stages, num_stages, cache_bytes)
    value = {"peak": peak, "off-cache": off, "comm": comm}
    if "macs" in objectives:
        value["macs"] = max(stage_macs(graph, stages, num_stages))
    return tuple(value[name] for name in objectives)


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
        low, high = [0] * n, [num_stages - 1] * n
    else:
        if len(allowed) != n:
            raise PartitionError(f"allowed has {len(allowed)} sets for {n} nodes of {graph.name!r}")
        sets = [sorted(a) for a in allowed]  # comprehensions: a window's solve calls this per node
        if not all(ks and 0 <= ks[0] and ks[-1] < num_stages for ks in sets):
            sets = [[k for k in ks if 0 <= k < num_stages] for ks in sets]  # out-of-range stages are dropped
            for v, ks in enumerate(sets):
                if not ks:
                    raise PartitionError(f"node {graph.nodes[v].name!r} has no allowed stage")
        low = [ks[0] for ks in sets]
        high = [ks[-1] for ks in sets]
    lo = np.asarray(low, dtype=np.int64)
    hi = np.asarray(high, dtype=np.int64)
    order = topological_array(graph)
    free = order[lo[order] < hi[order]].tolist()
    pred, succ = graph.predecessors(), graph.successors()
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
        ks = sets[v]
        if ks[0] >= low[v] and ks[-1] <= high[v]:
            continue  # not tightened
        kept = [k for k in ks if low[v] <= k <= high[v]]
        if not kept:
            raise PartitionError(
                f"no stage of node {graph.nodes[v].name!r} is consistent with its dependencies' allowed stages"
            )
        out[v] = kept
    return out


@dataclass
class Phase:
    """One objective of the lexicographic solve: minimised over the model built so far, then
    fixed at its optimum (a row `objective <= optimum`) before the next phase is added."""

    name: str
    objective: LinExpr
    lower_bound: int  # no plan of the model beats it: a start that meets it needs no solve
    size: tuple[int, int] = (0, 0)  # (variables, rows) of the model once this phase is built


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
    max_macs_var: int = -1
    phases: list[Phase] = field(default_factory=list)  # in solve order
    _stage_param: list[LinExpr] | None = field(default=None, repr=False)

    @property
    def is_window(self) -> bool:
        """Does some node miss a stage (an Inc-ILP window), or is every node free everywhere?"""
        return any(len(ks) < self.num_stages for ks in self.allowed)

    def y(self, v: int, b: int) -> LinExpr:
        """[s_v <= b]: the cumulative variable of v's last allowed stage <= b (or a constant)."""
        ks = self.allowed[v]
        if b >= ks[-1]:
            return LinExpr(1)
        if b < ks[0]:
            return LinExpr(0)
        return LinExpr(0, {self.cum[v, bisect.bisect_right(ks, b) - 1]: 1})

    def fixed_sums(self, weights: np.ndarray) -> list[int]:
        """sum_v w_v over the nodes fixed to each stage (what no solution can take away)."""
        lo, hi = self.stage_range()
        fixed = lo == hi
        sums = np.zeros(self.num_stages, dtype=np.int64)
        np.add.at(sums, lo[fixed], weights[fixed])
        return sums.tolist()

    def stage_range(self) -> tuple[np.ndarray, np.ndarray]:
        """Each node's first and last allowed stage."""
        A = self.allowed
        return (np.fromiter((ks[0] for ks in A), dtype=np.int64, count=len(A)),
                np.fromiter((ks[-1] for ks in A), dtype=np.int64, count=len(A)))

    def stage_sums(self, weights: np.ndarray) -> list[LinExpr]:
        """sum_v w_v x[v,k] for every stage k. The fixed nodes' weights are the constant; a free
        node's x[v,k_j] = y[v,k_j] - y[v,k_(j-1)] puts +w_v on y[v,k_j] in stage k_j and -w_v on it
        in stage k_(j+1), and its last stage's x = 1 - y[.] adds w_v to that stage's constant."""
        A, cum = self.allowed, self.cum
        lo, hi = self.stage_range()
        sums = [LinExpr(c) for c in self.fixed_sums(weights)]
        w = weights.tolist()
        for v in np.flatnonzero(lo < hi).tolist():
            wv = w[v]
            if not wv:
                continue
            ks = A[v]
            sums[ks[-1]].const += wv
            for j in range(len(ks) - 1):
                i = cum[v, j]
                here, after = sums[ks[j]].terms, sums[ks[j + 1]].terms
                here[i] = here.get(i, 0) + wv
                after[i] = after.get(i, 0) - wv
        return sums

    def stage_param(self) -> list[LinExpr]:
        """Each stage's parameter bytes (shared by the peak and off-cache phases)."""
        if self._stage_param is None:
            self._stage_param = self.stage_sums(graph_arrays(self.graph).param)
        return self._stage_param

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def values(self, stages: list[int], phase: int | None = None) -> list[int]:
        """Variable values of the plan `stages` (a solver hint), of the first `phase` phases' model
        (all of it when None)."""
        vals = [0] * self.lm.num_vars
        for (v, j), i in self.cum.items():
            vals[i] = int(stages[v] <= self.allowed[v][j])
        mem = stage_param_bytes(self.graph, stages, self.num_stages)
        if self.peak_var >= 0:
            vals[self.peak_var] = max(mem)
        for k, i in enumerate(self.off_vars):
            vals[i] = max(0, mem[k] - self.cache_bytes)
        if self.max_comm_var >= 0:
            tens = tensors(self.graph)
            for (t, b), i in self.comm_vars.items():
                u, _, consumers = tens[t]
                vals[i] = int(stages[u] <= b < max(stages[w] for w in consumers))
            vals[self.max_comm_var] = max(boundary_comm_bytes(self.graph, stages, self.num_stages), default=0)
        if self.max_macs_var >= 0:
            vals[self.max_macs_var] = max(stage_macs(self.graph, stages, self.num_stages))
        return vals if phase is None else vals[: self.phases[phase - 1].size[0]]

    def decode(self, values: list[int]) -> list[int]:
        """Each node's stage: its first allowed stage whose cumulative variable is set."""
        stages = [ks[-1] for ks in self.allowed]
        for (v, j), i in self.cum.items():  # in (v, j) order: the first set j wins
            if values[i] and stages[v] == self.allowed[v][-1]:
                stages[v] = self.allowed[v][j]
        return stages


def interval_peak_bound(weights: list[int], allowed: list[list[int]], num_stages: int) -> int:
    """The lower bound on the largest stage sum of `weights` (parameter bytes, MACs) from stage
    intervals: the nodes whose allowed stages all lie in stages a..b fill those b - a + 1 stages,
    so some stage holds at least their mean. a = b gives a stage's fixed nodes, the whole range
    the even split; in a window the intervals between them are what bind (the nodes near a
    boundary can only go to its two sides)."""
    lo = np.fromiter((ks[0] for ks in allowed), dtype=np.int64, count=len(allowed))
    hi = np.fromiter((ks[-1] for ks in allowed), dtype=np.int64, count=len(allowed))
    w = np.asarray(weights, dtype=np.int64)
    best = 0
    for a in range(num_stages):
        inside = w * (lo >= a)
        for b in range(a, num_stages):
            best = max(best, -(-int(inside[hi <= b].sum()) // (b - a + 1)))
    return best


def topological_array(graph: OpGraph) -> np.ndarray:
    """The graph's topological order as an array (memoised: the window's hot paths index by it)."""
    return graph.memo("ilp.order", lambda g: np.asarray(g.topological_order(), dtype=np.int64))


def has_one_order(graph: OpGraph) -> bool:
    """Is the topological order the graph's only one (each node feeds the next)? Then its ideals
    form a chain, every plan is a split of that order, and `order_split.split_order` along it is
    the exact optimum: residual networks without parallel branches (DenseNets, EfficientNets in
    TFLite form) are such chains at 300-800 ops. Memoised."""
    return graph.memo("ilp.one_order", _has_one_order)


def _has_one_order(graph: OpGraph) -> bool:
    order, arrays = topological_array(graph), graph_arrays(graph)
    n = graph.num_nodes
    if n < 2:
        return True
    edges = arrays.edge_src.astype(np.int64) * n + arrays.edge_dst
    return bool(np.isin(order[:-1] * n + order[1:], edges).all())


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
    graph.asap_levels()
    graph.memo("ilp.node_pairs", _node_pairs)
    topological_array(graph)
    has_one_order(graph)
    from hiertune.solvers.ideal_dp import bit_graph  # the DPs' view of the graph (ideal_dp imports this module)
    from hiertune.solvers.incilp import prepare_windows  # Inc-ILP's window levels (incilp imports it too)

    bit_graph(graph)
    prepare_windows(graph)


def check_objectives(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The objective order as a tuple, or one error naming the flag and the choices."""
    names = tuple(names)
    bad = [n for n in names if n not in OBJECTIVES]
    if not names or bad or len(set(names)) != len(names):
        raise PartitionError(
            f"--objectives {','.join(names) or '(empty)'}: give distinct objectives out of "
            f"{', '.join(OBJECTIVES)} in solve order (the paper's: {','.join(PAPER_OBJECTIVES)})"
        )
    return names


def build_model(graph: OpGraph, num_stages: int, cache_bytes: int, allowed: list[set[int]] | None,
                objectives: tuple[str, ...] = PAPER_OBJECTIVES) -> PartitionModel:
    """The partition model (see the module docstring): the stage structure, then one block of
    variables and rows per objective, in solve order."""
    if num_stages < 1:
        raise PartitionError(f"--stages must be at least 1 (got {num_stages})")
    if num_stages > graph.num_nodes:
        raise PartitionError(
            f"{num_stages} stages need at least as many nodes; {graph.name!r} has {graph.num_nodes}"
        )
    pm = PartitionModel(graph, num_stages, cache_bytes, propagate_allowed(graph, num_stages, allowed))
    _add_structure(pm)
    for name in check_objectives(objectives):
        phase = _PHASE_BUILDERS[name](pm)
        phase.size = (pm.lm.num_vars, pm.lm.num_rows)
        pm.phases.append(phase)
    return pm


def _add_structure(pm: PartitionModel) -> None:
    """Cumulative variables (monotone in b), non-empty stages, precedence y[u,b] >= y[w,b]."""
    lm, A, K = pm.lm, pm.allowed, pm.num_stages
    lo, hi = pm.stage_range()
    for v in np.flatnonzero(lo < hi).tolist():
        ks = A[v]
        for j in range(len(ks) - 1):
            pm.cum[v, j] = lm.add_var(0, 1, f"y[{v},{ks[j]}]")
            if j:
                lm.add_le(LinExpr.var(pm.cum[v, j - 1]), LinExpr.var(pm.cum[v, j]))  # y[v,b] <= y[v,b']
    ones = np.ones(len(A), dtype=np.int64)
    for k, (fixed, count) in enumerate(zip(pm.fixed_sums(ones), pm.stage_sums(ones))):
        if fixed:
            continue  # a fixed node keeps the stage non-empty
        if not count.terms and count.const < 1:
            raise PartitionError(f"stage {k} can hold no node under the allowed stages: widen the window")
        lm.add_ge(count, 1)
    pair_src, pair_dst = pm.graph.memo("ilp.node_pairs", _node_pairs)
    open_pairs = np.flatnonzero(lo[pair_dst] < np.minimum(hi[pair_src], K - 1))  # others: both ends fixed
    for u, w in zip(pair_src[open_pairs].tolist(), pair_dst[open_pairs].tolist()):
        for b in range(A[w][0], min(A[u][-1], K - 1)):
            lm.add_ge(pm.y(u, b), pm.y(w, b))


def _largest_stage_sum(pm: PartitionModel, weights: np.ndarray, name: str) -> tuple[int, LinExpr]:
    """A variable Z >= every stage's sum of `weights`, bounded below by the interval bound."""
    lb = max(int(weights.max()), interval_peak_bound(weights.tolist(), pm.allowed, pm.num_stages))
    z = pm.lm.add_var(lb, max(int(weights.sum()), lb), name)
    sums = pm.stage_param() if name == "peak" else pm.stage_sums(weights)
    for stage_sum in sums:
        pm.lm.add_ge(LinExpr.var(z), stage_sum)
    return z, LinExpr.var(z)


def _peak_phase(pm: PartitionModel) -> Phase:
    """(1) P >= sum_v p_v x[v,k] for every stage k; minimise P."""
    pm.peak_var, objective = _largest_stage_sum(pm, graph_arrays(pm.graph).param, "peak")
    return Phase("peak", objective, int(pm.lm.lb[pm.peak_var]))


def _off_cache_phase(pm: PartitionModel) -> Phase:
    """(2) o_k >= sum_v p_v x[v,k] - cache, o_k >= 0; minimise sum_k o_k. Bounded below by each
    stage's fixed excess over the cache and the total excess over K caches."""
    objective = LinExpr()
    fixed = pm.fixed_sums(graph_arrays(pm.graph).param)
    for k, mem in enumerate(pm.stage_param()):
        o = pm.lm.add_var(max(0, fixed[k] - pm.cache_bytes), pm.graph.total_param_bytes, f"off[{k}]")
        pm.off_vars.append(o)
        pm.lm.add_ge(LinExpr.var(o), mem - pm.cache_bytes)
        objective.terms[o] = 1
    total_excess = max(0, pm.graph.total_param_bytes - pm.num_stages * pm.cache_bytes)
    return Phase("off-cache", objective, max(total_excess, sum(int(pm.lm.lb[o]) for o in pm.off_vars)))


def _comm_phase(pm: PartitionModel) -> Phase:
    """(3) c[t,b] >= y[u,b] - y[w,b] for every consumer w of tensor t made by u,
    M >= sum_t bytes_t c[t,b] per boundary b; minimise M.

    Tensor t of producer u crosses boundary b surely when u is in a stage <= b and some consumer
    w in one > b whatever the free nodes do (hi_u <= b < max_w lo_w): a constant, summed over all
    tensors at once. It may cross only for lo_u <= b < max_w hi_w; those boundaries get a
    variable c[t,b] with one row per consumer that can still be after b."""
    lm, K = pm.lm, pm.num_stages
    arrays = graph_arrays(pm.graph)
    lo, hi = pm.stage_range()
    tens = tensors(pm.graph)
    crossing = [LinExpr() for _ in range(K - 1)]  # bytes over each boundary
    if tens:
        first, reach_lo, reach_hi = arrays.first_consumer, lo[arrays.consumers], hi[arrays.consumers]
        last_lo, last_hi = np.maximum.reduceat(reach_lo, first), np.maximum.reduceat(reach_hi, first)
        sure_from = hi[arrays.producer]
        sure = _crossing_bytes(arrays.nbytes, sure_from, np.maximum(last_lo, sure_from), K).tolist()
        for b, nbytes in enumerate(sure):
            crossing[b].const = nbytes
        open_tensors = (lo[arrays.producer] < last_hi) & ((sure_from > lo[arrays.producer]) | (last_hi > last_lo))
        for t in np.flatnonzero(open_tensors & (arrays.nbytes > 0)).tolist():
            u, nbytes, consumers = tens[t]
            for b in range(int(lo[u]), int(last_hi[t])):
                if sure_from[t] <= b < last_lo[t]:
                    continue  # a sure crossing, counted above
                c = lm.add_var(0, 1, f"c[{t},{b}]")
                pm.comm_vars[t, b] = c
                yu = pm.y(u, b)
                for w in consumers:
                    if hi[w] <= b:
                        continue  # w is surely at or before b: its row would be c >= y_u - 1
                    lm.add_ge(LinExpr.var(c), yu - pm.y(w, b))
                crossing[b].terms[c] = nbytes
    lb = max((e.const for e in crossing), default=0)
    pm.max_comm_var = lm.add_var(lb, max(int(arrays.nbytes.sum()), lb), "max_comm")
    for expr in crossing:
        lm.add_ge(LinExpr.var(pm.max_comm_var), expr)
    # A window's bands bound it far better; that bound only decides whether the phase needs a
    # solve: as the variable's bound it changed CP-SAT's search (NASNetLarge at K = 8: 2.4 -> 5.8 s)
    return Phase("comm", LinExpr.var(pm.max_comm_var),
                 max(lb, band_transfer_floor(pm.graph, pm.allowed, K)) if pm.is_window else lb)


def _macs_phase(pm: PartitionModel) -> Phase:
    """(4, not the paper's) C >= sum_v macs_v x[v,k] for every stage k; minimise C: among the
    plans the three before it tie on, the one whose slowest stage computes least."""
    macs = graph_arrays(pm.graph).macs
    if not macs.any():
        raise PartitionError(
            f"graph {pm.graph.name!r} carries no per-operator MACs (graph JSON written without them, e.g. "
            "the zoo's Keras forms): partition its .tflite or .onnx file, or drop macs from --objectives"
        )
    pm.max_macs_var, objective = _largest_stage_sum(pm, macs, "max_macs")
    return Phase("macs", objective, int(pm.lm.lb[pm.max_macs_var]))


_PHASE_BUILDERS = {"peak": _peak_phase, "off-cache": _off_cache_phase, "comm": _comm_phase, "macs": _macs_phase}


def _phase_model(pm: PartitionModel, phase: int, optima: list[int]) -> LinearModel:
    """The model of the first `phase` phases, each earlier phase's objective fixed at its optimum
    right after that phase's rows: every phase's model extends the one before (what CP-SAT's
    incremental copy needs)."""
    nv = pm.phases[phase - 1].size[0]
    lm = LinearModel(pm.lm.lb[:nv], pm.lm.ub[:nv], pm.lm.names[:nv], [])
    start = 0
    for q in range(phase):
        end = pm.phases[q].size[1]
        lm.rows.extend(pm.lm.rows[start:end])
        start = end
        if q < phase - 1:
            lm.add_le(pm.phases[q].objective, optima[q])
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
    if gurobi_fits(pm.lm, extra_rows=len(pm.phases) - 1) or gurobi_full_licence():  # + the fixing rows
        return "gurobi", None
    if requested == "auto":
        return "cpsat", None
    return "gurobi", None  # try it: errno 10010 decides and triggers the fallback


def _peak_within(graph: OpGraph, num_stages: int, allowed: list[set[int]], hint: list[int] | None) -> float:
    """The hint's peak where the hint lies within the allowed stages (a bound on the window's
    optimum peak), else infinity."""
    if hint is None or any(s not in ks for s, ks in zip(hint, allowed)):
        return float("inf")
    return evaluate_partition(graph, hint, num_stages)[0]  # checks the hint is a valid plan


def solve_partition(
    graph: OpGraph,
    num_stages: int,
    config: IlpConfig | None = None,
    allowed: list[set[int]] | None = None,
    hint: list[int] | None = None,
    on_incumbent: Callable[[list[int]], None] | None = None,
) -> PartitionResult:
    """Lexicographically optimal K-stage partition within the allowed stage sets. `ideal-dp`
    solves the whole graph (`window_dp.whole_graph_partition`) or a window (`window_dp.window_partition`);
    `auto` solves a window (some allowed set narrowed) by the window DP when its ideal intervals
    fit `window_dp.WINDOW_MAX_IDEALS`, else, like a whole graph, by Gurobi or CP-SAT. The
    result's `solver` names the method that ran. `on_incumbent` is handed each plan an ILP backend
    finds on the way (every CP-SAT incumbent of every phase; the DPs report none): what a
    time-to-target measurement of a solve that proves nothing in time needs."""
    config = config or IlpConfig()
    objectives = check_objectives(config.objectives)
    window = allowed is not None and any(len(a) < num_stages for a in allowed)
    if config.solver == IDEAL_DP:
        if objectives != PAPER_OBJECTIVES:
            raise PartitionError(
                f"the ideal DP minimises {','.join(PAPER_OBJECTIVES)} in that order only, not --objectives "
                f"{','.join(objectives)}; drop --objectives or use an ILP solver (cpsat, gurobi, highs)"
            )
        from hiertune.solvers.window_dp import whole_graph_partition, window_partition

        if window:
            res = window_partition(graph, num_stages, allowed, config.cache_bytes, config.time_limit_s,
                                   max_ideals=DEFAULT_MAX_IDEALS, max_pairs=DEFAULT_MAX_IDEALS**2,
                                   peak_hi=_peak_within(graph, num_stages, allowed, hint))
        else:
            res = whole_graph_partition(graph, num_stages, config.cache_bytes, hint, config.time_limit_s)
        return _dp_result(graph, num_stages, res)
    dp_note = None
    start = time.perf_counter()  # a window DP that gives up counts in the solve's time
    cpu_start = time.process_time()
    if config.solver == "auto" and window and objectives == PAPER_OBJECTIVES:
        from hiertune.solvers.ideal_dp import IdealDpLimitError
        from hiertune.solvers.window_dp import window_partition

        try:  # a window's intervals are usually tiny: the DP is exact and far faster than the ILP
            res = window_partition(graph, num_stages, allowed, config.cache_bytes, config.time_limit_s,
                                   peak_hi=_peak_within(graph, num_stages, allowed, hint))
            return _dp_result(graph, num_stages, res)
        except IdealDpLimitError as err:
            dp_note = f"ideal-dp: {err}; solved by the ILP"
    pm = build_model(graph, num_stages, config.cache_bytes, allowed, objectives)
    solver, fallback = choose_solver(config.solver, pm)
    if fallback:
        _warn(fallback)
    if hint is not None:
        check_partition(graph, hint, num_stages)
        if any(hint[v] not in ks for v, ks in enumerate(pm.allowed)):
            hint = None  # outside the window: useless as a start
    try:
        stages, key, optimal, phases = _lexicographic(pm, solver, config, start, hint, on_incumbent)
    except GurobiSizeLimitError as err:
        fallback = f"{err}; falling back to CP-SAT"
        _warn(fallback)
        solver = "cpsat"
        stages, key, optimal, phases = _lexicographic(pm, solver, config, start, hint, on_incumbent)
    if dp_note:
        phases.insert(0, dp_note)
    return PartitionResult(
        stages=stages,
        objectives=evaluate_partition(graph, stages, num_stages, config.cache_bytes),
        solve_seconds=time.perf_counter() - start,
        optimal=optimal,
        solver=solver,
        cpu_seconds=time.process_time() - cpu_start,
        num_vars=pm.lm.num_vars,
        num_rows=pm.lm.num_rows,
        phases=phases,
        fallback=fallback,
        max_stage_macs=max(stage_macs(graph, stages, num_stages)),
        key=key,
    )


def _dp_result(graph: OpGraph, num_stages: int, res: PartitionResult) -> PartitionResult:
    """A DP's plan with what the ILP's results carry too (the paper's key, the slowest stage's MACs)."""
    return replace(res, max_stage_macs=max(stage_macs(graph, res.stages, num_stages)), key=tuple(res.objectives))


def _warn(message: str) -> None:
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _lexicographic(
    pm: PartitionModel, solver: str, config: IlpConfig, start: float, hint: list[int] | None,
    on_incumbent: Callable[[list[int]], None] | None = None,
) -> tuple[list[int], tuple[int, ...], bool, list[str]]:
    """Each phase in turn: skipped when the incumbent meets its lower bound, else minimised from
    the incumbent over the model with every earlier phase fixed at its optimum."""
    graph, K, cache = pm.graph, pm.num_stages, pm.cache_bytes
    names = tuple(p.name for p in pm.phases)
    deadline = start + config.time_limit_s
    optima: list[int] = []
    stages = hint
    optimal = True
    log_lines: list[str] = []
    cpsat_model = CpSatModel()  # each phase's model extends the last: CP-SAT copies only what is new
    current = evaluate_objectives(graph, stages, K, cache, names) if stages is not None else None  # of `stages`
    for p, phase in enumerate(pm.phases):
        if current is not None and current[p] <= phase.lower_bound:
            log_lines.append(f"{phase.name}: at its lower bound")  # the plan is provably optimal here: no solve
        else:
            settings = BackendSettings(
                time_limit_s=max(deadline - time.perf_counter(), 0.5),
                mip_gap=config.mip_gap,
                threads=config.threads,
                seed=config.seed,
                cpsat_parameters=config.cpsat_parameters,
                on_solution=None if on_incumbent is None else lambda values: on_incumbent(pm.decode(values)),
            )
            out, note = _solve_phase(pm, p, optima, solver, settings, config, deadline, stages, cpsat_model)
            log_lines.append(f"{phase.name}: {out.status} {out.seconds:.2f}s{note}")
            if out.values is None:
                if stages is None:
                    raise PartitionError(
                        f"{solver} found no partition of {graph.name!r} into {K} stages within "
                        f"{config.time_limit_s:g} s; raise the time limit or use Inc-ILP (--gamma)"
                    )
                optimal = False
            else:
                new = pm.decode(out.values)
                new_key = evaluate_objectives(graph, new, K, cache, names)
                if current is None or new_key[: p + 1] <= current[: p + 1]:
                    stages, current = new, new_key
                optimal = optimal and out.optimal
        optima.append(current[p])  # fixed for the phases after this one
    assert stages is not None and current is not None
    return stages, current, optimal, log_lines


BAND_CHECKED = ("peak", "comm", "macs")  # the phases the band bound can prove
STAGE_CAPPED = ("peak", "macs")  # ... and those whose optimum its greedy dive can find (a stage cap)


def _solve_phase(
    pm: PartitionModel, p: int, optima: list[int], solver: str, settings: BackendSettings, config: IlpConfig,
    deadline: float, stages: list[int] | None, cpsat_model: CpSatModel,
) -> tuple[SolveOutcome, str]:
    """Phase p minimised from `stages`. On a window, a `BandCheck` thread tests the solver's
    incumbents against the band bound from `band_check_after_s` on and ends the solve once it
    proves one optimal. The solve runs in slices of `band_check_after_s` (then 4x, 16x, ...), each
    restarted from the last incumbent: on NASNet's windows a restart found the transfer phase's
    optimum sooner than one long search did. The note says what the checks did."""
    phase = pm.phases[p]
    model = _phase_model(pm, p + 1, optima)
    if not (pm.is_window and phase.name in BAND_CHECKED and config.band_check_after_s < settings.time_limit_s):
        start = pm.values(stages, p + 1) if stages is not None else None
        return solve_linear(solver, model, phase.objective.terms, settings, start, cpsat_model), ""
    value_of = lambda values: evaluate_objectives(  # noqa: E731
        pm.graph, pm.decode(values), pm.num_stages, pm.cache_bytes, (phase.name,))[0]
    earlier = tuple(q.name for q in pm.phases[:p])

    def plan_values(plan: list[int]) -> list[int] | None:
        """A plan of the band search as the phase model's values; None when it leaves the window
        or breaks an earlier phase's optimum (the band caps relax those)."""
        if any(plan[v] not in ks for v, ks in enumerate(pm.allowed)):
            return None
        if any(got > best for got, best in zip(evaluate_objectives(pm.graph, plan, pm.num_stages, pm.cache_bytes,
                                                                   earlier), optima)):
            return None
        return pm.values(plan, p + 1)

    stop = StopSignal()
    check = BandCheck(pm.graph, pm.allowed, pm.num_stages, value_of,
                      lambda value: _band_caps(pm, phase.name, optima, value - 1), stop,
                      time.perf_counter(), config.band_check_after_s, deadline, floor=phase.lower_bound,
                      plan_values=plan_values if phase.name in STAGE_CAPPED else None,
                      dive_tensors=tensors(pm.graph) if "comm" in [q.name for q in pm.phases[p + 1:]] else None)
    report = settings.on_solution

    def on_solution(values: list[int]) -> None:
        check.offer(values)
        if report is not None:
            report(values)

    slice_s, seconds = config.band_check_after_s, 0.0
    found: SolveOutcome | None = None  # the last slice's outcome with a plan
    watched = False  # from the second slice on: the first one's solutions cost no callback
    try:
        while True:
            remaining = max(deadline - time.perf_counter(), 0.5)
            out = solve_linear(solver, model, phase.objective.terms,
                               replace(settings, time_limit_s=min(slice_s, remaining),
                                       on_solution=on_solution if watched else report, stop=stop),
                               pm.values(stages, p + 1) if stages is not None else None, cpsat_model)
            seconds += out.seconds
            if out.values is None and found is not None:
                out = replace(found, optimal=False, status=out.status)  # keep the last slice's incumbent
            if out.optimal or check.proven is not None or slice_s >= remaining:
                break
            if out.values is not None:
                found, stages = out, pm.decode(out.values)
            if not watched:  # later slices report each incumbent; the first one's plan is offered here
                if out.values is not None:
                    check.offer(out.values)
                check.start()
                watched = True
            slice_s *= 4
    finally:
        if watched:
            check.finish()
    if check.proven is not None and not out.optimal:  # the bound's proof, of the plan it checked
        out = replace(out, values=check.proven, optimal=True, status="optimal",
                      objective=model.objective_value(phase.objective.terms, check.proven))
    out = replace(out, seconds=seconds)
    if not check.checked:
        return out, ""
    verdict = ("found and proved the optimum" if check.dived else "proved it") if check.proven is not None \
        else "did not prove it"
    return out, f" (band bound: {len(check.checked)} check(s) in {check.seconds:.2f}s, {verdict})"


def _band_caps(pm: PartitionModel, name: str, optima: list[int], bound: int) -> Caps:
    """Phase `name` <= bound as band caps, given the earlier phases' `optima` (only the peak's is
    used: dropping the others relaxes)."""
    arrays = graph_arrays(pm.graph)
    if name in ("peak", "macs"):
        return Caps(weights=arrays.param if name == "peak" else arrays.macs, stage_cap=bound)
    peak = dict(zip((q.name for q in pm.phases), optima)).get("peak")
    return Caps(weights=arrays.param if peak is not None else None, stage_cap=peak,
                tensors=tensors(pm.graph), transfer_cap=bound)
