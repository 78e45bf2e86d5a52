"""The HARL parameter-edit action space: fixed-size layout, decoding and the pure decision edits.

One PPO module serves every task of a run, so the action space has the same size for all tasks:
each edit type is padded to a maximum number of sampling instructions and the padding is masked.
The space is one flat `Discrete(ACTION_DIM)` (what RLlib's action-masking module takes):

    index 0                                   no-op (shared by the four edit types)
    [TILE_OFFSET, +TILE_ACTIONS)              tile-size: (tile instruction i, from-level a, to-level b),
                                              move the smallest prime factor > 1 of level a to level b
    [TILE_WHOLE_OFFSET, +TILE_ACTIONS)        tile-size, whole level: the same triples, moving all of
                                              level a's factor to level b (legal only when that factor
                                              is composite, else it repeats the prime move)
    [COMPUTE_AT_OFFSET, +COMPUTE_AT_ACTIONS)  compute-at: (SampleComputeLocation j, -1 | +1) in its
                                              sorted legal locations
    [PARALLEL_OFFSET, +2)                     parallel: fused outer loops -1 | +1
    [UNROLL_OFFSET, +UNROLL_ACTIONS)          auto-unroll: (SampleCategorical j, -1 | +1) in its
                                              candidate list
    [TILE_LARGEST_OFFSET, +TILE_ACTIONS)      tile-size, largest prime (opt-in): the tile triples,
                                              moving the largest prime factor of level a (legal only
                                              when level a has two distinct primes, else it repeats a
                                              move above)

The opt-in block comes last, so a space without it has the first BASE_ACTION_DIM actions only
and exactly the layout (and policy network) it had before the block existed.

Nothing here imports TVM: the edits work on plain decision tuples so they are cheap and testable.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_TILE_INSTS = 10  # SamplePerfectTile instructions per sketch (C3D has 9); more are left unedited
MAX_TILE_LEVELS = 5  # tile levels per loop (CPU: 4 spatial / 2 reduction; GPU: 5 / 3)
MAX_COMPUTE_AT = 6  # SampleComputeLocation instructions per sketch (softmax has 5)
MAX_CATEGORICAL = 4  # SampleCategorical instructions (auto-unroll on CPU; GPU adds thread/vector picks)

TILE_PAIRS = MAX_TILE_LEVELS * (MAX_TILE_LEVELS - 1)
TILE_ACTIONS = MAX_TILE_INSTS * TILE_PAIRS
COMPUTE_AT_ACTIONS = 2 * MAX_COMPUTE_AT
PARALLEL_ACTIONS = 2
UNROLL_ACTIONS = 2 * MAX_CATEGORICAL

NOOP = 0
TILE_OFFSET = 1
TILE_WHOLE_OFFSET = TILE_OFFSET + TILE_ACTIONS
COMPUTE_AT_OFFSET = TILE_WHOLE_OFFSET + TILE_ACTIONS
PARALLEL_OFFSET = COMPUTE_AT_OFFSET + COMPUTE_AT_ACTIONS
UNROLL_OFFSET = PARALLEL_OFFSET + PARALLEL_ACTIONS
BASE_ACTION_DIM = UNROLL_OFFSET + UNROLL_ACTIONS  # every action but the opt-in block
TILE_LARGEST_OFFSET = BASE_ACTION_DIM
ACTION_DIM = TILE_LARGEST_OFFSET + TILE_ACTIONS

EDIT_KINDS = ("noop", "tile", "compute_at", "parallel", "unroll")


@dataclass(frozen=True)
class Edit:
    """A decoded action: `kind` in EDIT_KINDS; `inst` indexes the sampling instructions of that
    kind in trace order; tile edits use `src`/`dst` levels (`whole`: move all of `src`'s factor,
    `largest`: its largest prime, neither: its smallest prime), the others `delta` (-1 or +1)."""

    kind: str
    inst: int = 0
    src: int = 0
    dst: int = 0
    delta: int = 0
    whole: bool = False
    largest: bool = False


def decode(action: int) -> Edit:
    """The edit behind a flat action index."""
    a = int(action)
    if not 0 <= a < ACTION_DIM:
        raise ValueError(f"action {a} outside [0, {ACTION_DIM})")
    if a == NOOP:
        return Edit("noop")
    if a < COMPUTE_AT_OFFSET or a >= TILE_LARGEST_OFFSET:
        offset = TILE_LARGEST_OFFSET if a >= TILE_LARGEST_OFFSET else TILE_WHOLE_OFFSET if a >= TILE_WHOLE_OFFSET else TILE_OFFSET
        inst, pair = divmod(a - offset, TILE_PAIRS)
        src, dst = divmod(pair, MAX_TILE_LEVELS - 1)
        return Edit("tile", inst=inst, src=src, dst=dst if dst < src else dst + 1, whole=offset == TILE_WHOLE_OFFSET,
                    largest=offset == TILE_LARGEST_OFFSET)
    if a < PARALLEL_OFFSET:
        inst, d = divmod(a - COMPUTE_AT_OFFSET, 2)
        return Edit("compute_at", inst=inst, delta=-1 if d == 0 else 1)
    if a < UNROLL_OFFSET:
        return Edit("parallel", delta=-1 if a == PARALLEL_OFFSET else 1)
    inst, d = divmod(a - UNROLL_OFFSET, 2)
    return Edit("unroll", inst=inst, delta=-1 if d == 0 else 1)


def encode(edit: Edit) -> int:
    """The flat action index of an edit (inverse of `decode`)."""
    if edit.kind == "noop":
        return NOOP
    if edit.kind == "tile":
        if edit.src == edit.dst:
            raise ValueError("a tile edit moves a factor between two different levels")
        if edit.whole and edit.largest:
            raise ValueError("a tile edit moves the whole level or its largest prime, not both")
        dst = edit.dst if edit.dst < edit.src else edit.dst - 1
        offset = TILE_WHOLE_OFFSET if edit.whole else TILE_LARGEST_OFFSET if edit.largest else TILE_OFFSET
        return offset + edit.inst * TILE_PAIRS + edit.src * (MAX_TILE_LEVELS - 1) + dst
    step = 0 if edit.delta < 0 else 1
    if edit.kind == "compute_at":
        return COMPUTE_AT_OFFSET + 2 * edit.inst + step
    if edit.kind == "parallel":
        return PARALLEL_OFFSET + step
    if edit.kind == "unroll":
        return UNROLL_OFFSET + 2 * edit.inst + step
    raise ValueError(f"unknown edit kind {edit.kind!r}")


def smallest_prime_factor(n: int) -> int:
    """The smallest prime factor of n > 1 (n itself when prime)."""
    if n < 2:
        raise ValueError(f"{n} has no prime factor")
    p = 2
    while p * p <= n:
        if n % p == 0:
            return p
        p += 1
    return n


def largest_prime_factor(n: int) -> int:
    """The largest prime factor of n > 1."""
    p = smallest_prime_factor(n)
    while n > 1:
        p = smallest_prime_factor(n)
        while n % p == 0:
            n //= p
    return p


def move_tile_factor(
    factors: tuple[int, ...], src: int, dst: int, max_innermost: int | None = None, whole: bool = False,
    largest: bool = False,
) -> tuple[int, ...] | None:
    """Move the smallest prime factor of level `src` (`whole`: all of it, `largest`: its largest
    prime) to level `dst`; None when not legal.

    The product of the factors (the loop extent) is unchanged by construction; `max_innermost`
    is SamplePerfectTile's `max_innermost_factor` (the last level may not exceed it). A whole move
    of a prime factor is not legal: it is the prime move's twin, and twins would skew the policy.
    Whole moves exist because one prime at a time makes a reduction split like [2, 32] -> [64, 1]
    (MetaSchedule's register-blocked 1x1-conv winners) five edits away, each one rated by the
    cost model on the way; MetaSchedule's tile mutator moves any divisor in one step. Largest-prime
    moves exist because the smallest prime is not always the one to move: a level of 56 = 2^3 * 7
    gives up its 7 only after three moves of a 2, where MetaSchedule's mutator moves the 7 at once.
    A largest-prime move of a level with one distinct prime repeats the prime move: not legal.
    """
    n = len(factors)
    if not (0 <= src < n and 0 <= dst < n) or src == dst or factors[src] < 2:
        return None
    p = smallest_prime_factor(factors[src])
    if whole:
        if p == factors[src]:
            return None
        p = factors[src]
    elif largest:
        q = largest_prime_factor(factors[src])
        if q == p:
            return None
        p = q
    out = list(factors)
    out[src] //= p
    out[dst] *= p
    if max_innermost is not None and max_innermost > 0 and out[-1] > max_innermost:
        return None
    return tuple(out)
