"""Relax rewrites a model goes through before fusion, each exact up to float32 rounding (`fast_math`:
TVM's float32 approximations, about 1e-7 relative) and each there because TVM's own pipeline
leaves time on the table without it.

What the CPU models showed (MobileNetV2 from Hugging Face, ResNet-50): an explicit `nn.pad` in
front of a convolution (TF-style "same" padding) and a `clip` (ReLU6) are not layout-convertible,
so after `ConvertLayout` each sat between two transposes in a task of its own; and batch norm,
decomposed, reaches `FuseOps` through a tuple, which stops the activation after it from fusing
into the convolution. Together these were a quarter of MobileNetV2's tuned time, in kernels that
only move memory (ONNX Runtime fuses all of them into its convolutions).

After fusion, `mark_weights_layout_free` annotates (rewrites nothing): it lets each schedule choose
its weights' layout, which compile then packs into the constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rewrite_calls(mod: Any, rewrite: Callable[[Any, Any], Any]) -> Any:
    """Every Relax function of `mod` with each call replaced by `rewrite(mutator, call)` (the call
    itself to keep it); calls are visited after their arguments, and `mutator.lookup_binding(var)`
    gives a dataflow variable's bound value."""
    from tvm import relax

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            return rewrite(self, super().visit_call_(call))

    mutator = Rewriter(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def op_name(call: Any) -> str | None:
    return getattr(call.op, "name", None)


def bound_call(mutator: Any, expr: Any, name: str) -> Any:
    """The call of op `name` that dataflow variable `expr` is bound to (None: anything else)."""
    from tvm import relax

    value = mutator.lookup_binding(expr) if isinstance(expr, relax.Var) else None
    return value if isinstance(value, relax.Call) and op_name(value) == name else None


def fast_math(mod: Any) -> Any:
    """GELU, erf, tanh, exp and softmax as TVM's fast float approximations (`topi.fast_erf`,
    `fast_tanh`, `fast_exp`, `fast_softmax`: clamped polynomials, about 1e-7 relative error).

    Why: legalised as-is these call libm per element, which the schedule cannot vectorise, so a
    transformer's GELU outweighed its matmuls by far. Relay applied the same rewrite at opt_level
    4; Relax's `FastMathTransform` does it for erf, tanh, exp and softmax, but not for `nn.gelu`
    (a torch or ONNX GELU), so GELU is spelled out here as x/2 (1 + erf(x / sqrt 2)) first.
    Only float32 inputs are rewritten; the approximations are float32 ones.
    """
    import math

    from tvm import topi

    fast = {
        "relax.nn.gelu": lambda x: x * 0.5 * (1.0 + topi.fast_erf(x * (1.0 / math.sqrt(2.0)))),
        "relax.nn.gelu_tanh": lambda x: x * 0.5 * (1.0 + topi.fast_tanh(
            math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x))),
        "relax.erf": topi.fast_erf,
        "relax.tanh": topi.fast_tanh,
        "relax.exp": topi.fast_exp,
    }

    def rewrite(mutator: Any, call: Any) -> Any:
        name = op_name(call)
        if name not in fast and name != "relax.nn.softmax":
            return call
        arg = call.args[0]
        if str(getattr(getattr(arg, "ty", None), "dtype", "")) != "float32":
            return call
        if name == "relax.nn.softmax":
            return mutator.builder_.call_te(topi.nn.fast_softmax, arg, int(call.attrs.axis))
        # named after the op, so the task reads fused_..._fast_gelu_... in tables, not <lambda>
        return mutator.builder_.call_te(fast[name], arg, primfunc_name_hint="fast_" + name.split(".")[-1])

    return rewrite_calls(mod, rewrite)


