"""Models in, a tuned model out: ONNX and torch-file import, clear import errors, a compiled tuned
model that plain TVM loads and that matches ONNX Runtime, the benchmark, every operator family tuned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hiertune.errors import HiertuneError
from hiertune.platform.compile_model import build_untuned, check_outputs
from hiertune.workloads.demo_model import write_convnet_onnx
from hiertune.workloads.models import load_model, model_workload, parse_input_shapes
from hiertune.workloads.tvm_support import make_target

TARGET = '{"kind": "llvm", "num-cores": 1}'
ROOT = Path(__file__).resolve().parents[1]


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hiertune.cli", *argv], capture_output=True, text=True,
                          cwd=cwd or ROOT)


@pytest.fixture(scope="module")
def target():
    return make_target(TARGET)


@pytest.fixture(scope="module")
def convnet(tmp_path_factory) -> Path:
    return write_convnet_onnx(tmp_path_factory.mktemp("onnx") / "convnet.onnx", image=16, channels=8,
                              dynamic_batch=True)


TORCH_FILE = '''
import torch
from torch import nn


def make():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    return net.eval(), (torch.randn(1, 3, 8, 8),)


def broken():
    raise ValueError("weights file missing")


class Block(nn.Module):
    """What a transformer's transcendentals look like: exact and tanh GELU, softmax, tanh."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = nn.functional.gelu(self.fc(x)) + nn.functional.gelu(x, approximate="tanh")
        return torch.softmax(h, dim=-1) + torch.tanh(h)


def block():
    torch.manual_seed(2)
    return Block().eval(), (3 * torch.randn(2, 16),)


class Scaled(nn.Module):
    """Outputs of scale ~1e-20, as random weights can leave a deep network's."""

    def __init__(self, factor):
        super().__init__()
        self.fc, self.factor = nn.Linear(16, 4), factor

    def forward(self, x):
        return self.fc(x) * self.factor


class MobileBlock(nn.Module):
    """MobileNetV2's inverted residual as Hugging Face writes it: TF-style explicit padding in front of
    a strided depthwise conv, batch norm and ReLU6 after the convs, a residual add."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, groups=16, bias=False), nn.BatchNorm2d(16),
                                       nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.inner = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8))

    def forward(self, x):
        h = self.depthwise(nn.functional.pad(self.expand(x), (0, 1, 0, 1)))  # TF "same" at stride 2
        h = self.project(h)
        return h + self.inner(h)


def mobile_block():
    torch.manual_seed(4)
    net = MobileBlock().eval()
    for bn in [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]:  # batch norms that do something
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5), bn.bias.data.uniform_(-1, 1)
    return net, (2 * torch.randn(1, 8, 16, 16),)


def tiny():
    torch.manual_seed(3)
    return Scaled(1e-20).eval(), (torch.randn(2, 16),)


def tiny_doubled():
    torch.manual_seed(3)
    return Scaled(2e-20).eval(), (torch.randn(2, 16),)
'''


@pytest.fixture(scope="module")
def torch_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("torch") / "net.py"
    path.write_text(TORCH_FILE)
    return path


def test_onnx_model_imports_with_its_tasks_and_weights(convnet, target) -> None:
    model = load_model(str(convnet), parse_input_shapes(["input:1x3x16x16"]))
    assert [(i.name, i.shape, i.dtype) for i in model.inputs] == [("input", (1, 3, 16, 16), "float32")]
    names = [t.name for t in model_workload(model, target).tasks]
    assert sum("conv2d" in n for n in names) == 3, names  # three convolutions of different shapes
    assert any("pool" in n for n in names) and any("matmul" in n or "dense" in n for n in names), names
    check = check_outputs(model, build_untuned(model, target), target)  # the weights came through: outputs match ORT
    assert check.reference == "ONNX Runtime" and check.ok, check


def test_torch_file_model_imports_and_matches_pytorch(torch_file, target) -> None:
    model = load_model(f"{torch_file}:make")
    assert model.source == "torch" and model.inputs[0].shape == (1, 3, 8, 8)
    names = [t.name for t in model_workload(model, target).tasks]
    assert any("conv2d" in n for n in names) and any("matmul" in n for n in names), names
    check = check_outputs(model, build_untuned(model, target), target)
    assert check.reference == "PyTorch" and check.ok, check


def test_check_holds_tiny_outputs_to_their_own_scale(torch_file, target) -> None:
    """An absolute tolerance would pass any program whose outputs are ~1e-20; the check is relative
    to each output's scale, so a program off by 2x there is a mismatch."""
    tiny, doubled = load_model(f"{torch_file}:tiny"), load_model(f"{torch_file}:tiny_doubled")
    same = check_outputs(tiny, build_untuned(tiny, target), target)
    wrong = check_outputs(tiny, build_untuned(doubled, target), target)
    assert same.ok and 0 < same.scale < 1e-18, same
    assert not wrong.ok and wrong.max_abs_error > wrong.tolerance, wrong


