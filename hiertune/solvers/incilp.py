"""Inc-ILP: an initial partition narrows the exact solve to a window around its cuts.

The initial plan is by default the cheapest (`initial="auto"`: libcoral's split, a linear pass;
where its window is an ILP anyway, also the packed plan of `order_split.packed_order`);
the pointer net (the paper's pre-scheduler) is asked with `best` or `pointer`, and by `auto` only
after a slow window solve that the bounds do not prove (`second_start_after_s`): once the cuts are
placed exactly, its plans mostly lead the window to the same optimum at a far higher cost, but
where the window is a hard ILP a second start can reach a better plan.

Before the window, the initial plan's cuts are moved to their exact best positions along the
plan's own node order (`order_split.refine_cuts`, a DP of a few ms): the pre-scheduler's order
is kept, its cut timing (its main error on real graphs) is made exact, so the window starts
close enough to the optimum to reach it (`refine_cuts=False` is the paper's plain start).

Nodes far from every stage boundary of a good initial plan rarely move in the optimum, so they
are fixed to their initial stage and only a window is solved exactly. The window, per boundary
b of the initial plan: over the edges that cross b, take the earliest ASAP level of a source and
the latest ASAP level of a sink; every node whose level lies within `gamma` of that range is
re-opened: it may move across that boundary, to stage b or b+1 (`window="adjacent"`, the
default), or to any stage its fixed neighbours allow (`window="any"`). gamma = inf re-opens
everything to every stage: the exact ILP.

A window can be too narrow: where the optimum shifts a stage boundary by more than gamma levels
from the start (graphs with long parallel branches, many stages), the window's optimum stops at
its edge. When the window bounded the solve (`window_bounded`: a node that moved borders a node the
window fixed, or a cut edge's ends were kept from sharing a stage), the window is solved again
around the new plan with gamma doubled (`widen`), and doubled again while that improves the plan,
as a large-neighbourhood search enlarges a neighbourhood that bounded its move.

The window and the start's exact cut placement search different neighbourhoods, so they are
alternated (`recut`): the window's plan has a new node order, its cuts are placed exactly along
that order, and where that beats the plan the window is solved again from there. A boundary
whose optimum lies far from the start, with no border constraint of the window tight, is then
one cut move away.

Levels are ASAP levels from the graph's main input, except for the nodes that input does not
reach (weights given as separate source nodes, constants and their preprocessing): ASAP puts
all of those at level 0, so one weight edge crossing a late boundary would stretch its window
back to the graph's start. They sit one level before their earliest consumer instead
(`window_levels`), which is where they act.

A graph with one topological order (a chain of residual blocks: DenseNets and EfficientNets in
TFLite form) needs no window: every plan splits that order, so the start's exact cuts are the
global optimum, proven (with the default solvers; a named ILP solver or gamma inf still runs).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.baselines import libcoral_partition
from hiertune.solvers.certify import global_lower_bounds, proven_by_bounds
from hiertune.solvers.order_split import can_beat, packed_order, plan_order, refine_cuts, split_order
from hiertune.solvers.graph import OpGraph
from hiertune.solvers.ilp import (
    EDGE_TPU_CACHE_BYTES,
    IDEAL_DP,
    PAPER_OBJECTIVES,
    IlpConfig,
    Objectives,
    PartitionResult,
    check_partition,
    evaluate_objectives,
    evaluate_partition,
    graph_arrays,
    has_one_order,
    solve_partition,
    stage_macs,
)
from hiertune.solvers.window_dp import WINDOW_MAX_IDEALS, ideals_lower_bound, too_wide_to_enumerate

INITIAL_SOURCES = ("auto", "best", "pointer", "libcoral", "packed", "given")
WINDOW_KINDS = ("adjacent", "any")


class Scheduler(Protocol):
    """A pre-scheduler (the pointer net, injected by the layers above): a valid plan of every node."""

    def partition(self, graph: OpGraph, num_stages: int) -> list[int]: ...


@dataclass
class IncIlpConfig:
    """Inc-ILP's settings: where the first plan comes from, the window, and the exact solver."""

    gamma: float = 10
    """Window half-width in ASAP levels around the initial plan's stage boundaries (inf: the exact ILP)."""
    initial: str = "auto"
    """Initial plan: auto = the cheapest, libcoral's split (or the plan passed in, when better); where that plan's window is too wide for the window DP and its peak is above the global bound, also the packed plan (`packed_plan`: stages filled first-fit decreasing from the ready nodes, tens of ms), the better kept; the pointer net only as a second start (see second_start_after_s); best = the lexicographically best of the scheduler's plan (when one is given), the plan passed in and libcoral's split; pointer / libcoral / packed / given: that plan alone. Candidates are ranked after exact cut placement (with refine_cuts), as the window starts from them."""
    window: str = "adjacent"
    """Where a re-opened node may go: across the boundaries whose window holds it (adjacent), or any stage its fixed neighbours allow (any: a larger model, the paper's)."""
    rounds: int = 1
    """Re-centre the window on the new plan and solve again while the objectives improve, up to this many times (the paper: 1)."""
    widen: int = 3
    """When the window bounded the solve (`window_bounded`: a node that moved borders a node the
    window fixed, or a cut edge's ends could not share a stage), solve again around the new plan
    with gamma doubled, and again while that improves the plan, up to this many times. Graphs whose
    stage boundaries must shift further than gamma (long parallel branches, many stages) widen until
    the window holds them; most real networks' windows never trigger it. 0: one width only (the paper)."""
    recut: int = 3
    """After the window (and its widenings), place the plan's cuts exactly along the plan's new
    node order (`order_split.refine_cuts`, as for the start) and, when that beats the plan, solve
    the window again from there; up to this many times. The window and the cut DP search
    different neighbourhoods (the nodes near each boundary, in levels; every cut position along
    one order, far or near), so alternating them escapes where either one alone stops, as a
    variable-neighbourhood descent does: on graphs whose optimum shifts a boundary far from the
    start without a border constraint of the window being tight, the window's new order makes the
    shift one cut move. Where it finds nothing it costs a test of under a millisecond
    (`order_split.can_beat`) and, when that cannot rule a better split out, one cut placement.
    Needs refine_cuts. 0: the window only."""
    second_start_after_s: float = 10.0
    """auto only: when the window's solve took longer than this many seconds and its plan is not
    proven globally optimal by the bounds, also ask the pre-scheduler (when one is given) for a
    plan, and solve its window too when it starts better than the first start; the better plan is
    kept. Where the window is a hard ILP (wide graphs, many stages) the start decides which
    optimum the window holds, and the pointer net's inference (about a second per 1,000 nodes on a
    CPU) is then small next to the solve; on every graph whose window solves fast it is never
    asked. inf: one start only (the paper)."""
    refine_cuts: bool = True
    """Place the initial plan's cuts exactly along its own node order first (never worse than the plan; False: the paper's start)."""
    packed_start: bool = True
    """auto only: where the start's window is too wide for the window DP (an ILP will solve it) and
    its peak is above the global bound, also try the packed plan (`packed_plan`, tens of ms) and
    start from the better. A start near the least peak keeps a hard window from widening.
    False: libcoral's split alone, as before the packed start existed."""
    ilp: IlpConfig = field(default_factory=IlpConfig)
    """The exact solver of the window (or of the whole graph); auto solves a window by the ideal DP when its lattice fits."""


