"""Rewards of HARL's two bandits, computed from measured latencies after each round.

* Subgraph bandit: Ansor's gradient estimate of how much the weighted end-to-end latency
  sum_n w_n g_n would drop if task n got more trials,

      dF/dt_n ~ w_n * (alpha * (g_n(t) - g_n(t - dt)) / dt
                       + (1 - alpha) * min(-g_n(t) / t_n, beta * C_n / max_k V_k - g_n(t)))

  (backward improvement over the last `dt` rounds, plus the forward term from the FLOP-based
  optimum of similar tasks k, V_k = best FLOP/s of k). The reward is -dF/dt_n normalised by the
  largest such benefit over all measured tasks, so it lies in [0, 1].
* Sketch bandit: the best throughput this round's sketch reached, over the task's best so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALPHA = 0.2  # Ansor's weight of the backward term
BETA = 2.0  # Ansor's optimism on similar tasks' throughput
BACKWARD_WINDOW = 3  # rounds of history in the backward term


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
