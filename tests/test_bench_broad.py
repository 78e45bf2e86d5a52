"""The broad HARL vs MetaSchedule suite's arithmetic (bench/harl_vs_metaschedule.py) on fixed
numbers: the bootstrap interval, time to quality, the per-half summary of a partial run."""

from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("harl_vs_metaschedule")


def _pair(bench, seed, harl_curve, ms_curve, harl_s, ms_s):
    pair = {"seed": seed,
            bench.HARL: {"curve_ms": harl_curve, "best_ms": min(harl_curve), "trials": len(harl_curve),
                         "elapsed_s": harl_s, "search_s_per_trial": 0.1},
            bench.MS: {"curve_ms": ms_curve, "best_ms": min(ms_curve), "trials": len(ms_curve),
                       "elapsed_s": ms_s, "search_s_per_trial": 0.2}}
    pair["ratios"] = bench.run_ratios(pair)
    return pair


def test_bootstrap_ci90_brackets_the_geomean_and_narrows_with_agreement(bench):
    values = [0.7, 0.8, 0.9, 1.0, 1.1, 1.3]
    lo, hi = bench.bootstrap_ci90(values)
    g = bench.geomean(values)
    assert lo < g < hi and lo >= min(values) and hi <= max(values)
    assert bench.bootstrap_ci90(values) == [lo, hi]  # fixed seed: repeatable
    assert bench.bootstrap_ci90([0.9] * 6) == pytest.approx([0.9, 0.9])
    wide = bench.bootstrap_ci90([0.5, 1.5, 0.5, 1.5])
    assert wide[1] - wide[0] > hi - lo
    assert bench.bootstrap_ci90([]) is None


