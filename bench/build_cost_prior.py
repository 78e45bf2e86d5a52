"""Build a cost-model prior (`CostModelConfig.prior`) from measured records: per operator, up to
`--per-task` of its measured schedules (a seeded random draw from every run's records pooled),
their MetaSchedule per-store features and latencies, and the target kind they ran on.

Only selection-half records (shape index 1 of each family) go in: the report half is never used
to choose anything, and a prior built on it would be tuning to it. `--leave-one-out DIR` also
writes DIR/without_<FAMILY>.npz for each family, the prior an A/B uses on that family's case
(`--space-option 'cost_model.prior=DIR/without_{family}.npz'`), so the prior has never seen the
operator it is judged on.

    python bench/build_cost_prior.py --records 'runs/ab_*/*_1_[012]/*.jsonl' \\
        --out hiertune/data/cost_prior_llvm.npz --leave-one-out runs/priors
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from cost_model_offline import load_operator  # noqa: E402

FAILED_S = 1e10  # MetaSchedule's cost for a failed run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="glob of records files, quoted (operator dirs named FAM_1_*)")
    parser.add_argument("--per-task", type=int, default=128, help="schedules kept per operator")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--leave-one-out", type=Path, default=None, metavar="DIR",
                        help="also write DIR/without_<FAMILY>.npz per family")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from tqdm import tqdm

    from hiertune.policies.cost_model import CostModel, save_prior
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm", num_cores=1)
    by_family: dict[str, list[str]] = defaultdict(list)
    for path in sorted(glob.glob(args.records)):
        by_family[Path(path).parent.name.split("_")[0]].append(path)
    if not by_family:
        raise SystemExit(f"--records {args.records}: no records files match")
    model = CostModel()
    rng = np.random.default_rng(args.seed)
    tasks: dict[str, Any] = {}
    for family, files in tqdm(sorted(by_family.items()), desc="operators"):
        _, _, pool = load_operator(family, files, target)
        rows = list(pool.values())
        keep = rng.choice(len(rows), size=min(args.per_task, len(rows)), replace=False)
        states = [rows[i][0] for i in keep]
        feats = model.features(states)
        ok = [i for i, f in enumerate(feats) if len(f)]
        tasks[f"{family}:1"] = ([feats[i] for i in ok], [rows[keep[i]][1] if np.isfinite(rows[keep[i]][1]) else FAILED_S
                                                          for i in ok])
    kind = target.kind.name
    save_prior(args.out, tasks, kind)
    print(f"wrote {args.out}: {len(tasks)} operators, {sum(len(v[0]) for v in tasks.values())} schedules, "
          f"{args.out.stat().st_size / 1e6:.1f} MB")
    if args.leave_one_out:
        for name in tasks:
            save_prior(args.leave_one_out / f"without_{name.split(':')[0]}.npz",
                        {n: v for n, v in tasks.items() if n != name}, kind)
        print(f"wrote {len(tasks)} leave-one-out priors to {args.leave_one_out}")


if __name__ == "__main__":
    main()
