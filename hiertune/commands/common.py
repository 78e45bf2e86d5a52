"""Arguments and set-up shared by the commands (target, runner, records, Ray, output files)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError


def add_runner_args(parser: argparse.ArgumentParser, default_records: str | None = None) -> None:
    parser.add_argument("--target", default="llvm", help="'llvm', 'cuda' or a TVM JSON target dict")
    parser.add_argument("--records", default=default_records, required=default_records is None,
                        help="JSON-lines records file; an existing file is resumed")
    parser.add_argument("--runner-cores", type=int, default=1,
                        help="cores the measurement runner actor holds (TVM_NUM_THREADS)")
    parser.add_argument("--runners", type=int, default=None, metavar="N",
                        help="measure on a pool of N runner actors spread over the cluster's nodes "
                             "(0: one per node that has the target's resource; default: one runner)")
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (default: RAY_ADDRESS or local)")
    parser.add_argument("--no-ray", action="store_true", help="measure in this process instead of a Ray actor")


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


def workload_from_args(args: argparse.Namespace, target: Any) -> Any:
    from hiertune.workloads import get_workload

    name = getattr(args, "network", None) or getattr(args, "workload", None)
    if not name:
        raise HiertuneError("give --workload (e.g. GMM-S) or --network (e.g. resnet18)")
    return get_workload(name, target)


def setup_runner(args: argparse.Namespace, target: Any) -> Any:
    """The MeasureRunner (or, with --runners, the RunnerPool) of the common arguments; starts or
    joins Ray unless --no-ray."""
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.runners import RunnerConfig, create_runner

    device = "gpu" if target.kind.name == "cuda" else "cpu"
    work_dir = os.path.join(os.path.dirname(os.path.abspath(args.records)), "tmp")
    config = RunnerConfig(target=args.target, device=device, num_cpus=args.runner_cores, work_dir=work_dir)
    runners = getattr(args, "runners", None)
    if runners is not None and (args.no_ray or runners < 0):
        raise HiertuneError(f"--runners {runners} needs Ray and a count >= 0 (0: one per node); drop --no-ray")
    if not args.no_ray:
        init_ray(RayConfig(address=args.ray_address))
    if runners is not None:
        from hiertune.platform.runner_pool import create_pool

        return create_pool(config, num_runners=runners or None)
    return create_runner(config, use_ray=not args.no_ray)


def progress_bar(total: int, initial: int, description: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=min(initial, total), desc=description, unit="trial", dynamic_ncols=True)
