"""Graph inputs: a real .tflite operator graph, zoo names, and one clear error for each corrupt
input (bad JSON, cyclic JSON, zero nodes, not a flatbuffer, truncated, zero operators); and the
`hiertune partition` command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiertune.cli import main
from hiertune.solvers.graph import GraphError
from hiertune.solvers.graph_source import load_graph

TINY = Path(__file__).parent / "data" / "tiny_int8.tflite"


def test_tflite_operator_graph():
    g = load_graph(TINY)
    assert g.source == "tflite" and g.dtype == "int8"
    assert g.num_nodes >= 5 and g.edges
    assert g.total_param_bytes > 100_000  # the fixture's int8 weights
    assert all(e.tensor_bytes > 0 for e in g.edges)
    assert g.nodes[0].op == "CONV_2D"
    assert g.topological_order() == sorted(range(g.num_nodes))  # TFLite stores ops in order


def test_zoo_name_and_unknown_name():
    g = load_graph("mobilenet")
    assert g.num_nodes > 50
    with pytest.raises(GraphError, match="no keras graph for model 'nosuchnet'"):
        load_graph("nosuchnet")


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON"),
    ('{"nodes": [{"name": "a"}, {"name": "b"}], "edges": [[0, 1, 4], [1, 0, 4]]}', "has a cycle"),
    ('{"nodes": [], "edges": []}', "has no nodes"),
    ('[1, 2, 3]', "not a hiertune graph"),
])
def test_corrupt_json(tmp_path, content, message):
    path = tmp_path / "g.json"
    path.write_text(content)
    with pytest.raises(GraphError, match=message):
        load_graph(path)


def test_corrupt_tflite(tmp_path):
    raw = TINY.read_bytes()
    cases = {
        "garbage.tflite": (b"this is not a flatbuffer at all", "not a TFLite flatbuffer"),
        "truncated.tflite": (raw[: len(raw) // 3], "damaged"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(GraphError, match=message):
            load_graph(tmp_path / name)
    with pytest.raises(GraphError, match="does not exist"):
        load_graph(tmp_path / "missing.tflite")


def test_tflite_without_operators(tmp_path):
    from hiertune.solvers.tflite_model import read_model, write_model

    model = read_model(TINY)
    model.subgraphs[0].operators = []
    write_model(model, tmp_path / "empty.tflite")
    with pytest.raises(GraphError, match="no nodes"):
        load_graph(tmp_path / "empty.tflite")


def test_partition_command_writes_plan_and_png(tmp_path, capsys):
    from hiertune.solvers.tflite_segment import load_plan

    out, png = tmp_path / "plan.json", tmp_path / "plan.png"
    rc = main(["partition", "--model", str(TINY), "--stages", "3", "--gamma", "inf", "--solver", "highs",
               "--initial", "libcoral", "--no-ray", "--out", str(out), "--plot", str(png)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "exact (highs)" in text and "libcoral split" in text
    plan = json.loads(out.read_text())
    g = load_graph(TINY)
    assert set(plan["plan"]) == {n.name for n in g.nodes}
    assert plan["optimal"] and plan["solver"] == "highs"
    assert plan["objectives"]["peak_param_bytes"] <= plan["libcoral_objectives"][0]
    assert load_plan(out) == plan["plan"]  # the pipeline command reads it as is
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_partition_command_reports_the_recut_and_checks_its_flag(tmp_path, capsys):
    from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag

    model, out = tmp_path / "chain.json", tmp_path / "plan.json"
    generate_dag(5, SyntheticDagConfig(num_nodes=150, branchy_prob=0.0)).save_json(model)  # see test_incilp
    assert main(["partition", "--model", str(model), "--stages", "8", "--gamma", "2", "--no-ray",
                 "--out", str(out)]) == 0
    assert "exact cuts along the window's plan beat it" in capsys.readouterr().out
    assert json.loads(out.read_text())["recuts"] >= 1
    assert main(["partition", "--model", str(model), "--stages", "8", "--recut", "-1", "--no-ray"]) == 2
    assert "--recut must be at least 0" in capsys.readouterr().err


def test_partition_command_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"nope")
    assert main(["partition", "--model", str(bad), "--no-ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a TFLite flatbuffer" in err[0]


def test_partition_command_rejects_more_stages_than_nodes_before_ray_starts(capsys, monkeypatch):
    from hiertune.platform import ray_runtime

    started = []
    monkeypatch.setattr(ray_runtime, "init_ray", lambda *a, **k: started.append(a))  # a spy: Ray stays down
    assert main(["partition", "--model", "vgg16", "--stages", "1000"]) == 2  # with Ray by default
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--stages 1000 must lie in 1..23" in err[0]
    assert not started


@pytest.mark.parametrize("command", [["partition", "--model", "vgg16"], ["tune", "--workload", "GMM-S"]])
def test_plot_file_without_an_image_suffix_is_rejected_when_parsing(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:  # argparse's usage error, before any solve or tuning
        main([*command, "--plot", str(tmp_path / "plan.txt")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "argument --plot" in err[-1] and "suffix .txt" in err[-1] and "png" in err[-1]
    assert not (tmp_path / "plan.txt").exists()


def test_output_paths_that_cannot_be_written_fail_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cases = [
        (["partition", "--model", "vgg16", "--stages", "4", "--no-ray", "--out", str(blocker / "plan.json")],
         "--out"),
        (["partition", "--model", "vgg16", "--stages", "4", "--no-ray", "--out", str(tmp_path)], "is a folder"),
        (["tune", "--workload", "GMM-S", "--trials", "2", "--no-ray", "--records", str(blocker / "r.jsonl")],
         "--records"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing half-written


def test_partition_command_offers_exactly_the_solver_window_kinds():
    """The CLI spells the kinds out (importing the solver stack would slow `hiertune --help`
    twentyfold); this keeps the two lists one list."""
    import argparse

    from hiertune.cli import build_parser
    from hiertune.solvers.incilp import WINDOW_KINDS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    window = next(a for a in sub.choices["partition"]._actions if a.dest == "window")
    assert tuple(window.choices) == WINDOW_KINDS


def test_partition_command_window_kinds_reach_the_exact_optimum(tmp_path, capsys):
    plans = {}
    for window in ("adjacent", "any", None):  # None: gamma = inf, the exact ILP
        out = tmp_path / f"{window}.json"
        args = ["partition", "--model", "mobilenet", "--stages", "4", "--solver", "cpsat",
                "--initial", "libcoral", "--no-ray", "--out", str(out)]
        args += ["--window", window] if window else ["--gamma", "inf"]
        assert main(args) == 0
        text = capsys.readouterr().out
        assert f"{window or 'adjacent'} window" in text
        plans[window] = json.loads(out.read_text())
    exact = plans[None]["objectives"]
    assert plans["adjacent"]["objectives"] == plans["any"]["objectives"] == exact
    assert plans["adjacent"]["window_size"] < plans[None]["window_size"]


def test_partition_command_prove_reports_time_to_proof(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["partition", "--model", "mobilenetv2", "--stages", "4", "--solver", "cpsat", "--initial",
                 "libcoral", "--no-ray", "--prove", "--out", str(out)]) == 0
    assert "proof of global optimality" in capsys.readouterr().out
    plan = json.loads(out.read_text())
    methods = {run["method"]: run for run in plan["proof"]}
    assert set(methods) == {"cpsat hinted", "cpsat cold", "ideal-dp hinted"}
    assert all(run["optimal"] and run["plan_is_optimal"] for run in methods.values())
    assert set(plan["proven_optimal"]) == {"peak", "off-cache", "comm"}
