"""HARL's two bandit levels in one place: the sliding windows SW-UCB scores from, the rewards
that go into them after each round's measurements, their rescaling, and the no-bandit ablation.

* Subgraph bandit (which task to tune): reward = Ansor's gradient estimate of how much the
  weighted end-to-end latency sum_n w_n g_n would drop if task n got more trials,

      dF/dt_n ~ w_n * (alpha * (g_n(t) - g_n(t - dt)) / dt
                       + (1 - alpha) * min(-g_n(t) / t_n, beta * C_n / max_k V_k - g_n(t)))

  (backward improvement over the last `dt` rounds, plus the forward term from the FLOP-based
  optimum of similar tasks k, V_k = best FLOP/s of k), normalised by the largest such benefit
  over all measured tasks, so it lies in [0, 1].
* Sketch bandit (which sketch of the task): reward = the task's best latency over the best this
  round's sketch reached. With `renormalise`, every reward of a task's window is rescaled when
  the task's best improves, so a sketch's first (random) round keeps no free 1.0.

The SW-UCB *policies* are RLlib modules (`sw_ucb.SWUCBModule`); they are parameter-free and read
the windows through the observations built here, so RLlib's weight syncs cannot clobber them.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from hiertune.envs.harl_env import MAX_ARMS

ALPHA = 0.2  # Ansor's weight of the backward term
BETA = 2.0  # Ansor's optimism on similar tasks' throughput
BACKWARD_WINDOW = 3  # rounds of history in the backward term


@dataclass
class BanditConfig:
    """The two SW-UCB levels: exploration, window, and how rewards are given."""

    c: float = 0.25
    """SW-UCB exploration weight c (paper: 0.25)."""
    tau: int = 256
    """SW-UCB window length tau, in pulls, for both bandits (paper: 256)."""
    subgraph_bandit: bool = True
    """Pick tasks with the subgraph bandit (False: round-robin over the tasks, the ablation)."""
    sketch_warmup: bool = True
    """A task's first batch covers all its sketches in one bandit step, one reward per sketch."""
    warmup_trials: int = 0
    """Every batch of a task is a warm-up batch (random fills spread over its sketches, one
    reward per sketch) until it has this many measured trials, with one sketch or several; 0:
    only the first batch, on tasks with several sketches (`sketch_warmup`). Aimed at the
    commitment to the basin of the first batch's best fill, as a random fill's latency has a
    long tail. On the selection half it gains on some families and loses on others
    (docs/harl.md), so 0 stays the default."""
    warmup_fills: int = 0
    """The warm-up goes on, one batch at a time, until every sketch of the task has this many
    measured fills; each further batch measures only the fills still missing, for the sketches
    with the fewest first. The first batch is always one batch of `CandidateConfig.topk` spread
    over the sketches in order, so a task with more sketches than that (a CPU softmax or layer
    norm has 9 against 8) leaves its last sketch unmeasured, and SW-UCB, which pulls an unpulled
    arm first, then gives that sketch the first searched round for its index alone. 1 closes
    that gap; 2 gives every sketch the 2-3 fills a 3-sketch task's first batch already gives
    each. 0: the first batch alone (tasks with up to topk / N sketches are the same either way)."""
    warmup_pool: int = 0
    """Random fills the cost model scores for the first fill a warm-up batch takes of each sketch,
    the best-predicted measured; its other fills stay the best-predicted of
    `EpisodeConfig.start_pool` each.
    The first fill is the bandit's first look at a sketch, and random fills of one sketch differ
    by orders of magnitude, so a deeper screen by a trained model (a prior) can make that look
    more like the sketch's best, while the broad fills beside it hedge against a model that ranks
    the task's schedules wrongly. 0: no deep screen (docs/harl.md has its A/Bs)."""
    sketch_renormalise: bool = True
    """Rescale a task's sketch rewards whenever its best improves (False: rewards stay as earned)."""
    sketch_search_rounds: int = 0
    """Searched rounds every sketch of a task gets before SW-UCB may pass it over. The warm-up's
    few random fills say little about what search finds in a sketch, so until a sketch has had
    this many rounds of its own it counts as never pulled (0: the warm-up alone decides)."""


