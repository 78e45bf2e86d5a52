"""Build the cost-model prior (`CostModelConfig.prior`) from the selection half's records, and
leave-one-family-out priors for an A/B of it.

Only selection-half records (shape index 1 of each family) go in: the report half is never used
to choose anything, and a prior built on it would be tuning to it. `--leave-one-out DIR` also
writes DIR/without_<FAMILY>.npz for each family, the prior an A/B uses on that family's case
(`--space-option 'cost_model.prior=DIR/without_{family}.npz'`), so the prior has never seen the
operator it is judged on. `hiertune prior` builds one from any records files.

    python bench/build_cost_prior.py --records 'runs/ab_*/*_1_[012]/*.jsonl' \\
        --out hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="glob of records files, quoted")
    parser.add_argument("--per-task", type=int, default=128, help="schedules kept per operator")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--leave-one-out", type=Path, default=None, metavar="DIR",
                        help="also write DIR/without_<FAMILY>.npz per family")
    args = parser.parse_args()

    from hiertune.platform.cost_prior import collect_prior
    from hiertune.policies.cost_model import save_prior
    from hiertune.workloads.tvm_support import make_target

    paths = sorted(glob.glob(args.records))
    if not paths:
        raise SystemExit(f"--records {args.records}: no records files match")
    target = make_target("llvm", num_cores=1)
    tasks = collect_prior(paths, target, args.per_task)
    save_prior(args.out, tasks, target.kind.name)
    print(f"wrote {args.out}: {sorted(tasks)}, {sum(len(v[0]) for v in tasks.values())} schedules, "
          f"{args.out.stat().st_size / 1e6:.2f} MB")
    if args.leave_one_out:
        for name in tasks:
            family = name.split(":")[0]
            save_prior(args.leave_one_out / f"without_{family}.npz",
                       {n: v for n, v in tasks.items() if n.split(":")[0] != family}, target.kind.name)
        print(f"wrote {len(tasks)} leave-one-out priors to {args.leave_one_out}")


if __name__ == "__main__":
    main()
