"""Write a small, real int8 TFLite model without TensorFlow (the tests' fixture).

The segmenter and the pipeline runner need a genuine quantized model to split and run, and the
test suite must not need TensorFlow. This builds one with the TFLite schema's object API: a
branchy int8 CNN (CONV_2D, DEPTHWISE_CONV_2D, ADD, RESHAPE, FULLY_CONNECTED; per-channel
quantized weights, int32 biases), about 300 KB, that LiteRT's interpreter loads and runs.

    python -m hiertune.solvers.tflite_fixture tests/data/tiny_int8.tflite
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.solvers.tflite_model import schema, write_model


@dataclass
class FixtureConfig:
    """Shape of the fixture model; the defaults give ~300 KB of int8 parameters."""

    height: int = 32
    width: int = 32
    in_channels: int = 16
    channels: int = 64
    classes: int = 16
    seed: int = 0


class _Builder:
    """Collects tensors, buffers, opcodes and operators of one subgraph."""

    def __init__(self, seed: int) -> None:
        self.s = schema()
        self.rng = np.random.default_rng(seed)
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [self.s.BufferT()]  # buffer 0: the empty sentinel
        self.opcodes: list[Any] = []
        self.opcode_index: dict[int, int] = {}
        self.operators: list[Any] = []

    def tensor(self, name: str, shape: list[int], ttype: int, scale: list[float], zero_point: list[int],
               data: np.ndarray | None = None, qdim: int = 0) -> int:
        s = self.s
        buffer_index = 0
        if data is not None:
            buf = s.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
            self.buffers.append(buf)
            buffer_index = len(self.buffers) - 1
        q = s.QuantizationParametersT()
        q.scale = [float(x) for x in scale]
        q.zeroPoint = [int(z) for z in zero_point]
        q.quantizedDimension = qdim
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer, t.quantization = name, list(shape), ttype, buffer_index, q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def act(self, name: str, shape: list[int], scale: float, zero_point: int) -> int:
        return self.tensor(name, shape, self.s.TensorType.INT8, [scale], [zero_point])

    def op(self, builtin: int, version: int, inputs: list[int], outputs: list[int],
           options_type: int, options: Any) -> None:
        s = self.s
        if builtin not in self.opcode_index:
            code = s.OperatorCodeT()
            code.builtinCode = builtin
            code.deprecatedBuiltinCode = min(builtin, 127)
            code.version = version
            self.opcodes.append(code)
            self.opcode_index[builtin] = len(self.opcodes) - 1
        o = s.OperatorT()
        o.opcodeIndex = self.opcode_index[builtin]
        o.inputs, o.outputs = list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = options_type, options
        self.operators.append(o)

    # ------------------------------------------------------------ layers
    def weights(self, shape: list[int], fan_in: int, qdim: int | None) -> tuple[np.ndarray, np.ndarray]:
        w = self.rng.integers(-127, 128, size=shape, dtype=np.int8)
        n = shape[qdim] if qdim is not None else 1
        scale = (1.0 / (127.0 * np.sqrt(fan_in))) * self.rng.uniform(0.8, 1.2, size=n)
        return w, scale

    def conv(self, name: str, x: int, x_scale: float, out_ch: int, k: int, stride: int,
             out_shape: list[int], out_scale: float, relu: bool, depthwise: bool = False) -> int:
        s = self.s
        in_ch = self.tensors[x].shape[3]
        if depthwise:
            w, w_scale = self.weights([1, k, k, in_ch], k * k, qdim=3)
            w_t = self.tensor(f"{name}/weights", [1, k, k, in_ch], s.TensorType.INT8, list(w_scale),
                              [0] * in_ch, data=w, qdim=3)
        else:
            w, w_scale = self.weights([out_ch, k, k, in_ch], k * k * in_ch, qdim=0)
            w_t = self.tensor(f"{name}/weights", [out_ch, k, k, in_ch], s.TensorType.INT8, list(w_scale),
                              [0] * out_ch, data=w, qdim=0)
        b_scale = x_scale * w_scale
        bias = self.rng.integers(-2000, 2000, size=out_ch, dtype=np.int32)
        b_t = self.tensor(f"{name}/bias", [out_ch], s.TensorType.INT32, list(b_scale), [0] * out_ch, data=bias)
        zp = -128 if relu else 0
        y = self.act(name, out_shape, out_scale, zp)
        act = s.ActivationFunctionType.RELU if relu else s.ActivationFunctionType.NONE
        if depthwise:
            opt = s.DepthwiseConv2DOptionsT()
            opt.padding, opt.strideW, opt.strideH = s.Padding.SAME, stride, stride
            opt.depthMultiplier, opt.fusedActivationFunction = 1, act
            opt.dilationWFactor = opt.dilationHFactor = 1
            self.op(s.BuiltinOperator.DEPTHWISE_CONV_2D, 3, [x, w_t, b_t], [y],
                    s.BuiltinOptions.DepthwiseConv2DOptions, opt)
        else:
            opt = s.Conv2DOptionsT()
            opt.padding, opt.strideW, opt.strideH = s.Padding.SAME, stride, stride
            opt.fusedActivationFunction = act
            opt.dilationWFactor = opt.dilationHFactor = 1
            self.op(s.BuiltinOperator.CONV_2D, 3, [x, w_t, b_t], [y], s.BuiltinOptions.Conv2DOptions, opt)
        return y

    def finish(self, inputs: list[int], outputs: list[int], description: str) -> Any:
        s = self.s
        sg = s.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.operators
        sg.inputs, sg.outputs, sg.name = inputs, outputs, "main"
        model = s.ModelT()
        model.version = 3
        model.operatorCodes, model.subgraphs, model.buffers = self.opcodes, [sg], self.buffers
        model.description = description
        return model


def build_fixture_model(config: FixtureConfig | None = None) -> Any:
    """The fixture as a `ModelT`: conv -> (depthwise | 1x1 conv) -> add -> strided conv -> FC."""
    c = config or FixtureConfig()
    b = _Builder(c.seed)
    s = b.s
    h, w, ch = c.height, c.width, c.channels
    x = b.act("input", [1, h, w, c.in_channels], 1.0 / 128, 0)
    a = b.conv("stem_conv", x, 1.0 / 128, ch, 3, 1, [1, h, w, ch], 0.004, relu=True)
    d = b.conv("branch_dw", a, 0.004, ch, 3, 1, [1, h, w, ch], 0.001, relu=True, depthwise=True)
    p = b.conv("branch_pw", a, 0.004, ch, 1, 1, [1, h, w, ch], 0.0015, relu=False)
    add = b.act("merge_add", [1, h, w, ch], 0.0015, -128)
    add_opt = s.AddOptionsT()
    add_opt.fusedActivationFunction = s.ActivationFunctionType.RELU
    b.op(s.BuiltinOperator.ADD, 2, [d, p], [add], s.BuiltinOptions.AddOptions, add_opt)
    h2, w2 = (h + 1) // 2, (w + 1) // 2
    down = b.conv("down_conv", add, 0.0015, ch, 3, 2, [1, h2, w2, ch], 0.0004, relu=True)
    flat_len = h2 * w2 * ch
    shape_t = b.tensor("flatten/shape", [2], s.TensorType.INT32, [1.0], [0],
                       data=np.array([1, flat_len], dtype=np.int32))
    b.tensors[shape_t].quantization = None
    flat = b.act("flatten", [1, flat_len], 0.0004, -128)
    reshape_opt = s.ReshapeOptionsT()
    reshape_opt.newShape = [1, flat_len]
    b.op(s.BuiltinOperator.RESHAPE, 1, [down, shape_t], [flat], s.BuiltinOptions.ReshapeOptions, reshape_opt)
    fc_w, fc_scale = b.weights([c.classes, flat_len], flat_len, qdim=None)
    fc_w_t = b.tensor("logits/weights", [c.classes, flat_len], s.TensorType.INT8, [float(fc_scale[0])], [0], data=fc_w)
    fc_b = b.rng.integers(-2000, 2000, size=c.classes, dtype=np.int32)
    fc_b_t = b.tensor("logits/bias", [c.classes], s.TensorType.INT32, [0.0004 * float(fc_scale[0])], [0], data=fc_b)
    logits = b.act("logits", [1, c.classes], 0.0005, 0)
    fc_opt = s.FullyConnectedOptionsT()
    fc_opt.fusedActivationFunction = s.ActivationFunctionType.NONE
    b.op(s.BuiltinOperator.FULLY_CONNECTED, 4, [flat, fc_w_t, fc_b_t], [logits],
         s.BuiltinOptions.FullyConnectedOptions, fc_opt)
    return b.finish([x], [logits], "hiertune tiny int8 fixture")


def write_fixture(path: str | Path, config: FixtureConfig | None = None) -> Path:
    return write_model(build_fixture_model(config), path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="tests/data/tiny_int8.tflite")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    path = write_fixture(args.out, FixtureConfig(seed=args.seed))
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
