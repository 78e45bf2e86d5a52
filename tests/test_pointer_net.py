"""The pointer-network pre-scheduler: generator, always-valid plans, and that training learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag, generate_dags
from hiertune.errors import HiertuneError
from hiertune.policies.pointer_net import (
    DEFAULT_CHECKPOINT,
    PointerNet,
    PointerNetConfig,
    PointerScheduler,
    SchedulerConfig,
    graph_features,
    load_default_scheduler,
    load_scheduler,
)
from hiertune.policies.train_pointer_net import (
    TrainConfig,
    collate,
    cosine_similarity,
    label_dataset,
    make_samples,
    train,
)
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import IlpConfig, check_partition, evaluate_partition, solve_partition
from hiertune.solvers.zoo import load_zoo_graph, zoo_models

torch.set_num_threads(1)


def assert_valid_plan(graph: OpGraph, stages: list[int], k: int) -> None:
    check_partition(graph, stages, k)  # stage range and s_u <= s_v on every edge
    assert all(stages[e.src] <= stages[e.dst] for e in graph.edges)
    if graph.num_nodes >= k:
        assert set(stages) == set(range(k)), f"empty stage in {sorted(set(stages))} for K={k}"


# ------------------------------------------------------------------------------ generator
def test_generator_is_deterministic_per_seed():
    a, b, c = generate_dag(7), generate_dag(7), generate_dag(8)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    assert [g.to_dict() for g in generate_dags(4, 3)] == [g.to_dict() for g in generate_dags(4, 3)]


@pytest.mark.parametrize("max_in", [2, 3, 4, 6])
def test_generator_respects_in_degree_bound(max_in):
    cfg = SyntheticDagConfig(num_nodes=30, min_max_in_degree=max_in, max_max_in_degree=max_in)
    reached = 0
    for g in generate_dags(40, max_in, cfg):
        indeg = [len(p) for p in g.predecessors()]
        assert g.num_nodes == 30 and max(indeg) <= max_in
        assert indeg[0] == 0 and all(d >= 1 for d in indeg[1:])  # one input, everything connected
        assert sum(v.param_bytes > 0 for v in g.nodes) > 0
        reached += max(indeg) == max_in
    assert reached > 0, f"no graph reached in-degree {max_in}: the bound is never exercised"


def test_generator_rejects_bad_config():
    with pytest.raises(HiertuneError, match="in-degree"):
        generate_dag(0, SyntheticDagConfig(min_max_in_degree=5, max_max_in_degree=2))


# ------------------------------------------------------------------------------ validity
def _graphs_of_several_sizes() -> list[OpGraph]:
    graphs = [generate_dag(s, SyntheticDagConfig(num_nodes=n)) for s, n in enumerate((1, 3, 6, 30, 30, 80, 200))]
    for name in ("mobilenet", "densenet121", "inceptionv3", "nasnetmobile"):
        if name in zoo_models("keras"):
            graphs.append(load_zoo_graph(name))
    return graphs


def test_random_net_sampled_plans_are_always_valid():
    """Even an untrained net sampling at random can only produce valid partitions."""
    torch.manual_seed(0)
    sched = PointerScheduler(PointerNet(PointerNetConfig(hidden=32, embed=16)).eval())
    gen = torch.Generator().manual_seed(0)
    from hiertune.policies.pointer_net import graph_features

    for g in _graphs_of_several_sizes()[:6]:
        gf = graph_features(g)
        for k in (1, 2, 4, 6):
            assert_valid_plan(g, sched.partition(g, k), k)
            if g.num_nodes >= k > 1:
                for _ in range(3):
                    pos = sched.net.decode(gf, k, sample=True, generator=gen)
                    plan = [0] * g.num_nodes
                    for p, v in enumerate(gf.order):
                        plan[v] = int(pos[p])
                    assert_valid_plan(g, plan, k)


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.exists(), reason="no shipped checkpoint")
def test_shipped_scheduler_plans_are_valid_on_synthetic_and_zoo_graphs():
    sched = load_default_scheduler(SchedulerConfig(samples=2))  # greedy + 2 sampled plans
    for g in _graphs_of_several_sizes():
        for k in ((2, 4, 6) if g.num_nodes <= 200 else (3, 6)):
            assert_valid_plan(g, sched.partition(g, k), k)


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.exists(), reason="no shipped checkpoint")
def test_shipped_scheduler_is_near_the_exact_optimum_on_small_graphs():
    """The trained net is a useful initialiser: close to the ILP optimum on held-out-style DAGs."""
    sched = load_default_scheduler()
    gaps = []
    for g in generate_dags(6, 12345):
        for k in (3, 5):
            exact = solve_partition(g, k, IlpConfig(solver="cpsat", time_limit_s=10))
            mine = evaluate_partition(g, sched.partition(g, k), k)
            assert mine[0] >= exact.objectives[0]  # nothing beats the optimum
            gaps.append(mine[0] / exact.objectives[0] - 1.0)
    assert float(np.mean(gaps)) < 0.10, f"mean peak-memory gap {np.mean(gaps):.1%} too large"


def test_best_of_samples_is_never_worse_than_greedy():
    torch.manual_seed(1)
    net = PointerNet(PointerNetConfig(hidden=32, embed=16)).eval()
    g = generate_dag(3)
    greedy = evaluate_partition(g, PointerScheduler(net, SchedulerConfig(samples=0)).partition(g, 4), 4)
    best = evaluate_partition(g, PointerScheduler(net, SchedulerConfig(samples=8)).partition(g, 4), 4)
    assert best <= greedy


def test_a_greedy_row_rides_along_without_changing_any_plan():
    """The scheduler decodes its greedy plan in the samples' batch: that row must be the greedy
    decode, and the sampled rows the very plans a batch without it draws."""
    net = load_default_scheduler().net
    gf = graph_features(load_zoo_graph("resnet50", "keras"))
    for k in (4, 6):
        alone = net.decode_many(gf, k, 4, sample=True, generator=torch.Generator().manual_seed(3))
        both = net.decode_many(gf, k, 5, sample=True, generator=torch.Generator().manual_seed(3), greedy_first=True)
        assert np.array_equal(both[0], net.decode(gf, k))
        assert np.array_equal(both[1:], alone)


def test_inference_cell_step_equals_the_trained_lstm_cell():
    """Inference runs the decoder cell from precomputed item gates; it must be the cell the net
    was trained with (same gates, same order), to float rounding."""
    torch.manual_seed(0)
    net = PointerNet(PointerNetConfig(hidden=32, embed=16)).eval()
    items = torch.randn(7, 32)
    glob = torch.randn(3, 12)
    hx, cx = torch.randn(3, 32), torch.randn(3, 32)
    last = torch.tensor([0, 4, 6])
    with torch.no_grad():
        want_h, want_c = net.decoder(torch.cat([items[last], glob], -1), (hx, cx))
        item_gates, state_weight = net.cell_projections(items)
        got_h, got_c = net.cell_step(item_gates[last], glob, hx, cx, state_weight)
    torch.testing.assert_close(got_h, want_h, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_c, want_c, rtol=1e-5, atol=1e-6)


def test_bad_inputs_give_clear_errors(tmp_path):
    sched = PointerScheduler(PointerNet(PointerNetConfig(hidden=16, embed=8)))
    with pytest.raises(HiertuneError, match="num_stages"):
        sched.partition(generate_dag(0), 0)
    with pytest.raises(HiertuneError, match="does not exist"):
        load_scheduler(tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(HiertuneError, match="cannot be loaded"):
        load_scheduler(bad)
    from hiertune.policies.train_pointer_net import main as train_main

    with pytest.raises(HiertuneError, match="--stages 1 4"):
        train_main(["--stages", "1", "4", "--out", str(tmp_path / "x.pt")])
    with pytest.raises(HiertuneError, match="does not exist"):  # before any label is solved
        train_main(["--init", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "x.pt")])


# ------------------------------------------------------------------------------ training
def test_a_few_training_steps_on_exact_labels_reduce_the_loss():
    graphs = generate_dags(8, 99)
    labels = label_dataset(graphs, (2, 4), _cpsat_labeler, progress=False)
    samples, skipped = make_samples(graphs, labels)
    assert len(samples) + skipped == 16 and len(samples) >= 12
    batch = collate(samples)
    cfg = TrainConfig(epochs=50, batch_size=len(samples), lr=2e-3, net=PointerNetConfig(hidden=64, embed=32))
    torch.manual_seed(0)
    net = PointerNet(cfg.net)
    before = float(net(batch).detach())
    net, history = train(samples, cfg, progress=False, net=net)
    after = float(net(batch).detach())
    assert after < 0.7 * before, f"loss {before:.3f} -> {after:.3f}: training does not learn"
    assert history[-1] < history[0]


def test_cosine_similarity_is_the_paper_reward():
    assert cosine_similarity([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    assert cosine_similarity([0, 0, 1], [0, 1, 1]) < 1.0


def _cpsat_labeler(graph: OpGraph, k: int) -> list[int]:
    return list(solve_partition(graph, k, IlpConfig(solver="cpsat", time_limit_s=10)).stages)


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.exists(), reason="no shipped checkpoint")
def test_injected_scheduler_ranks_samples_with_the_solves_cache():
    """`--cache-mb` must reach the sample ranking: the injected scheduler carries the solve's
    cache, shares one loaded network, and Inc-ILP's pointer start is that scheduler's plan."""
    from hiertune.platform.solver_actor import pointer_inc_ilp
    from hiertune.policies.pointer_net import default_scheduler
    from hiertune.solvers.incilp import IncIlpConfig

    small = 512 * 1024
    a, b = default_scheduler(small), default_scheduler()
    assert a.config.cache_bytes == small and b.config.cache_bytes == 8 * 1024**2
    assert a.net is b.net
    g = load_zoo_graph("mobilenetv2", "keras")
    res = pointer_inc_ilp(g, 4, IncIlpConfig(initial="pointer", ilp=IlpConfig(solver="cpsat", cache_bytes=small)))
    assert res.initial_source == "pointer" and res.initial_stages == a.partition(g, 4)


def test_batched_decode_state_equals_one_state_per_plan():
    """The decoder steps all its plans in one DecodeState: each row must see the masks and
    running features a state of its own would, whatever the other rows take."""
    from hiertune.policies.pointer_net import DecodeState

    rng = np.random.default_rng(0)
    for g, k in ((load_zoo_graph("inceptionv3", "tflite"), 5), (generate_dag(2), 3)):
        gf = graph_features(g)
        batch = DecodeState(gf, k, 4)
        single = [DecodeState(gf, k) for _ in range(4)]
        while not batch.finished:
            mask = batch.mask()
            assert np.array_equal(mask, np.concatenate([s.mask() for s in single]))
            assert np.allclose(batch.global_features(), np.concatenate([s.global_features() for s in single]))
            items = np.array([rng.choice(np.flatnonzero(row)) for row in mask])
            batch.step(items)
            for s, item in zip(single, items):
                s.step(np.array([item]))
        assert np.array_equal(batch.stages, np.concatenate([s.stages for s in single]))
        for row in batch.stages:
            plan = [0] * g.num_nodes
            for p, v in enumerate(gf.order):
                plan[v] = int(row[p])
            check_partition(g, plan, k)


def test_stage_budget_is_the_least_peak_along_the_topological_order():
    """The decoder measures stages against the order's least K-run peak: never below the even
    share or the largest node, reached by an actual split of the order, and far above the even
    share on a graph whose peak a few large layers decide (BERT-shaped, K = 16)."""
    from hiertune.policies.pointer_net import stage_budget
    from hiertune.solvers.order_split import split_order

    g = load_zoo_graph("bert_base", "tflite")
    gf = graph_features(g)
    for k in (2, 4, 16):
        budget = stage_budget(gf, k)
        assert budget >= max(1.0 / k, gf.param_share.max()) - 1e-12
        plan = split_order(g, gf.order, k)  # the best split of that same order
        peak = evaluate_partition(g, plan, k)[0]
        assert budget == pytest.approx(peak / gf.weights.sum())
        assert stage_budget(gf, k, "even") == 1.0 / k
    assert stage_budget(gf, 16) > 2.0 / 16
    with pytest.raises(HiertuneError, match="stage_budget"):
        PointerNetConfig(stage_budget="median")


def test_checkpoint_without_stage_budget_loads_as_even_without_mask(tmp_path):
    """Nets trained before the budget existed keep decoding as they were trained."""
    from hiertune.policies.pointer_net import save_checkpoint

    path = tmp_path / "old.pt"
    save_checkpoint(PointerNet(PointerNetConfig(hidden=16, embed=8)), path)
    blob = torch.load(str(path), weights_only=True)
    del blob["config"]["stage_budget"], blob["config"]["capacity_mask"]
    torch.save(blob, str(path))
    config = load_scheduler(path).net.config
    assert config.stage_budget == "even" and not config.capacity_mask
    with pytest.raises(HiertuneError, match="capacity_mask"):
        PointerNetConfig(stage_budget="even", capacity_mask=True)


def test_capacity_mask_keeps_plans_within_the_budget():
    """The budget is never below the optimum's peak; under the capacity mask the greedy split of
    the topological order stays decodable (the mask never forces it past the budget), and the
    shipped net's plan on a long graph with many stages stays within the budget (without the
    cut rule it cut early and overfilled its late stages)."""
    from hiertune.policies.pointer_net import DecodeState, stage_budget

    config = PointerNetConfig()
    assert config.capacity_mask and config.stage_budget == "order"
    for s, k in ((1, 2), (2, 4), (3, 6)):
        g = generate_dag(s, SyntheticDagConfig(num_nodes=30))
        gf = graph_features(g)
        peak = evaluate_partition(g, _cpsat_labeler(g, k), k)[0]
        assert peak <= stage_budget(gf, k) * gf.weights.sum() * (1 + 1e-9)
    for g, k in ((load_zoo_graph("inceptionv3", "tflite"), 4), (load_zoo_graph("efficientnetb7", "tflite"), 16)):
        gf = graph_features(g)
        st = DecodeState(gf, k, capacity_mask=True)
        nxt = 0
        while not st.finished:
            mask = st.mask()[0]
            take = nxt if nxt < gf.n and mask[nxt] else gf.n
            assert mask[take], "the greedy split of the order was masked off"
            st.step(np.array([take]))
            nxt += take < gf.n
        load = np.bincount(st.stages[0], weights=gf.param_share, minlength=k)
        assert load.max() <= stage_budget(gf, k) * (1 + 1e-9)
    g = load_zoo_graph("efficientnetb7", "tflite")
    plan = load_default_scheduler(SchedulerConfig(samples=0)).partition(g, 16)
    assert load_default_scheduler().net.config.capacity_mask
    budget = stage_budget(graph_features(g), 16) * sum(v.param_bytes for v in g.nodes)
    assert evaluate_partition(g, plan, 16)[0] <= budget * (1 + 1e-9)


def test_best_start_ranks_its_plans_after_exact_cut_placement():
    """`best` keeps the candidate the window would start best from: each plan is ranked after its
    cuts are placed exactly, not as it comes (a raw plan that is better can refine to a worse one)."""
    from hiertune.platform.solver_actor import pointer_inc_ilp
    from hiertune.policies.pointer_net import default_scheduler
    from hiertune.solvers.incilp import IncIlpConfig, initial_candidates
    from hiertune.solvers.order_split import refine_cuts

    for name in ("inceptionv3", "nasnetmobile"):
        g = load_zoo_graph(name, "tflite")
        refined = {source: evaluate_partition(g, refine_cuts(g, stages, 4), 4)
                   for stages, source in initial_candidates(g, 4, "best", scheduler=default_scheduler())}
        assert set(refined) == {"libcoral", "pointer"}
        res = pointer_inc_ilp(g, 4, IncIlpConfig(initial="best", gamma=2))
        assert tuple(res.refined_objectives) == min(refined.values())
        assert refined[res.initial_source] == min(refined.values())
