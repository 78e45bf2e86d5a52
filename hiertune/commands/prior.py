"""`hiertune prior`: a cost-model prior from earlier runs' records, for `tune --cost-prior`.

    hiertune prior --records runs/resnet.jsonl runs/bert.jsonl --out runs/prior.npz
    hiertune tune --model new.onnx --input-shape x:1x3x224x224 --cost-prior runs/prior.npz
"""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", nargs="+", required=True, help="records files written by tune or baseline")
    parser.add_argument("--out", required=True, help="the prior (.npz)")
    parser.add_argument("--per-task", type=int, default=128,
                        help="measured schedules kept per task (a random draw), so no one long run outweighs the rest")
    parser.add_argument("--target", default="llvm", help="the target the records were measured on")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from hiertune.errors import HiertuneError
    from hiertune.platform.cost_prior import collect_prior
    from hiertune.policies.cost_model import save_prior
    from hiertune.workloads.tvm_support import make_target

    missing = [p for p in args.records if not Path(p).exists()]
    if missing:
        raise HiertuneError(f"--records {' '.join(missing)}: no such file; pass records that `hiertune tune` "
                            "or `hiertune baseline` wrote")
    if not args.out.endswith(".npz"):
        raise HiertuneError(f"--out {args.out}: a prior is an .npz file; name it e.g. {Path(args.out).stem}.npz")
    target = make_target(args.target)
    tasks = collect_prior(args.records, target, args.per_task)
    save_prior(args.out, tasks, target.kind.name)
    Console().print(f"prior {args.out}: {len(tasks)} task(s), {sum(len(v[0]) for v in tasks.values())} schedules "
                    f"measured on {target.kind.name}; use it with `hiertune tune --cost-prior {args.out}`")
    return 0
