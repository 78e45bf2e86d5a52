"""A user's model in: an ONNX file, a PyTorch factory in a Python file, a Hugging Face architecture
with random weights, or a built-in network, each imported into Relax with its weights bound.

A `Model` keeps what its source framework needs to run it too (the ONNX file, the torch module), so
a compiled model can be checked against, and benchmarked beside, what a user would run without TVM.
Every import failure is one `HiertuneError` naming the model, the op or the fix.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.workloads.onnx_rewrites import fold_pads_into_convs
from hiertune.workloads.tasks import BUILTIN_NETWORKS, Workload

# hf:<name> -> (config class, model class, input kind): transformers architectures at their default
# configs with random weights, so nothing is downloaded.
HF_MODELS = {
    "bert-base-uncased": ("BertConfig", "BertModel", "text"),
    "resnet-50": ("ResNetConfig", "ResNetModel", "image"),
    "mobilenet-v2": ("MobileNetV2Config", "MobileNetV2Model", "image"),
    "vit-base": ("ViTConfig", "ViTModel", "image"),
}
MODEL_HELP = ("an .onnx file, a Python file with a factory (path/model.py:make -> (module, example_inputs)), "
              f"hf:<{'|'.join(HF_MODELS)}> or a built-in network ({', '.join(BUILTIN_NETWORKS)})")
_SHAPE = re.compile(r"^(?P<name>[^:]+):(?P<dims>\d+(?:[x,]\d+)*)$")
_ONNX_DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


@dataclass
class ModelInput:
    """One graph input; integer inputs (token ids) are drawn below `high`."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    high: int = 0


@dataclass
class Model:
    """An imported model: Relax with weights bound, and how to run it in its source framework."""

    name: str
    source: str  # "onnx" or "torch" (torch files, Hugging Face and built-in networks)
    relax_mod: Any
    inputs: list[ModelInput]
    onnx_path: Path | None = None
    torch_module: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        arrays = []
        for spec in self.inputs:
            if np.issubdtype(np.dtype(spec.dtype), np.integer):
                arrays.append(rng.integers(0, max(spec.high, 1), size=spec.shape).astype(spec.dtype))
            else:
                arrays.append(rng.standard_normal(spec.shape).astype(spec.dtype))
        return arrays

    def reference(self, arrays: list[np.ndarray]) -> tuple[str, list[np.ndarray]]:
        """The source framework's outputs on `arrays`: (framework name, outputs)."""
        if self.source == "onnx":
            import onnxruntime as ort

            session = ort.InferenceSession(str(self.onnx_path), providers=["CPUExecutionProvider"])
            feeds = {spec.name: a for spec, a in zip(self.inputs, arrays)}
            return "ONNX Runtime", [np.asarray(o) for o in session.run(None, feeds)]
        import torch

        with torch.no_grad():
            out = self.torch_module(*[torch.from_numpy(a) for a in arrays])
        outs = out if isinstance(out, (tuple, list)) else [out]
        return "PyTorch", [o.detach().numpy() for o in outs]


def parse_input_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """`NAME:1x3x224x224` items as {name: shape}; a malformed item is one error showing the form."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        match = _SHAPE.match(item.strip())
        if not match:
            raise HiertuneError(f"--input-shape {item!r}: write NAME:DIMS with positive integer dims, "
                                "e.g. --input-shape input:1x3x224x224")
        dims = tuple(int(d) for d in re.split(r"[x,]", match.group("dims")))
        if any(d <= 0 for d in dims):
            raise HiertuneError(f"--input-shape {item!r}: every dimension must be positive")
        shapes[match.group("name")] = dims
    return shapes


def load_model(spec: str, input_shapes: dict[str, tuple[int, ...]] | None = None,
               input_dtype: str | None = None, seq_len: int = 128, layers: int | None = None) -> Model:
    """Import `spec` (see MODEL_HELP) into Relax, weights bound as constants."""
    text = spec.strip()
    shapes = dict(input_shapes or {})
    path_part = text.rsplit(":", 1)[0] if ":" in text else text
    if text.lower().startswith("hf:"):
        return _load_hf(text[3:].strip().lower(), seq_len, layers)
    if path_part.endswith(".py"):
        return _load_torch_file(text, shapes)
    if text.lower() in BUILTIN_NETWORKS:
        from hiertune.workloads.networks import builtin_model

        module, example = builtin_model(text.lower())
        return _from_torch(text.lower(), module, (example,), {})
    if Path(text).suffix.lower() == ".onnx" or Path(text).is_file():
        return _load_onnx(Path(text), shapes, input_dtype)
    raise HiertuneError(f"--model {spec!r} is not a file or a known model; give {MODEL_HELP}")


def model_workload(model: Model, target: Any) -> Workload:
    """The model's tuning tasks: fused TIR subgraphs, weighted by how often each appears."""
    from hiertune.workloads.networks import extract_tasks, fuse_for_tasks

    fused = fuse_for_tasks(model.relax_mod, target)
    return Workload(name=model.name, tasks=extract_tasks(fused, target, model.name))


