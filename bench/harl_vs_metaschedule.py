"""HARL vs MetaSchedule's evolutionary search at equal measured trials, side by side in one run.

Both tuners measure through the same Ray runner actor; a timing proxy around it splits each run's
wall time into measurement (build + run) and search (everything else: for HARL the RL, cost model
and replay, for MetaSchedule the evolutionary search and its cost model). Which tuner goes first
alternates from workload to workload, so slow drifts of the machine's load hit both alike.

One workload (JSON + PNG per workload, bench/results/harl_vs_ms_<workload>.*):

    python bench/harl_vs_metaschedule.py --workload GMM-S --trials 64 --seeds 0 1

The suite (issue 4: operators, a network with MetaSchedule's gradient task scheduler, the tuned
1024^3 GEMM vs numpy's sgemm, the ablations; bench/results/harl_vs_metaschedule.json + PNG):

    python bench/harl_vs_metaschedule.py --suite quick
    python bench/harl_vs_metaschedule.py --suite full

The suite's JSON is rewritten after every piece; `--resume` skips pieces already in it.

The broad suite, in two halves (bench/results/harl_vs_metaschedule_broad.json + PNG): the
selection half (shape 1 of every te_workload family, 64 trials, seeds 0 and 1), on which
defaults may be chosen, and the report half (shape 2 of every family, five at batch 16, the
heaviest task of each kind of the model benchmark's networks, four shapes at 256 trials, seed 0),
which is never used to choose. Top-level keys are over the report half, `selection` holds the
same over the selection half; every geomean has a bootstrap 90% interval over cases beside it
(`..._ci90`), every case its spread over seeds, and `cases_done` / `cases_planned` say how much
of a half a partial file holds. A stopped run continues pair by pair from the JSON:

    python bench/harl_vs_metaschedule.py --suite broad-select --suite-seeds 0 --work-dir runs/broad
    python bench/harl_vs_metaschedule.py --suite broad-report --work-dir runs/broad

A schedule-space option against the defaults (two HARL arms back to back per case, each also
against the MetaSchedule best of the broad JSON):

    python bench/harl_vs_metaschedule.py --suite broad-select --space-option largest_prime_moves=1 --only DEP:1

(`--suite-trials 256` runs the same shapes at another budget, keyed `DEP:1@256`.) The report half
again on another seed, then both runs as one (each case over its seeds):

    python bench/harl_vs_metaschedule.py --suite broad-report --suite-seeds 1 --out seed1.json --work-dir runs/s1
    python bench/harl_vs_metaschedule.py --suite broad-report --merge seed0.json seed1.json --out both.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from summary_stats import geomean

RESULTS = Path(__file__).parent / "results"
SUITE_JSON = RESULTS / "harl_vs_metaschedule.json"
SUITE_PNG = RESULTS / "harl_vs_metaschedule.png"
HARL, MS = "harl", "metaschedule"


@dataclass
class Suite:
    """What one suite mode runs: operators, budgets, seeds, the network and the ablations."""

    operators: list[str]
    trials: int
    seeds: list[int]
    network: str
    network_trials: int
    fixed_length_ops: list[str]  # operators that also get a fixed-length HARL run (ablation)
    trials_override: dict[str, int] = field(default_factory=dict)  # per-operator budgets

    def budget(self, workload: str) -> int:
        return self.trials_override.get(workload, self.trials)


# Quick: the smallest TVM shape of each family where that is a real kernel (C2D:1 = 56x56x64 1x1,
# C3D:1 = 16x56x56x64 1x1x1, T2D:3 = 32x32x64 -> 3, C1D:0 = 256x64 -> 128 k3 s2), 64 trials, three
# seeds: sized for ~1 h on 2 quiet cores (a trial costs 0.6-2.5 s there, 2-3x that under load).
# Full: the paper's setting, every TVM shape, 1000 trials.
SUITES = {
    "quick": Suite(
        operators=["GMM-S", "GMM-M", "GMM-L", "C1D:0", "C2D:1", "C3D:1", "T2D:3"],
        trials=64, seeds=[0, 1, 2], network="tiny-convnet", network_trials=64,
        fixed_length_ops=["GMM-S", "C1D:0"],
    ),
    "full": Suite(
        operators=["GMM-S", "GMM-M", "GMM-L"] + [f"{f}:{i}" for f in ("C1D", "C2D", "C3D", "T2D") for i in range(4)],
        trials=1000, seeds=[0, 1, 2], network="resnet18", network_trials=3000,
        fixed_length_ops=["GMM-M", "C1D:0", "C2D:1", "C3D:1", "T2D:3"],
    ),
}


class TimedRunner:
    """Passes `measure` through to the real runner and adds up the seconds spent in it."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.config = runner.config  # its timing binds the records file
        self.measure_s = 0.0

    def measure(self, inputs: list[Any]) -> list[Any]:
        start = time.perf_counter()
        try:
            return self.runner.measure(inputs)
        finally:
            self.measure_s += time.perf_counter() - start


class LazyRunner:
    """Ray and the runner actor start at the first measurement (a resumed suite may need none);
    its `config` is known before, as a search binds its records to the runner's timing at once."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.runner: Any = None

    def measure(self, inputs: list[Any]) -> list[Any]:
        if self.runner is None:
            from hiertune.platform.ray_runtime import RayConfig, init_ray
            from hiertune.platform.runners import create_runner

            init_ray(RayConfig())
            self.runner = create_runner(self.config)
        return self.runner.measure(inputs)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()


# ---------------------------------------------------------------------- one tuning run
def records_path(work: Path, workload: str, label: str, seed: int) -> Path:
    return Path(work) / f"{workload.replace(':', '_')}_{label}_{seed}.jsonl"


def run_tuner(tuner: str, workload: Any, target: Any, trials: int, seed: int, runner: Any, work: Path,
              harl_options: dict[str, Any] | None = None, label: str | None = None) -> dict[str, Any]:
    """Tune `workload` with one tuner on the shared runner; its curve, best and time split.
    `harl_options`: HarlConfig overrides, `section.field: value`."""
    from hiertune.configs import with_overrides
    from hiertune.platform.harl_search import HarlConfig, HarlSearch
    from hiertune.platform.curves import tuning_curve
    from hiertune.platform.ms_baseline import BaselineConfig, run_baseline
    from hiertune.platform.records import RecordStore

    label = label or tuner
    store = RecordStore(records_path(work, workload.name, label, seed))
    # a run killed mid-pair left trials that this run resumes from, unmeasured and untimed here
    resumed = len(store.trials(tuner=tuner))
    timed = TimedRunner(runner)
    start = time.perf_counter()
    start_wall = time.time()
    extra: dict[str, Any] = {}
    if tuner == HARL:
        # search against search: no cost-model prior unless an option sets one (a prior is other
        # runs' measurements MetaSchedule does not get, and the shipped one holds the selection tasks)
        config = with_overrides(HarlConfig(trials=trials, seed=seed), {"cost_model.prior": None, **(harl_options or {})})
        result = HarlSearch(workload, target, timed, store, config).run()
        extra = {"loop_search_s_per_trial": result.search_s_per_trial, "task_trials": result.task_trials,
                 "exhausted": result.exhausted, "options": harl_options or {}}
    else:
        run_baseline(workload, target, timed, store,
                     BaselineConfig(trials=trials, seed=seed, work_dir=str(work / f"ms_{label}_{seed}")))
        extra = {"task_trials": {t.name: len(store.trials(t.name, tuner=MS)) for t in workload.tasks}}
    wall = time.perf_counter() - start
    flops = workload.task_flops
    weights = workload.task_weights
    points = tuning_curve(store, flops, weights, tuner=tuner)
    n = len(points)
    curve = [p.latency_s * 1e3 if math.isfinite(p.latency_s) else None for p in points]
    finite = [c for c in curve if c is not None]
    trials = store.trials(tuner=tuner)
    if tuner == HARL:
        extra["sketch_per_trial"] = [r.extra.get("sketch") for r in trials]
    return {
        "records": str(store.path),
        "trials": n,
        # wall seconds (search + measurement) from the tuner's start to each trial's record
        "elapsed_s": [round(r.time - start_wall, 3) for r in trials],
        "best_ms": finite[-1] if finite else None,
        # the best after 8 trials, for both tuners (HARL's first batch; MetaSchedule's first is 16):
        # the key's name is older than that choice and stays so that earlier result files still read
        "first_batch_best_ms": next((c for c in curve[min(7, n - 1):] if c is not None), None) if n else None,
        "curve_ms": curve,
        "wall_s": wall,
        "measure_s": timed.measure_s,
        "search_s": wall - timed.measure_s,
        "search_s_per_trial": (wall - timed.measure_s) / max(n - resumed, 1),
        "resumed_trials": resumed,
        **extra,
    }


def run_pair(workload_name: str | Any, trials: int, seed: int, runner: Any, work: Path, elite: float,
             target: Any = None, harl_first: bool = True, harl_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """HARL and MetaSchedule on one workload (a name or a Workload), same runner and budget, one
    after the other."""
    from hiertune.workloads import get_workload
    from hiertune.workloads.tvm_support import make_target

    target = target if target is not None else make_target("llvm")
    workload = get_workload(workload_name, target) if isinstance(workload_name, str) else workload_name
    order = (HARL, MS) if harl_first else (MS, HARL)
    out: dict[str, Any] = {"order": list(order)}
    for tuner in order:
        out[tuner] = run_tuner(tuner, workload, target, trials, seed, runner, work,
                               harl_options={"episode.elite_fraction": elite, **(harl_options or {})} if tuner == HARL else None)
    return out


# ---------------------------------------------------------------------- ratios
def trials_to_reach(curve: list[float | None], goal: float | None) -> int | None:
    """First trial (1-based) whose best-so-far is at or below `goal`; None if never."""
    if goal is None:
        return None
    for i, value in enumerate(curve, 1):
        if value is not None and value <= goal:
            return i
    return None


def pair_ratios(pair: dict[str, Any]) -> dict[str, Any]:
    """Latency, trials-to-reach and search-overhead ratios of one HARL/MetaSchedule pair."""
    harl, ms = pair[HARL], pair[MS]
    reach = trials_to_reach(harl["curve_ms"], ms["best_ms"])
    latency = harl["best_ms"] / ms["best_ms"] if harl["best_ms"] and ms["best_ms"] else None
    timed = both_timed(pair)
    return {
        "latency_ratio": latency,
        "harl_trials_to_reach_ms_best": reach if reach is not None else harl["trials"],
        "reached": reach is not None,  # False: HARL never got there; its whole budget is counted
        "trials_ratio": (reach if reach is not None else harl["trials"]) / max(ms["trials"], 1),
        "search_overhead_ratio": harl["search_s_per_trial"] / ms["search_s_per_trial"]
        if timed and ms["search_s_per_trial"] else None,
    }


def both_timed(pair: dict[str, Any]) -> bool:
    """Whether both tuners ran every trial in this pair's run: one resumed from a killed run's
    records spent no search time on those trials, so its times compare with nothing."""
    return not pair[HARL].get("resumed_trials") and not pair[MS].get("resumed_trials")


# ---------------------------------------------------------------------- numpy sgemm
NUMPY_SNIPPET = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
n, threads = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)
with threadpool_limits(limits=threads):
    np.matmul(a, b)
    times = []
    for _ in range(20):
        t = time.perf_counter(); np.matmul(a, b); times.append(time.perf_counter() - t)
    info = [{k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads", "threading_layer")} for p in threadpool_info()]
times.sort()
print(json.dumps({"median_s": times[len(times) // 2], "min_s": times[0], "threads": threads, "blas": info}))
"""


