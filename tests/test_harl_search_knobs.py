"""HARL's search knobs against MetaSchedule's losses: start pool, epsilon-greedy top-K, elite ramp,
sketch rewards renormalised by the moving best, the warm-up batch, cross-sketch slots. Real
schedule space and PPO on a 128^3 GEMM; no measurement (latencies are handed to `observe` as
real `MeasureResult`s), so this stays fast.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import harl_config
from hiertune.envs.harl_env import HarlEnvConfig
from hiertune.errors import HiertuneError
from hiertune.platform.harl_search import Candidate, HarlSearch
from hiertune.platform.records import RecordStore, trace_key
from hiertune.platform.runners import MeasureResult
from hiertune.policies.bandits import SlidingWindow
from hiertune.policies.candidates import decision_distance, select_candidates
from hiertune.workloads import get_workload
from hiertune.workloads.tvm_support import make_target


def make_search(tmp_path, **overrides) -> HarlSearch:
    config = harl_config(**{"tracks": 4, "lam": 3, "rho": 0.5, "min_tracks": 2, "max_steps": 6, "seed": 0, **overrides})
    target = make_target("llvm")
    return HarlSearch(get_workload("GMM-S", target), target, None, RecordStore(tmp_path / "r.jsonl"), config)


def observe_latencies(search: HarlSearch, states: list, latencies: list[float]) -> None:
    candidates = [Candidate(0, state, trace_key(state.trace)) for state in states]
    search.observe(candidates, [MeasureResult(latencies_s=[x] if math.isfinite(x) else None,
                                              error=None if math.isfinite(x) else "failed") for x in latencies])


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
    search = make_search(tmp_path, sketch_warmup=False)
    search.propose(4)
    ranked = [v.state for v in search.env.top_visited()]
    assert len(ranked) > 8

    def key(state):
        return trace_key(state.trace)

    greedy = select_candidates(ranked, 4, set(), np.random.default_rng(0), key=key, epsilon=0.0)
    assert [s.key for s, _ in greedy] == [s.key for s in ranked[:4]]
    chosen = select_candidates(ranked, 4, set(), np.random.default_rng(0), key=key, epsilon=1.0)
    assert len(chosen) == 4 and len({k for _, k in chosen}) == 4
    assert [s.key for s, _ in chosen] != [s.key for s in ranked[:4]]
    measured = {key(s) for s in ranked[:2]}  # measured schedules are never proposed again
    assert not measured & {k for _, k in select_candidates(ranked, 4, measured, np.random.default_rng(0), key=key)}


def test_candidates_widen_with_random_fills_when_the_round_found_too_few() -> None:
    fills = iter(range(100))
    chosen = select_candidates(["a"], 3, {"a"}, np.random.default_rng(0), key=str, random_fill=lambda: next(fills))
    assert [k for _, k in chosen] == ["0", "1", "2"]


def test_min_distance_defers_near_picks_until_no_farther_one_is_left() -> None:
    def apart(a: int, b: int) -> int:
        return abs(a - b)

    ranked = [10, 11, 20, 21, 30]
    chosen = select_candidates(ranked, 4, set(), np.random.default_rng(0), key=str, distance=apart, min_distance=5)
    assert [k for _, k in chosen] == ["10", "20", "30", "11"]  # 11 waits: it is 1 from 10
    plain = select_candidates(ranked, 4, set(), np.random.default_rng(0), key=str, distance=apart, min_distance=1)
    assert [k for _, k in plain] == ["10", "11", "20", "21"]


def test_min_distance_spreads_a_real_round_over_neighbourhoods(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=False)
    search.propose(4)
    ranked = [v.state for v in search.env.top_visited()]
    chosen = select_candidates(ranked, 4, set(), np.random.default_rng(0), key=lambda s: trace_key(s.trace),
                               distance=decision_distance, min_distance=2)
    states = [s for s, _ in chosen]
    assert len(states) == 4
    assert all(decision_distance(a, b) >= 2 for i, a in enumerate(states) for b in states[i + 1:])
    assert decision_distance(states[0], states[0]) == 0


def test_elite_share_grows_with_the_budget_spent() -> None:
    config = HarlEnvConfig(elite_fraction=0.5, elite_fraction_late=0.75)
    assert [config.elite_share(x) for x in (0.0, 0.5, 1.0, 2.0)] == pytest.approx([0.5, 0.625, 0.75, 0.75])
    assert HarlEnvConfig(elite_fraction=0.25, elite_fraction_late=None).elite_share(0.9) == 0.25
    assert HarlEnvConfig(elite_fraction=0.0).elite_share(0.9) == 0.0  # the paper's pure random fills
    with pytest.raises(HiertuneError, match="episode.start_pool"):
        harl_config(start_pool=0).validate()
    with pytest.raises(HiertuneError, match="candidates.epsilon"):
        harl_config(epsilon=1.5).validate()
    with pytest.raises(HiertuneError, match="--tracks"):
        harl_config(tracks=0).validate()
    with pytest.raises(HiertuneError, match="bandit.sketch_search_rounds"):
        harl_config(sketch_search_rounds=-1).validate()


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
    search.bandits.observe_round(0, [2.0e-3, math.inf], [0, 0])
    search.bandits.observe_round(0, [1.0e-3], [1])
    means, counts = search.bandits.sketch_windows[0].stats()
    assert list(counts[:2]) == [1, 1]
    assert means[0] == pytest.approx(first_mean) and means[1] == pytest.approx(1.0)


def test_warmup_batch_covers_every_sketch_and_rewards_each(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, sketch_renormalise=True)
    n_sketches = search.spaces[0].num_sketches
    assert n_sketches >= 2
    chosen = search.propose(8)  # nothing measured yet: the first batch is the warm-up
    assert len(chosen) == 8 and len({c.key for c in chosen}) == 8
    assert {c.state.sketch for c in chosen} == set(range(n_sketches))
    latencies = [1e-3 * (1 + c.state.sketch) for c in chosen]  # sketch 0 fastest
    observe_latencies(search, [c.state for c in chosen], latencies)
    means, counts = search.bandits.sketch_windows[0].stats()
    assert list(counts[:n_sketches]) == [1] * n_sketches
    assert search.bandits.sketch_windows[0].t == 1  # one bandit decision, one reward per sketch
    assert list(means[:n_sketches]) == pytest.approx([1 / (1 + s) for s in range(n_sketches)])
    assert search.trials_done() == 8 and not search.bandits.wants_warmup(0, len(search.measured[0]))


def test_a_records_file_reads_back_as_states_in_trial_order(tmp_path) -> None:
    search = make_search(tmp_path)
    chosen = search.propose(6)
    observe_latencies(search, [c.state for c in chosen], [1e-3, 2e-3, math.inf, 3e-3, 4e-3, 5e-3])  # one failed
    back = RecordStore(tmp_path / "r.jsonl", writer=False).schedules(search.spaces[0], tuner="harl")
    assert [s.key for s, _ in back] == [c.state.key for i, c in enumerate(chosen) if i != 2]
    assert [t for _, t in back] == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3, 5e-3])
    everything = RecordStore(tmp_path / "r.jsonl", writer=False).schedules(search.spaces[0], readable_only=False)
    assert len(everything) == 6 and not math.isfinite(everything[2][1])


def test_warmup_trials_keep_batches_random_fills_until_reached(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, warmup_trials=16)
    n_sketches = search.spaces[0].num_sketches
    for _ in range(2):  # 16 trials: two warm-up batches, each spread over every sketch
        chosen = search.propose(8)
        assert search.searched_sketch is None and {c.state.sketch for c in chosen} == set(range(n_sketches))
        observe_latencies(search, [c.state for c in chosen], [1e-3 * (1 + i) for i in range(len(chosen))])
    assert search.trials_done() == 16 and search.bandits.sketch_windows[0].t == 2
    search.propose(8)
    assert search.searched_sketch is not None  # from the budget on, the bandit's sketch is searched
    with pytest.raises(HiertuneError, match="bandit.warmup_trials"):
        make_search(tmp_path, warmup_trials=-1)


def test_warmup_fills_measure_the_sketches_a_small_first_batch_left_out(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, warmup_fills=1)
    n_sketches = search.spaces[0].num_sketches
    first = search.propose(n_sketches - 1)  # fewer slots than sketches: the last sketch is left out
    assert {c.state.sketch for c in first} == set(range(n_sketches - 1))
    observe_latencies(search, [c.state for c in first], [1e-3] * len(first))
    assert search.bandits.missing_fills(0) == [0] * (n_sketches - 1) + [1]
    cover = search.propose(8)  # a warm-up batch of the one missing fill, not a searched round for it
    assert search.searched_sketch is None and [c.state.sketch for c in cover] == [n_sketches - 1]
    observe_latencies(search, [c.state for c in cover], [2e-3])
    assert not search.bandits.wants_warmup(0, len(search.measured[0]))
    assert search.bandits.sketch_windows[0].stats()[1][n_sketches - 1] == 1
    search.propose(8)
    assert search.searched_sketch is not None


def test_warmup_fills_leave_a_first_batch_that_already_has_them_alone(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, warmup_fills=2)
    chosen = search.propose(8)  # 3 sketches, 8 slots: 3 + 3 + 2 fills
    observe_latencies(search, [c.state for c in chosen], [1e-3 * (1 + i) for i in range(len(chosen))])
    assert not any(search.bandits.missing_fills(0))
    search.propose(8)
    assert search.searched_sketch is not None
    with pytest.raises(HiertuneError, match="bandit.warmup_fills"):
        make_search(tmp_path, warmup_fills=-1)


def test_warmup_pool_screens_each_sketchs_first_fill_deeper(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, warmup_pool=32)
    ranked: list[tuple[int, list]] = []
    rank_fills = search._ranked_fills
    search._ranked_fills = lambda task, sketch, count: ranked.append((count, rank_fills(task, sketch, count))) or ranked[-1][1]
    chosen = search.propose(8)  # 3 sketches, 8 slots: 3 + 3 + 2 fills
    # per sketch: its first fill from 32 scored, the other two the best of 2 * start_pool (8)
    assert search.searched_sketch is None and [count for count, _ in ranked] == [32, 16] * 3
    for sketch in range(3):
        (_, deep), (_, broad) = ranked[2 * sketch: 2 * sketch + 2]
        picked = [c.key for c in chosen if c.state.sketch == sketch]
        assert picked[0] == deep[0][1]  # the deep screen's best-predicted comes first
        assert set(picked[1:]) <= {key for _, key in broad[: len(picked)]}
    with pytest.raises(HiertuneError, match="bandit.warmup_pool"):
        make_search(tmp_path, warmup_pool=-1)


def test_cross_sketch_slots_go_to_the_other_sketches(tmp_path) -> None:
    search = make_search(tmp_path, epsilon=0.0, cross_sketch=2, sketch_warmup=False)
    assert search.spaces[0].num_sketches > 1
    chosen = search.propose(6)
    assert len(chosen) == 6 and len({c.key for c in chosen}) == 6  # exactly K, none twice
    sketches = [int(c.state.sketch) for c in chosen]
    assert sketches[:4] == [search.env.sketch] * 4  # the bandit's sketch keeps the first K - 2
    assert all(s != search.env.sketch for s in sketches[4:])
    with pytest.raises(HiertuneError, match="candidates.cross_sketch"):
        harl_config(cross_sketch=8, topk=8).validate()


def test_transplant_slots_replay_the_best_measured_schedule_in_the_other_sketches(tmp_path) -> None:
    search = make_search(tmp_path, epsilon=0.0, cross_sketch=2, cross_source="transplant", sketch_warmup=False)
    space = search.spaces[0]
    first = search.propose(6)
    observe_latencies(search, [c.state for c in first], [1e-3 * (i + 1) for i in range(6)])
    chosen = search.propose(6)
    cross = [c.state for c in chosen if c.state.sketch != search.env.sketch]
    assert len(cross) == 2
    for state in cross:  # the decisions of the fastest schedule measured in another sketch
        pool = [pair for sketch, pairs in search.best_states[0].items() if sketch != state.sketch for pair in pairs]
        assert state.decisions == min(pool, key=lambda pair: pair[0])[1].decisions
    best = first[0].state
    assert space.transplant(best, best.sketch) is None  # not into its own sketch
    with pytest.raises(HiertuneError, match="candidates.cross_source"):
        harl_config(cross_source="elites").validate()


def test_elite_tracks_cover_the_other_sketches(tmp_path) -> None:
    search = make_search(tmp_path, elite_fraction=1.0, elite_fraction_late=None, elite_other_sketches=1)
    space = search.spaces[0]
    n = space.num_sketches
    assert n > 1
    rng = np.random.default_rng(1)
    fills = [(s, i, space.random_state(s, rng)) for s in range(n) for i in range(3)]
    search.env.reset(options={"task": 0})
    search.env.step({"sketch": 0})  # a round on sketch 0, so observe has a round to credit
    observe_latencies(search, [state for *_, state in fills], [1e-3 * (1 + s + i) for s, i, _ in fills])
    search.env.elite_fraction = 1.0
    search.env.reset(options={"task": 0})
    search.env.step({"sketch": 0})  # every track starts from an elite, the other sketches' first
    starts = [int(search.env.states[aid].sketch) for aid in search.env.track_ids]
    assert starts[: n - 1] == list(range(1, n))  # one per other sketch: its best
    assert all(s == 0 for s in starts[n - 1:])
    fresh = make_search(tmp_path / "b", elite_fraction=1.0, elite_fraction_late=None)
    fresh.env.reset(options={"task": 0})
    fresh.env.step({"sketch": 0})  # nothing measured: no elites, every track from a random fill
    assert len(fresh.env.states) == 4
    with pytest.raises(HiertuneError, match="episode.elite_other_sketches"):
        harl_config(elite_other_sketches=-1).validate()


def test_every_sketch_gets_a_searched_round_before_the_bandit_passes_it_over(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, sketch_search_rounds=1, epsilon=0.0)
    n_sketches = search.spaces[0].num_sketches
    chosen = search.propose(8)  # the warm-up: sketch 0 comes out fastest by far
    observe_latencies(search, [c.state for c in chosen], [1e-3 * (1 + 9 * c.state.sketch) for c in chosen])
    picked = []
    for _ in range(n_sketches):
        chosen = search.propose(2)
        picked.append(search.env.sketch)
        observe_latencies(search, [c.state for c in chosen], [5e-3] * len(chosen))
    assert sorted(picked) == list(range(n_sketches))  # each sketch once, the warm-up's losers included
    assert list(search.bandits.searched_rounds[0]) == [1] * n_sketches
    resumed = make_search(tmp_path, sketch_warmup=True, sketch_search_rounds=1, epsilon=0.0)
    assert list(resumed.bandits.searched_rounds[0]) == [1] * n_sketches  # replayed from the records


def test_without_searched_rounds_the_warmup_decides(tmp_path) -> None:
    search = make_search(tmp_path, sketch_warmup=True, sketch_search_rounds=0, epsilon=0.0)
    chosen = search.propose(8)
    observe_latencies(search, [c.state for c in chosen], [1e-3 * (1 + 9 * c.state.sketch) for c in chosen])
    search.propose(2)
    assert search.env.sketch == 0


def test_stall_rounds_explore_after_rounds_without_a_new_best_and_resume(tmp_path) -> None:
    search = make_search(tmp_path, stall_rounds=1, epsilon=0.0)
    n_sketches = search.spaces[0].num_sketches
    kinds = []
    for latency in (1e-3, 2e-3, 2e-3, 2e-3):  # the warm-up's best is never beaten
        chosen = search.propose(6)
        kinds.append((search.explore_round, search.searched_sketch is None))
        if search.explore_round:
            assert {c.state.sketch for c in chosen} == set(range(n_sketches))  # spread over every sketch
        observe_latencies(search, [c.state for c in chosen], [latency] * len(chosen))
    # warm-up, a searched round that stalls, the exploration round, a searched round again
    assert kinds == [(False, True), (False, False), (True, True), (False, False)]
    assert search.stalled[0] == 1 and search.spread_done[0] == 0
    explored = [r for r in search.store.trials() if r.extra.get("explore")]
    assert len(explored) == 6 and all(r.extra["spread"] for r in explored)
    resumed = make_search(tmp_path, stall_rounds=1, epsilon=0.0)  # the same records file
    assert resumed.stalled == search.stalled and resumed.spread_done == search.spread_done
    assert resumed._explores(0)
    with pytest.raises(HiertuneError, match="episode.stall_rounds"):
        make_search(tmp_path, stall_rounds=-1)
    with pytest.raises(HiertuneError, match="episode.stall_starts.*fills or elites"):
        make_search(tmp_path, stall_rounds=1, stall_starts="random")


def test_sibling_slots_measure_other_tasks_best_schedules_refitted(tmp_path) -> None:
    from hiertune.workloads import Workload

    target = make_target("llvm")
    tasks = [get_workload(name, target).tasks[0] for name in ("GMM-S", "GMM-M")]
    config = harl_config(tracks=4, lam=3, min_tracks=2, max_steps=6, epsilon=0.0, sibling_slots=2)
    search = HarlSearch(Workload("two-gemms", tasks), target, None, RecordStore(tmp_path / "r.jsonl"), config)
    first = search.propose(4)
    assert search.env.task == 0 and not search.round_transfers  # nothing measured elsewhere yet
    observe_latencies(search, [c.state for c in first], [1e-3 * (i + 1) for i in range(4)])
    chosen = search.propose(4)
    assert search.env.task == 1 and len(chosen) == 4 and len({c.key for c in chosen}) == 4
    transfers = [c for c in chosen if c.key in search.round_transfers]
    assert len(transfers) == 2 and transfers == chosen[2:]  # the last slots
    sources = {c.state.decisions for c in first[:2]}  # the other task's two fastest, refitted
    refit = {search.spaces[1].transfer(c.state).decisions for c in first[:2]}
    assert {c.state.decisions for c in transfers} <= refit and refit != sources
    search.observe(chosen, [MeasureResult(latencies_s=[1e-3]) for _ in chosen])
    record = search.store.trials(tasks[1].name, tuner="harl")[-1]
    assert record.extra.get("transfer") is True
    with pytest.raises(HiertuneError, match="candidates.sibling_slots"):
        harl_config(sibling_slots=8, topk=8).validate()
