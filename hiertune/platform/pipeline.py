"""Run a segmented TFLite model as a pipeline: one Ray actor per stage, inputs streamed through.

Each stage actor holds its segment's interpreter and the hardware it runs on (a custom `edgetpu`
resource with the Edge TPU delegate, or a share of a host's CPUs). The driver submits item i to
stage 0 and chains stage k+1 on stage k's result ref, so Ray overlaps the stages; at most
`max_in_flight` items are in the pipe. Every wait has a timeout and a dead stage actor stops the
run with a message naming the stage, so a broken pipeline is reported, never waited on forever.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.tflite_segment import SegmentManifest

DEVICES = ("cpu", "edgetpu")


class PipelineError(HiertuneError):
    """A pipeline run that could not place its stages or lost a stage mid-stream."""


@dataclass
class PipelineConfig:
    """How stages run: device, interpreter threads, CPU share per stage actor, and the timeouts."""

    device: str = "cpu"
    num_threads: int = 1
    cpus_per_stage: float | None = None  # None: an even share of the cluster's CPUs, at most 1
    max_in_flight: int | None = None  # None: 2 x stages
    item_timeout_s: float = 60.0  # the head item must leave the pipe within this
    start_timeout_s: float = 60.0  # every stage actor must be placed and loaded within this
    reference_kernels: bool = False  # True: LiteRT's builtin kernels without XNNPACK
    probe_on_driver: bool = True  # check libedgetpu here too (off when the TPUs are on other hosts)


@dataclass
class StageStats:
    stage: int
    ops: int
    param_bytes: int
    latency_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = self.latency_ms
        return {"stage": self.stage, "ops": self.ops, "param_bytes": self.param_bytes,
                "mean_ms": statistics.fmean(lat) if lat else None,
                "p50_ms": statistics.median(lat) if lat else None,
                "max_ms": max(lat) if lat else None}


@dataclass
class PipelineResult:
    num_inputs: int
    wall_s: float
    stages: list[StageStats]
    e2e_ms: list[float]
    outputs: list[dict[int, np.ndarray]]

    @property
    def throughput(self) -> float:
        return self.num_inputs / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {"inputs": self.num_inputs, "wall_s": self.wall_s, "throughput_per_s": self.throughput,
                "e2e_mean_ms": statistics.fmean(self.e2e_ms) if self.e2e_ms else None,
                "e2e_p50_ms": statistics.median(self.e2e_ms) if self.e2e_ms else None,
                "stages": [s.summary() for s in self.stages]}


# ------------------------------------------------------------------------------ one stage
class StageExecutor:
    """A segment's interpreter: takes the live tensors (by original index), returns its outputs."""

    def __init__(self, path: str | Path, input_ids: list[int], output_ids: list[int], *,
                 device: str = "cpu", num_threads: int = 1, reference_kernels: bool = False) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        delegates = []
        if device == "edgetpu":
            from hiertune.platform.edgetpu import edgetpu_delegate

            delegates.append(edgetpu_delegate())
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if reference_kernels else OpResolverType.AUTO
        self.interpreter = Interpreter(model_path=str(path), num_threads=num_threads,
                                       experimental_delegates=delegates or None,
                                       experimental_op_resolver_type=resolver)
        self.interpreter.allocate_tensors()
        self.input_slots = [d["index"] for d in self.interpreter.get_input_details()]
        self.output_slots = [d["index"] for d in self.interpreter.get_output_details()]
        if len(self.input_slots) != len(input_ids) or len(self.output_slots) != len(output_ids):
            raise PipelineError(f"segment {path} does not match its manifest; re-run the segmenter")
        self.input_ids, self.output_ids = list(input_ids), list(output_ids)

    def run(self, tensors: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        it = self.interpreter
        for slot, tid in zip(self.input_slots, self.input_ids):
            it.set_tensor(slot, tensors[tid])
        it.invoke()
        return {tid: it.get_tensor(slot).copy() for slot, tid in zip(self.output_slots, self.output_ids)}

    def warm_up(self) -> None:
        """One invocation on zeros, so the first timed input does not pay first-run costs."""
        for info in self.interpreter.get_input_details():
            self.interpreter.set_tensor(info["index"], np.zeros(info["shape"], dtype=info["dtype"]))
        self.interpreter.invoke()


def _executor(manifest: SegmentManifest, stage: int, root: Path, config: PipelineConfig) -> StageExecutor:
    seg = manifest.segments[stage]
    return StageExecutor(root / seg.path, [t.index for t in seg.inputs], [t.index for t in seg.outputs],
                         device=config.device, num_threads=config.num_threads,
                         reference_kernels=config.reference_kernels)


def run_sequential(manifest: SegmentManifest, root: str | Path, feeds: dict[int, np.ndarray],
                   config: PipelineConfig | None = None) -> dict[int, np.ndarray]:
    """Run the K segments one after another in this process (the correctness reference)."""
    config = config or PipelineConfig()
    live = dict(feeds)
    for stage in range(manifest.num_stages):
        live.update(_executor(manifest, stage, Path(root), config).run(live))
    return {t.index: live[t.index] for t in manifest.model_outputs}


def run_whole_model(model_path: str | Path, feeds: list[np.ndarray], *, reference_kernels: bool = False,
                    num_threads: int = 1) -> list[np.ndarray]:
    """The unsplit model's outputs for one set of inputs (in the model's input order)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if reference_kernels else OpResolverType.AUTO
    it = Interpreter(model_path=str(model_path), num_threads=num_threads, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def random_inputs(manifest: SegmentManifest, n: int, seed: int = 0) -> list[dict[int, np.ndarray]]:
    """n random feeds for the model's inputs (int8/uint8 over their full range)."""
    rng = np.random.default_rng(seed)
    dtypes = {9: np.int8, 3: np.uint8, 0: np.float32, 2: np.int32}
    feeds = []
    for _ in range(n):
        feed = {}
        for t in manifest.model_inputs:
            dt = dtypes.get(t.dtype)
            if dt is None:
                raise HiertuneError(f"model input {t.name!r} has TFLite type {t.dtype}; only int8/uint8/float32/int32 inputs are generated")
            if np.issubdtype(dt, np.integer):
                info = np.iinfo(dt)
                feed[t.index] = rng.integers(info.min, info.max, size=t.shape, dtype=dt, endpoint=True)
            else:
                feed[t.index] = rng.standard_normal(t.shape).astype(dt)
        feeds.append(feed)
    return feeds


# ------------------------------------------------------------------------------ the actors
class _StageWorker:
    """Body of a stage actor: one executor, forwarding the tensors later stages still need."""

    def __init__(self, manifest: SegmentManifest, stage: int, root: str, config: PipelineConfig) -> None:
        self.stage = stage
        self.executor = _executor(manifest, stage, Path(root), config)
        self.carry = set(manifest.carry_after[stage])
        self.last = stage == manifest.num_stages - 1

    def ready(self) -> int:
        self.executor.warm_up()
        return self.stage

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        t_start = time.perf_counter()
        if self.stage == 0:
            item["t0"] = time.time()
        outputs = self.executor.run(item["tensors"])
        tensors = {**item["tensors"], **outputs}
        item["tensors"] = {t: v for t, v in tensors.items() if t in self.carry}
        item["stage_ms"] = [*item.get("stage_ms", []), (time.perf_counter() - t_start) * 1e3]
        if self.last:
            item["t_end"] = time.time()
        return item


def _stage_options(config: PipelineConfig, num_stages: int) -> dict[str, Any]:
    import ray

    from hiertune.platform.ray_runtime import require_resource

    if config.device == "edgetpu":
        require_resource("edgetpu", float(num_stages), what=f"a {num_stages}-stage Edge TPU pipeline")
        return {"num_cpus": 0, "resources": {"edgetpu": 1}}
    cpus = config.cpus_per_stage
    if cpus is None:
        cpus = min(1.0, ray.cluster_resources().get("CPU", 1.0) / num_stages)
    require_resource("CPU", cpus * num_stages, what=f"a {num_stages}-stage CPU pipeline")
    return {"num_cpus": cpus}


def _dead_stage(actors: list[Any], err: Exception) -> int | None:
    """Which stage's actor died: from the error's actor id, else by pinging each stage."""
    import ray

    actor_id = getattr(err, "actor_id", None)
    if actor_id:
        for k, a in enumerate(actors):
            if a._actor_id.hex() == str(actor_id):
                return k
    for k, a in enumerate(actors):
        try:
            ray.get(a.ready.remote(), timeout=5)
        except Exception:
            return k
    return None


def run_pipeline(manifest: SegmentManifest, root: str | Path, feeds: list[dict[int, np.ndarray]],
                 config: PipelineConfig | None = None,
                 on_result: Callable[[int, dict[str, Any], list[Any]], None] | None = None) -> PipelineResult:
    """Stream `feeds` through one actor per stage (Ray must be initialised); stops on a dead stage.

    `on_result(i, item, actors)` is called as each input leaves the pipe (progress bars, tests).
    """
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    config = config or PipelineConfig()
    if config.device not in DEVICES:
        raise PipelineError(f"device {config.device!r} is unknown; use one of {', '.join(DEVICES)}")
    if config.device == "edgetpu" and config.probe_on_driver:
        from hiertune.platform.edgetpu import require_edgetpu_runtime

        require_edgetpu_runtime()
    k = manifest.num_stages
    options = _stage_options(config, k)
    worker = ray.remote(max_restarts=0, max_task_retries=0)(_StageWorker)
    actors = [worker.options(**options).remote(manifest, s, str(Path(root).resolve()), config)
              for s in range(k)]
    stats = [StageStats(s, len(seg.ops), seg.param_bytes) for s, seg in enumerate(manifest.segments)]
    e2e: list[float] = []
    outputs: list[dict[int, np.ndarray]] = []
    done = 0
    try:
        try:
            ray.get([a.ready.remote() for a in actors], timeout=config.start_timeout_s)
        except GetTimeoutError:
            raise PipelineError(
                f"the {k} stage actors were not placed and loaded within {config.start_timeout_s:.0f} s "
                f"(each needs {options}); free resources or raise start_timeout_s"
            ) from None
        except (RayActorError, RayTaskError) as err:
            cause = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            raise PipelineError(f"a stage actor failed to start: {cause}") from None
        window = config.max_in_flight or 2 * k
        pending: deque[tuple[int, Any]] = deque()
        next_item = 0
        t_start = time.perf_counter()
        while done < len(feeds):
            while next_item < len(feeds) and len(pending) < window:
                ref: Any = {"id": next_item, "tensors": feeds[next_item]}
                for a in actors:
                    ref = a.process.remote(ref)
                pending.append((next_item, ref))
                next_item += 1
            i, ref = pending[0]
            ready, _ = ray.wait([ref], timeout=config.item_timeout_s)
            if not ready:
                raise PipelineError(
                    f"input {i} did not leave the pipeline within {config.item_timeout_s:.0f} s "
                    f"({done} of {len(feeds)} done); a stage is stuck"
                )
            item = ray.get(ref)
            pending.popleft()
            done += 1
            for s, ms in enumerate(item["stage_ms"]):
                stats[s].latency_ms.append(ms)
            e2e.append((item["t_end"] - item["t0"]) * 1e3)
            outputs.append({t.index: item["tensors"][t.index] for t in manifest.model_outputs})
            if on_result is not None:
                on_result(i, item, actors)
        wall = time.perf_counter() - t_start
    except RayActorError as err:  # first: a task whose input came from a dead actor is both
        stage = _dead_stage(actors, err)
        where = f"stage {stage}" if stage is not None else "a stage"
        raise PipelineError(
            f"{where} actor died mid-stream after {done} of {len(feeds)} inputs "
            f"({type(err).__name__}); the run was stopped and the other stages released"
        ) from None
    except RayTaskError as err:  # a stage raised (bad tensor, interpreter error)
        cause = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise PipelineError(f"a stage failed after {done} of {len(feeds)} inputs: {cause}; the run was stopped") from None
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
    return PipelineResult(len(feeds), wall, stats, e2e, outputs)
