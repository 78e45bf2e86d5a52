"""How much a network's other tasks teach the cost model about one of its tasks, offline.

HARL fits one cost model to every task of a run (each task its own label group), so by the time a
network's later task starts, the model has seen its siblings: other convolutions of the same
network, other GEMMs. This asks how much that helps, on records a model run left behind
(`bench/models_e2e.py --work DIR`): for each task, the model is fitted on (a) the shipped prior
alone, (b) the prior and every other task of the same network, (c) the other tasks alone, and ranks
the task's own measured schedules. Reported per task and as medians / geomeans over tasks:
* `rho_*`: Spearman of the score against throughput over the task's schedules;
* `pick8_*`: the latency of the model's pick among 8 schedules drawn at random / the best of the
  8 (1.0: it always picks the best), geomean over draws; `pick8_random` is a random pick.
Seconds per network; no measurement (the records' latencies are the ground truth). The schedules
are what the tuners measured (search trajectories, not random fills).

    python bench/cost_model_transfer.py --records 'runs/quick_pp/quick/resnet-50_*.jsonl' \\
        --records 'runs/quick_pp/quick/mobilenet-v2_*.jsonl' --out bench/results/cost_model_transfer.json
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from trace_compare import spearman

OUT = Path(__file__).resolve().parent / "results" / "cost_model_transfer.json"
ARMS = ("prior", "prior+siblings", "siblings")


def network_schedules(pattern: str) -> dict[str, Any]:
    """{task: (features per schedule, latencies)} of one network's records files (a glob), each
    measured schedule kept (at most 128 per task, as `hiertune prior` keeps)."""
    from hiertune.platform.cost_prior import collect_prior
    from hiertune.workloads.tvm_support import make_target

    paths = sorted(glob.glob(pattern))
    if not paths:
        raise SystemExit(f"--records {pattern!r} matches no file")
    return collect_prior(paths, make_target({"kind": "llvm", "num-cores": 1}))


def rank_task(train: dict[str, Any], kind: str, feats: list[np.ndarray], folder: Path) -> np.ndarray:
    """Scores of `feats` by a cost model fitted on `train` (as a prior)."""
    from hiertune.policies.cost_model import CostModel, CostModelConfig, save_prior

    path = folder / "train.npz"
    save_prior(path, train, kind)
    return np.asarray(CostModel(CostModelConfig(prior=str(path)), target_kind=kind).score_features(feats))


def pick_of_eight(scores: np.ndarray | None, latencies: np.ndarray, rng: np.random.Generator, draws: int) -> float:
    """Geomean over random draws of 8 of (latency of the pick / best of the 8); None scores: a random pick."""
    ratios = []
    for _ in range(draws):
        idx = rng.choice(len(latencies), size=min(8, len(latencies)), replace=False)
        pick = rng.integers(len(idx)) if scores is None else int(np.argmax(scores[idx]))
        ratios.append(latencies[idx][pick] / latencies[idx].min())
    return float(np.exp(np.mean(np.log(ratios))))


def network_rows(net: dict[str, Any], shipped: dict[str, Any], kind: str, folder: Path,
                 min_schedules: int, draws: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    rows = []
    for name, (feats, lat) in sorted(net.items()):
        lat = np.asarray(lat, dtype=float)
        ok = np.isfinite(lat) & (lat < 1e9)
        if ok.sum() < min_schedules:
            continue
        feats, lat = [f for f, k in zip(feats, ok) if k], lat[ok]
        siblings = {n: v for n, v in net.items() if n != name}
        row: dict[str, Any] = {"task": name, "schedules": len(lat)}
        for arm, train in zip(ARMS, (shipped, {**shipped, **siblings}, siblings)):
            scores = rank_task(train, kind, feats, folder)
            row[f"rho_{arm}"] = spearman(scores, -lat)
            row[f"pick8_{arm}"] = pick_of_eight(scores, lat, rng, draws)
        row["pick8_random"] = pick_of_eight(None, lat, rng, draws)
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {f"rho_{a}_median": float(np.median([r[f"rho_{a}"] for r in rows])) for a in ARMS}
    out.update({f"pick8_{a}_geomean": float(np.exp(np.mean(np.log([r[f"pick8_{a}"] for r in rows]))))
                for a in (*ARMS, "random")})
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    from hiertune.plotting import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    for net, entry in result["networks"].items():
        ax.scatter([r["rho_prior"] for r in entry["tasks"]], [r["rho_prior+siblings"] for r in entry["tasks"]],
                   label=net, alpha=0.8)
    ax.plot([-1, 1], [-1, 1], color="grey", lw=0.8)
    ax.set_xlabel("Spearman, model fitted on the shipped prior")
    ax.set_ylabel("Spearman, prior + the network's other tasks")
    ax.set_title("ranking a network's task: what its siblings teach")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="append", required=True,
                        help="one network's records files (a glob); repeat for each network")
    parser.add_argument("--min-schedules", type=int, default=12, help="tasks with fewer measured schedules are left out")
    parser.add_argument("--draws", type=int, default=300, help="random draws of 8 per task")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    from hiertune.policies.cost_model import load_prior
    from hiertune.resources import data_path

    shipped, kind = load_prior(data_path("cost_prior_llvm.npz"))
    result: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "networks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for pattern in args.records:
            net = network_schedules(pattern)
            rows = network_rows(net, shipped, kind, Path(tmp), args.min_schedules, args.draws)
            name = Path(pattern).name.split("_")[0]
            result["networks"][name] = {"records": pattern, "tasks": rows, **summary(rows)}
            print(name, json.dumps({k: round(v, 3) for k, v in summary(rows).items()}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    plot(result, args.out.with_suffix(".png"))
    print(f"JSON -> {args.out}")


if __name__ == "__main__":
    main()