class SlidingWindow:
    """The last `tau` (arm, reward) pulls of one bandit: the state SW-UCB scores from.

    `t` counts every pull ever made (the `t` of the formula); only the window's pulls enter
    the means and counts, so an arm whose rewards dried up is forgotten after `tau` pulls.
    """

    def __init__(self, n_arms: int, tau: int, max_arms: int = MAX_ARMS) -> None:
        if not 1 <= n_arms <= max_arms:
            raise ValueError(f"a bandit needs 1..{max_arms} arms, got {n_arms}")
        self.n_arms = n_arms
        self.tau = tau
        self.max_arms = max_arms
        self.t = 0
        self.pulls: deque[tuple[int, float]] = deque(maxlen=tau)
        self.disabled: set[int] = set()

    def disable(self, arm: int) -> None:
        """Take an arm out of play (e.g. a task whose space is exhausted): it is never chosen again."""
        self.disabled.add(arm)

    @property
    def exhausted(self) -> bool:
        return len(self.disabled) >= self.n_arms

    def record(self, arm: int, reward: float, step: bool = True) -> None:
        """One reward for `arm`; `step=False` adds it to the same decision as the last one
        (a batch that tried several arms at once is one step of t)."""
        if not 0 <= arm < self.n_arms:
            raise ValueError(f"arm {arm} out of range 0..{self.n_arms - 1}")
        self.t += int(step)
        self.pulls.append((arm, float(reward)))

    def rescale(self, factor: float) -> None:
        """Multiply every reward in the window (a reward normalised by a moving best moves with it)."""
        self.pulls = deque(((arm, reward * factor) for arm, reward in self.pulls), maxlen=self.tau)

    def stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Windowed (means, counts) per arm; unchosen arms have mean 0 and count 0."""
        sums = np.zeros(self.n_arms)
        counts = np.zeros(self.n_arms)
        for arm, reward in self.pulls:
            sums[arm] += reward
            counts[arm] += 1
        means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
        return means, counts

    def observation(self) -> dict[str, np.ndarray]:
        means, counts = self.stats()
        obs = {
            "means": np.zeros(self.max_arms, np.float32),
            "counts": np.zeros(self.max_arms, np.float32),
            "valid": np.zeros(self.max_arms, np.float32),
            "t": np.array([self.t], np.float32),
        }
        obs["means"][: self.n_arms] = means
        obs["counts"][: self.n_arms] = counts
        obs["valid"][: self.n_arms] = 1.0
        obs["valid"][sorted(self.disabled)] = 0.0
        return obs


@dataclass
class TaskProgress:
    """Best latency of one task after each of its rounds (inf until something ran)."""

    weight: float
    flops: float
    group: str  # tasks of one group count as "similar" for the forward term
    history: list[float] = field(default_factory=list)
    trials: int = 0

    @property
    def best(self) -> float:
        return self.history[-1] if self.history else float("inf")

    def add_round(self, best_latency_s: float, trials: int) -> None:
        self.history.append(min(self.best, best_latency_s))
        self.trials += trials


def task_group(name: str) -> str:
    """Ansor's 'similar tasks': the same operator chain, shapes and numbering stripped.

    `fused_conv2d1_add_relu` and `fused_conv2d_add_relu` -> `conv2d_add_relu`; `C2D:2` -> `C2D`.
    """
    base = name.split(":")[0].removeprefix("fused_")
    words = (re.sub(r"\d+$", "", word) for word in base.split("_"))
    return "_".join(word for word in words if word) or name


def task_gradient(tasks: list[TaskProgress], n: int) -> float:
    """Ansor's dF/dt_n (negative = optimising task n still pays); 0 if it has no finite best."""
    task = tasks[n]
    g_now = task.best
    if not g_now < float("inf"):
        return 0.0
    window = min(BACKWARD_WINDOW, len(task.history) - 1)
    if window > 0 and task.history[-1 - window] < float("inf"):
        backward = (g_now - task.history[-1 - window]) / window
    else:
        backward = 0.0
    similar = [t for t in tasks if t.group == task.group and t.best < float("inf") and t.flops > 0]
    best_speed = max((t.flops / t.best for t in similar), default=task.flops / g_now)
    forward = -g_now / max(task.trials, 1)
    if best_speed > 0:  # tasks without FLOPs (reshapes, copies) have only the first term
        forward = min(forward, BETA * task.flops / best_speed - g_now)
    return task.weight * (ALPHA * backward + (1.0 - ALPHA) * forward)


def subgraph_rewards(tasks: list[TaskProgress]) -> list[float]:
    """Every task's normalised benefit -dF/dt in [0, 1] (1 = the most promising task)."""
    benefits = [max(0.0, -task_gradient(tasks, n)) for n in range(len(tasks))]
    top = max(benefits, default=0.0)
    return [b / top if top > 0 else 0.0 for b in benefits]


def sketch_reward(round_best_s: float, task_best_s: float) -> float:
    """Normalised best performance of this round's sketch: 1 when it set the task's record."""
    if not round_best_s < float("inf"):
        return 0.0
    if not task_best_s < float("inf"):
        return 1.0
    return min(1.0, task_best_s / round_best_s)


