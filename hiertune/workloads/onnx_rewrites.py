"""Rewrites of an ONNX graph before TVM's frontend reads it.

TVM's ONNX frontend lowers `Pad` straight to a TIR kernel (a `call_tir`), which no Relax pass can
fold. A zero pad in front of a convolution, the way TF / Keras exporters write "same" padding
(`ZeroPadding2D`), would stay a task of its own that only copies the activation, and on CPU it
would sit between the channels-last convolutions with a transpose fused in. ONNX Runtime folds such
a pad into the Conv's `pads` when it loads the model (its PadFusion); `fold_pads_into_convs` does
the same on the proto, so TVM imports the convolution with its padding.
"""

from __future__ import annotations

from typing import Any


def _constants(graph: Any) -> dict[str, Any]:
    """Initializers and `Constant` node outputs, as numpy arrays."""
    from onnx import numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attr.t)
    return values


def _attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for attr in node.attribute:
        if attr.name == name:
            value = helper.get_attribute_value(attr)
            return value.decode() if isinstance(value, bytes) else value
    return default


def _input(node: Any, index: int) -> str:
    """The node's `index`-th input name ("" where it is absent or left out)."""
    return node.input[index] if len(node.input) > index else ""


def _zero_pad_widths(node: Any, constants: dict[str, Any]) -> list[int] | None:
    """A constant-mode, zero-valued pad's widths ([begin..., end...] over all axes), or None if
    the pad is anything else (reflect / edge, another value, computed widths, an axes input)."""
    if _attr(node, "mode", "constant") != "constant" or _input(node, 3):
        return None
    if _input(node, 1):  # opset >= 11: widths and value are inputs
        if _input(node, 1) not in constants:
            return None
        widths = [int(w) for w in constants[_input(node, 1)].reshape(-1)]
        value_name = _input(node, 2)
        if value_name and (value_name not in constants or constants[value_name].size != 1):
            return None
        value = float(constants[value_name].reshape(-1)[0]) if value_name else 0.0
    else:  # opset < 11: attributes
        widths, value = [int(w) for w in _attr(node, "pads", [])], float(_attr(node, "value", 0.0))
    return widths if value == 0.0 and widths else None


def fold_pads_into_convs(model: Any) -> int:
    """Fold every zero `Pad` of only spatial axes whose users are all `Conv`s (as their data input,
    with explicit padding) into those convolutions' `pads`, in place; returns how many pads went.
    A pad that is a graph output, pads the batch or channel axis, crops, or feeds anything else stays."""
    from onnx import helper

    graph = model.graph
    constants = _constants(graph)
    outputs = {v.name for v in graph.output}
    users: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    folded = []
    for pad in (n for n in graph.node if n.op_type == "Pad"):
        widths = _zero_pad_widths(pad, constants)
        convs = users.get(pad.output[0], [])
        if widths is None or pad.output[0] in outputs or not convs:
            continue
        rank = len(widths) // 2
        spatial = rank - 2
        if (spatial < 1 or min(widths) < 0 or any(widths[a] or widths[rank + a] for a in (0, 1))
                or any(c.op_type != "Conv" or _attr(c, "auto_pad", "NOTSET") != "NOTSET"
                       or list(c.input).count(pad.output[0]) != 1 or c.input[0] != pad.output[0] for c in convs)):
            continue
        for conv in convs:
            own = list(_attr(conv, "pads", [0] * 2 * spatial))
            merged = [own[i] + widths[2 + i] for i in range(spatial)] + \
                     [own[spatial + i] + widths[rank + 2 + i] for i in range(spatial)]
            kept = [a for a in conv.attribute if a.name != "pads"]
            del conv.attribute[:]
            conv.attribute.extend([*kept, helper.make_attribute("pads", merged)])
            conv.input[0] = pad.input[0]
        folded.append(pad)
    for pad in folded:
        graph.node.remove(pad)
    return len(folded)
