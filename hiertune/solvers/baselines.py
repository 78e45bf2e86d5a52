"""Baselines the Inc-ILP is measured against: libcoral's parameter-count split and exact ILP.

The Edge TPU compiler's `--num_segments` uses libcoral's ParameterCountBasedPartitioner: walk
the execution (topological) order and close each segment just before its parameter bytes would
exceed total/K + 1; segments other than the last end before the first graph output; the last
keeps the rest. libcoral aborts when that leaves a segment empty; here such a segment takes one
node instead, so the baseline is defined on every graph with at least K nodes.
"""

from __future__ import annotations

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import IlpConfig, PartitionError, PartitionResult, solve_partition


def libcoral_partition(graph: OpGraph, num_stages: int) -> list[int]:
    """Stage of every node under libcoral's parameter-count partitioner."""
    K = num_stages
    n = graph.num_nodes
    if not 1 <= K <= n:
        raise PartitionError(f"--stages {K} must lie in 1..{n} (the node count of {graph.name!r})")
    order = graph.topological_order()
    param = [graph.nodes[v].param_bytes for v in order]
    average = graph.total_param_bytes // K + 1
    succ = graph.successors()
    first_output = next(i for i, v in enumerate(order) if not succ[v])
    if first_output < K - 1:  # libcoral would abort; let the bound follow the node count instead
        first_output = n - 1
    stage_by_pos = [K - 1] * n
    i = 0
    for seg in range(K - 1):
        max_end = first_output - (K - seg - 1)
        size = 0
        while i <= max_end:
            if size + param[i] > average and size > 0:
                break
            size += param[i]
            stage_by_pos[i] = seg
            i += 1
            if size > average:  # a single node above the average fills its segment alone
                break
    stages = [0] * n
    for pos, v in enumerate(order):
        stages[v] = stage_by_pos[pos]
    return stages


def exact_partition(graph: OpGraph, num_stages: int, config: IlpConfig | None = None) -> PartitionResult:
    """The exact lexicographic ILP over the whole graph (no window, no warm start)."""
    return solve_partition(graph, num_stages, config or IlpConfig())
