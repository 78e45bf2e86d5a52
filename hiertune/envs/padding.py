"""Padded sketches: a GEMM-like task whose loop lengths have no useful divisor, tiled after padding.

MetaSchedule tiles a loop only by exact divisors of its length (SamplePerfectTile). ViT-B/16 has
197 tokens, a prime: every matmul over them can block its rows by 1 or 197 and nothing between,
so the register tile of the inner loops is one row by a vector, and the kernel is bound by loads
instead of multiply-adds (about 85 GFLOPS on one Zen 4 core, where a 4- or 8-row block reaches
100+ on the same loops). Vision models at other resolutions, CLIP's 257 tokens and language
models' vocabularies have the same kind of lengths.

`Schedule.pad_einsum` (TVM's primitive, used by DLight's GPU matmul rules) pads such a block's
loops up to a multiple: the inputs are copied into zero-padded buffers, the block computes the
padded extent, and a crop block writes the real output. A *padded sketch* is that primitive as
the first instruction of a design space generated on the padded program, so its trace replays on
the task's own program and a record of it compiles into the model like any other. Only spatial
loops are padded: the extra outputs are cropped away, whatever the block computes (padding a
reduction would be wrong for a max). Convolutions read their input at `h * stride + r`, which
is not an einsum access: the primitive refuses them, and they keep their sketches as they are.
"""

from __future__ import annotations

from typing import Any

from hiertune.envs import tir_loops

#: Divisors that make a good register or vector tile, relative to the padding multiple: a
#: length with one of them (49 = 7 x 7, 1000 = 8 x 125) tiles fine as it is.
_TILE_DIVISORS = (0.5, 2.0)
#: The least length padded, in multiples: below it the padding's wasted work outweighs the gain
#: (197 -> 200 is 1.5 % more work; 17 -> 24 would be 41 %).
_MIN_MULTIPLES = 8


def awkward(extent: int, multiple: int) -> bool:
    """A loop length worth padding to `multiple`: long, not a multiple already, and without a
    divisor between half and twice the multiple (a prime such as 197, or 2 x a prime)."""
    if multiple <= 1 or extent < _MIN_MULTIPLES * multiple or extent % multiple == 0:
        return False
    low, high = int(multiple * _TILE_DIVISORS[0]), int(multiple * _TILE_DIVISORS[1])
    return not any(extent % d == 0 for d in range(max(low, 2), high + 1))


def padding_for(func: Any, block_name: str, multiple: int) -> list[int] | None:
    """`pad_einsum`'s per-iterator padding for a block: `multiple` on its awkward spatial
    iterators, 1 elsewhere; None when the block is not there, not a reduction (nothing to tile
    for reuse), or has no awkward spatial length."""
    realize = next((r for r in tir_loops.child_realizes(func.body.block.body) if r.block.name_hint == block_name),
                   None)
    if realize is None:
        return None
    iters = list(realize.block.iter_vars)
    if not any(int(iv.iter_type) == tir_loops.COMM_REDUCE for iv in iters):
        return None
    padding = []
    for iv in iters:
        extent = iv.dom.extent
        spatial = int(iv.iter_type) == tir_loops.DATA_PAR
        fixed = hasattr(extent, "value")
        padding.append(multiple if spatial and fixed and awkward(int(extent.value), multiple) else 1)
    return padding if any(p > 1 for p in padding) else None


def pad_block(mod: Any, block_name: str, multiple: int) -> Any | None:
    """The task's schedule after `pad_einsum` on `block_name` (its trace is the padded sketches'
    prefix, its module the program their design spaces are generated on); None when nothing is
    worth padding or the block is not an einsum."""
    from tvm import s_tir

    padding = padding_for(mod["main"], block_name, multiple)
    if padding is None:
        return None
    sch = s_tir.Schedule(mod, debug_mask="none", error_render_level="none")
    try:
        sch.pad_einsum(sch.get_sblock(block_name), padding)
    except Exception:  # noqa: BLE001 - TVM refuses a non-einsum access with its own error types
        return None
    return sch
