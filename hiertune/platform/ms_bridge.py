"""MetaSchedule's own tuning loop on hiertune's runners and records (the baseline's plumbing).

MetaSchedule splits build and run; our runner actor does both where the artifacts live (on a
cluster the artifact is on the actor's node). So the builder here defers: it hands MetaSchedule a
token per module, and the runner sends the modules behind the tokens to the actor in one batch.
Build errors then surface as failed runs whose message starts with "build:".
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture
from tvm.ir.utils import derived_object

from hiertune.platform.records import MeasureRecord, RecordStore, trace_key, tuning_record_json
from hiertune.platform.runners import MeasureInput, MeasureRunner

_TOKEN = "hiertune-deferred:"


class _PendingBuilds:
    """Modules waiting between the deferred builder and the runner, keyed by token."""

    def __init__(self) -> None:
        self.mods: dict[str, Any] = {}
        self.counter = itertools.count()


@derived_object
class DeferredBuilder(ms.builder.PyBuilder):
    def __init__(self, pending: _PendingBuilds) -> None:
        super().__init__()
        self.pending = pending

    def build(self, build_inputs: list[ms.builder.BuilderInput]) -> list[ms.builder.BuilderResult]:
        results = []
        for build_input in build_inputs:
            token = f"{_TOKEN}{next(self.pending.counter)}"
            self.pending.mods[token] = build_input.mod
            results.append(ms.builder.BuilderResult(token, None))
        return results


@derived_object
class ActorRunner(ms.runner.PyRunner):
    """Builds and times MetaSchedule's candidates through a hiertune `MeasureRunner`."""

    def __init__(self, runner: MeasureRunner, pending: _PendingBuilds) -> None:
        super().__init__()
        self.runner = runner
        self.pending = pending
        self.last_results: list[Any] = []

    def run(self, runner_inputs: list[ms.runner.RunnerInput]) -> list[ms.runner.RunnerFuture]:
        inputs = [MeasureInput(self.pending.mods.pop(i.artifact_path), list(i.args_info)) for i in runner_inputs]
        self.last_results = self.runner.measure(inputs)
        return [LocalRunnerFuture(r.latencies_s, None) if r.ok else LocalRunnerFuture(None, r.error) for r in self.last_results]


@derived_object
class RecordCallback(ms.measure_callback.PyMeasureCallback):
    """Appends every MetaSchedule measurement to the hiertune records file as it arrives."""

    def __init__(self, store: RecordStore, task_names: list[str], runner: ActorRunner, target: Any,
                 on_measured: Any = None) -> None:
        super().__init__()
        self.store = store
        self.task_names = task_names
        self.runner = runner
        self.target = target
        self.on_measured = on_measured
        self.trial = len(store.trials(tuner="metaschedule"))
        self._workloads: dict[str, Any] = {}  # the task's (unscheduled) workload, built once per task

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: list[Any],
              builder_results: list[Any], runner_results: list[Any]) -> None:
        task = self.task_names[task_id]
        detail = self.runner.last_results
        for i, (candidate, result) in enumerate(zip(measure_candidates, runner_results)):
            trace = candidate.sch.trace
            secs = [float(x) for x in result.run_secs] if result.run_secs is not None and result.error_msg is None else None
            if task not in self._workloads:
                self._workloads[task] = ms.database.Workload(self.store.workload_mod(task))
            record = ms.database.TuningRecord(trace, self._workloads[task], secs or [1e10], self.target, candidate.args_info)
            self.trial += 1
            extra = detail[i] if i < len(detail) else None
            self.store.append(
                MeasureRecord(
                    task=task, key=trace_key(trace), record=tuning_record_json(record), latencies_s=secs,
                    error=None if secs else (result.error_msg or "failed"),
                    build_s=getattr(extra, "build_s", 0.0), run_s=getattr(extra, "run_s", 0.0),
                    time=time.time(), tuner="metaschedule", trial=self.trial,
                )
            )
        if self.on_measured is not None:
            self.on_measured(task, len(measure_candidates))


def actor_builder_and_runner(runner: MeasureRunner) -> tuple[DeferredBuilder, ActorRunner]:
    pending = _PendingBuilds()
    return DeferredBuilder(pending), ActorRunner(runner, pending)
