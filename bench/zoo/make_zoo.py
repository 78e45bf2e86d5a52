"""Regenerate the model zoo: Keras layer graphs, int8 TFLite models and their op graphs.

Two phases, because TensorFlow stays out of the project's venv:

1. `--phase keras` runs in a separate TensorFlow venv (the `zoo` extra):

       python3 -m venv /work/tfvenv && /work/tfvenv/bin/pip install "tensorflow-cpu==2.21.*"
       /work/tfvenv/bin/python bench/zoo/make_zoo.py --phase keras [--models mobilenetv2,...]

   For each ImageNet model (keras.applications, weights=None, static batch 1) it writes the
   Keras layer graph `hiertune/data/zoo/<model>.keras.json` (nodes = layers, int8 parameter
   bytes = parameter count, edges = inbound connections with output tensor bytes) and converts
   the model to full-int8 TFLite (a few random calibration images) as `runs/zoo/<model>.tflite`.
   Every model runs in its own subprocess so each conversion's memory is returned to the system.

2. `--phase graphs` runs in the project venv (no TensorFlow): reads every `runs/zoo/*.tflite`
   with hiertune's TFLite importer and writes `hiertune/data/zoo/<model>.tflite.json`; the small
   models are copied to `bench/models/` (committed) so the pipeline benchmark runs without TF.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DATA_DIR = ROOT / "hiertune" / "data" / "zoo"
TFLITE_DIR = ROOT / "runs" / "zoo"
COMMITTED_DIR = ROOT / "bench" / "models"

# name -> (keras.applications constructor, input side). Smallest first: the benchmark's models
# are ready early; VGG16's conversion peaks at ~8.5 GB and is last.
MODELS: dict[str, tuple[str, int]] = {
    "mobilenetv2": ("MobileNetV2", 224),
    "efficientnetb0": ("EfficientNetB0", 224),
    "mobilenet": ("MobileNet", 224),
    "densenet121": ("DenseNet121", 224),
    "inceptionv3": ("InceptionV3", 299),
    "nasnetmobile": ("NASNetMobile", 224),
    "resnet50": ("ResNet50", 224),
    "densenet169": ("DenseNet169", 224),
    "xception": ("Xception", 299),
    "densenet201": ("DenseNet201", 224),
    "resnet101": ("ResNet101", 224),
    "resnet152": ("ResNet152", 224),
    "inceptionresnetv2": ("InceptionResNetV2", 299),
    "vgg16": ("VGG16", 224),
    # today's sizes (700-2,100 TFLite operators); random weights like the rest
    "convnexttiny": ("ConvNeXtTiny", 224),
    "efficientnetv2s": ("EfficientNetV2S", 384),
    "nasnetlarge": ("NASNetLarge", 331),
    "efficientnetb7": ("EfficientNetB7", 600),
    "vit_b16": ("vit_b16_encoder", 224),  # built here (`ENCODERS`): keras.applications has none
    "bert_base": ("bert_base_encoder", 128),  # side = sequence length
}
# .tflite files small enough to commit (~8 MB in all); the rest are regenerated into runs/zoo/.
COMMIT_TFLITE = ("mobilenetv2",)


def _encoder_blocks(x, blocks: int = 12, width: int = 768, heads: int = 12, mlp: int = 3072):
    """`blocks` pre-norm transformer blocks (attention + MLP, residual adds), as in ViT-B and BERT-base."""
    from tensorflow import keras

    for b in range(blocks):
        h = keras.layers.LayerNormalization(epsilon=1e-6, name=f"block{b}_ln1")(x)
        h = keras.layers.MultiHeadAttention(heads, width // heads, name=f"block{b}_attention")(h, h)
        x = keras.layers.Add(name=f"block{b}_add1")([x, h])
        h = keras.layers.LayerNormalization(epsilon=1e-6, name=f"block{b}_ln2")(x)
        h = keras.layers.Dense(mlp, activation="gelu", name=f"block{b}_mlp1")(h)
        h = keras.layers.Dense(width, name=f"block{b}_mlp2")(h)
        x = keras.layers.Add(name=f"block{b}_add2")([x, h])
    return keras.layers.LayerNormalization(epsilon=1e-6, name="final_ln")(x)


def position_embedding(length: int, width: int):
    """A learned position table added to the tokens (the class is made here, so this module
    imports without TensorFlow)."""
    from tensorflow import keras

    class PositionEmbedding(keras.layers.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(shape=(1, length, width), name="table")

        def call(self, x):
            return x + self.table

    return PositionEmbedding(name="position_embedding")


def vit_b16_encoder(side: int):
    """ViT-B/16-shaped: 16x16 patches -> 768-wide tokens -> 12 encoder blocks -> 1000 classes."""
    from tensorflow import keras

    inp = keras.Input(shape=(side, side, 3), batch_size=1)
    x = keras.layers.Conv2D(768, 16, strides=16, name="patch_embedding")(inp)
    tokens = (side // 16) ** 2
    x = keras.layers.Reshape((tokens, 768), name="tokens")(x)
    x = position_embedding(tokens, 768)(x)
    x = _encoder_blocks(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(inp, keras.layers.Dense(1000, name="head")(x), name="vit_b16")


def bert_base_encoder(length: int):
    """BERT-base-shaped: 30,522-token embedding + positions -> 12 encoder blocks (768 wide)."""
    from tensorflow import keras

    inp = keras.Input(shape=(length,), batch_size=1, dtype="int32")
    x = keras.layers.Embedding(30522, 768, name="token_embedding")(inp)
    x = position_embedding(length, 768)(x)
    x = _encoder_blocks(x)
    return keras.Model(inp, x, name="bert_base")


ENCODERS = {"vit_b16_encoder": vit_b16_encoder, "bert_base_encoder": bert_base_encoder}


def _tensor_bytes(tensor) -> int:
    shape = [d if d is not None else 1 for d in tensor.shape]
    return int(math.prod(shape))  # int8: one byte per element


def keras_layer_graph(model, name: str):
    """The model's layer DAG as an OpGraph: nodes = layers, edges = inbound tensors (int8 bytes)."""
    from hiertune.solvers.graph import Edge, OpGraph, OpNode

    layers = list(model.layers)
    index = {id(layer): i for i, layer in enumerate(layers)}
    nodes = [OpNode(layer.name, type(layer).__name__, int(layer.count_params())) for layer in layers]
    edge_bytes: dict[tuple[int, int], int] = {}
    seen: set[tuple[int, int, int]] = set()
    for dst, layer in enumerate(layers):
        for node in layer._inbound_nodes:
            for tensor in node.input_tensors:
                src_layer = tensor._keras_history.operation
                src = index.get(id(src_layer))
                if src is None or src == dst:
                    continue
                key = (src, dst, id(tensor))
                if key in seen:
                    continue
                seen.add(key)
                edge_bytes[(src, dst)] = edge_bytes.get((src, dst), 0) + _tensor_bytes(tensor)
    edges = [Edge(s, d, b) for (s, d), b in sorted(edge_bytes.items())]
    return OpGraph(name=name, nodes=nodes, edges=edges, source="keras", dtype="int8")


