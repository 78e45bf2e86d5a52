"""SW-UCB: the RLModule picks arms by the formula, the window forgets, the rewards are Ansor's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hiertune.envs.harl_env import bandit_action_space, bandit_observation_space
from hiertune.policies.bandits import SlidingWindow, TaskProgress, sketch_reward, subgraph_rewards, task_gradient
from hiertune.policies.sw_ucb import SWUCBModule


def build_module(c: float, tau: int) -> SWUCBModule:
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    return RLModuleSpec(
        module_class=SWUCBModule, observation_space=bandit_observation_space(),
        action_space=bandit_action_space(), model_config={"c": c, "tau": tau},
    ).build()


def choose(module: SWUCBModule, window: SlidingWindow) -> int:
    return int(module.forward_inference({"obs": window.observation()})["actions"][0])


def reference_choice(pulls: list[tuple[int, float]], t: int, n_arms: int, c: float, tau: int) -> int:
    """The formula written out by hand over the last tau pulls."""
    window = pulls[-tau:]
    best_arm, best_score = None, -math.inf
    for arm in range(n_arms):
        rewards = [r for a, r in window if a == arm]
        if not rewards:
            return arm  # unchosen arms first, lowest index first
        score = sum(rewards) / len(rewards) + c * math.sqrt(math.log(min(max(t, 1), tau)) / len(rewards))
        if score > best_score:
            best_arm, best_score = arm, score
    return best_arm


def test_module_is_parameter_free_and_follows_the_formula() -> None:
    c, tau, n_arms = 0.25, 6, 3
    module = build_module(c, tau)
    assert not list(module.parameters())
    window = SlidingWindow(n_arms, tau)
    pulls: list[tuple[int, float]] = []
    rng = np.random.default_rng(0)
    chosen = []
    for step in range(40):
        arm = choose(module, window)
        assert arm == reference_choice(pulls, window.t, n_arms, c, tau), f"step {step}"
        # arm 1 pays first; from step 20 on arm 2 pays and arm 1 does not
        good = 1 if step < 20 else 2
        reward = float(np.clip((0.9 if arm == good else 0.2) + rng.normal(0, 0.05), 0, 1))
        window.record(arm, reward)
        pulls.append((arm, reward))
        chosen.append(arm)
    assert chosen[:3] == [0, 1, 2]  # every arm once first
    assert chosen[10:20].count(1) >= 6  # exploits the good arm
    assert chosen[30:40].count(2) >= 6  # and follows the switch


def test_window_forgets_old_rewards() -> None:
    """An arm's reward older than tau pulls no longer counts: it becomes unchosen again."""
    tau = 4
    module = build_module(0.25, tau)
    window = SlidingWindow(2, tau)
    window.record(0, 0.0)
    window.record(1, 1.0)
    for _ in range(tau - 1):
        assert choose(module, window) == 1
        window.record(1, 1.0)
    _, counts = window.stats()
    assert counts.tolist() == [0.0, 4.0]  # arm 0's pull fell out of the window
    assert choose(module, window) == 0  # so it is tried again despite arm 1's perfect record
    # without forgetting (a window longer than the history) arm 1 keeps winning
    long_window = SlidingWindow(2, 100)
    long_window.record(0, 0.0)
    for _ in range(tau):
        long_window.record(1, 1.0)
    assert choose(build_module(0.25, 100), long_window) == 1


def test_absent_arms_are_never_chosen_and_window_checks_arms() -> None:
    module = build_module(0.25, 8)
    window = SlidingWindow(2, 8)
    for arm in (0, 1, 0, 1):
        window.record(arm, 0.1)
    assert choose(module, window) in (0, 1)
    with pytest.raises(ValueError):
        window.record(2, 1.0)


def test_subgraph_reward_prefers_the_task_that_still_improves() -> None:
    improving = TaskProgress(weight=1, flops=1e9, group="GMM")
    flat = TaskProgress(weight=1, flops=1e9, group="GMM")
    unmeasured = TaskProgress(weight=3, flops=1e9, group="C2D")
    for best in (4e-3, 3e-3, 2e-3, 1e-3):
        improving.add_round(best, 8)
    for _ in range(4):
        flat.add_round(1e-3, 8)
    tasks = [improving, flat, unmeasured]
    assert task_gradient(tasks, 0) < task_gradient(tasks, 1) < 0
    rewards = subgraph_rewards(tasks)
    assert rewards[0] == 1.0 and 0 < rewards[1] < 1 and rewards[2] == 0.0
    # weight scales the benefit: the flat history with weight 20 wins
    heavy = TaskProgress(weight=20, flops=1e9, group="GMM", history=list(flat.history), trials=flat.trials)
    assert subgraph_rewards([improving, heavy])[1] == 1.0


def test_sketch_reward_is_normalised_best() -> None:
    assert sketch_reward(1e-3, 1e-3) == 1.0
    assert sketch_reward(2e-3, 1e-3) == pytest.approx(0.5)
    assert sketch_reward(0.5e-3, 1e-3) == 1.0
    assert sketch_reward(math.inf, 1e-3) == 0.0
    assert sketch_reward(1e-3, math.inf) == 1.0


def test_disabled_arms_leave_play() -> None:
    """A task or sketch with nothing left to measure is never chosen again."""
    module = build_module(0.25, 8)
    window = SlidingWindow(3, 8)
    window.disable(0)
    assert choose(module, window) == 1  # arm 0 is unchosen but out of play
    window.disable(1)
    assert choose(module, window) == 2 and not window.exhausted
    window.disable(2)
    assert window.exhausted


def test_task_without_flops_has_a_finite_gradient() -> None:
    reshape = TaskProgress(weight=1, flops=0.0, group="reshape")
    reshape.add_round(1e-5, 4)
    assert math.isfinite(task_gradient([reshape], 0)) and task_gradient([reshape], 0) < 0


def test_a_network_with_more_than_64_tasks_fits_the_bandit() -> None:
    """MobileNetV2 has 68 tasks: every one must be reachable, the last one included."""
    n_tasks = 68
    module = build_module(0.25, 256)
    window = SlidingWindow(n_tasks, 256)
    chosen = []
    for _ in range(n_tasks):
        arm = choose(module, window)
        chosen.append(arm)
        window.record(arm, 0.5)
    assert chosen == list(range(n_tasks))  # each unplayed arm once, in order, up to the 68th
