"""Which schedules of a round go to the runner: top-K by predicted score, MetaSchedule's
epsilon-greedy share, slots for other sketches, random fills when the round found too few, and
(optionally) a spread of the top-K over different neighbourhoods.

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
CROSS_SOURCES = ("fills", "transplant")  # what a cross-sketch slot measures (CandidateConfig.cross_source)


@dataclass
class CandidateConfig:
    """How each round's measured batch is chosen."""

    topk: int = 8
    """Schedules measured per round: the best predicted of those the round visited and nobody measured."""
    epsilon: float = 0.2
    """Chance per measured slot of a random schedule the round visited instead of a top-K one.
    MetaSchedule's eps-greedy share draws from its random initial population instead; here the
    share keeps the cost model's training data wider than the top of its own ranking."""
    cross_sketch: int = 0
    """Measured slots per round for the task's other sketches (what goes there: `cross_source`)."""
    cross_source: str = "fills"
    """What a cross-sketch slot measures: `fills`, the best-predicted random fill of the other
    sketch; `transplant`, the task's best measured schedule not yet tried there, replayed in that
    sketch with the same decisions (`ScheduleSpace.transplant`; a fill where the sketches' decisions
    differ). A fill compares a sketch by schedules far slower than the task's best; a transplant
    compares it at the best's own tiles, so the sketch bandit sees what the other sketch does with
    the refinement the searched one already has."""
    sibling_slots: int = 2
    """Measured slots per round for the best schedules of the run's other tasks, transferred into
    this one (`ScheduleSpace.transfer`: same sketch structure, tile splits re-fitted to this task's
    loops), best predicted first. A network's layers of one kind share what makes them fast, and a
    task gets few rounds of its own; 0 (`--ablation no-sibling-transfer`, the paper) measures only
    the task's own search. Only a run of several tasks has siblings; a task whose transfers are all
    measured or none fits fills its slots as before."""
    min_distance: int = 1
    """Decisions in which every two top-K picks of a round must differ (a sketch apart counts as
    all); a closer pick is deferred until the round runs out of others. The tracks walk one edit
    per step, so a round's best-predicted states are often neighbours on one track, and a batch of
    them bets every slot on one maximum of a young cost model. 2 spreads the batch over
    neighbourhoods, a hedge as in batch Bayesian optimisation. 1 (plain top-K) stays the default:
    on the selection half 2 helped some operator families and hurt others (docs/harl.md)."""


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
    distance: Callable[[Any, Any], int] | None = None,
    min_distance: int = 1,
) -> list[Pair]:
    """Up to `k` unmeasured (state, key) pairs, none twice.

    `ranked` is the round's visited states, best predicted first. Each slot is, with chance
    `epsilon`, a random visited state instead of the next best; `cross` slots go to
    `cross_fills(n, seen)` (other sketches' fills); if the round visited too few new states,
    `random_fill()` widens the batch (at most 8k draws). With `distance` and `min_distance` > 1,
    a top-K pick closer than `min_distance` to an earlier pick waits until no farther one is left.
    """
    if k <= 0:
        return []
    chosen: list[Pair] = []
    seen = set(measured)
    n_random = int(rng.binomial(k, epsilon)) if epsilon > 0 else 0
    n_cross = min(cross, k - 1) if cross_fills is not None else 0
    n_top = k - n_random - n_cross
    deferred: list[Pair] = []
    for state in ranked:
        if len(chosen) >= n_top:
            break
        state_key = key(state)
        if state_key in seen:
            continue
        seen.add(state_key)
        if distance is not None and min_distance > 1 and any(distance(state, s) < min_distance for s, _ in chosen):
            deferred.append((state, state_key))
        else:
            chosen.append((state, state_key))
    take = max(n_top - len(chosen), 0)
    chosen += deferred[:take]
    seen.difference_update(pair_key for _, pair_key in deferred[take:])  # still open to the random share
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


def decision_distance(a: Any, b: Any) -> int:
    """Decisions in which two schedule states differ (tiles count as one decision each, the
    parallel extent as one); states of different sketches differ in all."""
    if a.sketch != b.sketch or len(a.decisions) != len(b.decisions):
        return len(a.decisions) + 1
    return sum(x != y for x, y in zip(a.decisions, b.decisions)) + (a.parallel_counts != b.parallel_counts)
