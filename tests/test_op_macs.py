"""Per-operator MACs from real model files: the importers' counts of known convolutions and
fully connected layers equal the hand formula, and the JSON form keeps them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hiertune.solvers.graph import OpGraph
from hiertune.solvers.graph_source import load_graph

MOBILENETV2 = Path(__file__).resolve().parents[1] / "bench" / "models" / "mobilenetv2.tflite"


def test_tflite_macs_of_mobilenetv2_equal_the_hand_formula(tmp_path):
    g = load_graph(MOBILENETV2)
    by_op = {}
    for v in g.nodes:
        by_op.setdefault(v.op, []).append(v)
    conv1, dw1, fc = by_op["CONV_2D"][0], by_op["DEPTHWISE_CONV_2D"][0], by_op["FULLY_CONNECTED"][0]
    assert conv1.macs == 112 * 112 * 32 * (3 * 3 * 3)  # 224x224x3 -> 112x112x32, 3x3 stride 2
    assert dw1.macs == 112 * 112 * 32 * (3 * 3)  # depthwise 3x3 over 32 channels
    assert fc.macs == 1000 * 1280  # 1280 -> 1000 logits
    assert by_op["SOFTMAX"][0].macs == 1000  # one per output element
    assert 295e6 < g.total_macs < 305e6  # MobileNetV2 at 224: about 300 M multiply-adds
    g.save_json(tmp_path / "g.json")
    assert [v.macs for v in OpGraph.load_json(tmp_path / "g.json").nodes] == [v.macs for v in g.nodes]


def test_onnx_macs_equal_the_hand_formula(tmp_path):
    """grouped conv (depthwise), Gemm with transA, MatMul and an elementwise Relu, 1x8x6x6 input."""
    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv", pads=[1, 1, 1, 1]),  # 8 -> 16, 3x3
        helper.make_node("Conv", ["c1", "w2"], ["c2"], name="dw", group=16, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flat"),  # 1 x 576
        helper.make_node("Transpose", ["f"], ["ft"], name="t", perm=[1, 0]),  # 576 x 1
        helper.make_node("Gemm", ["ft", "w3"], ["g"], name="gemm", transA=1),  # (1 x 576) @ (576 x 10)
        helper.make_node("MatMul", ["g", "w4"], ["y"], name="matmul"),  # (1 x 10) @ (10 x 4)
    ]
    graph = helper.make_graph(
        nodes, "macs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[init("w1", (16, 8, 3, 3)), init("w2", (16, 1, 3, 3)), init("w3", (576, 10)), init("w4", (10, 4))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save_model(model, str(tmp_path / "m.onnx"))
    macs = {v.name: v.macs for v in load_graph(tmp_path / "m.onnx").nodes}
    assert macs["conv"] == 16 * 6 * 6 * (8 * 3 * 3)
    assert macs["dw"] == 16 * 6 * 6 * (3 * 3)
    assert macs["relu"] == 16 * 6 * 6
    assert macs["gemm"] == 10 * 576
    assert macs["matmul"] == 4 * 10


def test_partition_command_balances_macs_when_asked(tmp_path, capsys):
    from hiertune.cli import main
    from hiertune.solvers.baselines import libcoral_partition
    from hiertune.solvers.ilp import stage_macs

    def plan(order: str) -> dict:
        out = tmp_path / f"{order}.json"
        assert main(["partition", "--model", str(MOBILENETV2), "--stages", "4", "--gamma", "inf", "--solver", "cpsat",
                     "--objectives", order, "--no-ray", "--out", str(out)]) == 0
        return json.loads(out.read_text())

    paper, balanced = plan("peak,off-cache,comm"), plan("peak,off-cache,macs,comm")
    assert balanced["objectives"]["peak_param_bytes"] == paper["objectives"]["peak_param_bytes"]
    assert max(balanced["stage_macs"]) < max(paper["stage_macs"])
    g = load_graph(MOBILENETV2)
    assert max(balanced["stage_macs"]) < max(stage_macs(g, libcoral_partition(g, 4), 4))
    assert main(["partition", "--model", str(MOBILENETV2), "--stages", "4", "--gamma", "inf", "--solver", "ideal-dp",
                 "--objectives", "peak,off-cache,comm,macs", "--no-ray"]) != 0
    assert "--objectives" in capsys.readouterr().err