def conv2d_like(conv: Any, data: Any, weight: Any, padding: list[int] | None = None) -> Any:
    """A conv2d with `conv`'s attributes on other operands (and padding)."""
    from tvm import relax

    attrs = conv.attrs
    out_dtype = str(attrs.out_dtype)  # torch import: "float32"; ONNX import: None (the input's)
    return relax.op.nn.conv2d(
        data, weight, strides=attrs.strides, padding=attrs.padding if padding is None else padding,
        dilation=attrs.dilation, groups=int(attrs.groups), data_layout=str(attrs.data_layout),
        kernel_layout=str(attrs.kernel_layout), out_layout=str(attrs.out_layout),
        out_dtype=None if out_dtype in ("", "void", "None") else out_dtype)


def fold_conv_padding(mod: Any) -> Any:
    """A zero `nn.pad` of only the spatial axes feeding a `conv2d` becomes the convolution's own
    padding (asymmetric padding included), so the padded copy of the activation is never written;
    a pad with other users stays for them."""
    from tvm import relax

    def rewrite(mutator: Any, call: Any) -> Any:
        pad = bound_call(mutator, call.args[0], "relax.nn.pad") if op_name(call) == "relax.nn.conv2d" else None
        if pad is None:
            return call
        attrs, width = call.attrs, [int(w) for w in pad.attrs.pad_width]
        layout = str(attrs.data_layout)
        if (str(pad.attrs.pad_mode) != "constant" or float(pad.attrs.pad_value) != 0.0 or len(width) != 8
                or sorted(layout) != sorted("NCHW")):
            return call
        h, w = layout.index("H"), layout.index("W")
        if any(width[2 * axis] or width[2 * axis + 1] for axis in range(4) if axis not in (h, w)):
            return call
        top, left, bottom, right = (int(p) for p in attrs.padding)
        return conv2d_like(call, pad.args[0], call.args[1], padding=[
            top + width[2 * h], left + width[2 * w], bottom + width[2 * h + 1], right + width[2 * w + 1]])

    return relax.transform.DeadCodeElimination()(rewrite_calls(mod, rewrite))


def clip_as_min_max(mod: Any) -> Any:
    """`clip(x, lo, hi)` as `minimum(maximum(x, lo), hi)`: the same values, but elementwise ops
    `ConvertLayout` passes through, where a clip makes it transpose to the old layout and back."""
    from tvm import relax

    def rewrite(mutator: Any, call: Any) -> Any:
        if op_name(call) != "relax.clip":
            return call
        x, *bounds = call.args
        dtype = str(getattr(getattr(x, "ty", None), "dtype", ""))
        values = [getattr(b, "value", None) for b in bounds]  # FloatImm / IntImm bounds
        if not dtype.startswith("float") or not all(isinstance(v, (int, float)) for v in values):
            return call  # a bound only known at run time
        lo, hi = (relax.const(float(v), dtype) for v in values)
        return relax.op.minimum(relax.op.maximum(x, lo), hi)

    return rewrite_calls(mod, rewrite)


def shared_vars(mod: Any) -> set[Any]:
    """The dataflow variables of `mod`'s Relax functions that more than one binding (or a block's
    output) reads: a rewrite that replaces such a value's producer keeps the original for the others."""
    from tvm import relax

    shared = set()
    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            for block in func.body.blocks:
                if isinstance(block, relax.DataflowBlock):
                    shared |= {var for var, users in relax.analysis.udchain(block).items() if len(users) > 1}
    return shared


def constant_array(expr: Any) -> Any:
    """A Relax constant's value as a numpy array (None: not a constant)."""
    value = getattr(expr, "value", None)
    return value.numpy() if hasattr(value, "numpy") else None


