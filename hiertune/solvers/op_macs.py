"""Per-operator compute of one inference, in multiply-accumulates (MACs), from tensor shapes.

A pipeline runs at the pace of its slowest stage, and a stage's time follows its compute far
more than its parameter bytes (a 1x1 convolution late in a network holds many weights and
little work; an early 3x3 one the reverse). Both importers (TFLite, ONNX) count per operator:

    convolution            out_elems * kh * kw * (Cin / groups)      (the filter minus its Cout axis)
    depthwise convolution  out_elems * kh * kw
    transposed convolution in_elems * kh * kw * (Cout / groups)
    fully connected, MatMul, Gemm, batch matmul   out_elems * K      (K: the reduced dimension)
    every other operator   out_elems                                 (one operation per output element)

Unknown or symbolic dimensions count as 1, as in the tensor byte counts. The last line is a
small stand-in for activations, adds, pooling and reshapes: they are memory-bound, and counting
them at all keeps a stage of only such operators from looking free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def numel(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 1)
    return n


def reduced_macs(out_shape: Sequence[int], reduced: Iterable[int]) -> int:
    """Every output element is a dot product over `reduced` (a filter window, a matmul's K)."""
    return numel(out_shape) * numel(reduced)


# ---------------------------------------------------------------------------------- TFLite
def tflite_macs(op: str, inputs: list[Sequence[int] | None], outputs: list[Sequence[int] | None],
                adj_x: bool = False) -> int:
    """MACs of a TFLite builtin operator from its input and output shapes (None: no tensor)."""
    out = outputs[0] if outputs and outputs[0] is not None else ()
    weights = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
    if op == "CONV_2D" and weights is not None and len(weights) == 4:  # filter [Cout, kh, kw, Cin]
        return reduced_macs(out, weights[1:])
    if op == "DEPTHWISE_CONV_2D" and weights is not None and len(weights) == 4:  # [1, kh, kw, C]
        return reduced_macs(out, weights[1:3])
    if op == "CONV_3D" and weights is not None and len(weights) == 5:  # [kd, kh, kw, Cin, Cout]
        return reduced_macs(out, weights[:4])
    if op == "TRANSPOSE_CONV" and len(inputs) > 2 and inputs[1] is not None and inputs[2] is not None:
        return reduced_macs(inputs[2], inputs[1][:3])  # (output_shape, filter [Cout, kh, kw, Cin], input)
    if op == "FULLY_CONNECTED" and weights is not None and len(weights) == 2:  # [Cout, Cin]
        return reduced_macs(out, weights[1:])
    if op == "BATCH_MATMUL" and inputs and inputs[0] is not None and len(inputs[0]) >= 2:
        return reduced_macs(out, [inputs[0][-2] if adj_x else inputs[0][-1]])
    return numel(out)


# ------------------------------------------------------------------------------------ ONNX
_ONNX_CONV_WEIGHT = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}  # which input is the filter
_ONNX_MATMUL = ("MatMul", "MatMulInteger", "QLinearMatMul")


def onnx_macs(op_type: str, inputs: list[Sequence[int] | None], outputs: list[Sequence[int] | None],
              trans_a: bool = False) -> int:
    """MACs of an ONNX operator from its input and output shapes (None: unknown)."""
    out = outputs[0] if outputs and outputs[0] is not None else ()
    w = _ONNX_CONV_WEIGHT.get(op_type)
    if w is not None and len(inputs) > w and inputs[w] is not None and len(inputs[w]) >= 3:
        return reduced_macs(out, inputs[w][1:])  # filter [Cout, Cin / groups, k...]
    if op_type == "ConvTranspose" and len(inputs) > 1 and inputs[0] is not None and inputs[1] is not None:
        return reduced_macs(inputs[0], inputs[1][1:])  # filter [Cin, Cout / groups, k...]
    if op_type == "Gemm" and inputs and inputs[0] is not None and len(inputs[0]) == 2:
        return reduced_macs(out, [inputs[0][0] if trans_a else inputs[0][1]])
    if op_type in _ONNX_MATMUL and inputs and inputs[0] is not None and len(inputs[0]) >= 1:
        return reduced_macs(out, [inputs[0][-1]])
    return numel(out)
