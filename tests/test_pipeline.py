"""The stage pipeline on real Ray actors: correct outputs, measured latencies, clean failure."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from hiertune.errors import HiertuneError
from hiertune.platform.edgetpu import edgetpu_runtime_present
from hiertune.platform.pipeline import PipelineConfig, PipelineError, random_inputs, run_pipeline, run_whole_model
from hiertune.solvers.tflite_segment import segment_tflite
from hiertune.solvers.zoo import tflite_graph_from_file

FIXTURE = Path(__file__).parent / "data" / "tiny_int8.tflite"


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    out = tmp_path_factory.mktemp("segments")
    graph = tflite_graph_from_file(FIXTURE)
    plan = {node.name: s for node, s in zip(graph.nodes, [0, 1, 0, 1, 2, 2, 2])}
    return segment_tflite(FIXTURE, plan, out), out


def test_pipeline_streams_inputs_and_matches_whole_model(ray_session, segmented):
    manifest, root = segmented
    feeds = random_inputs(manifest, 12, seed=3)
    seen: list[int] = []
    result = run_pipeline(manifest, root, feeds, PipelineConfig(), on_result=lambda i, item, actors: seen.append(i))
    assert seen == list(range(12))
    assert result.num_inputs == 12 and result.throughput > 0
    for feed, out in zip(feeds, result.outputs):
        whole = run_whole_model(FIXTURE, [feed[t.index] for t in manifest.model_inputs])
        assert np.array_equal(whole[0], out[manifest.model_outputs[0].index])
    summary = result.summary()
    assert [s["stage"] for s in summary["stages"]] == [0, 1, 2]
    assert all(len(s.latency_ms) == 12 and min(s.latency_ms) > 0 for s in result.stages)
    assert summary["e2e_mean_ms"] >= max(s["mean_ms"] for s in summary["stages"])
    assert result.stages[2].param_bytes > 250_000  # the FC weights are in the last stage


def test_killed_stage_is_reported_and_run_stops(ray_session, segmented):
    manifest, root = segmented
    feeds = random_inputs(manifest, 40, seed=4)

    def kill_middle(i, item, actors):
        if i == 2:
            ray_session.kill(actors[1], no_restart=True)

    start = time.monotonic()
    with pytest.raises(PipelineError, match=r"stage 1 actor died mid-stream after [3-9] of 40"):
        run_pipeline(manifest, root, feeds, PipelineConfig(item_timeout_s=20, max_in_flight=4), on_result=kill_middle)
    assert time.monotonic() - start < 30
    # the cluster is usable again: the other stages were released
    result = run_pipeline(manifest, root, feeds[:3], PipelineConfig(start_timeout_s=30))
    assert result.num_inputs == 3


def test_edgetpu_device_without_runtime_is_one_clear_error(ray_session, segmented):
    if edgetpu_runtime_present():
        pytest.skip("this host has libedgetpu")
    manifest, root = segmented
    with pytest.raises(HiertuneError, match="libedgetpu.so.1.*--device cpu"):
        run_pipeline(manifest, root, random_inputs(manifest, 1), PipelineConfig(device="edgetpu"))


def test_unplaceable_pipeline_is_reported_not_waited_on(ray_session, segmented):
    manifest, root = segmented
    with pytest.raises(HiertuneError, match="needs 300 'CPU'"):
        run_pipeline(manifest, root, random_inputs(manifest, 1), PipelineConfig(cpus_per_stage=100))


def test_stage_host_without_edgetpu_runtime_fails_at_start_not_later(ray_session, tmp_path):
    if edgetpu_runtime_present():
        pytest.skip("this host has libedgetpu")
    graph = tflite_graph_from_file(FIXTURE)
    manifest = segment_tflite(FIXTURE, {n.name: 0 for n in graph.nodes}, tmp_path)  # one stage, one edgetpu
    config = PipelineConfig(device="edgetpu", probe_on_driver=False, start_timeout_s=30)
    with pytest.raises(PipelineError, match="failed to start.*libedgetpu"):
        run_pipeline(manifest, tmp_path, random_inputs(manifest, 2), config)


def test_pipeline_command_checks_outputs_and_writes_json(ray_session, tmp_path, capsys):
    import json

    from hiertune.cli import main

    graph = tflite_graph_from_file(FIXTURE)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"plan": {n.name: s for n, s in zip(graph.nodes, [0, 0, 0, 1, 1, 1, 1])}}))
    out = tmp_path / "pipe"
    rc = main(["pipeline", "--model", str(FIXTURE), "--plan", str(plan), "--inputs", "8", "--check",
               "--out-dir", str(out)])
    assert rc == 0
    summary = json.loads((out / "pipeline.json").read_text())
    assert summary["bit_exact_outputs"] == 8 and len(summary["stages"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"stem_conv": 1, "branch_dw": 0}))
    assert main(["pipeline", "--model", str(FIXTURE), "--plan", str(bad), "--out-dir", str(out)]) == 2
    assert "plan" in capsys.readouterr().err


def test_stage_that_raises_stops_the_run_with_its_cause(ray_session, segmented):
    manifest, root = segmented
    feeds = random_inputs(manifest, 3, seed=5)
    key = manifest.model_inputs[0].index
    feeds[1] = {key: np.zeros((1, 5, 5, 16), dtype=np.int8)}  # wrong shape for the input tensor
    with pytest.raises(PipelineError, match="a stage failed after 1 of 3 inputs: .*"):
        run_pipeline(manifest, root, feeds, PipelineConfig(item_timeout_s=20))
