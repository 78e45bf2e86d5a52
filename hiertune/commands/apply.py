"""`hiertune apply`: compile tasks with their best records through MetaSchedule's database; check outputs."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", required=True, help="records file written by tune or baseline")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--task", action="append", help="task name(s); default: every task in the records")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from hiertune.errors import HiertuneError
    from hiertune.platform.apply import apply_best
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.tvm_support import make_target

    if not Path(args.records).exists():
        raise HiertuneError(f"--records {args.records} does not exist; run `hiertune tune` or `hiertune baseline` first")
    store = RecordStore(args.records, writer=False)  # a live run's records can be applied
    if not store.tasks():
        raise HiertuneError(f"--records {args.records} holds no tuning records; pass the file that "
                            "`hiertune tune --records` or `hiertune baseline --records` wrote")
    target = make_target(args.target)
    table = Table(title=f"best schedules from {args.records}")
    for column in ("task", "best latency (ms)", "reference", "max abs error", "matches"):
        table.add_column(column)
    all_ok = True
    for task in args.task or store.tasks():
        report = apply_best(store, task, target)
        all_ok &= report.ok
        table.add_row(task, f"{report.best_latency_s * 1e3:.4f}", report.reference,
                      f"{report.max_abs_error:.2e}", "yes" if report.ok else "NO")
    Console().print(table)
    return 0 if all_ok else 1
