"""The baseline: MetaSchedule's evolutionary search + gradient task scheduler, on our runners and records."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from hiertune.workloads import Workload
from hiertune.platform.records import RecordStore
from hiertune.platform.runners import MeasureRunner

TUNER = "metaschedule"


@dataclass
class BaselineConfig:
    trials: int = 64  # measured trials in total (all tasks), including those already in the records
    batch: int = 16  # candidates per search round (MetaSchedule's num_trials_per_iter)
    seed: int = 0
    search_threads: int = 1  # threads of the evolutionary search (the runner holds its own cores)
    work_dir: str = "runs/ms_work"


def run_baseline(workload: Workload, target: object, runner: MeasureRunner, store: RecordStore,
                 config: BaselineConfig, on_measured: Callable[[str, int], None] | None = None) -> int:
    """Tune until `config.trials` MetaSchedule trials are in the records; returns trials run now."""
    store.expect_timing(runner.config.timing)
    done = len(store.trials(tuner=TUNER))
    remaining = config.trials - done
    if remaining <= 0:
        return 0
    for task in workload.tasks:
        store.add_workload(task.name, task.mod, task.weight)
    os.makedirs(config.work_dir, exist_ok=True)
    # MetaSchedule sometimes stops a few trials short of its budget (a round's candidates shrink
    # after dedupe against the database); top up so resumed and fresh runs spend the same budget.
    for _ in range(3):
        remaining = config.trials - len(store.trials(tuner=TUNER))
        if remaining <= 0:
            break
        before = len(store.trials(tuner=TUNER))
        _tune_once(workload, target, runner, store, config, remaining, on_measured)
        if len(store.trials(tuner=TUNER)) == before:
            break
    return len(store.trials(tuner=TUNER)) - done


def _tune_once(workload: Workload, target: object, runner: MeasureRunner, store: RecordStore,
               config: BaselineConfig, trials: int, on_measured: Callable[[str, int], None] | None) -> None:
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.ms_bridge import RecordCallback, actor_builder_and_runner

    contexts = [
        ms.TuneContext(
            mod=task.mod, target=target, space_generator="post-order-apply",
            search_strategy=ms.search_strategy.EvolutionarySearch(), task_name=task.name,
            num_threads=config.search_threads, rand_state=config.seed + i,
        )
        for i, task in enumerate(workload.tasks)
    ]
    builder, actor_runner = actor_builder_and_runner(runner)
    database = store.to_database()  # resume: the search starts from what is measured
    callback = RecordCallback(store, [t.name for t in workload.tasks], actor_runner, target, on_measured)
    ms.tune.tune_tasks(
        tasks=contexts,
        task_weights=[float(t.weight) for t in workload.tasks],
        work_dir=config.work_dir,
        max_trials_global=trials,
        num_trials_per_iter=config.batch,
        builder=builder,
        runner=actor_runner,
        database=database,
        cost_model=ms.cost_model.XGBModel(),
        measure_callbacks=[ms.measure_callback.AddToDatabase(), ms.measure_callback.UpdateCostModel(), callback],
        task_scheduler=ms.task_scheduler.GradientBased(),
    )
