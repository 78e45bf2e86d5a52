"""The HARL cost model: XGBoost on MetaSchedule's per-store features, retrained from measurements.

This wraps `ms.cost_model.XGBModel` (Ansor's parameters: depth 10, eta 0.2, gamma 0.001, early
stopping, the "pack-sum" objective over per-store feature rows) rather than re-implementing it:
same features, same objective, one place to change. What the wrapper adds:
* it works on `ScheduleState`s (their space's TuneContext is the feature context; states of
  several tasks may be mixed, each task is a separate label-normalisation group);
* it is deterministic before the first training: the score is a hash of the state's key in [0, 1)
  (XGBModel's own warm-up answer is `np.random.uniform`, which would make runs unrepeatable);
* failed measurements (latency inf / None) count as 1e10 s, MetaSchedule's convention;
* features are cached per state, and prediction sums the booster's per-store outputs directly
  (XGBModel.predict re-extracts features and builds a DMatrix: ~6 ms per state here, against
  ~0.1 ms for a cached batch);
* optionally a prior (`CostModelConfig.prior`): schedules measured on other tasks, each task its
  own label group beside the tuned ones, so the first rounds are ranked by what other operators
  taught rather than at random (Tenset-style transfer; `hiertune prior` makes one from records,
  and one for CPU targets ships in hiertune/data).

Scores are predicted normalised throughput (best measured latency of the task / latency):
higher is faster.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.resources import data_path

BUILTIN_PRIOR = "builtin"


def prior_file(prior: str | None, target_kind: str) -> str | None:
    """The prior file a `CostModelConfig.prior` setting names for a target kind (None: none)."""
    if prior is None or prior.lower() == "none":
        return None
    if prior.lower() != BUILTIN_PRIOR:
        return prior
    path = data_path(f"cost_prior_{target_kind}.npz")
    return str(path) if path.exists() else None


@dataclass(frozen=True)
class CostModelConfig:
    """XGBoost settings (Ansor's defaults) and the training cadence."""

    nthread: int = 1  # the search shares the machine with measurement; keep it small
    seed: int = 43
    max_depth: int = 10
    eta: float = 0.2
    gamma: float = 0.001
    early_stopping_rounds: int = 50
    adaptive_training: bool = True  # retrain only after the data grew by 20% (MetaSchedule's rule)
    feature_cache: int = 50_000  # states whose features are kept
    prior: str | None = None
    """Other tasks' measured schedules to start from (`hiertune prior` makes the .npz from
    records): they join the training data as label groups of their own and the model is trained
    on them before the first measurement, so a task's first rounds are not ranked at random. Used
    only where the tuned target's kind is the file's. "builtin": the prior shipped for the
    target's kind (CPU: the 13 te_workload operator families, one shape each, up to 128 schedules
    each; HarlConfig's default); None or "none": start untrained."""


def neutral_score(key: Hashable) -> float:
    """A deterministic pseudo-random score in [0, 1) for an untrained model."""
    return zlib.crc32(repr(key).encode()) / 2**32


def save_prior(path: str | Path, tasks: dict[str, tuple[list[np.ndarray], list[float]]], target_kind: str) -> None:
    """Write a prior for `CostModelConfig.prior`: {task name: (per-store features of each
    schedule, its latency in seconds)} measured on `target_kind`. One `.npz`: features as stacked
    rows with a row count per schedule, a group index per schedule into `names`."""
    names = sorted(tasks)
    feats = [f for n in names for f in tasks[n][0]]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path, names=np.array(names), target_kind=np.array(target_kind),
        features=np.concatenate(feats).astype(np.float32), row_counts=np.array([len(f) for f in feats], np.int32),
        group=np.concatenate([np.full(len(tasks[n][0]), g, np.int32) for g, n in enumerate(names)]),
        costs=np.concatenate([np.asarray(tasks[n][1], np.float32) for n in names]),
    )


def load_prior(path: str | Path) -> tuple[dict[str, tuple[list[np.ndarray], np.ndarray]], str]:
    """A prior file back as `save_prior`'s {task: (per-store features of each schedule, latencies)},
    with the target kind it was measured on."""
    try:
        prior = np.load(path, allow_pickle=False)
        names, rows, counts, group, costs = (prior[k] for k in ("names", "features", "row_counts", "group", "costs"))
        kind = str(prior["target_kind"])
    except (OSError, KeyError, ValueError) as err:
        raise HiertuneError(f"cost model prior {str(path)!r} cannot be read ({err}): make it with "
                            "`hiertune prior`, or set cost_model.prior to none") from err
    per_schedule = np.split(rows.astype(np.float32), np.cumsum(counts)[:-1])
    tasks = {}
    for g, name in enumerate(names):
        idx = np.flatnonzero(group == g)
        tasks[str(name)] = ([per_schedule[i] for i in idx], costs[idx])
    return tasks, kind


