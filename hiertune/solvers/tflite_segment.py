"""Split a TFLite model into K stage models by a partition plan (flatbuffer rewrite, no TensorFlow).

A plan maps every operator node of the model's op graph (names as in
`hiertune.solvers.zoo.tflite_graph_from_file`, the same graph the partitioner solved) to a stage
0..K-1. Stage k's model holds its operators in their original (topological) order, copies of the
constant buffers they read, and as inputs/outputs the activation tensors that cross its
boundaries; quantization parameters travel with every tensor, so running the K models in order
reproduces the whole model's int8 output bit for bit.

A manifest (`segments.json`) beside the K files records each segment's boundary tensors by their
index in the original model, which is how the pipeline runner hands tensors from stage to stage.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError
from hiertune.solvers.tflite_model import TFLiteModelError, read_model, write_model

MANIFEST = "segments.json"


class PlanError(HiertuneError):
    """A partition plan that does not fit the model (unknown or missing nodes, broken precedence)."""


@dataclass
class BoundaryTensor:
    """A tensor that enters or leaves a segment, keyed by its index in the original model."""

    index: int
    name: str
    shape: list[int]
    dtype: int


@dataclass
class Segment:
    stage: int
    path: str
    ops: list[int]
    inputs: list[BoundaryTensor]
    outputs: list[BoundaryTensor]
    param_bytes: int


@dataclass
class SegmentManifest:
    """What the runner needs: the segments in order and which tensors each stage must pass on."""

    model: str
    num_stages: int
    model_inputs: list[BoundaryTensor]
    model_outputs: list[BoundaryTensor]
    segments: list[Segment]
    carry_after: list[list[int]] = field(default_factory=list)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> SegmentManifest:
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST
        if not path.is_file():
            raise HiertuneError(f"segment manifest {path} does not exist; run the segmenter first")
        data = json.loads(path.read_text())

        def bts(items: list[dict]) -> list[BoundaryTensor]:
            return [BoundaryTensor(**t) for t in items]

        segments = [
            Segment(s["stage"], s["path"], s["ops"], bts(s["inputs"]), bts(s["outputs"]), s["param_bytes"])
            for s in data["segments"]
        ]
        return cls(data["model"], data["num_stages"], bts(data["model_inputs"]), bts(data["model_outputs"]),
                   segments, data.get("carry_after", []))


# ------------------------------------------------------------------------------------ plans
def load_plan(path: str | Path) -> dict[str, int]:
    """Read a plan file: {node: stage}, or an object holding it under 'plan' / 'assignment'."""
    path = Path(path)
    if not path.is_file():
        raise PlanError(f"plan file {path} does not exist; write one with `hiertune partition ... --out plan.json`")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PlanError(f"plan file {path} is not valid JSON ({err})") from None
    return extract_plan(data, origin=str(path))


def extract_plan(data: Any, *, origin: str = "plan") -> dict[str, int]:
    if isinstance(data, dict):
        for key in ("plan", "assignment", "stages_of"):
            if isinstance(data.get(key), dict):
                data = data[key]
                break
    if not isinstance(data, dict) or not data:
        raise PlanError(f"{origin}: expected a JSON object mapping node names to stage numbers")
    plan: dict[str, int] = {}
    for node, stage in data.items():
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
            raise PlanError(f"{origin}: node {node!r} has stage {stage!r}; stages are integers 0..K-1")
        plan[str(node)] = stage
    return plan


def op_stages(model: Any, plan: Mapping[str, int], node_names: list[str]) -> list[int]:
    """Stage of every operator (by index), checking names, coverage, stage range and precedence."""
    index = {name: i for i, name in enumerate(node_names)}
    unknown = [n for n in plan if n not in index]
    if unknown:
        raise PlanError(
            f"plan names {len(unknown)} node(s) the model does not have, e.g. {unknown[:3]}; "
            f"the model's operator nodes are e.g. {node_names[:3]} (see `hiertune partition` output)"
        )
    missing = [n for n in node_names if n not in plan]
    if missing:
        raise PlanError(f"plan leaves {len(missing)} operator(s) without a stage, e.g. {missing[:3]}; assign every node")
    stages = [plan[n] for n in node_names]
    k = max(stages) + 1
    empty = sorted(set(range(k)) - set(stages))
    if empty:
        raise PlanError(f"plan leaves stage(s) {empty} of 0..{k - 1} without operators; renumber the stages or use fewer")
    sg = model.subgraphs[0]
    producer: dict[int, int] = {}
    for i, op in enumerate(sg.operators):
        for t in _ids(op.outputs):
            producer[t] = i
    for i, op in enumerate(sg.operators):
        for t in _ids(op.inputs):
            p = producer.get(t)
            if p is not None and stages[p] > stages[i]:
                raise PlanError(
                    f"plan breaks precedence: {node_names[p]!r} (stage {stages[p]}) feeds "
                    f"{node_names[i]!r} (stage {stages[i]}); a consumer's stage must be >= its producer's"
                )
    return stages


# ------------------------------------------------------------------------------------ rewrite
def _ids(values: Any) -> list[int]:
    return [int(v) for v in (values if values is not None else []) if int(v) >= 0]


def _is_constant(model: Any, tensor: Any) -> bool:
    buf = model.buffers[tensor.buffer] if model.buffers else None
    return buf is not None and buf.data is not None and len(buf.data) > 0


def _boundary(sg: Any, index: int) -> BoundaryTensor:
    t = sg.tensors[index]
    name = t.name.decode() if isinstance(t.name, bytes) else str(t.name)
    return BoundaryTensor(index, name, [int(d) for d in (t.shape if t.shape is not None else [])], int(t.type))


def split_model(model: Any, stages: list[int]) -> list[tuple[Any, list[int], list[int], list[int], int]]:
    """Rewrite `model` into one model per stage.

    Returns per stage: (ModelT, operator indices, input tensor indices, output tensor indices,
    constant bytes), tensor indices being those of the original model.
    """
    from hiertune.solvers.tflite_model import schema

    s = schema()
    sg = model.subgraphs[0]
    ops = sg.operators
    k = max(stages) + 1
    model_outputs = set(_ids(sg.outputs))
    consumed_by: dict[int, set[int]] = {}
    for i, op in enumerate(ops):
        for t in _ids(op.inputs):
            consumed_by.setdefault(t, set()).add(stages[i])
    result = []
    for stage in range(k):
        stage_ops = [i for i in range(len(ops)) if stages[i] == stage]
        produced = {t for i in stage_ops for t in _ids(ops[i].outputs)}
        inputs: list[int] = []
        for i in stage_ops:
            for t in _ids(ops[i].inputs):
                if t not in produced and t not in inputs and not _is_constant(model, sg.tensors[t]):
                    inputs.append(t)
        outputs = sorted(
            t for t in produced
            if t in model_outputs or any(c > stage for c in consumed_by.get(t, ()))
        )
        tensor_map: dict[int, int] = {}
        buffer_map: dict[int, int] = {}
        new_tensors: list[Any] = []
        new_buffers: list[Any] = [s.BufferT()]
        const_bytes = 0

        def remap(t: int) -> int:
            nonlocal const_bytes
            if t < 0:
                return t
            if t not in tensor_map:
                old = sg.tensors[t]
                new = copy.copy(old)
                new.quantization = copy.deepcopy(old.quantization)
                if _is_constant(model, old):
                    if old.buffer not in buffer_map:
                        buf = s.BufferT()
                        buf.data = model.buffers[old.buffer].data
                        new_buffers.append(buf)
                        buffer_map[old.buffer] = len(new_buffers) - 1
                        const_bytes += len(buf.data)
                    new.buffer = buffer_map[old.buffer]
                else:
                    new.buffer = 0
                new_tensors.append(new)
                tensor_map[t] = len(new_tensors) - 1
            return tensor_map[t]

        opcode_map: dict[int, int] = {}
        new_codes: list[Any] = []
        new_ops: list[Any] = []
        for t in inputs:
            remap(t)
        for i in stage_ops:
            old = ops[i]
            new = copy.copy(old)
            if old.opcodeIndex not in opcode_map:
                new_codes.append(copy.deepcopy(model.operatorCodes[old.opcodeIndex]))
                opcode_map[old.opcodeIndex] = len(new_codes) - 1
            new.opcodeIndex = opcode_map[old.opcodeIndex]
            new.inputs = [remap(int(t)) for t in (old.inputs if old.inputs is not None else [])]
            new.outputs = [remap(int(t)) for t in (old.outputs if old.outputs is not None else [])]
            new.intermediates = [remap(int(t)) for t in _ids(old.intermediates)] or None
            new_ops.append(new)
        new_sg = s.SubGraphT()
        new_sg.tensors, new_sg.operators = new_tensors, new_ops
        new_sg.inputs = [tensor_map[t] for t in inputs]
        new_sg.outputs = [tensor_map[t] for t in outputs]
        new_sg.name = f"stage{stage}"
        out = s.ModelT()
        out.version = model.version
        out.operatorCodes, out.subgraphs, out.buffers = new_codes, [new_sg], new_buffers
        out.description = f"hiertune segment {stage} of {k}"
        result.append((out, stage_ops, inputs, outputs, const_bytes))
    return result


def segment_tflite(model_path: str | Path, plan: Mapping[str, int], out_dir: str | Path,
                   node_names: list[str] | None = None) -> SegmentManifest:
    """Write one .tflite per stage plus `segments.json` into `out_dir`; returns the manifest."""
    from hiertune.solvers.zoo import tflite_node_names

    model_path = Path(model_path)
    model = read_model(model_path)
    if len(model.subgraphs) != 1:
        raise TFLiteModelError(
            f"{model_path} has {len(model.subgraphs)} subgraphs (control flow); only single-subgraph models can be split"
        )
    sg = model.subgraphs[0]
    if not sg.operators:
        raise TFLiteModelError(f"{model_path} has no operators; nothing to split")
    names = node_names if node_names is not None else tflite_node_names(model)
    stages = op_stages(model, plan, names)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = split_model(model, stages)
    segments: list[Segment] = []
    for stage, (seg_model, ops, inputs, outputs, const_bytes) in enumerate(parts):
        path = write_model(seg_model, out_dir / f"{model_path.stem}.stage{stage}.tflite")
        segments.append(Segment(stage, path.name, ops, [_boundary(sg, t) for t in inputs],
                                [_boundary(sg, t) for t in outputs], const_bytes))
    model_outputs = _ids(sg.outputs)
    carry_after = []
    for stage in range(len(segments)):
        later = {t.index for seg in segments[stage + 1 :] for t in seg.inputs}
        carry_after.append(sorted(later | set(model_outputs)))
    manifest = SegmentManifest(str(model_path), len(segments), [_boundary(sg, t) for t in _ids(sg.inputs)],
                               [_boundary(sg, t) for t in model_outputs], segments, carry_after)
    manifest.save(out_dir / MANIFEST)
    return manifest
