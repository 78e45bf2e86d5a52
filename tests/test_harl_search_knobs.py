"""HARL's search knobs against MetaSchedule's losses (issue 4): start pool, epsilon-greedy top-K,
elite ramp, sketch rewards renormalised by the moving best. Real schedule space and PPO on a
128^3 GEMM; no measurement (latencies are fed to the bookkeeping directly), so this stays fast.
"""

from __future__ import annotations

import math

import pytest

from hiertune.platform.harl_search import HarlConfig, HarlSearch
from hiertune.workloads import get_workload
from hiertune.errors import HiertuneError
from hiertune.platform.records import RecordStore
from hiertune.workloads.tvm_support import make_target
from hiertune.policies.sw_ucb import SlidingWindow


def make_search(tmp_path, **overrides) -> HarlSearch:
    config = HarlConfig(**{"tracks": 4, "lam": 3, "rho": 0.5, "min_tracks": 2, "max_steps": 6, "seed": 0, **overrides})
    target = make_target("llvm")
    return HarlSearch(get_workload("GMM-S", target), target, None, RecordStore(tmp_path / "r.jsonl"), config)


def test_start_pool_visits_every_fill_and_starts_from_the_best_predicted(tmp_path) -> None:
    search = make_search(tmp_path, start_pool=3, elite_fraction=0.0)
    env = search.env
    env.reset(options={"task": 0})
    env.step({"sketch": 0})
    pool = list(env.visited.values())
    assert len(pool) > 4  # 12 fills drawn (a few may coincide), all of them candidates
    starts = sorted(env.scores.values(), reverse=True)
    best_in_pool = sorted((v.score for v in pool), reverse=True)[: len(starts)]
    assert starts == pytest.approx(best_in_pool)


def test_epsilon_takes_some_candidates_off_the_ranking(tmp_path) -> None:
    greedy = make_search(tmp_path / "a", epsilon=0.0)
    greedy._play_episode()
    ranked = [v.state.key for v in greedy.env.top_visited()][:4]
    assert [s.key for s, _ in greedy._candidates(0, 4)] == ranked

    search = make_search(tmp_path / "b", epsilon=1.0)
    search._play_episode()
    assert len(search.env.visited) > 8
    chosen = search._candidates(0, 4)
    assert len(chosen) == 4 and len({key for _, key in chosen}) == 4
    assert [s.key for s, _ in chosen] != [v.state.key for v in search.env.top_visited()][:4]


def test_elite_share_grows_with_the_budget_spent() -> None:
    config = HarlConfig(elite_fraction=0.5, elite_fraction_late=0.75)
    assert [config.elite_share(x) for x in (0.0, 0.5, 1.0, 2.0)] == pytest.approx([0.5, 0.625, 0.75, 0.75])
    assert HarlConfig(elite_fraction=0.25, elite_fraction_late=None).elite_share(0.9) == 0.25
    assert HarlConfig(elite_fraction=0.0).elite_share(0.9) == 0.0  # the paper's pure random fills
    with pytest.raises(HiertuneError, match="--start-pool"):
        HarlConfig(start_pool=0).validate()
    with pytest.raises(HiertuneError, match="--epsilon"):
        HarlConfig(epsilon=1.5).validate()


def test_window_rescale_moves_every_reward() -> None:
    window = SlidingWindow(2, tau=8)
    window.record(0, 1.0)
    window.record(1, 0.8)
    window.rescale(0.5)
    means, counts = window.stats()
    assert list(means) == pytest.approx([0.5, 0.4]) and list(counts) == [1, 1] and window.t == 2


@pytest.mark.parametrize("renormalise, first_mean", [(False, 1.0), (True, 0.5)])
def test_first_round_sketch_loses_its_free_reward_when_renormalised(tmp_path, renormalise, first_mean) -> None:
    # round 1: sketch 0 sets the first best (reward 1 by definition); round 2: sketch 1 is 2x faster
    search = make_search(tmp_path, sketch_renormalise=renormalise)
    search._finish_round(0, [2.0e-3, math.inf], [0, 0])
    search._finish_round(0, [1.0e-3], [1])
    means, counts = search.env.sketch_windows[0].stats()
    assert list(counts[:2]) == [1, 1]
    assert means[0] == pytest.approx(first_mean) and means[1] == pytest.approx(1.0)


def test_warmup_batch_covers_every_sketch_and_rewards_each(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, sketch_renormalise=True)
    n_sketches = search.spaces[0].num_sketches
    assert n_sketches >= 2
    chosen = search._warmup_candidates(0, 8)
    assert len(chosen) == 8 and len({key for _, key in chosen}) == 8
    assert {state.sketch for state, _ in chosen} == set(range(n_sketches))
    latencies = [1e-3 * (1 + state.sketch) for state, _ in chosen]  # sketch 0 fastest
    search._finish_round(0, latencies, [state.sketch for state, _ in chosen])
    means, counts = search.env.sketch_windows[0].stats()
    assert list(counts[:n_sketches]) == [1] * n_sketches
    assert search.env.sketch_windows[0].t == 1  # one bandit decision, one reward per sketch
    assert list(means[:n_sketches]) == pytest.approx([1 / (1 + s) for s in range(n_sketches)])


def test_cross_sketch_slots_go_to_the_other_sketches(tmp_path) -> None:
    search = make_search(tmp_path, epsilon=0.0, cross_sketch=2)
    search._play_episode()
    assert search.spaces[0].num_sketches > 1
    chosen = search._candidates(0, 6)
    assert len(chosen) == 6 and len({key for _, key in chosen}) == 6  # exactly K, none twice
    sketches = [int(state.sketch) for state, _ in chosen]
    assert sketches[:4] == [search.env.sketch] * 4  # the bandit's sketch keeps the first K - 2
    assert all(s != search.env.sketch for s in sketches[4:])
    with pytest.raises(HiertuneError, match="--cross-sketch"):
        HarlConfig(cross_sketch=8, topk=8).validate()


def test_elite_tracks_cover_the_other_sketches(tmp_path) -> None:
    search = make_search(tmp_path, elite_fraction=1.0, elite_fraction_late=None, elite_other_sketches=1)
    space = search.spaces[0]
    assert space.num_sketches > 1
    rng_fills = {s: [space.random_state(s, search.rng) for _ in range(3)] for s in range(space.num_sketches)}
    for s, states in rng_fills.items():  # sketch s's fills measured at 1.0 + s + i ms
        for i, state in enumerate(states):
            search._keep_best(0, state, 1e-3 * (1 + s + i))
    elites = search._elites(0, 0)
    others = [int(state.sketch) for state in elites[: space.num_sketches - 1]]
    assert others == list(range(1, space.num_sketches))  # one per other sketch: its best
    assert all(int(state.sketch) == 0 for state in elites[space.num_sketches - 1:])
    search.env.elite_fraction = 1.0
    search.env.reset(options={"task": 0})
    search.env.step({"sketch": 0})  # every track starts from an elite, the other sketches included
    assert {int(state.sketch) for state in search.env.states.values()} == set(range(space.num_sketches))
    assert make_search(tmp_path / "b")._elites(0, 0) == []
    with pytest.raises(HiertuneError, match="--elite-other-sketches"):
        HarlConfig(elite_other_sketches=-1).validate()
