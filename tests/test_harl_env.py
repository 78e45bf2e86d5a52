"""The HARL hierarchy env on a real 128^3 GEMM schedule space with real RLlib PPO.

No measurement here: the cost model is untrained (its neutral scores still give PPO a value
target and an entropy gradient), so this file stays fast.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import harl_config
from hiertune.platform.harl_search import HarlSearch
from hiertune.workloads import get_workload
from hiertune.platform.records import RecordStore
from hiertune.workloads.tvm_support import make_target
from hiertune.policies.ppo_editor import PPO_MODULE, SKETCH_MODULE, SUBGRAPH_MODULE


def make_search(tmp_path, **overrides) -> HarlSearch:
    """GMM-S with small tracks; no warm-up batch, as a warm-up round plays no tracks."""
    config = harl_config(**{"tracks": 4, "lam": 3, "rho": 0.5, "min_tracks": 2, "max_steps": 12, "seed": 0,
                            "sketch_warmup": False, **overrides})
    target = make_target("llvm")
    return HarlSearch(get_workload("GMM-S", target), target, None, RecordStore(tmp_path / "r.jsonl"), config)


@pytest.fixture(scope="module")
def search(tmp_path_factory) -> HarlSearch:
    return make_search(tmp_path_factory.mktemp("harl_env"))


def test_ppo_weights_change_and_bandits_do_not(search: HarlSearch) -> None:
    ppo = search.editor.module[PPO_MODULE]
    before = {k: v.clone() for k, v in ppo.state_dict().items()}
    bandits = [search.editor.module[m] for m in (SUBGRAPH_MODULE, SKETCH_MODULE)]
    bandit_before = [b.get_state() for b in bandits]
    for _ in range(2):
        episode = search._play_episode()
        results = search.editor.update([episode])
        assert results[PPO_MODULE]["num_module_steps_trained"].peek() > 0
    after = ppo.state_dict()
    assert max((after[k] - before[k]).abs().max().item() for k in before) > 0
    for bandit, state in zip(bandits, bandit_before):
        assert not list(bandit.parameters())
        assert bandit.get_state() == state == {}
    # the learner only built optimisers for the PPO editor (actor and critic lr)
    assert set(search.editor.learner_group._learner._named_optimizers) == {f"{PPO_MODULE}_actor", f"{PPO_MODULE}_critic"}


def test_a_warmup_round_plays_no_tracks_and_leaves_ppo_alone(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True)
    ppo = search.editor.module[PPO_MODULE]
    before = {k: v.clone() for k, v in ppo.state_dict().items()}
    assert search._play_episode() is None and search.env.track_steps == 0
    chosen = search.propose(6)  # the warm-up batch: random fills over every sketch
    assert {c.state.sketch for c in chosen} == set(range(search.spaces[0].num_sketches))
    after = ppo.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)


def test_adaptive_stopping_ends_tracks_at_different_steps(search: HarlSearch) -> None:
    search._play_episode()
    stops = search.env.stopped_at
    assert set(stops) == set(search.env.track_ids)
    # 4 tracks, rho 0.5, lambda 3: two stop at step 3, then 2 -> 1 < min_tracks ends at step 6
    assert sorted(stops.values()) == [3, 3, 6, 6]
    assert len(search.env.advantages) == 2
    assert len(search.env.visited) > 4  # edits reached new schedules


def test_fixed_length_leaves_tracks_alone(tmp_path) -> None:
    search = make_search(tmp_path, fixed_length=True, max_steps=7)
    search._play_episode()
    assert sorted(search.env.stopped_at.values()) == [7, 7, 7, 7]
    assert search.env.advantages == []


def test_acting_for_a_done_agent_raises(search: HarlSearch) -> None:
    from ray.rllib.utils.error import MultiAgentEnvError

    search._play_episode()
    with pytest.raises(MultiAgentEnvError):
        search.env.step({"track_0": 0})
    obs, _ = search.env.reset()
    with pytest.raises(MultiAgentEnvError):
        search.env.step({"track_0": 0})  # the subgraph bandit acts first
    assert set(obs) == {"subgraph"}


def test_track_actions_respect_the_mask(search: HarlSearch) -> None:
    obs, _ = search.env.reset(options={"task": 0})
    obs, *_ = search.env.step({"sketch": 0})
    tracks = [aid for aid in obs if aid.startswith("track_")]
    masks = np.stack([obs[aid]["action_mask"] for aid in tracks])
    for _ in range(20):
        actions, _, _ = search.editor.act([obs[aid] for aid in tracks])
        assert all(masks[i, a] == 1 for i, a in enumerate(actions))
    assert torch.get_num_threads() == 1


def test_uniform_edits_ignore_the_actor_and_keep_the_mask(tmp_path) -> None:
    """The `uniform-edits` ablation: legal edits drawn evenly, whatever the actor's weights say;
    PPO still trains on the steps (its critic stops tracks)."""
    from hiertune.platform.harl_search import ABLATIONS

    search = make_search(tmp_path, **{k.split(".")[1]: v for k, v in ABLATIONS["uniform-edits"].items()})
    obs, _ = search.env.reset(options={"task": 0})
    obs, *_ = search.env.step({"sketch": 0})
    tracks = [aid for aid in obs if aid.startswith("track_")]
    with torch.no_grad():  # an actor that would always pick its favourite edit
        for p in search.editor.module[PPO_MODULE].pi.parameters():
            p.mul_(1e3)
    counts = np.zeros_like(obs[tracks[0]]["action_mask"])
    for _ in range(200):
        actions, logp, _ = search.editor.act([obs[tracks[0]]])
        counts[actions[0]] += 1
    legal = obs[tracks[0]]["action_mask"] == 1
    assert counts[~legal].sum() == 0
    assert (counts[legal] > 0).sum() >= min(legal.sum(), 10)  # spread, not one favourite
    assert np.isclose(logp[0], -np.log(legal.sum()))
    episode = search._play_episode()
    results = search.editor.update([episode])
    assert results[PPO_MODULE]["num_module_steps_trained"].peek() > 0


def test_an_unknown_track_policy_is_named(tmp_path) -> None:
    from hiertune.errors import HiertuneError

    with pytest.raises(HiertuneError, match="ppo.track_policy"):
        harl_config(track_policy="greedy").validate()


def test_similar_tasks_share_a_group() -> None:
    """Ansor's forward term compares a task with similar ones: same operator chain, any shape."""
    from hiertune.policies.bandits import task_group

    assert task_group("fused_conv2d1_add_relu") == task_group("fused_conv2d_add_relu") == "conv2d_add_relu"
    assert task_group("fused_matmul_add1") != task_group("fused_conv2d_add_relu")
    assert task_group("C2D:2:b16") == task_group("C2D:0") == "C2D"