def build_one(name: str, calibration: int, skip_tflite: bool) -> dict:
    """Build, graph and convert one model (runs inside its own subprocess)."""
    import numpy as np
    import tensorflow as tf

    ctor_name, side = MODELS[name]
    t0 = time.time()
    if ctor_name in ENCODERS:
        model = ENCODERS[ctor_name](side)
    else:
        ctor = getattr(tf.keras.applications, ctor_name)
        inp = tf.keras.Input(shape=(side, side, 3), batch_size=1)
        model = ctor(weights=None, input_tensor=inp)
    token_input = model.inputs[0].dtype == "int32"
    graph = keras_layer_graph(model, name)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    graph.save_json(DATA_DIR / f"{name}.keras.json")
    info = {"model": name, "keras_layers": graph.num_nodes, "keras_edges": len(graph.edges),
            "params": int(model.count_params()), "keras_longest_path": graph.longest_path_length(),
            "build_s": round(time.time() - t0, 1)}
    if skip_tflite:
        info["tflite"] = "skipped"
        return info
    rng = np.random.default_rng(0)

    def representative():
        for _ in range(calibration):
            if token_input:
                yield [rng.integers(0, 30522, size=(1, side)).astype(np.int32)]
            else:
                yield [rng.uniform(-1.0, 1.0, size=(1, side, side, 3)).astype(np.float32)]

    def convert(full_int8: bool) -> bytes:
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if full_int8:
            converter.representative_dataset = representative
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            if not token_input:
                converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        return converter.convert()

    t1 = time.time()
    try:
        blob, quant = convert(full_int8=True), "int8"
    except Exception as err:  # noqa: BLE001 - an op without an int8 kernel: int8 weights only
        print(f"full-int8 conversion failed ({type(err).__name__}); int8 weights, float activations",
              file=sys.stderr)
        blob, quant = convert(full_int8=False), "int8 weights"
    TFLITE_DIR.mkdir(parents=True, exist_ok=True)
    (TFLITE_DIR / f"{name}.tflite").write_bytes(blob)
    info.update({"tflite_bytes": len(blob), "convert_s": round(time.time() - t1, 1), "quantization": quant})
    return info


