"""HARL's four-level hierarchy as one RLlib `MultiAgentEnv` episode (= one search round).

    reset        -> "subgraph" agent sees its SW-UCB window over tasks, picks a task
    step 1       -> "sketch" agent sees the window over that task's sketches, picks a sketch
    step 2..     -> "track_0".."track_{I-1}" (one shared PPO module) start from the sketch's
                    measured bests (elites) or the best-predicted of a few random fills, and edit
                    their schedules one action per step; reward = relative
                    change of the cost model's score, r = (C(s_t) - C(s_{t-1})) / |C(s_{t-1})|,
                    clipped to +-reward_clip
    adaptive stop: every `lam` track steps the live tracks are ranked by the critic's advantage
                    over that window, sum_j gamma^j r_j + gamma^lam V(s_t) - V(s_{t-lam}), and
                    the worst `rho` of them terminate; when fewer than `min_tracks` remain (or
                    after `max_steps`) the episode ends. `fixed_length=True` (the ablation) runs
                    every track for `max_steps` steps.

The bandits act once per episode and terminate at once. Their rewards come after measurement,
so the env does not keep the sliding windows: it reads the bandits' observations from a
`BanditWindows` the search loop injects (the policies layer's `Bandits`). Every schedule a track
visits is kept (`visited`) so the search loop can send the top-K unmeasured ones to the runner.
The agent ids and the observation and action spaces are defined here, with the env that
declares them; the policies that act in them import them from here.
Acting for an agent that is not due (already done, or not yet started) raises MultiAgentEnvError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.utils.error import MultiAgentEnvError

SUBGRAPH_AGENT = "subgraph"
SKETCH_AGENT = "sketch"
TRACK_PREFIX = "track_"
# Fixed arm capacity of the bandits' observation and action spaces; a workload uses the first n.
MAX_ARMS = 128
STALL_STARTS = ("fills", "elites")  # where an exploration round's tracks start (`stall_starts`)


def bandit_observation_space(max_arms: int = MAX_ARMS) -> gym.spaces.Dict:
    """A bandit sees each arm's windowed mean reward and count, which arms exist, and its pull count t."""
    return gym.spaces.Dict(
        {
            "means": gym.spaces.Box(-np.inf, np.inf, (max_arms,), np.float32),
            "counts": gym.spaces.Box(0.0, np.inf, (max_arms,), np.float32),
            "valid": gym.spaces.Box(0.0, 1.0, (max_arms,), np.float32),
            "t": gym.spaces.Box(0.0, np.inf, (1,), np.float32),
        }
    )


def bandit_action_space(max_arms: int = MAX_ARMS) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(max_arms)


def track_observation_space(obs_dim: int, action_dim: int) -> gym.spaces.Dict:
    """A track sees its schedule features and which edits are legal (RLlib's masking layout)."""
    return gym.spaces.Dict(
        {
            "action_mask": gym.spaces.Box(0.0, 1.0, (action_dim,), np.float32),
            "observations": gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
        }
    )


class BanditWindows(Protocol):
    """What the env needs of the bandits: their observations (in `bandit_observation_space`)."""

    def subgraph_observation(self) -> dict[str, np.ndarray]: ...

    def sketch_observation(self, task: int) -> dict[str, np.ndarray]: ...


ValueFn = Callable[[list[dict[str, np.ndarray]]], np.ndarray]
ScoreFn = Callable[[int, list[Any]], np.ndarray]
EliteFn = Callable[[int, int], list[Any]]
SpreadFn = Callable[[int], bool]
FreshFn = Callable[[int], bool]


