"""The ILP solver as a Ray actor, so a cluster can pin solving to the host that holds the licence.

Gurobi's licence lives on one machine (HiGHS and CP-SAT need none): declare a custom resource
there (`ray start ... --resources='{"gurobi": 1}'`) and start the actor with `resource="gurobi"`.
An actor asking for a resource no node has would wait forever, so that is checked first.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import IlpConfig, PartitionResult, solve_partition
from hiertune.solvers.incilp import IncIlpConfig, IncIlpResult, inc_ilp


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
        return inc_ilp(graph, num_stages, config, initial)

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
