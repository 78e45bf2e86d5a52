"""The segmenter: K stage models that reproduce the whole int8 model bit for bit; bad input refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hiertune.errors import HiertuneError
from hiertune.platform.pipeline import PipelineConfig, random_inputs, run_sequential, run_whole_model
from hiertune.solvers.tflite_fixture import FixtureConfig, write_fixture
from hiertune.solvers.tflite_model import TFLiteModelError, read_model
from hiertune.solvers.tflite_segment import PlanError, SegmentManifest, load_plan, segment_tflite
from hiertune.solvers.zoo import tflite_graph_from_file

FIXTURE = Path(__file__).parent / "data" / "tiny_int8.tflite"


def _plan(stages: list[int]) -> dict[str, int]:
    graph = tflite_graph_from_file(FIXTURE)
    return {node.name: s for node, s in zip(graph.nodes, stages)}


def test_fixture_is_a_small_int8_model_the_generator_reproduces(tmp_path):
    graph = tflite_graph_from_file(FIXTURE)
    ops = {n.op for n in graph.nodes}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "FULLY_CONNECTED"} <= ops
    assert graph.dtype == "int8" and 100_000 < FIXTURE.stat().st_size < 1_000_000
    assert any(len(p) == 2 for p in graph.predecessors())  # the branch merges
    regenerated = write_fixture(tmp_path / "again.tflite", FixtureConfig())
    assert regenerated.read_bytes() == FIXTURE.read_bytes()


@pytest.mark.parametrize("stages", [[0, 1, 0, 1, 2, 2, 2], [0, 0, 1, 1, 1, 2, 3], [0, 0, 0, 0, 0, 0, 1]])
@pytest.mark.parametrize("reference", [False, True])
def test_segments_reproduce_whole_model_bit_exactly(tmp_path, stages, reference):
    manifest = segment_tflite(FIXTURE, _plan(stages), tmp_path)
    assert manifest.num_stages == max(stages) + 1
    assert sorted(op for seg in manifest.segments for op in seg.ops) == list(range(len(stages)))
    reloaded = SegmentManifest.load(tmp_path)
    config = PipelineConfig(reference_kernels=reference)
    for feed in random_inputs(manifest, 3, seed=7):
        whole = run_whole_model(FIXTURE, [feed[t.index] for t in manifest.model_inputs], reference_kernels=reference)
        split = run_sequential(reloaded, tmp_path, feed, config)
        for expected, tensor in zip(whole, manifest.model_outputs):
            assert expected.dtype == np.int8
            assert np.array_equal(expected, split[tensor.index])
        assert np.abs(whole[0].astype(int)).max() > 0  # a degenerate all-zero output would prove nothing


def test_segment_files_are_valid_and_hold_only_their_parameters(tmp_path):
    manifest = segment_tflite(FIXTURE, _plan([0, 0, 0, 0, 0, 1, 1]), tmp_path)
    first, last = manifest.segments
    assert [t.name for t in first.outputs] == ["down_conv"] and [t.name for t in last.inputs] == ["down_conv"]
    assert last.param_bytes > 250_000 > first.param_bytes  # the FC weights live only in the last stage
    for seg in manifest.segments:
        model = read_model(tmp_path / seg.path)
        assert len(model.subgraphs[0].operators) == len(seg.ops)


def test_plan_breaking_precedence_is_refused(tmp_path):
    with pytest.raises(PlanError, match="precedence.*'stem_conv'"):
        segment_tflite(FIXTURE, _plan([1, 0, 1, 1, 1, 1, 1]), tmp_path)


def test_plan_with_unknown_or_missing_nodes_is_refused(tmp_path):
    plan = _plan([0, 0, 0, 1, 1, 1, 1])
    with pytest.raises(PlanError, match="does not have.*no_such_layer"):
        segment_tflite(FIXTURE, {**plan, "no_such_layer": 1}, tmp_path)
    del plan["logits"]
    with pytest.raises(PlanError, match="without a stage.*logits"):
        segment_tflite(FIXTURE, plan, tmp_path)
    with pytest.raises(PlanError, match="stage\\(s\\) \\[1\\]"):
        segment_tflite(FIXTURE, _plan([0, 0, 0, 2, 2, 2, 2]), tmp_path)


def test_plan_file_errors_are_clear(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(bad)
    bad.write_text('{"plan": {"stem_conv": -1}}')
    with pytest.raises(PlanError, match="stem_conv.*integers"):
        load_plan(bad)
    bad.write_text('{"stages": 2, "plan": {"stem_conv": 0}}')
    assert load_plan(bad) == {"stem_conv": 0}


@pytest.mark.parametrize("damage", ["not_flatbuffer", "truncated", "garbage_tail", "missing"])
def test_corrupt_tflite_is_refused(tmp_path, damage):
    raw = FIXTURE.read_bytes()
    path = tmp_path / "bad.tflite"
    if damage == "not_flatbuffer":
        path.write_bytes(b"this is not a model at all" * 10)
    elif damage == "truncated":
        path.write_bytes(raw[:2000])
    elif damage == "garbage_tail":
        path.write_bytes(raw[:8] + bytes(reversed(raw[8:4000])))
    with pytest.raises(HiertuneError) as err:
        segment_tflite(path, _plan([0, 0, 0, 0, 0, 1, 1]), tmp_path / "out")
    assert "bad.tflite" in str(err.value)
    assert isinstance(err.value, (TFLiteModelError, HiertuneError))


def test_sixteen_stage_inc_ilp_plan_splits_and_reproduces_the_whole_model(tmp_path):
    """Stages up to 16 end to end: an Inc-ILP plan of a real zoo model at K = 16, split into 16
    TFLite files that chained give the whole model's output bit for bit."""
    from hiertune.solvers.ilp import IlpConfig
    from hiertune.solvers.incilp import IncIlpConfig, inc_ilp

    path = Path(__file__).resolve().parents[1] / "bench" / "models" / "mobilenetv2.tflite"
    graph = tflite_graph_from_file(path)
    res = inc_ilp(graph, 16, IncIlpConfig(ilp=IlpConfig(solver="cpsat", time_limit_s=60)))
    assert sorted(set(res.stages)) == list(range(16))
    manifest = segment_tflite(path, {n.name: s for n, s in zip(graph.nodes, res.stages)}, tmp_path)
    assert manifest.num_stages == 16
    feed = random_inputs(manifest, 1, seed=3)[0]
    whole = run_whole_model(path, [feed[t.index] for t in manifest.model_inputs])
    split = run_sequential(SegmentManifest.load(tmp_path), tmp_path, feed, PipelineConfig())
    assert np.array_equal(whole[0], split[manifest.model_outputs[0].index])
