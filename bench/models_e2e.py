"""Whole models, tuned and shipped: HARL vs MetaSchedule at equal budgets, then end-to-end latency
against PyTorch and ONNX Runtime — all through the `hiertune` commands a user runs.

Quick mode: BERT (2 encoder layers, seq 128), MobileNetV2, ResNet-50 (transformers configs, random
weights), 16 measured trials per task for each tuner on the same runner (MetaSchedule at
tune_relax's defaults but the trial count: 64 candidates per round, gradient task scheduler), then
`hiertune compile --check` and `hiertune benchmark`. Deep mode: the BERT encoder, HARL at 128
trials per task, benchmarked against ONNX Runtime.

    python bench/models_e2e.py --mode quick
    python bench/models_e2e.py --mode deep
    python bench/models_e2e.py --models bert-2l --tuners harl harl-no-prior metaschedule \
        --out bench/results/models_e2e_prior.json --work runs/models_e2e_prior     # the prior's A/B
    python bench/models_e2e.py --target cuda --models resnet-18 --per-task 8 --out bench/results/models_e2e_cuda.json
    python bench/models_e2e.py --models bert-2l --tuners harl harl-config --harl-config my.toml \
        --out runs/ab.json --work runs/ab     # HARL as shipped against HARL with a --config file

`--target cuda` runs the same steps on GPU 0 (runners hold a GPU, PyTorch and ONNX Runtime run there).

Records live in runs/models_e2e/ and are resumed on a rerun (finished steps are skipped);
bench/results/models_e2e.json is rewritten after every model, so a cut-off run keeps what finished.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from summary_stats import geomean

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OUT_JSON = RESULTS / "models_e2e.json"
WORK = ROOT / "runs" / "models_e2e"
TARGET = '{"kind": "llvm", "num-cores": 1}'  # one thread everywhere: tuning, runner and benchmark
# Smallest first, so a run cut short has finished models.
MODELS = {
    "bert-2l": ["--model", "hf:bert-base-uncased", "--layers", "2", "--seq-len", "128"],
    "mobilenet-v2": ["--model", "hf:mobilenet-v2"],
    "resnet-50": ["--model", "hf:resnet-50"],
}
# Named with --models only (not part of quick's set): fewer tasks, for a short GPU run, and models
# kept out of the quick set to check an option chosen there.
EXTRA_MODELS = {"tiny-convnet": ["--model", "tiny-convnet"], "resnet-18": ["--model", "resnet18"],
                "vit-2l": ["--model", "hf:vit-base", "--layers", "2"],
                "vit-s384-2l": ["--model", str(ROOT / "bench" / "models" / "vit_small_384.py") + ":make"]}
MS_ROUND = 64  # tune_relax's num_trials_per_iter
# What each tuner name runs: `hiertune tune` (HARL as a user gets it), HARL without its shipped
# cost-model prior (the prior's A/B on whole models), HARL with `--harl-config`'s settings (any
# option's A/B), MetaSchedule at tune_relax's defaults.
TUNERS = {
    "harl": ["tune"],
    "harl-no-prior": ["tune", "--ablation", "no-prior"],
    "harl-config": ["tune", "--config"],  # + the --harl-config file
    "metaschedule": ["baseline", "--batch", str(MS_ROUND)],
}


def hiertune(*argv: str) -> list[str]:
    return [sys.executable, "-m", "hiertune.cli", *argv]


def run_step(cmd: list[str], log: Path, attempts: int = 3) -> None:
    """One hiertune command, its output appended to the model's log. A failed step is rerun (records
    resume; on a loaded machine a runner actor can miss its start-up deadline); then the model stops."""
    for attempt in range(1, attempts + 1):
        with log.open("a") as f:
            f.write(f"\n$ {' '.join(cmd)}\n")
            f.flush()
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        if done.returncode in (0, 1):  # 1: compile --check found a mismatch, recorded in its output
            return
        print(f"  {' '.join(cmd[3:5])}: exit {done.returncode} (attempt {attempt}/{attempts}); see {log}", flush=True)
    raise RuntimeError(f"{' '.join(cmd[3:5])} failed {attempts} times; see {log}")


def model_tasks(model_args: list[str], target: str) -> Any:
    from hiertune.commands.common import model_from_args
    from hiertune.cli import build_parser
    from hiertune.workloads.models import model_workload
    from hiertune.workloads.tvm_support import make_target

    args = build_parser().parse_args(["compile", *model_args, "--records", "x", "--out", "x.so"])
    return model_workload(model_from_args(args), make_target(target))


def records_profile(workload: Any, path: Path) -> dict[str, Any]:
    """Where the tuned model's time goes, from the records: weight x best latency of each tuned task
    (as measured while tuning) and the tasks left to TVM's default loops."""
    from hiertune.platform.records import RecordStore

    store = RecordStore(path, writer=False)
    rows = []
    for task in workload.tasks:
        best = store.best(task.name)
        rows.append({"task": task.name, "weight": task.weight,
                     "weighted_best_ms": round(best.mean_s * task.weight * 1e3, 4) if best else None})
    tuned = [r for r in rows if r["weighted_best_ms"] is not None]
    return {"tuned_tasks_sum_ms": round(sum(r["weighted_best_ms"] for r in tuned), 3),
            "untuned_tasks": [r["task"] for r in rows if r["weighted_best_ms"] is None],
            "slowest_tuned_tasks": sorted(tuned, key=lambda r: -r["weighted_best_ms"])[:5]}


