"""Sliding-window UCB (SW-UCB) for HARL's subgraph and sketch levels.

RLlib 2.60 has no bandit algorithms, so SW-UCB is a parameter-free `RLModule`: its `_forward`
computes the UCB scores from an observation that carries each arm's windowed mean reward and
count. The window itself (`SlidingWindow`) lives with the environment, which is the one that
sees the rewards; this keeps the module stateless, so RLlib's weight syncs cannot clobber it.

    score(a) = Q_t(tau, a) + c * sqrt(log(min(t, tau)) / N_t(tau, a))

with Q and N the mean reward and the count of arm `a` over the last `tau` pulls. Arms never
chosen in the window come first (lowest index first), which is UCB's infinite bonus.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule

# Fixed arm capacity of the observation/action spaces; a workload uses the first n arms.
MAX_ARMS = 64


@dataclass
class SWUCBConfig:
    """Exploration weight `c` and window length `tau` (paper: c = 0.25, tau = 256)."""

    c: float = 0.25
    tau: int = 256


def bandit_observation_space(max_arms: int = MAX_ARMS) -> gym.spaces.Dict:
    """Windowed means, counts, which arms exist, and the pull count t."""
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


def ucb_scores(obs: dict[str, torch.Tensor], c: float, tau: int) -> torch.Tensor:
    """SW-UCB score per arm, batched: [B, A]; unchosen arms +inf, absent arms -inf."""
    means, counts, valid = obs["means"], obs["counts"], obs["valid"]
    t = obs["t"].reshape(-1, 1).clamp(min=1.0)
    horizon = torch.minimum(t, torch.full_like(t, float(tau)))
    bonus = c * torch.sqrt(torch.log(horizon) / counts.clamp(min=1.0))
    scores = torch.where(counts > 0, means + bonus, torch.full_like(means, math.inf))
    return torch.where(valid > 0, scores, torch.full_like(means, -math.inf))


class SWUCBModule(TorchRLModule):
    """Parameter-free SW-UCB arm choice; `model_config` holds `c` and `tau`.

    Never trained: list it outside `policies_to_train`. It returns actions directly (greedy in
    the UCB score, the first unchosen arm on ties of +inf), so RLlib does not sample from it.
    """

    def setup(self) -> None:
        config = self.model_config or {}
        self.c = float(config.get("c", SWUCBConfig.c))
        self.tau = int(config.get("tau", SWUCBConfig.tau))

    def _forward(self, batch: dict, **kwargs) -> dict:
        obs = {key: torch.as_tensor(value, dtype=torch.float32) for key, value in batch[Columns.OBS].items()}
        if obs["means"].dim() == 1:
            obs = {key: value.unsqueeze(0) for key, value in obs.items()}
        scores = ucb_scores(obs, self.c, self.tau)
        return {Columns.ACTIONS: torch.argmax(scores, dim=-1), "ucb_scores": scores}

    def _forward_train(self, batch: dict, **kwargs) -> dict:
        raise NotImplementedError("SW-UCB has no parameters: keep it out of policies_to_train")

    def get_state(self, *args, **kwargs) -> dict:
        return {}

    def set_state(self, state: dict) -> None:
        """Weight syncs carry nothing for a parameter-free module; ignore them."""