def test_transcendentals_are_tuned_in_their_fast_form_and_still_match_pytorch(torch_file, target) -> None:
    """GELU, softmax and tanh reach the tuners as TVM's vectorisable approximations (libm calls per
    element otherwise), and the model compiled from those tasks still matches PyTorch."""
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned
    from hiertune.workloads.networks import fuse_for_tasks

    model = load_model(f"{torch_file}:block")
    script = fuse_for_tasks(model.relax_mod).script()
    assert "fast_erf" in script and "fast_tanh" in script and "fast_softmax" in script
    assert " T.erf(" not in script and " T.tanh(" not in script
    names = [t.name for t in model_workload(model, target).tasks]
    assert any("fast_gelu" in n for n in names) and not any("lambda" in n for n in names), names
    empty = ms.database.MemoryDatabase()
    check = check_outputs(model, build_tuned(model, empty, target), target)
    assert check.reference == "PyTorch" and check.ok, check


def test_cpu_convolutions_are_tuned_channels_last_and_still_match_pytorch(convs_model, target) -> None:
    """On CPU a model's 2-D convolutions (plain, strided depthwise, 1x1) reach the tuners in NHWC with
    HWIO weights (`conv2d_layout`), and the model compiled from those tasks still matches PyTorch."""
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned

    model = load_model(convs_model)
    tasks = {t.name: t for t in model_workload(model, target).tasks}
    first = max((t for name, t in tasks.items() if "conv2d" in name), key=lambda t: t.flops)  # the 3x3 conv
    assert not any("divide" in name for name in tasks), list(tasks)  # its bias and batch norm: in its weights
    shapes = [tuple(int(d) for d in arg.shape) for arg in ms.arg_info.ArgInfo.from_prim_func(first.mod["main"])]
    assert (1, 8, 8, 3) in shapes and (3, 3, 3, 8) in shapes, shapes  # image NHWC, weights HWIO
    check = check_outputs(model, build_tuned(model, ms.database.MemoryDatabase(), target), target)
    assert check.reference == "PyTorch" and check.ok, check


def test_cpu_models_fuse_padding_and_activations_into_their_convolutions(torch_file, target) -> None:
    """An explicit pad becomes the depthwise conv's own padding, batch norm goes into the conv weights
    and ReLU6 fuses into the conv, so on CPU no task only moves memory between convolutions (no pad,
    clip or transpose there; the model's edges transpose), and the compiled model still matches PyTorch."""
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned

    model = load_model(f"{torch_file}:mobile_block")
    names = [t.name for t in model_workload(model, target).tasks]
    convs = [n for n in names if "conv2d" in n]
    assert len(convs) == 4 and not any("pad" in n or "clip" in n for n in names), names
    assert sum("maximum" in n and "minimum" in n for n in convs) == 2, names  # ReLU6 inside expand and depthwise
    assert not any("divide" in n or "subtract" in n for n in names), names  # batch norm: in the weights
    assert len(names) - len(convs) <= 2 and all("transpose" in n for n in names if "conv2d" not in n), names
    check = check_outputs(model, build_tuned(model, ms.database.MemoryDatabase(), target), target)
    assert check.reference == "PyTorch" and check.ok, check