def numpy_sgemm(n: int, threads: int) -> dict[str, Any]:
    """np.matmul float32 n^3 in a fresh process with OPENBLAS_CORETYPE/L2_SIZE unset (their kernel)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    out = subprocess.run([sys.executable, "-c", NUMPY_SNIPPET, str(n), str(threads)], env=env,
                         capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # Headline: numpy's best of 20 calls, as the tuned side is its best measured candidate (the
    # conservative choice for the ratio); the median is kept beside it.
    result["gflops"] = 2 * n**3 / result["min_s"] / 1e9
    result["gflops_median"] = 2 * n**3 / result["median_s"] / 1e9
    result["env_unset"] = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"]
    return result


def remeasure_bests(summary: dict[str, Any], work: Path, threads: int, rounds: int) -> dict[str, Any]:
    """bench/remeasure_best.py on every operator's two winners (seed of the first run), in a fresh
    process with OPENBLAS_CORETYPE/L2_SIZE unset, so GEMMs meet numpy's own kernel. GEMM-L's
    winners of every seed are timed too (labels `harl@seed1`, ...): its numpy ratio is the
    median over seeds, not one session's luck."""
    spec = {}
    for name, entry in summary["operators"].items():
        run = entry["runs"][0]
        spec[name] = {t: run[t].get("records") or str(records_path(work, name, t, run["seed"])) for t in (HARL, MS)}
        if name == "GMM-L":
            for other in entry["runs"][1:]:
                spec[name].update({f"{t}@seed{other['seed']}": other[t].get("records")
                                   or str(records_path(work, name, t, other["seed"])) for t in (HARL, MS)})
    net = summary.get("network")
    if net:
        spec[f"net:{net['name']}"] = {t: net[t].get("records") or str(records_path(work, net["name"], t, net["seed"]))
                                      for t in (HARL, MS)}
    return run_remeasure(spec, threads, rounds)


def run_remeasure(spec: dict[str, dict[str, str]], threads: int, rounds: int) -> dict[str, Any]:
    """bench/remeasure_best.py on `spec` ({task: {label: records}}) in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")]))
    script = Path(__file__).with_name("remeasure_best.py")
    out = subprocess.run([sys.executable, str(script), "--threads", str(threads), "--rounds", str(rounds),
                          "--spec", json.dumps(spec)], env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"remeasure_best.py failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["env_unset"] = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"]
    return result


# ---------------------------------------------------------------------- the suite
def _save(summary: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(path)


def summarise(summary: dict[str, Any]) -> None:
    """Top-level geomeans and ratios from the per-workload detail (recomputed after every piece)."""
    ops = summary["operators"]
    rows = [r["ratios"] for w in ops.values() for r in w["runs"]]
    summary["geomean_latency_ratio"] = geomean([r["latency_ratio"] for r in rows])
    summary["geomean_trials_ratio"] = geomean([r["trials_ratio"] for r in rows])
    summary["search_overhead_ratio"] = geomean([r["search_overhead_ratio"] for r in rows])
    summary["trials_ratio_unreached"] = sorted({w for w, d in ops.items() for r in d["runs"] if not r["ratios"]["reached"]})
    summary["worst_operator_latency_ratio"] = max(
        ((w, geomean([r["ratios"]["latency_ratio"] for r in d["runs"]])) for w, d in ops.items()),
        key=lambda pair: pair[1] or 0.0, default=None,
    )
    again = summary.get("remeasured", {}).get("tasks", {})
    if again:
        summary["geomean_latency_ratio_remeasured"] = geomean([again[w].get("latency_ratio_median") for w in ops if w in again])
        summary["worst_operator_latency_ratio_remeasured"] = max(
            ((w, again[w].get("latency_ratio_median")) for w in ops if w in again), key=lambda p: p[1] or 0.0, default=None)
    net_again = summary.get("remeasured", {}).get("network")
    if net_again:
        summary["network_latency_ratio_end_to_end"] = net_again.get("latency_ratio_median")
    gemm = ops.get("GMM-L")
    blas = summary.get("numpy_sgemm")
    if gemm and "GMM-L" in again and "vs_numpy_median" in again["GMM-L"].get(HARL, {}):
        side = again["GMM-L"]
        # the headline: side by side in one process, same thread count, medians over the rounds;
        # with every seed's winner re-timed, the median over seeds (seed 0 alone is kept beside it)
        timed = {t: [side[label] for label in side if label.split("@")[0] == t and "vs_numpy_median" in side[label]]
                 for t in (HARL, MS)}  # each tuner's winners, seed 0 first
        per_seed = {t: [row["vs_numpy_median"] for row in rows] for t, rows in timed.items()}
        gflops = {t: [row["gflops_median"] for row in rows] for t, rows in timed.items()}
        summary["gemm_l_vs_numpy"] = statistics.median(per_seed[HARL])
        summary["gemm_l_vs_numpy_metaschedule"] = statistics.median(per_seed[MS])
        summary["gemm_l"] = {"method": "side by side (bench/remeasure_best.py), median over rounds; "
                                       f"median over the winners of {len(per_seed[HARL])} seed(s)",
                             "tuned_gflops": {t: statistics.median(gflops[t]) for t in (HARL, MS)},
                             "per_seed_vs_numpy": per_seed, "seed0_vs_numpy": {t: side[t]["vs_numpy_median"] for t in (HARL, MS)},
                             "numpy_gflops": side["numpy"]["gflops_median"], "threads": summary["remeasured"]["threads"],
                             "blas": summary["remeasured"]["blas"],
                             "best_of_rounds_vs_numpy": {t: side[t]["vs_numpy_best"] for t in (HARL, MS)}}
        if blas:
            best = min(r[HARL]["best_ms"] for r in gemm["runs"])
            summary["gemm_l"]["records_best_vs_numpy_best_of_20"] = 2 * 1024**3 / (best * 1e-3) / 1e9 / blas["gflops"]
    elif gemm and blas:
        flop = 2 * 1024**3
        best = {t: min(r[t]["best_ms"] for r in gemm["runs"]) for t in (HARL, MS)}
        gflops = {t: flop / (best[t] * 1e-3) / 1e9 for t in best}
        summary["gemm_l"] = {"tuned_gflops": gflops, "numpy_gflops": blas["gflops"], "threads": blas["threads"],
                             "numpy_gflops_median": blas.get("gflops_median"),
                             "vs_numpy_median": gflops[HARL] / blas["gflops_median"] if blas.get("gflops_median") else None}
        summary["gemm_l_vs_numpy"] = gflops[HARL] / blas["gflops"]
        summary["gemm_l_vs_numpy_metaschedule"] = gflops[MS] / blas["gflops"]
    ablations = summary["ablations"]
    fixed = ablations.get("fixed_length", {})
    if fixed:
        ratios = [d["latency_ratio_fixed_over_adaptive"] for d in fixed.values()]
        summary["ablation_fixed_over_adaptive_latency"] = geomean(ratios)
        summary["ablation_fixed_over_adaptive_search_s"] = geomean([d["search_ratio_fixed_over_adaptive"] for d in fixed.values()])
    bandit = ablations.get("no_subgraph_bandit")
    if bandit:
        summary["ablation_no_bandit_over_bandit_latency"] = bandit["latency_ratio_no_bandit_over_bandit"]


def suite_runner_config(args: argparse.Namespace, work_dir: Path | None = None) -> Any:
    """The one runner both tuners share. Operators are timed warm by default (`cache_flush` off),
    as MetaSchedule's default evaluator times them and as every committed result of this suite was
    timed: an operator here stands alone, with no model around it to evict its weights.
    `--cache-flush` times cold, as `hiertune tune` times a model's tasks on CPU."""
    from hiertune.platform.runners import RunnerConfig

    return RunnerConfig(target="llvm", num_cpus=args.runner_cores, cache_flush=getattr(args, "cache_flush", False),
                        work_dir=None if work_dir is None else str(work_dir))


def check_cache_flush(args: argparse.Namespace) -> None:
    """`--cache-flush` only where the timing is written down and compared with its own kind: the
    broad suite's pairs (`setup.timing`). The quick suite, single-workload runs and A/Bs (whose
    arms meet the broad JSON's warm MetaSchedule bests) would time cold without saying so."""
    if args.cache_flush and (args.suite not in (BROAD_SELECT, BROAD_REPORT) or args.space_option):
        raise SystemExit("--cache-flush times the pairs of a broad half (--suite broad-select or broad-report, "
                         "no --space-option); the quick suite, single workloads and A/Bs time warm: drop the flag")


