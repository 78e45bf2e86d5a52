"""Cost-model priors from records: what earlier runs measured, so a new task's first rounds are
ranked by what other operators taught instead of at random (`CostModelConfig.prior`).

A records file holds each task's workload beside its measurements, so records alone are enough:
every file's measured schedules are pooled per task (the same workload in two files is one task),
and up to `per_task` of them are drawn at random, so one long run does not outweigh the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError


def collect_prior(paths: Sequence[str | Path], target: Any, per_task: int = 128,
                  seed: int = 0) -> dict[str, tuple[list[np.ndarray], list[float]]]:
    """{task name: (per-store features, latency in seconds) of up to `per_task` of its measured
    schedules}, over every task of every records file (failed runs left out)."""
    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.platform.records import RecordStore
    from hiertune.policies.cost_model import CostModel
    from hiertune.workloads.tasks import with_unique_buffer_names

    pools: dict[str, tuple[str, Any, dict[str, tuple[Any, float]]]] = {}  # structural hash -> name, space, pool
    for path in paths:
        store = RecordStore(path, writer=False)
        for task in store.tasks():
            mod = with_unique_buffer_names(store.workload_mod(task))  # as tuning featurised it
            shash = store.workloads[task]["workload"][0]  # MetaSchedule's Workload.as_json(): [hash, module]
            name, space, pool = pools.setdefault(shash, (task, ScheduleSpace(mod, target, seed=0), {}))
            for m in store.trials(task=task):
                state = space.state_from_record(m.record) if m.ok else None
                if state is not None:
                    pool.setdefault(state.key, (state, m.mean_s))
    if not any(pool for _, _, pool in pools.values()):
        raise HiertuneError(f"no measured schedule in {len(paths)} records file(s): a prior needs a tuning run's records")
    model, rng = CostModel(), np.random.default_rng(seed)
    out: dict[str, tuple[list[np.ndarray], list[float]]] = {}
    for name, _, pool in pools.values():
        rows = list(pool.values())
        keep = [rows[i] for i in rng.choice(len(rows), size=min(per_task, len(rows)), replace=False)]
        feats = model.features([state for state, _ in keep])
        kept = [(f, seconds) for f, (_, seconds) in zip(feats, keep) if len(f)]  # a program without stores
        if kept:  # two workloads stored under one name in different files stay two tasks
            out[name if name not in out else f"{name}#{len(out)}"] = ([f for f, _ in kept], [s for _, s in kept])
    return out