def fold_batch_norm(mod: Any) -> Any:
    """Inference batch norm right after a conv2d with constant weights (and maybe a constant
    per-channel bias) goes into those weights and one bias: conv(x, W) * s + (beta - (mean - bias)
    * s), s = gamma / sqrt(var + eps), as ONNX Runtime does. Decomposed instead, it is a subtract,
    a divide, a multiply and an add on every output element, which on a depthwise conv (9
    multiply-adds per element) is no small part. A conv whose output other ops read as well stays
    as it is: folding would add a second convolution for the batch norm's sake."""
    import numpy as np
    from tvm import relax

    shared = shared_vars(mod)

    def rewrite(mutator: Any, call: Any) -> Any:
        if op_name(call) != "relax.nn.batch_norm" or bool(call.attrs.training) or call.args[0] in shared:
            return call
        gamma, beta, mean, var = (constant_array(a) for a in call.args[1:])
        if any(a is None for a in (gamma, beta, mean, var)):
            return call
        conv, bias = bound_call(mutator, call.args[0], "relax.nn.conv2d"), 0.0
        biased = None if conv is not None else bound_call(mutator, call.args[0], "relax.add")
        if biased is not None:  # conv2d(bias=True): conv, then add a bias the importer reshaped to [1, C, 1, 1]
            if biased.args[0] in shared:
                return call
            reshape = bound_call(mutator, biased.args[1], "relax.reshape")
            bias = constant_array(biased.args[1] if reshape is None else reshape.args[0])
            conv = bound_call(mutator, biased.args[0], "relax.nn.conv2d")
        weight = constant_array(conv.args[1]) if conv is not None else None
        if weight is None or bias is None:
            return call
        out_layout = str(conv.attrs.out_layout) or str(conv.attrs.data_layout)
        channel = out_layout.index("C")
        if int(call.attrs.axis) % 4 != channel:
            return call
        if biased is not None:
            added = [int(d) for d in biased.args[1].ty.shape]  # [1, C, 1, 1] in NCHW
            if len(added) != 4 or added[channel] != gamma.size or bias.size != gamma.size:
                return call
            bias = bias.reshape(-1)
        attrs = call.attrs
        scale = (gamma if attrs.scale else 1.0) / np.sqrt(var + float(attrs.epsilon))
        shift = (beta if attrs.center else 0.0) - (mean - bias) * scale
        o_axis = str(conv.attrs.kernel_layout).index("O")
        shape = [1] * weight.ndim
        shape[o_axis] = -1
        folded = conv2d_like(conv, conv.args[0], relax.const((weight * scale.reshape(shape)).astype(weight.dtype)))
        bias_shape = [1] * 4
        bias_shape[channel] = -1
        out = relax.op.add(folded, relax.const(shift.reshape(bias_shape).astype(weight.dtype)))
        return relax.Tuple([out, call.args[3], call.args[4]])  # inference: the moving stats pass through

    return relax.transform.DeadCodeElimination()(rewrite_calls(mod, rewrite))


def mark_weights_layout_free(mod: Any) -> Any:
    """Mark the parameters of each fused TIR function that every call passes a constant (the
    model's weights) as `layout_free_buffers`, as TVM's `AttachAttrLayoutFreeBuffers` does, but
    keeping each function's name (that pass copies them under new ones, which become task names).

    Why: MetaSchedule's `RewriteLayout` postproc then stores a tiled schedule's weights in the
    order its loops read them, and `compile` folds that re-layout into the constants
    (`SplitLayoutRewritePreproc`, `FoldConstant`), so a GEMM or convolution streams its weights
    sequentially, as ONNX Runtime's kernels read weights they packed once at load time.
    """
    import tvm
    from tvm import relax

    constant_params: dict[Any, set[int]] = {}

    def visit(expr: Any) -> None:
        if not (isinstance(expr, relax.Call) and op_name(expr) == "relax.call_tir"):
            return
        args = expr.args[1].fields if isinstance(expr.args[1], relax.Tuple) else [expr.args[1]]
        constants = {i for i, arg in enumerate(args) if isinstance(arg, tvm.ir.expr.Constant)}
        gv = expr.args[0]
        constant_params[gv] = constant_params.get(gv, constants) & constants

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    marked = mod.clone()
    for gv, params in constant_params.items():
        if params:
            marked.update_func(gv, mod[gv].with_attr("layout_free_buffers", sorted(params)))
    return marked
