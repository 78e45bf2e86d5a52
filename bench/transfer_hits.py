"""What a network's sibling transfers (`candidates.sibling_slots`) did, task by task.

Why: an end-to-end A/B of whole models has a per-pair spread of about 5 %, and a task's best
is one noisy timing; the records say more directly whether the transferred schedules were the
ones that won. For each task this reads both arms' records (the default and the option, tuned on
the same model) and reports each arm's best, how many transfers the option measured, how many of
them set a new best for their task when measured, and whether the task's final best is one.

    python bench/transfer_hits.py runs/ab/quick/resnet-50_harl.jsonl runs/ab/quick/resnet-50_harl-config.jsonl \
        [more pairs] --out runs/transfer_hits.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hiertune.platform.records import MeasureRecord


def read_trials(path: Path) -> tuple[list[MeasureRecord], dict[str, int]]:
    """The HARL trials of a records file in trial order, and each task's weight."""
    from hiertune.platform.harl_search import TUNER as HARL
    from hiertune.platform.records import RecordStore

    store = RecordStore(path, writer=False)
    return store.trials(tuner=HARL), {task: int(w.get("weight", 1)) for task, w in store.workloads.items()}


def per_task(trials: list[MeasureRecord]) -> dict[str, dict[str, Any]]:
    """Per task: its best, transfers measured, transfers that set a new best, final best a transfer?"""
    tasks: dict[str, dict[str, Any]] = {}
    for row in trials:
        t = tasks.setdefault(row.task, {"best_s": math.inf, "trials": 0, "transfers": 0, "transfer_hits": 0,
                                        "best_is_transfer": False})
        t["trials"] += 1
        value, is_transfer = row.mean_s, bool(row.extra.get("transfer"))
        t["transfers"] += is_transfer
        if value < t["best_s"]:
            t["transfer_hits"] += is_transfer and t["trials"] > 1
            t["best_s"], t["best_is_transfer"] = value, is_transfer
    return tasks


def compare(default: Path, option: Path) -> dict[str, Any]:
    """One model's pair of arms: per task and summed as the model runs them (weight x best)."""
    (base_trials, weights), (option_trials, option_weights) = read_trials(default), read_trials(option)
    weights = weights or option_weights
    base, opt = per_task(base_trials), per_task(option_trials)
    rows = []
    for name in opt:
        if name in base and math.isfinite(base[name]["best_s"]) and math.isfinite(opt[name]["best_s"]):
            rows.append({"task": name, "weight": weights.get(name, 1), "default_ms": 1e3 * base[name]["best_s"],
                         "option_ms": 1e3 * opt[name]["best_s"], "ratio": opt[name]["best_s"] / base[name]["best_s"],
                         **{k: opt[name][k] for k in ("transfers", "transfer_hits", "best_is_transfer")}})
    print(f"\n{option}\n{'task':44s} {'w':>2s} {'default':>9s} {'option':>9s} {'ratio':>6s} transfers hits best")
    for r in rows:
        print(f"{r['task'][:44]:44s} {r['weight']:2d} {r['default_ms']:9.4f} {r['option_ms']:9.4f} {r['ratio']:6.3f} "
              f"{r['transfers']:9d} {r['transfer_hits']:4d} {'T' if r['best_is_transfer'] else '-'}")
    summary = {
        "tasks": len(rows),
        "weighted_sum_ms_default": sum(r["weight"] * r["default_ms"] for r in rows),
        "weighted_sum_ms_option": sum(r["weight"] * r["option_ms"] for r in rows),
        "geomean_task_ratio": math.exp(sum(math.log(r["ratio"]) for r in rows) / max(len(rows), 1)),
        "transfers": sum(r["transfers"] for r in rows),
        "transfer_hits": sum(r["transfer_hits"] for r in rows),
        "tasks_best_is_transfer": sum(r["best_is_transfer"] for r in rows),
    }
    summary["weighted_sum_ratio"] = summary["weighted_sum_ms_option"] / summary["weighted_sum_ms_default"]
    print(json.dumps(summary, indent=1))
    return {"default": str(default), "option": str(option), "summary": summary, "tasks": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, nargs="+",
                        help="records files in pairs: a model's default arm, then its arm with sibling_slots")
    parser.add_argument("--out", type=Path, help="JSON summary")
    args = parser.parse_args()
    if len(args.records) % 2:
        parser.error("records come in pairs (default, option); got an odd number of files")
    pairs = [compare(args.records[i], args.records[i + 1]) for i in range(0, len(args.records), 2)]
    if args.out:
        args.out.write_text(json.dumps({"pairs": pairs}, indent=1))
        plot(pairs, args.out.with_suffix(".png"))


def plot(pairs: list[dict[str, Any]], path: Path) -> None:
    """Per model, each task's best with the option over without it; a transfer's win in orange."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.8 * len(pairs) + 2, 4))
    for x, pair in enumerate(pairs):
        for i, row in enumerate(pair["tasks"]):
            jitter = x + 0.3 * (i / max(len(pair["tasks"]) - 1, 1) - 0.5)
            ax.scatter(jitter, row["ratio"], s=12 + 4 * row["weight"],
                       color="tab:orange" if row["best_is_transfer"] else "tab:blue")
        ax.scatter(x + 0.4, pair["summary"]["weighted_sum_ratio"], marker="_", s=300, color="black")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(pairs)), [Path(p["option"]).stem.split("_harl")[0] for p in pairs])
    ax.set_ylabel("task best, option / default")
    ax.set_title("sibling transfers per task (orange: the best is a transfer; bar: weighted sum)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