@dataclass
class IncIlpResult:
    stages: list[int]
    objectives: Objectives
    solve_seconds: float  # the window's exact solve
    init_seconds: float  # producing the initial plan (pointer-net inference)
    optimal: bool  # optimal within the window
    solver: str  # the method that solved the window: ideal-dp, cpsat, gurobi, highs; order-split: no window (one order)
    window_size: int  # re-opened nodes
    num_nodes: int
    gamma: float  # the widest window's half-width (config.gamma, doubled per widening of one start's window)
    initial_source: str  # where the initial plan came from: libcoral, given, pointer
    initial_stages: list[int]
    initial_objectives: Objectives  # the RL-only plan's objectives
    refined_objectives: Objectives | None = None  # after exact cut placement (None: not refined)
    num_vars: int = 0
    fallback: str | None = None
    cpu_seconds: float = 0.0  # CPU time of the window solve(s)
    init_cpu_seconds: float = 0.0
    rounds: int = 1  # window solves done
    lower_bounds: Objectives = (0, 0, 0)  # global bounds no plan beats (certify.global_lower_bounds)
    widenings: int = 0  # times the window was widened (IncIlpConfig.widen)
    recuts: int = 0  # times exact cuts along the window's plan beat it (IncIlpConfig.recut)

    @property
    def proven(self) -> tuple[bool, bool, bool]:
        """Per objective: proven globally optimal (the whole-graph exact solve, or the bounds met)."""
        if self.optimal and math.isinf(self.gamma):
            return True, True, True
        return proven_by_bounds(self.objectives, self.lower_bounds)

    @property
    def total_seconds(self) -> float:
        return self.solve_seconds + self.init_seconds


