"""Resolve a `--model` argument to an OpGraph: a zoo model name, a graph .json, a .tflite or an
.onnx file.

Every entry point (the partition command, the benchmark, the solver actor) takes models the same
way, and every bad input ends as one `GraphError` that names the file and the fix.
"""

from __future__ import annotations

from pathlib import Path

from hiertune.errors import HiertuneError
from hiertune.solvers.graph import GraphError, OpGraph


def load_graph(model: str | Path, form: str = "keras") -> OpGraph:
    """`resnet152` (zoo, in the given form), `path/graph.json`, `path/model.tflite` or `path/model.onnx`."""
    text = str(model)
    path = Path(text)
    if text.endswith(".json"):
        return OpGraph.load_json(path)
    if text.endswith(".tflite"):
        return load_tflite_graph(path)
    if text.endswith(".onnx"):
        from hiertune.solvers.onnx_graph import onnx_graph_from_file

        return onnx_graph_from_file(path)
    if path.exists():
        raise GraphError(f"{path}: unknown graph file type; pass a .json graph, a .tflite or an .onnx model")
    from hiertune.solvers.zoo import load_zoo_graph

    try:
        return load_zoo_graph(text, form)
    except GraphError:
        raise
    except HiertuneError as err:
        raise GraphError(str(err)) from None


def load_tflite_graph(path: str | Path) -> OpGraph:
    """The operator graph of a .tflite file (no TensorFlow); damaged files give one GraphError."""
    from hiertune.solvers.tflite_model import TFLiteModelError
    from hiertune.solvers.zoo import tflite_graph_from_file

    path = Path(path)
    if not path.is_file():
        raise GraphError(f"TFLite model {path} does not exist; pass the path of a .tflite file")
    try:
        return tflite_graph_from_file(path)
    except TFLiteModelError as err:
        raise GraphError(str(err)) from None
    except GraphError as err:
        raise GraphError(f"{path}: {err}") from None
