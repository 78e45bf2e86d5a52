"""The ILP solver as a Ray actor, so a cluster can pin solving to the host that holds the licence.

Gurobi's licence lives on one machine (HiGHS and CP-SAT need none): declare a custom resource
there (`ray start ... --resources='{"gurobi": 1}'`) and start the actor with `resource="gurobi"`.
An actor asking for a resource no node has would wait forever, so that is checked first.

This is also where the pointer net meets Inc-ILP: the solver layer takes its pre-scheduler
injected, and `pointer_inc_ilp` injects the shipped one, scoring with the solve's own cache.
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from typing import Any

from hiertune.policies.pointer_net import default_scheduler
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import IlpConfig, PartitionResult, solve_partition
from hiertune.solvers.incilp import IncIlpConfig, IncIlpResult, inc_ilp

SCHEDULED_SOURCES = ("pointer", "best")  # the initial-plan sources that always ask the pointer net


def pointer_inc_ilp(graph: OpGraph, num_stages: int, config: IncIlpConfig | None = None,
                    initial: list[int] | None = None) -> IncIlpResult:
    """Inc-ILP with the shipped pointer net as its pre-scheduler (when the source may ask for one
    and the checkpoint loads), ranking its samples with the solve's cache per stage."""
    config = config or IncIlpConfig()
    asks = config.initial in SCHEDULED_SOURCES or (config.initial == "auto" and config.second_start_after_s < math.inf)
    scheduler = default_scheduler(config.ilp.cache_bytes) if asks else None
    return inc_ilp(graph, num_stages, config, initial, scheduler)


@dataclass
class SolverActorConfig:
    """Placement of the solver actor: an optional custom resource (e.g. `gurobi`) and its CPUs."""

    resource: str | None = None
    num_cpus: float = 1.0


class PartitionSolver:
    """Runs exact and Inc-ILP partitions where it is placed; plain class, usable without Ray."""

    def solve(self, graph: OpGraph, num_stages: int, config: IlpConfig | None = None,
              allowed: list[set[int]] | None = None) -> PartitionResult:
        return solve_partition(graph, num_stages, config, allowed)

    def inc_ilp(self, graph: OpGraph, num_stages: int, config: IncIlpConfig | None = None,
                initial: list[int] | None = None) -> IncIlpResult:
        return pointer_inc_ilp(graph, num_stages, config, initial)

    def host(self) -> str:
        return socket.gethostname()


def start_solver_actor(config: SolverActorConfig | None = None) -> Any:
    """A `PartitionSolver` actor handle (Ray must be initialised, e.g. by `init_ray`)."""
    import ray

    from hiertune.platform.ray_runtime import require_resource

    config = config or SolverActorConfig()
    options: dict[str, Any] = {"num_cpus": config.num_cpus}
    if config.resource:
        require_resource(config.resource, what="the ILP solver actor")
        options["resources"] = {config.resource: 1}
    return ray.remote(PartitionSolver).options(**options).remote()
