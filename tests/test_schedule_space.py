"""HARL schedule space on real MetaSchedule sketches: every edit type gives valid, correct programs."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from hiertune.envs import edit_actions as ea
from hiertune.workloads.tvm_support import make_target, prepare_tvm

prepare_tvm()


@pytest.fixture(scope="module")
def target():
    return make_target("llvm")


@pytest.fixture(scope="module")
def gmm(target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace

    return ScheduleSpace(create_te_workload("GMM", 0), target, seed=0)  # 1x128x128x128


@pytest.fixture(scope="module")
def c1d(target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace

    return ScheduleSpace(create_te_workload("C1D", 0), target, seed=0)  # padded conv1d: compute-at


def _run(state, target, inputs, out_shape):
    import tvm

    lib = tvm.compile(state.mod, target=target)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x, dev) for x in inputs] + [tvm.runtime.tensor(np.zeros(out_shape, "float32"), dev)]
    lib["main"](*args)
    return args[-1].numpy()


def check_gmm(state, target):
    rng = np.random.default_rng(1)
    x, y = rng.random((1, 128, 128), dtype=np.float32), rng.random((1, 128, 128), dtype=np.float32)
    np.testing.assert_allclose(_run(state, target, [x, y], (1, 128, 128)), x @ y, rtol=1e-4, atol=1e-4)


def check_c1d(state, target):
    # conv1d_nlc(N=1, L=256, CI=64, CO=128, kernel=3, stride=2, padding=1)
    rng = np.random.default_rng(2)
    x, w = rng.random((1, 256, 64), dtype=np.float32), rng.random((3, 64, 128), dtype=np.float32)
    pad = np.pad(x, ((0, 0), (1, 1), (0, 0)))
    ref = sum(pad[:, r: r + 256: 2, :] @ w[r] for r in range(3))
    np.testing.assert_allclose(_run(state, target, [x, w], (1, 128, 128)), ref, rtol=1e-4, atol=1e-3)


def tiles(space, state):
    return [state.decisions[s] for s in space.sketches[state.sketch].tile_slots]


def test_action_layout_roundtrip():
    seen = set()
    for a in range(ea.ACTION_DIM):
        edit = ea.decode(a)
        assert ea.encode(edit) == a
        seen.add(edit)
    assert len(seen) == ea.ACTION_DIM
    assert ea.decode(ea.NOOP).kind == "noop"
    assert ea.move_tile_factor((4, 1, 6, 2), 2, 1) == (4, 2, 3, 2)
    assert ea.move_tile_factor((4, 1, 6, 2), 1, 0) is None  # nothing to move from a 1
    assert ea.move_tile_factor((1, 1, 32, 64), 2, 3, max_innermost=64) is None
    assert ea.smallest_prime_factor(49) == 7 and ea.smallest_prime_factor(13) == 13
    # whole moves: all of a level in one edit ([2, 32] -> [64, 1]); a prime level is left to the prime move
    assert ea.move_tile_factor((2, 32), 1, 0, whole=True) == (64, 1)
    assert ea.move_tile_factor((4, 1, 3, 2), 2, 1, whole=True) is None
    assert ea.move_tile_factor((1, 4, 1, 16), 1, 3, max_innermost=32, whole=True) is None
    assert ea.decode(ea.encode(ea.Edit("tile", inst=3, src=1, dst=0, whole=True))).whole
    # largest-prime moves: the 7 out of 56 in one edit; a level with one distinct prime has none
    assert ea.largest_prime_factor(56) == 7 and ea.largest_prime_factor(64) == 2 and ea.largest_prime_factor(13) == 13
    assert ea.move_tile_factor((1, 56), 1, 0, largest=True) == (7, 8)
    assert ea.move_tile_factor((1, 32), 1, 0, largest=True) is None
    assert ea.move_tile_factor((1, 7), 1, 0, largest=True) is None
    assert ea.decode(ea.encode(ea.Edit("tile", inst=2, src=0, dst=3, largest=True))).largest


def test_random_fills_are_valid_and_deterministic(gmm, target):
    assert gmm.num_sketches == 3
    a = [gmm.random_state(k, np.random.default_rng(5)) for k in range(3)]
    b = [gmm.random_state(k, np.random.default_rng(5)) for k in range(3)]
    assert [s.key for s in a] == [s.key for s in b]
    for state in a:
        # read-back tile decisions: each loop's factors multiply to its extent (1, 128, 128, 128)
        assert [math.prod(f) for f in tiles(gmm, state)] == [1, 128, 128, 128]
        obs = gmm.observation(state, 0.25)
        assert obs.shape == (gmm.obs_dim,) and np.isfinite(obs).all() and obs[-1] == pytest.approx(0.25)
    check_gmm(a[0], target)


def test_tile_edits_keep_extents_and_stay_correct(gmm, target):
    state = gmm.random_state(0, np.random.default_rng(11))
    mask = gmm.action_mask(state)
    tile_actions = [a for a in np.flatnonzero(mask) if ea.decode(a).kind == "tile"]
    assert tile_actions
    # both kinds of tile edit are offered; a whole move only where the level's factor is composite
    assert {ea.decode(a).whole for a in tile_actions} == {False, True}
    t0 = time.perf_counter()
    for a in tile_actions:
        edit = ea.decode(a)
        new = gmm.apply(state, a)
        assert new is not state and new.key != state.key
        before, after = tiles(gmm, state)[edit.inst], tiles(gmm, new)[edit.inst]
        p = before[edit.src] if edit.whole else ea.smallest_prime_factor(before[edit.src])
        assert after[edit.src] * p == before[edit.src] and after[edit.dst] == before[edit.dst] * p
        assert [math.prod(f) for f in tiles(gmm, new)] == [1, 128, 128, 128]
    per_edit_ms = 1000 * (time.perf_counter() - t0) / len(tile_actions)
    print(f"tile edit (replay + postproc): {per_edit_ms:.1f} ms over {len(tile_actions)} edits")
    check_gmm(gmm.apply(state, tile_actions[0]), target)
    check_gmm(gmm.apply(state, tile_actions[-1]), target)


def test_unroll_edit_moves_index_and_annotation(gmm, target):
    state = gmm.random_state(1, np.random.default_rng(3))
    sk = gmm.sketches[state.sketch]
    slot = sk.cat_slots[0]
    step = 1 if state.decisions[slot] == 0 else -1
    new = gmm.apply(state, ea.encode(ea.Edit("unroll", inst=0, delta=step)))
    assert new.decisions[slot] == state.decisions[slot] + step
    unroll = [0, 16, 64, 512][new.decisions[slot]]
    script = new.mod.script()
    assert (f'"pragma_auto_unroll_max_step": {unroll}' in script) == (unroll > 0)
    check_gmm(new, target)


def test_parallel_edit_changes_fused_loops(gmm, target):
    from tvm import tirx

    from hiertune.envs import tir_loops

    state = gmm.random_state(0, np.random.default_rng(0))
    down = gmm.apply(state, ea.PARALLEL_OFFSET)
    assert down is not state and 0 < down.anchor_fused < state.anchor_fused
    for s in (state, down):
        loops = tir_loops.loops_above(s.mod["main"], "Z_update") or tir_loops.loops_above(s.mod["main"], "Z")
        assert loops[0].kind == tirx.ForKind.PARALLEL
        assert int(loops[0].extent) == math.prod(s.anchor_extents[: s.anchor_fused])
    # and back up again: the ladder step is reversible
    up = gmm.apply(down, ea.PARALLEL_OFFSET + 1)
    assert up.anchor_fused > down.anchor_fused
    check_gmm(down, target)


def test_compute_at_edit_steps_through_legal_locations(c1d, target):
    state = c1d.random_state(2, np.random.default_rng(4))
    slot = c1d.sketches[state.sketch].loc_slots[0]
    locs = [state.decisions[slot]]
    current = state
    t0 = time.perf_counter()
    n = 0
    for delta in (-1, -1, -1, 1, 1, 1, 1):
        nxt = c1d.apply(current, ea.encode(ea.Edit("compute_at", inst=0, delta=delta)))
        n += 1
        if nxt is current:  # at an end of the legal list: a no-op, now masked
            assert not c1d.action_mask(current)[ea.encode(ea.Edit("compute_at", inst=0, delta=delta))]
            continue
        assert (nxt.decisions[slot] - current.decisions[slot]) * delta > 0
        current = nxt
        locs.append(current.decisions[slot])
    print(f"compute-at edit: {1000 * (time.perf_counter() - t0) / n:.1f} ms per edit, locations {locs}")
    assert len(set(locs)) >= 2
    check_c1d(current, target)


def test_whole_moves_can_be_switched_off(gmm, target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace, SpaceConfig

    prime_only = ScheduleSpace(create_te_workload("GMM", 0), target, config=SpaceConfig(whole_tile_moves=False))
    state = prime_only.random_state(0, np.random.default_rng(11))
    kinds = [ea.decode(a) for a in np.flatnonzero(prime_only.action_mask(state))]
    assert any(e.kind == "tile" for e in kinds) and not any(e.whole for e in kinds)
    # the same state in the default space offers the whole moves on top, and nothing else changes
    both = gmm.action_mask(gmm.replay(state.sketch, state.decisions, state.parallel_extent))
    prime_mask = prime_only.action_mask(state)
    assert both[: ea.TILE_WHOLE_OFFSET].tolist() == prime_mask[: ea.TILE_WHOLE_OFFSET].tolist()
    assert both[ea.COMPUTE_AT_OFFSET:].tolist() == prime_mask[ea.COMPUTE_AT_OFFSET:].tolist()
    assert both[ea.TILE_WHOLE_OFFSET: ea.COMPUTE_AT_OFFSET].any()


def test_invalid_edits_are_masked_no_ops(gmm):
    state = gmm.random_state(2, np.random.default_rng(8))
    mask = gmm.action_mask(state)
    assert mask.shape == (gmm.action_dim,) == (ea.BASE_ACTION_DIM,) and mask[ea.NOOP]  # no opt-in block
    # padding beyond this task's instructions, and compute-at (GMM has none), are masked
    assert not mask[ea.encode(ea.Edit("tile", inst=ea.MAX_TILE_INSTS - 1, src=0, dst=1))]
    assert not mask[ea.COMPUTE_AT_OFFSET: ea.PARALLEL_OFFSET].any()
    # the batch loop has extent 1: no factor to move from any of its levels
    assert not mask[ea.encode(ea.Edit("tile", inst=0, src=0, dst=1))]
    for a in np.flatnonzero(~mask)[:50]:
        assert gmm.apply(state, int(a)) is state
    # parallel: no step beyond the ends of the ladder of fused-loop counts
    counts = sorted(state.ladder)
    assert mask[ea.PARALLEL_OFFSET] == (counts[0] < state.anchor_fused)
    assert mask[ea.PARALLEL_OFFSET + 1] == (counts[-1] > state.anchor_fused)


def test_edit_past_the_last_legal_location_is_a_masked_no_op(c1d):
    state = c1d.random_state(0, np.random.default_rng(6))
    up = ea.encode(ea.Edit("compute_at", inst=0, delta=1))
    for _ in range(20):  # the mask is optimistic for +1: the probe finds the end
        if not c1d.action_mask(state)[up]:
            break
        nxt = c1d.apply(state, up)
        if nxt is state:
            assert not c1d.action_mask(state)[up]  # learned: masked from now on
            break
        state = nxt
    else:
        pytest.fail("compute-at +1 never reached the end of the legal list")
    assert c1d.apply(state, up) is state


def test_state_roundtrips_through_records_and_database(gmm, target):
    from conftest import record_roundtrip

    state = gmm.apply(gmm.random_state(0, np.random.default_rng(9)), ea.PARALLEL_OFFSET)
    check_gmm(record_roundtrip(gmm, state, target), target)


def test_metaschedule_mutated_traces_map_back_to_the_same_program(c1d):
    """Records written by MetaSchedule's own search (its mutators) become states of the right
    sketch: C1D's sketches differ only in where the cache-write block sits."""
    import tvm
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    mutators = ms.Mutator.create("llvm")
    for m in mutators:
        m._initialize_with_tune_context(c1d.ctx)
    rng = np.random.default_rng(0)
    checked = 0
    for i in range(6):
        state = c1d.random_state(i % c1d.num_sketches, rng)
        for m in mutators:
            trace = m.apply(state.trace)
            if trace is None:
                continue
            sch = s_tir.Schedule(c1d.mod, seed=1)
            trace.apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            if not all(p.apply(sch) for p in c1d.postprocs):
                continue
            back = c1d.state_from_trace_json(sch.trace.as_json())
            assert back is not None, type(m).__name__
            tvm.ir.assert_structural_equal(back.mod, sch.mod)
            checked += 1
    assert checked >= 12


