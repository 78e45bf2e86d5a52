"""The HARL search, shaped like a MetaSchedule search strategy: `propose(k)` / `observe(...)`.

Per round (= one `HarlEnv` episode), `propose`:
  1. the subgraph bandit picks a task, the sketch bandit one of its sketches (SW-UCB modules)
  2. tracks start from the sketch's best measured schedules (`episode.elite_fraction`, rising to
     `elite_fraction_late` as the budget is spent) or from the best-predicted of `start_pool`
     random fills; the shared PPO editor edits them step by step, the cost model scoring every
     new schedule; adaptive stopping drops weak tracks
  3. PPO learns from the round's episode (learner group update); a warm-up round (below) plays
     no tracks, so PPO learns nothing from it
  4. the top-K visited schedules by predicted score that are not measured yet are the round's
     candidates (`policies.candidates`); a task's first batch covers all its sketches instead
the runner measures them, and `observe`:
  5. appends the results to the records and retrains the cost model on them
  6. gives the bandits their rewards (`policies.bandits`)
`run()` repeats this until the trial budget is spent. A records file that already holds trials
is resumed: measured schedules are skipped, the cost model is retrained from them, the bandits'
rounds are replayed and their trials count against the budget.

Search time (everything but building and running candidates) is reported per measured trial.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hiertune.envs.harl_env import MAX_ARMS, SKETCH_AGENT, STALL_STARTS, SUBGRAPH_AGENT, HarlEnv, HarlEnvConfig
from hiertune.envs.schedule_space import SpaceConfig
from hiertune.errors import HiertuneError
from hiertune.platform.records import MeasureRecord, RecordStore, trace_key, tuning_record_json
from hiertune.platform.runners import MeasureInput, MeasureResult, RunnerConfig
from hiertune.policies.bandits import BanditConfig, Bandits
from hiertune.policies.candidates import (
    CROSS_SOURCES,
    CandidateConfig,
    Pair,
    decision_distance,
    select_candidates,
    spread_over_sketches,
)
from hiertune.policies.cost_model import BUILTIN_PRIOR, CostModelConfig
from hiertune.policies.ppo_editor import (SKETCH_MODULE, SUBGRAPH_MODULE, TRACK_POLICIES, PPOEditorConfig,
                                          TrackEpisode, agent_to_module)
from hiertune.workloads import Workload

TUNER = "harl"
ELITE_POOL = 32  # best measured states kept per task and sketch as track starts
TRANSPLANT_TRIES = 8  # best measured states tried per cross-sketch transplant slot
SIBLING_SOURCES = 2  # best measured states per other task offered to `candidates.sibling_slots`
TRANSFERS_KEPT = 256  # transferred states remembered (a replay each), least recently used dropped


@dataclass
class HarlConfig:
    """Everything a HARL run is configured by, in one place: the budget and one section per part."""

    trials: int = 64
    """Measured trials in total, those already in the records included."""
    seed: int = 0
    """Seed of the schedule spaces, the PPO editor and the candidate choice."""
    bandit: BanditConfig = field(default_factory=BanditConfig)
    """Task and sketch selection (SW-UCB)."""
    episode: HarlEnvConfig = field(default_factory=HarlEnvConfig)
    """One round's tracks, their starts and adaptive stopping."""
    ppo: PPOEditorConfig = field(default_factory=PPOEditorConfig)
    """The PPO actor-critic that edits the tracks."""
    space: SpaceConfig = field(default_factory=SpaceConfig)
    """The schedule space and its edit actions."""
    cost_model: CostModelConfig = field(default_factory=lambda: CostModelConfig(prior=BUILTIN_PRIOR))
    """The XGBoost cost model that scores schedules; HARL starts it from the shipped prior
    (`--ablation no-prior`: untrained, as the paper's)."""
    candidates: CandidateConfig = field(default_factory=CandidateConfig)
    """Which schedules of a round are measured."""

    def validate(self) -> None:
        """One clear error naming the setting (its flag where it has one) and its range."""
        b, e, c = self.bandit, self.episode, self.candidates
        checks = [
            ("--trials", self.trials, self.trials >= 1, ">= 1"),
            ("--c", b.c, b.c >= 0, ">= 0"),
            ("--tau", b.tau, b.tau >= 1, ">= 1"),
            ("--lambda", e.lam, e.lam >= 1, ">= 1"),
            ("--rho", e.rho, 0 <= e.rho < 1, "in [0, 1)"),
            ("--tracks", e.tracks, e.tracks >= 1, ">= 1"),
            ("--topk", c.topk, c.topk >= 1, ">= 1"),
            ("episode.min_tracks", e.min_tracks, 1 <= e.min_tracks <= e.tracks, f"in 1..tracks ({e.tracks})"),
            ("episode.max_steps", e.max_steps, e.max_steps >= 1, ">= 1"),
            ("episode.elite_fraction", e.elite_fraction, 0 <= e.elite_fraction <= 1, "in [0, 1]"),
            ("episode.elite_fraction_late", e.elite_fraction_late,
             e.elite_fraction_late is None or 0 <= e.elite_fraction_late <= 1, "in [0, 1] or null"),
            ("episode.start_pool", e.start_pool, e.start_pool >= 1, ">= 1"),
            ("episode.elite_other_sketches", e.elite_other_sketches, e.elite_other_sketches >= 0, ">= 0"),
            ("episode.spread_rounds", e.spread_rounds, e.spread_rounds >= 0, ">= 0"),
            ("episode.stall_rounds", e.stall_rounds, e.stall_rounds >= 0, ">= 0"),
            ("episode.stall_starts", e.stall_starts, e.stall_starts in STALL_STARTS, " or ".join(STALL_STARTS)),
            ("bandit.sketch_search_rounds", b.sketch_search_rounds, b.sketch_search_rounds >= 0, ">= 0"),
            ("bandit.warmup_trials", b.warmup_trials, b.warmup_trials >= 0, ">= 0"),
            ("bandit.warmup_fills", b.warmup_fills, b.warmup_fills >= 0, ">= 0"),
            ("bandit.warmup_pool", b.warmup_pool, b.warmup_pool >= 0, ">= 0"),
            ("candidates.epsilon", c.epsilon, 0 <= c.epsilon <= 1, "in [0, 1]"),
            ("ppo.track_policy", self.ppo.track_policy, self.ppo.track_policy in TRACK_POLICIES,
             f"one of {', '.join(TRACK_POLICIES)}"),
            ("candidates.cross_sketch", c.cross_sketch, 0 <= c.cross_sketch < c.topk, f"in 0..topk - 1 ({c.topk - 1})"),
            ("candidates.min_distance", c.min_distance, c.min_distance >= 1, ">= 1"),
            ("candidates.sibling_slots", c.sibling_slots, 0 <= c.sibling_slots < c.topk, f"in 0..topk - 1 ({c.topk - 1})"),
            ("space.pad_multiple", self.space.pad_multiple, self.space.pad_multiple >= 0, ">= 0 (0 or 1: no padded sketches)"),
            ("candidates.cross_source", c.cross_source, c.cross_source in CROSS_SOURCES, f"one of {', '.join(CROSS_SOURCES)}"),
        ]
        for name, value, ok, rule in checks:
            if not ok:
                raise HiertuneError(f"{name} {value} is out of range: it must be {rule}")


