"""The HARL search loop, top to bottom (in the spirit of CleanRL's ppo.py).

Per round (= one `HarlEnv` episode):
  1. the subgraph bandit picks a task, the sketch bandit one of its sketches (SW-UCB modules)
  2. I tracks start from the best-predicted of `start_pool` random fills each of the sketch (by
     default half of them, rising to 3/4 as the budget is spent, from its best measured
     schedules instead, `elite_fraction`/`elite_fraction_late`; 0 = the paper's pure random
     fills); the shared PPO editor edits them step by step, the cost model scoring every new
     schedule; adaptive stopping drops weak tracks
  3. PPO learns from the round's episode (learner group update)
  4. the top-K visited schedules by predicted score that are not measured yet go to the runner,
     each slot with chance `epsilon` a random visited one instead; a task's first batch
     (`sketch_warmup`) is spread over all its sketches instead
  5. results are appended to the records; the cost model retrains on them
  6. the bandits get their rewards: Ansor's gradient estimate (task), normalised best (sketch:
     the round's best over the task's best, all of a task's sketch rewards rescaled when its best
     improves)
until the trial budget is spent. A records file that already holds trials is resumed: measured
schedules are skipped, the cost model is retrained from them and their trials count.

Search time (everything but building and running candidates) is reported per measured trial.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hiertune.envs.harl_env import HarlEnv, HarlEnvConfig
from hiertune.workloads import Workload
from hiertune.errors import HiertuneError
from hiertune.platform.records import MeasureRecord, RecordStore, trace_key
from hiertune.platform.runners import MeasureInput, MeasureResult
from hiertune.policies.bandit_rewards import TaskProgress, sketch_reward, subgraph_rewards
from hiertune.policies.ppo_editor import (
    SKETCH_AGENT,
    SKETCH_MODULE,
    SUBGRAPH_AGENT,
    SUBGRAPH_MODULE,
    PPOEditor,
    PPOEditorConfig,
    agent_to_module,
)

TUNER = "harl"
ELITE_POOL = 32  # best measured states kept per task and sketch as track starts


@dataclass
class HarlConfig:
    """HARL's knobs (paper defaults) and the run's budget."""

    trials: int = 64  # measured trials in total, including those already in the records
    c: float = 0.25
    tau: int = 256
    lam: int = 20
    rho: float = 0.5
    tracks: int = 8  # 16 was tried as the default: one T2D:3 run improved 5x, but the full quick
    #   suite got worse (geomean HARL/MetaSchedule 0.964 vs 0.921 with 8, both at epsilon 0.05)
    topk: int = 8
    min_tracks: int = 2
    max_steps: int = 60
    fixed_length: bool = False
    elite_fraction: float = 0.5  # tracks starting from the best measured schedules (0: all random fills)
    # Defaults below were measured against MetaSchedule at 64 trials (issue 4, bench/results notes):
    elite_fraction_late: float | None = 0.75  # the elite share grows linearly to this as the budget is
    #   spent: exploit once the cost model knows the space (None: `elite_fraction` throughout)
    start_pool: int = 8  # random fills drawn per random track start; tracks start from the best
    #   predicted, every fill is a top-K candidate (MetaSchedule scores a random population too).
    #   Probes at 64 trials: 8 beat 4 on C2D:1 (seeds 1, 2, 5: 0.100/0.099/0.111 vs 0.115/0.112/0.119
    #   ms) and GMM-L (seeds 0, 1: 9.1/9.2 vs 9.6/9.9 ms); 16 lost GMM-L (12.9/12.6 ms): its random
    #   fills crowd the top-K
    epsilon: float = 0.2  # chance per top-K slot of a random visited schedule (MetaSchedule's
    #   eps-greedy, whose default is 0.05: HARL's tracks exploit harder, and 0.2 won the quick suite)
    sketch_renormalise: bool = True  # sketch reward = task best now / the round's best: rewards are
    #   rescaled as the best moves, so a sketch's first (random) round keeps no free 1.0
    sketch_warmup: bool = True  # a task's first batch covers all its sketches, one bandit step: the
    #   bandit no longer spends a whole round per sketch just to try each once
    elite_other_sketches: int = 0  # elite tracks per other sketch of the task, each from that sketch's
    #   best measured schedule (0: elites come only from the bandit's sketch); their edits compete for
    #   the top-K and are credited to their own sketch, so a sketch the bandit left keeps being refined
    cross_sketch: int = 0  # top-K slots per round for the best-predicted random fills of the task's
    #   other sketches (credited to them): keeps a sketch the bandit has left in view (off by default)
    whole_tile_moves: bool = True  # tile edits may move a level's whole factor in one step, as
    #   MetaSchedule's tile mutator moves any divisor (False: one prime factor per edit, the paper's)
    subgraph_bandit: bool = True
    seed: int = 0
    ppo: PPOEditorConfig = field(default_factory=PPOEditorConfig)

    def env_config(self) -> HarlEnvConfig:
        return HarlEnvConfig(
            tracks=self.tracks, lam=self.lam, rho=self.rho, min_tracks=self.min_tracks,
            max_steps=self.max_steps, fixed_length=self.fixed_length, gamma=self.ppo.gamma,
            tau=self.tau, subgraph_tau=self.tau, elite_fraction=self.elite_fraction, start_pool=self.start_pool,
        )

    def elite_share(self, spent: float) -> float:
        """Share of elite track starts once `spent` (0..1) of the budget is measured.

        `elite_fraction` 0 stays 0 throughout: the paper's pure random fills (`--elite-starts 0`).
        """
        if self.elite_fraction_late is None or self.elite_fraction == 0:
            return self.elite_fraction
        return self.elite_fraction + (self.elite_fraction_late - self.elite_fraction) * min(max(spent, 0.0), 1.0)

    def editor_config(self) -> PPOEditorConfig:
        """PPO settings with this run's SW-UCB knobs and seed."""
        return replace(self.ppo, c=self.c, tau=self.tau, subgraph_tau=self.tau, seed=self.seed)

    def validate(self) -> None:
        checks = [
            ("--trials", self.trials, self.trials >= 1, ">= 1"),
            ("--c", self.c, self.c >= 0, ">= 0"),
            ("--tau", self.tau, self.tau >= 1, ">= 1"),
            ("--lambda", self.lam, self.lam >= 1, ">= 1"),
            ("--rho", self.rho, 0 <= self.rho < 1, "in [0, 1)"),
            ("--tracks", self.tracks, self.tracks >= 1, ">= 1"),
            ("--topk", self.topk, self.topk >= 1, ">= 1"),
            ("--min-tracks", self.min_tracks, 1 <= self.min_tracks <= self.tracks, f"in 1..--tracks ({self.tracks})"),
            ("--max-steps", self.max_steps, self.max_steps >= 1, ">= 1"),
            ("--elite-starts", self.elite_fraction, 0 <= self.elite_fraction <= 1, "in [0, 1]"),
            ("--elite-late", self.elite_fraction_late,
             self.elite_fraction_late is None or 0 <= self.elite_fraction_late <= 1, "in [0, 1]"),
            ("--start-pool", self.start_pool, self.start_pool >= 1, ">= 1"),
            ("--epsilon", self.epsilon, 0 <= self.epsilon <= 1, "in [0, 1]"),
            ("--elite-other-sketches", self.elite_other_sketches, self.elite_other_sketches >= 0, ">= 0"),
            ("--cross-sketch", self.cross_sketch, 0 <= self.cross_sketch < self.topk, f"in 0..--topk - 1 ({self.topk - 1})"),
        ]
        for flag, value, ok, rule in checks:
            if not ok:
                raise HiertuneError(f"{flag} {value} is out of range: it must be {rule}")