def initial_candidates(
    graph: OpGraph, num_stages: int, source: str = "auto", given: list[int] | None = None,
    scheduler: Scheduler | None = None,
) -> list[tuple[list[int], str]]:
    """The initial plans a source asks for, each with where it came from. `auto` takes the cheap
    plans only: libcoral's split (a linear pass; with exact cuts the window reaches the same
    optimum as from the pointer net's plan) and the given plan; `best` also asks the scheduler
    (when one is passed), as insurance against a weak pre-scheduler. The scheduler comes from
    the caller: this layer knows no pointer net (`policies.pointer_net.default_scheduler` is the
    usual one)."""
    if source not in INITIAL_SOURCES:
        raise HiertuneError(f"initial plan source {source!r} is unknown; use one of {', '.join(INITIAL_SOURCES)}")
    if source == "given" and given is None:
        raise HiertuneError("initial='given' needs an initial plan (a stage per node)")
    if source == "pointer" and scheduler is None:
        raise HiertuneError(
            "initial='pointer' needs a pre-scheduler and none was passed (the pointer-net "
            "checkpoint may be missing: train it with python -m hiertune.policies.train_pointer_net); "
            "or use initial='libcoral'"
        )
    candidates: list[tuple[list[int], str]] = []
    if source in ("auto", "best", "libcoral"):
        candidates.append((libcoral_partition(graph, num_stages), "libcoral"))
    if given is not None and source in ("auto", "best", "given"):
        candidates.append((list(given), "given"))
    if scheduler is not None and source in ("best", "pointer"):
        candidates.append((scheduler.partition(graph, num_stages), "pointer"))
    if source == "packed":
        candidates.append((packed_plan(graph, num_stages), "packed"))
    for stages, _ in candidates:
        check_partition(graph, stages, num_stages)
    return candidates


def packed_plan(graph: OpGraph, num_stages: int, peak_hi: int | None = None) -> list[int]:
    """The plan of `order_split.packed_order` with its cuts placed exactly along that order
    (`peak_hi`: a peak already reached, default libcoral's, the bisection's upper end)."""
    if peak_hi is None:
        peak_hi = evaluate_partition(graph, libcoral_partition(graph, num_stages), num_stages)[0]
    return split_order(graph, packed_order(graph, num_stages, peak_hi), num_stages)


def window_needs_ilp(graph: OpGraph, stages: list[int], gamma: float) -> bool:
    """Is the window around `stages` too wide for the window DP, so that an ILP will solve it?
    Decided as the DP decides before enumerating (`window_dp.too_wide_to_enumerate` on a boundary's
    re-opened nodes), in about a millisecond (a window the DP gives up on only while enumerating
    is not caught: False is "not known to need one"); at once where the whole graph's bound is already
    within the DP's reach (a window's nodes are a subset), as on most real networks."""
    if math.isinf(gamma):
        return True
    whole = graph.memo("incilp.ideals_lower_bound", _whole_graph_ideals_bound)
    if whole <= WINDOW_MAX_IDEALS:
        return False
    level = np.asarray(graph.asap_levels(), dtype=np.int64)
    return any(too_wide_to_enumerate(graph, sorted(nodes), level, WINDOW_MAX_IDEALS)
               for nodes in boundary_windows(graph, stages, gamma).values())