def run_suite(args: argparse.Namespace) -> dict[str, Any]:
    from hiertune.workloads import get_workload
    from hiertune.workloads.tvm_support import make_target

    suite = SUITES[args.suite]
    if args.trials_override:
        suite.trials = args.trials_override
    if args.seeds_override:
        suite.seeds = args.seeds_override
    if args.only:
        suite.operators = [w for w in suite.operators if w in args.only]
    out_path = Path(args.out)
    summary: dict[str, Any] = json.loads(out_path.read_text()) if args.resume and out_path.exists() else {}
    command = "python " + " ".join([sys.argv[0], *sys.argv[1:]])
    if "command" in summary:  # a resumed run: the first command made most of it, keep both
        summary.setdefault("resumed_with", []).append(command)
    else:
        summary["command"] = command
    summary.update({
        "suite": args.suite,
        "setup": {
            "runner_cores": args.runner_cores, "TVM_NUM_THREADS": args.runner_cores, "host_cores": os.cpu_count(),
            "trials": suite.trials, "trials_override": suite.trials_override, "seeds": suite.seeds,
            "elite_starts": args.elite_starts, "network": suite.network, "network_trials": suite.network_trials,
            "measure": "one Ray runner actor (LocalBuilder + LocalRunner, number=3, repeat=1, min_repeat_ms=50, warm) "
                       "shared by both tuners; tuner order alternates per workload",
            "load_average_at_start": os.getloadavg(),
        },
    })
    summary.setdefault("operators", {})
    summary.setdefault("ablations", {})
    if args.redo_ablations:
        summary["ablations"] = {}
    if args.redo_remeasure:
        summary.pop("remeasured", None)
    target = make_target("llvm", num_cores=args.runner_cores)
    summary["setup"]["target"] = str(target)
    work_root = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="harl_vs_ms_"))
    work_root.mkdir(parents=True, exist_ok=True)

    runner = LazyRunner(suite_runner_config(args, work_root / "tmp"))
    log = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)  # noqa: E731
    try:
        # 1. operators: HARL and MetaSchedule, alternating which goes first
        for i, name in enumerate(suite.operators):
            done = summary["operators"].get(name, {}).get("runs", [])
            if len(done) >= len(suite.seeds):
                log(f"{name}: in the JSON already, skipped")
                continue
            trials = suite.budget(name)
            runs = []
            for j, seed in enumerate(suite.seeds):
                log(f"{name} seed {seed}: {trials} trials each")
                pair = run_pair(name, trials, seed, runner, work_root, args.elite_starts, target, harl_first=(i + j) % 2 == 0)
                pair["seed"] = seed
                pair["ratios"] = pair_ratios(pair)
                runs.append(pair)
                log(f"{name} seed {seed}: HARL {pair[HARL]['best_ms']:.4f} ms, MS {pair[MS]['best_ms']:.4f} ms, "
                    f"ratio {pair['ratios']['latency_ratio']:.3f}")
            summary["operators"][name] = {"trials": trials, "runs": runs}
            summarise(summary)
            _save(summary, out_path)
        # 2. the tuned 1024^3 GEMM vs numpy's sgemm on the runner's thread count (and on all cores)
        if "GMM-L" in suite.operators and not args.skip_numpy:
            log("numpy sgemm 1024^3")
            summary["numpy_sgemm"] = numpy_sgemm(1024, args.runner_cores)
            summary["numpy_sgemm_all_cores"] = numpy_sgemm(1024, os.cpu_count() or 1)
            summarise(summary)
            _save(summary, out_path)
        # 3. the network end to end: HARL (bandit on and off) vs MetaSchedule's gradient task scheduler
        if not args.skip_network and "network" not in summary:
            workload = get_workload(suite.network, target)
            log(f"network {suite.network}: {len(workload.tasks)} tasks, {suite.network_trials} trials each")
            seed = suite.seeds[0]
            net: dict[str, Any] = {"name": suite.network, "tasks": workload.task_weights,
                                   "trials": suite.network_trials, "seed": seed}
            net[MS] = run_tuner(MS, workload, target, suite.network_trials, seed, runner, work_root)
            net[HARL] = run_tuner(HARL, workload, target, suite.network_trials, seed, runner, work_root,
                                  {"episode.elite_fraction": args.elite_starts})
            net["ratios"] = pair_ratios(net)
            summary["network"] = net
            _save(summary, out_path)
            log(f"network: HARL {net[HARL]['best_ms']:.4f} ms, MS {net[MS]['best_ms']:.4f} ms")
            summarise(summary)
            _save(summary, out_path)
        # 3b. ablation: subgraph bandit on vs off, as its own back-to-back pair (loads drift over a
        # long run: an arm must never be compared with a run made at another time)
        if not args.skip_network and "no_subgraph_bandit" not in summary["ablations"]:
            workload = get_workload(suite.network, target)
            seed = suite.seeds[0]
            log(f"ablation subgraph bandit on/off, {suite.network}")
            arms = {}
            for label, on in (("harl_bandit", True), ("harl_nobandit", False)):
                arms[label] = run_tuner(HARL, workload, target, suite.network_trials, seed, runner, work_root,
                                        {"episode.elite_fraction": args.elite_starts, "bandit.subgraph_bandit": on}, label=label)
            summary["ablations"]["no_subgraph_bandit"] = {
                "network": suite.network, "seed": seed, "bandit": arms["harl_bandit"], "run": arms["harl_nobandit"],
                "latency_ratio_no_bandit_over_bandit": arms["harl_nobandit"]["best_ms"] / arms["harl_bandit"]["best_ms"],
                "note": "both arms run back to back in this step (same seed, budget, runner)",
            }
            summarise(summary)
            _save(summary, out_path)
        # 4. fixed-length vs adaptive stopping on a few operators (adaptive = the HARL run above)
        fixed = summary["ablations"].setdefault("fixed_length", {})
        for name in suite.fixed_length_ops:
            if name in fixed or name not in summary["operators"]:
                continue
            entry = summary["operators"][name]
            seed = entry["runs"][0]["seed"]
            log(f"ablation fixed-length vs adaptive {name}")
            workload = get_workload(name, target)
            arms = {label: run_tuner(HARL, workload, target, entry["trials"], seed, runner, work_root,
                                     {"episode.elite_fraction": args.elite_starts, "episode.fixed_length": flag}, label=label)
                    for label, flag in (("harl_adaptive", False), ("harl_fixed", True))}
            run, adaptive = arms["harl_fixed"], arms["harl_adaptive"]
            fixed[name] = {
                "seed": seed, "run": run, "adaptive": adaptive,
                "latency_ratio_fixed_over_adaptive": run["best_ms"] / adaptive["best_ms"],
                "search_ratio_fixed_over_adaptive": run["search_s_per_trial"] / adaptive["search_s_per_trial"],
                "note": "both arms run back to back in this step (same seed, budget, runner)",
            }
            summarise(summary)
            _save(summary, out_path)
        # 5. the winners re-timed side by side (and GEMMs vs numpy), one process, same threads
        again = summary.get("remeasured", {})
        if not args.skip_remeasure and (set(summary["operators"]) - set(again.get("tasks", {}))
                                        or (summary.get("network") and "network" not in again)):
            log("re-timing each operator's two best schedules side by side (GEMMs with numpy)")
            summary["remeasured"] = remeasure_bests(summary, work_root, args.runner_cores, args.remeasure_rounds)
            summarise(summary)
            _save(summary, out_path)
    finally:
        runner.close()
    summary["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summarise(summary)
    _save(summary, out_path)
    return summary


# ---------------------------------------------------------------------- the broad suite
BROAD_JSON = RESULTS / "harl_vs_metaschedule_broad.json"
BROAD_SELECT, BROAD_REPORT = "broad-select", "broad-report"
BATCH16_FAMILIES = ("C1D", "C2D", "DEP", "NRM", "TBG")  # report half: these at batch 16 too
LONG_CASES = ("GMM-L", "C2D:2", "DEP:2", "TBG:2")  # report half: also at 256 trials
LONG_TRIALS = 256
# the model benchmark's networks (name -> load_model spec and options); the heaviest task of each
# kind goes into the report half
BROAD_NETWORKS = {"resnet50": ("resnet50", {}), "mobilenet-v2": ("hf:mobilenet-v2", {}),
                  "bert-2l": ("hf:bert-base-uncased", {"layers": 2, "seq_len": 128})}
NETWORK_TASK_KINDS = ("conv", "dense", "depthwise", "softmax", "layer_norm")
MAX_NETWORK_TASKS = 12


def broad_network_tasks(net: str, target: Any) -> list[Any]:
    """The tuning tasks of one of `BROAD_NETWORKS`, extracted for `target`."""
    from hiertune.workloads.models import load_model, model_workload

    spec, options = BROAD_NETWORKS[net]
    return model_workload(load_model(spec, **options), target).tasks


def git_describe() -> str | None:
    """The commit a measurement ran on (a resumed half may span commits)."""
    out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                         cwd=Path(__file__).parent)
    return out.stdout.strip() or None


def broad_plan(half: str) -> list[dict[str, Any]]:
    """The operator cases of one half of the broad suite (network tasks are added when run, as
    they need task extraction). Selection: shape 1 of every te_workload family, 64 trials, seeds
    0 and 1. Report: shape 2 of every family, five families at batch 16, 64 trials, seed 0; four
    shapes at 256 trials."""
    from hiertune.workloads.operators import OPERATOR_FAMILIES, UNBATCHED_FAMILIES, operator_family

    if half == BROAD_SELECT:
        return [{"key": f"{f}:1", "workload": f"{f}:1", "family": f, "kind": "operator", "trials": 64, "seeds": [0, 1]}
                for f in OPERATOR_FAMILIES]
    cases = [{"key": f"{f}:2", "workload": f"{f}:2", "family": f, "kind": "operator", "trials": 64, "seeds": [0]}
             for f in OPERATOR_FAMILIES]
    cases += [{"key": f"{f}:2:b16", "workload": f"{f}:2:b16", "family": f, "kind": "operator", "trials": 64, "seeds": [0]}
              for f in BATCH16_FAMILIES if f not in UNBATCHED_FAMILIES]
    cases += [{"key": f"{w}@{LONG_TRIALS}", "workload": w, "family": operator_family(w), "kind": "long",
               "trials": LONG_TRIALS, "seeds": [0]} for w in LONG_CASES]
    return cases


