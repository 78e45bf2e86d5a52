"""Threads per block of a GPU sketch, from its tile decisions alone: no replay needed to know that
a fill or an edit breaks the block's thread range.

MetaSchedule's GPU multi-level tiling fuses one tile level of every spatial loop and binds the
fused loop to `threadIdx.x`, and annotates the block with the range of threads it may have (a
warp at least, the target's `max_threads_per_block` at most; `tir_loops.THREAD_EXTENT_LOW/HIGH`).
VerifyGPUCode rejects a schedule outside that range, but only after the replay and every postproc
before it, the bulk of a GPU search's time, and most random tilings fall outside it (docs/harl.md).
Read from the sketch's trace once, the range is a product of tile decisions that is checked in
microseconds: random fills are drawn within it and tile edits that leave it are refused before
any replay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiertune.envs.edit_actions import smallest_prime_factor
from hiertune.envs.tir_loops import THREAD_EXTENT_HIGH, THREAD_EXTENT_LOW


@dataclass(frozen=True)
class ThreadRange:
    """One threadIdx binding: the (tile instruction, level) decisions whose product is its extent
    (times `constant`, the split factors fixed in the sketch), and the range its block allows."""

    levels: tuple[tuple[int, int], ...]
    constant: int
    low: int
    high: int

    def holds(self, tiles: Sequence[Sequence[int]]) -> bool:
        threads = self.constant * math.prod(int(tiles[t][level]) for t, level in self.levels)
        return self.low <= threads <= self.high


def read_thread_ranges(insts: Sequence[Any]) -> tuple[ThreadRange, ...]:
    """The thread ranges of a sketch's trace (its `SamplePerfectTile`s numbered in trace order).
    A binding whose extent the trace does not spell out as tile decisions and constants (a factor
    left for the split to infer), or whose block carries no range, is left out: never refused."""
    tile_of: dict[int, tuple[int, int]] = {}  # expression RV -> (tile instruction, level)
    block_name: dict[int, str] = {}  # block RV -> name
    loops: dict[int, tuple[str, tuple[tuple[int, int], ...], int] | None] = {}  # loop RV -> (block, levels, constant)
    bindings: list[tuple[str, tuple[tuple[int, int], ...], int]] = []
    bounds: dict[str, dict[str, int]] = {}
    tile = -1
    for inst in insts:
        kind, ins, outs = inst.kind.name, list(inst.inputs), list(inst.outputs)
        if kind == "GetSBlock":
            block_name[hash(outs[0])] = str(inst.attrs[0])
        elif kind == "GetLoops":
            for rv in outs:
                loops[hash(rv)] = (block_name.get(hash(ins[0]), ""), (), 1)
        elif kind == "SamplePerfectTile":
            tile += 1
            for level, rv in enumerate(outs):
                tile_of[hash(rv)] = (tile, level)
        elif kind == "Split":
            source = loops.get(hash(ins[0]))
            for rv, factor in zip(outs, ins[1:]):
                if source is None or factor is None:
                    loops[hash(rv)] = None
                elif hash(factor) in tile_of:
                    loops[hash(rv)] = (source[0], (tile_of[hash(factor)],), 1)
                elif hasattr(factor, "value"):
                    loops[hash(rv)] = (source[0], (), int(factor.value))
                else:
                    loops[hash(rv)] = None
        elif kind == "Fuse":
            parts = [loops.get(hash(rv)) for rv in ins]
            fused = None
            if parts and all(p is not None for p in parts):
                fused = (parts[0][0], tuple(lv for p in parts for lv in p[1]), math.prod(p[2] for p in parts))
            loops[hash(outs[0])] = fused
        elif kind == "Bind" and str(inst.attrs[0]).startswith("threadIdx"):
            bound = loops.get(hash(ins[0]))
            if bound is not None:
                bindings.append(bound)
        elif kind == "Annotate" and str(inst.attrs[0]) in (THREAD_EXTENT_LOW, THREAD_EXTENT_HIGH):
            if hash(ins[0]) in block_name and hasattr(ins[1], "value"):
                bounds.setdefault(block_name[hash(ins[0])], {})[str(inst.attrs[0])] = int(ins[1].value)
    return tuple(
        ThreadRange(levels, constant, bounds[block].get(THREAD_EXTENT_LOW, 1),
                    bounds[block].get(THREAD_EXTENT_HIGH, math.inf))
        for block, levels, constant in bindings if block in bounds and levels
    )


def _prime_powers(n: int) -> list[tuple[int, int]]:
    """(prime, exponent) pairs of n, smallest prime first."""
    powers: dict[int, int] = {}
    while n > 1:
        p = smallest_prime_factor(n)
        powers[p] = powers.get(p, 0) + 1
        n //= p
    return list(powers.items())


def sample_tile(extent: int, levels: int, max_innermost: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A perfect tiling of `extent` into `levels` factors, uniform over those whose innermost factor
    is within `max_innermost` (-1: any), as TVM's SamplePerfectTile draws one: each prime's exponent
    split over the levels uniformly (stars and bars), redrawn while the innermost is too large."""
    if levels < 2:
        return (extent,)
    cap = extent if max_innermost < 0 else max_innermost
    powers = _prime_powers(extent)
    while True:
        factors = [1] * levels
        for p, e in powers:
            bars = np.sort(rng.choice(e + levels - 1, size=levels - 1, replace=False))
            parts = np.diff(np.concatenate([[-1], bars, [e + levels - 1]])) - 1
            for level, part in enumerate(parts.tolist()):
                factors[level] *= p ** part
        if factors[-1] <= cap:
            return tuple(factors)
