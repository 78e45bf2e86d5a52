"""The operator graph of an ONNX model, read as TFLite's is: operators are nodes, the constant
inputs they read are their parameter bytes, activation tensors are edges.

Sizes come from tensor shapes and element types, never from the weights themselves, so a model
whose weights live in external data files is read without loading (or even having) those files.
Each operator's MACs come from the same shapes (`op_macs`). `Constant` operators are folded into the operators that read them (TFLite stores such tensors as
buffers, not operators), so both importers give one graph shape for one network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hiertune.solvers.graph import Edge, GraphError, OpGraph, OpNode
from hiertune.solvers.op_macs import onnx_macs

_INT8_TYPES = (2, 3)  # TensorProto.UINT8, TensorProto.INT8


def _numel(dims: Any) -> int:
    n = 1
    for d in dims:
        n *= max(int(d), 1)
    return n


def _itemsize(elem_type: int) -> int:
    from onnx import helper

    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 1  # strings and unknown types: count one byte per element


def _value_bytes(value_info: Any) -> int:
    """Bytes of an activation from its inferred type; unknown or symbolic dimensions count as 1."""
    tensor_type = value_info.type.tensor_type
    return _numel(_dims(tensor_type)) * _itemsize(tensor_type.elem_type)


def _dims(tensor_type: Any) -> list[int]:
    return [d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim]


def _constant_bytes(node: Any) -> int:
    """Bytes of a `Constant` operator's value (any of its value attributes)."""
    for attr in node.attribute:
        if attr.HasField("t"):
            return _numel(attr.t.dims) * _itemsize(attr.t.data_type)
        if attr.floats or attr.ints:
            return 4 * len(attr.floats) + 8 * len(attr.ints)
    return 0


def load_onnx_model(path: Path) -> Any:
    """The ModelProto with shapes inferred and external weights left unread."""
    import onnx
    from google.protobuf.message import DecodeError

    if not path.is_file():
        raise GraphError(f"ONNX model {path} does not exist; pass the path of a .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, OSError) as err:
        raise GraphError(f"{path} is not a readable ONNX model ({type(err).__name__}: {err}); "
                         "re-export it (torch.onnx.export, tf2onnx)") from None
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is best effort: edges then use declared shapes
        return model


def onnx_op_graph(model: Any, name: str) -> OpGraph:
    graph = model.graph
    constant_bytes = {i.name: _numel(i.dims) * _itemsize(i.data_type) for i in graph.initializer}
    ops = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for out in node.output:
                constant_bytes[out] = _constant_bytes(node)
        else:
            ops.append(node)
    if not ops:
        raise GraphError(f"ONNX model {name!r} has no operators (besides constants): nothing to partition")
    activation_bytes = {v.name: _value_bytes(v) for v in (*graph.value_info, *graph.output, *graph.input)}
    shapes = {v.name: _dims(v.type.tensor_type) for v in (*graph.value_info, *graph.output, *graph.input)
              if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    shapes.update({i.name: list(i.dims) for i in graph.initializer})
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.HasField("t") and node.output:
                    shapes[node.output[0]] = list(attr.t.dims)
    producer: dict[str, int] = {}
    nodes: list[OpNode] = []
    seen_names: set[str] = set()
    for i, node in enumerate(ops):
        params = sum(constant_bytes[t] for t in dict.fromkeys(node.input) if t in constant_bytes)
        label = node.name or (node.output[0] if node.output else f"{node.op_type}_{i}")
        if label in seen_names:
            label = f"{label}#{i}"
        seen_names.add(label)
        trans_a = any(a.name == "transA" and a.i for a in node.attribute)
        macs = onnx_macs(node.op_type, [shapes.get(t) if t else None for t in node.input],
                         [shapes.get(t) if t else None for t in node.output], trans_a=trans_a)
        nodes.append(OpNode(label, node.op_type, params, macs))
        for out in node.output:
            if out:
                producer[out] = i
    edge_bytes: dict[tuple[int, int], int] = {}
    for i, node in enumerate(ops):
        for t in dict.fromkeys(node.input):
            p = producer.get(t)
            if p is not None and p != i:
                edge_bytes[(p, i)] = edge_bytes.get((p, i), 0) + activation_bytes.get(t, 0)
    edges = [Edge(s, d, b) for (s, d), b in sorted(edge_bytes.items())]
    dtype = "int8" if any(i.data_type in _INT8_TYPES for i in graph.initializer) else "float"
    return OpGraph(name=name, nodes=nodes, edges=edges, source="onnx", dtype=dtype)


def onnx_graph_from_file(path: str | Path, name: str | None = None) -> OpGraph:
    path = Path(path)
    return onnx_op_graph(load_onnx_model(path), name or path.stem)