class Bandits:
    """Both bandit levels' state: one window over tasks, one per task over its sketches, and the
    tasks' progress their rewards come from. The HARL env observes it (`BanditWindows`)."""

    def __init__(self, tasks: list[tuple[str, float, float]], sketches: list[int], config: BanditConfig) -> None:
        """`tasks`: (name, weight, FLOPs) per task; `sketches`: how many sketches each has."""
        self.config = config
        self.progress = [TaskProgress(float(weight), flops, task_group(name)) for name, weight, flops in tasks]
        self.subgraph_window = SlidingWindow(len(tasks), config.tau)
        self.sketch_windows = [SlidingWindow(n, config.tau) for n in sketches]
        self.searched_rounds = [np.zeros(n, dtype=int) for n in sketches]  # rounds each sketch was the bandit's pick
        self.sketch_trials = [np.zeros(n, dtype=int) for n in sketches]  # measured schedules per sketch, failures too

    # ------------------------------------------------------------------ what the env observes
    def subgraph_observation(self) -> dict[str, np.ndarray]:
        return self.subgraph_window.observation()

    def sketch_observation(self, task: int) -> dict[str, np.ndarray]:
        """The task's sketch window; a sketch short of `sketch_search_rounds` searched rounds
        shows count 0, so SW-UCB picks it first (UCB's bonus for an arm never pulled)."""
        obs = self.sketch_windows[task].observation()
        unsearched = self.searched_rounds[task] < self.config.sketch_search_rounds
        obs["counts"][: len(unsearched)][unsearched] = 0.0
        return obs

    # ------------------------------------------------------------------ the loop's questions
    def forced_task(self, round_index: int) -> int | None:
        """The task this round must tune without the subgraph bandit (round-robin ablation), else None."""
        if self.config.subgraph_bandit:
            return None
        live = [n for n in range(len(self.progress)) if n not in self.subgraph_window.disabled]
        return live[round_index % len(live)]

    def wants_warmup(self, task: int, measured: int) -> bool:
        """Spread this round's random fills over all the task's sketches, given its `measured`
        trials so far (its first batch on several sketches; every batch below `warmup_trials`)?"""
        if measured < self.config.warmup_trials:
            return True
        if not (self.config.sketch_warmup and self.sketch_windows[task].n_arms > 1):
            return False
        return not measured or any(self.missing_fills(task))

    def missing_fills(self, task: int) -> list[int]:
        """Per sketch of `task`, the measured fills it still lacks for `warmup_fills` (0 for a retired sketch)."""
        window = self.sketch_windows[task]
        return [0 if s in window.disabled else max(0, self.config.warmup_fills - int(count))
                for s, count in enumerate(self.sketch_trials[task])]

    def best(self, task: int) -> float:
        return self.progress[task].best

    def weighted_latency(self) -> float:
        """sum_n w_n * best_n: the workload's latency estimate (inf until every task has a result)."""
        return sum(p.weight * p.best for p in self.progress)

    # ------------------------------------------------------------------ after measurement
    def observe_round(self, task: int, latencies: list[float], sketches: list[int | None],
                      searched: int | None = None) -> float:
        """Task progress and both bandits' rewards after a round's measurements; returns the round's best.

        `sketches` holds each latency's sketch (None: an old record without one), so a round that
        measured several sketches (the warm-up round, cross-sketch slots, other sketches' elite
        tracks) gives each sketch its own reward from its own best, in one bandit step.
        `searched` is the sketch the round's tracks searched (None: the warm-up's random fills).
        """
        if searched is not None and 0 <= searched < len(self.searched_rounds[task]):
            self.searched_rounds[task][searched] += 1
        round_best = min(latencies, default=math.inf)
        progress = self.progress[task]
        best_before = progress.best
        progress.add_round(round_best, len(latencies))
        window = self.sketch_windows[task]
        per_sketch: dict[int, float] = {}
        for s, latency in zip(sketches, latencies):
            if s is not None and 0 <= s < window.n_arms:
                self.sketch_trials[task][s] += 1
                per_sketch[s] = min(per_sketch.get(s, math.inf), latency)
        if not per_sketch:
            return round_best
        if self.config.subgraph_bandit:
            self.subgraph_window.record(task, subgraph_rewards(self.progress)[task])
        norm = best_before
        if self.config.sketch_renormalise:
            norm = progress.best
            if math.isfinite(best_before) and norm < best_before:
                window.rescale(norm / best_before)
        for i, (s, best) in enumerate(per_sketch.items()):
            window.record(s, sketch_reward(best, norm), step=i == 0)
        return round_best

    def retire(self, task: int, sketch: int) -> bool:
        """Take a sketch with nothing left to measure out of play (and its task once all are);
        True when no task is left at all."""
        self.sketch_windows[task].disable(sketch)
        if self.sketch_windows[task].exhausted:
            self.subgraph_window.disable(task)
        return self.subgraph_window.exhausted
