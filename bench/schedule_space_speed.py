"""What one candidate costs: HARL's edits against MetaSchedule's mutators, and the cost model.

Both searches make a candidate the same way: change decisions of a trace, replay it on a fresh
schedule, run the postprocs. MetaSchedule's evolutionary search draws a mutator (tile size,
unroll, compute location, parallel) per candidate; HARL applies one edit per track step. This
runs both on the same random states of a few tasks, side by side, and adds the cost model's
per-batch feature extraction and prediction. Writes bench/results/schedule_space_speed.json
and a PNG (ms per candidate, HARL / MetaSchedule ratio per task).

    python bench/schedule_space_speed.py --workloads GMM C1D C2D --states 6
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"


def _median_ms(samples: list[float]) -> float:
    return float(np.median(samples) * 1000) if samples else float("nan")


def harl_edits(space: Any, states: list[Any], rng: np.random.Generator, per_state: int) -> dict[str, Any]:
    from hiertune.envs import edit_actions as ea

    times: dict[str, list[float]] = {}
    changed: dict[str, int] = {}
    for state in states:
        legal = np.flatnonzero(space.action_mask(state))
        for a in rng.choice(legal, size=min(per_state, len(legal)), replace=False):
            kind = ea.decode(int(a)).kind
            if kind == "noop":
                continue
            space._memo.clear()  # noqa: SLF001 - time the replay, not the cache
            t0 = time.perf_counter()
            new = space.apply(state, int(a))
            times.setdefault(kind, []).append(time.perf_counter() - t0)
            changed[kind] = changed.get(kind, 0) + int(new is not state)
    every = [t for ts in times.values() for t in ts]
    return {"ms_per_edit": _median_ms(every), "by_kind_ms": {k: _median_ms(v) for k, v in times.items()},
            "edits": len(every), "changed": changed}


def ms_mutations(space: Any, states: list[Any], per_state: int) -> dict[str, Any]:
    """MetaSchedule's evolutionary step per candidate: mutate the trace, replay, postprocs."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    mutators = ms.Mutator.create("llvm")
    for m in mutators:
        m._initialize_with_tune_context(space.ctx)  # noqa: SLF001 - as TuneContext does
    times: dict[str, list[float]] = {}
    ok: dict[str, int] = {}
    for state in states:
        for m in mutators:
            name = type(m).__name__
            for _ in range(max(per_state // len(mutators), 1)):
                t0 = time.perf_counter()
                trace = m.apply(state.trace)
                good = False
                if trace is not None:
                    sch = s_tir.Schedule(space.mod, seed=1, debug_mask="none", error_render_level="none")
                    try:
                        trace.apply_to_schedule(sch, remove_postproc=True)
                        sch.enter_postproc()
                        good = all(p.apply(sch) for p in space.postprocs)
                    except Exception:  # noqa: BLE001 - a failed candidate still cost its time
                        good = False
                times.setdefault(name, []).append(time.perf_counter() - t0)
                ok[name] = ok.get(name, 0) + int(good)
    every = [t for ts in times.values() for t in ts]
    return {"ms_per_mutation": _median_ms(every), "by_mutator_ms": {k: _median_ms(v) for k, v in times.items()},
            "mutations": len(every), "valid": ok}


def cost_model_costs(space: Any, states: list[Any], batch: int, repeats: int = 3) -> dict[str, Any]:
    """Feature extraction + prediction per fresh batch, and prediction of an already seen batch.

    One untimed warm-up prediction first (XGBoost's and the feature extractor's first call pays
    one-off setup), then the median over `repeats` fresh batches and over 5 cached predictions.
    """
    from hiertune.policies.cost_model import CostModel

    model = CostModel()
    rng = np.random.default_rng(0)
    model.update(states, list(rng.uniform(1e-4, 1e-3, len(states))))  # fake labels: timing only
    model.predict(states)  # warm-up
    fresh, cached = [], []
    for _ in range(repeats):
        many = [space.random_state(i % space.num_sketches, rng) for i in range(batch)]
        t0 = time.perf_counter()
        model.predict(many)
        fresh.append(time.perf_counter() - t0)
    for _ in range(5):
        t0 = time.perf_counter()
        model.predict(many)
        cached.append(time.perf_counter() - t0)
    first_ms, cached_ms = _median_ms(fresh), _median_ms(cached)
    return {"batch": batch, "repeats": repeats, "features_and_predict_ms": first_ms,
            "cached_predict_ms": cached_ms, "ms_per_state_uncached": first_ms / batch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=["GMM", "C1D", "C2D"])
    parser.add_argument("--states", type=int, default=6, help="random states per task")
    parser.add_argument("--edits", type=int, default=12, help="edits / mutations per state")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    from tqdm import tqdm
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm")
    rows = []
    for name in tqdm(args.workloads, desc="tasks"):
        space = ScheduleSpace(create_te_workload(name, 0), target, seed=0)
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        states = [space.random_state(i % space.num_sketches, rng) for i in range(args.states)]
        fill_ms = (time.perf_counter() - t0) * 1000 / args.states
        harl = harl_edits(space, states, rng, args.edits)
        mut = ms_mutations(space, states, args.edits)
        cm = cost_model_costs(space, states, args.batch)
        rows.append({"task": f"{name}-0", "random_fill_ms": fill_ms, "harl": harl, "metaschedule": mut,
                     "cost_model": cm, "ratio_harl_over_ms": harl["ms_per_edit"] / mut["ms_per_mutation"]})

    from rich.console import Console
    from rich.table import Table

    table = Table(title="ms per candidate (median): HARL edit vs MetaSchedule mutation, both replay + postproc")
    for col in ("task", "random fill", "HARL edit", "MS mutation", "HARL/MS", "features+predict/state", "cached batch"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["task"], f"{r['random_fill_ms']:.1f}", f"{r['harl']['ms_per_edit']:.1f}",
                      f"{r['metaschedule']['ms_per_mutation']:.1f}", f"{r['ratio_harl_over_ms']:.2f}",
                      f"{r['cost_model']['ms_per_state_uncached']:.1f}",
                      f"{r['cost_model']['cached_predict_ms']:.1f} ms / {r['cost_model']['batch']}")
    Console().print(table)

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "schedule_space_speed.json"
    out.write_text(json.dumps({"rows": rows, "args": vars(args)}, indent=2))

    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["harl"]["ms_per_edit"] for r in rows], 0.4, label="HARL edit")
    ax.bar(x + 0.2, [r["metaschedule"]["ms_per_mutation"] for r in rows], 0.4, label="MetaSchedule mutation")
    for i, r in enumerate(rows):
        ax.text(i, max(r["harl"]["ms_per_edit"], r["metaschedule"]["ms_per_mutation"]) * 1.03,
                f"{r['ratio_harl_over_ms']:.2f}x", ha="center")
    ax.set_xticks(x, [r["task"] for r in rows])
    ax.set_ylabel("ms per candidate (replay + postproc)")
    ax.legend()
    save_figure(fig, RESULTS / "schedule_space_speed.png", dpi=120)
    print(f"wrote {out} and {RESULTS / 'schedule_space_speed.png'}")


if __name__ == "__main__":
    main()
