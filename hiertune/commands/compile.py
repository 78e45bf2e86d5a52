"""`hiertune compile`: a whole model built with its tuning records into one shared library.

    hiertune compile --model model.onnx --records runs/model.jsonl --out model.so --check

The library runs with plain TVM: `relax.VirtualMachine(tvm.runtime.load_module("model.so"), tvm.cpu())`.
The records are also written as a MetaSchedule JSONDatabase folder (`<out>_database/`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hiertune.commands.common import add_workload_args

if TYPE_CHECKING:  # the CLI imports every command at start-up; TVM only when one runs
    from hiertune.platform.compile_model import CheckResult


def register(parser: argparse.ArgumentParser) -> None:
    add_workload_args(parser, operators=False)
    parser.add_argument("--records", required=True, help="records file written by tune or baseline")
    parser.add_argument("--out", required=True, help="shared library to write, e.g. model.so")
    parser.add_argument("--database", help="JSONDatabase folder to write (default: <out>_database next to --out)")
    parser.add_argument("--target", default="llvm", help="the target the records were tuned for")
    parser.add_argument("--check", action="store_true",
                        help="compare outputs with ONNX Runtime (ONNX models) or PyTorch on random inputs")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from hiertune.commands.common import ensure_writable, model_from_args
    from hiertune.errors import HiertuneError
    from hiertune.platform.compile_model import check_outputs, compile_records, default_database_folder
    from hiertune.platform.records import RecordStore
    from hiertune.workloads.models import model_workload
    from hiertune.workloads.tvm_support import make_target

    console = Console()
    out = ensure_writable(args.out, "--out")
    if not Path(args.records).is_file():
        raise HiertuneError(f"--records {args.records} does not exist; run `hiertune tune --model ...` first")
    store = RecordStore(args.records, writer=False)  # read only: compiling beside a live `tune` is fine
    if not store.tasks():
        raise HiertuneError(f"--records {args.records} holds no tuning records; pass the file `hiertune tune` wrote")
    target = make_target(args.target)
    model = model_from_args(args)
    workload = model_workload(model, target)
    folder = Path(args.database) if args.database else default_database_folder(out)
    status = compile_records(model, workload, store, target, out, folder)
    console.print(status_table(model.name, status))
    tuned = sum(s.tuned for s in status)
    console.print(f"{tuned} of {len(status)} tasks run tuned; {len(status) - tuned} fall back to TVM's default "
                  "(CPU: untuned loops; GPU: DLight schedules)")
    console.print(f"compiled -> {out}; MetaSchedule database -> {folder}/")
    if not args.check:
        return 0
    from tvm import runtime

    result = check_outputs(model, runtime.load_module(str(out)), target)
    console.print(check_line(result))
    return 0 if result.ok else 1


def check_line(result: CheckResult) -> str:
    from hiertune.platform.compile_model import RTOL

    verdict = "OK" if result.ok else "MISMATCH"
    return (f"check vs {result.reference} on random inputs: max |error| {result.max_abs_error:.2e} "
            f"(output scale {result.scale:.2e}; tolerance {RTOL:g} x scale = {result.tolerance:.2e}): {verdict}")


def status_table(name: str, status: list) -> object:
    from rich.table import Table

    table = Table(title=f"{name}: tasks in the compiled model")
    for column in ("task", "weight", "schedule", "best (ms)", "tuner"):
        table.add_column(column, justify="left" if column in ("task", "schedule", "tuner") else "right")
    for s in sorted(status, key=lambda s: s.tuned):
        schedule = "tuned" if s.tuned else "TVM default (faster)" if s.best_s is not None else "[red]TVM default[/]"
        table.add_row(s.name, str(s.weight), schedule,
                      f"{s.best_s * 1e3:.4f}" if s.best_s is not None else "-", s.tuner)
    return table