@dataclass
class RoundLog:
    """What one round did (for the curve, the allocation plot and the timing report)."""

    round: int
    task: str
    sketch: int
    trials: int  # total trials after this round
    measured: int  # candidates measured this round
    best_s: float  # the task's best latency after this round
    weighted_s: float  # sum_n w_n * best_n (inf until every task has a result)
    steps: int  # track steps of the episode
    stopped_at: dict[str, int]
    search_s: float
    measure_s: float


@dataclass
class HarlResult:
    rounds: list[RoundLog]
    trials: int  # trials in the records for this tuner (resumed ones included)
    new_trials: int
    search_s: float
    measure_s: float
    best_s: dict[str, float]
    task_trials: dict[str, int]
    exhausted: bool = False  # stopped before the budget: no unmeasured schedule was left

    @property
    def search_s_per_trial(self) -> float:
        return self.search_s / max(self.new_trials, 1)


def task_group(name: str) -> str:
    """Ansor's 'similar tasks': the same operator chain, shapes and numbering stripped.

    `fused_conv2d1_add_relu` and `fused_conv2d_add_relu` -> `conv2d_add_relu`; `C2D:2` -> `C2D`.
    """
    base = name.split(":")[0].removeprefix("fused_")
    words = (re.sub(r"\d+$", "", word) for word in base.split("_"))
    return "_".join(word for word in words if word) or name


