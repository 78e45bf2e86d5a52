"""Built-in networks (ResNets written in torch) and the Relax steps every model goes through:
torch import, fusion into TIR subgraphs, MetaSchedule task extraction.

No weights are downloaded: parameters are random (their values don't change the schedules).
"""

from __future__ import annotations

from typing import Any

from hiertune.errors import HiertuneError
from hiertune.workloads.tasks import Task


def _torch_resnet(depth: int, width: int = 64, image: int = 224) -> tuple[Any, Any]:
    """A torchvision-shaped ResNet (basic blocks for 18/34, bottlenecks for 50) and an input."""
    import torch
    from torch import nn

    class Basic(nn.Module):
        expansion = 1

        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + (self.down(x) if self.down is not None else x))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin: int, cmid: int, stride: int) -> None:
            super().__init__()
            cout = cmid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, cmid, 1, bias=False), nn.BatchNorm2d(cmid), nn.ReLU(),
                nn.Conv2d(cmid, cmid, 3, stride, 1, bias=False), nn.BatchNorm2d(cmid), nn.ReLU(),
                nn.Conv2d(cmid, cout, 1, bias=False), nn.BatchNorm2d(cout),
            )
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + (self.down(x) if self.down is not None else x))

    layers = {10: (Basic, [1, 1, 1, 1]), 18: (Basic, [2, 2, 2, 2]), 50: (Bottleneck, [3, 4, 6, 3])}[depth]
    block, counts = layers
    modules: list[Any] = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = width
    for stage, count in enumerate(counts):
        cmid = width * 2**stage
        for i in range(count):
            modules.append(block(cin, cmid, 2 if (i == 0 and stage > 0) else 1))
            cin = cmid * block.expansion
    modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    model = nn.Sequential(*modules).eval()
    return model, torch.randn(1, 3, image, image)


def builtin_model(name: str) -> tuple[Any, Any]:
    """A built-in network (torch, random weights, eval mode) and one example input."""
    import torch

    torch.manual_seed(0)  # the same weights every time: compiled outputs are checked against them
    if name == "resnet18":
        return _torch_resnet(18)
    if name == "resnet50":
        return _torch_resnet(50)
    if name == "tiny-convnet":  # three small tasks, one of them twice: fast enough for tests
        from torch import nn

        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16 * 16, 10),
        ).eval()
        return model, torch.randn(1, 3, 16, 16)
    raise HiertuneError(f"unknown network {name!r}; choose resnet18, resnet50 or tiny-convnet")


def torch_to_relax(model: Any, example_inputs: tuple[Any, ...]) -> Any:
    """A torch module as a Relax IRModule with its weights bound as constants (`torch.export`)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(model, tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False)


def conv2d_layout(target: Any) -> tuple[str, str] | None:
    """The (data, kernel) layout a model's 2-D convolutions are tuned and compiled in for `target`.

    CPU: NHWC / HWIO. MetaSchedule's CPU rules vectorise a tiled block's innermost spatial loop; in
    NHWC that is the output channels, contiguous in the output and (HWIO) in the weights, where the
    imported NCHW puts the image width there (7 wide on a ResNet's last stage) and reads the
    weights strided. ONNX Runtime's CPU kernels block their channels the same way (NCHWc), and the
    cost prior's convolutions (te_workload's C2D family) are NHWC. GPU: None (as imported).
    """
    from hiertune.workloads.tvm_support import is_gpu_target

    return None if is_gpu_target(target) else ("NHWC", "HWIO")


def fuse_for_tasks(mod: Any, target: Any = None) -> Any:
    """Relax legalised and fused into TIR subgraphs: the form MetaSchedule extracts tasks from and
    that `compile_relax` looks its database up in, so records found here apply at compile time.
    Transcendentals go to their fast forms first (`fast_math`), so both tuners tune those, and a
    convolution's explicit padding becomes its own (`fold_conv_padding`); with a `target`,
    convolutions go to its `conv2d_layout` (layout transforms of the activations at the model's
    edges become tasks of their own, the weights' fold into constants). Batch norm after a conv
    goes into its weights (`fold_batch_norm`); elsewhere its decomposed tuple is unpacked
    (`CanonicalizeBindings`), so the activation after it fuses into the conv. On CPU every fused
    function's weight parameters are layout-free (`mark_weights_layout_free`): each schedule
    stores its weights in its own read order, folded into the constants at compile time."""
    import tvm
    from tvm import relax

    from hiertune.workloads.graph_rewrites import (
        clip_as_min_max,
        fast_math,
        fold_batch_norm,
        fold_conv_padding,
        mark_weights_layout_free,
    )

    mod = fold_batch_norm(fold_conv_padding(fast_math(mod)))
    layout = conv2d_layout(target) if target is not None else None
    if layout:
        mod = relax.transform.ConvertLayout({"relax.nn.conv2d": list(layout)})(clip_as_min_max(mod))
    seq = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )
    fused = seq(mod)
    return mark_weights_layout_free(fused) if layout else fused  # CPU: weights prepacked per schedule


def relax_module(name: str, target: Any = None) -> Any:
    """The built-in network as a fused Relax IRModule with parameters bound, ready for extraction
    (for `target`: see `fuse_for_tasks`)."""
    model, example = builtin_model(name)
    return fuse_for_tasks(torch_to_relax(model, (example,)), target)


def extract_tasks(fused: Any, target: Any, label: str) -> list[Task]:
    """MetaSchedule's task extraction on a fused module; weights = how often each subgraph appears."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    extracted = ms.relax_integration.extract_tasks(fused, target)
    tasks = []
    for ext in extracted:
        task_mod = ext.dispatched[0]
        if not isinstance(task_mod, tvm.IRModule):
            task_mod = tvm.IRModule({"main": task_mod})
        tasks.append(Task.from_module(ext.task_name, task_mod, int(ext.weight)))
    if not tasks:
        raise HiertuneError(f"model {label!r} produced no tunable tasks (Relax fusion left no TIR functions)")
    return tasks


def network_tasks(name: str, target: Any) -> list[Task]:
    """The tuning tasks of a built-in network."""
    return extract_tasks(relax_module(name, target), target, name)
