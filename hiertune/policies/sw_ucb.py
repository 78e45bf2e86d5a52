"""Sliding-window UCB (SW-UCB) for HARL's subgraph and sketch levels.

RLlib 2.60 has no bandit algorithms, so SW-UCB is a parameter-free `RLModule`: its `_forward`
computes the UCB scores from an observation that carries each arm's windowed mean reward and
count. The windows themselves live in `bandits.Bandits`, which sees the rewards after each
round; this keeps the module stateless, so RLlib's weight syncs cannot clobber it.

    score(a) = Q_t(tau, a) + c * sqrt(log(min(t, tau)) / N_t(tau, a))

with Q and N the mean reward and the count of arm `a` over the last `tau` pulls. Arms never
chosen in the window come first (lowest index first), which is UCB's infinite bonus.
"""

from __future__ import annotations

import math

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule


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
        self.c = float(config["c"])
        self.tau = int(config["tau"])

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
