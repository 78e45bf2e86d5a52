"""Build the cost-model prior (`CostModelConfig.prior`) from the selection half's records, and
leave-one-family-out priors for an A/B of it.

Only selection-half records (shape index 1 of each family) go in: the report half is never used
to choose anything, and a prior built on it would be tuning to it. `--leave-one-out DIR` also
writes DIR/without_<FAMILY>.npz for each family, the prior an A/B uses on that family's case
(`--space-option 'cost_model.prior=DIR/without_{family}.npz'`), so the prior has never seen the
operator it is judged on. `hiertune prior` builds one from any records files.

    python bench/build_cost_prior.py --records 'runs/ab_*/*_1_[012]/*.jsonl' \\
        --out hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors

Once the records are gone, the leave-one-out priors come from the shipped prior itself:

    python bench/build_cost_prior.py --from-prior hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", help="glob of records files, quoted")
    source.add_argument("--from-prior", type=Path, help="a prior file (.npz) instead of records: only --leave-one-out")
    parser.add_argument("--per-task", type=int, default=128, help="schedules kept per operator")
    parser.add_argument("--out", type=Path, default=None, help="the prior to write (with --records)")
    parser.add_argument("--leave-one-out", type=Path, default=None, metavar="DIR",
                        help="also write DIR/without_<FAMILY>.npz per family")
    args = parser.parse_args()

    from hiertune.platform.cost_prior import collect_prior
    from hiertune.policies.cost_model import load_prior, save_prior
    from hiertune.workloads.tvm_support import make_target

    if args.from_prior:
        if not args.leave_one_out:
            raise SystemExit("--from-prior: pass --leave-one-out DIR (the prior itself needs no rebuilding)")
        tasks, kind = load_prior(args.from_prior)
    else:
        if args.out is None:
            raise SystemExit("--records: pass --out, the prior file to write")
        paths = sorted(glob.glob(args.records))
        if not paths:
            raise SystemExit(f"--records {args.records}: no records files match")
        target = make_target("llvm", num_cores=1)
        tasks = collect_prior(paths, target, args.per_task)
        kind = target.kind.name
        save_prior(args.out, tasks, kind)
        print(f"wrote {args.out}: {sorted(tasks)}, {sum(len(v[0]) for v in tasks.values())} schedules, "
              f"{args.out.stat().st_size / 1e6:.2f} MB")
    if args.leave_one_out:
        for name in tasks:
            family = name.split(":")[0]
            save_prior(args.leave_one_out / f"without_{family}.npz",
                       {n: v for n, v in tasks.items() if n.split(":")[0] != family}, kind)
        print(f"wrote {len(tasks)} leave-one-out priors to {args.leave_one_out}")


if __name__ == "__main__":
    main()
