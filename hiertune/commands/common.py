"""Arguments and set-up shared by the tuning commands (target, runner, records, Ray)."""

from __future__ import annotations

import argparse
import os
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


def workload_from_args(args: argparse.Namespace, target: Any) -> Any:
    from hiertune.envs.workloads import get_workload

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