def write_conv_bn_onnx(path: Path, shared: bool = False) -> Path:
    """An ONNX Conv with a bias, then BatchNormalization and Relu: how an exporter that does not
    fold batch norm writes a CNN (the ONNX importer leaves the conv's out_dtype unset). `shared`:
    the conv's output is also a second output (through a Relu), so it is needed unnormalised."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    arrays = {"w": rng.standard_normal((8, 3, 3, 3)), "b": rng.standard_normal(8), "gamma": rng.uniform(0.5, 1.5, 8),
              "beta": rng.standard_normal(8), "mean": rng.standard_normal(8), "var": rng.uniform(0.5, 2, 8)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])] + ([helper.make_node("Relu", ["c"], ["y2"])] if shared else [])
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 8, 8, 8]) for name in ("y", "y2")[:1 + shared]]
    graph = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              outputs, [numpy_helper.from_array(a.astype(np.float32), name) for name, a in arrays.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_onnx_batch_norm_goes_into_the_conv_and_still_matches_onnxruntime(tmp_path, target) -> None:
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned

    model = load_model(str(write_conv_bn_onnx(tmp_path / "conv_bn.onnx")))
    names = [t.name for t in model_workload(model, target).tasks]
    assert any("conv2d" in n and "relu" in n for n in names) and not any("divide" in n for n in names), names
    check = check_outputs(model, build_tuned(model, ms.database.MemoryDatabase(), target), target)
    assert check.reference == "ONNX Runtime" and check.ok, check


def test_a_conv_whose_output_is_also_read_elsewhere_keeps_its_batch_norm(tmp_path, target) -> None:
    """Folding there would run the convolution twice (once folded, once for the other reader)."""
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned
    from hiertune.workloads.graph_rewrites import fold_batch_norm, op_name

    def convolutions(mod) -> int:
        calls = []
        relax.analysis.post_order_visit(mod["main"], lambda e: calls.append(isinstance(e, relax.Call)
                                                                             and op_name(e) == "relax.nn.conv2d"))
        return sum(calls)

    model = load_model(str(write_conv_bn_onnx(tmp_path / "conv_bn_shared.onnx", shared=True)))
    assert convolutions(model.relax_mod) == convolutions(fold_batch_norm(model.relax_mod)) == 1
    check = check_outputs(model, build_tuned(model, ms.database.MemoryDatabase(), target), target)
    assert check.reference == "ONNX Runtime" and check.ok, check


def write_pad_conv_onnx(path: Path) -> Path:
    """Two ONNX Pads in front of Convs, as TF / Keras exporters write "same" padding: a zero pad
    (asymmetric, added to the conv's own pads) and a pad with the value 1, which is not padding
    a convolution can do itself."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    arrays = {"w1": rng.standard_normal((8, 3, 3, 3)), "w2": rng.standard_normal((4, 3, 3, 3)),
              "zero_pads": np.array([0, 0, 0, 0, 0, 0, 1, 1]), "one_pads": np.array([0, 0, 1, 1, 0, 0, 1, 1]),
              "one": np.array(1.0)}
    initializers = [numpy_helper.from_array(a.astype(np.int64 if "pads" in n else np.float32), n) for n, a in arrays.items()]
    nodes = [helper.make_node("Pad", ["x", "zero_pads"], ["p1"]),
             helper.make_node("Conv", ["p1", "w1"], ["c1"], strides=[2, 2], pads=[1, 1, 0, 0]),
             helper.make_node("Relu", ["c1"], ["y1"]),
             helper.make_node("Pad", ["x", "one_pads", "one"], ["p2"]),
             helper.make_node("Conv", ["p2", "w2"], ["y2"])]
    outputs = [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [1, 8, 8, 8]),
               helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 4, 16, 16])]
    graph = helper.make_graph(nodes, "pad_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              outputs, initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_onnx_zero_pad_goes_into_the_conv_and_still_matches_onnxruntime(tmp_path, target) -> None:
    """TVM's frontend lowers Pad to a kernel of its own; the zero pad is folded into the conv's
    padding before import (as ONNX Runtime folds it), the pad with value 1 stays a task."""
    from tvm.s_tir import meta_schedule as ms

    from hiertune.platform.compile_model import build_tuned

    model = load_model(str(write_pad_conv_onnx(tmp_path / "pad_conv.onnx")))
    names = [t.name for t in model_workload(model, target).tasks]
    assert sum("pad" in n for n in names) == 1 and sum("conv2d" in n for n in names) == 2, names
    check = check_outputs(model, build_tuned(model, ms.database.MemoryDatabase(), target), target)
    assert check.reference == "ONNX Runtime" and check.ok, check


@pytest.mark.parametrize(
    ("make_spec", "shapes", "expected"),
    [
        (lambda d: str(d / "not_onnx.onnx"), None, "is not an ONNX model"),
        (lambda d: str(d / "unknown_op.onnx"), None, "not supported for frontend ONNX: HiertuneNoSuchOp"),
        (lambda d: str(d / "dynamic.onnx"), None, "give --input-shape input:1x3x16x16"),
        (lambda d: str(d / "dynamic.onnx"), ["input:1x3xbig"], "write NAME:DIMS"),
        (lambda d: str(d / "dynamic.onnx"), ["image:1x3x16x16"], "the inputs of"),
        (lambda d: str(d / "dynamic.onnx"), ["input:1x3x16"], "does not fit input 'input'"),
        (lambda d: str(d / "net.py") + ":broken", None, "broken() raised ValueError: weights file missing"),
        (lambda d: str(d / "net.py") + ":nothing", None, "defines no function 'nothing'"),
        (lambda d: "hf:gpt-17", None, "is not in the table"),
        (lambda d: "no-such-model", None, "is not a file or a known model"),
    ],
)
def test_bad_models_give_one_clear_error(tmp_path, make_spec, shapes, expected) -> None:
    (tmp_path / "not_onnx.onnx").write_text("this is a text file")
    write_convnet_onnx(tmp_path / "unknown_op.onnx", image=16, channels=4, extra_op="HiertuneNoSuchOp")
    write_convnet_onnx(tmp_path / "dynamic.onnx", image=16, channels=4, dynamic_batch=True)
    (tmp_path / "net.py").write_text(TORCH_FILE)
    with pytest.raises(HiertuneError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_model(make_spec(tmp_path), parse_input_shapes(shapes))


def test_hf_text_model_builds_from_its_config_and_matches_pytorch(target) -> None:
    model = load_model("hf:bert-base-uncased", seq_len=16, layers=1)
    assert model.inputs[0].shape == (1, 16) and model.inputs[0].dtype == "int64"
    assert model.inputs[0].high == 30522  # token ids are drawn from the vocabulary
    assert any("matmul" in t.name for t in model_workload(model, target).tasks)
    assert check_outputs(model, build_untuned(model, target), target).ok


def test_builtin_network_is_a_model_not_a_workload() -> None:
    out = cli("tune", "--workload", "resnet18", "--trials", "1", "--no-ray")
    assert out.returncode == 2 and "use --model resnet18" in out.stderr, out.stderr


def test_cli_bad_input_shape_is_one_line(convnet) -> None:
    out = cli("tune", "--model", str(convnet), "--input-shape", "input=1x3", "--trials", "1", "--no-ray")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "--input-shape 'input=1x3'" in out.stderr


@pytest.fixture(scope="module")
def tuned(convnet, tmp_path_factory) -> Path:
    """The convnet tuned by `hiertune tune` for a few trials per task (measured in-process: no Ray
    actor start-up to wait for on a loaded CI machine)."""
    work = tmp_path_factory.mktemp("tuned")
    records = work / "harl.jsonl"
    short_rounds = work / "harl.toml"  # a setting without a flag goes through --config
    short_rounds.write_text("[episode]\nmax_steps = 12\n")
    out = cli("tune", "--model", str(convnet), "--input-shape", "input:1x3x16x16", "--trials", "40",
              "--topk", "4", "--tracks", "4", "--config", str(short_rounds), "--records", str(records),
              "--target", TARGET, "--no-ray")
    assert out.returncode == 0, out.stderr[-2000:]
    return records


PLAIN_TVM = '''
import sys
sys.modules["hiertune"] = None  # prove the library needs TVM only
import numpy as np, tvm
from tvm import relax
vm = relax.VirtualMachine(tvm.runtime.load_module(sys.argv[1]), tvm.cpu())
x = np.load(sys.argv[2])
np.save(sys.argv[3], vm["main"](tvm.runtime.tensor(x)).numpy())
'''


@pytest.mark.slow
def test_compiled_tuned_model_loads_in_plain_tvm_and_matches_onnxruntime(convnet, tuned, tmp_path) -> None:
    library = tmp_path / "convnet.so"
    out = cli("compile", "--model", str(convnet), "--input-shape", "input:1x3x16x16", "--records", str(tuned),
              "--out", str(library), "--target", TARGET, "--check")
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-2000:]
    tasks = len(model_workload(load_model(str(convnet), {"input": (1, 3, 16, 16)}), make_target(TARGET)).tasks)
    assert f"{tasks} of {tasks} tasks run tuned" in out.stdout
    assert "check vs ONNX Runtime" in out.stdout and ": OK" in out.stdout
    database = tmp_path / "convnet_database"
    assert (database / "database_workload.json").stat().st_size > 0
    assert (database / "database_tuning_record.json").stat().st_size > 0

    import onnxruntime as ort

    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_TVM)
    ran = subprocess.run([sys.executable, str(script), str(library), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    expected = ort.InferenceSession(str(convnet), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_cpu_models_are_tuned_cold_with_weights_prepacked_at_compile_time(convnet, tuned, target) -> None:
    """`tune` times CPU candidates cold (single runs, weights flushed from the caches), the tasks'
    weights are layout-free, and the tuned module holds its weights in the schedules' own layouts:
    new constant shapes, kernels that read them, and no packing kernel left to run at inference."""
    import tvm
    from tvm import relax

    from hiertune.platform.compile_model import schedule_tuned
    from hiertune.platform.records import RecordStore
    from hiertune.platform.runners import RunnerConfig
    from hiertune.workloads.graph_rewrites import op_name
    from hiertune.workloads.networks import fuse_for_tasks

    store = RecordStore(tuned, writer=False)
    assert {len(m.latencies_s) for m in store.measures if m.ok} == {RunnerConfig.flush_repeat}
    model = load_model(str(convnet), {"input": (1, 3, 16, 16)})
    weighted = [t for t in model_workload(model, target).tasks if t.mod["main"].attrs.get("layout_free_buffers")]
    assert any("conv2d" in t.name for t in weighted) and any("matmul" in t.name or "dense" in t.name
                                                             for t in weighted), [t.name for t in weighted]

    def constant_shapes(mod) -> set[tuple[int, ...]]:
        shapes = set()

        def visit(expr) -> None:
            if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "shape"):
                shapes.add(tuple(int(d) for d in expr.value.shape))

        relax.analysis.post_order_visit(mod["main"], visit)
        return shapes

    def kernels_called(mod) -> set[str]:
        names = set()

        def visit(expr) -> None:
            if isinstance(expr, relax.Call) and op_name(expr) == "relax.call_tir":
                names.add(expr.args[0].name_hint)

        relax.analysis.post_order_visit(mod["main"], visit)
        return names

    scheduled = schedule_tuned(model, store.to_database(), target)
    assert constant_shapes(scheduled) - constant_shapes(fuse_for_tasks(model.relax_mod, target))  # packed weights
    called = kernels_called(scheduled)
    assert any(name.endswith("_prepacked") for name in called), called  # kernels that read packed weights
    assert not any("weight_prepack" in name for name in called), called  # the packing itself ran at compile time


@pytest.mark.slow
def test_records_of_another_target_are_refused(convnet, tuned, tmp_path) -> None:
    foreign = tmp_path / "foreign.jsonl"
    lines = []
    for line in tuned.read_text().splitlines():
        data = json.loads(line)
        if data["kind"] == "measure":
            data["record"][2]["mcpu"] = "cortex-a72"
        lines.append(json.dumps(data))
    foreign.write_text("\n".join(lines) + "\n")
    out = cli("compile", "--model", str(convnet), "--input-shape", "input:1x3x16x16", "--records", str(foreign),
              "--out", str(tmp_path / "m.so"), "--target", TARGET)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "cortex-a72" in out.stderr and "tune again for this target" in out.stderr


@pytest.mark.slow
def test_benchmark_times_every_contender(convnet, tuned, tmp_path) -> None:
    """Also beside a live writer of the records (a `tune` still running): benchmark only reads them."""
    result = tmp_path / "bench.json"
    from conftest import hold_in_subprocess

    holder = hold_in_subprocess(f"from hiertune.platform.records import RecordStore; RecordStore({str(tuned)!r})",
                                seconds=600)
    try:
        out = cli("benchmark", "--model", str(convnet), "--input-shape", "input:1x3x16x16", "--records", str(tuned),
                  "--target", TARGET, "--repeats", "3", "--json", str(result), "--plot", str(tmp_path / "b.png"))
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(result.read_text())
    assert data["threads"] == 1
    contenders = data["contenders"]
    for name in ("TVM untuned", "TVM + HARL", "ONNX Runtime"):
        assert len(contenders[name]["samples_ms"]) == 3 and contenders[name]["median_ms"] > 0, name
    assert contenders["TVM + HARL"]["tuned_tasks"] == contenders["TVM + HARL"]["tasks"]
    assert contenders["TVM + HARL"]["median_ms"] < contenders["TVM untuned"]["median_ms"]
    assert "n/a" in contenders["PyTorch eager"]["note"]  # an ONNX model has no torch module to run
    assert (tmp_path / "b.png").stat().st_size > 0


@pytest.mark.slow
def test_every_operator_family_tunes_for_a_few_trials(tmp_path) -> None:
    from conftest import harl_config
    from hiertune.platform.harl_search import HarlSearch
    from hiertune.platform.records import RecordStore
    from hiertune.platform.runners import RunnerConfig, create_runner
    from hiertune.workloads import Workload
    from hiertune.workloads.operators import OPERATOR_FAMILIES, operator_task

    target = make_target(TARGET)
    runner = create_runner(RunnerConfig(target="llvm", num_cpus=1, number=1, min_repeat_ms=0), use_ray=False)
    failed = []
    try:
        for family in OPERATOR_FAMILIES:
            task = operator_task(f"{family}:0")
            store = RecordStore(tmp_path / f"{family}.jsonl")
            config = harl_config(trials=4, topk=4, tracks=2, max_steps=4, lam=2, seed=0)
            HarlSearch(Workload(task.name, [task]), target, runner, store, config).run()
            if store.best(task.name) is None:
                failed.append(family)
    finally:
        runner.close()
    assert not failed, f"no valid schedule in 4 trials for {failed}"
