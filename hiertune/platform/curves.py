"""Tuning curves from records: best (weighted) latency after each measured trial, tables and plots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hiertune.platform.records import RecordStore


@dataclass
class CurvePoint:
    trial: int
    latency_s: float  # best latency so far (network: sum of weight * best per task)
    gflops: float


def tuning_curve(store: RecordStore, flops: dict[str, float], weights: dict[str, int] | None = None,
                 tuner: str | None = None) -> list[CurvePoint]:
    """The curve of one tuner in one records file, in measurement order.

    For a network the latency is the weighted sum of per-task bests; it is infinite until every
    task has one working schedule.
    """
    weights = weights or {task: 1 for task in flops}
    best = {task: math.inf for task in flops}
    total_flops = sum(flops[t] * weights[t] for t in flops)
    points = []
    for i, record in enumerate(store.trials(tuner=tuner), 1):
        if record.task in best:
            best[record.task] = min(best[record.task], record.mean_s)
        latency = sum(weights[t] * best[t] for t in best)
        points.append(CurvePoint(i, latency, total_flops / latency / 1e9 if math.isfinite(latency) else 0.0))
    return points


def curve_table(points: list[CurvePoint], every: int, title: str) -> "object":
    """A rich table with one row per `every` trials (and the last one)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("trials", justify="right")
    table.add_column("best latency (ms)", justify="right")
    table.add_column("GFLOPS", justify="right")
    rows = [p for p in points if p.trial % every == 0]
    if points and (not rows or rows[-1] is not points[-1]):
        rows.append(points[-1])
    for p in rows:
        latency = f"{p.latency_s * 1e3:.4f}" if math.isfinite(p.latency_s) else "-"
        table.add_row(str(p.trial), latency, f"{p.gflops:.1f}")
    return table


def plot_curves(curves: dict[str, list[CurvePoint]], path: str | Path, title: str) -> Path:
    """Best latency vs measured trials for several tuners on one axis."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in curves.items():
        finite = [p for p in points if math.isfinite(p.latency_s)]
        ax.step([p.trial for p in finite], [p.latency_s * 1e3 for p in finite], where="post", label=label)
    ax.set_xlabel("measured trials")
    ax.set_ylabel("best latency (ms)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path, dpi=120)
