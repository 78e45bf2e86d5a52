"""End-to-end latency of a whole model against what users run today, in one process, interleaved.

Every contender runs at the same thread count: TVM untuned (default pipeline), TVM with each records
file, PyTorch eager, `torch.compile`, ONNX Runtime (the model exported to ONNX when it came from
torch). Samples alternate between contenders each repeat, so a noisy neighbour slows all alike.
On a GPU target every contender runs on GPU 0 (ONNX Runtime through its CUDA provider, where the
installed build has one) and each call waits for the device, so a sample is a whole inference.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiertune.platform.compile_model import build_tuned, build_untuned, check_records_target, task_status
from hiertune.platform.records import RecordStore
from hiertune.workloads.models import Model
from hiertune.workloads.tvm_support import is_gpu_target, target_device

UNTUNED = "TVM untuned"
EAGER = "PyTorch eager"
TORCH_COMPILE = "torch.compile"
ORT = "ONNX Runtime"
TUNER_LABELS = {"harl": "HARL", "metaschedule": "MetaSchedule"}  # records' tuner -> contender label ("TVM + HARL")


@dataclass
class Contender:
    name: str
    run: Callable[[], Any] | None  # None: not available here, `note` says why
    note: str = ""
    tuned_tasks: int | None = None
    tasks: int | None = None
    samples_s: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {"note": self.note}
        if self.tasks is not None:
            data.update(tuned_tasks=self.tuned_tasks, tasks=self.tasks)
        if self.samples_s:
            ordered = sorted(self.samples_s)
            quart = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
            data.update(median_ms=statistics.median(ordered) * 1e3, p25_ms=quart[0] * 1e3, p75_ms=quart[2] * 1e3,
                        min_ms=ordered[0] * 1e3, max_ms=ordered[-1] * 1e3,
                        samples_ms=[round(s * 1e3, 4) for s in self.samples_s])
        return data

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s) if self.samples_s else math.inf


def set_threads(threads: int) -> None:
    """One thread count for TVM's pool and torch; ONNX Runtime takes it per session."""
    os.environ["TVM_NUM_THREADS"] = str(threads)
    import torch
    import tvm

    config = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)
    if config is not None:
        config(1, threads)  # 1 = big cores first, the pool's default affinity
    torch.set_num_threads(threads)


def _tvm_runner(executable: Any, arrays: list[Any], target: Any) -> Callable[[], Any]:
    import tvm
    from tvm import relax

    dev = target_device(target)
    vm = relax.VirtualMachine(executable, dev)
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    main = vm["main"]

    def call() -> Any:
        result = main(*tensors)
        dev.sync()  # GPU launches return at once; a sample must include the kernels
        return result
    return call


def onnx_file(model: Model, work_dir: Path) -> Path:
    """The model as an ONNX file: its own, or exported from torch (torch.onnx, dynamo exporter)."""
    if model.onnx_path is not None:
        return model.onnx_path
    import torch

    path = work_dir / f"{model.name.replace(':', '_')}.onnx"
    if not path.exists():
        work_dir.mkdir(parents=True, exist_ok=True)
        example = tuple(torch.from_numpy(a) for a in model.random_inputs())
        torch.onnx.export(model.torch_module, example, str(path), dynamo=True)
    return path


def _attempt(name: str, make: Callable[[], Callable[[], Any]]) -> Contender:
    """A contender whose set-up may fail where the framework can't handle the model (a note, not a crash)."""
    try:
        run = make()
        run()  # first call: compiles (torch.compile) or allocates; also proves it runs
        return Contender(name, run)
    except Exception as err:  # noqa: BLE001 - any framework failure makes the contender unavailable
        first = (str(err).strip().splitlines() or [""])[0][:160]
        return Contender(name, None, note=f"unavailable: {type(err).__name__}: {first}")