class HarlSearch:
    """Holds the pieces of a HARL run; `run()` is the loop."""

    def __init__(self, workload: Workload, target: Any, runner: Any, store: RecordStore, config: HarlConfig) -> None:
        from hiertune.envs.schedule_space import ScheduleSpace, SpaceConfig
        from hiertune.policies.cost_model import CostModel

        config.validate()
        self.workload, self.target, self.runner, self.store, self.config = workload, target, runner, store, config
        self.tasks = workload.tasks
        if len(self.tasks) > 64:
            raise HiertuneError(f"workload {workload.name} has {len(self.tasks)} tasks; HARL's bandit takes at most 64")
        for task in self.tasks:
            store.add_workload(task.name, task.mod, task.weight)
        space_config = SpaceConfig(whole_tile_moves=config.whole_tile_moves)
        self.spaces = [ScheduleSpace(task.mod, target, seed=config.seed + i, config=space_config)
                       for i, task in enumerate(self.tasks)]
        self.cost_model = CostModel()  # one model for all tasks (each task its own label group)
        space = self.spaces[0]
        self.editor = PPOEditor(space.obs_dim, space.action_dim, config.editor_config())
        self.env = HarlEnv(
            self.spaces, self._score, self.editor.values, config.env_config(), seed=config.seed, elite_fn=self._elites
        )
        self.progress = [TaskProgress(float(t.weight), t.flops, task_group(t.name)) for t in self.tasks]
        self.measured: list[set[str]] = [set() for _ in self.tasks]
        # (latency, state) per task and sketch, best first
        self.best_states: list[dict[int, list[tuple[float, Any]]]] = [{} for _ in self.tasks]
        self.rounds: list[RoundLog] = []
        self.rng = np.random.default_rng(config.seed)
        self.exhausted = False  # every sketch of every task ran out of unmeasured schedules
        self._resume()

    # ------------------------------------------------------------------ pieces
    def _score(self, task: int, states: list[Any]) -> np.ndarray:
        return np.asarray(self.cost_model.predict(states), dtype=np.float64)

    def _resume(self) -> None:
        """Continue a records file: skip what it holds, retrain on it, replay the bandits' rounds.

        Its trials count against the budget. Consecutive records of one task and sketch were one
        round, so replaying them in order rebuilds the task progress and both bandits' windows.
        """
        index = {task.name: n for n, task in enumerate(self.tasks)}
        records = [r for r in self.store.trials(tuner=TUNER) if r.task in index]
        states, latencies = [], []
        for r in records:
            n = index[r.task]
            self.measured[n].add(r.key)
            state = self.spaces[n].state_from_record(r.record)
            if state is not None:
                states.append(state)
                latencies.append(r.mean_s)
                self._keep_best(n, state, r.mean_s)
        def round_of(r: MeasureRecord) -> tuple:  # older records carry no round id: one sketch run = one round
            return (r.task, "round", r.extra["round"]) if "round" in r.extra else (r.task, "sketch", r.extra.get("sketch"))

        for (task_name, *_), group in itertools.groupby(records, key=round_of):
            group = list(group)
            sketches = [r.extra.get("sketch") for r in group]
            self._finish_round(index[task_name], [r.mean_s for r in group], sketches)
        if states:
            self.cost_model.update(states, latencies)

    def _finish_round(self, task: int, latencies: list[float], sketches: list[int | None]) -> float:
        """Task progress and bandit rewards after a round's measurements; returns the round's best.

        `sketches` holds each latency's sketch (None: an old record without one), so a round that
        measured several sketches (the warm-up round, cross-sketch slots, other sketches' elite
        tracks) gives each sketch its own reward from its own best.
        """
        round_best = min(latencies, default=math.inf)
        task_best_before = self.progress[task].best
        self.progress[task].add_round(round_best, len(latencies))
        per_sketch: dict[int, float] = {}
        for s, latency in zip(sketches, latencies):
            if s is not None and 0 <= s < self.spaces[task].num_sketches:
                per_sketch[s] = min(per_sketch.get(s, math.inf), latency)
        if not per_sketch:
            return round_best
        if self.config.subgraph_bandit:
            self.env.subgraph_window.record(task, subgraph_rewards(self.progress)[task])
        norm = task_best_before
        if self.config.sketch_renormalise:
            norm = self.progress[task].best
            if math.isfinite(task_best_before) and norm < task_best_before:
                self.env.sketch_windows[task].rescale(norm / task_best_before)
        for i, (s, best) in enumerate(per_sketch.items()):  # a warm-up batch is one bandit step
            self.env.sketch_windows[task].record(s, sketch_reward(best, norm), step=i == 0)
        return round_best

    def _keep_best(self, task: int, state: Any, latency: float) -> None:
        if math.isfinite(latency):
            best = self.best_states[task].setdefault(int(state.sketch), [])
            best.append((latency, state))
            best.sort(key=lambda pair: pair[0])
            del best[ELITE_POOL:]

    def _elites(self, task: int, sketch: int) -> list[Any]:
        """Elite track starts, best first: with `elite_other_sketches` n, the n best measured states
        of every other sketch of the task come first, then the best of the bandit's `sketch`."""
        own = [state for _, state in self.best_states[task].get(sketch, [])]
        n = self.config.elite_other_sketches
        others = [state for s, pool in sorted(self.best_states[task].items()) if s != sketch for _, state in pool[:n]]
        return others + own

    def trials_done(self) -> int:
        return len(self.store.trials(tuner=TUNER))

    def _record(self, task: int, state: Any, result: MeasureResult, key: str, round_id: int) -> MeasureRecord:
        latencies = result.latencies_s if result.ok else None
        record = self.spaces[task].tuning_record(state, latencies or [1e10])
        return MeasureRecord(
            task=self.tasks[task].name, key=key, record=record.as_json(), latencies_s=latencies,
            error=None if result.ok else (result.error or "failed"), build_s=result.build_s, run_s=result.run_s,
            time=time.time(), tuner=TUNER, trial=self.trials_done() + 1, extra={"sketch": int(state.sketch), "round": round_id},
        )

    def _play_episode(self) -> Any:
        """One round of the hierarchy; returns the tracks' MultiAgentEpisode for PPO."""
        from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

        options = None
        if not self.config.subgraph_bandit:  # ablation: round-robin over the tasks still in play
            live = [n for n in range(len(self.tasks)) if n not in self.env.subgraph_window.disabled]
            options = {"task": live[len(self.rounds) % len(live)]}
        obs, _ = self.env.reset(options=options)
        episode = MultiAgentEpisode(agent_to_module_mapping_fn=agent_to_module)
        started = False
        while True:
            actions: dict[str, int] = {}
            extra: dict[str, dict[str, Any]] = {}
            if SUBGRAPH_AGENT in self.env.due:
                actions[SUBGRAPH_AGENT] = self.editor.bandit_action(SUBGRAPH_MODULE, obs[SUBGRAPH_AGENT])
            elif SKETCH_AGENT in self.env.due:
                actions[SKETCH_AGENT] = self.editor.bandit_action(SKETCH_MODULE, obs[SKETCH_AGENT])
            else:
                tracks = [aid for aid in self.env.live if aid in self.env.due]
                sampled, logp, logits = self.editor.act([obs[aid] for aid in tracks])
                for i, aid in enumerate(tracks):
                    actions[aid] = int(sampled[i])
                    extra[aid] = {"action_logp": logp[i], "action_dist_inputs": logits[i]}
            obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
            if SKETCH_AGENT in actions:  # tracks start now: their episode begins here
                episode.add_env_reset(observations={aid: o for aid, o in obs.items() if aid in self.env.track_ids})
                started = True
                continue
            if started and extra:
                episode.add_env_step(
                    observations=obs, actions=actions, rewards=rewards,
                    terminateds=terminateds, truncateds=truncateds, extra_model_outputs=extra,
                )
            if terminateds.get("__all__"):
                return episode

    def _candidates(self, task: int, k: int) -> list[tuple[Any, str]]:
        """The K best-predicted visited schedules not measured yet (random fills if too few)."""
        chosen: list[tuple[Any, str]] = []
        seen = set(self.measured[task])
        n_random = int(self.rng.binomial(k, self.config.epsilon)) if self.config.epsilon > 0 else 0
        n_cross = min(self.config.cross_sketch, k - 1) if self.spaces[task].num_sketches > 1 else 0
        ranked = self.env.top_visited()
        for visited in ranked:
            if len(chosen) >= k - n_random - n_cross:
                break
            key = trace_key(visited.state.trace)
            if key not in seen:
                seen.add(key)
                chosen.append((visited.state, key))
        if n_random:  # MetaSchedule's epsilon-greedy share: a few visited schedules at random
            rest = [v.state for v in ranked if trace_key(v.state.trace) not in seen]
            for i in self.rng.permutation(len(rest))[:n_random]:
                key = trace_key(rest[i].trace)
                seen.add(key)
                chosen.append((rest[i], key))
        if len(chosen) == k:
            return chosen
        chosen += self._other_sketch_fills(task, min(n_cross, k - len(chosen)), seen)
        if len(chosen) >= k:
            return chosen
        for _ in range(8 * k):  # the space around this sketch is exhausted: widen with random fills
            state = self.spaces[task].random_state(self.env.sketch, self.rng)
            key = trace_key(state.trace)
            if key not in seen:
                seen.add(key)
                chosen.append((state, key))
            if len(chosen) == k:
                break
        return chosen

    def _ranked_fills(self, task: int, sketch: int, count: int) -> list[tuple[Any, str]]:
        """`count` random fills of a sketch with their trace keys, best predicted first."""
        fills = [self.spaces[task].random_state(sketch, self.rng) for _ in range(count)]
        order = np.argsort(-np.asarray(self._score(task, fills)), kind="stable")
        return [(fills[i], trace_key(fills[i].trace)) for i in order]

    def _other_sketch_fills(self, task: int, n: int, seen: set[str]) -> list[tuple[Any, str]]:
        """n best-predicted random fills of the task's other sketches, round-robin over them."""
        others = [s for s in range(self.spaces[task].num_sketches) if s != self.env.sketch]
        if n <= 0 or not others:
            return []
        chosen: list[tuple[Any, str]] = []
        for i in range(n):
            sketch = others[(len(self.rounds) + i) % len(others)]
            ranked = self._ranked_fills(task, sketch, 4 * max(1, self.config.start_pool))
            pair = next((pair for pair in ranked if pair[1] not in seen), None)
            if pair is not None:
                seen.add(pair[1])
                chosen.append(pair)
        return chosen

    def _warmup_candidates(self, task: int, k: int) -> list[tuple[Any, str]]:
        """A task's first batch spread over all its sketches (best-predicted of a few fills each).

        MetaSchedule's first batch covers every sketch; HARL's bandit would otherwise spend one
        whole round per sketch just to try each once. The bandit then starts from one reward per
        sketch and the cost model from data on all of them.
        """
        space = self.spaces[task]
        seen = set(self.measured[task])
        n = -(-k // space.num_sketches)
        pools = [self._ranked_fills(task, sketch, n * max(1, self.config.start_pool))
                 for sketch in range(space.num_sketches)]
        chosen: list[tuple[Any, str]] = []
        for pair in itertools.chain.from_iterable(itertools.zip_longest(*pools)):
            if pair is not None and pair[1] not in seen and len(chosen) < k:
                seen.add(pair[1])
                chosen.append(pair)
        return chosen

    def _weighted_latency(self) -> float:
        return sum(p.weight * p.best for p in self.progress)

    # ------------------------------------------------------------------ the loop
    def run(self, on_round: Callable[[RoundLog], None] | None = None) -> HarlResult:
        config = self.config
        start_trials = self.trials_done()
        search_s = measure_s = 0.0
        while self.trials_done() < config.trials:
            t0 = time.perf_counter()
            self.env.elite_fraction = config.elite_share(self.trials_done() / config.trials)
            # 1-2. bandits pick task and sketch; tracks edit; adaptive stopping
            episode = self._play_episode()
            task, sketch = self.env.task, self.env.sketch
            # 3. PPO learns from the tracks' episode
            self.editor.update([episode])
            # 4. top-K unmeasured by predicted score
            k = min(config.topk, config.trials - self.trials_done())
            warmup = self.config.sketch_warmup and not self.measured[task] and self.spaces[task].num_sketches > 1
            candidates = self._warmup_candidates(task, k) if warmup else self._candidates(task, k)
            inputs = [MeasureInput.from_schedule(state.sch) for state, _ in candidates]
            t1 = time.perf_counter()
            results = self.runner.measure(inputs)
            t2 = time.perf_counter()
            # 5. records and cost model
            round_id = self.trials_done() + 1  # the round's first trial: groups its records on resume
            for (state, key), result in zip(candidates, results):
                self.store.append(self._record(task, state, result, key, round_id))
                self.measured[task].add(key)
                self._keep_best(task, state, result.mean_s)
            self.cost_model.update([s for s, _ in candidates], [r.mean_s for r in results])
            # 6. task progress and bandit rewards
            self._finish_round(task, [r.mean_s for r in results], [int(state.sketch) for state, _ in candidates])
            t3 = time.perf_counter()
            search_s += (t1 - t0) + (t3 - t2)
            measure_s += t2 - t1
            log = RoundLog(
                round=len(self.rounds) + 1, task=self.tasks[task].name, sketch=sketch, trials=self.trials_done(),
                measured=len(results), best_s=self.progress[task].best, weighted_s=self._weighted_latency(),
                steps=self.env.track_steps, stopped_at=dict(self.env.stopped_at),
                search_s=(t1 - t0) + (t3 - t2), measure_s=t2 - t1,
            )
            self.rounds.append(log)
            if on_round is not None:
                on_round(log)
            if not candidates:  # nothing new left in this sketch: take it (and maybe the task) out of play
                self.env.sketch_windows[task].disable(sketch)
                if self.env.sketch_windows[task].exhausted:
                    self.env.subgraph_window.disable(task)
                if self.env.subgraph_window.exhausted:
                    self.exhausted = True
                    break
        return HarlResult(
            rounds=self.rounds, trials=self.trials_done(), new_trials=self.trials_done() - start_trials,
            search_s=search_s, measure_s=measure_s,
            best_s={t.name: p.best for t, p in zip(self.tasks, self.progress)},
            task_trials={t.name: len(self.store.trials(t.name, tuner=TUNER)) for t in self.tasks},
            exhausted=self.exhausted,
        )
