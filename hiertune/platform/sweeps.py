"""Ray Tune sweeps of HARL's and Inc-ILP's knobs: one short tuning session per Tune trial.

Why Tune and not a loop: trials spread over the cluster's nodes, ASHA stops weak HARL sessions
early from their per-round reports, and Optuna picks the next point from the finished ones.

Metrics (both minimised):
* harl: the session's final best weighted latency in ms (one report per HARL round, so ASHA
  can cut a session after a few rounds);
* incilp: the window solve's seconds when it reaches the exact optimum (computed once up front),
  else `INCILP_PENALTY_S` + seconds, so a fast but sub-optimal gamma never wins.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError

KINDS = ("harl", "incilp")
SEARCHES = ("grid", "random", "optuna")
INCILP_PENALTY_S = 1000.0
HARL_FAILED_MS = 1e9  # a session that measured nothing valid

# parameter name -> (type, HarlConfig field as section.field / meaning)
HARL_PARAMS: dict[str, tuple[type, str]] = {
    "c": (float, "bandit.c"), "tau": (int, "bandit.tau"), "lambda": (int, "episode.lam"),
    "rho": (float, "episode.rho"), "tracks": (int, "episode.tracks"), "topk": (int, "candidates.topk"),
    "max_steps": (int, "episode.max_steps"),
}
INCILP_PARAMS: dict[str, tuple[type, str]] = {"gamma": (float, "gamma")}
PARAMS = {"harl": HARL_PARAMS, "incilp": INCILP_PARAMS}
METRIC = {"harl": "best_ms", "incilp": "score_s"}


@dataclass
class ParamSpec:
    """One swept parameter: explicit values, or a [low, high] range (random/optuna only)."""

    name: str
    values: list[float | int] | None = None
    low: float | None = None
    high: float | None = None
    kind: type = float

    def domain(self, search: str) -> Any:
        from ray import tune

        if self.values is not None:
            return tune.grid_search(self.values) if search == "grid" else tune.choice(self.values)
        if search == "grid":
            raise HiertuneError(
                f"--param {self.name}={self.low}:{self.high} is a range; grid search needs values "
                f"(e.g. {self.name}=a,b,c) or use --search random|optuna"
            )
        if self.kind is int:
            return tune.randint(int(self.low), int(self.high) + 1)
        return tune.uniform(self.low, self.high)


def parse_param(kind: str, text: str) -> ParamSpec:
    """`c=0.1,0.25` (values) or `c=0.1:0.5` (a range), checked against the kind's parameters."""
    known = PARAMS[kind]
    if "=" not in text:
        raise HiertuneError(f"--param {text!r}: write NAME=v1,v2,... or NAME=low:high (e.g. c=0.1,0.25)")
    name, _, body = text.partition("=")
    name = name.strip().lower().replace("-", "_")
    if name == "lam":
        name = "lambda"
    if name not in known:
        other = next((k for k in KINDS if k != kind and name in PARAMS[k]), None)
        where = f" ({name} is an {other} parameter)" if other else ""
        raise HiertuneError(f"--param {name!r} is not a {kind} parameter{where}; {kind} sweeps {', '.join(known)}")
    typ = known[name][0]

    def number(token: str) -> float | int:
        token = token.strip()
        if kind == "incilp" and token.lower() in ("inf", "exact"):
            return math.inf
        try:
            value = float(token)
        except ValueError:
            raise HiertuneError(f"--param {name}: {token!r} is not a number") from None
        if typ is int:
            if value != int(value):
                raise HiertuneError(f"--param {name}: {token!r} must be a whole number")
            return int(value)
        return value

    if ":" in body:
        parts = body.split(":")
        if len(parts) != 2:
            raise HiertuneError(f"--param {name}={body!r}: a range is low:high")
        low, high = number(parts[0]), number(parts[1])
        if not low < high:
            raise HiertuneError(f"--param {name}={body!r}: low must be below high")
        spec = ParamSpec(name, low=low, high=high, kind=typ)
        check_values(kind, name, [low, high])
        return spec
    values = [number(t) for t in body.split(",") if t.strip()]
    if not values:
        raise HiertuneError(f"--param {name}= has no values; e.g. {name}=1,2")
    check_values(kind, name, values)
    return ParamSpec(name, values=values, kind=typ)