def contenders(model: Model, workload: Any, records: list[tuple[str, RecordStore]], target: Any, threads: int,
               work_dir: Path, torch_compile: bool = True) -> list[Contender]:
    """Every contender, built and run once. `records` are (label, open records) pairs; open them
    read-only (`writer=False`) where a live `tune` may hold the file."""
    arrays = model.random_inputs()
    out = [_attempt(UNTUNED, lambda: _tvm_runner(build_untuned(model, target), arrays, target))]
    out[0].tasks, out[0].tuned_tasks = len(workload.tasks), 0
    for label, store in records:
        check_records_target(store, target)
        database = store.to_database()
        status = task_status(workload, database, store, target)
        contender = _attempt(f"TVM + {label}",
                             lambda: _tvm_runner(build_tuned(model, database, target), arrays, target))
        contender.tasks, contender.tuned_tasks = len(status), sum(s.tuned for s in status)
        out.append(contender)
    if model.torch_module is not None:
        out += _torch_contenders(model, arrays, is_gpu_target(target), torch_compile)
    else:
        note = "n/a: ONNX model"
        out += [Contender(EAGER, None, note=note), Contender(TORCH_COMPILE, None, note=note)]

    def ort_session() -> Callable[[], Any]:
        import onnxruntime as ort

        provider = "CUDAExecutionProvider" if is_gpu_target(target) else "CPUExecutionProvider"
        if provider not in ort.get_available_providers():
            raise RuntimeError(f"this onnxruntime build has no {provider} (pip install onnxruntime-gpu)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(onnx_file(model, work_dir)), options, providers=[provider])
        feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
        return lambda: session.run(None, feeds)

    out.append(_attempt(ORT, ort_session))
    return out


def _torch_contenders(model: Model, arrays: list[Any], gpu: bool, torch_compile: bool) -> list[Contender]:
    """PyTorch eager and `torch.compile` on the model's own module, on GPU 0 for a GPU target."""
    import copy

    import torch

    module, inputs = model.torch_module, [torch.from_numpy(a) for a in arrays]
    if gpu:  # a copy: the output check keeps using the CPU module
        module, inputs = copy.deepcopy(module).to("cuda"), [t.to("cuda") for t in inputs]
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    def runner(fn: Callable[..., Any]) -> Callable[[], Any]:
        def call() -> Any:
            with torch.no_grad():
                result = fn(*inputs)
            sync()
            return result
        return call

    out = [_attempt(EAGER, lambda: runner(module))]
    if torch_compile:
        out.append(_attempt(TORCH_COMPILE, lambda: runner(torch.compile(module))))
    else:
        out.append(Contender(TORCH_COMPILE, None, note="skipped (--no-torch-compile)"))
    return out


def measure(contenders: list[Contender], repeats: int, min_sample_s: float = 0.05,
            on_repeat: Callable[[int], None] | None = None) -> None:
    """`repeats` samples per available contender, interleaved; a sample averages enough calls to last
    `min_sample_s` (fast models) and is one call otherwise (slow ones)."""
    live = [c for c in contenders if c.run is not None]
    calls = {}
    for c in live:
        start = time.perf_counter()
        c.run()
        calls[c.name] = max(1, math.ceil(min_sample_s / max(time.perf_counter() - start, 1e-6)))
    for r in range(repeats):
        for c in live[r % len(live):] + live[: r % len(live)]:  # rotate who goes first
            n = calls[c.name]
            start = time.perf_counter()
            for _ in range(n):
                c.run()
            c.samples_s.append((time.perf_counter() - start) / n)
        if on_repeat is not None:
            on_repeat(r + 1)


def plot_bars(contenders: list[Contender], path: str | Path, title: str) -> Path:
    """Median latency per contender, whiskers from the 25th to the 75th percentile."""
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    measured = [c for c in contenders if c.samples_s]
    summaries = [c.summary() for c in measured]
    medians = [s["median_ms"] for s in summaries]
    low = [m - s["p25_ms"] for m, s in zip(medians, summaries)]
    high = [s["p75_ms"] - m for m, s in zip(medians, summaries)]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(measured), 4))
    ax.bar(range(len(measured)), medians, yerr=[low, high], capsize=4,
           color=["#999999" if c.name == UNTUNED else "#3a7ec0" if c.name.startswith("TVM") else "#d9823b"
                  for c in measured])
    ax.set_xticks(range(len(measured)), [c.name for c in measured], rotation=20, ha="right")
    ax.set_ylabel("end-to-end latency (ms), median")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)
