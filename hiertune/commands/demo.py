"""`hiertune demo`: the user's path end to end, small. A few-layer ONNX convnet (written here) is tuned
by HARL and by MetaSchedule's evolutionary search at the same measured-trial budget on the same Ray
runner actor, compiled into one library per tuner, checked against ONNX Runtime and benchmarked
end to end beside TVM untuned and ONNX Runtime, all at one thread.

Records, libraries, the model and the plots go to --out (a second run resumes the records).
"""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials-per-task", type=int, default=8, help="measured trials per task, per tuner (8)")
    parser.add_argument("--repeats", type=int, default=10, help="benchmark samples per contender (10)")
    parser.add_argument("--out", default="runs/demo", help="folder for the model, records, libraries and plots")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from hiertune.commands.benchmark import result_table
    from hiertune.commands.common import ensure_writable, progress_bar
    from hiertune.errors import HiertuneError
    from hiertune.platform.compile_model import check_outputs, compile_records
    from hiertune.platform.e2e_bench import TUNER_LABELS, contenders, measure, plot_bars, set_threads
    from hiertune.platform.harl_search import TUNER as HARL, HarlConfig, HarlSearch
    from hiertune.platform.ms_baseline import TUNER as MS, BaselineConfig, run_baseline
    from hiertune.platform.ray_runtime import RayConfig, init_ray
    from hiertune.platform.records import RecordStore
    from hiertune.platform.runners import RunnerConfig, create_runner
    from hiertune.workloads.demo_model import write_convnet_onnx
    from hiertune.workloads.models import load_model, model_workload
    from hiertune.workloads.tvm_support import make_target

    if args.trials_per_task < 1 or args.repeats < 1:
        raise HiertuneError("--trials-per-task and --repeats must be at least 1")
    console = Console()
    out = Path(args.out)
    for name in ("convnet.onnx", "harl.jsonl", "metaschedule.jsonl", "benchmark.png"):
        ensure_writable(out / name, "--out")
    set_threads(1)
    target = make_target("llvm", num_cores=1)
    onnx_path = write_convnet_onnx(out / "convnet.onnx")
    model = load_model(str(onnx_path))
    workload = model_workload(model, target)
    trials = args.trials_per_task * len(workload.tasks)
    console.print(f"[bold]hiertune demo[/]: {onnx_path} ({len(workload.tasks)} tasks), {trials} measured trials "
                  f"per tuner, llvm ({target.attrs.get('mcpu', '')}), 1 thread")
    resources = init_ray(RayConfig())
    console.print(f"Ray up: {resources.get('CPU', 0):g} CPUs")
    runner = create_runner(RunnerConfig(target="llvm", num_cpus=1, work_dir=str(out / "tmp")))
    stores = {HARL: RecordStore(out / "harl.jsonl"), MS: RecordStore(out / "metaschedule.jsonl")}
    try:
        bar = progress_bar(trials, len(stores[HARL].trials(tuner=HARL)), "HARL")
        HarlSearch(workload, target, runner, stores[HARL], HarlConfig(trials=trials)).run(
            on_round=lambda log: bar.update(log.trials - bar.n))
        bar.close()
        bar = progress_bar(trials, len(stores[MS].trials(tuner=MS)), "MetaSchedule")
        # 8 candidates a round (not tune_relax's 64), so this small budget reaches every task
        run_baseline(workload, target, runner, stores[MS],
                     BaselineConfig(trials=trials, batch=8, work_dir=str(out / "ms_work")),
                     on_measured=lambda task, n: bar.update(n))
        bar.close()
    finally:
        runner.close()

    table = Table(title="compiled, checked against ONNX Runtime")
    for column in ("tuner", "library", "tasks tuned", "max |error|", "tolerance", "matches"):
        table.add_column(column)
    all_ok = True
    records = []
    for tuner, store in stores.items():
        library = out / f"convnet_{tuner}.so"
        status = compile_records(model, workload, store, target, library, out / f"{tuner}_database")
        from tvm import runtime

        result = check_outputs(model, runtime.load_module(str(library)), target)
        all_ok &= result.ok
        table.add_row(tuner, library.name, f"{sum(s.tuned for s in status)}/{len(status)}",
                      f"{result.max_abs_error:.1e}", f"{result.tolerance:.1e}", "yes" if result.ok else "NO")
        records.append((TUNER_LABELS[tuner], store))
    console.print(table)
    field = contenders(model, workload, records, target, 1, out)
    measure(field, args.repeats)
    console.print(result_table(model.name, 1, field))
    plot = plot_bars(field, out / "benchmark.png", f"{model.name}, 1 thread")
    console.print(f"bar chart: {plot}; records, libraries and the model: {out}/")
    console.print("load a library with plain TVM: relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())")
    return 0 if all_ok else 1