# `--ablation NAME`: the paper's algorithm and single parts switched off, as config changes.
ABLATIONS: dict[str, dict[str, Any]] = {
    "fixed-length": {"episode.fixed_length": True},
    "no-subgraph-bandit": {"bandit.subgraph_bandit": False},
    "no-sketch-warmup": {"bandit.sketch_warmup": False},
    "no-sketch-renormalise": {"bandit.sketch_renormalise": False},
    "no-whole-moves": {"space.whole_tile_moves": False},
    "random-starts": {"episode.elite_fraction": 0.0, "episode.start_pool": 1},
    "no-epsilon": {"candidates.epsilon": 0.0},
    "uniform-edits": {"ppo.track_policy": "uniform"},
    "no-prior": {"cost_model.prior": None},
    "no-sibling-transfer": {"candidates.sibling_slots": 0},
    "no-padding": {"space.pad_multiple": 0},
    # the seed paper's search: random-fill starts, one prime factor per tile edit, greedy top-K,
    # one sketch per bandit step, rewards as earned, each task searched on its own, in
    # MetaSchedule's sketches only
    "paper": {"episode.elite_fraction": 0.0, "episode.start_pool": 1, "space.whole_tile_moves": False,
              "candidates.epsilon": 0.0, "bandit.sketch_warmup": False, "bandit.sketch_renormalise": False,
              "cost_model.prior": None, "candidates.sibling_slots": 0, "space.pad_multiple": 0},
}


