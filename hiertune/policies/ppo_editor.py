"""The PPO parameter editor: one actor-critic shared by every schedule track, plus the two bandits.

HARL's paper settings: actor lr 3e-4, critic lr 1e-3, discount 0.9, value-loss weight 0.5,
entropy 0.01. RLlib's PPO has one learning rate per module, so `HarlPPOLearner` registers two
Adam optimizers (actor and critic parameters) on the one loss.

The search loop drives PPO itself (no env runners, so no stale synced value head): it acts with
the learner's own `ppo_track` module and hands finished `MultiAgentEpisode`s to
`learner_group.update`. The SW-UCB modules sit in the same `MultiRLModuleSpec` but outside
`policies_to_train`, so RLlib never builds optimizers for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils.torch_utils import FLOAT_MIN

from hiertune.envs.harl_env import (
    SKETCH_AGENT,
    SUBGRAPH_AGENT,
    bandit_action_space,
    bandit_observation_space,
    track_observation_space,
)
from hiertune.policies.bandits import BanditConfig
from hiertune.policies.sw_ucb import SWUCBModule

PPO_MODULE = "ppo_track"
SUBGRAPH_MODULE = "sw_ucb_subgraph"
SKETCH_MODULE = "sw_ucb_sketch"


@dataclass
class PPOEditorConfig:
    """The track editor's PPO (the paper's learning rates, discount and loss weights)."""

    actor_lr: float = 3e-4
    """Adam learning rate of the actor (policy) network."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critic (value) network."""
    gamma: float = 0.9
    """Discount of the track rewards; adaptive stopping discounts its advantages with it too."""
    gae_lambda: float = 0.95
    """GAE lambda of the advantage estimate."""
    vf_loss_coeff: float = 0.5
    """Weight of the value loss in PPO's loss."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus (keeps the edits exploring)."""
    clip_param: float = 0.2
    """PPO's ratio clip."""
    num_epochs: int = 4
    """Passes over each round's episode per update."""
    minibatch_size: int = 128
    """Track steps per minibatch."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    track_policy: str = "ppo"
    """Who picks the tracks' edits: ppo (the actor, the paper's) or uniform (an ablation: each edit
    drawn uniformly from the legal ones, so the tracks are a random walk that only the cost model's
    top-K and adaptive stopping filter; PPO still trains on those steps, so the critic that stops
    tracks learns as before). Measures what the learned policy adds: uniform was worse on the
    selection half, most on convolutions (docs/harl.md)."""


TRACK_POLICIES = ("ppo", "uniform")


class TrackEpisode(MultiAgentEpisode):
    """A MultiAgentEpisode whose agents come in the order they joined.

    RLlib's `agent_ids` is a set of strings, and its learner connectors build the training batch
    by iterating it, so the rows' order (and with it the shuffled minibatches) followed Python's
    per-process string hashing: one seed gave different policies in two processes. The dict's
    key view is still set-like (`|`, `in`, `len`) but ordered.
    """

    @property
    def agent_ids(self) -> Any:  # KeysView: set operations in insertion order
        return self.agent_episodes.keys()


def agent_to_module(agent_id: str, *args: Any, **kwargs: Any) -> str:
    """Track agents share the PPO editor; the two bandit agents have their own SW-UCB module."""
    if agent_id == SUBGRAPH_AGENT:
        return SUBGRAPH_MODULE
    if agent_id == SKETCH_AGENT:
        return SKETCH_MODULE
    return PPO_MODULE


def mask_logits(mask: torch.Tensor) -> torch.Tensor:
    """Logits of an action mask: 0 where an edit is legal, FLOAT_MIN (never drawn) elsewhere."""
    return torch.clamp(torch.log(mask), min=FLOAT_MIN)


class MaskedPPOModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO actor-critic on `observations`, with illegal edits' logits at -inf.

    The networks are built for the inner `observations` space; the Dict space with the mask is
    what the module reports outward (RLlib's action-masking layout).
    """

    def __init__(self, *, observation_space: gym.spaces.Dict, **kwargs: Any) -> None:
        self._with_mask = observation_space
        super().__init__(observation_space=observation_space["observations"], **kwargs)

    def setup(self) -> None:
        super().setup()
        self.observation_space = self._with_mask

    @staticmethod
    def _split(batch: dict) -> tuple[Any, dict]:
        obs = batch[Columns.OBS]
        return obs["action_mask"], {**batch, Columns.OBS: obs["observations"]}

    @staticmethod
    def _mask(out: dict, mask: Any) -> dict:
        out[Columns.ACTION_DIST_INPUTS] = out[Columns.ACTION_DIST_INPUTS] + mask_logits(mask)
        return out

    def _forward_inference(self, batch: dict, **kwargs: Any) -> dict:
        mask, batch = self._split(batch)
        return self._mask(super()._forward_inference(batch, **kwargs), mask)

    def _forward_exploration(self, batch: dict, **kwargs: Any) -> dict:
        mask, batch = self._split(batch)
        return self._mask(super()._forward_exploration(batch, **kwargs), mask)

    def _forward_train(self, batch: dict, **kwargs: Any) -> dict:
        mask, batch = self._split(batch)
        return self._mask(super()._forward_train(batch, **kwargs), mask)

    def compute_values(self, batch: dict, embeddings: Any = None) -> Any:
        if isinstance(batch[Columns.OBS], dict):
            _, batch = self._split(batch)
        return super().compute_values(batch, embeddings)