def narrow_plan(plan: list[dict[str, Any]], only: list[str] | None = None, trials: int | None = None,
                seeds: list[int] | None = None) -> list[dict[str, Any]]:
    """The plan as the command line narrows it: the `only` keys, another budget (each case under its
    own key, "DEP:1@256", so it never mixes with the stored budget's pairs), other seeds (the report
    half plans seed 0 alone; `--suite-seeds 1` runs it again on seed 1, not nothing)."""
    plan = [c for c in plan if not only or c["key"] in only]
    if trials:
        plan = [{**c, "key": f"{c['key']}@{trials}", "trials": trials} for c in plan]
    if seeds:
        plan = [{**c, "seeds": list(seeds)} for c in plan]
    return plan


def task_kind(task: Any, kernel_layout: str = "OIHW") -> str | None:
    """conv / dense / depthwise / softmax / layer_norm for a network task (None: other ops).

    Depthwise is told from conv by the weight: one input channel per group (its I dimension is 1:
    [C, 1, kh, kw] in OIHW, [kh, kw, 1, C] in HWIO, CPU models' layout since `conv2d_layout`)."""
    name = task.name.lower()
    if "softmax" in name:
        return "softmax"
    if "layer_norm" in name or "layernorm" in name:
        return "layer_norm"
    if "matmul" in name or "dense" in name:
        return "dense"
    if "conv2d" in name:
        func = task.mod["main"]
        # TVM 0.27's PrimFunc params are the buffers themselves (no buffer_map)
        buffers = [func.buffer_map[p] for p in func.params if p in func.buffer_map] if hasattr(func, "buffer_map") \
            else [p for p in func.params if hasattr(p, "shape")]
        shapes = [[int(d) for d in b.shape] for b in buffers]
        weights = [sh for sh in shapes[1:] if len(sh) == 4]
        return "depthwise" if weights and weights[0][kernel_layout.index("I")] == 1 else "conv"
    return None


def heaviest_tasks(network: str, tasks: list[Any], limit: int, kernel_layout: str = "OIHW") -> list[dict[str, Any]]:
    """The heaviest task (FLOPs x weight) of each kind in one network, as broad-suite cases."""
    best: dict[str, Any] = {}
    for task in tasks:
        kind = task_kind(task, kernel_layout)
        if kind and (kind not in best or task.flops * task.weight > best[kind].flops * best[kind].weight):
            best[kind] = task
    return [{"key": f"{network}/{best[k].name}", "workload": network, "task": best[k].name, "family": k,
             "kind": "network_task", "trials": 64, "seeds": [0]} for k in NETWORK_TASK_KINDS if k in best][:limit]


def bootstrap_ci90(values: list[float], resamples: int = 2000, seed: int = 0) -> list[float] | None:
    """The 5th and 95th percentiles of the geomean over cases resampled with replacement (a
    percentile bootstrap: how sure a geomean over this many cases is). None for no values."""
    import numpy as np

    logs = np.log([v for v in values if v is not None and v > 0 and math.isfinite(v)])
    if not len(logs):
        return None
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), size=(resamples, len(logs)))].mean(axis=1)
    return [float(math.exp(np.percentile(means, 5))), float(math.exp(np.percentile(means, 95)))]


def seconds_to_reach(curve: list[float | None], elapsed: list[float], goal: float | None) -> float | None:
    """Wall seconds from the tuner's start to the first trial at or below `goal` (None: never)."""
    reach = trials_to_reach(curve, goal)
    return elapsed[reach - 1] if reach is not None and reach <= len(elapsed) else None


def run_ratios(pair: dict[str, Any]) -> dict[str, Any]:
    """pair_ratios plus time to quality: HARL's wall seconds to MetaSchedule's final best over
    MetaSchedule's own (None when HARL never got there)."""
    out = pair_ratios(pair)
    harl, ms = pair[HARL], pair[MS]
    h = seconds_to_reach(harl["curve_ms"], harl.get("elapsed_s", []), ms["best_ms"])
    m = seconds_to_reach(ms["curve_ms"], ms.get("elapsed_s", []), ms["best_ms"])
    out["harl_s_to_ms_best"], out["ms_s_to_ms_best"] = h, m
    out["time_to_quality_ratio"] = h / m if h is not None and m and both_timed(pair) else None
    return out


def retime_broad(summary: dict[str, Any], threads: int, rounds: int, out_path: Path, half: str | None = None) -> None:
    """Both winners of every finished pair timed again side by side (bench/remeasure_best.py,
    median over `rounds` alternating rounds), saved pair by pair. A tuner's best is the minimum of
    64+ single timings taken minutes apart, so a lucky timing inflates its margin; the re-timed
    ratio compares the two schedules, not their luck."""
    log = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)  # noqa: E731
    for key, case in summary["cases"].items():
        for run in case["runs"] if half in (None, case["half"]) else []:
            if "retimed" in run:
                continue
            paths = {t: run[t].get("records") for t in (HARL, MS)}
            if not all(paths.values()) or not all(Path(p).exists() for p in paths.values()):
                continue  # records of an older work dir: nothing to re-time
            task = next(json.loads(line)["task"] for line in Path(paths[HARL]).open() if '"workload"' in line)
            try:
                again = run_remeasure({task: paths}, threads, rounds)["tasks"][task]
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                run["retimed"] = {"error": str(err)[-300:]}
            else:
                run["retimed"] = {"latency_ratio_median": again.get("latency_ratio_median"),
                                  "harl_median_ms": again.get(HARL, {}).get("median_s", math.nan) * 1e3,
                                  "ms_median_ms": again.get(MS, {}).get("median_s", math.nan) * 1e3,
                                  "rounds": rounds, "threads": threads}
            log(f"{key} seed {run['seed']}: re-timed ratio {_fmt(run['retimed'].get('latency_ratio_median'))} "
                f"(search-time ratio {_fmt(run['ratios']['latency_ratio'])})")
            summarise_broad(summary)
            _save(summary, out_path)


def case_stats(case: dict[str, Any]) -> dict[str, Any]:
    """One case over its finished seeds: geomean ratios and the spread from seed to seed."""
    runs = case["runs"]
    lat = [r["ratios"]["latency_ratio"] for r in runs]
    retimed = [r["retimed"].get("latency_ratio_median") for r in runs if "retimed" in r]
    finite = [v for v in lat if v is not None]
    # a best in ms is comparable from seed to seed only on one kind of CPU (the ratios are per pair)
    same_cpu_runs = runs if len({r.get("host_cpu") for r in runs}) == 1 else []
    ms_best = [r[MS]["best_ms"] for r in same_cpu_runs if r[MS]["best_ms"]]
    harl_best = [r[HARL]["best_ms"] for r in same_cpu_runs if r[HARL]["best_ms"]]
    return {
        "seeds_done": [r["seed"] for r in runs],
        "latency_ratio": geomean(lat),
        # over every seed or none: a case re-timed on one seed of two would read as both
        "latency_ratio_retimed": geomean(retimed) if len(retimed) == len(runs) and None not in retimed else None,
        "trials_ratio": geomean([r["ratios"]["trials_ratio"] for r in runs]),
        "reached_fraction": sum(r["ratios"]["reached"] for r in runs) / len(runs),
        "time_to_quality_ratio": geomean([r["ratios"]["time_to_quality_ratio"] for r in runs]),
        "spread": {"latency_ratio_min": min(finite, default=None), "latency_ratio_max": max(finite, default=None),
                   "ms_best_max_over_min": max(ms_best) / min(ms_best) if ms_best else None,
                   "harl_best_max_over_min": max(harl_best) / min(harl_best) if harl_best else None},
    }