def packed_start_pays(graph: OpGraph, plan: list[int], start_peak: int, least_peak_bound: int, gamma: float) -> bool:
    """Does `auto` also try the packed plan (`IncIlpConfig.packed_start`) from this start? Where
    the start's peak is above the global bound and its window will be an ILP (seconds to minutes
    on such graphs): a start nearer the least peak keeps that window from widening, and the
    packed plan's tens of ms are small next to it; elsewhere they are not."""
    return start_peak > least_peak_bound and window_needs_ilp(graph, plan, gamma)


def initial_partition(
    graph: OpGraph, num_stages: int, source: str = "auto", given: list[int] | None = None,
    scheduler: Scheduler | None = None, cache_bytes: int = EDGE_TPU_CACHE_BYTES,
) -> tuple[list[int], str]:
    """The lexicographically best of the source's plans (`initial_candidates`), as they come."""
    candidates = initial_candidates(graph, num_stages, source, given, scheduler)
    if len(candidates) == 1:
        return candidates[0]
    return min(candidates, key=lambda c: evaluate_partition(graph, c[0], num_stages, cache_bytes))


def window_levels(graph: OpGraph) -> list[int]:
    """ASAP levels for the nodes reachable from the main input (the source with the longest path
    below it), and for every other node one level before its earliest consumer (see the module
    docstring); still increasing along every edge."""
    return graph.memo("incilp.window_levels", _window_levels)


def _window_level_array(graph: OpGraph) -> np.ndarray:
    return np.asarray(window_levels(graph), dtype=np.int64)


def _whole_graph_ideals_bound(graph: OpGraph) -> int:
    return ideals_lower_bound(graph, list(range(graph.num_nodes)))


def prepare_windows(graph: OpGraph) -> None:
    """Build what Inc-ILP memoises per graph (the window's levels, the whole graph's ideal bound):
    `ilp.prepare_graph` calls it, so a timed run pays for its solve alone, as the exact solvers do."""
    graph.memo("incilp.window_level_array", _window_level_array)
    graph.memo("incilp.ideals_lower_bound", _whole_graph_ideals_bound)


def _window_levels(graph: OpGraph) -> list[int]:
    asap = graph.asap_levels()
    order = graph.topological_order()
    succ = graph.successors()
    depth = [0] * graph.num_nodes  # longest path from the node down to a sink
    for v in reversed(order):
        depth[v] = 1 + max((depth[w] for w in succ[v]), default=0)
    sources = [v for v in order if not graph.predecessors()[v]]
    driven = [False] * graph.num_nodes
    driven[max(sources, key=lambda v: depth[v])] = True
    for v in order:
        if driven[v]:
            for w in succ[v]:
                driven[w] = True
    level = list(asap)
    for v in reversed(order):
        if not driven[v] and succ[v]:
            level[v] = min(level[w] for w in succ[v]) - 1
    return level


def boundary_windows(graph: OpGraph, stages: list[int], gamma: float) -> dict[int, set[int]]:
    """Per boundary b of `stages`: the nodes re-opened around it (see the module docstring)."""
    if gamma < 0:
        raise HiertuneError(f"gamma must be >= 0 (got {gamma}); use math.inf for the exact ILP")
    level = graph.memo("incilp.window_level_array", _window_level_array)
    arrays = graph_arrays(graph)
    stage = np.asarray(stages, dtype=np.int64)
    first, last = stage[arrays.edge_src], stage[arrays.edge_dst]
    ranges: dict[int, tuple[int, int]] = {}
    for e in np.flatnonzero(first < last).tolist():  # only the cut edges (numpy finds them)
        src_level, dst_level = int(level[arrays.edge_src[e]]), int(level[arrays.edge_dst[e]])
        for b in range(int(first[e]), int(last[e])):  # the edge crosses boundaries first..last-1
            lo, hi = ranges.get(b, (src_level, dst_level))
            ranges[b] = (min(lo, src_level), max(hi, dst_level))
    return {
        b: set(np.flatnonzero((level >= lo - gamma) & (level <= hi + gamma)).tolist())
        for b, (lo, hi) in ranges.items()
    }