@dataclass
class HarlEnvConfig:
    """Shape of one round: tracks, their starts, adaptive stopping, episode caps."""

    tracks: int = 8
    """Schedule tracks edited in parallel each round (agents of the one shared PPO module)."""
    lam: int = 20
    """Adaptive-stopping period lambda: every `lam` track steps the weakest tracks are stopped."""
    rho: float = 0.5
    """Fraction rho of the live tracks stopped at each adaptive-stopping check."""
    min_tracks: int = 2
    """The round ends when fewer than this many tracks are still live."""
    max_steps: int = 60
    """Cap on track steps per round (the length of every track with `fixed_length`)."""
    fixed_length: bool = False
    """No adaptive stopping: every track runs `max_steps` steps (the paper's ablation)."""
    elite_fraction: float = 0.5
    """Share of tracks starting from the best measured schedules of the sketch (0: all random fills, the paper's)."""
    elite_fraction_late: float | None = 0.75
    """The elite share grows linearly to this as the budget is spent (None: `elite_fraction` throughout)."""
    elite_other_sketches: int = 0
    """Elite tracks per other sketch of the task, each from that sketch's best measured schedule."""
    start_pool: int = 8
    """Random fills drawn per random track start; the track starts from the best-predicted one."""
    spread_rounds: int = 0
    """The first N searched rounds of a task (after its warm-up batch) split their tracks evenly
    over all its sketches, each share started like a whole round's (elites, best-predicted fills);
    every sketch gets an equal share of the round's measured slots (its best predicted), and each
    gets its own bandit reward. The warm-up judges a sketch by 1-3 random fills, the rounds after
    it by refined elites, so the bandit compares unlike things; a spread round refines every
    sketch once. 0 (off): with 1 it did not beat the defaults beyond run-to-run noise on the
    selection half (docs/harl.md)."""
    stall_rounds: int = 0
    """A task whose best has not improved in N searched rounds in a row plays its next round as
    an exploration round: every track starts from a best-predicted random fill (no elites), the
    tracks and measured slots are spread over all its sketches as in a spread round, and its
    count starts again. Exploration is then spent where refinement has stopped paying, not on a
    fixed share of every task's rounds. 0 (off): with 2 it made no difference beyond noise on
    the selection half, and its rounds found new bests as often as searched rounds did
    (docs/harl.md)."""
    stall_starts: str = "fills"
    """Where an exploration round's tracks start (`stall_rounds`): "fills", every track from a
    best-predicted random fill; "elites", as a spread round's, each sketch's share from its own
    measured bests and fills, so the sketches the bandit passed over after a few random fills get
    refined once before they are compared with the refined one. Stays "fills": at 256 trials
    on the selection shapes "elites" ended level with the defaults (docs/harl.md)."""
    reward_clip: float = 1.0
    """Cap on |r|: a predicted score near 0 would otherwise turn into a huge relative change."""

    def elite_share(self, spent: float) -> float:
        """Share of elite track starts once `spent` (0..1) of the budget is measured.

        `elite_fraction` 0 stays 0 throughout: the paper's pure random fills.
        """
        if self.elite_fraction_late is None or self.elite_fraction == 0:
            return self.elite_fraction
        return self.elite_fraction + (self.elite_fraction_late - self.elite_fraction) * min(max(spent, 0.0), 1.0)


@dataclass
class Visited:
    """A schedule some track reached this episode, with its predicted score."""

    state: Any
    score: float