def half_summary(cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The broad suite's headline numbers over the finished cases of one half."""
    done = {k: c for k, c in cases.items() if c["runs"]}
    stats = {k: case_stats(c) for k, c in done.items()}
    short = [k for k, c in done.items() if c["trials"] <= 64]
    long = [k for k, c in done.items() if c["trials"] > 64]
    out: dict[str, Any] = {}
    for suffix, keys in (("", short), ("_256", long)):
        values = [stats[k]["latency_ratio"] for k in keys]
        out[f"geomean_latency_ratio{suffix}"] = geomean(values)
        out[f"geomean_latency_ratio{suffix}_ci90"] = bootstrap_ci90(values)
        again = [stats[k]["latency_ratio_retimed"] for k in keys if stats[k]["latency_ratio_retimed"] is not None]
        out[f"geomean_latency_ratio{suffix}_retimed"] = geomean(again)  # over the re-timed cases only
        out[f"geomean_latency_ratio{suffix}_retimed_ci90"] = bootstrap_ci90(again)
        out[f"cases_retimed{suffix}"] = len(again)
    ratios = [(k, stats[k]["latency_ratio"]) for k in done if stats[k]["latency_ratio"] is not None]
    out["worst_latency_ratio"] = max(ratios, key=lambda kv: kv[1], default=None)
    again = [(k, stats[k]["latency_ratio_retimed"]) for k in done if stats[k]["latency_ratio_retimed"] is not None]
    out["worst_latency_ratio_retimed"] = max(again, key=lambda kv: kv[1], default=None)
    def by_family(stat: str) -> dict[str, float | None]:
        groups: dict[str, list[float]] = {}
        for k in short:
            if done[k]["kind"] == "operator":
                groups.setdefault(done[k]["family"], []).append(stats[k][stat])
        return {f: geomean(v) for f, v in groups.items()}

    out["family_latency_ratio"] = by_family("latency_ratio")
    out["families_lost"] = sorted(f for f, v in out["family_latency_ratio"].items() if v is not None and v > 1.0)
    out["families_lost_retimed"] = sorted(f for f, v in by_family("latency_ratio_retimed").items()
                                          if v is not None and v > 1.0)
    out["network_tasks_lost"] = sorted(k for k in short if done[k]["kind"] == "network_task"
                                       and (stats[k]["latency_ratio"] or 0) > 1.0)
    trials_ratios = [stats[k]["trials_ratio"] for k in done]
    out["geomean_trials_ratio"] = geomean(trials_ratios)
    out["geomean_trials_ratio_ci90"] = bootstrap_ci90(trials_ratios)
    runs = [r for c in done.values() for r in c["runs"]]
    out["reached_fraction"] = sum(r["ratios"]["reached"] for r in runs) / len(runs) if runs else None
    out["unreached"] = sorted({k for k, c in done.items() for r in c["runs"] if not r["ratios"]["reached"]})
    ttq = [stats[k]["time_to_quality_ratio"] for k in done]
    out["time_to_quality_ratio"] = geomean(ttq)  # over the cases where HARL reached MS's best
    out["time_to_quality_ratio_ci90"] = bootstrap_ci90(ttq)
    out["cases_done"] = sum(len(c["runs"]) >= len(c["seeds"]) for c in cases.values())
    out["cases_planned"] = len(cases)
    out["pairs_done"] = len(runs)
    out["pairs_planned"] = sum(len(c["seeds"]) for c in cases.values())
    out["case_stats"] = stats
    return out


def merge_broad(paths: list[str]) -> dict[str, Any]:
    """One broad summary from runs of one half on other seeds (a file per run): a case's pairs
    join, so its ratio is the geomean over its seeds and its spread shows. Runs of different HARL
    configurations or timings, or the same seed twice, are refused rather than mixed."""
    merged: dict[str, Any] = {"commands": [], "cases": {}, "merged_from": list(paths)}
    for path in paths:
        try:
            part = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise SystemExit(f"--merge {path}: not a broad-suite JSON ({err})") from err
        options = part.get("setup", {}).get("harl_options", {})
        merged.setdefault("setup", part.get("setup", {}))
        if options != merged["setup"].get("harl_options", {}):
            raise SystemExit(f"--merge {path}: its HARL ran with --harl-option {options or 'none'}, "
                             f"{paths[0]} with {merged['setup'].get('harl_options') or 'none'}: merge runs of one HARL")
        timing = part.get("setup", {}).get("timing", "warm")  # files older than --cache-flush ran warm
        if timing != merged["setup"].get("timing", "warm"):
            raise SystemExit(f"--merge {path}: its pairs were timed {timing}, {paths[0]}'s "
                             f"{merged['setup'].get('timing', 'warm')}: merge runs of one timing")
        merged["commands"] += part.get("commands", [])
        hosts = merged["setup"].setdefault("host_cpus", [])  # the first file's setup, every file's hosts
        hosts += [h for h in part.get("setup", {}).get("host_cpus", []) if h not in hosts]
        for key, case in part.get("cases", {}).items():
            entry = merged["cases"].setdefault(key, {**case, "runs": []})
            twice = {r["seed"] for r in entry["runs"]} & {r["seed"] for r in case["runs"]}
            if twice:
                raise SystemExit(f"--merge {path}: {key} seed {sorted(twice)} is already in an earlier file")
            entry["runs"] += case["runs"]
            entry["seeds"] = sorted(set(entry["seeds"]) | set(case["seeds"]))
    return merged


def summarise_broad(summary: dict[str, Any]) -> None:
    """Top-level keys over the report half (as the targets read them); the selection half's
    under `selection`. A partial file says how much is in it (cases_done / cases_planned)."""
    halves = {h: {k: c for k, c in summary["cases"].items() if c["half"] == h} for h in (BROAD_SELECT, BROAD_REPORT)}
    summary["selection"] = half_summary(halves[BROAD_SELECT])
    summary.update(half_summary(halves[BROAD_REPORT]))


def broad_cases(args: argparse.Namespace, target: Any, unavailable: dict[str, str]
                ) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """The half's cases as the command line narrows them, network tasks included (extracted
    only for the networks `--only` names, all of them without `--only`), with each network's
    tasks; a network this checkout cannot build goes into `unavailable` instead."""
    from hiertune.workloads.networks import conv2d_layout

    plan = broad_plan(args.suite)
    layout = conv2d_layout(target)
    kernel_layout = layout[1] if layout else "OIHW"  # None: as imported
    networks: dict[str, list[Any]] = {}
    wanted_nets = {k.split("/")[0] for k in args.only or [] if "/" in k}  # --only NET/TASK builds NET alone
    if args.suite == BROAD_REPORT and (not args.only or wanted_nets):
        for net in BROAD_NETWORKS:
            if wanted_nets and net not in wanted_nets:
                continue
            try:
                networks[net] = broad_network_tasks(net, target)
            except Exception as err:  # noqa: BLE001 - a network this checkout cannot build is reported, not fatal
                unavailable[net] = str(err).splitlines()[0][:200]
                continue
            room = MAX_NETWORK_TASKS - sum(c["kind"] == "network_task" for c in plan)
            plan += heaviest_tasks(net, networks[net], max(room, 0), kernel_layout)
    return narrow_plan(plan, args.only, args.trials_override, args.seeds_override), networks


def case_workload(case: dict[str, Any], networks: dict[str, list[Any]], target: Any) -> Any:
    """The workload a broad case tunes: an operator by name, a network task alone."""
    from hiertune.workloads import Workload, get_workload

    if case["kind"] == "network_task":
        task = next(t for t in networks[case["workload"]] if t.name == case["task"])
        return Workload(name=task.name, tasks=[task])
    return get_workload(case["workload"], target)


def run_broad(args: argparse.Namespace) -> dict[str, Any]:
    """One half of the broad suite, resumable pair by pair (a stopped run continues from the JSON)."""
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import create_runner
    from hiertune.workloads.tvm_support import host_cpu, make_target

    out_path = Path(args.out)
    summary: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    command = "python " + " ".join([sys.argv[0], *sys.argv[1:]])
    summary.setdefault("commands", []).append(command)
    summary.setdefault("cases", {})
    summary.setdefault("setup", {}).update({
        "runner_cores": args.runner_cores, "host_cores": os.cpu_count(), "elite_starts": args.elite_starts,
        "measure": "one Ray runner actor shared by both tuners; tuner order alternates per case and seed",
        "ci90": "percentile bootstrap over cases (2000 resamples) of the geomean",
    })
    harl_options = parse_space_options(args.harl_option, flag="--harl-option")
    ran = any(c["runs"] for c in summary["cases"].values())  # a file older than the flag ran none
    stored = summary["setup"].setdefault("harl_options", {} if ran else harl_options)
    if stored != harl_options:  # one file, one HARL: a resumed half must not mix two configurations
        raise SystemExit(f"{out_path} holds pairs run with --harl-option {stored or 'none'}; "
                         f"this run asks for {harl_options or 'none'}: pass the same options or another --out")
    timing = suite_runner_config(args).timing
    if summary["setup"].setdefault("timing", timing if not ran else "warm") != timing:  # older files ran warm
        raise SystemExit(f"{out_path} holds pairs timed {summary['setup']['timing']}; this run times {timing}: "
                         f"pass {'--cache-flush' if timing == 'warm' else '--no-cache-flush'} or another --out")
    if timing == "cold" and not args.skip_remeasure:
        raise SystemExit("--cache-flush: the side-by-side re-timing (bench/remeasure_best.py) times warm; "
                         "add --skip-remeasure")
    summary["setup"].setdefault("load_average_at_start", {})[args.suite] = os.getloadavg()
    target = make_target("llvm", num_cores=args.runner_cores)
    host = host_cpu()
    if host not in summary["setup"].setdefault("host_cpus", []):
        summary["setup"]["host_cpus"].append(host)  # each pair says its own ("host_cpu")
    code = git_describe()
    plan, networks = broad_cases(args, target, summary.setdefault("networks_unavailable", {}))
    plan.sort(key=lambda c: c["trials"])  # the 256-trial cases last: a stopped run holds the most cases
    for case in plan:
        entry = summary["cases"].setdefault(case["key"], {**case, "half": args.suite, "runs": []})
        entry["seeds"] = sorted(set(case["seeds"]) | {r["seed"] for r in entry["runs"]})  # what this file will hold
    work_root = Path(args.work_dir or tempfile.mkdtemp(prefix="harl_broad_"))
    runner = None
    log = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)  # noqa: E731
    try:
        for i, case in enumerate(plan):
            entry = summary["cases"][case["key"]]
            for seed in case["seeds"]:
                if seed in {r["seed"] for r in entry["runs"]}:
                    continue
                workload = case_workload(case, networks, target)
                work = work_root / case["key"].replace(":", "_").replace("/", "_").replace("@", "_")
                shutil.rmtree(work, ignore_errors=True)  # a pair cut short restarts: its times must be whole
                work.mkdir(parents=True)
                if runner is None:
                    init_ray(RayConfig())
                    runner = create_runner(suite_runner_config(args, work_root / "tmp"))
                log(f"{case['key']} seed {seed}: {case['trials']} trials each")
                pair = run_pair(workload, case["trials"], seed, runner, work, args.elite_starts, target,
                                harl_first=(i + seed) % 2 == 0, harl_options=harl_options)
                pair["seed"] = seed
                pair["code"] = code  # the commit the pair ran on (a resumed half may span commits)
                pair["host_cpu"] = host  # ... and hosts
                pair["ratios"] = run_ratios(pair)
                entry["runs"].append(pair)
                log(f"{case['key']} seed {seed}: HARL {_fmt(pair[HARL]['best_ms'], '.4f')} ms, "
                    f"MS {_fmt(pair[MS]['best_ms'], '.4f')} ms, ratio {_fmt(pair['ratios']['latency_ratio'])}")
                summarise_broad(summary)
                _save(summary, out_path)
                plot_broad(summary, out_path.with_suffix(".png"))
    finally:
        if runner is not None:
            runner.close()
    if not args.skip_remeasure:
        retime_broad(summary, args.runner_cores, args.remeasure_rounds, out_path, half=args.suite)
    summarise_broad(summary)
    _save(summary, out_path)
    return summary


def parse_space_options(items: list[str], flag: str = "--space-option") -> dict[str, Any]:
    """`--space-option largest_prime_moves=1` -> {"space.largest_prime_moves": True}; a dotted name
    (`episode.start_pool=64`) sets that HarlConfig section's field. Typed by the field."""
    from dataclasses import fields

    from hiertune.platform.harl_search import HarlConfig

    sections = {f.name: {g.name: g.type for g in fields(f.default_factory())}
                for f in fields(HarlConfig) if callable(getattr(f, "default_factory", None))}
    out: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        section, _, field_name = name.rpartition(".")
        section = section or "space"
        types = sections.get(section, {})
        if field_name not in types:
            raise SystemExit(f"{flag} {item!r}: HarlConfig.{section} has {', '.join(types) or 'no such section'}")
        kind = types[field_name] if isinstance(types[field_name], str) else types[field_name].__name__
        optional = kind.endswith(" | None")  # `elite_fraction_late: float | None`: "none" switches it off
        kind = kind.removesuffix(" | None")
        out[f"{section}.{field_name}"] = (None if optional and value.lower() in ("none", "null") else
                                          value.lower() in ("1", "true", "yes") if kind == "bool" else
                                          int(value) if kind == "int" else float(value) if kind == "float" else value)
    return out