def harl_config(base: Any, params: dict[str, Any]) -> Any:
    """`base` (a HarlConfig) with the swept parameters set; fewer tracks lower the minimum with them."""
    from hiertune.configs import with_overrides

    config = with_overrides(base, {HARL_PARAMS[k][1]: v for k, v in params.items() if k in HARL_PARAMS})
    if config.episode.min_tracks > config.episode.tracks:
        config = with_overrides(config, {"episode.min_tracks": config.episode.tracks})
    return config


def check_values(kind: str, name: str, values: list[float | int]) -> None:
    """Reject values the tuner itself would refuse, before any trial starts."""
    from hiertune.platform.harl_search import HarlConfig

    for value in values:
        if kind == "incilp":
            if value < 0:
                raise HiertuneError(f"--param gamma={value}: gamma must be >= 0 (or 'inf' for the exact ILP)")
            continue
        config = harl_config(HarlConfig(), {name: value})
        try:
            config.validate()
        except HiertuneError as err:
            raise HiertuneError(f"--param {name}={value}: {str(err).split(' (got')[0]}") from None


@dataclass
class SweepConfig:
    """A sweep: what to tune, the swept parameters, how to search, and each session's budget."""

    kind: str
    params: list[ParamSpec]
    search: str = "random"
    samples: int | None = None  # None: 1 per grid point, 4 for random/optuna
    asha: bool = False
    concurrent: int = 1  # trials at once (1 keeps timings fair on a shared machine)
    trial_cpus: float = 1.0
    out: str = "runs/sweep"
    seed: int = 0
    # harl session
    workload: str = "GMM-S"
    target: str = "llvm"
    trials_per_session: int = 16
    # incilp session
    model: str | None = None
    form: str = "keras"
    stages: int = 4
    solver: str = "auto"
    time_limit_s: float = 120.0
    initial: str = "auto"  # IncIlpConfig's default: libcoral's split with exact cuts, no pointer net
    fixed: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise HiertuneError(f"sweep kind {self.kind!r} is unknown; use one of {', '.join(KINDS)}")
        if self.search not in SEARCHES:
            raise HiertuneError(f"--search {self.search!r} is unknown; use one of {', '.join(SEARCHES)}")
        if not self.params:
            example = "c=0.1,0.25 --param tau=64,256" if self.kind == "harl" else "gamma=0,5,10"
            raise HiertuneError(f"give at least one --param, e.g. --param {example}")
        names = [p.name for p in self.params]
        if self.search == "grid":
            for p in self.params:
                if p.values is None:
                    p.domain("grid")  # raises the range-in-grid error
        if len(set(names)) != len(names):
            raise HiertuneError(f"--param names repeat ({', '.join(names)}): give each parameter once")
        if self.samples is not None and self.samples < 1:
            raise HiertuneError(f"--samples must be >= 1 (got {self.samples})")
        if self.trials_per_session < 1:
            raise HiertuneError(f"--trials-per-session must be >= 1 (got {self.trials_per_session})")
        if self.concurrent < 1:
            raise HiertuneError(f"--concurrent must be >= 1 (got {self.concurrent})")
        if self.kind == "incilp":
            if not self.model:
                raise HiertuneError("sweep incilp needs --model (a zoo name such as xception, or a graph .json)")
            if self.stages < 1:
                raise HiertuneError(f"--stages must be >= 1 (got {self.stages})")
        if self.asha and self.kind == "incilp":
            raise HiertuneError("--asha needs per-round reports; an Inc-ILP trial is one solve: drop --asha")

    @property
    def metric(self) -> str:
        return METRIC[self.kind]

    @property
    def num_samples(self) -> int:
        return self.samples if self.samples is not None else (1 if self.search == "grid" else 4)


# ---------------------------------------------------------------------- trainables
def incilp_session(config: dict[str, Any], graph: Any, stages: int, reference: tuple[int, int, int],
                   ilp: dict[str, Any], initial: str) -> None:
    """One Inc-ILP solve at the trial's gamma; score = solve seconds at the optimum, else penalised."""
    from ray import tune

    from hiertune.platform.solver_actor import pointer_inc_ilp
    from hiertune.solvers.ilp import IlpConfig
    from hiertune.solvers.incilp import IncIlpConfig

    result = pointer_inc_ilp(graph, stages, IncIlpConfig(gamma=float(config["gamma"]), initial=initial, ilp=IlpConfig(**ilp)))
    reached = tuple(result.objectives) <= tuple(reference)
    gap = [(a - b) / b * 100 if b else float(a != b) for a, b in zip(result.objectives, reference)]
    tune.report({
        "score_s": result.solve_seconds if reached else INCILP_PENALTY_S + result.solve_seconds,
        "solve_s": result.solve_seconds, "reached_optimum": bool(reached), "window": result.window_size,
        "peak_gap_pct": gap[0], "objectives": list(result.objectives),
    })


