"""What there is to tune, as plain data: operators, built-in networks and (through
`hiertune.workloads.models`) a user's model, each turned into a `Workload` of weighted TIR tasks.

The bottom layer beside `solvers`: it knows TVM, never Ray or RL.
"""

from __future__ import annotations

from typing import Any

from hiertune.workloads.tasks import BUILTIN_NETWORKS, Task, Workload, estimate_flops

__all__ = ["BUILTIN_NETWORKS", "Task", "Workload", "estimate_flops", "get_workload", "list_workloads"]


def list_workloads() -> list[str]:
    """Every name `get_workload` accepts (operator shapes at batch 1, plus the built-in networks)."""
    from hiertune.workloads.operators import operator_names

    return operator_names() + list(BUILTIN_NETWORKS)


def get_workload(name: str, target: Any = None) -> Workload:
    """The tasks of an operator or built-in network name. Networks need the target for extraction."""
    key = name.strip().lower()
    if key in BUILTIN_NETWORKS:
        from hiertune.workloads.networks import network_tasks
        from hiertune.workloads.tvm_support import make_target

        return Workload(name=key, tasks=network_tasks(key, target or make_target("llvm")))
    from hiertune.workloads.operators import operator_task

    task = operator_task(name)
    return Workload(name=task.name, tasks=[task])
