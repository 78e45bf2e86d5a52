"""ONNX models as partition inputs: parameter bytes from initializer shapes (external weights
never read), Constant operators folded into their readers, activation bytes from inferred
shapes, one clear error for a bad file, and `hiertune partition --model m.onnx` end to end."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hiertune.cli import main
from hiertune.solvers.graph import GraphError
from hiertune.solvers.graph_source import load_graph


def _small_cnn(path, external: bool) -> None:
    """conv(3->16, 3x3) -> relu -> conv(16->32, 3x3) -> add(constant) -> output, float32, 1x3x8x8."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(np.zeros(16, np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w2")
    shift = helper.make_tensor("shift_value", TensorProto.FLOAT, [1, 32, 1, 1], np.ones(32, np.float32))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Constant", [], ["shift"], name="shift", value=shift),
        helper.make_node("Add", ["c2", "shift"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])],
        initializer=[w1, b1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save_model(model, str(path), save_as_external_data=external, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)


@pytest.mark.parametrize("external", [False, True])
def test_onnx_graph_counts_initializers_as_their_readers_parameters(tmp_path, external):
    path = tmp_path / "cnn.onnx"
    _small_cnn(path, external)
    if external:
        (tmp_path / "weights.bin").unlink()  # sizes come from shapes: the weights are never read
    g = load_graph(path)
    assert g.source == "onnx" and g.dtype == "float"
    assert [n.name for n in g.nodes] == ["conv1", "relu1", "conv2", "add"]  # the Constant is folded
    assert [n.param_bytes for n in g.nodes] == [(16 * 27 + 16) * 4, 0, 32 * 16 * 9 * 4, 32 * 4]
    assert [(e.src, e.dst, e.tensor_bytes) for e in g.edges] == [
        (0, 1, 16 * 64 * 4), (1, 2, 16 * 64 * 4), (2, 3, 32 * 64 * 4)]


def test_bad_onnx_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe not a protobuf")
    with pytest.raises(GraphError, match="not a readable ONNX model"):
        load_graph(bad)
    with pytest.raises(GraphError, match="does not exist"):
        load_graph(tmp_path / "missing.onnx")


def test_partition_command_takes_an_onnx_model(tmp_path, capsys):
    path, out = tmp_path / "cnn.onnx", tmp_path / "plan.json"
    _small_cnn(path, external=True)
    rc = main(["partition", "--model", str(path), "--stages", "2", "--gamma", "inf", "--solver", "cpsat",
               "--no-ray", "--out", str(out)])
    assert rc == 0
    plan = json.loads(out.read_text())
    assert set(plan["plan"]) == {"conv1", "relu1", "conv2", "add"} and plan["optimal"]
    # the optimum splits the two convolutions: conv2's 18 KiB alone in one stage
    assert plan["objectives"]["peak_param_bytes"] == 32 * 16 * 9 * 4 + 32 * 4
