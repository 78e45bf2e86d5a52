"""`hiertune benchmark`: whole-model latency, TVM untuned and tuned beside PyTorch and ONNX Runtime.

    hiertune benchmark --model model.onnx --records runs/harl.jsonl --records runs/ms.jsonl --json b.json --plot b.png

All contenders run at one thread count (the records' target `num-cores` unless --threads), in one
process, interleaved over --repeats samples; the table gives medians, spread and ratios.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hiertune.commands.common import add_workload_args
from hiertune.plotting import plot_path

if TYPE_CHECKING:
    from hiertune.platform.records import RecordStore


def register(parser: argparse.ArgumentParser) -> None:
    add_workload_args(parser, operators=False)
    parser.add_argument("--records", action="append", default=[], metavar="[LABEL=]FILE",
                        help="records to compile with (repeatable); LABEL defaults to the file's tuner")
    parser.add_argument("--target", default="llvm", help="the target the records were tuned for")
    parser.add_argument("--threads", type=int, help="threads for every contender (default: the records' "
                                                    "target num-cores, else 1)")
    parser.add_argument("--repeats", type=int, default=10, help="samples per contender (10)")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (it compiles slowly)")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--plot", type=plot_path, help="write a bar chart PNG here")
    parser.add_argument("--work-dir", default="runs/benchmark", help="folder for the exported ONNX file")


def parse_records(items: list[str]) -> list[tuple[str, RecordStore]]:
    """[LABEL=]FILE items as (label, RecordStore), each file read once and read-only (a live
    `tune` on it keeps its lock); a file's label is the tuner that wrote most of it."""
    from pathlib import Path

    from hiertune.errors import HiertuneError
    from hiertune.platform.e2e_bench import TUNER_LABELS
    from hiertune.platform.records import RecordStore

    pairs = []
    for item in items:
        label, sep, path = item.partition("=")
        if not sep:
            label, path = "", item
        if not Path(path).is_file():
            raise HiertuneError(f"--records {path} does not exist; run `hiertune tune --model ...` first")
        store = RecordStore(path, writer=False)
        if not label:
            tuners = [m.tuner for m in store.measures]
            label = max(set(tuners), key=tuners.count) if tuners else Path(path).stem
            label = TUNER_LABELS.get(label, label)
        pairs.append((label, store))
    return pairs


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from rich.console import Console

    from hiertune.commands.common import check_outputs, model_from_args
    from hiertune.errors import HiertuneError
    from hiertune.platform.e2e_bench import contenders, measure, plot_bars, set_threads
    from hiertune.workloads.models import model_workload
    from hiertune.workloads.tvm_support import make_target

    check_outputs(args, "json", "plot")
    if args.repeats < 1 or (args.threads is not None and args.threads < 1):
        raise HiertuneError("--repeats and --threads must be at least 1")
    records = parse_records(args.records)
    threads = args.threads
    if threads is None:
        cores = [m.record[2].get("num-cores") for _, store in records for m in store.measures[:1]]
        threads = int(cores[0]) if cores and cores[0] else 1
    set_threads(threads)
    console = Console()
    target = make_target(args.target, num_cores=threads)
    model = model_from_args(args)
    workload = model_workload(model, target)
    console.print(f"[bold]benchmark[/] {model.name}: {len(workload.tasks)} tasks, {threads} thread(s), "
                  f"{args.repeats} interleaved repeats")
    field = contenders(model, workload, records, target, threads,
                       Path(args.work_dir), torch_compile=not args.no_torch_compile)
    from hiertune.commands.common import progress_bar

    bar = progress_bar(args.repeats, 0, "repeats")
    measure(field, args.repeats, on_repeat=lambda r: bar.update(1))
    bar.close()
    console.print(result_table(model.name, threads, field))
    result = {"model": model.name, "threads": threads, "repeats": args.repeats, "target": str(target),
              "contenders": {c.name: c.summary() for c in field}}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
        console.print(f"JSON -> {args.json}")
    if args.plot:
        console.print(f"plot -> {plot_bars(field, args.plot, f'{model.name}, {threads} thread(s)')}")
    return 0


def result_table(name: str, threads: int, field: list) -> object:
    from rich.table import Table

    from hiertune.platform.e2e_bench import UNTUNED

    untuned = next((c.median_s for c in field if c.name == UNTUNED), float("inf"))
    best_other = min((c.median_s for c in field if not c.name.startswith("TVM")), default=float("inf"))
    table = Table(title=f"{name}: end-to-end latency, {threads} thread(s); /x = latency ratio to x",
                  caption="tuned: tasks with a tuned schedule; best other: the fastest non-TVM contender")
    for column in ("contender", "median ms", "p25-p75 ms", "tuned", "/untuned", "/best other", "note"):
        table.add_column(column, justify="left" if column in ("contender", "note") else "right")
    for c in field:
        s = c.summary()
        measured = bool(c.samples_s)
        table.add_row(
            c.name, f"{s['median_ms']:.3f}" if measured else "-",
            f"{s['p25_ms']:.3f}-{s['p75_ms']:.3f}" if measured else "-",
            f"{c.tuned_tasks}/{c.tasks}" if c.tasks is not None else "",
            f"{c.median_s / untuned:.3f}" if measured and untuned < float("inf") else "-",
            f"{c.median_s / best_other:.3f}" if measured and best_other < float("inf") else "-",
            c.note,
        )
    return table