class CostModel:
    """XGBoost cost model over schedule states; `update` with measurements, `predict` scores."""

    def __init__(self, config: CostModelConfig | None = None, target_kind: str = "llvm") -> None:
        from hiertune.workloads.tvm_support import prepare_tvm

        prepare_tvm()
        from tvm.s_tir import meta_schedule as ms

        self.config = config or CostModelConfig()
        c = self.config
        # per-store features never change for a state: cache them (tracks revisit states, and
        # every step re-scores), so after a retrain a prediction only runs the booster
        self._features: OrderedDict[tuple[int, Hashable], np.ndarray] = OrderedDict()
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
        self._model = ms.cost_model.XGBModel(
            config=ms.cost_model.xgb_model.XGBConfig(
                max_depth=c.max_depth, gamma=c.gamma, eta=c.eta, seed=c.seed, nthread=c.nthread,
            ),
            num_warmup_samples=0,
            early_stopping_rounds=c.early_stopping_rounds,
            verbose_eval=10**9,
            adaptive_training=c.adaptive_training,
        )
        prior = prior_file(c.prior, target_kind)
        if prior:
            self._add_prior(prior, target_kind)

    def _add_prior(self, path: str, target_kind: str) -> None:
        """Put the prior's tasks into the model's data as label groups of their own and train on
        them. They count neither in `num_samples` nor for adaptive training, so the tuned tasks'
        first measurements retrain the model as they would without a prior."""
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import FeatureGroup

        tasks, kind = load_prior(path)
        if kind != target_kind:
            logging.getLogger(__name__).info("cost model prior %s was measured on %s, not %s: not used", path, kind, target_kind)
            return
        for name, (features, costs) in tasks.items():
            self._model.data[f"prior:{name}"] = FeatureGroup(f"prior:{name}", features, costs)
        groups = list(self._model.data.values())
        self._model._train(  # XGBModel.update's own retraining step, on the prior's groups alone
            xs=[f for g in groups for f in g.features],
            ys=np.concatenate([np.divide(g.min_cost, g.costs) for g in groups]),
        )

    @property
    def trained(self) -> bool:
        return self._model.booster is not None

    @property
    def num_samples(self) -> int:
        return int(self._model.data_size)

    @staticmethod
    def _groups(states: Sequence[Any]) -> dict[int, tuple[Any, list[int]]]:
        """State indices per schedule space (one TuneContext = one normalisation group)."""
        groups: dict[int, tuple[Any, list[int]]] = {}
        for i, state in enumerate(states):
            space = state.space
            if space is None:
                raise ValueError("cost model: a state without its schedule space cannot be featurised")
            groups.setdefault(id(space), (space, []))[1].append(i)
        return groups

    def update(self, states: Sequence[Any], latencies: Sequence[float | None]) -> None:
        """Add measurements (seconds; inf/None/<=0 = failed) and retrain."""
        from tvm.s_tir import meta_schedule as ms

        if len(states) != len(latencies):
            raise ValueError(f"cost model: {len(states)} states but {len(latencies)} latencies")
        for space, idx in self._groups(states).values():
            candidates = [space.measure_candidate(states[i]) for i in idx]
            results = []
            for i in idx:
                lat = latencies[i]
                ok = lat is not None and math.isfinite(lat) and lat > 0
                results.append(ms.runner.RunnerResult([float(lat)] if ok else None, None if ok else "failed"))
            self._model.update(space.ctx, candidates, results)

    def features(self, states: Sequence[Any]) -> list[np.ndarray]:
        """MetaSchedule's per-store features (one row per buffer store, 164 columns) per state."""
        out: list[np.ndarray | None] = [None] * len(states)
        for space, idx in self._groups(states).values():
            missing = []
            for i in idx:
                cached = self._features.get((id(space), states[i].key))
                if cached is None:
                    missing.append(i)
                else:
                    out[i] = cached
            if missing:
                candidates = [space.measure_candidate(states[i]) for i in missing]
                for i, f in zip(missing, self._model.extractor.extract_from(space.ctx, candidates)):
                    out[i] = f.numpy().astype("float32")
                    self._features[(id(space), states[i].key)] = out[i]
                while len(self._features) > self.config.feature_cache:
                    self._features.popitem(last=False)
        return out  # type: ignore[return-value]

    def predict(self, states: Sequence[Any]) -> np.ndarray:
        """Predicted normalised throughput per state (higher = faster)."""
        if not states:
            return np.zeros(0, dtype=np.float64)
        if not self.trained:
            return np.array([neutral_score(s.key) for s in states], dtype=np.float64)
        return self.score_features(self.features(states))

    def score_features(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        """Predicted normalised throughput per schedule from its per-store features (`features`,
        or a prior file's), for a trained model."""
        scores = np.zeros(len(xs), dtype=np.float64)
        keep = [i for i, x in enumerate(xs) if len(x)]  # a program without stores has no features
        if keep:
            # MetaSchedule's pack-sum prediction (sum of per-store predictions) without its
            # DMatrix round trip, which costs more than the trees here
            rows = np.concatenate([xs[i] for i in keep], axis=0)
            ids = np.repeat(np.arange(len(keep)), [len(xs[i]) for i in keep])
            pred = self._model.booster.inplace_predict(rows)
            scores[keep] = np.bincount(ids, weights=pred, minlength=len(keep))
        return scores