def test_a_spread_round_starts_tracks_in_every_sketch(tmp_path) -> None:
    search = make_search(tmp_path, spread_rounds=1)
    env, space = search.env, search.spaces[0]
    assert space.num_sketches == 3
    assert not search._spreads(0)  # before the warm-up batch the round is the warm-up's
    search.measured[0].add("a measured schedule")
    assert search._spreads(0)
    env.reset(options={"task": 0})
    env.step({"sketch": 1})
    # 4 tracks over 3 sketches, the bandit's pick first: 2 + 1 + 1
    assert sorted(int(env.states[aid].sketch) for aid in env.track_ids) == [0, 1, 1, 2]
    assert {int(v.state.sketch) for v in env.visited.values()} == {0, 1, 2}
    # the round's batch gives every sketch a slot, led by the best-predicted schedule
    pairs = search._spread_pairs(0, 3)
    assert sorted(int(state.sketch) for state, _ in pairs) == [0, 1, 2]
    assert pairs[0][0] is env.top_visited()[0].state
    search.spread_done[0] = 1  # the one spread round is played: back to the bandit's sketch alone
    env.reset(options={"task": 0})
    env.step({"sketch": 1})
    assert {int(env.states[aid].sketch) for aid in env.track_ids} == {1}


def test_a_stalled_task_explores_from_fresh_fills_over_every_sketch(tmp_path) -> None:
    search = make_search(tmp_path, stall_rounds=2, elite_fraction=1.0, elite_fraction_late=None)
    env, space = search.env, search.spaces[0]
    elite = space.random_state(1, np.random.default_rng(1))
    search.measured[0].add("a measured schedule")
    search._keep_best(0, elite, 1e-3)
    env.reset(options={"task": 0})
    env.step({"sketch": 1})
    assert elite.key in {env.states[aid].key for aid in env.track_ids}  # a track refines the elite
    for _ in range(2):  # two searched rounds without a new best (the bandits' best stays inf)
        assert not search._explores(0)
        search._count_stall(0, search.bandits.best(0), searched=True, explored=False)
    assert search._explores(0) and search._spreads(0)
    env.reset(options={"task": 0})
    env.step({"sketch": 1})
    assert elite.key not in {env.states[aid].key for aid in env.track_ids}  # fresh fills only
    assert sorted(int(env.states[aid].sketch) for aid in env.track_ids) == [0, 1, 1, 2]
    search._count_stall(0, search.bandits.best(0), searched=True, explored=True)  # explored: count again
    assert search.stalled[0] == 0 and not search._explores(0)
    search._count_stall(0, search.bandits.best(0), searched=False, explored=False)  # a warm-up batch
    assert search.stalled[0] == 0
    search._count_stall(0, search.bandits.best(0), searched=True, explored=False)
    best_before = search.bandits.best(0)
    search.bandits.observe_round(0, [1e-3], [1], searched=1)
    search._count_stall(0, best_before, searched=True, explored=False)  # a new best starts it again
    assert search.stalled[0] == 0


