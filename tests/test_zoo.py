"""The committed model zoo: real graphs without TensorFlow, and clear errors for unknown names."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiertune.errors import HiertuneError
from hiertune.solvers.zoo import load_zoo_graph, tflite_graph_from_file, zoo_models

ROOT = Path(__file__).resolve().parents[1]


def test_zoo_lists_models_with_both_forms():
    names = zoo_models()
    assert {"mobilenetv2", "densenet121", "inceptionv3"} <= set(names)
    # the paper-era models have both forms; of the newer ones, those whose Keras layer graph
    # bench/zoo/make_zoo.py cannot read completely (nested sub-models) ship the TFLite form only
    tflite_only = set(zoo_models("tflite")) - set(zoo_models("keras"))
    assert tflite_only <= {"convnexttiny", "efficientnetv2s"}


def test_keras_graphs_have_the_seed_papers_layer_counts():
    # |V| of the seed paper = Keras layers (input layer included)
    assert load_zoo_graph("DenseNet121").num_nodes == 429
    if "xception" in zoo_models("keras"):
        assert load_zoo_graph("xception").num_nodes == 134
    g = load_zoo_graph("mobilenetv2", "keras")
    assert g.source == "keras" and 3_400_000 < g.total_param_bytes < 3_600_000
    assert all(e.tensor_bytes > 0 for e in g.edges)


def test_tflite_graph_matches_the_committed_model():
    committed = load_zoo_graph("mobilenetv2", "tflite")
    derived = tflite_graph_from_file(ROOT / "bench" / "models" / "mobilenetv2.tflite", name="mobilenetv2")
    assert committed.to_dict() == derived.to_dict()
    assert committed.num_nodes < load_zoo_graph("mobilenetv2", "keras").num_nodes  # BN folded, etc.


def test_unknown_model_or_form_lists_what_exists():
    with pytest.raises(HiertuneError, match="known: .*mobilenetv2"):
        load_zoo_graph("resnet9000")
    with pytest.raises(HiertuneError, match="keras, tflite"):
        load_zoo_graph("mobilenetv2", form="onnx")