def run_ab(args: argparse.Namespace) -> dict[str, Any]:
    """A schedule-space option (HarlConfig's `space` section) against the defaults on broad-suite
    cases: two HARL arms back to back per case and seed (same runner, order alternating), ratios
    option / defaults, and each arm against the MetaSchedule best of the same case and seed in
    the broad JSON."""
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import create_runner
    from hiertune.workloads.tvm_support import host_cpu, make_target

    options = parse_space_options(args.space_option)
    shared = parse_space_options(args.harl_option, flag="--harl-option")  # both arms (HARL as `tune` ships it, say)
    tag = ",".join(f"{k}={v}" for k, v in options.items())
    out_path = Path(args.out)
    summary: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    summary.setdefault("commands", []).append("python " + " ".join([sys.argv[0], *sys.argv[1:]]))
    arms = summary.setdefault("ab", {}).setdefault(tag, {})
    broad = json.loads(Path(args.baseline).read_text()).get("cases", {}) if Path(args.baseline).exists() else {}
    target = make_target("llvm", num_cores=args.runner_cores)
    host = host_cpu()
    plan, networks = broad_cases(args, target, {})  # another budget: no stored MS best
    work_root = Path(args.work_dir or tempfile.mkdtemp(prefix="harl_ab_"))
    runner = None
    try:
        for i, case in enumerate(plan):
            for seed in case["seeds"] if args.seeds_override else case["seeds"][:1]:
                key = f"{case['key']}@{seed}"
                if key in arms:
                    continue
                if runner is None:
                    init_ray(RayConfig())
                    runner = create_runner(suite_runner_config(args, work_root / "tmp"))
                workload = case_workload(case, networks, target)
                work = work_root / key.replace(":", "_").replace("/", "_").replace("@", "_")
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir(parents=True)
                # `{family}` in a value names the case's family (a prior built without it, say)
                option, both = ({k: v.replace("{family}", case["family"]) if isinstance(v, str) else v for k, v in opts.items()}
                                for opts in (options, shared))
                order = [("defaults", {}), ("option", option)]
                if (i + seed) % 2:
                    order.reverse()
                runs = {label: run_tuner(HARL, workload, target, case["trials"], seed, runner, work,
                                         {"episode.elite_fraction": args.elite_starts, **both, **opts},
                                         label=f"harl_{label}")
                        for label, opts in order}
                ms = baseline_ms(broad, case["key"], seed, host)
                arms[key] = {"order": [label for label, _ in order], **runs, "code": git_describe(), "host_cpu": host,
                             "both_arms": both,
                             "option_over_defaults": runs["option"]["best_ms"] / runs["defaults"]["best_ms"],
                             "over_ms": {label: runs[label]["best_ms"] / ms if ms else None for label in runs}}
                print(f"[{time.strftime('%H:%M:%S')}] {tag} {key}: defaults {runs['defaults']['best_ms']:.4f} ms, "
                      f"option {runs['option']['best_ms']:.4f} ms, ratio {arms[key]['option_over_defaults']:.3f}", flush=True)
                ratios = [a["option_over_defaults"] for a in arms.values()]
                summary.setdefault("geomean_option_over_defaults", {})[tag] = geomean(ratios)
                summary.setdefault("geomean_option_over_defaults_ci90", {})[tag] = bootstrap_ci90(ratios)
                summary.setdefault("geomean_option_over_defaults_by_trial", {})[tag] = ab_ratios_by_trial(arms)
                _save(summary, out_path)
                plot_ab(summary, out_path.with_suffix(".png"))
    finally:
        if runner is not None:
            runner.close()
    return summary


def ab_ratios_by_trial(arms: dict[str, Any], checkpoints: tuple[int, ...] = (16, 32, 64, 128, 256)) -> dict[str, Any]:
    """Option / defaults best-so-far latency at earlier trials of the same runs: one long A/B
    also answers for the shorter budgets (geomean and bootstrap 90% interval over the pairs that
    reached the trial with a measured schedule in both arms)."""
    out: dict[str, Any] = {}
    for trial in checkpoints:
        ratios = []
        for arm in arms.values():
            option, defaults = arm["option"]["curve_ms"], arm["defaults"]["curve_ms"]
            if min(len(option), len(defaults)) >= trial and option[trial - 1] and defaults[trial - 1]:
                ratios.append(option[trial - 1] / defaults[trial - 1])
        if ratios:
            out[str(trial)] = {"geomean": geomean(ratios), "ci90": bootstrap_ci90(ratios), "pairs": len(ratios)}
    return out


def plot_ab(summary: dict[str, Any], path: Path) -> None:
    """One panel per A/B option: option / defaults best latency per case and seed (below 1: the
    option found faster schedules), the geomean and its bootstrap 90% interval as a band."""
    from matplotlib.ticker import FormatStrFormatter

    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    tags = [tag for tag, arms in summary.get("ab", {}).items() if arms]
    if not tags:
        return
    fig, axes = plt.subplots(len(tags), 1, figsize=(12, 3.6 * len(tags)), squeeze=False)
    for ax, tag in zip(axes[:, 0], tags):
        arms = summary["ab"][tag]
        keys = list(arms)
        ratios = [arms[k]["option_over_defaults"] for k in keys]
        # bars grow from 1.0 on a log axis: a 0.8 and a 1.25 are the same size of effect
        ax.bar(range(len(keys)), [r - 1.0 for r in ratios], bottom=1.0,
               color=["tab:green" if r <= 1.0 else "tab:red" for r in ratios])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
        _ratio_axes(ax, keys, geomean(ratios), bootstrap_ci90(ratios), "option / defaults latency", tag)
    fig.suptitle("HARL option against HARL defaults, back to back (case@seed)")
    save_figure(fig, path, dpi=110)


def baseline_ms(broad_cases: dict[str, Any], key: str, seed: int, host: str) -> float | None:
    """MetaSchedule's best for an A/B case from the broad JSON, or None when it was measured on
    another CPU (or one not recorded): absolute latencies do not carry across hosts."""
    run = next((r for r in broad_cases.get(key, {}).get("runs", []) if r["seed"] == seed), None)
    if run is None:
        return None
    if run.get("host_cpu") != host:
        print(f"{key}@{seed}: the baseline's MetaSchedule best was measured on "
              f"{run.get('host_cpu') or 'an unrecorded CPU'}, this host is {host}: over_ms left empty", flush=True)
        return None
    return run[MS]["best_ms"]


def broad_table(summary: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="HARL / MetaSchedule, broad suite (latency ratio < 1: HARL faster)")
    for col in ("half", "case", "seeds", "latency ratio", "re-timed", "min..max over seeds", "MS best max/min",
                "trials ratio", "reached", "time-to-quality"):
        table.add_column(col, justify="right")
    report = {k: c for k, c in summary["cases"].items() if c["half"] == BROAD_REPORT}
    for half, cases in ((BROAD_SELECT, summary["selection"]["case_stats"]), (BROAD_REPORT, half_summary(report)["case_stats"])):
        for key, st in cases.items():
            sp = st["spread"]
            table.add_row(half, key, ",".join(map(str, st["seeds_done"])), _fmt(st["latency_ratio"]),
                          _fmt(st.get("latency_ratio_retimed")), f"{_fmt(sp['latency_ratio_min'])}..{_fmt(sp['latency_ratio_max'])}",
                          _fmt(sp["ms_best_max_over_min"], ".2f"), _fmt(st["trials_ratio"], ".2f"),
                          _fmt(st["reached_fraction"], ".2f"), _fmt(st["time_to_quality_ratio"], ".2f"))
    return table


