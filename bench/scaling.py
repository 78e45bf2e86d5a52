"""Measurement scale-out: trials per minute with 1 vs 2 runner actors here, projected to 8/32/128 nodes.

Measured (this machine, a real local Ray): random schedules of a small GEMM (GMM-S, 128^3) go
through a `RunnerPool` of 1 and of 2 runner actors, the same candidates for both, in tuning-sized
batches taken in turns (so other tenants' load drifts hit both alike); trials per minute =
candidates / wall time of `pool.measure`. The costs the simulation
draws from are measured on the 1-runner pool: a call's fixed cost (the builder's fresh worker
processes; from one-candidate calls), a candidate's own build + run, and the driver's dispatch
overhead (an empty actor round trip along the pool's path: `ray.put`, `.remote`, `ray.wait`).

Projected: a discrete-event simulation of the pool's own policy (batch split into chunks, each
runner takes the next chunk when it is free, the driver dispatches calls one at a time) with
call costs drawn from the measured distributions, for 1, 2, 8, 32 and 128 nodes (one runner each).
The batch grows with the cluster (`--per-node` candidates per node per round) as it must for
more nodes to help. Measurement alone scales nearly linearly (the driver's serial dispatch is ~2
ms a call); a second projection adds the driver's search time per trial (HARL searches, then
measures), which caps the whole run by Amdahl's law however many nodes measure.

Measured on a cluster: `bench/cluster_smoke.py` (root) runs the same `hiertune tune` with runners
on 1 and on 2 worker hosts of a real `ray up` cluster of namespace hosts on this machine, one core
each; its trials per minute (from the records' timestamps, after the first batch) are read from
bench/results/cluster_smoke.json and shown beside the projection. The hosts share this machine's
two cores with the head's driver, so the figure shows the pool spreading a run over hosts through
Ray's own cluster (SSH, per-host raylets, the object transfer between hosts), not what a second
machine's own cores would add.

    python bench/scaling.py --batches 3 --batch 16
Writes bench/results/scaling.json and bench/results/scaling.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hiertune.platform.ray_runtime import RayConfig, apply_env_defaults, init_ray  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PROJECTED_NODES = (1, 2, 8, 32, 128)


def candidates(count: int, seed: int) -> list:
    """`count` distinct random schedules of GMM-S (random fills of its sketches)."""
    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.workloads import get_workload
    from hiertune.platform.runners import MeasureInput
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=1)
    space = ScheduleSpace(get_workload("GMM-S").tasks[0].mod, target, seed=seed)
    rng = np.random.default_rng(seed)
    seen, out = set(), []
    for _ in range(50 * count):
        state = space.random_state(int(rng.integers(space.num_sketches)), rng)
        if state.key not in seen:
            seen.add(state.key)
            out.append(MeasureInput.from_schedule(state.sch))
        if len(out) == count:
            break
    return out


def dispatch_overhead(pool, calls: int = 40) -> list[float]:
    """Seconds per empty call along the pool's path (put, remote, wait, get)."""
    import ray

    actor = pool._runners[0].actor
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        ref = ray.put(None)
        done = actor.ready.remote()
        ray.wait([done], num_returns=1)
        ray.get(done)
        del ref
        times.append(time.perf_counter() - t0)
    return times


def measure_pools(sizes: tuple[int, ...], batches: list[list], warmup: list, singles: list) -> list[dict]:
    """Trials per minute of pools of each size on the same tuning-sized batches.

    All pools live at once and take turns batch by batch (order rotating), so the other tenants'
    load drifts hit every size alike. The first pool also measures `singles`, one candidate per
    call, which separates a call's fixed cost from a candidate's own."""
    from hiertune.platform.runner_pool import create_pool
    from hiertune.platform.runners import RunnerConfig

    config = RunnerConfig(num_cpus=1, placement_timeout_s=300)
    pools, out = [], []
    try:
        for size in sizes:
            t0 = time.perf_counter()
            pools.append(create_pool(config, num_runners=size))
            out.append({"runners": size, "start_s": time.perf_counter() - t0, "batch_wall_s": [], "run_s": [],
                        "ok": 0, "candidates": 0})
            pools[-1].measure(warmup[:size])  # first call per runner pays one-off imports
        for i, batch in enumerate(tqdm(batches, desc="batches (each pool in turn)", unit="batch")):
            order = list(range(len(pools)))
            order = order[i % len(order):] + order[: i % len(order)]
            for j in order:
                t0 = time.perf_counter()
                results = pools[j].measure(batch)
                out[j]["batch_wall_s"].append(time.perf_counter() - t0)
                out[j]["run_s"].append([r.run_s for r in results])
                out[j]["ok"] += sum(r.ok for r in results)
                out[j]["candidates"] += len(batch)
        first = out[0]
        first["single_wall_s"], first["single_run_s"] = [], []
        for inp in singles:
            t0 = time.perf_counter()
            (result,) = pools[0].measure([inp])
            first["single_wall_s"].append(time.perf_counter() - t0)
            first["single_run_s"].append(result.run_s)
        first["dispatch_overhead_s"] = dispatch_overhead(pools[0])
        for pool, row in zip(pools, out):
            row["wall_s"] = sum(row["batch_wall_s"])
            row["trials_per_min"] = 60 * row["candidates"] / row["wall_s"]
            row["nodes"] = len(set(pool.nodes()))
            row["stats"] = {"dispatched": pool.stats.dispatched, "requeued": pool.stats.requeued}
    finally:
        for pool in pools:
            pool.close()
    return out


