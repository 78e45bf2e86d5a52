"""Tuning tasks as plain data: a TIR function, how often it runs, and its FLOPs.

Every source of work (an operator, a built-in network, a user's model) ends as a `Workload`, so the
tuners above never need to know where the tasks came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The built-in networks (`hiertune.workloads.networks`); a one-task network is still a network.
BUILTIN_NETWORKS = ("resnet18", "resnet50", "tiny-convnet")


@dataclass
class Task:
    """One tuning task: a TIR function and how often it appears in the workload."""

    name: str
    mod: Any  # tvm.IRModule with a single "main" PrimFunc
    weight: int
    flops: float

    @classmethod
    def from_module(cls, name: str, mod: Any, weight: int = 1) -> Task:
        """Every source of tasks makes them here: parameters named uniquely
        (`with_unique_buffer_names`), FLOPs counted once."""
        mod = with_unique_buffer_names(mod)
        return cls(name=name, mod=mod, weight=weight, flops=estimate_flops(mod))


@dataclass
class Workload:
    name: str
    tasks: list[Task]

    @property
    def is_network(self) -> bool:
        return len(self.tasks) > 1 or self.name in BUILTIN_NETWORKS

    @property
    def task_flops(self) -> dict[str, float]:
        """FLOPs per task name: curves turn latencies into GFLOPS with it."""
        return {t.name: t.flops for t in self.tasks}

    @property
    def task_weights(self) -> dict[str, int]:
        """How often each task runs in one pass of the workload: network latency sums by it."""
        return {t.name: t.weight for t in self.tasks}


def with_unique_buffer_names(mod: Any) -> Any:
    """The module with no two parameters of one name (re-read from its printed form, where the
    printer already numbers them: `placeholder`, `placeholder_1`).

    Why: MetaSchedule's per-store features order a store's buffers by lines and bytes touched, then
    by name. TVM's depthwise-conv workload names both inputs "placeholder", so where they tie the
    order follows memory addresses, and one schedule got different features from call to call
    (cost-model refits on the same data disagreed). Structural hash and equality ignore names, so
    records and tuning databases match the renamed module as before."""
    import tvm

    names = [param.name for param in mod["main"].params]
    if len(set(names)) == len(names):
        return mod
    return tvm.script.from_source(mod.script())


def estimate_flops(mod: Any) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(mod))