class Runner(Protocol):
    """What the search needs of a runner (local actor, pool, cluster): results in input order,
    failures as values (`MeasureResult.error`), never raised."""

    config: RunnerConfig  # its `timing` binds the records file

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]: ...


@dataclass
class Candidate:
    """One schedule proposed for measurement."""

    task: int
    state: Any
    key: str  # trace key: the schedule's identity in the records

    def measure_input(self) -> MeasureInput:
        return MeasureInput(mod=self.state.mod, args_info=self.state.args_info)


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


class HarlSearch:
    """Holds the pieces of a HARL run; `propose`/`observe` are one round, `run()` is the loop."""

    def __init__(self, workload: Workload, target: Any, runner: Runner | None, store: RecordStore,
                 config: HarlConfig) -> None:
        from hiertune.envs.schedule_space import ScheduleSpace
        from hiertune.policies.cost_model import CostModel
        from hiertune.policies.ppo_editor import PPOEditor

        config.validate()
        self.workload, self.target, self.runner, self.store, self.config = workload, target, runner, store, config
        self.tasks = workload.tasks
        if len(self.tasks) > MAX_ARMS:
            raise HiertuneError(f"workload {workload.name} has {len(self.tasks)} tasks; HARL's bandit takes at most "
                                f"{MAX_ARMS}: tune it in parts (--model on a sub-model) or raise envs.harl_env.MAX_ARMS")
        if runner is not None:
            store.expect_timing(runner.config.timing)
        for task in self.tasks:
            store.add_workload(task.name, task.mod, task.weight)
        self.spaces = [ScheduleSpace(task.mod, target, seed=config.seed + i, config=config.space)
                       for i, task in enumerate(self.tasks)]
        self.cost_model = CostModel(config.cost_model, target.kind.name)  # one model for all tasks (each task its own label group)
        space = self.spaces[0]
        self.editor = PPOEditor(space.obs_dim, space.action_dim, config.ppo, config.bandit, seed=config.seed)
        self.bandits = Bandits([(t.name, t.weight, t.flops) for t in self.tasks],
                               [s.num_sketches for s in self.spaces], config.bandit)
        self.env = HarlEnv(self.spaces, self._score, self.editor.values, self.bandits, config.episode,
                           gamma=config.ppo.gamma, seed=config.seed, elite_fn=self._elites, spread_fn=self._spreads,
                           fresh_fn=self._fresh_starts)
        self.measured: list[set[str]] = [set() for _ in self.tasks]
        # (latency, state) per task and sketch, best first
        self.best_states: list[dict[int, list[tuple[float, Any]]]] = [{} for _ in self.tasks]
        self.rounds: list[RoundLog] = []
        self.rng = np.random.default_rng(config.seed)
        self.exhausted = False  # every sketch of every task ran out of unmeasured schedules
        self.searched_sketch: int | None = None  # the sketch this round's tracks searched (None: warm-up)
        self.spread_done = [0] * len(self.tasks)  # spread rounds (`episode.spread_rounds`) played per task
        self.spread_round = False  # this round's tracks covered every sketch of its task
        self.stalled = [0] * len(self.tasks)  # searched rounds in a row without a new best, per task
        self.explore_round = False  # this round is a stalled task's exploration round (`episode.stall_rounds`)
        self.round_transfers: set[str] = set()  # keys of this round's sibling transfers (`sibling_slots`)
        self._transfers: OrderedDict[tuple[int, int, tuple], Any] = OrderedDict()  # (to, from, state key) -> state | None
        self._resume()

    # ------------------------------------------------------------------ the strategy's two phases
    def propose(self, k: int) -> list[Candidate]:
        """Play one round of the hierarchy, let PPO learn from it, and return up to `k` schedules
        to measure (MetaSchedule's `generate_measure_candidates`)."""
        self.env.elite_fraction = self.config.episode.elite_share(self.trials_done() / self.config.trials)
        episode = self._play_episode()
        if episode is not None:
            self.editor.update([episode])
        task = self.env.task
        warmup = self.bandits.wants_warmup(task, len(self.measured[task]))
        self.explore_round = not warmup and self._explores(task)
        self.spread_round = not warmup and self._spreads(task)
        self.searched_sketch = None if warmup or self.spread_round else int(self.env.sketch)
        if warmup:
            pairs = self._warmup_pairs(task, k)
        elif self.spread_round:
            pairs = self._spread_pairs(task, k)
        else:
            pairs = select_candidates(
                [v.state for v in self.env.top_visited()], k, self.measured[task], self.rng,
                key=lambda state: trace_key(state.trace), epsilon=self.config.candidates.epsilon,
                cross=self.config.candidates.cross_sketch if self.spaces[task].num_sketches > 1 else 0,
                cross_fills=lambda n, seen: self._other_sketch_fills(task, n, seen),
                random_fill=lambda: self.spaces[task].random_state(self.env.sketch, self.rng),
                distance=decision_distance, min_distance=self.config.candidates.min_distance,
            )
        pairs = self._with_sibling_transfers(task, pairs, k)
        return [Candidate(task, state, key) for state, key in pairs]

    def observe(self, candidates: list[Candidate], results: list[MeasureResult]) -> None:
        """Record the measurements, retrain the cost model, reward the bandits
        (MetaSchedule's `notify_runner_results`). An empty round retires its sketch."""
        task, sketch = self.env.task, self.env.sketch
        round_id = self.trials_done() + 1  # the round's first trial: groups its records on resume
        best_before = self.bandits.best(task)
        for candidate, result in zip(candidates, results):
            self.store.append(self._record(candidate, result, round_id))
            self.measured[candidate.task].add(candidate.key)
            self._keep_best(candidate.task, candidate.state, result.mean_s)
        self.cost_model.update([c.state for c in candidates], [r.mean_s for r in results])
        self.bandits.observe_round(task, [r.mean_s for r in results], [int(c.state.sketch) for c in candidates],
                                   searched=self.searched_sketch)
        if candidates:  # an empty round leaves no records to resume from, so it does not count
            self._count_stall(task, best_before, searched=self.searched_sketch is not None or self.spread_round,
                              explored=self.explore_round)
        self.spread_done[task] += self.spread_round and not self.explore_round
        if not candidates:  # nothing new left in this sketch: take it (and maybe the task) out of play
            self.exhausted = self.bandits.retire(task, sketch)

    def run(self, on_round: Callable[[RoundLog], None] | None = None) -> HarlResult:
        """Propose, measure, observe, until the budget is spent (or nothing is left to measure)."""
        if self.runner is None:
            raise HiertuneError("HarlSearch.run needs a runner; this search was built without one")
        start_trials = self.trials_done()
        search_s = measure_s = 0.0
        while self.trials_done() < self.config.trials and not self.exhausted:
            t0 = time.perf_counter()
            candidates = self.propose(min(self.config.candidates.topk, self.config.trials - self.trials_done()))
            inputs = [c.measure_input() for c in candidates]
            t1 = time.perf_counter()
            results = self.runner.measure(inputs) if inputs else []
            t2 = time.perf_counter()
            self.observe(candidates, results)
            t3 = time.perf_counter()
            round_search, round_measure = (t1 - t0) + (t3 - t2), t2 - t1
            search_s += round_search
            measure_s += round_measure
            log = RoundLog(
                round=len(self.rounds) + 1, task=self.tasks[self.env.task].name, sketch=self.env.sketch,
                trials=self.trials_done(), measured=len(results), best_s=self.bandits.best(self.env.task),
                weighted_s=self.bandits.weighted_latency(), steps=self.env.track_steps,
                stopped_at=dict(self.env.stopped_at), search_s=round_search, measure_s=round_measure,
            )
            self.rounds.append(log)
            if on_round is not None:
                on_round(log)
        return HarlResult(
            rounds=self.rounds, trials=self.trials_done(), new_trials=self.trials_done() - start_trials,
            search_s=search_s, measure_s=measure_s,
            best_s={t.name: self.bandits.best(n) for n, t in enumerate(self.tasks)},
            task_trials={t.name: len(self.store.trials(t.name, tuner=TUNER)) for t in self.tasks},
            exhausted=self.exhausted,
        )

    def trials_done(self) -> int:
        return len(self.store.trials(tuner=TUNER))

    # ------------------------------------------------------------------ pieces
    def _score(self, task: int, states: list[Any]) -> np.ndarray:
        return np.asarray(self.cost_model.predict(states), dtype=np.float64)

    def _resume(self) -> None:
        """Continue a records file: skip what it holds, retrain on it, replay the bandits' rounds.

        Consecutive records of one task and round id were one round, so replaying them in order
        rebuilds the task progress and both bandits' windows.
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
            group, n = list(group), index[task_name]
            extra = group[0].extra
            best_before = self.bandits.best(n)
            self.bandits.observe_round(n, [r.mean_s for r in group], [r.extra.get("sketch") for r in group],
                                       searched=extra.get("searched"))
            spread, explored = bool(extra.get("spread")), bool(extra.get("explore"))
            self._count_stall(n, best_before, searched=extra.get("searched") is not None or spread, explored=explored)
            self.spread_done[n] += spread and not explored
        if states:
            self.cost_model.update(states, latencies)

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
        n = self.config.episode.elite_other_sketches
        others = [state for s, pool in sorted(self.best_states[task].items()) if s != sketch for _, state in pool[:n]]
        return others + own

    def _spreads(self, task: int) -> bool:
        """Does this round of `task` spread its tracks over all its sketches (one of its first
        `episode.spread_rounds`, or an exploration round)?"""
        return (self.spaces[task].num_sketches > 1 and bool(self.measured[task])
                and (self.spread_done[task] < self.config.episode.spread_rounds or self._explores(task)))

    def _explores(self, task: int) -> bool:
        """Is this round of `task` an exploration round: its best stalled for `episode.stall_rounds`
        searched rounds, so every track starts from a random fill?"""
        stall = self.config.episode.stall_rounds
        return stall > 0 and bool(self.measured[task]) and self.stalled[task] >= stall

    def _fresh_starts(self, task: int) -> bool:
        """Does every track of this round of `task` start from a random fill (an exploration
        round with `episode.stall_starts` "fills")?"""
        return self._explores(task) and self.config.episode.stall_starts == "fills"

    def _count_stall(self, task: int, best_before: float, *, searched: bool, explored: bool) -> None:
        """Count a searched round that did not improve the task's best; an improvement or an
        exploration round starts the count again, a warm-up batch leaves it be."""
        if explored or self.bandits.best(task) < best_before:
            self.stalled[task] = 0
        elif searched:
            self.stalled[task] += 1

    def _record(self, candidate: Candidate, result: MeasureResult, round_id: int) -> MeasureRecord:
        latencies = result.latencies_s if result.ok else None
        record = self.spaces[candidate.task].tuning_record(candidate.state, latencies or [1e10])
        return MeasureRecord(
            task=self.tasks[candidate.task].name, key=candidate.key, record=tuning_record_json(record),
            latencies_s=latencies,
            error=None if result.ok else (result.error or "failed"), build_s=result.build_s, run_s=result.run_s,
            time=time.time(), tuner=TUNER, trial=self.trials_done() + 1,
            extra={"sketch": int(candidate.state.sketch), "round": round_id, "searched": self.searched_sketch,
                   **({"spread": True} if self.spread_round else {}),
                   **({"transfer": True} if candidate.key in self.round_transfers else {}),
                   **({"explore": True} if self.explore_round else {})},
        )

    def _play_episode(self) -> Any:
        """One round of the hierarchy; returns the tracks' TrackEpisode for PPO, or None for a
        warm-up round: its batch is random fills, so its tracks would never be measured, and in a
        task's first round the untrained cost model's hash scores would teach PPO noise."""
        forced = self.bandits.forced_task(len(self.rounds))
        obs, _ = self.env.reset(options=None if forced is None else {"task": forced})
        episode = TrackEpisode(agent_to_module_mapping_fn=agent_to_module)
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
                if self.bandits.wants_warmup(self.env.task, len(self.measured[self.env.task])):
                    return None
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

    def _ranked(self, task: int, pairs: list[Pair]) -> list[Pair]:
        """(state, key) pairs of `task`, best predicted first (ties in the given order)."""
        order = np.argsort(-np.asarray(self._score(task, [state for state, _ in pairs])), kind="stable")
        return [pairs[i] for i in order]

    def _ranked_fills(self, task: int, sketch: int, count: int) -> list[Pair]:
        """`count` random fills of a sketch with their trace keys, best predicted first."""
        fills = [self.spaces[task].random_state(sketch, self.rng) for _ in range(count)]
        return self._ranked(task, [(fill, trace_key(fill.trace)) for fill in fills])

    def _other_sketch_fills(self, task: int, n: int, seen: set[str]) -> list[Pair]:
        """n schedules of the task's other sketches, round-robin over them: each the transplant of
        the task's best measured schedule not yet tried there (`cross_source` transplant), else
        the best-predicted random fill."""
        others = [s for s in range(self.spaces[task].num_sketches) if s != self.env.sketch]
        chosen: list[Pair] = []
        for i in range(n if others else 0):
            sketch = others[(len(self.rounds) + i) % len(others)]
            pair = self._transplant(task, sketch, seen) if self.config.candidates.cross_source == "transplant" else None
            if pair is None:
                ranked = self._ranked_fills(task, sketch, 4 * self.config.episode.start_pool)
                pair = next((pair for pair in ranked if pair[1] not in seen), None)
            if pair is not None:
                seen.add(pair[1])
                chosen.append(pair)
        return chosen

    def _transplant(self, task: int, sketch: int, seen: set[str]) -> Pair | None:
        """The first of the task's best measured schedules of other sketches (best first, the first
        `TRANSPLANT_TRIES`: each is a replay) whose transplant into `sketch` is new, with its key;
        None when none is."""
        pools = [pair for s, pool in self.best_states[task].items() if s != sketch for pair in pool]
        for _, state in sorted(pools, key=lambda pair: pair[0])[:TRANSPLANT_TRIES]:
            moved = self.spaces[task].transplant(state, sketch)
            key = None if moved is None else trace_key(moved.trace)
            if key is not None and key not in seen:
                return moved, key
        return None

    def _with_sibling_transfers(self, task: int, pairs: list[Pair], k: int) -> list[Pair]:
        """The round's batch with its last `candidates.sibling_slots` given to the best-predicted
        transfers of the other tasks' best schedules (`ScheduleSpace.transfer`) not yet measured here;
        the batch as it was where the run has one task or no transfer is new."""
        n = min(self.config.candidates.sibling_slots, k)
        self.round_transfers = set()
        if not n or len(self.tasks) == 1:
            return pairs
        kept = pairs[: k - n]
        seen = self.measured[task] | {key for _, key in kept}
        offered: dict[str, Any] = {}
        for other, pools in enumerate(self.best_states):
            if other == task:
                continue
            for _, state in sorted((pair for pool in pools.values() for pair in pool), key=lambda pair: pair[0])[:SIBLING_SOURCES]:
                moved = self._transfer(task, other, state)
                if moved is not None and moved[1] not in seen:
                    offered[moved[1]] = moved[0]
        if not offered:
            return pairs
        chosen = self._ranked(task, [(state, key) for key, state in offered.items()])[:n]
        self.round_transfers = {key for _, key in chosen}
        return kept + chosen + [pair for pair in pairs[k - n:] if pair[1] not in self.round_transfers][: n - len(chosen)]

    def _transfer(self, task: int, other: int, state: Any) -> Pair | None:
        """`other`'s measured `state` replayed in `task` with its key (None: no sketch fits), remembered."""
        memo = (task, other, state.key)
        if memo in self._transfers:
            self._transfers.move_to_end(memo)
            return self._transfers[memo]
        moved = self.spaces[task].transfer(state)
        pair = None if moved is None else (moved, trace_key(moved.trace))
        self._transfers[memo] = pair
        if len(self._transfers) > TRANSFERS_KEPT:
            self._transfers.popitem(last=False)
        return pair

    def _spread_pairs(self, task: int, k: int) -> list[Pair]:
        """A spread round's batch: the same share of slots for every sketch, each its best predicted.

        A top-K over the whole round goes to whichever sketch the young cost model favours, which
        is mostly the one the bandit would have picked anyway; equal shares let the bandit compare
        every sketch at the same refinement. The sketch with the best prediction leads the order,
        so it takes the slots that do not divide evenly.
        """
        pools: dict[int, list[Pair]] = {}
        for visited in self.env.top_visited():  # best predicted first, so each pool is ranked
            pools.setdefault(int(visited.state.sketch), []).append((visited.state, trace_key(visited.state.trace)))
        return spread_over_sketches(list(pools.values()), k, self.measured[task])

    def _warmup_pairs(self, task: int, k: int) -> list[Pair]:
        """A warm-up batch: a task's first batch spread over all its sketches in order; a later one
        (`bandit.warmup_fills`) only the fills its sketches still lack, the sketches with the fewest
        measured first."""
        missing = self.bandits.missing_fills(task)
        if not self.measured[task] or not any(missing):
            n = -(-k // self.spaces[task].num_sketches)
            pools = [self._warmup_fills(task, sketch, n) for sketch in range(len(missing))]
            return spread_over_sketches(pools, k, self.measured[task])
        order = sorted((s for s, lack in enumerate(missing) if lack), key=lambda s: -missing[s])  # fewest fills first
        pools = [[pair for pair in self._warmup_fills(task, s, missing[s])
                  if pair[1] not in self.measured[task]][: missing[s]] for s in order]
        return spread_over_sketches(pools, k, self.measured[task])

    def _warmup_fills(self, task: int, sketch: int, n: int) -> list[Pair]:
        """A sketch's warm-up fills, best first: the first the best-predicted of
        `bandit.warmup_pool` fills (0: like the rest), the rest the best-predicted n - 1 of
        (n - 1) * `episode.start_pool`, so one deep screen per sketch beside the broad ones."""
        start_pool, deep = self.config.episode.start_pool, self.config.bandit.warmup_pool
        if not deep:
            return self._ranked_fills(task, sketch, n * start_pool)
        return self._ranked_fills(task, sketch, deep)[:1] + self._ranked_fills(task, sketch, (n - 1) * start_pool)
