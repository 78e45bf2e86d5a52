"""bench/incilp_scale.py: the exact baselines race fairly and are charged time to target."""

from __future__ import annotations

import json

from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.ilp import IlpConfig, evaluate_partition, prepare_graph
from hiertune.solvers.order_split import refine_cuts
from hiertune.solvers.zoo import load_zoo_graph


def test_the_race_gives_later_runs_only_the_fastest_proof_so_far(load_bench):
    scale = load_bench("incilp_scale")
    case = scale.run_case("mobilenetv2", "tflite", 4, limit=30.0)
    runs = [(name, case["baselines"][name][mode]) for name in case["baselines"] for mode in ("cold", "hinted")]
    fastest = 30.0
    for name, run in runs:
        assert run["limit_s"] == fastest, name  # each run had exactly the fastest proof before it
        if run["optimal"]:
            fastest = min(fastest, run["seconds"])
            assert run["objectives"] == case["optimum"], name
    assert case["fastest_exact"] == fastest and not case["unproven"]
    assert case["incilp"]["default"]["reached_optimum"]
    assert case["pointer"]["peak_gap_pct"] >= 0  # the net's own plan, against the proven optimum

    # --redo-incilp keeps a case's baselines only when they ran on this kind of CPU
    from hiertune.workloads.tvm_support import host_cpu

    assert case["host_cpu"] == host_cpu()
    kept = {"cases": [case]}
    assert scale.redo_incilp(kept, {("mobilenetv2", 4)}, "tflite", 30.0, lambda: None) == []
    assert kept["cases"][0]["baselines"] is case["baselines"] and kept["cases"][0]["incilp"]["default"]["reached_optimum"]
    elsewhere = {"cases": [{**case, "host_cpu": "another-cpu"}]}
    assert scale.redo_incilp(elsewhere, {("mobilenetv2", 4)}, "tflite", 30.0, lambda: None) == [("mobilenetv2", 4)]
    assert elsewhere["cases"] == []  # dropped, to run again whole


def test_a_hint_as_good_as_the_target_reaches_it_when_it_is_ready(load_bench):
    scale = load_bench("incilp_scale")
    graph = load_zoo_graph("resnet50", "tflite")
    prepare_graph(graph)
    hint = refine_cuts(graph, libcoral_partition(graph, 4), 4)
    target = evaluate_partition(graph, hint, 4, IlpConfig().cache_bytes)
    run = scale._baseline(graph, 4, "cpsat", 1, 30.0, hinted=True, target=target)
    assert run["seconds_to_target"] is not None and run["seconds_to_target"] < run["seconds"]
    unreachable = (0, 0, 0)  # no plan of a graph with weights has a stage without any
    assert scale._baseline(graph, 4, "cpsat", 1, 30.0, hinted=False, target=unreachable)["seconds_to_target"] is None


def test_redo_incilp_keeps_baselines_unless_their_target_plan_changes(load_bench, tmp_path):
    scale = load_bench("incilp_scale")
    out = tmp_path / "scale.json"
    assert scale.main(["--models", "mobilenet", "--stages", "3", "--time-limit", "20", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    stored = doc["cases"][0]
    assert stored["optimum"] is not None
    unproven = {**stored, "num_stages": 4, "optimum": None}  # as if no baseline had proven K = 4
    doc["cases"].append(unproven)
    out.write_text(json.dumps(doc))
    assert scale.main(["--models", "mobilenet", "--stages", "3", "4", "--time-limit", "20", "--out", str(out),
                       "--redo-incilp"]) == 0
    cases = {c["num_stages"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases[3]["baselines"] == stored["baselines"]  # kept: their times do not depend on Inc-ILP
    assert cases[3]["incilp"]["default"]["reached_optimum"]
    assert cases[4]["optimum"] is not None  # run again whole: its baselines were timed anew and proved it
    # an unproven case whose plan is unchanged keeps the baselines timed to that plan
    doc = json.loads(out.read_text())
    kept = next(c for c in doc["cases"] if c["num_stages"] == 3)
    kept.update(optimum=None, baselines={**kept["baselines"], "marker": {"objectives": None}})
    out.write_text(json.dumps(doc))
    assert scale.main(["--models", "mobilenet", "--stages", "3", "--time-limit", "20", "--out", str(out),
                       "--redo-incilp"]) == 0
    again = next(c for c in json.loads(out.read_text())["cases"] if c["num_stages"] == 3)
    assert "marker" in again["baselines"] and again["optimum"] is None


def test_rerun_times_the_wanted_cases_again_whole_and_keeps_the_rest(load_bench, tmp_path):
    scale = load_bench("incilp_scale")
    out = tmp_path / "scale.json"
    assert scale.main(["--models", "mobilenet", "--stages", "3", "4", "--time-limit", "20", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    for case in doc["cases"]:
        case["baselines"]["marker"] = {"objectives": None}  # what a rerun must not keep
    out.write_text(json.dumps(doc))
    assert scale.main(["--models", "mobilenet", "--stages", "3", "--time-limit", "20", "--out", str(out),
                       "--rerun"]) == 0
    cases = {c["num_stages"]: c for c in json.loads(out.read_text())["cases"]}
    assert "marker" not in cases[3]["baselines"] and cases[3]["incilp"]["default"]["reached_optimum"]
    assert "marker" in cases[4]["baselines"]  # not asked for: left as it was