# ---------------------------------------------------------------------------------------- ONNX
def _load_onnx(path: Path, shapes: dict[str, tuple[int, ...]], input_dtype: str | None) -> Model:
    import onnx

    if not path.is_file():
        raise HiertuneError(f"--model {path}: no such file")
    try:
        proto = onnx.load(str(path))
    except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError, onnx its own errors
        raise HiertuneError(f"--model {path} is not an ONNX model ({type(err).__name__}); "
                            "export one with torch.onnx.export or pass a .py factory") from None
    inputs = _onnx_inputs(path, proto, shapes, input_dtype)
    fold_pads_into_convs(proto)  # the frontend lowers Pad to a kernel no Relax pass can fold
    from tvm.relax.frontend.onnx import from_onnx

    try:
        with warnings.catch_warnings():  # the frontend's checker warns of outputs declared without a shape
            warnings.filterwarnings("ignore", message="Field 'shape' of 'type' is required")
            mod = from_onnx(proto, shape_dict={i.name: list(i.shape) for i in inputs},
                            dtype_dict={i.name: i.dtype for i in inputs}, keep_params_in_input=False)
    except Exception as err:  # noqa: BLE001 - the frontend raises OpNotImplemented, TVMError, ...
        raise HiertuneError(f"--model {path}: TVM's ONNX frontend cannot import it: {_first_line(err)}") from None
    return Model(name=path.stem, source="onnx", relax_mod=mod, inputs=inputs, onnx_path=path.resolve())


def _onnx_inputs(path: Path, proto: Any, shapes: dict[str, tuple[int, ...]], input_dtype: str | None) -> list[ModelInput]:
    initializers = {t.name for t in proto.graph.initializer}
    graph_inputs = [v for v in proto.graph.input if v.name not in initializers]
    unknown = set(shapes) - {v.name for v in graph_inputs}
    if unknown:
        raise HiertuneError(f"--input-shape names {', '.join(sorted(unknown))}, but the inputs of {path} are "
                            f"{', '.join(v.name for v in graph_inputs)}")
    inputs = []
    for value in graph_inputs:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
                for d in tensor.shape.dim]
        dtype = _ONNX_DTYPES.get(tensor.elem_type) or input_dtype
        if dtype is None:
            raise HiertuneError(f"--model {path}: input {value.name!r} has ONNX element type {tensor.elem_type}; "
                                "give --input-dtype (e.g. float32)")
        if value.name in shapes:
            given = shapes.pop(value.name)
            if len(given) != len(dims) or any(isinstance(d, int) and d != g for d, g in zip(dims, given)):
                raise HiertuneError(f"--input-shape {value.name}:{'x'.join(map(str, given))} does not fit "
                                    f"input {value.name!r} of {path}, shaped {_dims(dims)}")
            dims = list(given)
        elif any(not isinstance(d, int) for d in dims):
            example = "x".join(str(d) if isinstance(d, int) else "1" for d in dims)
            raise HiertuneError(f"--model {path}: input {value.name!r} has dynamic dims {_dims(dims)}; "
                                f"give --input-shape {value.name}:{example}")
        inputs.append(ModelInput(value.name, tuple(dims), dtype, high=2))
    return inputs


def _dims(dims: list[Any]) -> str:
    return "[" + ", ".join(map(str, dims)) + "]"