class HarlPPOLearner(PPOTorchLearner):
    """PPO with separate actor and critic learning rates (one loss, two Adam optimizers)."""

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        module = self._module[module_id]
        if not any(True for _ in module.parameters()):
            return  # the SW-UCB bandits have nothing to optimise
        editor: PPOEditorConfig = config.learner_config_dict["editor"]
        critic, actor = [], []
        for name, param in module.named_parameters():
            (critic if name.startswith(("vf", "encoder.critic_encoder")) else actor).append(param)
        for name, params, lr in (("actor", actor, editor.actor_lr), ("critic", critic, editor.critic_lr)):
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=name,
                optimizer=torch.optim.Adam(params),
                params=params,
                lr_or_lr_schedule=lr,
            )


def module_spec(obs_dim: int, action_dim: int, editor: PPOEditorConfig, bandit: BanditConfig) -> MultiRLModuleSpec:
    """The three RLModules of the hierarchy: masked PPO editor and two parameter-free bandits."""
    bandit_spaces = {"observation_space": bandit_observation_space(), "action_space": bandit_action_space()}
    return MultiRLModuleSpec(
        rl_module_specs={
            PPO_MODULE: RLModuleSpec(
                module_class=MaskedPPOModule,
                observation_space=track_observation_space(obs_dim, action_dim),
                action_space=gym.spaces.Discrete(action_dim),
                model_config=DefaultModelConfig(fcnet_hiddens=list(editor.hidden), vf_share_layers=False),
            ),
            SUBGRAPH_MODULE: RLModuleSpec(
                module_class=SWUCBModule, model_config={"c": bandit.c, "tau": bandit.tau}, **bandit_spaces
            ),
            SKETCH_MODULE: RLModuleSpec(
                module_class=SWUCBModule, model_config={"c": bandit.c, "tau": bandit.tau}, **bandit_spaces
            ),
        }
    )


def ppo_config(obs_dim: int, action_dim: int, editor: PPOEditorConfig, bandit: BanditConfig, seed: int) -> PPOConfig:
    """RLlib PPO config of the hierarchy (only `ppo_track` trains)."""
    spec = module_spec(obs_dim, action_dim, editor, bandit)
    return (
        PPOConfig()
        .environment(
            observation_space=gym.spaces.Dict({}), action_space=gym.spaces.Dict({}), disable_env_checking=True
        )
        .framework("torch")
        .env_runners(num_env_runners=0, episodes_to_numpy=False)
        .learners(num_learners=0, learner_class=HarlPPOLearner, learner_config_dict={"editor": editor})
        .multi_agent(
            policies={PPO_MODULE, SUBGRAPH_MODULE, SKETCH_MODULE},
            policy_mapping_fn=agent_to_module,
            policies_to_train=[PPO_MODULE],
        )
        .rl_module(rl_module_spec=spec)
        .training(
            gamma=editor.gamma,
            lambda_=editor.gae_lambda,
            vf_loss_coeff=editor.vf_loss_coeff,
            entropy_coeff=editor.entropy_coeff,
            clip_param=editor.clip_param,
            num_epochs=editor.num_epochs,
            minibatch_size=editor.minibatch_size,
            lr=editor.actor_lr,
        )
        .debugging(seed=seed)
    )


class PPOEditor:
    """The learner group plus the handles the search loop needs: act, value, update.

    Acting and valuing use the learner's own modules (one process, `num_learners=0`), so the
    critic that ranks tracks for adaptive stopping is always the freshly trained one.
    """

    def __init__(self, obs_dim: int, action_dim: int, editor: PPOEditorConfig | None = None,
                 bandit: BanditConfig | None = None, seed: int = 0) -> None:
        torch.set_num_threads(1)  # tiny MLPs: more threads only add overhead, and measurement shares the cores
        self.editor = editor or PPOEditorConfig()
        bandit = bandit or BanditConfig()
        self.config = ppo_config(obs_dim, action_dim, self.editor, bandit, seed)
        self.learner_group = self.config.build_learner_group(
            rl_module_spec=module_spec(obs_dim, action_dim, self.editor, bandit)
        )
        self.module = self.learner_group._learner.module  # local learner (num_learners=0)

    @staticmethod
    def _batch(observations: list[dict[str, np.ndarray]]) -> dict[str, dict[str, torch.Tensor]]:
        return {
            "obs": {
                key: torch.as_tensor(np.stack([obs[key] for obs in observations]), dtype=torch.float32)
                for key in observations[0]
            }
        }

    @torch.no_grad()
    def act(self, observations: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample masked edits for a batch of tracks: (actions, log-probs, distribution inputs)."""
        batch = self._batch(observations)
        if self.editor.track_policy == "uniform":  # the mask alone: every legal edit equally likely
            logits = mask_logits(batch["obs"]["action_mask"])
        else:
            logits = self.module[PPO_MODULE].forward_exploration(batch)["action_dist_inputs"]
        dist = torch.distributions.Categorical(logits=logits)
        actions = dist.sample()
        return actions.numpy(), dist.log_prob(actions).numpy(), logits.numpy()

    @torch.no_grad()
    def values(self, observations: list[dict[str, np.ndarray]]) -> np.ndarray:
        """The critic's value of each track's observation (for adaptive stopping)."""
        if not observations:
            return np.zeros(0)
        return self.module[PPO_MODULE].compute_values(self._batch(observations)).numpy()

    @torch.no_grad()
    def bandit_action(self, module_id: str, observation: dict[str, np.ndarray]) -> int:
        out = self.module[module_id].forward_inference({"obs": observation})
        return int(out["actions"][0])

    def update(self, episodes: list[Any]) -> dict[str, Any]:
        """One PPO update on finished episodes; returns the learner's results for ppo_track."""
        results = self.learner_group.update(
            episodes=episodes,
            timesteps={"num_env_steps_sampled_lifetime": 0},
            num_epochs=self.editor.num_epochs,
            minibatch_size=self.editor.minibatch_size,
            shuffle_batch_per_epoch=True,
        )
        return results[0] if isinstance(results, list) and results else results
