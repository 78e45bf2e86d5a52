"""What one kind of schedule an option adds did, task by task: sibling transfers
(`candidates.sibling_slots`, `--kind transfer`) or padded sketches (`space.pad_multiple`,
`--kind padded`).

Why: an end-to-end A/B of whole models has a per-pair spread of about 5 %, and a task's best
is one noisy timing; the records say more directly whether the option's schedules were the
ones that won. For each task this reads both arms' records (without the option and with it,
tuned on the same model) and reports each arm's best, how many of the option's schedules were
measured, how many of them set a new best for their task when measured, and whether the task's
final best is one.

    python bench/schedule_hits.py runs/ab/quick/resnet-50_harl.jsonl runs/ab/quick/resnet-50_harl-config.jsonl \
        [more pairs] --kind transfer --out runs/transfer_hits.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hiertune.platform.records import MeasureRecord


def read_trials(path: Path) -> tuple[list[MeasureRecord], dict[str, int]]:
    """The HARL trials of a records file in trial order, and each task's weight."""
    from hiertune.platform.harl_search import TUNER as HARL
    from hiertune.platform.records import RecordStore

    store = RecordStore(path, writer=False)
    return store.trials(tuner=HARL), {task: int(w.get("weight", 1)) for task, w in store.workloads.items()}


# Per kind: how a record is recognised, and the JSON keys of (measured, new bests, final best is one).
KINDS: dict[str, tuple[Callable[[MeasureRecord], bool], tuple[str, str, str]]] = {
    "transfer": (lambda row: bool(row.extra.get("transfer")), ("transfers", "transfer_hits", "best_is_transfer")),
    "padded": (lambda row: any(inst[0] == "PadEinsum" for inst in row.record[0][0]),
               ("padded", "padded_hits", "best_is_padded")),
}


def per_task(trials: list[MeasureRecord], kind: str) -> dict[str, dict[str, Any]]:
    """Per task: its best, the kind's schedules measured, those that set a new best, final best one?"""
    is_kind, (count, hits, best_is) = KINDS[kind]
    tasks: dict[str, dict[str, Any]] = {}
    for row in trials:
        t = tasks.setdefault(row.task, {"best_s": math.inf, "trials": 0, count: 0, hits: 0, best_is: False})
        t["trials"] += 1
        value, marked = row.mean_s, is_kind(row)
        t[count] += marked
        if value < t["best_s"]:
            t[hits] += marked and t["trials"] > 1
            t["best_s"], t[best_is] = value, marked
    return tasks


def compare(default: Path, option: Path, kind: str = "transfer") -> dict[str, Any]:
    """One model's pair of arms: per task and summed as the model runs them (weight x best)."""
    (base_trials, weights), (option_trials, option_weights) = read_trials(default), read_trials(option)
    weights = weights or option_weights
    count, hits, best_is = KINDS[kind][1]
    base, opt = per_task(base_trials, kind), per_task(option_trials, kind)
    rows = []
    for name in opt:
        if name in base and math.isfinite(base[name]["best_s"]) and math.isfinite(opt[name]["best_s"]):
            rows.append({"task": name, "weight": weights.get(name, 1), "default_ms": 1e3 * base[name]["best_s"],
                         "option_ms": 1e3 * opt[name]["best_s"], "ratio": opt[name]["best_s"] / base[name]["best_s"],
                         **{k: opt[name][k] for k in (count, hits, best_is)}})
    print(f"\n{option}\n{'task':44s} {'w':>2s} {'default':>9s} {'option':>9s} {'ratio':>6s} {count:>9s} hits best")
    for r in rows:
        print(f"{r['task'][:44]:44s} {r['weight']:2d} {r['default_ms']:9.4f} {r['option_ms']:9.4f} {r['ratio']:6.3f} "
              f"{r[count]:9d} {r[hits]:4d} {'*' if r[best_is] else '-'}")
    summary = {
        "tasks": len(rows),
        "weighted_sum_ms_default": sum(r["weight"] * r["default_ms"] for r in rows),
        "weighted_sum_ms_option": sum(r["weight"] * r["option_ms"] for r in rows),
        "geomean_task_ratio": math.exp(sum(math.log(r["ratio"]) for r in rows) / max(len(rows), 1)),
        count: sum(r[count] for r in rows),
        hits: sum(r[hits] for r in rows),
        f"tasks_{best_is}": sum(r[best_is] for r in rows),
    }
    summary["weighted_sum_ratio"] = summary["weighted_sum_ms_option"] / summary["weighted_sum_ms_default"]
    print(json.dumps(summary, indent=1))
    return {"default": str(default), "option": str(option), "summary": summary, "tasks": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, nargs="+",
                        help="records files in pairs: a model's arm without the option, then its arm with it")
    parser.add_argument("--kind", choices=sorted(KINDS), default="transfer",
                        help="the option's schedules: sibling transfers or padded sketches")
    parser.add_argument("--out", type=Path, help="JSON summary")
    args = parser.parse_args()
    if len(args.records) % 2:
        parser.error("records come in pairs (without, with the option); got an odd number of files")
    pairs = [compare(args.records[i], args.records[i + 1], args.kind) for i in range(0, len(args.records), 2)]
    if args.out:
        args.out.write_text(json.dumps({"pairs": pairs}, indent=1))
        plot(pairs, args.out.with_suffix(".png"), args.kind)


def plot(pairs: list[dict[str, Any]], path: Path, kind: str = "transfer") -> None:
    """Per model, each task's best with the option over without it; the kind's win in orange."""
    best_is = KINDS[kind][1][2]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.8 * len(pairs) + 2, 4))
    for x, pair in enumerate(pairs):
        for i, row in enumerate(pair["tasks"]):
            jitter = x + 0.3 * (i / max(len(pair["tasks"]) - 1, 1) - 0.5)
            ax.scatter(jitter, row["ratio"], s=12 + 4 * row["weight"],
                       color="tab:orange" if row[best_is] else "tab:blue")
        ax.scatter(x + 0.4, pair["summary"]["weighted_sum_ratio"], marker="_", s=300, color="black")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(pairs)), [Path(p["option"]).stem.split("_harl")[0] for p in pairs])
    ax.set_ylabel("task best, option / default")
    ax.set_title(f"{kind} schedules per task (orange: the best is one; bar: weighted sum)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