def relaxation_window(graph: OpGraph, stages: list[int], gamma: float) -> set[int]:
    """All re-opened nodes (every node when gamma is infinite)."""
    if math.isinf(gamma) and gamma > 0:
        return set(range(graph.num_nodes))
    return set().union(*boundary_windows(graph, stages, gamma).values())


def _check_window(window: str) -> None:
    if window not in WINDOW_KINDS:
        raise HiertuneError(f"window {window!r} is unknown; use one of {', '.join(WINDOW_KINDS)}")


def window_allowed(graph: OpGraph, stages: list[int], num_stages: int, gamma: float,
                   window: str = "adjacent") -> list[set[int]]:
    """Allowed stages per node: its initial stage, plus, for each boundary b whose window holds it,
    the two stages b and b+1 beside it (`adjacent`) or every stage (`any`; precedence then narrows
    it). gamma = inf gives the whole problem back either way."""
    _check_window(window)
    if math.isinf(gamma) and gamma > 0:
        return [set(range(num_stages)) for _ in stages]
    allowed = [{s} for s in stages]
    for b, nodes in boundary_windows(graph, stages, gamma).items():
        for v in nodes:
            allowed[v].update({b, b + 1} if window == "adjacent" else range(num_stages))
    return allowed


def inc_ilp(
    graph: OpGraph,
    num_stages: int,
    config: IncIlpConfig | None = None,
    initial: list[int] | None = None,
    scheduler: Scheduler | None = None,
) -> IncIlpResult:
    """Initial plan -> window -> exact lexicographic solve of the window with the rest fixed
    (repeated around the new plan for up to `config.rounds` rounds while it improves)."""
    config = config or IncIlpConfig()
    _check_window(config.window)  # before the initial plan's inference, not after it
    t0, c0 = time.perf_counter(), time.process_time()
    # every candidate is ranked as the window will start from it: after exact cut placement
    cache = config.ilp.cache_bytes
    starts = [(stages, _window_start(graph, stages, num_stages, config), source)
              for stages, source in initial_candidates(graph, num_stages, config.initial, initial, scheduler)]
    keys = [evaluate_partition(graph, plan, num_stages, cache) for _, plan, _ in starts] if len(starts) > 1 else []
    chosen = min(range(len(starts)), key=keys.__getitem__) if keys else 0
    init, plan, source = starts[chosen]
    start_key = keys[chosen] if keys else evaluate_partition(graph, plan, num_stages, cache)
    lower = global_lower_bounds(graph, num_stages, cache)
    if config.initial == "auto" and config.packed_start and packed_start_pays(graph, plan, start_key[0], lower[0], config.gamma):
        packed = _window_start(graph, packed_plan(graph, num_stages, start_key[0]), num_stages, config)
        packed_key = evaluate_partition(graph, packed, num_stages, cache)
        if packed_key < start_key:
            init, plan, source, start_key = packed, packed, "packed", packed_key
    init_seconds, init_cpu = time.perf_counter() - t0, time.process_time() - c0
    if _one_order_suffices(graph, config):
        run = _one_order_run(graph, num_stages, plan, start_key)
    else:
        run = _solve_windows(graph, num_stages, config, plan, lower)
    if (config.initial == "auto" and scheduler is not None and run.seconds > config.second_start_after_s
            and not all(proven_by_bounds(run.result.objectives, lower))):
        t1, c1 = time.perf_counter(), time.process_time()
        [(second, _)] = initial_candidates(graph, num_stages, "pointer", scheduler=scheduler)
        second_plan = _window_start(graph, second, num_stages, config)
        second_key = evaluate_partition(graph, second_plan, num_stages, cache)
        init_seconds += time.perf_counter() - t1
        init_cpu += time.process_time() - c1
        if second_key < start_key:  # ranked as the starts of `best` are
            other = _solve_windows(graph, num_stages, config, second_plan, lower)
            run = run.merged(other)
            if run.result is other.result:
                init, source, start_key = second, "pointer", second_key
    result = run.result
    return IncIlpResult(
        stages=result.stages,
        objectives=result.objectives,
        solve_seconds=run.seconds,
        init_seconds=init_seconds,
        optimal=result.optimal,
        solver=result.solver,
        window_size=run.window_size,
        num_nodes=graph.num_nodes,
        gamma=run.gamma,
        initial_source=source,
        initial_stages=init,
        initial_objectives=evaluate_partition(graph, init, num_stages, cache),
        refined_objectives=start_key if config.refine_cuts else None,
        num_vars=result.num_vars,
        fallback=result.fallback,
        cpu_seconds=run.cpu_seconds,
        init_cpu_seconds=init_cpu,
        rounds=run.rounds,
        lower_bounds=lower,
        widenings=run.widenings,
        recuts=run.recuts,
    )


