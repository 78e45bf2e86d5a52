"""Single-operator workloads: every family of TVM's MetaSchedule test suite (`te_workload.CONFIGS`),
with TVM's own shapes.

Names: a family with an optional shape index and batch, `C2D:2` (third shape), `C2D:2:b16`
(batch 16); the seed paper's GEMM sizes `GMM-S`, `GMM-M`, `GMM-L` (also `GEMM-*`).
"""

from __future__ import annotations

import re
from typing import Any

from hiertune.errors import HiertuneError
from hiertune.workloads.tasks import Task

# Every te_workload family; the first five are the seed paper's (Ansor's) operator suite.
# C2D_WIN_NHWC is left out: TVM 0.27 builds it only through the removed legacy TOPI flow.
OPERATOR_FAMILIES = ("GMM", "C1D", "C2D", "C3D", "T2D", "GRP", "DIL", "DEP", "CAP", "NRM", "SFM", "CBR", "TBG")
# Families whose first shape argument is not a batch (softmax's is the row count).
UNBATCHED_FAMILIES = ("SFM",)
# GEMM sizes named by the paper: S = 128^3, M = 512^3, L = 1024^3 (indices into TVM's GMM shapes).
GEMM_SIZES = {"S": 0, "M": 2, "L": 3}

_OP_PATTERN = re.compile(r"^(?P<family>[A-Z0-9_]+?)(?::(?P<index>\d+))?(?::b(?P<batch>\d+))?$")


def operator_names() -> list[str]:
    """Every operator name at batch 1: the GEMM sizes, then each family's shapes."""
    from tvm.s_tir.meta_schedule.testing.te_workload import CONFIGS

    names = [f"GMM-{size}" for size in GEMM_SIZES]
    for family in OPERATOR_FAMILIES:
        names += [f"{family}:{i}" for i in range(len(CONFIGS[family][1]))]
    return names


def canonical_operator(name: str) -> tuple[str, int, int]:
    """(family, shape index, batch) for an operator name, or a HiertuneError naming the choices."""
    text = name.strip().upper().replace("GEMM", "GMM")
    size = re.match(r"^GMM-([SML])(?::B(\d+))?$", text)
    if size:
        return "GMM", GEMM_SIZES[size.group(1)], int(size.group(2) or 1)
    match = _OP_PATTERN.match(text.replace(":B", ":b"))
    if not match or match.group("family") not in OPERATOR_FAMILIES:
        raise HiertuneError(
            f"unknown workload {name!r}; choose an operator family ({', '.join(OPERATOR_FAMILIES)}) or "
            "GMM-S/M/L, optionally with ':<shape>' and ':b<batch>' (e.g. C2D:2:b16); whole models go "
            "to --model; `hiertune workloads` lists them"
        )
    family, batch = match.group("family"), int(match.group("batch") or 1)
    if batch != 1 and family in UNBATCHED_FAMILIES:
        raise HiertuneError(f"workload {name!r}: {family} has no batch dimension; drop ':b{batch}'")
    return family, int(match.group("index") or 0), batch


def operator_family(name: str) -> str | None:
    """The te_workload family of an operator name (`GMM-S` and `GMM:0` are GMM); None for any
    other task name (a network's)."""
    try:
        return canonical_operator(name)[0]
    except HiertuneError:
        return None


def operator_task(name: str) -> Task:
    """The operator as a one-function IRModule, named canonically (`GMM-L`, `C2D:1:b16`)."""
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.testing.te_workload import CONFIGS

    family, index, batch = canonical_operator(name)
    builder, shapes = CONFIGS[family]
    if index >= len(shapes):
        raise HiertuneError(f"workload {name!r}: {family} has shapes 0..{len(shapes) - 1}, not {index}")
    params: Any = shapes[index] if family in UNBATCHED_FAMILIES else (batch, *shapes[index][1:])
    func = te.create_prim_func(builder(*params)).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    size_names = {i: s for s, i in GEMM_SIZES.items()}
    label = f"GMM-{size_names[index]}" if family == "GMM" and index in size_names else f"{family}:{index}"
    label += f":b{batch}" if batch != 1 else ""
    return Task.from_module(label, mod)