def broad_markdown(summary: dict[str, Any]) -> str:
    """bench/README.md's broad-suite table: one row per finished case, then each half's headline."""
    lines = ["| half | case | seeds | latency H/MS (min..max) | re-timed | MS best max/min over seeds | trials ratio | reached | time to quality |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    report = half_summary({k: c for k, c in summary["cases"].items() if c["half"] == BROAD_REPORT})
    heads = []
    for half, s in ((BROAD_SELECT, summary["selection"]), (BROAD_REPORT, report)):
        for key, st in s["case_stats"].items():
            sp = st["spread"]
            lines.append(f"| {half} | {key} | {','.join(map(str, st['seeds_done']))} | {_fmt(st['latency_ratio'])} "
                         f"({_fmt(sp['latency_ratio_min'])}..{_fmt(sp['latency_ratio_max'])}) | "
                         f"{_fmt(st.get('latency_ratio_retimed'))} | {_fmt(sp['ms_best_max_over_min'], '.2f')} | {_fmt(st['trials_ratio'], '.2f')} | "
                         f"{_fmt(st['reached_fraction'], '.2f')} | {_fmt(st['time_to_quality_ratio'], '.2f')} |")
        if s["case_stats"]:
            ci = s.get("geomean_latency_ratio_ci90") or [None, None]
            heads.append(f"- {half}: {s['pairs_done']}/{s['pairs_planned']} pairs, {s['cases_done']}/{s['cases_planned']} "
                         f"cases done; geomean latency H/MS **{_fmt(s['geomean_latency_ratio'])}** (90% CI "
                         f"{_fmt(ci[0])}-{_fmt(ci[1])}), re-timed side by side **{_fmt(s.get('geomean_latency_ratio_retimed'))}** "
                         f"over {s.get('cases_retimed', 0)} cases, worst {s['worst_latency_ratio'][0]} {_fmt(s['worst_latency_ratio'][1])}, "
                         f"families lost {', '.join(s['families_lost']) or 'none'}, trials ratio "
                         f"{_fmt(s['geomean_trials_ratio'], '.2f')}, reached {_fmt(s['reached_fraction'], '.2f')}, "
                         f"time to quality {_fmt(s['time_to_quality_ratio'], '.2f')}")
    return "\n".join(lines + [""] + heads + ["", "Made by " + ", then ".join(f"`{c}`" for c in summary.get("commands", [])) + "."])


def case_label(key: str, width: int = 28) -> str:
    """A case key short enough for a tick label: a network task's long fused name is cut, its
    `@seed` / `@trials` suffix kept."""
    head, at, tail = key.partition("@")
    return (head if len(head) <= width else head[: width - 1] + "…") + at + tail


def _ratio_axes(ax: Any, keys: list[str], g: float | None, ci: list[float] | None, ylabel: str, title: str) -> None:
    """The frame of a per-case ratio panel: the line at 1.0, the geomean and its 90% interval as a
    band, the case names under the bars."""
    ax.axhline(1.0, color="black", linewidth=0.8)
    if g:
        ax.axhline(g, color="tab:blue", linestyle="--", label=f"geomean {g:.3f}"
                   + (f" (90% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))
        if ci:
            ax.axhspan(ci[0], ci[1], color="tab:blue", alpha=0.12)
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([case_label(key) for key in keys], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def plot_broad(summary: dict[str, Any], path: Path) -> None:
    """Per case: HARL/MetaSchedule latency ratio (geomean over seeds, bars from min to max over
    seeds), one panel per half, the geomean and its 90% interval as a band."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    halves = [(BROAD_SELECT, summary["selection"]),
              (BROAD_REPORT, half_summary({k: c for k, c in summary["cases"].items() if c["half"] == BROAD_REPORT}))]
    halves = [(h, s) for h, s in halves if s["case_stats"]]
    if not halves:
        return
    fig, axes = plt.subplots(len(halves), 1, figsize=(12, 3.6 * len(halves)), squeeze=False)
    for ax, (half, s) in zip(axes[:, 0], halves):
        stats = s["case_stats"]
        keys = list(stats)
        mid = [stats[k]["latency_ratio"] or float("nan") for k in keys]
        lo = [m - (stats[k]["spread"]["latency_ratio_min"] or m) for k, m in zip(keys, mid)]
        hi = [(stats[k]["spread"]["latency_ratio_max"] or m) - m for k, m in zip(keys, mid)]
        colours = ["tab:green" if m <= 1.0 else "tab:red" for m in mid]
        ax.bar(range(len(keys)), mid, color=colours, yerr=[lo, hi], capsize=3)
        _ratio_axes(ax, keys, s.get("geomean_latency_ratio"), s.get("geomean_latency_ratio_ci90"),
                    "HARL / MS best latency", f"{half}: {s['pairs_done']}/{s['pairs_planned']} pairs done")
    options = summary.get("setup", {}).get("harl_options")
    fig.suptitle("HARL vs MetaSchedule at equal measured trials, broad suite"
                 + (f" (HARL with {', '.join(f'{k}={v}' for k, v in options.items())})" if options else ""))
    save_figure(fig, path, dpi=110)


# ---------------------------------------------------------------------- tables and plots
def _per_seed_note(gemm: dict[str, Any]) -> str:
    """'; median of seeds: HARL 0.60 / 0.91 / 0.85, MetaSchedule ...' when every seed was re-timed."""
    seeds = gemm.get("per_seed_vs_numpy")
    if not seeds or len(seeds.get(HARL, [])) < 2:
        return ""
    return "; median of seeds: " + ", ".join(
        f"{label} {' / '.join(f'{v:.2f}' for v in seeds[t])}" for t, label in ((HARL, "HARL"), (MS, "MetaSchedule")))


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def suite_table(summary: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"HARL / MetaSchedule at equal measured trials ({summary.get('suite')})")
    for col in ("workload", "seed", "trials", "HARL ms", "MS ms", "latency ratio", "re-timed ratio", "trials to MS best",
                "trials ratio", "search s/trial H / MS", "overhead ratio"):
        table.add_column(col, justify="right")
    again = summary.get("remeasured", {}).get("tasks", {})
    for name, entry in summary["operators"].items():
        for k, run in enumerate(entry["runs"]):
            r = run["ratios"]
            reach = str(r["harl_trials_to_reach_ms_best"]) + ("" if r["reached"] else " (never)")
            retimed = again.get(name, {}).get("latency_ratio_median") if k == 0 else None
            table.add_row(name, str(run["seed"]), str(entry["trials"]), _fmt(run[HARL]["best_ms"], ".4f"),
                          _fmt(run[MS]["best_ms"], ".4f"), _fmt(r["latency_ratio"]), _fmt(retimed), reach,
                          _fmt(r["trials_ratio"]), f"{run[HARL]['search_s_per_trial']:.2f} / {run[MS]['search_s_per_trial']:.2f}",
                          _fmt(r["search_overhead_ratio"]))
    table.add_row("geomean", "", "", "", "", _fmt(summary.get("geomean_latency_ratio")),
                  _fmt(summary.get("geomean_latency_ratio_remeasured")), "",
                  _fmt(summary.get("geomean_trials_ratio")), "", _fmt(summary.get("search_overhead_ratio")),
                  style="bold")
    net = summary.get("network")
    if net:
        r = net["ratios"]
        reach = str(r["harl_trials_to_reach_ms_best"]) + ("" if r["reached"] else " (never)")
        table.add_row(f"{net['name']} (net)", str(net["seed"]), str(net["trials"]), _fmt(net[HARL]["best_ms"], ".4f"),
                      _fmt(net[MS]["best_ms"], ".4f"), _fmt(r["latency_ratio"]), _fmt(summary.get("network_latency_ratio_end_to_end")),
                      reach, _fmt(r["trials_ratio"]),
                      f"{net[HARL]['search_s_per_trial']:.2f} / {net[MS]['search_s_per_trial']:.2f}",
                      _fmt(r["search_overhead_ratio"]))
    return table


def extras_table(summary: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="GEMM-L vs numpy, ablations")
    table.add_column("what")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    gemm = summary.get("gemm_l")
    if gemm:
        blas = gemm.get("blas") or summary.get("numpy_sgemm", {}).get("blas", [])
        kernel = ", ".join(f"{b.get('internal_api')} {b.get('version')} {b.get('architecture')}" for b in blas
                           if b.get("internal_api") != "openmp")
        table.add_row("GEMM-L HARL GFLOPS / numpy sgemm", _fmt(summary["gemm_l_vs_numpy"]),
                      f"{gemm['tuned_gflops'][HARL]:.1f} vs {gemm['numpy_gflops']:.1f} GFLOPS, {gemm['threads']} thread(s), {kernel}")
        table.add_row("GEMM-L MetaSchedule GFLOPS / numpy", _fmt(summary["gemm_l_vs_numpy_metaschedule"]),
                      f"{gemm['tuned_gflops'][MS]:.1f} GFLOPS" + _per_seed_note(gemm))
    if summary.get("ablation_fixed_over_adaptive_latency") is not None:
        ops = ", ".join(f"{k} {v['latency_ratio_fixed_over_adaptive']:.3f}" for k, v in summary["ablations"]["fixed_length"].items())
        table.add_row("fixed-length / adaptive stopping, latency", _fmt(summary["ablation_fixed_over_adaptive_latency"]), ops)
        table.add_row("fixed-length / adaptive, search s per trial", _fmt(summary["ablation_fixed_over_adaptive_search_s"]), "")
    if summary.get("ablation_no_bandit_over_bandit_latency") is not None:
        table.add_row("no subgraph bandit / bandit, network latency", _fmt(summary["ablation_no_bandit_over_bandit_latency"]),
                      summary["ablations"]["no_subgraph_bandit"]["network"])
    return table


def markdown_table(summary: dict[str, Any]) -> str:
    """The README's results table (markdown) from the suite JSON."""
    again = summary.get("remeasured", {}).get("tasks", {})
    lines = ["| workload | trials | HARL best (ms) | MetaSchedule best (ms) | latency H/MS | re-timed H/MS | trials to MS best (H/MS) | search s/trial H/MS |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    entries = [(name, entry["trials"], run) for name, entry in summary["operators"].items() for run in entry["runs"]]
    if summary.get("network"):
        entries.append((f"{summary['network']['name']} (network)", summary["network"]["trials"], summary["network"]))
    for name, trials, run in entries:
        r = run["ratios"]
        reach = f"{r['harl_trials_to_reach_ms_best']}{'' if r['reached'] else ' (never)'} ({_fmt(r['trials_ratio'], '.2f')})"
        retimed = again.get(name, {}).get("latency_ratio_median") if run is summary["operators"].get(name, {}).get("runs", [None])[0] else None
        if name.endswith("(network)"):
            retimed = summary.get("network_latency_ratio_end_to_end")
        lines.append(f"| {name} | {trials} | {_fmt(run[HARL]['best_ms'], '.4f')} | {_fmt(run[MS]['best_ms'], '.4f')} | "
                     f"{_fmt(r['latency_ratio'])} | {_fmt(retimed)} | {reach} | {_fmt(r['search_overhead_ratio'], '.2f')} |")
    lines.append(f"| **geomean (operators)** | | | | **{_fmt(summary.get('geomean_latency_ratio'))}** | "
                 f"**{_fmt(summary.get('geomean_latency_ratio_remeasured'))}** | "
                 f"**{_fmt(summary.get('geomean_trials_ratio'), '.2f')}** | **{_fmt(summary.get('search_overhead_ratio'), '.2f')}** |")
    extra = []
    if summary.get("gemm_l"):
        g = summary["gemm_l"]
        extra.append(f"- GEMM-L (1024^3) tuned by HARL: {g['tuned_gflops'][HARL]:.1f} GFLOPS vs numpy sgemm "
                     f"{g['numpy_gflops']:.1f} GFLOPS on {g['threads']} thread(s): **{summary['gemm_l_vs_numpy']:.2f}** "
                     f"(MetaSchedule {summary['gemm_l_vs_numpy_metaschedule']:.2f})"
                     + _per_seed_note(g))
    if summary.get("ablation_fixed_over_adaptive_latency") is not None:
        extra.append(f"- Ablation, fixed-length / adaptive stopping (final latency, geomean over "
                     f"{', '.join(summary['ablations']['fixed_length'])}): **{summary['ablation_fixed_over_adaptive_latency']:.3f}**")
    if summary.get("ablation_no_bandit_over_bandit_latency") is not None:
        extra.append(f"- Ablation, no subgraph bandit (round-robin) / SW-UCB subgraph bandit (network latency): "
                     f"**{summary['ablation_no_bandit_over_bandit_latency']:.3f}**")
    made = f"Made by `{summary.get('command')}`" + "".join(f", then `{c}`" for c in summary.get("resumed_with", [])) + "."
    return "\n".join(lines + [""] + extra + ["", made])


def plot_suite(summary: dict[str, Any], path: Path) -> None:
    """One panel of tuning curves per workload (operators, then the network and its ablation)."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    panels = [(name, run) for name, entry in summary["operators"].items() for run in entry["runs"][:1]]
    if summary.get("network"):
        panels.append((f"{summary['network']['name']} (network)", summary["network"]))
    if not panels:
        return
    cols = 4
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    fixed = summary["ablations"].get("fixed_length", {})
    bandit = summary["ablations"].get("no_subgraph_bandit")
    for ax, (name, run) in zip(axes.flat, panels):
        curves = {"HARL": run[HARL]["curve_ms"], "MetaSchedule": run[MS]["curve_ms"]}
        if name in fixed:
            curves["HARL fixed-length (ablation)"] = fixed[name]["run"]["curve_ms"]
            if "adaptive" in fixed[name]:
                curves["HARL adaptive (ablation)"] = fixed[name]["adaptive"]["curve_ms"]
        if name.endswith("(network)") and bandit:
            curves["HARL no subgraph bandit (ablation)"] = bandit["run"]["curve_ms"]
            if "bandit" in bandit:
                curves["HARL bandit (ablation)"] = bandit["bandit"]["curve_ms"]
        for label, curve in curves.items():
            xs = [i for i, c in enumerate(curve, 1) if c is not None]
            ax.step(xs, [curve[i - 1] for i in xs], where="post", label=label,
                    linestyle="--" if label == "MetaSchedule" else "-")
        ratio = run.get("ratios", {}).get("latency_ratio")
        ax.set_title(f"{name}" + (f"  (H/MS {ratio:.2f})" if ratio else ""), fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("measured trials", fontsize=8)
        ax.set_ylabel("best latency (ms, log)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"HARL vs MetaSchedule at equal measured trials ({summary.get('suite')} suite)")
    save_figure(fig, path, dpi=110)


# ---------------------------------------------------------------------- single workload (the original CLI)
def run_single(args: argparse.Namespace) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    from rich.console import Console
    from rich.table import Table

    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import create_runner

    init_ray(RayConfig())
    runner = create_runner(suite_runner_config(args))
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="harl_vs_ms_") as tmp:
            for seed in args.seeds:
                runs.append({"seed": seed, **run_pair(args.workload, args.trials, seed, runner, Path(tmp), args.elite_starts)})
    finally:
        runner.close()

    table = Table(title=f"HARL vs MetaSchedule, {args.workload}, {args.trials} trials")
    for col in ("seed", "tuner", "best (ms)", "first 8 (ms)", "search s/trial", "measure s", "wall s"):
        table.add_column(col, justify="right")
    for run in runs:
        for tuner in (HARL, MS):
            r = run[tuner]
            table.add_row(str(run["seed"]), tuner, _fmt(r["best_ms"], ".4f"), _fmt(r["first_batch_best_ms"], ".4f"),
                          f"{r['search_s_per_trial']:.3f}", f"{r['measure_s']:.1f}", f"{r['wall_s']:.1f}")
    mean = lambda tuner, key: sum(run[tuner][key] for run in runs) / len(runs)  # noqa: E731
    ratios = {
        "best_latency_harl_over_ms": mean(HARL, "best_ms") / mean(MS, "best_ms"),
        "search_s_per_trial_harl_over_ms": mean(HARL, "search_s_per_trial") / mean(MS, "search_s_per_trial"),
    }
    console = Console()
    console.print(table)
    console.print(ratios)

    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"harl_vs_ms_{args.workload.replace(':', '_')}"
    summary = {"workload": args.workload, "trials": args.trials, "elite_starts": args.elite_starts, "runs": runs, "ratios": ratios}
    (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=1))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        for tuner, style in ((HARL, "-"), (MS, "--")):
            curve = run[tuner]["curve_ms"]
            ax.step(range(1, len(curve) + 1), curve, style, where="post", label=f"{tuner} seed {run['seed']}")
    ax.set_xlabel("measured trials")
    ax.set_ylabel("best latency (ms)")
    ax.set_title(f"{args.workload}: HARL vs MetaSchedule")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, RESULTS / f"{stem}.png", dpi=120)
    console.print(f"-> {RESULTS / stem}.json / .png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="GMM-S")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--elite-starts", type=float, default=0.5, help="HARL's share of tracks starting from measured bests")
    parser.add_argument("--runner-cores", type=int, default=1, help="cores the runner actor holds (TVM_NUM_THREADS)")
    parser.add_argument("--suite", choices=sorted(SUITES) + [BROAD_SELECT, BROAD_REPORT],
                        help="run a whole suite instead of one workload (broad-*: the two halves of the broad suite)")
    parser.add_argument("--suite-trials", dest="trials_override", type=int, help="suite: override the per-operator budget")
    parser.add_argument("--suite-seeds", dest="seeds_override", type=int, nargs="+", help="suite: override the seeds")
    parser.add_argument("--only", nargs="+", help="suite: only these operators")
    parser.add_argument("--skip-network", action="store_true", help="suite: no network case (nor its bandit ablation)")
    parser.add_argument("--skip-numpy", action="store_true", help="suite: no numpy sgemm comparison")
    parser.add_argument("--skip-remeasure", action="store_true", help="suite: don't re-time the winners side by side")
    parser.add_argument("--remeasure-rounds", type=int, default=31, help="suite: rounds of the side-by-side re-timing")
    parser.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=False,
                        help="broad suite's pairs: time candidates cold, as `hiertune tune` times a model's tasks on CPU "
                             "(default: warm, as the suite's history; one --out, one timing)")
    parser.add_argument("--resume", action="store_true", help="suite: keep the pieces already in --out, run the rest")
    parser.add_argument("--out", default=str(SUITE_JSON), help="suite: the JSON to write (PNG beside it)")
    parser.add_argument("--work-dir", default=None, help="suite: records and temp files (default: a fresh temp dir)")
    parser.add_argument("--redo-ablations", action="store_true", help="suite: drop the ablations in --out and run them again")
    parser.add_argument("--redo-remeasure", action="store_true",
                        help="suite: drop the side-by-side re-timing in --out and run it again")
    parser.add_argument("--space-option", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="broad suite: A/B of HarlConfig options (a SpaceConfig field, or section.field) "
                             "against the defaults, HARL only (MetaSchedule's best from --baseline)")
    parser.add_argument("--harl-option", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="broad suite: HARL's HarlConfig overrides against MetaSchedule (e.g. "
                             "cost_model.prior=builtin, HARL as `hiertune tune` runs it); default: none, search only")
    parser.add_argument("--baseline", default=str(BROAD_JSON), help="broad A/B: the broad JSON with the MS bests")
    parser.add_argument("--replot", action="store_true", help="suite: redraw table and PNG from --out, run nothing "
                        "(an A/B JSON: also recompute its by-trial ratios)")
    parser.add_argument("--retime-only", action="store_true",
                        help="broad suite: re-time the finished pairs' winners side by side, run no new pair")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="broad suite: write --out from these runs of one half on different seeds, run nothing")
    parser.add_argument("--markdown", action="store_true", help="suite: also print the README's markdown table")
    args = parser.parse_args()
    check_cache_flush(args)
    if not args.suite:
        run_single(args)
        return
    from rich.console import Console

    replot_ab = args.replot and Path(args.out).exists() and "ab" in json.loads(Path(args.out).read_text())
    if args.suite in (BROAD_SELECT, BROAD_REPORT) and (args.space_option or replot_ab):
        if args.out == str(SUITE_JSON):
            args.out = str(BROAD_JSON.with_name(BROAD_JSON.stem + "_ab.json"))
        if args.replot:  # a run draws its PNG after every pair; the by-trial ratios derive from stored curves
            summary = json.loads(Path(args.out).read_text())
            summary["geomean_option_over_defaults_by_trial"] = {
                tag: ab_ratios_by_trial(arms) for tag, arms in summary["ab"].items() if arms}
            _save(summary, Path(args.out))
            plot_ab(summary, Path(args.out).with_suffix(".png"))
        else:
            summary = run_ab(args)
        Console().print(summary.get("geomean_option_over_defaults"), summary.get("geomean_option_over_defaults_ci90"),
                        summary.get("geomean_option_over_defaults_by_trial"))
        return
    if args.suite in (BROAD_SELECT, BROAD_REPORT):
        if args.out == str(SUITE_JSON):
            args.out = str(BROAD_JSON)
        if args.retime_only:
            summary = json.loads(Path(args.out).read_text())
            summary.setdefault("commands", []).append("python " + " ".join([sys.argv[0], *sys.argv[1:]]))
            retime_broad(summary, args.runner_cores, args.remeasure_rounds, Path(args.out), half=args.suite)
        else:
            summary = merge_broad(args.merge) if args.merge else \
                json.loads(Path(args.out).read_text()) if args.replot else run_broad(args)
        summarise_broad(summary)
        _save(summary, Path(args.out))
        plot_broad(summary, Path(args.out).with_suffix(".png"))
        Console(width=max(Console().width, 160)).print(broad_table(summary))
        if args.markdown:
            print(broad_markdown(summary))
        return

    summary = json.loads(Path(args.out).read_text()) if args.replot else run_suite(args)
    if args.replot:
        summarise(summary)
        _save(summary, Path(args.out))
    png = Path(args.out).with_suffix(".png")
    plot_suite(summary, png)
    console = Console(width=max(Console().width, 160))
    console.print(suite_table(summary))
    console.print(extras_table(summary))
    if args.markdown:
        print(markdown_table(summary))
    console.print(f"-> {args.out} / {png}")


if __name__ == "__main__":
    main()
