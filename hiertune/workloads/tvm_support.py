"""TVM set-up that every TVM-side module goes through: fast imports, targets, a build that fits timeouts.

Two measured problems on these machines (see measured on 2-core hosts):
* `import tvm.s_tir.tensor_intrin` takes ~60 s because TVMScript's decorators call
  `inspect.stack()`, which resolves a module for every frame; a frame walk that reads only the
  source line costs ~3 s. `prepare_tvm()` does that import once with the cheap walk.
* MetaSchedule's default build function performs that import inside every fresh builder worker,
  so a 30 s build timeout fails every candidate. `fast_build` is the same build minus the import.
"""

from __future__ import annotations

import importlib
import inspect
import json
import linecache
import os
import sys
from typing import Any

from hiertune.errors import HiertuneError

_PREPARED = False


def _cheap_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """`inspect.stack()` without the per-frame module lookup TVMScript doesn't need."""
    frame = sys._getframe(1)
    frames: list[inspect.FrameInfo] = []
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno)
        frames.append(
            inspect.FrameInfo(
                frame, code.co_filename, frame.f_lineno, code.co_name,
                [line] if line else None, 0 if line else None,
            )
        )
        frame = frame.f_back
    return frames


def prepare_tvm() -> None:
    """Import TVM, MetaSchedule and the tensor intrinsics once, quickly. Idempotent."""
    global _PREPARED
    if _PREPARED:
        return
    importlib.import_module("tvm")  # outside the cheap frame walk: only the intrinsics need it

    original = inspect.stack
    inspect.stack = _cheap_stack
    try:
        importlib.import_module("tvm.s_tir.tensor_intrin")  # registers the tensor intrinsics
    finally:
        inspect.stack = original
    _PREPARED = True


def host_cpu() -> str:
    """This host's CPU as LLVM names it (e.g. "znver4"): `make_target`'s default `mcpu`, and what a
    benchmark stores beside its timings. Sessions may land on different machines, and a timing
    compares only with one taken on the same kind of CPU (a ratio of two taken side by side does)."""
    from tvm.target import codegen

    return str(codegen.llvm_get_system_cpu())


def make_target(spec: str | dict[str, Any], *, num_cores: int | None = None) -> Any:
    """A tvm Target from `llvm`, `cuda`, a JSON string or a dict; host CPU and cores filled in.

    Without `mcpu` LLVM emits generic x86-64 code (2.2x slower here), so `llvm` gets the host CPU.
    """
    prepare_tvm()
    import tvm

    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("{"):
            try:
                spec = json.loads(text)
            except json.JSONDecodeError as err:
                raise HiertuneError(f"--target {text!r} is not valid JSON ({err})") from None
        elif " " in text or "-" in text.split(" ")[0][1:]:
            raise HiertuneError(
                f"--target {text!r}: TVM 0.27 takes a kind ('llvm', 'cuda') or a JSON dict such as "
                '\'{"kind": "llvm", "mcpu": "znver3"}\', not the old "llvm -mcpu=..." string'
            )
        else:
            spec = {"kind": text}
    spec = dict(spec)
    kind = spec.get("kind")
    if kind == "llvm":
        spec.setdefault("mcpu", host_cpu())
        spec.setdefault("num-cores", num_cores or os.cpu_count() or 1)
    elif kind == "cuda":  # MetaSchedule's GPU rules need the limits, not only the arch
        for key, value in (("arch", "sm_90"), ("max_threads_per_block", 1024),
                           ("max_shared_memory_per_block", 49152), ("thread_warp_size", 32)):
            spec.setdefault(key, value)
    try:
        return tvm.target.Target(spec)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError or its own error types
        first = str(err).splitlines()[0][:200]
        raise HiertuneError(
            f"--target {json.dumps(spec)} is not a valid TVM target ({first}); try 'llvm' or 'cuda'"
        ) from None


def target_device_type(target: Any) -> str:
    """The MetaSchedule runner's device string for a target ('cpu' or 'cuda')."""
    kind = target.kind.name
    return {"llvm": "cpu", "c": "cpu"}.get(kind, kind)


def is_gpu_target(target: Any) -> bool:
    """Does the target's code run on a GPU (its kernels then need thread bindings to run at all)?"""
    return target.kind.name not in ("llvm", "c")


def target_device(target: Any) -> Any:
    """The tvm device a target's code runs on (device 0 of its kind): `tvm.cpu()` for llvm."""
    import tvm

    return tvm.device(target_device_type(target), 0)


def measured_args_info(sch: Any) -> list[Any]:
    """The arguments a schedule is timed with. A weight whose layout the schedule rewrote
    (RewriteLayout) is passed in its new layout, since `fast_build` drops the rewrite block: the
    weights come prepacked, as MetaSchedule measures them and as `compile` ships them."""
    from tvm.s_tir import meta_schedule as ms

    return ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)


def fast_build(mod: Any, target: Any, _params: Any = None) -> Any:
    """MetaSchedule's default build without re-importing the tensor intrinsics in every worker."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)
