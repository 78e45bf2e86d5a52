"""The HARL vs MetaSchedule suite's ratio arithmetic (bench/harl_vs_metaschedule.py), no tuning.

The README's headline numbers come from these functions, so the edge cases are pinned here:
a HARL run that never reaches MetaSchedule's best counts its whole budget and is flagged; the
geomeans skip missing values; the GEMM-L ratio uses numpy's best call.
"""

from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("harl_vs_metaschedule")


def _run(curve, search_s_per_trial):
    return {"trials": len(curve), "best_ms": min(c for c in curve if c is not None), "curve_ms": curve,
            "search_s_per_trial": search_s_per_trial}


def test_trials_to_reach_first_hit_and_never(bench):
    assert bench.trials_to_reach([None, 3.0, 2.0, 1.0], 2.0) == 3
    assert bench.trials_to_reach([3.0, 2.5], 2.0) is None
    assert bench.trials_to_reach([3.0], None) is None


def test_pair_ratios_counts_budget_when_never_reached(bench):
    reached = {"harl": _run([4.0, 2.0, 1.0, 1.0], 0.2), "metaschedule": _run([5.0, 3.0, 2.0, 2.0], 0.4)}
    r = bench.pair_ratios(reached)
    assert r["reached"] and r["harl_trials_to_reach_ms_best"] == 2
    assert r["trials_ratio"] == pytest.approx(0.5)
    assert r["latency_ratio"] == pytest.approx(0.5)
    assert r["search_overhead_ratio"] == pytest.approx(0.5)
    missed = {"harl": _run([4.0, 3.0, 3.0, 3.0], 0.2), "metaschedule": _run([5.0, 3.0, 2.0, 2.0], 0.4)}
    r = bench.pair_ratios(missed)
    assert not r["reached"] and r["harl_trials_to_reach_ms_best"] == 4 and r["trials_ratio"] == pytest.approx(1.0)


def test_a_pair_resumed_from_a_killed_run_has_no_time_ratios(bench):
    """A tuner that found its trials already recorded spent no search time on them: its seconds
    per trial would make the overhead ratio meaningless (one such pair once read 262,353)."""
    pair = {"harl": {**_run([4.0, 2.0, 1.0, 1.0], 0.2), "elapsed_s": [1.0, 2.0, 3.0, 4.0]},
            "metaschedule": {**_run([5.0, 3.0, 2.0, 2.0], 1e-6), "elapsed_s": [-9.0, -8.0, -7.0, -6.0],
                             "resumed_trials": 4}}
    r = bench.run_ratios(pair)
    assert r["search_overhead_ratio"] is None and r["time_to_quality_ratio"] is None
    assert r["latency_ratio"] == pytest.approx(0.5) and r["reached"]
    pair["metaschedule"].update(resumed_trials=0, search_s_per_trial=0.4, elapsed_s=[1.0, 2.0, 4.0, 8.0])
    r = bench.run_ratios(pair)
    assert r["search_overhead_ratio"] == pytest.approx(0.5) and r["time_to_quality_ratio"] == pytest.approx(0.5)


def test_summarise_geomeans_gemm_and_ablations(bench):
    pair_a = {"seed": 0, "harl": _run([2.0, 1.0], 0.1), "metaschedule": _run([4.0, 4.0], 0.4)}
    pair_b = {"seed": 0, "harl": _run([8.0, 8.0], 0.1), "metaschedule": _run([4.0, 4.0], 0.1)}
    for pair in (pair_a, pair_b):
        pair["ratios"] = bench.pair_ratios(pair)
    summary = {
        "operators": {"GMM-S": {"trials": 2, "runs": [pair_a]}, "GMM-L": {"trials": 2, "runs": [pair_b]}},
        "numpy_sgemm": {"gflops": 2 * 1024**3 / 4e-3 / 1e9, "gflops_median": 2 * 1024**3 / 8e-3 / 1e9, "threads": 1},
        "ablations": {"fixed_length": {"GMM-S": {"latency_ratio_fixed_over_adaptive": 1.21,
                                                 "search_ratio_fixed_over_adaptive": 1.0}}},
    }
    bench.summarise(summary)
    assert summary["geomean_latency_ratio"] == pytest.approx(math.sqrt(0.25 * 2.0))
    assert summary["geomean_trials_ratio"] == pytest.approx(math.sqrt(0.5 * 1.0))
    assert summary["trials_ratio_unreached"] == ["GMM-L"]
    assert summary["worst_operator_latency_ratio"][0] == "GMM-L"
    # HARL's GMM-L best is 8 ms, numpy's best call 4 ms: half the GFLOPS
    assert summary["gemm_l_vs_numpy"] == pytest.approx(0.5)
    assert summary["gemm_l"]["vs_numpy_median"] == pytest.approx(1.0)
    assert summary["ablation_fixed_over_adaptive_latency"] == pytest.approx(1.21)
    assert "| **geomean (operators)** |" in bench.markdown_table({**summary, "command": "x"})
