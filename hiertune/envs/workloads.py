"""Workloads: the seed paper's operator suite (TVM's own shapes) and whole networks through Relax.

A workload becomes a list of tuning tasks, each a TIR PrimFunc with a weight (how many times the
subgraph appears in the network; 1 for a single operator). Names:

* operators: `GMM-S`, `GMM-M`, `GMM-L` (also `GEMM-*`), and `C1D`, `C2D`, `C3D`, `T2D`, `GMM`
  with an optional shape index and batch: `C2D:2` (third shape), `C2D:2:b16` (batch 16).
* networks: `resnet18`, `resnet50`, `tiny-convnet` (built in code, no downloaded weights).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hiertune.errors import HiertuneError

# Operator families of the seed paper (Ansor's suite), each with TVM's four shapes.
OPERATOR_FAMILIES = ("GMM", "C1D", "C2D", "C3D", "T2D")
# GEMM sizes named by the paper: S = 128^3, M = 512^3, L = 1024^3 (indices into TVM's GMM shapes).
GEMM_SIZES = {"S": 0, "M": 2, "L": 3}
NETWORKS = ("resnet18", "resnet50", "tiny-convnet")

_OP_PATTERN = re.compile(r"^(?P<family>[A-Z0-9]+)(?::(?P<index>\d+))?(?::b(?P<batch>\d+))?$")


@dataclass
class Task:
    """One tuning task: a TIR function and how often it appears in the workload."""

    name: str
    mod: Any  # tvm.IRModule with a single "main" PrimFunc
    weight: int
    flops: float


@dataclass
class Workload:
    name: str
    tasks: list[Task]

    @property
    def is_network(self) -> bool:
        return len(self.tasks) > 1 or self.name in NETWORKS

    @property
    def task_flops(self) -> dict[str, float]:
        """FLOPs per task name: curves turn latencies into GFLOPS with it."""
        return {t.name: t.flops for t in self.tasks}

    @property
    def task_weights(self) -> dict[str, int]:
        """How often each task runs in one pass of the workload: network latency sums by it."""
        return {t.name: t.weight for t in self.tasks}


def list_workloads() -> list[str]:
    """Every name `get_workload` accepts (operator shapes at batch 1, plus the networks)."""
    from tvm.s_tir.meta_schedule.testing.te_workload import CONFIGS

    names = [f"GMM-{size}" for size in GEMM_SIZES]
    for family in OPERATOR_FAMILIES:
        names += [f"{family}:{i}" for i in range(len(CONFIGS[family][1]))]
    return names + list(NETWORKS)


def _canonical_operator(name: str) -> tuple[str, int, int]:
    """(family, shape index, batch) for an operator name, or a HiertuneError naming the choices."""
    text = name.strip().upper().replace("GEMM", "GMM")
    size = re.match(r"^GMM-([SML])(?::B(\d+))?$", text)
    if size:
        return "GMM", GEMM_SIZES[size.group(1)], int(size.group(2) or 1)
    match = _OP_PATTERN.match(text.replace(":B", ":b"))
    if not match or match.group("family") not in OPERATOR_FAMILIES:
        raise HiertuneError(
            f"unknown workload {name!r}; choose an operator ({', '.join(OPERATOR_FAMILIES)}, "
            f"GMM-S/M/L, optionally ':<shape>' and ':b<batch>', e.g. C2D:2:b16) or a network "
            f"({', '.join(NETWORKS)}); `hiertune workloads` lists them"
        )
    return match.group("family"), int(match.group("index") or 0), int(match.group("batch") or 1)


def operator_task(name: str) -> Task:
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.testing.te_workload import CONFIGS

    family, index, batch = _canonical_operator(name)
    builder, shapes = CONFIGS[family]
    size_names = {i: s for s, i in GEMM_SIZES.items()}
    if index >= len(shapes):
        raise HiertuneError(f"workload {name!r}: {family} has shapes 0..{len(shapes) - 1}, not {index}")
    params = (batch, *shapes[index][1:])
    func = te.create_prim_func(builder(*params)).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    label = f"GMM-{size_names[index]}" if family == "GMM" and index in size_names else f"{family}:{index}"
    label += f":b{batch}" if batch != 1 else ""
    return Task(name=label, mod=mod, weight=1, flops=estimate_flops(mod))


def estimate_flops(mod: Any) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(mod))


def get_workload(name: str, target: Any = None) -> Workload:
    """The tasks of an operator or network name. Networks need the target for task extraction."""
    key = name.strip().lower()
    if key in NETWORKS:
        from hiertune.envs.networks import network_tasks
        from hiertune.platform.tvm_support import make_target

        return Workload(name=key, tasks=network_tasks(key, target or make_target("llvm")))
    task = operator_task(name)
    return Workload(name=task.name, tasks=[task])