def harl_session(config: dict[str, Any], workload: str, target: str, trials: int, seed: int,
                 runner_cores: int) -> None:
    """A short HARL run in this trial's process; reports the best weighted latency every round."""
    from ray import tune

    from hiertune.platform.harl_search import HarlConfig, HarlSearch
    from hiertune.workloads import get_workload
    from hiertune.platform.records import RecordStore
    from hiertune.platform.runners import MeasureRunner, RunnerConfig
    from hiertune.workloads.tvm_support import make_target

    trial_dir = Path(tune.get_context().get_trial_dir())
    tvm_target = make_target(target, num_cores=runner_cores) if target == "llvm" else make_target(target)
    harl = harl_config(HarlConfig(trials=trials, seed=seed), config)
    device = "gpu" if tvm_target.kind.name == "cuda" else "cpu"
    runner = MeasureRunner(RunnerConfig(target=target, device=device, num_cpus=runner_cores,
                                        work_dir=str(trial_dir / "tmp")), use_ray=False)
    store = RecordStore(trial_dir / "records.jsonl")
    start = time.perf_counter()

    def report(log: Any) -> None:
        best = log.weighted_s * 1e3 if math.isfinite(log.weighted_s) else HARL_FAILED_MS
        tune.report({"best_ms": best, "trials": log.trials, "seconds": time.perf_counter() - start})

    try:
        HarlSearch(get_workload(workload, tvm_target), tvm_target, runner, store, harl).run(on_round=report)
    finally:
        runner.close()


# ---------------------------------------------------------------------- running
@dataclass
class SweepResult:
    trials: list[dict[str, Any]]  # config, metric, status, extra metrics per trial
    best: dict[str, Any]
    path: str  # the Tune experiment directory
    reference: list[int] | None = None
    seconds: float = 0.0


def incilp_reference(graph: Any, config: SweepConfig) -> tuple[tuple[int, int, int], bool, float]:
    """The exact optimum the trials are scored against (exact ILP, solved once)."""
    from hiertune.solvers.ilp import IlpConfig, solve_partition

    start = time.perf_counter()
    exact = solve_partition(graph, config.stages, IlpConfig(**_ilp_kwargs(config)))
    return tuple(exact.objectives), bool(exact.optimal), time.perf_counter() - start


def _ilp_kwargs(config: SweepConfig) -> dict[str, Any]:
    from hiertune.solvers.ilp import EDGE_TPU_CACHE_BYTES

    return {"solver": config.solver, "time_limit_s": config.time_limit_s, "threads": 1,
            "cache_bytes": int(config.fixed.get("cache_bytes", EDGE_TPU_CACHE_BYTES))}


