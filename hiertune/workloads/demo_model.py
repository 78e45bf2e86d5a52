"""A few-layer ONNX convnet written with onnx.helper: the demo's model and the tests' small ONNX file.

Written, not downloaded, so `hiertune demo` runs offline; random weights (schedules don't depend on them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_convnet_onnx(path: str | Path, *, image: int = 32, channels: int = 16, classes: int = 10,
                       dynamic_batch: bool = False, extra_op: str | None = None) -> Path:
    """conv3x3-relu, conv3x3-relu, max-pool, conv3x3-relu, global-average-pool, dense.

    `dynamic_batch` leaves the batch dimension symbolic ("N"), as exporters often do;
    `extra_op` appends a one-input op of that type (to write a model with an op a frontend lacks).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)

    c = channels
    initializers = [
        weight("w1", c, 3, 3, 3), weight("b1", c), weight("w2", c, c, 3, 3), weight("b2", c),
        weight("w3", 2 * c, c, 3, 3), weight("b3", 2 * c), weight("fc_w", classes, 2 * c), weight("fc_b", classes),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    output = "logits"
    if extra_op:
        nodes.append(helper.make_node(extra_op, ["logits"], ["extra"]))
        output = "extra"
    batch: int | str = "N" if dynamic_batch else 1
    graph = helper.make_graph(
        nodes, "hiertune_convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="hiertune")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out