class HarlEnv(MultiAgentEnv):
    """One search round over `spaces` (one schedule space per task).

    `score_fn(task, states)` is the cost model (higher = faster); `value_fn(observations)` the
    PPO critic, used only for adaptive stopping, with discount `gamma`; `elite_fn(task, sketch)`
    the best measured states of a sketch, best first, where `elite_fraction` of the tracks start
    (the rest start from random fills); `spread_fn(task)` whether this round of the task spreads
    its tracks over all sketches (`spread_rounds`); `fresh_fn(task)` whether every track of this
    round starts from a random fill, elites or not (`stall_rounds`); `bandits` the windows the two
    bandit agents observe. All are injected by the search loop, which owns them.
    """

    def __init__(
        self,
        spaces: Sequence[Any],
        score_fn: ScoreFn,
        value_fn: ValueFn | None,
        bandits: BanditWindows,
        config: HarlEnvConfig | None = None,
        *,
        gamma: float = 0.9,
        seed: int = 0,
        elite_fn: EliteFn | None = None,
        spread_fn: SpreadFn | None = None,
        fresh_fn: FreshFn | None = None,
    ) -> None:
        super().__init__()
        self.config = config or HarlEnvConfig()
        self.gamma = gamma
        self.bandits = bandits
        if self.config.tracks < 1 or self.config.lam < 1 or not 0.0 <= self.config.rho < 1.0:
            raise ValueError(f"bad HARL episode shape {self.config}: need tracks >= 1, lam >= 1, 0 <= rho < 1")
        self.spaces = list(spaces)
        self.score_fn = score_fn
        self.value_fn = value_fn
        self.elite_fn = elite_fn
        self.spread_fn = spread_fn
        self.fresh_fn = fresh_fn
        self.elite_fraction = self.config.elite_fraction  # the search loop raises it as trials are spent
        self.rng = np.random.default_rng(seed)
        first = self.spaces[0]
        track_space = track_observation_space(first.obs_dim, first.action_dim)
        self.track_ids = [f"{TRACK_PREFIX}{i}" for i in range(self.config.tracks)]
        self.possible_agents = [SUBGRAPH_AGENT, SKETCH_AGENT, *self.track_ids]
        self.agents = []
        self.observation_spaces = {
            SUBGRAPH_AGENT: bandit_observation_space(),
            SKETCH_AGENT: bandit_observation_space(),
            **{aid: track_space for aid in self.track_ids},
        }
        self.action_spaces = {
            SUBGRAPH_AGENT: bandit_action_space(),
            SKETCH_AGENT: bandit_action_space(),
            **{aid: gym.spaces.Discrete(first.action_dim) for aid in self.track_ids},
        }
        self._reset_round()

    # ------------------------------------------------------------------ episode state
    def _reset_round(self) -> None:
        self.task: int | None = None
        self.sketch: int | None = None
        self.states: dict[str, Any] = {}
        self.scores: dict[str, float] = {}
        self.live: list[str] = []
        self.due: set[str] = set()
        self.track_steps = 0
        self.stopped_at: dict[str, int] = {}
        self.visited: dict[Any, Visited] = {}
        self._window_rewards: dict[str, list[float]] = {}
        self._window_start_obs: dict[str, dict[str, np.ndarray]] = {}
        self.advantages: list[dict[str, float]] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start a round. `options={"task": n}` skips the subgraph bandit (single task, or ablation)."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self._reset_round()
        options = options or {}
        if options.get("task") is not None:
            self.task = int(options["task"])
            self.agents = [SKETCH_AGENT]
            self.due = {SKETCH_AGENT}
            return {SKETCH_AGENT: self.bandits.sketch_observation(self.task)}, {}
        self.agents = [SUBGRAPH_AGENT]
        self.due = {SUBGRAPH_AGENT}
        return {SUBGRAPH_AGENT: self.bandits.subgraph_observation()}, {}

    def step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        unexpected = set(action_dict) - self.due
        missing = self.due - set(action_dict)
        if unexpected or missing:
            raise MultiAgentEnvError(
                f"HarlEnv expected actions for {sorted(self.due)}, got {sorted(action_dict)} "
                "(don't act for agents that are done or not yet started)"
            )
        if SUBGRAPH_AGENT in action_dict:
            return self._pick_task(int(action_dict[SUBGRAPH_AGENT]))
        if SKETCH_AGENT in action_dict:
            return self._pick_sketch(int(action_dict[SKETCH_AGENT]))
        return self._edit(action_dict)

    # ------------------------------------------------------------------ bandit levels
    def _pick_task(self, arm: int) -> tuple[dict, dict, dict, dict, dict]:
        if not 0 <= arm < len(self.spaces):
            raise MultiAgentEnvError(f"subgraph arm {arm} out of range (workload has {len(self.spaces)} tasks)")
        self.task = arm
        self.agents = [SKETCH_AGENT]
        self.due = {SKETCH_AGENT}
        obs = {SUBGRAPH_AGENT: self.bandits.subgraph_observation(), SKETCH_AGENT: self.bandits.sketch_observation(arm)}
        return obs, {SUBGRAPH_AGENT: 0.0}, {SUBGRAPH_AGENT: True, "__all__": False}, {"__all__": False}, {}

    def _pick_sketch(self, arm: int) -> tuple[dict, dict, dict, dict, dict]:
        space = self.spaces[self.task]
        if not 0 <= arm < space.num_sketches:
            raise MultiAgentEnvError(f"sketch arm {arm} out of range (task has {space.num_sketches} sketches)")
        self.sketch = arm
        elite_fraction = 0.0 if self.fresh_fn is not None and self.fresh_fn(self.task) else self.elite_fraction
        if self.spread_fn is not None and self.spread_fn(self.task):
            states, scores = self._spread_starts(space, arm, elite_fraction)
        else:
            states, scores = self._sketch_starts(space, arm, len(self.track_ids), elite_fraction)
        obs: dict[str, Any] = {SKETCH_AGENT: self.bandits.sketch_observation(self.task)}
        for aid, state, score in zip(self.track_ids, states, scores):
            self.states[aid], self.scores[aid] = state, float(score)
            self._visit(state, float(score))
            obs[aid] = self._track_obs(aid)
            self._window_rewards[aid] = []
            self._window_start_obs[aid] = obs[aid]
        self.live = list(self.track_ids)
        self.agents = list(self.track_ids)
        self.due = set(self.track_ids)
        return obs, {SKETCH_AGENT: 0.0}, {SKETCH_AGENT: True, "__all__": False}, {"__all__": False}, {}

    def _sketch_starts(self, space: Any, arm: int, n_tracks: int,
                       elite_fraction: float) -> tuple[list[Any], np.ndarray]:
        """Starts of `n_tracks` tracks in one sketch: `elite_fraction` of them from its measured
        bests, the rest from best-predicted random fills."""
        n_elite = int(round(elite_fraction * n_tracks))
        elites = list(self.elite_fn(self.task, arm))[:n_elite] if self.elite_fn is not None and n_elite else []
        states, scores = self._random_starts(space, arm, n_tracks - len(elites))
        if elites:
            states, scores = elites + states, np.concatenate([self.score_fn(self.task, elites), scores])
        return states, scores

    def _spread_starts(self, space: Any, arm: int, elite_fraction: float) -> tuple[list[Any], np.ndarray]:
        """The tracks shared out evenly over the task's sketches, the bandit's `arm` first (with
        more sketches than tracks, the sketches after the first `tracks` get none)."""
        order = [arm, *(s for s in range(space.num_sketches) if s != arm)][: len(self.track_ids)]
        n, extra = divmod(len(self.track_ids), len(order))
        parts = [self._sketch_starts(space, s, n + (i < extra), elite_fraction) for i, s in enumerate(order)]
        return [state for states, _ in parts for state in states], np.concatenate([scores for _, scores in parts])

    def _random_starts(self, space: Any, arm: int, n: int) -> tuple[list[Any], np.ndarray]:
        """`n` random-fill starts: the best-predicted of `n * start_pool` fills.

        Every fill drawn is visited (so a candidate for the top-K), the way MetaSchedule's
        evolutionary search scores a large random population before it mutates: once the cost
        model has seen a few batches, the tracks start where it already expects speed.
        """
        if n <= 0:
            return [], np.zeros(0)
        pool = [space.random_state(arm, self.rng) for _ in range(n * max(1, self.config.start_pool))]
        scores = np.asarray(self.score_fn(self.task, pool), dtype=np.float64)
        if len(pool) == n:
            return pool, scores
        for state, score in zip(pool, scores):
            self._visit(state, float(score))
        best = np.argsort(-scores, kind="stable")[:n]
        return [pool[i] for i in best], scores[best]

    # ------------------------------------------------------------------ track level
    def _track_obs(self, aid: str) -> dict[str, np.ndarray]:
        space = self.spaces[self.task]
        state = self.states[aid]
        return {
            "action_mask": np.asarray(space.action_mask(state), np.float32),
            "observations": np.asarray(space.observation(state, self.scores[aid]), np.float32),
        }

    def _visit(self, state: Any, score: float) -> None:
        if state.key not in self.visited:
            self.visited[state.key] = Visited(state, score)

    def _edit(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        space = self.spaces[self.task]
        acting = [aid for aid in self.live if aid in action_dict]
        new_states = [space.apply(self.states[aid], int(action_dict[aid])) for aid in acting]
        new_scores = self.score_fn(self.task, new_states)
        rewards: dict[str, float] = {}
        for aid, state, score in zip(acting, new_states, new_scores):
            old = self.scores[aid]
            relative = (score - old) / max(abs(old), 1e-6)
            rewards[aid] = float(np.clip(relative, -self.config.reward_clip, self.config.reward_clip))
            self.states[aid], self.scores[aid] = state, float(score)
            self._visit(state, float(score))
            self._window_rewards[aid].append(rewards[aid])
        self.track_steps += 1
        obs = {aid: self._track_obs(aid) for aid in acting}

        stopped: set[str] = set()
        if self.track_steps >= self.config.max_steps:
            stopped = set(self.live)
        elif not self.config.fixed_length and self.track_steps % self.config.lam == 0:
            stopped = self._adaptive_stop(obs)
        for aid in stopped:
            self.stopped_at[aid] = self.track_steps
        self.live = [aid for aid in self.live if aid not in stopped]
        self.agents = list(self.live)
        self.due = set(self.live)
        done_all = not self.live
        terminateds = {aid: aid in stopped for aid in acting}
        terminateds["__all__"] = done_all
        return obs, rewards, terminateds, {"__all__": False}, {}

    def _adaptive_stop(self, obs: dict[str, dict[str, np.ndarray]]) -> set[str]:
        """Stop the worst `rho` of the live tracks by critic advantage over the last window."""
        live = list(self.live)
        gamma = self.gamma
        starts = [self._window_start_obs[aid] for aid in live]
        ends = [obs[aid] for aid in live]
        if self.value_fn is not None:
            values = np.asarray(self.value_fn(starts + ends), dtype=np.float64)
            v_start, v_end = values[: len(live)], values[len(live):]
        else:
            v_start = v_end = np.zeros(len(live))
        advantage: dict[str, float] = {}
        for i, aid in enumerate(live):
            rewards = self._window_rewards[aid]
            discounted = sum(r * gamma**j for j, r in enumerate(rewards))
            advantage[aid] = float(discounted + gamma ** len(rewards) * v_end[i] - v_start[i])
            self._window_rewards[aid] = []
            self._window_start_obs[aid] = obs[aid]
        self.advantages.append(advantage)
        n_stop = int(np.floor(self.config.rho * len(live)))
        ranked = sorted(live, key=lambda aid: advantage[aid])
        stopped = set(ranked[:n_stop])
        if len(live) - len(stopped) < self.config.min_tracks:
            stopped = set(live)
        return stopped

    # ------------------------------------------------------------------ after measurement
    def top_visited(self) -> list[Visited]:
        """Every schedule visited this round, best predicted first."""
        return sorted(self.visited.values(), key=lambda v: -v.score)