def _one_order_suffices(graph: OpGraph, config: IncIlpConfig) -> bool:
    """Is the start's exact split the optimum, with no window to solve? On a graph with one
    topological order, for the paper's objectives (the split's), unless the caller asked for the
    exact solve (gamma inf) or a particular ILP solver to run."""
    return (config.refine_cuts and not math.isinf(config.gamma) and config.ilp.solver in ("auto", IDEAL_DP)
            and tuple(config.ilp.objectives) == PAPER_OBJECTIVES and has_one_order(graph))


def _one_order_run(graph: OpGraph, num_stages: int, plan: list[int], key: Objectives) -> _WindowRuns:
    """The start on a graph with one topological order: every plan splits that order, and the
    start's cuts are already its exact split, so it is the global optimum and no window is solved
    (gamma inf: proven on the whole graph)."""
    result = PartitionResult(stages=plan, objectives=key, solve_seconds=0.0, optimal=True, solver="order-split",
                             max_stage_macs=max(stage_macs(graph, plan, num_stages)), key=tuple(key),
                             phases=["one topological order: the start's exact cuts are the optimum"])
    return _WindowRuns(result, 0.0, 0.0, window_size=0, rounds=0, gamma=math.inf, widenings=0)


def _window_start(graph: OpGraph, stages: list[int], num_stages: int, config: IncIlpConfig) -> list[int]:
    """The plan the window starts from: `stages` with its cuts placed exactly (with refine_cuts)."""
    return refine_cuts(graph, stages, num_stages, config.ilp.cache_bytes) if config.refine_cuts else stages


@dataclass
class _WindowRuns:
    """The best plan of one or more window solves, and what they cost together."""

    result: PartitionResult
    seconds: float
    cpu_seconds: float
    window_size: int
    rounds: int
    gamma: float  # the widest window solved
    widenings: int
    recuts: int = 0  # cut placements that beat the window's plan

    def merged(self, other: _WindowRuns) -> _WindowRuns:
        """Both runs' costs; the better plan (the first on a tie)."""
        return _WindowRuns(
            result=other.result if other.result.key < self.result.key else self.result,
            seconds=self.seconds + other.seconds,
            cpu_seconds=self.cpu_seconds + other.cpu_seconds,
            window_size=max(self.window_size, other.window_size),
            rounds=self.rounds + other.rounds,
            gamma=max(self.gamma, other.gamma),
            widenings=self.widenings + other.widenings,
            recuts=self.recuts + other.recuts,
        )