def test_a_stalled_task_with_elite_starts_refines_every_sketch(tmp_path) -> None:
    search = make_search(tmp_path, stall_rounds=2, stall_starts="elites", elite_fraction=1.0, elite_fraction_late=None)
    env, space = search.env, search.spaces[0]
    elite = space.random_state(1, np.random.default_rng(1))
    search.measured[0].add("a measured schedule")
    search._keep_best(0, elite, 1e-3)
    for _ in range(2):
        search._count_stall(0, search.bandits.best(0), searched=True, explored=False)
    assert search._explores(0) and search._spreads(0) and not search._fresh_starts(0)
    env.reset(options={"task": 0})
    env.step({"sketch": 1})
    assert elite.key in {env.states[aid].key for aid in env.track_ids}  # the sketch's elite is refined
    assert sorted(int(env.states[aid].sketch) for aid in env.track_ids) == [0, 1, 1, 2]


PPO_DIGEST = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from conftest import harl_config
from hiertune.platform.harl_search import HarlSearch
from hiertune.platform.records import RecordStore
from hiertune.policies.ppo_editor import PPO_MODULE
from hiertune.workloads import get_workload
from hiertune.workloads.tvm_support import make_target
target = make_target("llvm")
config = harl_config(tracks=8, lam=3, rho=0.5, min_tracks=2, max_steps=12, seed=0, sketch_warmup=False)
search = HarlSearch(get_workload("GMM-S", target), target, None, RecordStore(sys.argv[2]), config)
for _ in range(2):
    search.editor.update([search._play_episode()])
weights = search.editor.module[PPO_MODULE].state_dict()
print("digest", hashlib.sha1(b"".join(weights[k].numpy().tobytes() for k in sorted(weights))).hexdigest())
"""


def test_one_seed_trains_the_same_policy_in_every_process(tmp_path) -> None:
    """RLlib orders a multi-agent batch by a set of agent ids, so without `TrackEpisode` the
    policy followed the process's string-hash seed, not the search's seed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    digests = set()
    for hash_seed in ("1", "2"):
        args = [sys.executable, "-c", PPO_DIGEST, str(Path(__file__).parent), str(tmp_path / f"{hash_seed}.jsonl")]
        out = subprocess.run(args, env={**os.environ, "PYTHONHASHSEED": hash_seed}, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        digests.add(next(line for line in out.stdout.splitlines() if line.startswith("digest")))
    assert len(digests) == 1