def call_costs(one: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """From the 1-runner pool: per-call fixed costs F_j and per-candidate costs b + run_i.

    A call of n candidates takes F + n*b + sum(run_i) (F: the builder's fresh workers, b: one
    candidate's build). Single calls give F + b + run; whole-batch calls give the n-candidate form.
    """
    n_walls = np.asarray(one["batch_wall_s"])
    n_runs = [np.asarray(r) for r in one["run_s"]]
    n = np.mean([len(r) for r in n_runs])
    s_walls, s_runs = np.asarray(one["single_wall_s"]), np.asarray(one["single_run_s"])
    per_call_n = float(np.mean([w - r.sum() for w, r in zip(n_walls, n_runs)]))  # F + n*b
    per_call_1 = float(np.mean(s_walls - s_runs))  # F + b
    b = max(0.0, (per_call_n - per_call_1) / (n - 1))
    fixed = np.maximum(s_walls - s_runs - b, 0.0)
    cand = b + np.concatenate(n_runs)
    return fixed, cand, b


def simulate(nodes: int, batch: int, rounds: int, cand_s: np.ndarray, fixed_s: np.ndarray,
             dispatch_s: np.ndarray, rng: np.random.Generator, search_s_per_trial: float = 0.0) -> float:
    """Trials per minute of the pool's policy on `nodes` runners, costs drawn from measurements.

    search_s_per_trial: the driver's own search time per candidate before each round's
    measurement (HARL searches, then measures: the two do not overlap in `HarlSearch.run`)."""
    clock = 0.0
    for _ in range(rounds):
        clock += search_s_per_trial * batch
        chunk = max(1, math.ceil(batch / nodes))
        chunks = [min(chunk, batch - i) for i in range(0, batch, chunk)]
        free_at = np.full(nodes, clock)
        driver = clock
        ends = []
        for size in chunks:  # the driver sends calls one after another; each runner takes the next
            runner = int(np.argmin(free_at))
            driver = max(driver, 0.0) + float(rng.choice(dispatch_s))
            begin = max(free_at[runner], driver)
            cost = float(rng.choice(fixed_s)) + float(rng.choice(cand_s, size=size).sum())
            free_at[runner] = begin + cost
            ends.append(free_at[runner])
        clock = max(ends) + float(rng.choice(dispatch_s))  # results back, in order, to the driver
    return 60 * batch * rounds / clock


def plot(result: dict, path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    fig, (ax_m, ax_p) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [f"{m['runners']} runner(s)" for m in result["measured"]]
    rates = [m["trials_per_min"] for m in result["measured"]]
    colors = ["tab:blue", "tab:green"][: len(rates)]
    cluster = result.get("cluster_measured")
    if cluster:  # whole tuning runs (search included) on the namespace cluster
        labels += ["cluster:\n1 host", "cluster:\n2 hosts"]
        rates += [cluster["1_hosts_trials_per_min"], cluster["2_hosts_trials_per_min"]]
        colors += ["tab:gray", "tab:olive"]
    ax_m.bar(labels, rates, color=colors)
    for i, rate in enumerate(rates):
        ax_m.text(i, rate, f"{rate:.1f}", ha="center", va="bottom")
    ax_m.set_ylabel("measured trials per minute")
    ax_m.set_title(f"measured here ({result['machine']['cpus']} cores, GMM-S)")
    proj = result["projected"]
    nodes = [p["nodes"] for p in proj]
    ax_p.plot(nodes, [p["trials_per_min"] for p in proj], "o-", label="simulated pool (measurement only)")
    ax_p.plot(nodes, [p["trials_per_min_with_search"] for p in proj], "s-",
              label=f"+ driver search {result['config']['search_s_per_trial']:g} s/trial")
    ideal = proj[0]["trials_per_min"]
    ax_p.plot(nodes, [ideal * n for n in nodes], "--", color="gray", label="linear")
    ax_p.set_xscale("log", base=2)
    ax_p.set_yscale("log")
    ax_p.set_xlabel("nodes (one runner each)")
    ax_p.set_ylabel("trials per minute")
    ax_p.set_title(f"projected ({result['config']['per_node']} candidates per node per round)")
    ax_p.grid(alpha=0.3, which="both")
    ax_p.legend()
    save_figure(fig, path, dpi=120)


def cluster_point(path: Path) -> dict | None:
    """Trials per minute with runners on 1 vs 2 hosts of the namespace cluster, if it has run."""
    if not path.exists():
        return None
    smoke = json.loads(path.read_text())
    point = smoke.get("scaling")
    return None if not point else {**point, "source": str(path.relative_to(ROOT)), "smoke_ok": smoke.get("ok")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3, help="measured batches per pool size")
    parser.add_argument("--batch", type=int, default=16, help="candidates per batch (a tuning round)")
    parser.add_argument("--singles", type=int, default=6, help="one-candidate calls (separate fixed costs)")
    parser.add_argument("--per-node", type=int, default=8, help="simulated candidates per node per round")
    parser.add_argument("--rounds", type=int, default=20, help="simulated rounds per cluster size")
    parser.add_argument("--search-s-per-trial", type=float, default=0.88,
                        help="driver search time per trial for the second projection (0.88 s: "
                             "`hiertune tune --workload GMM-S --trials 16 --runners 2` here)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "scaling.json")
    parser.add_argument("--cluster", type=Path, default=RESULTS / "cluster_smoke.json",
                        help="bench/cluster_smoke.py's result: its measured 1-vs-2-host point")
    args = parser.parse_args()

    apply_env_defaults()
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    from rich.console import Console
    from rich.table import Table

    console = Console()
    init_ray(RayConfig(num_cpus=3))  # 1 + 2 runners alive at once; only one pool measures at a time
    inputs = candidates(args.batch * args.batches + 2 + args.singles, args.seed)
    warmup, singles, rest = inputs[:2], inputs[2:2 + args.singles], inputs[2 + args.singles:]
    batches = [rest[i * args.batch:(i + 1) * args.batch] for i in range(args.batches)]
    measured = measure_pools((1, 2), batches, warmup, singles)

    fixed, cand_s, build_b = call_costs(measured[0])
    dispatch = np.asarray(measured[0]["dispatch_overhead_s"])
    rng = np.random.default_rng(args.seed)
    projected = []
    for nodes in PROJECTED_NODES:
        batch = args.per_node * nodes
        per_min = simulate(nodes, batch, args.rounds, cand_s, fixed, dispatch, rng)
        with_search = simulate(nodes, batch, args.rounds, cand_s, fixed, dispatch, rng, args.search_s_per_trial)
        projected.append({"nodes": nodes, "batch": batch, "trials_per_min": per_min,
                          "trials_per_min_with_search": with_search})
    base = projected[0]["trials_per_min"]
    base_search = projected[0]["trials_per_min_with_search"]
    for p in projected:
        p["speedup"] = p["trials_per_min"] / base
        p["efficiency"] = p["speedup"] / p["nodes"]
        p["speedup_with_search"] = p["trials_per_min_with_search"] / base_search

    result = {
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
        "config": vars(args) | {"out": str(args.out), "cluster": str(args.cluster)},
        "measured": measured,
        "measured_ratio_2_vs_1": measured[1]["trials_per_min"] / measured[0]["trials_per_min"],
        "costs": {
            "candidate_s_median": float(np.median(cand_s)), "candidate_build_s": build_b,
            "call_fixed_s_median": float(np.median(fixed)),
            "dispatch_overhead_ms_median": 1e3 * float(np.median(dispatch)),
        },
        "projected": projected,
        "cluster_measured": cluster_point(args.cluster),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    png = args.out.with_suffix(".png")
    plot(result, png)

    table = Table(title="measurement scale-out (GMM-S candidates)")
    for column in ("setting", "runners/nodes", "batch", "trials/min", "vs 1",
                   f"trials/min with {args.search_s_per_trial:g} s/trial search", "vs 1 "):
        table.add_column(column, justify="right")
    for m in measured:
        table.add_row("measured here", str(m["runners"]), str(args.batch), f"{m['trials_per_min']:.1f}",
                      f"{m['trials_per_min'] / measured[0]['trials_per_min']:.2f}x", "-", "-")
    cluster = result["cluster_measured"]
    if cluster:
        for hosts in (1, 2):
            rate = cluster[f"{hosts}_hosts_trials_per_min"]
            table.add_row("cluster smoke (tune)", f"{hosts} host(s)", "8", f"{rate:.1f}",
                          f"{rate / cluster['1_hosts_trials_per_min']:.2f}x", "-", "-")
    for p in projected:
        table.add_row("simulated", str(p["nodes"]), str(p["batch"]), f"{p['trials_per_min']:.1f}",
                      f"{p['speedup']:.2f}x", f"{p['trials_per_min_with_search']:.1f}",
                      f"{p['speedup_with_search']:.2f}x")
    console.print(table)
    console.print(f"per candidate {result['costs']['candidate_s_median']:.2f} s (median), fixed per call "
                  f"{result['costs']['call_fixed_s_median']:.2f} s, dispatch "
                  f"{result['costs']['dispatch_overhead_ms_median']:.2f} ms; load avg {result['machine']['load_avg_1m']:.1f}")
    console.print(f"-> {args.out}, {png}")


if __name__ == "__main__":
    main()
