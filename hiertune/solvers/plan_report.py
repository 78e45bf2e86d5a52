"""What a partition plan looks like to a person and to the pipeline: JSON, rich tables, a PNG.

The plan JSON keys every node by name under "plan" (what `hiertune pipeline --plan` reads) and
carries the objectives beside it, so a plan file says how good it is.
"""

from __future__ import annotations

from typing import Any

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import Objectives, boundary_comm_bytes, stage_macs, stage_param_bytes, tensors

OBJECTIVE_NAMES = ("peak_param_bytes", "offcache_bytes", "max_comm_bytes")


def objectives_dict(objectives: Objectives) -> dict[str, int]:
    return dict(zip(OBJECTIVE_NAMES, (int(o) for o in objectives)))


def plan_dict(graph: OpGraph, stages: list[int], num_stages: int, objectives: Objectives,
              **extra: Any) -> dict[str, Any]:
    return {
        "model": graph.name,
        "num_nodes": graph.num_nodes,
        "num_stages": num_stages,
        "plan": {graph.nodes[v].name: int(s) for v, s in enumerate(stages)},
        "objectives": objectives_dict(objectives),
        "stage_param_bytes": stage_param_bytes(graph, stages, num_stages),
        "boundary_comm_bytes": boundary_comm_bytes(graph, stages, num_stages),
        **({"stage_macs": stage_macs(graph, stages, num_stages)} if graph.total_macs else {}),
        **extra,
    }


def cut_tensors(graph: OpGraph, stages: list[int]) -> list[tuple[str, int, int, int]]:
    """(producer name, bytes, from stage, last consumer stage) of every tensor leaving its stage."""
    out = []
    for u, nbytes, consumers in tensors(graph):
        last = max(stages[w] for w in consumers)
        if last > stages[u]:
            out.append((graph.nodes[u].name, nbytes, stages[u], last))
    return out


def _mib(n: int) -> str:
    return f"{n / 1024**2:.2f}"


def stage_table(graph: OpGraph, stages: list[int], num_stages: int, cache_bytes: int, title: str):
    """Per-stage nodes, parameter MiB, off-cache MiB, the bytes sent to the next stage and, when
    the graph carries them, MMACs (the compute that paces the pipeline)."""
    from rich.table import Table

    mem = stage_param_bytes(graph, stages, num_stages)
    comm = boundary_comm_bytes(graph, stages, num_stages) + [0]
    cuts = cut_tensors(graph, stages)
    table = Table(title=title)
    macs = stage_macs(graph, stages, num_stages) if graph.total_macs else None
    for col in ("stage", "nodes", "param MiB", "off-cache MiB", "tensors out", "out MiB", *(("MMACs",) if macs else ())):
        table.add_column(col, justify="right")
    for k in range(num_stages):
        n_out = sum(1 for _, _, s, last in cuts if s <= k < last)
        table.add_row(str(k), str(stages.count(k)), _mib(mem[k]), _mib(max(0, mem[k] - cache_bytes)),
                      str(n_out) if k < num_stages - 1 else "-", _mib(comm[k]) if k < num_stages - 1 else "-",
                      *((f"{macs[k] / 1e6:.1f}",) if macs else ()))
    return table


def objectives_table(rows: list[tuple[str, Objectives, str]]):
    """One row per plan (name, objectives, note), objectives in MiB."""
    from rich.table import Table

    table = Table(title="objectives (lexicographic: peak, then off-cache, then max comm)")
    for col in ("plan", "peak MiB", "off-cache MiB", "max comm MiB", "note"):
        table.add_column(col, justify="right" if "MiB" in col else "left")
    for name, obj, note in rows:
        table.add_row(name, _mib(obj[0]), _mib(obj[1]), _mib(obj[2]), note)
    return table


def plot_partition(graph: OpGraph, plans: dict[str, list[int]], num_stages: int, cache_bytes: int,
                   path: str) -> None:
    """Left: parameter MiB per stage of each plan against the cache; right: each node's stage
    against its ASAP level (where the cuts fall in the graph)."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    fig, (ax_mem, ax_nodes) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(len(plans), 1)
    cache_mib = cache_bytes / 1024**2
    tallest = cache_mib
    for i, (name, stages) in enumerate(plans.items()):
        mem = [m / 1024**2 for m in stage_param_bytes(graph, stages, num_stages)]
        ax_mem.bar([k + i * width for k in range(num_stages)], mem, width=width, label=name)
        tallest = max(tallest, *mem)
    ax_mem.set_ylim(0, tallest * 1.3)  # head-room: balanced plans fill the axes, the legend goes above them
    ax_mem.axhline(cache_mib, color="k", linestyle="--", linewidth=1, label="cache")
    ax_mem.set_xticks([k + (len(plans) - 1) * width / 2 for k in range(num_stages)], [str(k) for k in range(num_stages)])
    ax_mem.set_xlabel("stage")
    ax_mem.set_ylabel("parameter MiB")
    ax_mem.set_title(f"{graph.name}: per-stage parameters")
    ax_mem.legend(loc="upper center", ncol=len(plans) + 1)
    level = graph.asap_levels()
    first = next(iter(plans.values()))
    ax_nodes.scatter(level, [graph.nodes[v].param_bytes / 1024**2 for v in range(graph.num_nodes)],
                     c=first, cmap="tab10", vmin=0, vmax=9, s=10)
    ax_nodes.set_xlabel("ASAP level")
    ax_nodes.set_ylabel("node parameter MiB")
    ax_nodes.set_title(f"stage of each node ({next(iter(plans))}; colour = stage)")
    save_figure(fig, path, dpi=110)
