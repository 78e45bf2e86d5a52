"""Padded sketches: a GEMM whose rows have no useful divisor gets sketches on padded loops, whose
schedules compute the right answer, go through records and databases, and tile the rows."""

from __future__ import annotations

import numpy as np
import pytest

from hiertune.envs import edit_actions as ea
from hiertune.envs.padding import awkward
from hiertune.workloads.tvm_support import make_target, prepare_tvm

prepare_tvm()

ROWS, DEPTH, COLS = 67, 32, 64  # 67 is a prime: MetaSchedule tiles those rows by 1 or 67 only


@pytest.fixture(scope="module")
def target():
    return make_target("llvm")


def matmul_bias(rows: int = ROWS):
    """(1, rows, DEPTH) @ (DEPTH, COLS) + bias, as a network's fused dense layer reads."""
    import tvm
    from tvm import te

    a = te.placeholder((1, rows, DEPTH), name="A")
    b = te.placeholder((DEPTH, COLS), name="B")
    bias = te.placeholder((COLS,), name="bias")
    k = te.reduce_axis((0, DEPTH), name="k")
    c = te.compute((1, rows, COLS), lambda n, i, j: te.sum(a[n, i, k] * b[k, j], axis=k), name="T_matmul")
    d = te.compute((1, rows, COLS), lambda n, i, j: c[n, i, j] + bias[j], name="T_add")
    return tvm.IRModule({"main": te.create_prim_func([a, b, bias, d])})


@pytest.fixture(scope="module")
def space(target):
    from hiertune.envs.schedule_space import ScheduleSpace

    return ScheduleSpace(matmul_bias(), target, seed=0)


def run_matmul(state, target) -> None:
    import tvm

    rng = np.random.default_rng(3)
    x, w, bias = (rng.random(s, dtype=np.float32) for s in ((1, ROWS, DEPTH), (DEPTH, COLS), (COLS,)))
    lib = tvm.compile(state.mod, target=target)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(v, dev) for v in (x, w, bias, np.zeros((1, ROWS, COLS), "float32"))]
    lib["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), x @ w + bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("extent", "expected"), [
    (197, True), (257, True), (577, True), (67, True),  # primes: ViT-B/16, CLIP ViT-L/14, ViT at 384
    (200, False), (1000, False), (49, False), (3072, False),  # a multiple, or a divisor in 4..16
    (17, False), (61, False),  # under 8 multiples: left as they are
])
def test_awkward_lengths_are_long_ones_without_a_tile_sized_divisor(extent, expected):
    assert awkward(extent, 8) is expected


def test_a_prime_row_count_gets_padded_sketches_that_tile_the_rows(space, target):
    padded = [sk for sk in space.sketches if sk.padded]
    own = [sk for sk in space.sketches if not sk.padded]
    assert own and len(padded) == len(own)
    assert all(sk.tile_extents[1] == ROWS for sk in own)
    assert all(sk.tile_extents[1] == 72 for sk in padded)  # 67 up to a multiple of 8
    rng = np.random.default_rng(0)
    for sk in padded:
        state = space.random_state(sk.index, rng)
        run_matmul(state, target)
    # an edit moves a padded row tile like any other; the result is still right
    state = space.random_state(padded[0].index, rng)
    for action in range(ea.BASE_ACTION_DIM):
        moved = space.apply(state, action)
        if moved.decisions[padded[0].tile_slots[1]] != state.decisions[padded[0].tile_slots[1]]:
            run_matmul(moved, target)
            break
    else:
        pytest.fail("no edit moved the padded row tile")


def test_a_padded_schedule_goes_through_records_and_the_database_on_the_tasks_own_program(space, target):
    from conftest import record_roundtrip

    sketch = next(sk.index for sk in space.sketches if sk.padded)
    state = space.random_state(sketch, np.random.default_rng(5))
    assert state.trace.insts[1].kind.name == "PadEinsum"  # replayed on the unpadded task, as a model's is
    run_matmul(record_roundtrip(space, state, target), target)


def test_padding_is_off_at_zero_and_never_touches_divisible_or_convolution_tasks(target):
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from hiertune.envs.schedule_space import ScheduleSpace, SpaceConfig

    off = ScheduleSpace(matmul_bias(), target, config=SpaceConfig(pad_multiple=0))
    assert not any(sk.padded for sk in off.sketches)
    assert not any(sk.padded for sk in ScheduleSpace(matmul_bias(64), target).sketches)
    conv = ScheduleSpace(create_te_workload("C1D", 0), target)  # 256 -> 128 outputs: fine as they are
    assert not any(sk.padded for sk in conv.sketches)


def test_the_paper_ablation_searches_metaschedules_sketches_only():
    from hiertune.platform.harl_search import ABLATIONS

    assert ABLATIONS["paper"]["space.pad_multiple"] == 0
    assert ABLATIONS["no-padding"] == {"space.pad_multiple": 0}