def _solve_windows(graph: OpGraph, num_stages: int, config: IncIlpConfig, plan: list[int],
                   lower: Objectives) -> _WindowRuns:
    """The window descent from `plan` (`_window_descent`), then, up to `config.recut` times, the
    cuts of its plan placed exactly along the plan's new order and, where that beats it, the
    window descent again from there, at the width already reached. `lower`: the graph's global
    lower bounds (their off-cache floor tells `can_beat` when that objective cannot improve)."""
    cache, objectives = config.ilp.cache_bytes, config.ilp.objectives
    runs = _window_descent(graph, num_stages, config, plan, config.gamma)
    for _ in range(config.recut if config.refine_cuts else 0):
        t0, c0 = time.perf_counter(), time.process_time()
        order = plan_order(graph, runs.result.stages)
        # the cheap test first: on most graphs the window's plan is already the best of its order
        better = False
        if tuple(objectives) != PAPER_OBJECTIVES or can_beat(graph, order, num_stages, runs.result.objectives, lower[1]):
            recut = split_order(graph, order, num_stages, cache)
            better = evaluate_objectives(graph, recut, num_stages, cache, objectives) < runs.result.key
        runs.seconds += time.perf_counter() - t0
        runs.cpu_seconds += time.process_time() - c0
        if not better:
            break
        runs = runs.merged(_window_descent(graph, num_stages, config, recut, runs.gamma))
        runs.recuts += 1
    return runs


def _window_descent(graph: OpGraph, num_stages: int, config: IncIlpConfig, plan: list[int],
                    gamma: float) -> _WindowRuns:
    """The window around `plan` solved exactly, re-centred on each better plan for up to
    `config.rounds` solves per width, then widened (gamma doubled) where the window bounded the
    solve, and again while widening improves the plan, up to `config.widen` times."""
    seconds = cpu = 0.0
    window_size = rounds = widenings = solves_at_width = 0
    best: PartitionResult | None = None
    while True:
        allowed = window_allowed(graph, plan, num_stages, gamma, config.window)
        result = solve_partition(graph, num_stages, config.ilp, allowed=allowed, hint=plan)
        rounds += 1
        solves_at_width += 1
        seconds += result.solve_seconds
        cpu += result.cpu_seconds
        window_size = max(window_size, sum(1 for a in allowed if len(a) > 1))
        if best is not None and result.key >= best.key:  # in the configured objective order
            break  # re-centring or widening the window found nothing better
        best, start, plan = result, plan, result.stages
        if solves_at_width < max(config.rounds, 1):
            continue  # re-centre at the same width
        # widen where the window bounded the solve, and again while widening pays
        if (widenings < config.widen and not math.isinf(gamma)
                and (widenings > 0 or window_bounded(graph, start, plan, allowed))):
            gamma, widenings, solves_at_width = 2 * gamma, widenings + 1, 0
            continue
        break
    assert best is not None
    return _WindowRuns(best, seconds, cpu, window_size, rounds, gamma, widenings)


def window_bounded(graph: OpGraph, start: list[int], plan: list[int], allowed: list[set[int]]) -> bool:
    """Did the window bound the solve? The standard test of large-neighbourhood search for a
    neighbourhood worth enlarging: is one of its border constraints tight on the solution? True
    when a node that moved from `start` borders a node the window fixed (one allowed stage: it might
    have moved along, had it been open), or when an edge of `plan` crosses stages whose ends the
    window kept apart (one end may not enter the other's stage): where that edge is cut, and so what
    each side holds and sends, was set by the window, not by the objectives. A node whose ASAP level
    lies far before where it is consumed is windowed by the early level and can be pinned so."""
    arrays = graph_arrays(graph)
    src, dst = arrays.edge_src, arrays.edge_dst
    stage = np.asarray(plan)
    moved = np.asarray(start) != stage
    fixed = np.fromiter((len(a) == 1 for a in allowed), dtype=bool, count=len(allowed))
    if np.any((moved[src] & fixed[dst]) | (moved[dst] & fixed[src])):
        return True
    cut = stage[src] != stage[dst]
    return any(plan[u] not in allowed[w] or plan[w] not in allowed[u]
               for u, w in zip(src[cut].tolist(), dst[cut].tolist()))
