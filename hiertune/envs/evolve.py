"""MetaSchedule-style evolutionary screening, with HARL's edit actions as the mutations.

Why: a round's PPO tracks visit a few hundred schedules near their starts. Where the cost model
already ranks well (a large matmul after a dozen trials), MetaSchedule's evolutionary search
wins by breadth: it mutates its measured bests and random fills for a few generations and lets
the cost model screen every mutant. `evolve` does the same over a `ScheduleSpace`, so the
round's candidate pool and its tracks' starts get that breadth while the tracks still refine.

Per generation (as `EvolutionarySearch`): parents are drawn from the population with
probability proportional to their predicted score's rank, each child is its parent after one
random legal edit (a tile-factor move, compute-at, parallel or unroll step), the cost model
scores the children, and the best `population` schedules seen so far form the next population.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hiertune.envs import edit_actions as ea

ScoreStates = Callable[[list[Any]], np.ndarray]


def evolve(space: Any, seeds: Sequence[Any], score: ScoreStates, rng: np.random.Generator, *,
           population: int, generations: int) -> list[tuple[Any, float]]:
    """Every schedule seen (the seeds and all their mutants) with its predicted score, best first.

    `seeds` are the first population (measured bests and random fills of one sketch); `score`
    is the cost model (higher = faster). A parent with no legal edit left is kept as it is.
    """
    seen: dict[Any, tuple[Any, float]] = {}
    seed_states = list({s.key: s for s in seeds}.values())
    if not seed_states or population < 1:
        return []
    for state, value in zip(seed_states, np.asarray(score(seed_states), dtype=np.float64)):
        seen[state.key] = (state, float(value))
    current = _best(seen, population)
    for _ in range(generations):
        # rank-proportional parent choice: the best is drawn most often, none never
        weights = np.arange(len(current), 0, -1, dtype=np.float64)
        parents = rng.choice(len(current), size=population, p=weights / weights.sum())
        children: dict[Any, Any] = {}
        for i in parents:
            child = _mutate(space, current[i][0], rng)
            if child is not None and child.key not in seen:
                children[child.key] = child
        if not children:
            break
        new = list(children.values())
        for state, value in zip(new, np.asarray(score(new), dtype=np.float64)):
            seen[state.key] = (state, float(value))
        current = _best(seen, population)
    return sorted(seen.values(), key=lambda pair: -pair[1])


def _best(seen: dict[Any, tuple[Any, float]], n: int) -> list[tuple[Any, float]]:
    return sorted(seen.values(), key=lambda pair: -pair[1])[:n]


def _mutate(space: Any, state: Any, rng: np.random.Generator) -> Any | None:
    """`state` after one random legal edit (None when no edit changes it)."""
    mask = np.asarray(space.action_mask(state), dtype=bool)
    mask[ea.NOOP] = False
    legal = np.flatnonzero(mask)
    for action in rng.permutation(legal)[:4]:  # an edit can still fail on replay: try a few
        child = space.apply(state, int(action))
        if child is not state:
            return child
    return None