def is_trial(line: str) -> bool:
    """A tuner's measurement (not a workload line, nor TVM's default schedule measured beside them)."""
    return '"kind":"measure"' in line and '"tuner":"default"' not in line


def records_trials(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.open() if is_trial(line))


def first_trials(path: Path, n: int, out: Path) -> Path:
    """A copy of a records file that keeps its first `n` trials (and every other line)."""
    kept, lines = 0, []
    for line in path.open():
        if is_trial(line):
            if kept >= n:
                continue
            kept += 1
        lines.append(line)
    out.write_text("".join(lines))
    return out


def runner_cores(target: str) -> str:
    """One core for a CPU runner (the model runs at one thread); a GPU runner builds on half the host."""
    return str(max(1, (os.cpu_count() or 2) // 2)) if "cuda" in target else "1"


def run_model(name: str, per_task: int, tuners: list[str], work: Path, tune: bool = True,
              target: str = TARGET, harl_config: Path | None = None, seed: int | None = None) -> dict[str, Any]:
    """Tune (resumed), compile --check and benchmark one model; returns its JSON entry.

    Every tuner's records are cut to the trials the shortest has (at most the budget), so the
    comparison stays at an equal measured budget; `tune=False` (a run out of time) skips tuning,
    and the entry says how far it got."""
    model_args = {**MODELS, **EXTRA_MODELS}[name]
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{name}.log"
    workload = model_tasks(model_args, target)
    tasks = len(workload.tasks)
    trials = per_task * tasks
    commands = []
    records = {}
    started = time.time()
    for tuner in tuners:
        path = work / f"{name}_{tuner}.jsonl"
        records[tuner] = path
        command, *options = TUNERS[tuner]
        if tuner == "harl-config":
            options.append(str(harl_config))
        if seed is not None:
            options += ["--seed", str(seed)]
        cmd = hiertune(command, *model_args, "--trials", str(trials), "--records", str(path), "--target", target,
                       "--runner-cores", runner_cores(target), *options)
        commands.append(cmd)
        if tune and records_trials(path) < trials:
            run_step(cmd, log)
    tune_s = time.time() - started
    measured = min(min(records_trials(p) for p in records.values()), trials)
    # equal budgets: a tuner past the others (MetaSchedule may overshoot by part of a round) is cut back
    records = {t: first_trials(p, measured, work / f"{p.stem}_first{measured}.jsonl")
               if records_trials(p) > measured else p for t, p in records.items()}
    checks = {}
    for tuner, path in records.items():
        out = work / f"{name}_{tuner}.so"
        cmd = hiertune("compile", *model_args, "--records", str(path), "--out", str(out), "--target", target, "--check")
        commands.append(cmd)
        mark = log.stat().st_size if log.exists() else 0
        run_step(cmd, log)
        text = log.read_bytes()[mark:].decode("utf-8", errors="replace")  # mark counts bytes, not characters
        found = text.find("check vs")
        checks[tuner] = " ".join(text[found:].split())[:260] if found >= 0 else "no check line"
    bench_json = work / f"{name}_benchmark.json"
    cmd = hiertune("benchmark", *model_args, *[f"--records={t}={p}" for t, p in records.items()], "--target", target,
                   "--threads", "1", "--repeats", "10", "--json", str(bench_json),
                   "--plot", str(work / f"{name}_benchmark.png"), "--work-dir", str(work))
    commands.append(cmd)
    run_step(cmd, log)
    bench = json.loads(bench_json.read_text())
    return {"tasks": tasks, "trials_per_tuner_planned": trials, "trials_per_tuner": measured,
            "budget_complete": measured >= trials, "tune_s": round(tune_s, 1), "checks": checks,
            "profile": {t: records_profile(workload, p) for t, p in records.items()},
            "benchmark": bench, "commands": [" ".join(c[2:]) for c in commands]}


def median(bench: dict[str, Any], name: str) -> float | None:
    return bench["contenders"].get(name, {}).get("median_ms")


def ratio(bench: dict[str, Any], a: str, b: str) -> float | None:
    x, y = median(bench, a), median(bench, b)
    return x / y if x and y else None


def summarise(result: dict[str, Any]) -> None:
    """The headline ratios (TVM + HARL over each contender, smaller is better) from the per-model detail."""
    quick = result.get("quick", {})
    per_model = {}
    for name, entry in quick.items():
        bench = entry["benchmark"]
        per_model[name] = {
            "harl_over_metaschedule": ratio(bench, "TVM + harl", "TVM + metaschedule"),
            "harl_over_onnxruntime": ratio(bench, "TVM + harl", "ONNX Runtime"),
            "harl_over_torch_eager": ratio(bench, "TVM + harl", "PyTorch eager"),
            "harl_over_torch_compile": ratio(bench, "TVM + harl", "torch.compile"),
            "harl_over_untuned": ratio(bench, "TVM + harl", "TVM untuned"),
            "harl_over_harl_no_prior": ratio(bench, "TVM + harl", "TVM + harl-no-prior"),
            "harl_over_harl_config": ratio(bench, "TVM + harl", "TVM + harl-config"),
            "harl_tuned_tasks": bench["contenders"]["TVM + harl"].get("tuned_tasks"),
            "metaschedule_tuned_tasks": bench["contenders"].get("TVM + metaschedule", {}).get("tuned_tasks"),
            "tasks": entry["tasks"],
        }
    result["ratios_per_model"] = per_model
    for key in ("metaschedule", "onnxruntime", "torch_eager", "untuned", "harl_no_prior", "harl_config"):
        result[f"e2e_harl_over_{key}"] = geomean([m[f"harl_over_{key}"] for m in per_model.values()])
    tuned = sum(m["harl_tuned_tasks"] or 0 for m in per_model.values())
    total = sum(m["tasks"] for m in per_model.values())
    result["tuned_task_fraction"] = tuned / total if total else None
    deep = result.get("deep", {}).get("bert-2l")
    result["e2e_harl_over_onnxruntime_deep"] = ratio(deep["benchmark"], "TVM + harl", "ONNX Runtime") if deep else None
    result["models_done"] = {"quick": list(quick), "deep": list(result.get("deep", {}))}
    result["complete"] = (set(quick) == set(MODELS) and deep is not None
                          and all(e["budget_complete"] for e in [*quick.values(), deep]))


def plot(result: dict[str, Any], path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    quick = result.get("quick", {})
    if not quick:
        return
    contenders = ["TVM + harl", "TVM + harl-no-prior", "TVM + harl-config", "TVM + metaschedule", "TVM untuned",
                  "PyTorch eager", "torch.compile", "ONNX Runtime"]
    contenders = [c for c in contenders if any(ratio(e["benchmark"], c, "TVM + harl") for e in quick.values())]
    fig, ax = plt.subplots(figsize=(4 + 2.2 * len(quick), 4))
    width = 0.8 / len(contenders)
    for i, name in enumerate(contenders):
        values = [ratio(e["benchmark"], name, "TVM + harl") or 0 for e in quick.values()]
        ax.bar([j + i * width for j in range(len(quick))], values, width, label=name)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(quick))], list(quick))
    ax.set_ylabel("latency / (TVM + HARL) latency")
    ax.set_yscale("log")
    where = "GPU 0" if "cuda" in str(result.get("target")) else "1 thread"
    ax.set_title(f"end-to-end latency / TVM + HARL's, {where}")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("quick", "deep"), default="quick")
    parser.add_argument("--models", nargs="*", default=None, choices=[*MODELS, *EXTRA_MODELS],
                        help="subset of the quick models, or tiny-convnet / resnet-18")
    parser.add_argument("--target", default=TARGET, help="'cuda' for GPU 0; default: llvm at one thread")
    parser.add_argument("--per-task", type=int, help="trials per task (default: 16 quick, 128 deep)")
    parser.add_argument("--tuners", nargs="+", choices=list(TUNERS), default=None,
                        help="default: harl and metaschedule (quick), harl (deep); harl-no-prior: the prior's A/B; "
                             "harl-config: HARL with --harl-config's settings")
    parser.add_argument("--harl-config", type=Path, help="a `hiertune tune --config` file, for the harl-config tuner")
    parser.add_argument("--seed", type=int, help="every tuner's seed (default: each command's own, 0)")
    parser.add_argument("--no-tune", action="store_true",
                        help="out of time: compile and benchmark the records as they are, at an equal budget")
    parser.add_argument("--note", help="a sentence on how this run departed from the plan, kept in the JSON")
    parser.add_argument("--out", type=Path, default=OUT_JSON, help="results JSON (the PNG goes beside it)")
    parser.add_argument("--work", type=Path, default=WORK, help="folder for records, libraries and logs")
    args = parser.parse_args()
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    result["target"] = args.target
    if args.note:
        result.setdefault("notes", []).append(args.note)
    section = result.setdefault(args.mode, {})
    names = ["bert-2l"] if args.mode == "deep" else (args.models or list(MODELS))
    per_task = args.per_task or (128 if args.mode == "deep" else 16)
    tuners = args.tuners or (["harl"] if args.mode == "deep" else ["harl", "metaschedule"])
    if ("harl-config" in tuners) != (args.harl_config is not None):
        parser.error("the harl-config tuner and --harl-config FILE come together")
    for name in names:
        print(f"[{args.mode}] {name}: {per_task} trials per task, tuners {tuners}", flush=True)
        section[name] = run_model(name, per_task, tuners, args.work / args.mode, tune=not args.no_tune,
                                  target=args.target, harl_config=args.harl_config, seed=args.seed)
        summarise(result)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        plot(result, args.out.with_suffix(".png"))
        print(json.dumps({k: v for k, v in result.items() if k.startswith(("e2e", "tuned"))}), flush=True)


if __name__ == "__main__":
    main()
