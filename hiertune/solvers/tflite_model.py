"""Read and write TFLite flatbuffers as mutable objects (the schema's object API), no TensorFlow.

The segmenter and the fixture generator rewrite models; both need the same checked load (a
corrupt file is one clear error, not a struct.error deep in flatbuffers) and the same save.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError

_IDENTIFIER = b"TFL3"


class TFLiteModelError(HiertuneError):
    """A .tflite file that cannot be read or rewritten."""


def schema() -> Any:
    """The generated TFLite schema module shipped with ai-edge-litert (object API included)."""
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def read_model(path: str | Path) -> Any:
    """Load a .tflite file as a `ModelT`, refusing anything that is not a readable TFLite model."""
    path = Path(path)
    if not path.is_file():
        raise TFLiteModelError(f"TFLite model {path} does not exist; pass the path of a .tflite file")
    raw = path.read_bytes()
    return model_from_bytes(raw, origin=str(path))


def model_from_bytes(raw: bytes, *, origin: str = "<bytes>") -> Any:
    s = schema()
    if len(raw) < 8 or raw[4:8] != _IDENTIFIER:
        raise TFLiteModelError(
            f"{origin} is not a TFLite flatbuffer (missing the 'TFL3' identifier); "
            "pass a .tflite file written by the TFLite converter"
        )
    try:
        model = s.ModelT.InitFromPackedBuf(bytearray(raw), 0)
    except Exception as err:  # flatbuffers raises struct.error, IndexError, ... on damage
        raise TFLiteModelError(
            f"{origin} is a damaged TFLite file ({type(err).__name__}: {err}); regenerate or re-download it"
        ) from None
    if not model.subgraphs:
        raise TFLiteModelError(f"{origin} holds no subgraph; nothing to run")
    n_buffers = len(model.buffers or [])
    for sg in model.subgraphs:
        n_tensors = len(sg.tensors or [])
        for t in sg.tensors or []:
            if not 0 <= t.buffer < max(n_buffers, 1):
                raise TFLiteModelError(f"{origin} is damaged: a tensor names buffer {t.buffer} of {n_buffers}")
        for op in sg.operators or []:
            for i in list(op.inputs if op.inputs is not None else []) + list(op.outputs if op.outputs is not None else []):
                if i >= n_tensors:
                    raise TFLiteModelError(f"{origin} is damaged: an operator names tensor {i} of {n_tensors}")
            if not 0 <= op.opcodeIndex < len(model.operatorCodes or []):
                raise TFLiteModelError(f"{origin} is damaged: an operator names opcode {op.opcodeIndex}")
    _inline_offset_buffers(model, raw)
    return model


def _inline_offset_buffers(model: Any, raw: bytes) -> None:
    """Models over 2 GB keep buffer data after the flatbuffer (offset/size); pull it inline."""
    import numpy as np

    for buf in model.buffers or []:
        if buf is not None and buf.offset > 1 and buf.size > 0:
            buf.data = np.frombuffer(raw[buf.offset : buf.offset + buf.size], dtype=np.uint8).copy()
            buf.offset = 0
            buf.size = 0


def model_to_bytes(model: Any) -> bytes:
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=_IDENTIFIER)
    return bytes(builder.Output())


def write_model(model: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model_to_bytes(model))
    return path


def builtin_name(model: Any, opcode_index: int) -> str:
    """The builtin operator name (e.g. 'CONV_2D') of an opcode entry, or the custom code."""
    s = schema()
    code = model.operatorCodes[opcode_index]
    value = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    if value == s.BuiltinOperator.CUSTOM:
        custom = code.customCode
        return custom.decode() if isinstance(custom, bytes) else str(custom)
    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    return names.get(value, f"BUILTIN_{value}")