def test_compute_location_candidates_match_metaschedule(c1d):
    """The rebuilt CollectComputeLocation list equals what replay accepts (probing every index)."""
    rng = np.random.default_rng(12)
    for k in range(c1d.num_sketches):
        state = c1d.random_state(k, rng)
        sk = c1d.sketches[k]
        slot = sk.loc_slots[0]
        legal = set()
        for c in range(-2, 20):
            d = list(state.decisions)
            d[slot] = c
            sch = c1d._apply(sk, d, 1)
            legal.add(c1d._read_decisions(sch)[slot])  # replay rounds down to a legal location
        assert set(state.loc_candidates[0]) == legal


def test_largest_prime_moves_are_opt_in_and_move_the_largest_prime(target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace, SpaceConfig

    mod = create_te_workload("C2D", 1)  # 56x56 image: levels like 56 = 2^3 * 7, 28, 14
    plain = ScheduleSpace(mod, target)
    space = ScheduleSpace(mod, target, config=SpaceConfig(largest_prime_moves=True))
    state = space.random_state(0, np.random.default_rng(2))
    assert space.action_dim == ea.ACTION_DIM and plain.action_dim == ea.BASE_ACTION_DIM
    largest = [a for a in np.flatnonzero(space.action_mask(state)) if ea.decode(a).largest]
    assert largest, "a 56x56 conv has a level with two distinct primes"
    assert not any(ea.decode(a).largest for a in np.flatnonzero(plain.action_mask(state)))
    for a in largest[:4]:
        edit = ea.decode(a)
        before = tiles(space, state)[edit.inst]
        after = tiles(space, space.apply(state, a))[edit.inst]
        p = ea.largest_prime_factor(before[edit.src])
        assert p > ea.smallest_prime_factor(before[edit.src])
        assert after[edit.src] * p == before[edit.src] and after[edit.dst] == before[edit.dst] * p


def test_metaschedule_simplified_traces_map_back_to_states(gmm):
    # MetaSchedule stores traces simplified: the design space's unbound getters (GetConsumers
    # with no outputs) are gone. They still match their sketch and give back the same state.
    for sketch in range(gmm.num_sketches):
        state = gmm.random_state(sketch, np.random.default_rng(sketch))
        full = state.trace.as_json()
        simplified = state.trace.simplified(remove_postproc=False).as_json()
        assert len(simplified[0]) <= len(full[0])
        back = gmm.state_from_trace_json(simplified)
        assert back is not None and back.key == state.key
    dropped = [i for i in gmm.sketches[0].insts if i.kind.name == "GetConsumers" and not i.outputs]
    assert dropped, "the GEMM sketch has an unbound GetConsumers that simplification drops"


def test_a_stored_trace_without_the_sketchs_dead_getter_still_matches_it() -> None:
    """MetaSchedule stores traces simplified: a getter whose block no later instruction uses
    (a fused epilogue's GetSBlock) is dropped and the variables are renumbered. Such a record
    must still match its sketch, and a record that differs in a live instruction must not."""
    from hiertune.envs.schedule_space import _instruction_shape, _live_positions

    sketch = [
        ["GetSBlock", [], ["matmul", "main"], ["b0"]],
        ["GetSBlock", [], ["T_add", "main"], ["b1"]],  # fetched, never used
        ["GetSBlock", [], ["root", "main"], ["b2"]],
        ["GetLoops", ["b0"], [], ["l3", "l4"]],
        ["SamplePerfectTile", ["l3"], [2, 64], ["v5", "v6"]],
        ["Split", ["l3", "v5", "v6"], [True, False], ["l7", "l8"]],
        ["Annotate", ["b2", 16], ["meta_schedule.parallel"], []],
    ]
    stored = [
        ["GetSBlock", [], ["matmul", "main"], ["b0"]],
        ["GetSBlock", [], ["root", "main"], ["b1"]],
        ["GetLoops", ["b0"], [], ["l2", "l3"]],
        ["SamplePerfectTile", ["l2"], [2, 64], ["v4", "v5"]],
        ["Split", ["l2", "v4", "v5"], [True, False], ["l6", "l7"]],
        ["Annotate", ["b1", 64], ["meta_schedule.parallel"], []],  # a mutated parallel extent
    ]
    assert _live_positions(sketch) == [0, 2, 3, 4, 5, 6]
    assert _instruction_shape(stored) == _instruction_shape(sketch)
    other = [*stored[:5], ["Annotate", ["b0", 64], ["meta_schedule.parallel"], []]]  # another block
    assert _instruction_shape(other) != _instruction_shape(sketch)


def test_gpu_fills_with_threads_out_of_range_are_rejected_before_the_postprocs(gmm):
    """On a GPU sketch most random fills bind fewer threads than a warp (or more than a block
    holds). The space rejects those from the replayed loops, before the postprocs; the check must
    never reject a fill that MetaSchedule's postprocs (VerifyGPUCode) accept. No GPU needed."""
    assert not gmm.bounds_threads and not any(sketch.thread_ranges for sketch in gmm.sketches)  # CPU: untouched
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs import tir_loops
    from hiertune.envs.schedule_space import ScheduleSpace

    space = ScheduleSpace(create_te_workload("GMM", 0), make_target("cuda"), seed=0)
    rng = np.random.default_rng(0)
    rejected = accepted = drawn = 0
    for sketch in space.sketches:
        for _ in range(12):
            sch = space._apply(sketch, None, int(rng.integers(1, 2**31 - 1)))
            if sch is None:
                continue
            drawn += 1
            out_of_range = tir_loops.thread_extents_out_of_range(sch.mod["main"])
            sch.enter_postproc()
            ok = all(postproc.apply(sch) for postproc in space.postprocs)
            assert not (out_of_range and ok), "the thread check rejected a fill the postprocs accept"
            rejected += out_of_range
            accepted += ok
    assert rejected > 0 and accepted > 0
    # read from the trace, the same range holds before any replay: fills are drawn within it and
    # the mask hides tile edits that leave it
    assert all(sketch.thread_ranges for sketch in space.sketches)
    replays = space.stats["replays"]
    fills = [space.random_state(0, np.random.default_rng(seed)) for seed in range(4)]
    assert not any(tir_loops.thread_extents_out_of_range(state.sch.mod["main"]) for state in fills)
    assert (space.stats["replays"] - replays) / len(fills) <= 0.5 * drawn / accepted  # replays per valid fill
    sketch = space.sketches[fills[0].sketch]
    for action in np.flatnonzero(space.action_mask(fills[0])):
        edit = ea.decode(int(action))
        if edit.kind == "tile":
            slot = sketch.tile_slots[edit.inst]
            moved = ea.move_tile_factor(fills[0].decisions[slot], edit.src, edit.dst,
                                        sketch.tile_max_innermost[edit.inst], edit.whole, edit.largest)
            assert space._threads_hold(sketch, fills[0].decisions, slot, moved)


def test_tile_draws_follow_tvms_perfect_tile_distribution():
    """Fills drawn by `gpu_threads.sample_tile` must not bias the search: uniform over the perfect
    tilings within the innermost cap, as TVM's SamplePerfectTile. 512 into 4 levels, innermost
    <= 64: innermost 2^k in C(11 - k, 2) of the 210 tilings."""
    from math import comb

    from hiertune.envs.gpu_threads import sample_tile

    rng = np.random.default_rng(0)
    draws = [sample_tile(512, 4, 64, rng) for _ in range(4000)]
    assert all(np.prod(d) == 512 and d[-1] <= 64 for d in draws)
    for k in range(7):
        expected = comb(11 - k, 2) / 210
        assert abs(sum(d[-1] == 2**k for d in draws) / len(draws) - expected) < 0.025


def test_a_sketch_out_of_fresh_fills_repeats_an_earlier_one(gmm):
    """When every try of a random fill fails (GPU sketches that VerifyGPUCode nearly always
    rejects), the space hands back one of the sketch's earlier fills instead of stopping the
    search; a sketch that never had a valid fill is still an error that says so."""
    from dataclasses import replace

    from hiertune.envs.schedule_space import ScheduleSpace
    from hiertune.errors import HiertuneError

    first = gmm.random_state(0, np.random.default_rng(5))
    tries = gmm.config.random_fill_tries
    gmm.config = replace(gmm.config, random_fill_tries=0)  # every try "fails": none is made
    try:
        again = gmm.random_state(0, np.random.default_rng(6))
        assert again.key in {s.key for s in gmm._fills[0]} and gmm.stats["repeated_fills"] == 1
        assert first.key in {s.key for s in gmm._fills[0]}
        fresh = ScheduleSpace(gmm.mod, gmm.target, seed=0, config=gmm.config)
        with pytest.raises(HiertuneError, match="no valid random fill"):
            fresh.random_state(0, np.random.default_rng(0))
    finally:
        gmm.config = replace(gmm.config, random_fill_tries=tries)


@pytest.mark.parametrize("factors, extent", [((4, 2, 8, 16), 512), ((4, 2, 8, 16), 448), ((1, 7, 1, 8), 224),
                                             ((2, 3), 7), ((64, 1, 1, 1), 1)])
def test_fit_tile_keeps_the_product_and_the_inner_levels_where_they_divide(factors, extent):
    from hiertune.envs.schedule_space import fit_tile

    fitted = fit_tile(factors, extent, 64)
    assert math.prod(fitted) == extent and len(fitted) == len(factors)
    assert all(f <= d for f, d in zip(fitted[1:], factors[1:]))  # inner levels never grow
    if extent % factors[-1] == 0:
        assert fitted[-1] == factors[-1]
    assert fit_tile(factors, math.prod(factors), 64) == tuple(factors)  # same extent: unchanged
    assert fit_tile((1, 1, 128), 256, 16)[-1] == 16  # the innermost cap holds


def test_transfer_replays_another_shapes_schedule_with_its_inner_tiles(gmm, target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace

    other = ScheduleSpace(create_te_workload("GMM", 1), target, seed=0)  # 1x512x512x512
    source = other.random_state(0, np.random.default_rng(3))
    moved = gmm.transfer(source)
    assert moved is not None and moved.space is gmm
    donor, sk = other.sketches[source.sketch], gmm.sketches[moved.sketch]
    for slot, extent in zip(sk.tile_slots, sk.tile_extents):
        assert math.prod(moved.decisions[slot]) == extent
        if extent % source.decisions[slot][-1] == 0:
            assert moved.decisions[slot][-1] == source.decisions[slot][-1]
    assert [moved.decisions[s] for s in sk.cat_slots] == [source.decisions[s] for s in donor.cat_slots]
    check_gmm(moved, target)
    c1d = ScheduleSpace(create_te_workload("C1D", 0), target, seed=0)
    assert c1d.transfer(source) is None  # a conv's sketches sample other decisions: nothing fits
