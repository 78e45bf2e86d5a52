"""Why HARL loses a case: its best schedule against MetaSchedule's, decision by decision.

Reads the two records files of one HARL/MetaSchedule pair (as `harl_vs_metaschedule.py` leaves
them in its --work-dir) and prints, as JSON:
* each tuner's best: sketch, every sampling decision, the parallel extent, latency;
* which decisions differ, and how many HARL edits (prime tile moves, whole-level moves,
  compute-at / unroll / parallel steps) separate the two: can the edit actions reach the winner;
* the sketches each tuner measured (did the sketch bandit commit to another sketch);
* the cost model's ranking: trained on HARL's first half of trials, its Spearman rank
  correlation with the measured latencies of the second half, and where MetaSchedule's best
  would rank among HARL's measured schedules.

    python bench/trace_compare.py --workload DEP:1 --harl runs/broad_work/DEP_1/DEP_1_harl_0.jsonl \
        --ms runs/broad_work/DEP_1/DEP_1_metaschedule_0.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from typing import Any

import numpy as np


def tile_distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Prime-factor moves that turn tile split `a` into `b` (same product): half the sum over
    levels of the primes one has and the other lacks."""
    def primes(n: int) -> Counter:
        out, p = Counter(), 2
        while n > 1 and p * p <= n:
            while n % p == 0:
                out[p] += 1
                n //= p
            p += 1
        if n > 1:
            out[n] += 1
        return out

    diff = 0
    for x, y in zip(a, b):
        px, py = primes(x), primes(y)
        diff += sum(((px - py) + (py - px)).values())
    return diff // 2


def describe(space: Any, state: Any) -> dict[str, Any]:
    sk = space.sketches[state.sketch]
    d = state.decisions
    return {"sketch": state.sketch, "tiles": [list(d[s]) for s in sk.tile_slots],
            "compute_at": [d[s] for s in sk.loc_slots], "unroll": [d[s] for s in sk.cat_slots],
            "anchor_fused": state.anchor_fused, "parallel_counts": list(state.parallel_counts)}


def compare(space: Any, harl: Any, ms: Any) -> dict[str, Any]:
    """Per decision kind, how far HARL's best is from MetaSchedule's (same sketch only)."""
    if harl.sketch != ms.sketch:
        return {"same_sketch": False}
    sk = space.sketches[harl.sketch]
    tiles = [tile_distance(harl.decisions[s], ms.decisions[s]) for s in sk.tile_slots]
    return {
        "same_sketch": True,
        "tile_prime_moves": tiles, "tile_prime_moves_total": sum(tiles),
        "compute_at_steps": [abs(harl.decisions[s] - ms.decisions[s]) for s in sk.loc_slots],
        "unroll_steps": [abs(harl.decisions[s] - ms.decisions[s]) for s in sk.cat_slots],
        "parallel_steps": abs(harl.anchor_fused - ms.anchor_fused),
    }


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def network_task(key: str, target: Any) -> Any:
    """A broad-report network task, NET/TASK (e.g. bert-2l/fused_matmul3_add4), built the way the
    broad suite builds it."""
    from harl_vs_metaschedule import BROAD_NETWORKS, broad_network_tasks

    from hiertune.errors import HiertuneError

    net, name = key.split("/", 1)
    if net not in BROAD_NETWORKS:
        raise HiertuneError(f"network {net!r} is not one of the broad suite's ({', '.join(BROAD_NETWORKS)})")
    tasks = broad_network_tasks(net, target)
    for task in tasks:
        if task.name == name:
            return task
    raise HiertuneError(f"{net} has no task {name!r}; its tasks: {', '.join(t.name for t in tasks)}")


def pair_schedules(workload: str, paths: dict[str, str]) -> tuple[Any, dict[str, list[tuple[Any, float]]]]:
    """The case's schedule space (built as the suite builds the task) and, per tuner of `paths`
    ({tuner: records file}), every measured schedule read back into it as (state or None when
    unreadable, latency in seconds)."""
    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.platform.records import RecordStore
    from hiertune.workloads import get_workload
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=1)
    task = network_task(workload, target) if "/" in workload else get_workload(workload, target).tasks[0]
    space = ScheduleSpace(task.mod, target, seed=0)
    return space, {tuner: RecordStore(path, writer=False).schedules(space, tuner=tuner, readable_only=False)
                   for tuner, path in paths.items()}


def readable(rows: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
    """The schedules that read back and ran."""
    return [(s, t) for s, t in rows if s is not None and math.isfinite(t)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help="an operator (DEP:1) or a broad-report network task (bert-2l/fused_matmul3_add4)")
    parser.add_argument("--harl", required=True, help="HARL's records (.jsonl)")
    parser.add_argument("--ms", required=True, help="MetaSchedule's records (.jsonl)")
    args = parser.parse_args()

    from hiertune.policies.cost_model import CostModel

    space, schedules = pair_schedules(args.workload, {"harl": args.harl, "metaschedule": args.ms})
    out: dict[str, Any] = {"workload": args.workload, "sketches": space.num_sketches}
    ran: dict[str, list[tuple[Any, float]]] = {}  # per tuner: its measured, readable schedules
    bests: dict[str, Any] = {}
    for label, rows in schedules.items():
        ok = ran[label] = readable(rows)
        best_state, best_s = bests[label] = min(ok, key=lambda p: p[1])
        out[label] = {"best_ms": best_s * 1e3, "best": describe(space, best_state),
                      "unreadable": sum(s is None for s, _ in rows),
                      "sketch_trials": dict(Counter(s.sketch for s, _ in rows if s is not None)),
                      "sketch_best_ms": {k: min(t for s, t in ok if s.sketch == k) * 1e3
                                         for k in sorted({s.sketch for s, _ in ok})}}
    out["distance"] = compare(space, bests["harl"][0], bests["metaschedule"][0])
    # the cost model: fit on HARL's first half, rank the second half and MetaSchedule's best
    ok = ran["harl"]
    half = len(ok) // 2
    model = CostModel()
    model.update([s for s, _ in ok[:half]], [t for _, t in ok[:half]])
    pred = model.predict([s for s, _ in ok[half:]])
    out["cost_model_spearman_second_half"] = spearman(pred, -np.array([t for _, t in ok[half:]]))
    model.update([s for s, _ in ok[half:]], [t for _, t in ok[half:]])
    ms_best = bests["metaschedule"][0]
    scores = model.predict([s for s, _ in ok] + [ms_best])
    out["ms_best_rank_among_harl_measured"] = int((scores[:-1] > scores[-1]).sum()) + 1
    out["harl_measured"] = len(ok)
    print("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in out.items()) + "\n}")


if __name__ == "__main__":
    main()
