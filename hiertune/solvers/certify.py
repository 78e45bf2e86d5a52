"""Is a plan globally optimal? Cheap bounds for every plan, and a proof on request.

An Inc-ILP window is optimal only within the window. Two ways to know more:

* `global_lower_bounds` (O(|V|), always): the peak is at least the largest node and the even
  split, the off-cache total at least what K caches cannot hold and at least each node's excess
  over one cache. A plan meeting a bound is proven optimal on that objective; all three give a global
  proof with no solve. The transfer bound is 0 (some plan may cut where nothing crosses), so
  this rarely proves the third objective.
* `prove` (on request): the whole model solved with the plan as a complete start (CP-SAT hint,
  Gurobi Start) next to the same solve cold, and the ideal DP where the graph is narrow enough.
  Each reports its seconds and whether it proved the plan optimal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ideal_dp import IdealDpLimitError
from hiertune.solvers.ilp import IDEAL_DP, IlpConfig, Objectives, solve_partition
from hiertune.solvers.window_dp import whole_graph_partition


def global_lower_bounds(graph: OpGraph, num_stages: int, cache_bytes: int) -> Objectives:
    """Per objective, a value no K-stage plan of `graph` beats (see the module docstring)."""
    param = [v.param_bytes for v in graph.nodes]
    total = sum(param)
    # a node larger than a cache spills at least its excess wherever it goes, and a stage spills
    # at least the sum of its nodes' excesses
    beyond_cache = sum(p - cache_bytes for p in param if p > cache_bytes)
    return (max(max(param), -(-total // num_stages)), max(total - num_stages * cache_bytes, beyond_cache, 0), 0)


def proven_by_bounds(objectives: Objectives, bounds: Objectives) -> tuple[bool, bool, bool]:
    """Which objectives the bounds prove optimal, lexicographically: the off-cache total's bound
    holds for any peak, the transfer's only once the two before it are optimal."""
    peak, off = objectives[0] <= bounds[0], objectives[1] <= bounds[1]
    return peak, off, peak and off and objectives[2] <= bounds[2]


@dataclass
class ProofRun:
    method: str  # "cpsat hinted", "cpsat cold", "ideal-dp", ...
    seconds: float
    optimal: bool  # the run proved its optimum
    objectives: list[int] | None  # None: it did not run (the reason is in `note`)
    plan_is_optimal: bool  # the plan's objectives equal that proven optimum
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def prove(graph: OpGraph, num_stages: int, plan: list[int], objectives: Objectives,
          config: IlpConfig, dp_max_ideals: int = 200_000) -> list[ProofRun]:
    """The whole model hinted with `plan`, the same cold, and the ideal DP (hinted) if it fits."""
    runs = []
    ilp = config if config.solver != IDEAL_DP else replace(config, solver="auto")
    for label, hint in (("hinted", plan), ("cold", None)):
        res = solve_partition(graph, num_stages, ilp, hint=hint)
        runs.append(ProofRun(f"{res.solver} {label}", res.solve_seconds, res.optimal, list(res.objectives),
                             res.optimal and tuple(res.objectives) == tuple(objectives), res.fallback or ""))
    try:
        dp = whole_graph_partition(graph, num_stages, config.cache_bytes, plan, config.time_limit_s, dp_max_ideals)
        runs.append(ProofRun("ideal-dp hinted", dp.solve_seconds, True, list(dp.objectives),
                             tuple(dp.objectives) == tuple(objectives), dp.phases[0]))
    except IdealDpLimitError as err:
        runs.append(ProofRun("ideal-dp hinted", 0.0, False, None, False, str(err)))
    return runs
