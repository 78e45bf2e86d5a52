"""The committed model zoo: real ImageNet model graphs without TensorFlow installed.

`bench/zoo/make_zoo.py` writes two graph forms per model under `hiertune/data/zoo/`:
`<model>.keras.json` (Keras layers, the seed paper's |V|) and `<model>.tflite.json` (the int8
TFLite operator graph, the one a deployed pipeline runs). This module lists and loads them, and
turns a .tflite file into its operator graph (the naming the segmenter resolves plans with).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError
from hiertune.resources import data_path
from hiertune.solvers.graph import Edge, OpGraph, OpNode

FORMS = ("keras", "tflite")

_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8, 15: 4, 16: 2, 18: 2}


def zoo_dir() -> Path:
    return data_path("zoo")


def zoo_models(form: str | None = None) -> list[str]:
    """Names of the zoo models (those with a graph of `form`, or of any form)."""
    forms = FORMS if form is None else (form,)
    names = {p.name.split(".")[0] for f in forms for p in zoo_dir().glob(f"*.{f}.json")}
    return sorted(names)


def load_zoo_graph(name: str, form: str = "keras") -> OpGraph:
    """The committed graph of a zoo model; unknown names or forms list what exists."""
    if form not in FORMS:
        raise HiertuneError(f"graph form {form!r} is unknown; use one of {', '.join(FORMS)}")
    key = name.lower()
    path = zoo_dir() / f"{key}.{form}.json"
    if not path.is_file():
        known = zoo_models(form)
        raise HiertuneError(
            f"no {form} graph for model {name!r} in the zoo; known: {', '.join(known) or '(none)'}"
            " (regenerate with bench/zoo/make_zoo.py)"
        )
    return OpGraph.load_json(path)


def zoo_tflite_path(name: str, root: str | Path | None = None) -> Path:
    """A zoo model's int8 .tflite: committed under bench/models/, or regenerated into runs/zoo/
    (both relative to the repository root, by default the working directory)."""
    root = Path(root) if root is not None else Path.cwd()
    for folder in (root / "bench" / "models", root / "runs" / "zoo"):
        path = folder / f"{name.lower()}.tflite"
        if path.is_file():
            return path
    raise HiertuneError(
        f"no {name.lower()}.tflite in bench/models/ or runs/zoo/ (from the repository root); "
        "regenerate it with bench/zoo/make_zoo.py, or pass the path of a .tflite file"
    )


# ------------------------------------------------------------------------- TFLite op graphs
def _tensor_bytes(tensor: Any) -> int:
    n = 1
    for d in tensor.shape if tensor.shape is not None else []:
        n *= max(int(d), 1)
    return n * _ITEMSIZE.get(int(tensor.type), 1)


def tflite_node_names(model: Any) -> list[str]:
    """One unique name per operator: its first output tensor's name (TFLite ops have none)."""
    sg = model.subgraphs[0]
    names: list[str] = []
    seen: set[str] = set()
    for i, op in enumerate(sg.operators):
        outs = [int(t) for t in (op.outputs if op.outputs is not None else []) if int(t) >= 0]
        raw = sg.tensors[outs[0]].name if outs else None
        name = (raw.decode() if isinstance(raw, bytes) else str(raw)) if raw else f"op{i}"
        if name in seen:
            name = f"{name}#{i}"
        seen.add(name)
        names.append(name)
    return names


def _shape(sg: Any, t: int) -> list[int] | None:
    if t < 0:
        return None
    shape = sg.tensors[t].shape
    return [int(d) for d in shape] if shape is not None else []


def tflite_op_graph(model: Any, name: str) -> OpGraph:
    """Operators as nodes (constant input bytes as parameters, MACs from the tensor shapes:
    `op_macs`), activation tensors as edges."""
    from hiertune.solvers.op_macs import tflite_macs
    from hiertune.solvers.tflite_model import builtin_name

    sg = model.subgraphs[0]
    names = tflite_node_names(model)
    producer: dict[int, int] = {}
    nodes: list[OpNode] = []
    for i, op in enumerate(sg.operators):
        params = 0
        seen_buffers: set[int] = set()
        for t in op.inputs if op.inputs is not None else []:
            if t < 0:
                continue
            tensor = sg.tensors[t]
            buf = model.buffers[tensor.buffer]
            if buf.data is not None and len(buf.data) > 0 and tensor.buffer not in seen_buffers:
                seen_buffers.add(tensor.buffer)
                params += len(buf.data)
        op_name = builtin_name(model, op.opcodeIndex)
        macs = tflite_macs(op_name, [_shape(sg, int(t)) for t in (op.inputs if op.inputs is not None else [])],
                           [_shape(sg, int(t)) for t in (op.outputs if op.outputs is not None else [])],
                           adj_x=bool(getattr(op.builtinOptions, "adjX", False)))
        nodes.append(OpNode(names[i], op_name, params, macs))
        for t in op.outputs if op.outputs is not None else []:
            producer[int(t)] = i
    edge_bytes: dict[tuple[int, int], int] = {}
    for i, op in enumerate(sg.operators):
        for t in {int(t) for t in (op.inputs if op.inputs is not None else []) if t >= 0}:
            p = producer.get(t)
            if p is not None and p != i:
                edge_bytes[(p, i)] = edge_bytes.get((p, i), 0) + _tensor_bytes(sg.tensors[t])
    edges = [Edge(s, d, b) for (s, d), b in sorted(edge_bytes.items())]
    dtype = "int8" if any(int(t.type) == 9 for t in sg.tensors) else "float"
    return OpGraph(name=name, nodes=nodes, edges=edges, source="tflite", dtype=dtype)


def tflite_graph_from_file(path: str | Path, name: str | None = None) -> OpGraph:
    from hiertune.solvers.tflite_model import read_model

    path = Path(path)
    return tflite_op_graph(read_model(path), name or path.stem)