def test_time_to_quality_counts_wall_seconds_to_ms_final_best(bench):
    # MS reaches its final best 2.0 at its 3rd trial (30 s); HARL gets to 2.0 at its 2nd (5 s)
    pair = _pair(bench, 0, [3.0, 1.9, 1.8], [4.0, 3.0, 2.0], [2.0, 5.0, 8.0], [10.0, 20.0, 30.0])
    r = pair["ratios"]
    assert r["harl_s_to_ms_best"] == 5.0 and r["ms_s_to_ms_best"] == 30.0
    assert r["time_to_quality_ratio"] == pytest.approx(5.0 / 30.0)
    never = _pair(bench, 0, [3.0, 2.5, 2.1], [4.0, 3.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert never["ratios"]["time_to_quality_ratio"] is None and not never["ratios"]["reached"]


def test_half_summary_of_a_partial_run(bench):
    win = _pair(bench, 0, [3.0, 1.0], [3.0, 2.0], [1.0, 2.0], [1.0, 4.0])  # ratio 0.5
    lose = _pair(bench, 1, [3.0, 2.5], [3.0, 2.0], [1.0, 2.0], [1.0, 4.0])  # ratio 1.25
    cases = {
        "DEP:1": {"kind": "operator", "family": "DEP", "trials": 64, "seeds": [0, 1], "runs": [win, lose]},
        "SFM:1": {"kind": "operator", "family": "SFM", "trials": 64, "seeds": [0, 1], "runs": [lose]},
        "C2D:1": {"kind": "operator", "family": "C2D", "trials": 64, "seeds": [0, 1], "runs": []},
        "GMM-L@256": {"kind": "long", "family": "GMM", "trials": 256, "seeds": [0], "runs": [win]},
    }
    s = bench.half_summary(cases)
    dep = math.sqrt(0.5 * 1.25)
    assert s["case_stats"]["DEP:1"]["latency_ratio"] == pytest.approx(dep)
    assert s["case_stats"]["DEP:1"]["spread"]["latency_ratio_min"] == pytest.approx(0.5)
    assert s["case_stats"]["DEP:1"]["spread"]["latency_ratio_max"] == pytest.approx(1.25)
    assert s["geomean_latency_ratio"] == pytest.approx(math.sqrt(dep * 1.25))  # the 64-trial cases only
    assert s["geomean_latency_ratio_256"] == pytest.approx(0.5)
    assert s["families_lost"] == ["SFM"]  # DEP's geomean over its two seeds is below 1
    assert s["worst_latency_ratio"][0] == "SFM:1"
    assert s["reached_fraction"] == pytest.approx(2 / 4)  # 2 of the 4 finished pairs reached MS's best
    assert s["unreached"] == ["DEP:1", "SFM:1"]
    assert s["cases_done"] == 2 and s["cases_planned"] == 4  # DEP:1 (both seeds) and GMM-L@256
    assert s["pairs_done"] == 4 and s["pairs_planned"] == 7
    assert s["time_to_quality_ratio"] == pytest.approx(0.5)  # HARL 2 s vs MS 4 s where reached


def test_broad_plan_halves_are_disjoint_and_cover_every_family(bench):
    from hiertune.workloads.operators import OPERATOR_FAMILIES

    select, report = bench.broad_plan(bench.BROAD_SELECT), bench.broad_plan(bench.BROAD_REPORT)
    assert {c["family"] for c in select} == set(OPERATOR_FAMILIES)
    assert all(c["seeds"] == [0, 1] and c["trials"] == 64 for c in select)
    assert not {c["key"] for c in select} & {c["key"] for c in report}
    assert sum(c["key"].endswith(":b16") for c in report) == 5
    assert sum(c["trials"] == 256 for c in report) == 4


def test_a_narrowed_plan_keeps_another_budget_under_its_own_keys(bench):
    plan = bench.narrow_plan(bench.broad_plan(bench.BROAD_SELECT), ["DEP:1", "TBG:1"], 256, [1])
    assert [(c["key"], c["workload"], c["trials"], c["seeds"]) for c in plan] == [
        ("DEP:1@256", "DEP:1", 256, [1]), ("TBG:1@256", "TBG:1", 256, [1])]
    assert len(bench.narrow_plan(bench.broad_plan(bench.BROAD_SELECT))) == 13  # nothing asked: the whole half
    again = bench.narrow_plan(bench.broad_plan(bench.BROAD_REPORT), ["GRP:2"], seeds=[1, 2])
    assert [(c["key"], c["seeds"]) for c in again] == [("GRP:2", [1, 2])]  # seeds it did not plan, run anew


def test_retimed_ratios_sit_beside_the_search_time_ones(bench):
    win = _pair(bench, 0, [3.0, 1.0], [3.0, 2.0], [1.0, 2.0], [1.0, 4.0])  # search-time ratio 0.5
    lose = _pair(bench, 1, [3.0, 2.5], [3.0, 2.0], [1.0, 2.0], [1.0, 4.0])  # 1.25
    win["retimed"] = {"latency_ratio_median": 0.9}  # side by side, HARL's margin was mostly luck
    lose["retimed"] = {"latency_ratio_median": 1.1}
    cases = {
        "DEP:1": {"kind": "operator", "family": "DEP", "trials": 64, "seeds": [0], "runs": [win]},
        "SFM:1": {"kind": "operator", "family": "SFM", "trials": 64, "seeds": [0], "runs": [lose]},
        "C2D:1": {"kind": "operator", "family": "C2D", "trials": 64, "seeds": [0],
                  "runs": [_pair(bench, 0, [1.0], [2.0], [1.0], [1.0])]},  # not re-timed yet
    }
    s = bench.half_summary(cases)
    assert s["case_stats"]["DEP:1"]["latency_ratio_retimed"] == pytest.approx(0.9)
    assert s["case_stats"]["C2D:1"]["latency_ratio_retimed"] is None
    assert s["geomean_latency_ratio_retimed"] == pytest.approx(math.sqrt(0.9 * 1.1))  # re-timed cases only
    assert s["cases_retimed"] == 2 and s["geomean_latency_ratio_256_retimed"] is None
    assert s["worst_latency_ratio_retimed"][0] == "SFM:1"
    assert s["families_lost_retimed"] == ["SFM"]


def test_an_ab_arm_meets_the_stored_metaschedule_best_only_on_the_same_cpu(bench):
    """Sessions land on different hosts (a GEMM's best moved 2x between two): an A/B arm's
    `over_ms` uses a stored MetaSchedule best only when that pair ran on this kind of CPU."""
    stored = {"GMM:1": {"runs": [_pair(bench, 0, [2.0, 1.0], [3.0, 1.5], [1.0, 2.0], [1.0, 2.0])]}}
    assert bench.baseline_ms(stored, "GMM:1", 0, "znver4") is None  # pair without a recorded CPU
    stored["GMM:1"]["runs"][0]["host_cpu"] = "znver5"
    assert bench.baseline_ms(stored, "GMM:1", 0, "znver4") is None
    assert bench.baseline_ms(stored, "GMM:1", 0, "znver5") == 1.5
    assert bench.baseline_ms(stored, "GMM:1", 1, "znver5") is None  # no pair of that seed


def test_round_hits_count_rounds_after_a_stall(load_bench, tmp_path) -> None:
    import json

    hits = load_bench("round_hits")
    run = [("W", 4.0), ("S", 2.0), ("S", 3.0), ("S", 2.5), ("E", 2.2), ("S", 2.1), ("S", 2.4), ("S", 1.0)]
    # after W, S+ the best 2.0 stalls for two S rounds; the E round after them finds nothing and
    # starts the count again, so only the last S (after two more misses) counts, and it halves the best
    assert hits.after_stall(run, 2) == [("E", None), ("S", 2.0)]
    records = tmp_path / "r.jsonl"
    measure = {"kind": "measure", "task": "GMM-S", "record": {}}
    lines = [{**measure, "key": "a", "tuner": "harl", "round": 1, "searched": None, "latencies_s": [4.0]},
             {**measure, "key": "b", "tuner": "harl", "round": 1, "searched": None, "latencies_s": None},
             {**measure, "key": "c", "tuner": "harl", "round": 9, "searched": None, "spread": True, "explore": True,
              "latencies_s": [3.0]},
             {**measure, "key": "d", "tuner": "metaschedule", "round": 9, "latencies_s": [0.1]}]
    records.write_text("\n".join(json.dumps(line) for line in lines))
    assert hits.rounds(records) == [("W", 4.0), ("E", 3.0)]


def test_an_ab_plot_draws_one_panel_per_option(bench, tmp_path):
    summary = {"ab": {"x=1": {"GMM:1@0": {"option_over_defaults": 0.8}, "C2D:1@0": {"option_over_defaults": 1.25}},
                      "y=2": {}}}
    path = tmp_path / "ab.png"
    bench.plot_ab(summary, path)
    assert path.stat().st_size > 0
    bench.plot_ab({"ab": {"y=2": {}}}, tmp_path / "none.png")  # nothing finished: no figure
    assert not (tmp_path / "none.png").exists()


def test_a_network_task_key_is_cut_for_its_tick_label_but_keeps_its_seed(bench):
    long = "bert-2l/fused_fast_softmax_cast2_tir_logical_not1_full_where1_broadcast_to5@1"
    label = bench.case_label(long)
    assert len(label) < 32 and label.startswith("bert-2l/fused") and label.endswith("@1")
    assert bench.case_label("C2D:2@256@0") == "C2D:2@256@0"


def test_ab_ratios_by_trial_read_both_curves_at_each_checkpoint(bench):
    arms = {"A@0": {"option": {"curve_ms": [None, 4.0, 2.0, 1.0]}, "defaults": {"curve_ms": [3.0, 2.0, 2.0, 2.0]}},
            "B@0": {"option": {"curve_ms": [2.0, 2.0]}, "defaults": {"curve_ms": [1.0, 1.0]}}}
    by_trial = bench.ab_ratios_by_trial(arms, checkpoints=(1, 2, 4, 8))
    assert by_trial["1"]["pairs"] == 1 and by_trial["1"]["geomean"] == pytest.approx(2.0)  # A had no schedule yet
    assert by_trial["2"]["pairs"] == 2 and by_trial["2"]["geomean"] == pytest.approx(2.0)
    assert by_trial["4"] == {"geomean": pytest.approx(0.5), "ci90": [pytest.approx(0.5), pytest.approx(0.5)], "pairs": 1}
    assert "8" not in by_trial  # no run went that far


def test_space_options_are_typed_by_their_field(bench):
    options = bench.parse_space_options(["largest_prime_moves=1", "episode.start_pool=4", "candidates.epsilon=0.1",
                                         "candidates.cross_source=transplant"])
    assert options == {"space.largest_prime_moves": True, "episode.start_pool": 4, "candidates.epsilon": 0.1,
                       "candidates.cross_source": "transplant"}
    assert bench.parse_space_options(["episode.elite_fraction_late=0.5"]) == {"episode.elite_fraction_late": 0.5}
    assert bench.parse_space_options(["episode.elite_fraction_late=none"]) == {"episode.elite_fraction_late": None}
    with pytest.raises(SystemExit, match="HarlConfig.episode has"):
        bench.parse_space_options(["episode.no_such_knob=1"])


def test_a_resumed_broad_half_refuses_another_harl_configuration(bench, tmp_path):
    import argparse
    import json

    out = tmp_path / "broad.json"
    out.write_text(json.dumps({"cases": {"GMM:2": {"runs": [{"seed": 0}]}}}))  # ran before --harl-option existed
    args = argparse.Namespace(out=str(out), suite=bench.BROAD_REPORT, runner_cores=1, elite_starts=0.5,
                              harl_option=["cost_model.prior=builtin"])
    with pytest.raises(SystemExit, match="--harl-option none.*cost_model.prior"):
        bench.run_broad(args)
    args.harl_option, args.cache_flush = [], True  # a warm file resumed cold
    with pytest.raises(SystemExit, match="timed warm; this run times cold: pass --no-cache-flush"):
        bench.run_broad(args)


@pytest.mark.parametrize("suite, space_option", [(None, []), ("quick", []), ("broad-select", ["episode.tracks=16"])],
                         ids=["single", "quick", "ab"])
def test_cache_flush_is_refused_where_the_timing_is_not_written_down(bench, suite, space_option):
    import argparse

    args = argparse.Namespace(cache_flush=True, suite=suite, space_option=space_option)
    with pytest.raises(SystemExit, match="--cache-flush times the pairs of a broad half"):
        bench.check_cache_flush(args)
    args.cache_flush = False
    bench.check_cache_flush(args)
    bench.check_cache_flush(argparse.Namespace(cache_flush=True, suite=bench.BROAD_REPORT, space_option=[]))


def test_two_runs_of_a_half_merge_case_by_case_and_refuse_to_mix(bench, tmp_path):
    import json

    def half(path, seed, harl_curve, options=None, host="znver4"):
        case = {"kind": "operator", "family": "GRP", "trials": 64, "seeds": [seed],
                "runs": [_pair(bench, seed, harl_curve, [3.0, 2.0], [1.0, 2.0], [1.0, 4.0])]}
        setup = {"harl_options": options or {}, "host_cpus": [host]}
        path.write_text(json.dumps({"commands": [f"seed {seed}"], "setup": setup, "cases": {"GRP:2": case}}))
        return str(path)

    first, second = half(tmp_path / "s0.json", 0, [3.0, 1.0]), half(tmp_path / "s1.json", 1, [3.0, 2.5], host="znver5")
    merged = bench.merge_broad([first, second])
    assert merged["cases"]["GRP:2"]["seeds"] == [0, 1] and merged["commands"] == ["seed 0", "seed 1"]
    assert merged["setup"]["host_cpus"] == ["znver4", "znver5"]  # every file's hosts, not the first's alone
    s = bench.half_summary(merged["cases"])
    assert s["family_latency_ratio"]["GRP"] == pytest.approx(math.sqrt(0.5 * 1.25))  # over both seeds
    assert s["case_stats"]["GRP:2"]["spread"]["ms_best_max_over_min"] == pytest.approx(1.0)
    merged["cases"]["GRP:2"]["runs"][1]["host_cpu"] = "znver5"  # the second run on another CPU
    spread = bench.half_summary(merged["cases"])["case_stats"]["GRP:2"]["spread"]
    assert spread["ms_best_max_over_min"] is None and spread["latency_ratio_max"] == pytest.approx(1.25)
    merged["cases"]["GRP:2"]["runs"][1]["retimed"] = {"latency_ratio_median": 1.1}  # seed 1 alone re-timed
    assert bench.half_summary(merged["cases"])["case_stats"]["GRP:2"]["latency_ratio_retimed"] is None
    with pytest.raises(SystemExit, match="GRP:2 seed \\[0\\] is already"):
        bench.merge_broad([first, first])
    cold = json.loads(open(second).read())
    cold["setup"]["timing"] = "cold"  # a --cache-flush run
    (tmp_path / "s1_cold.json").write_text(json.dumps(cold))
    with pytest.raises(SystemExit, match="timed cold.*merge runs of one timing"):
        bench.merge_broad([first, str(tmp_path / "s1_cold.json")])
    other = half(tmp_path / "p.json", 2, [3.0, 1.0], {"cost_model.prior": "builtin"})
    with pytest.raises(SystemExit, match="merge runs of one HARL"):
        bench.merge_broad([first, other])



def test_network_task_kinds_tell_depthwise_from_conv_in_the_cpu_layout(bench, convs_model):
    """CPU tasks carry HWIO weights: the depthwise conv's one input channel per group is read
    there, and a 1x1 conv (kw = 1, where OIHW keeps I) is still a conv."""
    from hiertune.workloads.models import load_model, model_workload
    from hiertune.workloads.networks import conv2d_layout
    from hiertune.workloads.tvm_support import make_target

    target = make_target("llvm")
    tasks = [t for t in model_workload(load_model(convs_model), target).tasks if "conv2d" in t.name]
    # by FLOPs: the 1x1 conv (1,024), the strided depthwise one (2,304), the 3x3 conv (27,648)
    kinds = [bench.task_kind(t, conv2d_layout(target)[1]) for t in sorted(tasks, key=lambda t: t.flops)]
    assert kinds == ["conv", "depthwise", "conv"], [(t.name, t.flops) for t in tasks]


@pytest.mark.slow
def test_a_quick_suite_pair_runs_both_tuners_through_the_lazy_runner(bench, ray_session, tmp_path):
    """The quick suite's path: a runner that starts at its first measurement still names its
    timing up front (a search binds its records to it), and one short pair runs to its ratios."""
    import argparse

    from hiertune.workloads.tvm_support import make_target

    config = bench.suite_runner_config(argparse.Namespace(runner_cores=1), tmp_path / "tmp")
    runner = bench.LazyRunner(config)
    assert runner.runner is None and runner.config.timing == "warm"
    try:
        pair = bench.run_pair("GMM-S", 4, 0, runner, tmp_path, 0.5, make_target("llvm", num_cores=1))
    finally:
        runner.close()
    for tuner in (bench.HARL, bench.MS):
        assert pair[tuner]["trials"] == 4 and pair[tuner]["best_ms"] > 0, pair[tuner]
    assert bench.run_ratios(pair)["latency_ratio"] > 0