# --------------------------------------------------------------------------------------- torch
def _load_torch_file(spec: str, shapes: dict[str, tuple[int, ...]]) -> Model:
    file_part, _, factory_name = spec.rpartition(":") if not spec.endswith(".py") else (spec, ":", "")
    path = Path(file_part)
    if not factory_name:
        raise HiertuneError(f"--model {spec}: name the factory after the file, e.g. --model {spec}:make_model")
    if not path.is_file():
        raise HiertuneError(f"--model {spec}: no such file {path}")
    if shapes:
        raise HiertuneError(f"--input-shape is for ONNX models; the factory in {path} sets its inputs' shapes")
    module_name = f"hiertune_user_model_{abs(hash(path.resolve()))}"
    try:
        loader = importlib.util.spec_from_file_location(module_name, path)
        user_module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = user_module
        loader.loader.exec_module(user_module)
    except Exception as err:  # noqa: BLE001 - the user's file can raise anything
        raise HiertuneError(f"--model {spec}: importing {path} failed: {_first_line(err)}") from None
    factory = getattr(user_module, factory_name, None)
    if not callable(factory):
        raise HiertuneError(f"--model {spec}: {path} defines no function {factory_name!r}")
    try:
        made = factory()
    except Exception as err:  # noqa: BLE001
        raise HiertuneError(f"--model {spec}: {factory_name}() raised {_first_line(err)}") from None
    import torch

    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)):
        raise HiertuneError(f"--model {spec}: {factory_name}() must return (torch.nn.Module, example_inputs)")
    module, example = made
    example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    return _from_torch(f"{path.stem}:{factory_name}", module.eval(), example, {})


def _from_torch(name: str, module: Any, example: tuple[Any, ...], options: dict[str, Any]) -> Model:
    import torch

    from hiertune.workloads.networks import torch_to_relax

    if not all(isinstance(x, torch.Tensor) for x in example):
        raise HiertuneError(f"--model {name}: example inputs must be torch tensors")
    try:
        mod = torch_to_relax(module, example)
    except Exception as err:  # noqa: BLE001 - torch.export and the frontend raise many types
        raise HiertuneError(f"--model {name}: torch.export / TVM's PyTorch frontend failed: {_first_line(err)}") from None
    inputs = [ModelInput(f"input{i}", tuple(x.shape), str(x.dtype).replace("torch.", ""),
                         high=int(x.max()) + 1 if not x.is_floating_point() else 0)
              for i, x in enumerate(example)]
    return Model(name=name, source="torch", relax_mod=mod, inputs=inputs, torch_module=module, options=options)


# -------------------------------------------------------------------------------- Hugging Face
def _first_output(model: Any) -> Any:
    """The transformers model returning one tensor (its last hidden state), not a ModelOutput."""
    import torch

    class FirstOutput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            return self.model(x)[0]

    return FirstOutput().eval()


def _load_hf(name: str, seq_len: int, layers: int | None) -> Model:
    module, example, label, vocab = hf_torch_model(name, seq_len, layers)
    built = _from_torch(label, module, (example,), {"seq_len": seq_len, "layers": layers})
    if vocab:
        built.inputs[0].high = vocab
    return built


def hf_torch_model(name: str, seq_len: int = 128, layers: int | None = None) -> tuple[Any, Any, str, int]:
    """(module returning its last hidden state, example input, label, vocabulary size or 0) of a
    Hugging Face model from the table, random weights (seed 0): what `hf:` imports, also for an
    ONNX export."""
    if name not in HF_MODELS:
        raise HiertuneError(f"--model hf:{name} is not in the table; choose hf:{', hf:'.join(HF_MODELS)}")
    import torch
    import transformers

    config_class, model_class, kind = HF_MODELS[name]
    config = getattr(transformers, config_class)()
    if layers is not None:
        if not hasattr(config, "num_hidden_layers"):
            raise HiertuneError(f"--layers applies to transformer models, not hf:{name}")
        config.num_hidden_layers = layers
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config).eval()
    if kind == "text":
        example = torch.randint(0, config.vocab_size, (1, seq_len), dtype=torch.int64)
    else:
        size = getattr(config, "image_size", 224)
        example = torch.randn(1, config.num_channels, size, size)
    label = f"hf-{name}" + (f"-{layers}l" if layers is not None else "") + (f"-s{seq_len}" if kind == "text" else "")
    return _first_output(model), example, label, config.vocab_size if kind == "text" else 0


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(err).__name__}: {text}"[:300]
