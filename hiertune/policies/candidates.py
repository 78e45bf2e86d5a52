"""Which schedules of a round go to the runner: top-K by predicted score, MetaSchedule's
epsilon-greedy share, slots for other sketches, random fills when the round found too few.

Pure functions over states and their keys, so the choice is tested on its own; the search loop
passes in how to key a state and how to draw or rank random fills.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Pair = tuple[Any, str]  # (schedule state, its trace key)


@dataclass
class CandidateConfig:
    """How each round's measured batch is chosen."""

    topk: int = 8
    """Schedules measured per round: the best predicted of those the round visited and nobody measured."""
    epsilon: float = 0.2
    """Chance per measured slot of a random visited schedule instead of a top-K one (MetaSchedule's eps-greedy)."""
    cross_sketch: int = 0
    """Measured slots per round for the best-predicted random fills of the task's other sketches."""


def select_candidates(
    ranked: Sequence[Any],
    k: int,
    measured: set[str],
    rng: np.random.Generator,
    *,
    key: Callable[[Any], str],
    epsilon: float = 0.0,
    cross: int = 0,
    cross_fills: Callable[[int, set[str]], list[Pair]] | None = None,
    random_fill: Callable[[], Any] | None = None,
) -> list[Pair]:
    """Up to `k` unmeasured (state, key) pairs, none twice.

    `ranked` is the round's visited states, best predicted first. Each slot is, with chance
    `epsilon`, a random visited state instead of the next best; `cross` slots go to
    `cross_fills(n, seen)` (other sketches' fills); if the round visited too few new states,
    `random_fill()` widens the batch (at most 8k draws).
    """
    chosen: list[Pair] = []
    seen = set(measured)
    n_random = int(rng.binomial(k, epsilon)) if epsilon > 0 else 0
    n_cross = min(cross, k - 1) if cross_fills is not None else 0
    for state in ranked:
        if len(chosen) >= k - n_random - n_cross:
            break
        state_key = key(state)
        if state_key not in seen:
            seen.add(state_key)
            chosen.append((state, state_key))
    if n_random:
        rest = [state for state in ranked if key(state) not in seen]
        for i in rng.permutation(len(rest))[:n_random]:
            seen.add(key(rest[i]))
            chosen.append((rest[i], key(rest[i])))
    if len(chosen) == k:
        return chosen
    if n_cross:
        chosen += cross_fills(min(n_cross, k - len(chosen)), seen)
    if len(chosen) >= k or random_fill is None:
        return chosen
    for _ in range(8 * k):
        state = random_fill()
        state_key = key(state)
        if state_key not in seen:
            seen.add(state_key)
            chosen.append((state, state_key))
        if len(chosen) == k:
            break
    return chosen


def spread_over_sketches(pools: Sequence[Sequence[Pair]], k: int, measured: set[str]) -> list[Pair]:
    """Round-robin over per-sketch ranked pools, `k` unmeasured in all: a task's first batch
    (random fills) and its spread rounds (refined schedules).

    MetaSchedule's first batch covers every sketch; the sketch bandit would otherwise spend one
    whole round per sketch just to try each once.
    """
    seen = set(measured)
    chosen: list[Pair] = []
    for pair in itertools.chain.from_iterable(itertools.zip_longest(*pools)):
        if pair is not None and pair[1] not in seen and len(chosen) < k:
            seen.add(pair[1])
            chosen.append(pair)
    return chosen
