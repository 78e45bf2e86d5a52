"""Overhead of measuring through the Ray runner actor vs calling MetaSchedule's builder/runner directly.

Both paths build and time the same candidates (random fills of a GEMM's sketches) with the same
builder settings; rounds alternate between the two so load swings hit both. Writes
bench/results/measure_overhead.json and prints seconds per candidate and the ratio (goal <= 1.1).

    python bench/measure_overhead.py --workload GMM-S --candidates 8 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="GMM-S")
    parser.add_argument("--candidates", type=int, default=8, help="candidates per round and path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="bench/results/measure_overhead.json")
    args = parser.parse_args()

    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.workloads import get_workload
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import MeasureInput, Measurer, RunnerConfig, create_runner
    from hiertune.workloads.tvm_support import make_target

    config = RunnerConfig(num_cpus=1)
    target = make_target(config.target, num_cores=1)
    task = get_workload(args.workload).tasks[0]
    space = ScheduleSpace(task.mod, target, seed=0)
    rng = np.random.default_rng(0)

    def batch() -> list[MeasureInput]:
        states = [space.random_state(i % space.num_sketches, rng) for i in range(args.candidates)]
        return [MeasureInput(s.mod, s.args_info) for s in states]

    init_ray(RayConfig(num_cpus=2))
    direct = Measurer(config)  # MetaSchedule's LocalBuilder + LocalRunner in this process
    ray_runner = create_runner(config)
    rows: dict[str, list[dict[str, float]]] = {"direct": [], "ray": []}
    paths = [("direct", direct.measure), ("ray", ray_runner.measure)]
    for round_index in range(args.rounds):
        for name, measure in paths if round_index % 2 == 0 else paths[::-1]:  # alternate who goes first
            inputs = batch()
            t0 = time.perf_counter()
            results = measure(inputs)
            wall = time.perf_counter() - t0
            ok = [r for r in results if r.ok]
            rows[name].append({
                "wall_s_per_candidate": wall / len(inputs),
                "build_s_per_candidate": statistics.mean(r.build_s for r in results),
                "run_s_per_candidate": statistics.mean(r.run_s for r in ok) if ok else float("nan"),
                "ok": len(ok),
            })
    ray_runner.close()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[name])

    summary = {
        path: {key: med(path, key) for key in ("wall_s_per_candidate", "build_s_per_candidate", "run_s_per_candidate")}
        for path in rows
    }
    ratio = summary["ray"]["wall_s_per_candidate"] / summary["direct"]["wall_s_per_candidate"]
    # What Ray itself adds: the driver's wall time beyond the build+run the actor timed inside.
    ray_s = summary["ray"]
    dispatch = ray_s["wall_s_per_candidate"] - ray_s["build_s_per_candidate"] - ray_s["run_s_per_candidate"]
    result = {"workload": task.name, "candidates_per_round": args.candidates, "rounds": args.rounds,
              "overhead_ratio": ratio, "goal": 1.1, "ray_dispatch_s_per_candidate": dispatch,
              "summary": summary, "rounds_detail": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))

    table = Table(title=f"measurement overhead, {task.name}, {args.candidates} candidates x {args.rounds} rounds")
    for column in ("path", "wall s/cand", "build s/cand", "run s/cand"):
        table.add_column(column, justify="right")
    for path, s in summary.items():
        table.add_row(path, *(f"{s[k]:.3f}" for k in ("wall_s_per_candidate", "build_s_per_candidate", "run_s_per_candidate")))
    console = Console()
    console.print(table)
    console.print(f"Ray runner / direct MetaSchedule: {ratio:.3f} (goal <= 1.1); Ray's own dispatch "
                  f"{dispatch * 1e3:.1f} ms per candidate; written to {args.out}")


if __name__ == "__main__":
    main()
