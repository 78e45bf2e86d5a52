"""Build the cost-model prior (`CostModelConfig.prior`) from records, and leave-one-family-out
priors for an A/B of it.

No report-half records go in (shape index 2, batch 16, the networks' tasks): the report half is
never used to choose anything, and a prior built on it would be tuning to it. The shipped prior
holds the selection half's shapes (index 1). `--leave-one-out DIR` also
writes DIR/without_<FAMILY>.npz for each family, the prior an A/B uses on that family's case
(`--space-option 'cost_model.prior=DIR/without_{family}.npz'`), so the prior has never seen the
operator it is judged on. `hiertune prior` builds one from any records files.

    python bench/build_cost_prior.py --records 'runs/ab_*/*_1_[012]/*.jsonl' \\
        --out hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors

Once the records are gone, the leave-one-out priors come from the shipped prior itself, and
`--records` beside `--from-prior` adds other tasks to it (other shapes of the same families):

    python bench/build_cost_prior.py --from-prior hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors
    python bench/build_cost_prior.py --from-prior hiertune/data/cost_prior_llvm.npz \\
        --records 'runs/prior_extra/*.jsonl' --leave-one-out runs/priors_extra
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", help="glob of records files, quoted")
    parser.add_argument("--from-prior", type=Path, help="a prior file (.npz) to start from; --records add to it")
    parser.add_argument("--per-task", type=int, default=128, help="schedules kept per operator")
    parser.add_argument("--out", type=Path, default=None, help="the prior to write")
    parser.add_argument("--leave-one-out", type=Path, default=None, metavar="DIR",
                        help="also write DIR/without_<FAMILY>.npz per family")
    args = parser.parse_args()
    if not (args.records or args.from_prior):
        raise SystemExit("pass --records, --from-prior or both")
    if not (args.out or args.leave_one_out):
        raise SystemExit("pass --out, --leave-one-out or both")

    from hiertune.platform.cost_prior import collect_prior
    from hiertune.policies.cost_model import load_prior, save_prior
    from hiertune.workloads.operators import operator_family
    from hiertune.workloads.tvm_support import make_target

    tasks, kind = load_prior(args.from_prior) if args.from_prior else ({}, "llvm")
    if args.records:
        paths = sorted(glob.glob(args.records))
        if not paths:
            raise SystemExit(f"--records {args.records}: no records files match")
        target = make_target(kind, num_cores=1)
        added = collect_prior(paths, target, args.per_task)
        if clash := sorted(set(added) & set(tasks)):
            raise SystemExit(f"--records hold tasks the prior already has ({', '.join(clash)}): build from records alone")
        tasks = {**tasks, **added}
    if args.out:
        save_prior(args.out, tasks, kind)
        print(f"wrote {args.out}: {sorted(tasks)}, {sum(len(v[0]) for v in tasks.values())} schedules, "
              f"{args.out.stat().st_size / 1e6:.2f} MB")
    if args.leave_one_out:
        family = {name: operator_family(name) or name for name in tasks}  # GMM-S is GMM:0
        for left_out in sorted(set(family.values())):
            save_prior(args.leave_one_out / f"without_{left_out}.npz",
                       {n: v for n, v in tasks.items() if family[n] != left_out}, kind)
        print(f"wrote {len(set(family.values()))} leave-one-out priors to {args.leave_one_out}")


if __name__ == "__main__":
    main()
