"""Arguments and set-up shared by the commands (target, runner, records, Ray, output files)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError
from hiertune.workloads.tasks import BUILTIN_NETWORKS


def add_runner_args(parser: argparse.ArgumentParser, default_records: str | None = None) -> None:
    from hiertune.platform.runners import RunnerConfig

    parser.add_argument("--target", default="llvm", help="'llvm', 'cuda' or a TVM JSON target dict")
    parser.add_argument("--records", default=default_records, required=default_records is None,
                        help="JSON-lines records file; an existing file is resumed")
    parser.add_argument("--runner-cores", type=int, default=1,
                        help="cores the measurement runner actor holds (CPU: TVM_NUM_THREADS; "
                             "GPU: parallel nvcc builds)")
    parser.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=RunnerConfig.cache_flush,
                        help="CPU: time candidates with their weights flushed from the caches before each "
                             "run, as they run inside a model (the default; --no-cache-flush: back-to-back "
                             "runs, warm)")
    parser.add_argument("--runners", type=int, default=None, metavar="N",
                        help="measure on a pool of N runner actors spread over the cluster's nodes "
                             "(0: one per node that has the target's resource; default: one runner)")
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (default: RAY_ADDRESS or local)")
    parser.add_argument("--no-ray", action="store_true", help="measure in this process instead of a Ray actor")
    parser.add_argument("--measure-default", choices=("auto", "always", "never"), default="auto",
                        help="after the search, measure each task's TVM default schedule once, so `compile` "
                             "keeps it where it is faster (auto: on GPU targets, where DLight's rules can "
                             "beat a short search; on CPU the default is untuned loops)")


def ensure_writable(path: str | Path, flag: str) -> Path:
    """Create the folder of an output file and check it can be written, before the work whose
    result it is to hold: a solve or a tuning run must not end in a write error."""
    out = Path(path)
    if out.is_dir():
        raise HiertuneError(f"{flag} {out} is a folder; give a file name inside it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise HiertuneError(
            f"{flag} {out}: cannot create its folder {out.parent} ({err.strerror}); choose another path"
        ) from None
    existed = out.exists()
    try:
        with open(out, "a"):  # a real write test: permission bits say little to root or on /proc
            pass
    except OSError as err:
        raise HiertuneError(f"{flag} {out} is not writable ({err.strerror}); choose another path") from None
    if not existed:
        out.unlink()
    return out


def check_outputs(args: argparse.Namespace, *names: str) -> None:
    """ensure_writable for each named output argument that is set (names as in `args`)."""
    for name in names:
        if getattr(args, name, None):
            ensure_writable(getattr(args, name), f"--{name}")


def add_workload_args(parser: argparse.ArgumentParser, *, required: bool = True, operators: bool = True) -> None:
    """What to tune or compile: one operator (--workload) or a whole model (--model) and the options
    its import may need."""
    what = parser.add_mutually_exclusive_group(required=required) if operators else parser
    if operators:
        what.add_argument("--workload", help="one operator, e.g. GMM-S, C2D:2, C2D:0:b16 (`hiertune workloads`)")
    what.add_argument("--model", required=required and not operators,
                      help="whole model: .onnx file, file.py:factory, hf:bert-base-uncased (hf:resnet-50, "
                           "hf:mobilenet-v2, hf:vit-base) or a built-in network (resnet18, resnet50, tiny-convnet)")
    parser.add_argument("--input-shape", action="append", metavar="NAME:DIMS",
                        help="shape of an ONNX input with dynamic dims, e.g. input:1x3x224x224 (repeatable)")
    parser.add_argument("--input-dtype", help="dtype of the ONNX inputs where the file does not say (e.g. float32)")
    parser.add_argument("--seq-len", type=int, default=128, help="sequence length of hf: text models (128)")
    parser.add_argument("--layers", type=int, help="encoder layers of hf: transformer models (default: the config's)")


def model_from_args(args: argparse.Namespace) -> Any:
    """The `--model` of the common arguments, imported (a `hiertune.workloads.models.Model`)."""
    from hiertune.workloads.models import load_model, parse_input_shapes

    if getattr(args, "seq_len", 128) <= 0 or (getattr(args, "layers", None) or 1) <= 0:
        raise HiertuneError("--seq-len and --layers must be positive")
    return load_model(args.model, parse_input_shapes(args.input_shape), args.input_dtype,
                      seq_len=args.seq_len, layers=args.layers)


def workload_from_args(args: argparse.Namespace, target: Any) -> Any:
    """The tasks of --workload or --model."""
    if getattr(args, "model", None):
        from hiertune.workloads.models import model_workload

        return model_workload(model_from_args(args), target)
    from hiertune.workloads import get_workload

    if not getattr(args, "workload", None):
        raise HiertuneError("give --workload (an operator, e.g. GMM-S) or --model (e.g. model.onnx, resnet18)")
    if args.workload.strip().lower() in BUILTIN_NETWORKS:
        raise HiertuneError(f"{args.workload!r} is a whole network; use --model {args.workload}")
    return get_workload(args.workload, target)


def setup_runner(args: argparse.Namespace, target: Any) -> Any:
    """The MeasureRunner (or, with --runners, the RunnerPool) of the common arguments; starts or
    joins Ray unless --no-ray."""
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import RunnerConfig, create_runner

    device = "gpu" if target.kind.name == "cuda" else "cpu"
    work_dir = os.path.join(os.path.dirname(os.path.abspath(args.records)), "tmp")
    # A GPU runner times on the GPU, so its cores can all build (nvcc takes seconds per candidate);
    # a CPU runner builds on one core and times on the rest.
    config = RunnerConfig(target=args.target, device=device, num_cpus=args.runner_cores, work_dir=work_dir,
                          cache_flush=args.cache_flush,
                          build_workers=args.runner_cores if device == "gpu" else 1)
    runners = getattr(args, "runners", None)
    if runners is not None and (args.no_ray or runners < 0):
        raise HiertuneError(f"--runners {runners} needs Ray and a count >= 0 (0: one per node); drop --no-ray")
    if not args.no_ray:
        init_ray(RayConfig(address=args.ray_address))
    if runners is not None:
        from hiertune.platform.runner_pool import create_pool

        return create_pool(config, num_runners=runners or None)
    return create_runner(config, use_ray=not args.no_ray)


def measure_default_schedules(args: argparse.Namespace, workload: Any, target: Any, runner: Any, store: Any) -> str:
    """`--measure-default`'s step, run while the runner is up; a line saying what it measured."""
    from hiertune.platform.default_schedules import measure_defaults
    from hiertune.workloads.tvm_support import is_gpu_target

    if args.measure_default == "never" or (args.measure_default == "auto" and not is_gpu_target(target)):
        return ""
    records = measure_defaults(workload, target, runner, store)
    if not records:
        return ""
    ok = [r for r in records if r.ok]
    faster = sum(1 for r in ok if store.best(r.task) is r)
    return (f"TVM default schedules measured for {len(records)} task(s) ({len(records) - len(ok)} failed); "
            f"the default is the best measured on {faster}")


def progress_bar(total: int, initial: int, description: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=min(initial, total), desc=description, unit="trial", dynamic_ncols=True)
