"""Measurement runners: MetaSchedule's builder and runner inside a Ray actor pinned to its hardware.

A `Measurer` builds and times candidates where it runs; as a Ray actor it holds the cores (or the
GPU) it measures on, so search and measurement don't share cores. Failures are values, as in
MetaSchedule's runners: a build error, a runtime error, a timeout or a crashed worker comes back
as a failed `MeasureResult` for that candidate, and the run goes on.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

from hiertune.errors import HiertuneError
from hiertune.platform.records import LatencyOutcome


@dataclass
class RunnerConfig:
    """Where and how candidates are built and timed."""

    target: Any = "llvm"  # "llvm", "cuda", a JSON dict or a tvm Target
    device: str = "cpu"  # "cpu" or "gpu"
    num_cpus: float = 1.0  # cores the runner holds (TVM_NUM_THREADS follows it)
    number: int = 3  # without cache_flush: runs per timing, raised to fill min_repeat_ms
    repeat: int = 1
    min_repeat_ms: int = 50
    cache_flush: bool = True
    """CPU: time each candidate as it runs inside a model, its weights coming from memory: every
    argument but the first (the activation a previous layer just wrote) is flushed from the caches
    before each of `flush_repeat` single runs (TVM's `cache_flush_cpu_non_first_arg`). Timed warm
    instead (False: the mean of back-to-back runs over `min_repeat_ms`, so a model's megabytes of
    weights sit in cache), a search ranks schedules by a speed they do not have inside the model
    (docs/harl.md). GPU targets ignore it."""
    flush_repeat: int = 10
    """Single runs timed per candidate with `cache_flush` (their mean is the latency)."""
    build_timeout_s: float = 30.0
    run_timeout_s: float = 30.0
    build_workers: int = 1
    placement_timeout_s: float = 60.0
    work_dir: str | None = None  # builder/runner temp files go here (TMPDIR)

    @property
    def timing(self) -> str:
        """How this runner takes a latency, stamped on every trial it measures: "cold" (CPU with
        `cache_flush`) or "warm"; a records file keeps to one (`RecordStore.expect_timing`)."""
        return "cold" if self.cache_flush and self.device == "cpu" else "warm"


@dataclass
class MeasureInput:
    """A scheduled module to build and time, with the shapes/dtypes of its arguments."""

    mod: Any  # tvm.IRModule
    args_info: list[Any]

    @classmethod
    def from_schedule(cls, sch: Any) -> MeasureInput:
        from hiertune.workloads.tvm_support import measured_args_info

        return cls(mod=sch.mod, args_info=measured_args_info(sch))


@dataclass
class MeasureResult(LatencyOutcome):
    latencies_s: list[float] | None
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0



def alloc_arguments_in_range(device: Any, args_info: list[Any], alloc_repeat: int) -> list[list[Any]]:
    """MetaSchedule's argument allocation, except that integer tensors are ones and booleans True.

    Random integers are out-of-bounds indices for gathers (an embedding's `take`), which crash
    the measuring process, so such a task never gets a valid record. Zeros, tried first, are in
    range but turn masks and flags into their do-nothing value: BERT's softmax task reads a flag
    per row ("this row has a key to attend to"), and with it zero a schedule that computes the
    softmax only under the flag measured thousands of times faster in the runner than in the
    model, so the search kept it. One is in range for every gather over an axis of two or more,
    and a nonzero flag selects the work, as in a model's common case. Runs in the runner's worker
    process.
    """
    import numpy as np
    from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument

    repeated = default_alloc_argument(device, args_info, alloc_repeat)
    for args in repeated:
        for arg in args:
            dtype = str(arg.dtype)
            if "int" in dtype or dtype == "bool":
                arg.copyfrom(np.ones(tuple(arg.shape), dtype=dtype))
    return repeated


def _short_error(text: str, limit: int = 400) -> str:
    text = str(text).strip()
    return text if len(text) <= limit else text[:limit] + " ..."


class Measurer:
    """Builds and times candidates in this process (or in the actor this class becomes)."""

    def __init__(self, config: RunnerConfig) -> None:
        from hiertune.platform.core_claims import claim_cores
        from hiertune.workloads.tvm_support import fast_build, make_target, prepare_tvm

        claim_cores(f"{config.device} measurement runner")
        self.config = config
        if config.device == "cpu":
            os.environ["TVM_NUM_THREADS"] = str(max(1, int(config.num_cpus)))
        if config.work_dir:
            os.makedirs(config.work_dir, exist_ok=True)
            os.environ["TMPDIR"] = config.work_dir
        prepare_tvm()
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

        self.target = make_target(config.target, num_cores=max(1, int(config.num_cpus)))
        self.device_type = {"cpu": "cpu", "gpu": "cuda"}[config.device]
        # The constructor's worker sanity check runs under the timeout too: give it a sane one,
        # then apply the configured per-build limit.
        self.builder = ms.builder.LocalBuilder(
            max_workers=config.build_workers, timeout_sec=max(config.build_timeout_s, 30.0), f_build=fast_build
        )
        self.builder.timeout_sec = config.build_timeout_s
        self.runner = ms.runner.LocalRunner(
            timeout_sec=config.run_timeout_s,
            f_alloc_argument=alloc_arguments_in_range,
            evaluator_config=self._evaluator(config, EvaluatorConfig),
        )

    @staticmethod
    def _evaluator(config: RunnerConfig, evaluator_config: Any) -> Any:
        if config.timing == "cold":  # a flush only precedes a repeat: one run each
            return evaluator_config(number=1, repeat=config.flush_repeat, min_repeat_ms=0, enable_cpu_cache_flush=True)
        return evaluator_config(number=config.number, repeat=config.repeat, min_repeat_ms=config.min_repeat_ms,
                                enable_cpu_cache_flush=False)

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "target": str(self.target), "device": self.config.device}

    def build(self, mods: list[Any]) -> list[tuple[str | None, str | None]]:
        """(artifact path, None) or (None, error) per module; a builder crash fails the batch."""
        from tvm.s_tir import meta_schedule as ms

        try:
            builds = self.builder.build([ms.builder.BuilderInput(mod, self.target) for mod in mods])
        except Exception as err:  # noqa: BLE001 - a builder crash fails this batch, not the run
            return [(None, f"build crashed: {_short_error(err)}") for _ in mods]
        return [
            (b.artifact_path, None) if b.error_msg is None else (None, f"build: {_short_error(b.error_msg)}")
            for b in builds
        ]

    def run(self, artifact_path: str, args_info: list[Any]) -> tuple[list[float] | None, str | None]:
        """Time one built artifact, then delete it; errors are returned, never raised."""
        from tvm.s_tir import meta_schedule as ms

        try:
            (future,) = self.runner.run([ms.runner.RunnerInput(artifact_path, self.device_type, args_info)])
            result = future.result()
            if result.error_msg is not None:
                return None, f"run: {_short_error(result.error_msg)}"
            return [float(x) for x in result.run_secs], None
        except Exception as err:  # noqa: BLE001 - a runner crash fails this candidate only
            return None, f"run crashed: {_short_error(err)}"
        finally:
            shutil.rmtree(os.path.dirname(artifact_path), ignore_errors=True)

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """Build all inputs, then time those that built; one result per input, failures included."""
        if not inputs:
            return []
        start = time.perf_counter()
        builds = self.build([i.mod for i in inputs])
        build_s = (time.perf_counter() - start) / len(inputs)
        results: list[MeasureResult] = []
        for inp, (artifact, error) in zip(inputs, builds):
            if artifact is None:
                results.append(MeasureResult(None, error, build_s))
                continue
            t0 = time.perf_counter()
            latencies, error = self.run(artifact, inp.args_info)
            results.append(MeasureResult(latencies, error, build_s, time.perf_counter() - t0))
        return results


class MeasureRunner:
    """The driver's handle: a `Measurer` in a Ray actor pinned to its device (or in-process).

    If the actor dies, its in-flight candidates come back failed, a fresh actor replaces it and
    the run goes on.
    """

    def __init__(self, config: RunnerConfig, use_ray: bool = True) -> None:
        if config.device not in ("cpu", "gpu"):
            raise HiertuneError(
                f"runner device {config.device!r} cannot time TVM candidates; use cpu or gpu "
                "(Edge TPU stages run through `hiertune pipeline`)"
            )
        self.config = config
        self.use_ray = use_ray
        self._local: Measurer | None = None
        self._actor: Any = None
        self.restarts = 0
        if use_ray:
            self._start_actor()
        else:
            self._local = Measurer(config)

    def _start_actor(self) -> None:
        import ray

        from hiertune.platform.placement import start_actor

        env = {"TVM_NUM_THREADS": str(max(1, int(self.config.num_cpus)))}
        self._actor = start_actor(
            ray.remote(max_restarts=0)(Measurer), self.config.device, self.config,
            num_cpus=self.config.num_cpus if self.config.device == "cpu" else 1.0, env=env,
            timeout_s=self.config.placement_timeout_s, what=f"{self.config.device} measurement runner",
        )

    @property
    def actor(self) -> Any:
        return self._actor

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        if self._local is not None:
            return self._local.measure(inputs)
        import ray

        limit = 120 + len(inputs) * (self.config.build_timeout_s + self.config.run_timeout_s)
        try:
            return ray.get(self._actor.measure.remote(inputs), timeout=limit)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            reason = "timed out" if isinstance(err, ray.exceptions.GetTimeoutError) else "died"
            try:
                ray.kill(self._actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.restarts += 1
            self._start_actor()
            return [MeasureResult(None, f"runner actor {reason} while measuring this batch") for _ in inputs]

    def close(self) -> None:
        if self._actor is not None:
            import ray

            ray.kill(self._actor)
            self._actor = None


def create_runner(config: RunnerConfig, use_ray: bool = True) -> MeasureRunner:
    return MeasureRunner(config, use_ray=use_ray)