def phase_keras(names: list[str], calibration: int, skip_tflite: set[str]) -> None:
    log = TFLITE_DIR / "zoo_manifest.jsonl"
    TFLITE_DIR.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names, 1):
        t0 = time.time()
        print(f"[{i}/{len(names)}] {name} ...", flush=True)
        cmd = [sys.executable, __file__, "--one", name, "--calibration", str(calibration)]
        if name in skip_tflite:
            cmd.append("--skip-tflite")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or "").strip().splitlines()[-5:]
            print(f"  FAILED ({proc.returncode}) after {time.time() - t0:.0f} s: {' | '.join(tail)}", flush=True)
            continue
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        with log.open("a") as f:
            f.write(json.dumps(info) + "\n")
        print(f"  {info} ({time.time() - t0:.0f} s)", flush=True)


def phase_graphs(names: list[str]) -> None:
    from hiertune.solvers.zoo import tflite_graph_from_file

    COMMITTED_DIR.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = TFLITE_DIR / f"{name}.tflite"
        if not path.exists():
            print(f"{name}: no {path}; run --phase keras first")
            continue
        graph = tflite_graph_from_file(path, name=name)
        graph.save_json(DATA_DIR / f"{name}.tflite.json")
        print(f"{name}: {graph.num_nodes} ops, {len(graph.edges)} edges, {graph.total_param_bytes / 1e6:.1f} MB params")
        if name in COMMIT_TFLITE:
            shutil.copyfile(path, COMMITTED_DIR / f"{name}.tflite")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["keras", "graphs"], default="keras")
    parser.add_argument("--models", default="all", help="comma-separated names, or 'all'")
    parser.add_argument("--calibration", type=int, default=4, help="random calibration images per model")
    parser.add_argument("--skip-tflite-for", default="", help="comma-separated models to graph without converting")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--skip-tflite", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        print(json.dumps(build_one(args.one, args.calibration, args.skip_tflite)))
        return
    names = list(MODELS) if args.models == "all" else [m.strip().lower() for m in args.models.split(",")]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    if args.phase == "keras":
        phase_keras(names, args.calibration, {m for m in args.skip_tflite_for.split(",") if m})
    else:
        phase_graphs(names)


if __name__ == "__main__":
    main()