def run_sweep(config: SweepConfig, on_trial: Any = None, graph: Any = None,
              reference: tuple[int, int, int] | None = None) -> SweepResult:
    """Run the Tune experiment (Ray must be up); `on_trial(trial)` is called as trials finish."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    config.validate()
    if config.kind == "incilp":
        trainable = tune.with_parameters(
            incilp_session, graph=graph, stages=config.stages, reference=reference,
            ilp=_ilp_kwargs(config), initial=config.initial,
        )
    else:
        trainable = tune.with_parameters(
            harl_session, workload=config.workload, target=config.target, trials=config.trials_per_session,
            seed=config.seed, runner_cores=max(1, int(config.trial_cpus)),
        )
    resources = {"cpu": config.trial_cpus}
    if config.kind == "harl" and config.target != "llvm" and "cuda" in config.target:
        resources["gpu"] = 1
    search_alg = None
    if config.search == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        search_alg = OptunaSearch(metric=config.metric, mode="min", seed=config.seed)
    scheduler = None
    if config.asha:
        scheduler = ASHAScheduler(time_attr="training_iteration", max_t=config.trials_per_session, grace_period=1)
    callbacks = [_TrialCallback(on_trial)] if on_trial else []
    storage = Path(config.out).resolve()
    storage.mkdir(parents=True, exist_ok=True)
    name = f"{config.kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space={p.name: p.domain(config.search) for p in config.params},
        tune_config=tune.TuneConfig(
            metric=config.metric, mode="min", num_samples=config.num_samples, search_alg=search_alg,
            scheduler=scheduler, max_concurrent_trials=config.concurrent, reuse_actors=True,
        ),
        run_config=tune.RunConfig(storage_path=str(storage), name=name, verbose=0, callbacks=callbacks),
    )
    start = time.perf_counter()
    grid = tuner.fit()
    seconds = time.perf_counter() - start
    trials = []
    for result in grid:
        metrics = dict(result.metrics or {})
        trials.append({
            "config": {p.name: result.config.get(p.name) for p in config.params},
            "metric": metrics.get(config.metric),
            "status": "error" if result.error else "ok",
            "error": str(result.error).splitlines()[0][:300] if result.error else None,
            "iterations": metrics.get("training_iteration"),
            "metrics": {k: v for k, v in metrics.items() if k in _KEPT_METRICS},
            "path": result.path,
        })
    scored = [t for t in trials if t["metric"] is not None]
    if not scored:
        first = next((t["error"] for t in trials if t["error"]), "no trial reported a metric")
        raise HiertuneError(f"every sweep trial failed ({first}); see {storage / name}")
    best = min(scored, key=lambda t: t["metric"])
    return SweepResult(trials=trials, best=best, path=str(storage / name),
                       reference=list(reference) if reference else None, seconds=seconds)


_KEPT_METRICS = ("best_ms", "trials", "seconds", "score_s", "solve_s", "reached_optimum", "window", "node_ip",
                 "peak_gap_pct", "objectives")


class _TrialCallback:
    """Forwards Tune's trial completions to a plain function (progress bars)."""

    def __new__(cls, on_trial: Any) -> Any:
        from ray.tune import Callback

        class _Forward(Callback):
            def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
                on_trial(trial)

            def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
                on_trial(trial)

        return _Forward()


# ---------------------------------------------------------------------- reporting
def sweep_table(config: SweepConfig, result: SweepResult) -> Any:
    from rich.table import Table

    table = Table(title=f"{config.kind} sweep ({config.search}, {len(result.trials)} trials) - {config.metric}, lower is better")
    names = [p.name for p in config.params]
    extra = ["trials"] if config.kind == "harl" else ["solve_s", "reached_optimum", "window"]
    if len({t["metrics"].get("node_ip") for t in result.trials}) > 1:  # on a cluster: where each ran
        extra.append("node_ip")
    for column in ["#", *names, config.metric, *extra, "status"]:
        table.add_column(column, justify="right")
    order = sorted(result.trials, key=lambda t: (t["metric"] is None, t["metric"] or 0))
    for i, trial in enumerate(order, 1):
        star = " *" if trial is result.best else ""
        table.add_row(
            f"{i}{star}", *[_fmt(trial["config"].get(n)) for n in names], _fmt(trial["metric"]),
            *[_fmt(trial["metrics"].get(k)) for k in extra], trial["status"],
        )
    return table


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def plot_sweep(config: SweepConfig, result: SweepResult, path: str | Path) -> Path:
    """Metric per trial (best marked) and the metric against each swept parameter."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()

    scored = [t for t in result.trials if t["metric"] is not None]
    panels = 1 + len(config.params)
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.8), squeeze=False)
    ax = axes[0][0]
    ordered = sorted(scored, key=lambda t: t["metric"])
    ax.bar(range(len(ordered)), [t["metric"] for t in ordered],
           color=["tab:green" if t is result.best else "tab:blue" for t in ordered])
    ax.set_xticks(range(len(ordered)))
    ax.set_xticklabels([",".join(_fmt(v) for v in t["config"].values()) for t in ordered], rotation=45,
                       ha="right", fontsize=7)
    ax.set_ylabel(config.metric)
    ax.set_title(f"{config.kind} sweep: trials by {config.metric}")
    penalised = config.kind == "incilp" and any(t["metric"] >= INCILP_PENALTY_S for t in ordered)
    if penalised:
        ax.set_yscale("log")
    for j, param in enumerate(config.params, 1):
        ax = axes[0][j]
        xs = [t["config"][param.name] for t in scored]
        ax.scatter(xs, [t["metric"] for t in scored])
        ax.scatter([result.best["config"][param.name]], [result.best["metric"]], color="tab:green", s=80,
                   label="best")
        ax.set_xlabel(param.name + (" (inf = exact ILP, not drawn)" if math.inf in xs else ""))
        ax.set_ylabel(config.metric)
        if penalised:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path, dpi=110)
