"""One task's HARL schedule space over MetaSchedule: sketches, schedule states, edits, observations.

A *sketch* is one of MetaSchedule's design spaces for the task (post-order-apply of the target's
schedule rules), or one of them generated after padding the task's awkward GEMM loops (`padding`;
the trace then starts with PadEinsum). A *schedule state* is a sketch plus its sampling decisions
(SamplePerfectTile / SampleCategorical / SampleComputeLocation, in trace order) plus the value of
the root block's `meta_schedule.parallel` annotation; it holds the replayed, post-processed
`s_tir.Schedule`. Every new state is made the same way: the sketch's instructions with the
decisions, replayed on a fresh schedule, then the context's postprocs. Replay silently repairs
invalid decisions, so decisions are always read back from the replayed trace.

Edits (layout and decoding in `edit_actions`):
* tile-size: move the smallest prime factor of one tile level to another level of the same loop
  (optionally also its whole factor, or its largest prime: `SpaceConfig`); the product stays the
  loop extent; the innermost level respects `max_innermost_factor`.
* compute-at: step to the previous / next legal location of a SampleComputeLocation. MetaSchedule
  keeps the legal list in C++ (CollectComputeLocation); `tir_loops.compute_location_candidates`
  rebuilds it from the replayed program (unit loops, data-parallel loops after a reduction loop
  and trailing reduction loops excluded) less two C++-only checks, so it may hold a location too
  many. Replay rounds an illegal decision down to the nearest legal one, so the edit replays at
  the next candidate in its direction until the read-back decision moves.
* parallel: the sketch annotates the root with `meta_schedule.parallel = 16 * cores`;
  `RewriteParallelVectorizeUnroll` then fuses the leading data-parallel loops of each block until
  their product exceeds that value, and parallelises the fused loop. The edit changes the number
  of fused loops of the *anchor* block (the multi-level-tiled one) by one step: it sets the
  annotation (unannotate + annotate on the root, recorded in the trace, so records replay it) to
  the smallest value on the ladder of prefix products of the anchor's outer loop extents that
  gives the next larger / smaller fused count. The count actually fused is read back from the
  post-processed program (the anchor's parallel loop extent; the postproc may give loops to
  vectorization, or another block sharing the outer loops may fuse them); an edit that does not
  change it is invalid. Tile edits keep the value (MetaSchedule's semantics: the count then
  follows the new extents). `state.parallel_counts` (fused loops per root block, from the
  post-processed trace) is part of the state key.
* auto-unroll: step the SampleCategorical index (unroll candidates, e.g. [0, 16, 64, 512]).

An edit whose replay or postproc fails returns the unchanged state (a no-op) and is remembered,
so `action_mask` hides it from then on; the mask also hides edits that are illegal on their face.

GPU sketches bound each tiled block's threads (a warp at least, the target's limit at most), and
most random tilings break that. Read from the trace (`gpu_threads`), the bound is a product of tile
decisions: random fills draw their tiles within it, the mask hides tile edits that leave it, and a
replayed schedule that still breaks it is refused before the postprocs (`tir_loops`).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hiertune.envs import edit_actions as ea
from hiertune.envs import gpu_threads
from hiertune.envs import padding
from hiertune.envs import tir_loops
from hiertune.errors import HiertuneError

SAMPLE_TILE = "SamplePerfectTile"
SAMPLE_CATEGORICAL = "SampleCategorical"
SAMPLE_LOCATION = "SampleComputeLocation"
PARALLEL_ANN = "meta_schedule.parallel"
TILING_ANN = "meta_schedule.tiling_structure"  # MultiLevelTiling marks the block it tiles

# Observation layout (all entries roughly in [0, 1]):
#   tile levels   MAX_TILE_INSTS x MAX_TILE_LEVELS  log2(factor) / log2(loop extent)
#   loop extents  MAX_TILE_INSTS                    log2(extent) / 16        (task shape)
#   compute-at    MAX_COMPUTE_AT                    (location + 2) / (loop depth + 1)
#   parallel      2                                 fused loops / anchor loops, log2(parallel extent) / 16
#   unroll        MAX_CATEGORICAL                   index / (candidates - 1)
#   sketch        2                                 index / (sketches - 1), sketches / 16
#   task          2                                 log2(FLOPs) / 40, anchor loops / 32
#   score         1                                 the cost model's score (passed in)
OBS_TILE = ea.MAX_TILE_INSTS * ea.MAX_TILE_LEVELS
OBS_DIM = OBS_TILE + ea.MAX_TILE_INSTS + ea.MAX_COMPUTE_AT + 2 + ea.MAX_CATEGORICAL + 2 + 2 + 1


FILLS_KEPT = 8  # random fills remembered per sketch, to repeat when no new one can be found


@dataclass(frozen=True)
class SpaceConfig:
    """Knobs of a schedule space."""

    seed: int = 0  # ScheduleSpace sets it from its `seed` argument (MetaSchedule's rand_state)
    random_fill_tries: int = 256  # random fills whose postproc fails are redrawn. CPU fills rarely fail; on a
    #   GPU conv3d sketch VerifyGPUCode rejects nearly all, and a sketch that never had one stops the search
    memo_size: int = 1024  # (state, action) -> next state cache; tracks revisit states (~76 KiB a C2D state)
    num_threads: int = 1  # TuneContext threads (feature extraction)
    whole_tile_moves: bool = True  # tile edits may also move a level's whole factor (False: one
    #   prime at a time, the paper's edit; the whole-move actions are then masked)
    largest_prime_moves: bool = False  # tile edits may also move a level's largest prime factor
    #   (a 7 out of 56 in one edit; False: the smallest prime only, the paper's edit)
    pad_multiple: int = 8  # a GEMM-like task whose tiled block has a long spatial loop without a
    #   divisor near this (ViT's 197 tokens) also gets its sketches on the loops padded up to a
    #   multiple of it (`envs.padding`; MetaSchedule tiles only by exact divisors). 8: a row block
    #   of a register tile or an AVX vector. 0: the task's own sketches only (MetaSchedule's, the paper's)


def decision_structure(kinds: Sequence[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    """A sketch's decision kinds without the names of the blocks compute locations place: what two
    tasks' sketches must share for one's decisions to mean the same in the other (block names
    differ between a network's fused tasks of one operator kind)."""
    return tuple(kind[:1] if kind[0] == SAMPLE_LOCATION else kind for kind in kinds)


def fit_tile(factors: Sequence[int], extent: int, max_innermost: int) -> tuple[int, ...]:
    """A tile split of another loop re-fitted to `extent`: from the innermost level out, each level
    the largest divisor of what is left that is at most the donor's factor (and the innermost at
    most `max_innermost`, when positive); the outermost level takes the rest. Inner levels decide
    vector width and register blocking, so they are kept closest; a loop of another length changes
    the outer trip count first."""
    fitted = [1] * len(factors)
    rest = int(extent)
    for level in range(len(factors) - 1, 0, -1):
        cap = int(factors[level])
        if level == len(factors) - 1 and max_innermost > 0:
            cap = min(cap, max_innermost)
        fitted[level] = max(d for d in range(1, min(cap, rest) + 1) if rest % d == 0)
        rest //= fitted[level]
    fitted[0] = rest
    return tuple(fitted)


def _py(value: Any) -> Any:
    """A TVM decision as plain Python: ints and tuples of ints."""
    if hasattr(value, "value"):
        return int(value.value)
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        return tuple(_py(v) for v in value)
    return int(value)


def _tvm_decision(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _names(value: Any) -> list[str]:
    """The strings in a `_plain` value (an instruction's inputs): the variable names it reads."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [name for v in value for name in _names(v)]
    return []


def _live_positions(json_insts: Sequence[Any]) -> list[int]:
    """Positions of the instructions that matter for matching a trace to a sketch: all but
    getters whose results no later instruction reads. MetaSchedule drops those when it simplifies
    a trace before storing it: a design space's `GetConsumers` with no outputs, and the
    `GetSBlock` of a fused epilogue that the sketch fetches and never uses (BERT's matmul + add)."""
    read: set[str] = set()
    dead: set[int] = set()
    for i in range(len(json_insts) - 1, -1, -1):
        inst = json_insts[i]
        if str(inst[0]).startswith("Get") and not any(str(out) in read for out in inst[3]):
            dead.add(i)
            continue
        read.update(_names(_plain(inst[1])))
    return [i for i in range(len(json_insts)) if i not in dead]


def _instruction_shape(json_insts: Sequence[Any], live: Sequence[int] | None = None) -> tuple[str, ...]:
    """Live instructions of a trace JSON with the tunable parallel value blanked, one string each,
    their variables renamed in order of definition (MetaSchedule renumbers them after dropping
    dead getters, so b2 in a sketch can be b1 in a stored record). `live`: the trace's
    `_live_positions`, when the caller has them already.

    Sketches of one task can differ only in an instruction's inputs (e.g. the loop a cache-write
    block is computed at), so kinds alone do not tell them apart.
    """
    out = []
    rename: dict[str, str] = {}

    def canonical(value: Any) -> Any:
        if isinstance(value, str):
            return rename.get(value, value)
        if isinstance(value, list):
            return [canonical(v) for v in value]
        return value

    for inst in (json_insts[i] for i in (_live_positions(json_insts) if live is None else live)):
        kind, inputs, attrs = inst[0], canonical(_plain(list(inst[1]))), inst[2]
        if kind == "Annotate" and attrs and attrs[0] == PARALLEL_ANN:
            inputs = inputs[:1]
        defined = _plain(inst[3])
        for name in defined:
            rename[name] = f"{name[:1]}{len(rename)}"
        outputs = canonical(defined)
        out.append(json.dumps([_plain(kind), inputs, _plain(attrs), outputs]))
    return tuple(out)


def _plain(x: Any) -> Any:
    """TVM JSON pieces (IntImm, Array, String) as plain Python, so live and stored traces compare."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x if not isinstance(x, str) else str(x)
    if hasattr(x, "value") and not hasattr(x, "__len__"):
        return x.value
    if hasattr(x, "__iter__"):
        return [_plain(v) for v in x]
    return str(x)


@dataclass
class Sketch:
    """Static facts of one design space, read once from its trace."""

    index: int
    insts: list[Any]  # the design-space trace's instructions (no postproc)
    tile_slots: list[int]  # positions (into the decision tuple) of SamplePerfectTile
    tile_max_innermost: list[int]
    cat_slots: list[int]
    cat_sizes: list[int]
    loc_slots: list[int]
    loc_blocks: list[str]  # the block each SampleComputeLocation places
    anchor: str | None  # block whose outer loops the parallel edit counts
    parallel_default: int | None  # the sketch's meta_schedule.parallel value (None: no annotation)
    shape: tuple[str, ...]  # every instruction as JSON minus tunable values: matches records to sketches
    decision_kinds: tuple[tuple[Any, ...], ...] = ()  # per sampling instruction: its kind and fixed
    #   attributes (tile levels and innermost cap, categorical size, placed block), in trace order
    tile_extents: tuple[int, ...] = ()  # the loop extent each SamplePerfectTile splits
    thread_ranges: tuple[gpu_threads.ThreadRange, ...] = ()  # GPU sketches: threads per block allowed
    tiled_block: str | None = None  # the block MultiLevelTiling tiled (None: no such block)
    padded: bool = False  # the trace starts with PadEinsum (`SpaceConfig.pad_multiple`)
    base_mod: Any = field(default=None, repr=False, compare=False)  # the unscheduled program the trace's
    #   design part starts from: the task's, or for a padded sketch the padded one


@dataclass(eq=False)
class ScheduleState:
    """A sketch, its decisions (read back from the replay) and the post-processed schedule."""

    sketch: int
    decisions: tuple[Any, ...]  # every sampling decision, trace order (tiles as tuples)
    parallel_extent: int | None  # override of meta_schedule.parallel; None = the sketch's value
    parallel_counts: tuple[int, ...]  # loops fused per root child block (read from the postproc trace)
    anchor_fused: int  # loops fused into the anchor block's parallel loop
    anchor_extents: tuple[int, ...]  # the anchor's loop extents before postproc (outermost first)
    ladder: dict[int, int]  # fused count -> annotation value (from the anchor's loops)
    loc_candidates: tuple[tuple[int, ...], ...]  # per SampleComputeLocation: its candidate locations
    sch: Any  # s_tir.Schedule after postprocs
    key: tuple = field(init=False)
    invalid: set[int] = field(default_factory=set)  # actions that failed from this state
    space: Any = field(default=None, repr=False)  # the ScheduleSpace (its TuneContext feeds cost models)

    def __post_init__(self) -> None:
        self.key = (self.sketch, self.decisions, self.parallel_counts)

    @property
    def trace(self) -> Any:
        """The full trace (decisions + postproc) as MetaSchedule's database stores it."""
        return self.sch.trace

    @property
    def mod(self) -> Any:
        return self.sch.mod

    @property
    def args_info(self) -> list[Any]:
        from hiertune.workloads.tvm_support import measured_args_info

        return measured_args_info(self.sch)


class ScheduleSpace:
    """Sketches of one task and the HARL edits between schedule states."""

    obs_dim = OBS_DIM

    def __init__(self, mod: Any, target: Any, *, seed: int = 0, config: SpaceConfig | None = None) -> None:
        from hiertune.workloads.tvm_support import is_gpu_target, prepare_tvm

        prepare_tvm()
        import tvm
        from tvm.s_tir import meta_schedule as ms

        self.config = replace(config or SpaceConfig(), seed=seed)  # one seed, the one given here
        # the opt-in largest-prime block is the layout's last: without it the action space (and
        # so the policy network) is exactly what it was before the block existed
        self.action_dim = ea.ACTION_DIM if self.config.largest_prime_moves else ea.BASE_ACTION_DIM
        if isinstance(mod, tvm.tirx.PrimFunc):
            mod = tvm.IRModule({"main": mod})
        if not isinstance(mod, tvm.IRModule) or "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
            raise HiertuneError("schedule space: the task must be a PrimFunc or an IRModule with a 'main' PrimFunc")
        self.target = target
        try:
            self.ctx = ms.TuneContext(
                mod=mod, target=target, space_generator="post-order-apply",
                search_strategy="evolutionary", num_threads=self.config.num_threads, rand_state=self.config.seed,
            )
            spaces = self.ctx.generate_design_space()
        except Exception as err:  # noqa: BLE001 - TVM reports target problems with its own types
            first = str(err).strip().splitlines()[-1][:200]
            raise HiertuneError(
                f"target {target}: MetaSchedule cannot build the schedule space ({first}); "
                "for cuda give max_threads_per_block, max_shared_memory_per_block, thread_warp_size"
            ) from None
        self.mod = self.ctx.mod
        self.postprocs = list(self.ctx.space_generator.postprocs)
        if not spaces:
            raise HiertuneError(f"target {target.kind.name}: MetaSchedule generated no sketch for this task")
        self.flops = float(tvm.s_tir.analysis.estimate_tir_flops(self.mod))
        self._memo: OrderedDict[tuple, ScheduleState | None] = OrderedDict()
        self._consumer_cache: dict[tuple[bool, str], list[str]] = {}
        self.stats = {"replays": 0, "failed": 0, "thread_extent": 0, "repeated_fills": 0}
        self.sketches = [self._read_sketch(i, s.trace, s.mod, self.mod) for i, s in enumerate(spaces)]
        if self.config.pad_multiple > 1:
            self.sketches += self._padded_sketches(target)
        self._fills: dict[int, list[ScheduleState]] = {}  # per sketch: its last FILLS_KEPT random fills
        self.bounds_threads = is_gpu_target(target)  # only GPU rules bound a block's threads

    @property
    def num_sketches(self) -> int:
        return len(self.sketches)

    # ------------------------------------------------------------------ sketches
    def _padded_sketches(self, target: Any) -> list[Sketch]:
        """The task's design spaces again, generated on its program with the tiled block's awkward
        loop lengths padded (`padding`), each trace prefixed by the padding so it replays on the
        task itself; [] when nothing is worth padding. A padded sketch that does not replay with
        its own sampled decisions is left out (a sketch that never fills would stop the search)."""
        from tvm import s_tir
        from tvm.s_tir import meta_schedule as ms

        # the multi-level-tiled block only: a reduction's rfactor split (softmax, layer norm) tiles
        # no rows into registers, and padding it would double its sketches for nothing
        tiled = next((sk.tiled_block for sk in self.sketches if sk.tiled_block), None)
        padded = padding.pad_block(self.mod, tiled, self.config.pad_multiple) if tiled else None
        if padded is None:
            return []
        try:
            spaces = ms.TuneContext(
                mod=padded.mod, target=target, space_generator="post-order-apply",
                search_strategy="evolutionary", num_threads=self.config.num_threads, rand_state=self.config.seed,
            ).generate_design_space()
        except Exception:  # noqa: BLE001 - no padded space is no loss: the task keeps its own sketches
            return []
        prefix = list(padded.trace.insts)
        out: list[Sketch] = []
        for space in spaces:
            trace = space.trace
            decisions = {inst: trace.get_decision(inst) for inst in trace.insts
                         if trace.get_decision(inst) is not None}
            sketch = self._read_sketch(len(self.sketches) + len(out),
                                       s_tir.schedule.Trace(prefix + list(trace.insts), decisions), space.mod,
                                       padded.mod)
            if self._apply(sketch, None, seed=self.config.seed + 1) is not None:
                out.append(sketch)
        return out

    def _read_sketch(self, index: int, trace: Any, space_mod: Any, base_mod: Any) -> Sketch:
        """A design space's facts; `space_mod` is the design space's own (scheduled) program,
        `base_mod` the unscheduled one it was generated on."""
        insts = list(trace.insts)
        tile_slots, tile_inner, cat_slots, cat_sizes, loc_slots = [], [], [], [], []
        tile_extents: list[int] = []
        slot = -1  # position of the sampling instruction in the decision tuple
        loc_blocks: list[str] = []
        kinds: list[tuple[Any, ...]] = []
        block_names: dict[int, str] = {}
        loop_block: dict[int, str] = {}
        anchor = None
        tiled = None
        parallel_default = None
        for inst in insts:
            kind = inst.kind.name
            if kind == "GetSBlock":
                block_names[hash(inst.outputs[0])] = str(inst.attrs[0])
            elif kind == "GetLoops":
                for rv in inst.outputs:
                    loop_block[hash(rv)] = block_names.get(hash(inst.inputs[0]), "")
            elif kind == "Annotate" and str(inst.attrs[0]) == PARALLEL_ANN:
                parallel_default = int(_py(inst.inputs[1]))
            elif kind == "Annotate" and str(inst.attrs[0]) == TILING_ANN:
                tiled = tiled or block_names.get(hash(inst.inputs[0]))
            if not kind.startswith("Sample"):
                continue
            slot += 1
            if kind == SAMPLE_TILE:
                tile_slots.append(slot)
                tile_inner.append(int(_py(inst.attrs[1])))
                tile_extents.append(math.prod(int(f) for f in _py(trace.get_decision(inst))))
                kinds.append((kind, int(_py(inst.attrs[0])), tile_inner[-1]))
                if anchor is None:
                    anchor = loop_block.get(hash(inst.inputs[0])) or None
            elif kind == SAMPLE_CATEGORICAL:
                cat_slots.append(slot)
                cat_sizes.append(len(inst.attrs[0]))
                kinds.append((kind, tuple(_plain(inst.attrs[0]))))
            elif kind == SAMPLE_LOCATION:
                loc_slots.append(slot)
                loc_blocks.append(block_names.get(hash(inst.inputs[0]), ""))
                kinds.append((kind, loc_blocks[-1]))
            else:
                kinds.append((kind,))
        if anchor is None:  # no tiling (e.g. an elementwise sketch): the block with most loops
            func = space_mod["main"]
            names = [n for n in tir_loops.root_child_block_names(func)]
            depth = {n: len(tir_loops.loops_above(func, n) or []) for n in names}
            anchor = max(names, key=lambda n: depth[n]) if names else None
        return Sketch(
            index=index, insts=insts, tile_slots=tile_slots,
            tile_max_innermost=tile_inner, cat_slots=cat_slots, cat_sizes=cat_sizes, loc_slots=loc_slots,
            loc_blocks=loc_blocks,
            anchor=anchor, parallel_default=parallel_default,
            shape=_instruction_shape(trace.as_json()[0]),
            decision_kinds=tuple(kinds),
            tile_extents=tuple(tile_extents),
            thread_ranges=gpu_threads.read_thread_ranges(insts),
            tiled_block=tiled, padded=any(inst.kind.name == "PadEinsum" for inst in insts), base_mod=base_mod,
        )

    def _consumers(self, sk: Sketch, block: str) -> list[str]:
        """A block's consumers in the sketch's unscheduled program (for when a schedule inlined the
        block): the task's, or for a padded sketch the padded one, where the pad blocks live."""
        key = (sk.padded, block)
        if key not in self._consumer_cache:
            self._consumer_cache[key] = tir_loops.consumer_names(sk.base_mod["main"], block) if block else []
        return self._consumer_cache[key]

    # ------------------------------------------------------------------ replay
    def _apply(self, sk: Sketch, decisions: Sequence[Any] | None, seed: int) -> Any | None:
        """Replay the sketch with these decisions (None: sample fresh ones) before postproc."""
        from tvm import s_tir

        if decisions is None:
            given = {}
        else:
            samples = [i for i in sk.insts if i.kind.name.startswith("Sample")]
            given = {inst: _tvm_decision(d) for inst, d in zip(samples, decisions) if d is not None}  # None: sampled
        trace = s_tir.schedule.Trace(sk.insts, given)
        sch = s_tir.Schedule(self.mod, seed=seed, debug_mask="none", error_render_level="none")
        self.stats["replays"] += 1
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except Exception:  # noqa: BLE001 - any schedule error means "not a valid schedule"
            return None
        return sch

    @staticmethod
    def _read_decisions(sch: Any) -> tuple[Any, ...]:
        trace = sch.trace
        return tuple(_py(trace.get_decision(i)) for i in trace.insts if i.kind.name.startswith("Sample"))

    def _finish(self, sk: Sketch, sch: Any, parallel_extent: int | None) -> ScheduleState | None:
        """Parallel override, postprocs and read-back of a replayed schedule."""
        func = sch.mod["main"]
        if self.bounds_threads and tir_loops.thread_extents_out_of_range(func):
            # VerifyGPUCode would reject it, but only after the postprocs before it (several ms on
            # a GPU sketch); a binding the trace reader could not follow lands here
            self.stats["thread_extent"] += 1
            return None
        decisions = self._read_decisions(sch)
        loops = tir_loops.loops_above(func, sk.anchor) if sk.anchor else None
        infos = tir_loops.loop_infos(loops) if loops else []
        ladder = tir_loops.parallel_ladder(infos) if sk.parallel_default is not None else {}
        loc_candidates = tuple(
            tuple(tir_loops.compute_location_candidates(func, b, self._consumers(sk, b))) for b in sk.loc_blocks
        )
        try:
            if parallel_extent is not None and sk.parallel_default is not None:
                root = sch.get_sblock("root")
                sch.unannotate(root, PARALLEL_ANN)
                sch.annotate(root, PARALLEL_ANN, int(parallel_extent))
            sch.enter_postproc()
            for postproc in self.postprocs:
                if not postproc.apply(sch):
                    return None
        except Exception:  # noqa: BLE001 - a postproc that throws rejects the schedule
            return None
        counts = tuple(tir_loops.postproc_parallel_counts(sch.trace))
        extents = [i.extent or 1 for i in infos]
        anchor_fused = tir_loops.fused_prefix(sch.mod["main"], sk.anchor, extents) if sk.anchor else 0
        return ScheduleState(
            sketch=sk.index, decisions=decisions, parallel_extent=parallel_extent,
            parallel_counts=counts, anchor_fused=anchor_fused,
            anchor_extents=tuple(extents), ladder=ladder, loc_candidates=loc_candidates, sch=sch, space=self,
        )

    def replay(self, sketch: int, decisions: Sequence[Any] | None, parallel_extent: int | None = None,
               seed: int = 1) -> ScheduleState | None:
        """The state of `sketch` with these decisions (None if replay or a postproc fails)."""
        sk = self.sketches[sketch]
        sch = self._apply(sk, decisions, seed)
        state = None if sch is None else self._finish(sk, sch, parallel_extent)
        if state is None:
            self.stats["failed"] += 1
        return state

    def transplant(self, state: ScheduleState, sketch: int) -> ScheduleState | None:
        """`state`'s decisions (tile sizes, unroll, compute locations) and parallel extent replayed
        in another sketch of the task, when both sketches sample the same decisions in the same
        order (None otherwise, or when the replay fails).

        A CPU task's multi-level-tiled sketches differ only in where the output is cached, and
        they sample the same tiles: a sketch judged by random fills is judged by schedules several
        times slower than the task's best, while the best's own tiles in that sketch say what the
        sketch can do at the same refinement."""
        source, target = self.sketches[state.sketch], self.sketches[sketch]
        if sketch == state.sketch or source.decision_kinds != target.decision_kinds:
            return None
        parallel = state.parallel_extent if target.parallel_default is not None else None
        return self.replay(sketch, state.decisions, parallel)

    def transfer(self, source: ScheduleState) -> ScheduleState | None:
        """Another task's schedule replayed in this task: in the first sketch that samples the same
        kinds of decisions in the same order, each tile split re-fitted to this task's loop extent
        (`fit_tile`), the other decisions (unroll, compute locations) kept; None when no sketch
        matches or the replay fails. The sketch of the donor's index is tried first.

        A network's tasks of one operator kind share their sketch structure and differ in loop
        extents, and what makes a schedule fast there (the inner vector and register tiles, the
        unroll depth, where the producer is computed) carries from one layer to the next: the
        transfer-tuning observation. A sibling's refined schedule is a far better start than a
        random fill of the same sketch."""
        donor = source.space.sketches[source.sketch] if source.space is not None else None
        if donor is None:
            return None
        structure = decision_structure(donor.decision_kinds)
        # the donor's own sketch index first: a network's tasks of one kind list their sketches alike
        for sk in sorted(self.sketches, key=lambda sk: sk.index != donor.index):
            if decision_structure(sk.decision_kinds) != structure:
                continue
            decisions = list(source.decisions)
            for slot, extent, inner in zip(sk.tile_slots, sk.tile_extents, sk.tile_max_innermost):
                decisions[slot] = fit_tile(decisions[slot], extent, inner)
            return self.replay(sk.index, decisions, None)
        return None

    def random_state(self, sketch: int, rng: np.random.Generator) -> ScheduleState:
        """A random fill of a sketch: its trace replayed with fresh random decisions. When every
        try fails (GPU sketches whose fills VerifyGPUCode nearly always rejects), one of the
        sketch's earlier fills comes back instead: a repeat the search already knows, where an
        error would stop the whole tune."""
        if not 0 <= sketch < self.num_sketches:
            raise HiertuneError(f"sketch {sketch} out of range: this task has {self.num_sketches}")
        sk = self.sketches[sketch]
        for _ in range(self.config.random_fill_tries):
            tiles = self._tiles_within_thread_ranges(sk, rng) if sk.thread_ranges else None
            state = self.replay(sketch, tiles, None, seed=int(rng.integers(1, 2**31 - 1)))
            if state is not None:
                kept = self._fills.setdefault(sketch, [])
                kept.append(state)
                del kept[:-FILLS_KEPT]
                return state
        if self._fills.get(sketch):
            self.stats["repeated_fills"] += 1
            return self._fills[sketch][int(rng.integers(len(self._fills[sketch])))]
        raise HiertuneError(
            f"sketch {sketch}: no valid random fill in {self.config.random_fill_tries} tries; "
            "the task may not suit this target"
        )

    def _tiles_within_thread_ranges(self, sk: Sketch, rng: np.random.Generator,
                                    draws: int = 4096) -> list[Any] | None:
        """Tile decisions of a random fill (the other decisions None: sampled by the replay),
        redrawn until every threadIdx binding of the sketch is within its block's range; None when
        `draws` miss (the replay then samples everything, and VerifyGPUCode judges)."""
        slots = len(sk.decision_kinds)
        for _ in range(draws):
            tiles = [gpu_threads.sample_tile(extent, kind[1], kind[2], rng)
                     for extent, kind in zip(sk.tile_extents, (sk.decision_kinds[s] for s in sk.tile_slots))]
            if all(r.holds(tiles) for r in sk.thread_ranges):
                decisions: list[Any] = [None] * slots
                for slot, tile in zip(sk.tile_slots, tiles):
                    decisions[slot] = tile
                return decisions
        return None

    # ------------------------------------------------------------------ edits
    def action_mask(self, state: ScheduleState) -> np.ndarray:
        """Which of the `action_dim` actions are legal from `state` (no-op always is)."""
        sk = self.sketches[state.sketch]
        mask = np.zeros(self.action_dim, dtype=bool)
        mask[ea.NOOP] = True
        d = state.decisions
        moves = [(False, False)] + [(True, False)] * self.config.whole_tile_moves \
            + [(False, True)] * self.config.largest_prime_moves  # (whole, largest)
        for i, slot in enumerate(sk.tile_slots[: ea.MAX_TILE_INSTS]):
            factors = d[slot]
            if len(factors) > ea.MAX_TILE_LEVELS:
                continue
            for src in range(len(factors)):
                if factors[src] < 2:
                    continue
                for dst in range(len(factors)):
                    for whole, largest in moves:
                        moved = ea.move_tile_factor(factors, src, dst, sk.tile_max_innermost[i], whole, largest) \
                            if dst != src else None
                        if moved and (not sk.thread_ranges or self._threads_hold(sk, d, slot, moved)):
                            mask[ea.encode(ea.Edit("tile", inst=i, src=src, dst=dst, whole=whole, largest=largest))] = True
        for j, slot in enumerate(sk.loc_slots[: ea.MAX_COMPUTE_AT]):
            loc, cands = d[slot], state.loc_candidates[j]
            mask[ea.encode(ea.Edit("compute_at", inst=j, delta=-1))] = any(c < loc for c in cands)
            mask[ea.encode(ea.Edit("compute_at", inst=j, delta=1))] = any(c > loc for c in cands)
        if state.ladder:
            counts = sorted(state.ladder)
            mask[ea.PARALLEL_OFFSET] = any(c < state.anchor_fused for c in counts)
            mask[ea.PARALLEL_OFFSET + 1] = any(c > state.anchor_fused for c in counts)
        for j, (slot, size) in enumerate(zip(sk.cat_slots[: ea.MAX_CATEGORICAL], sk.cat_sizes)):
            mask[ea.encode(ea.Edit("unroll", inst=j, delta=-1))] = d[slot] > 0
            mask[ea.encode(ea.Edit("unroll", inst=j, delta=1))] = d[slot] < size - 1
        for a in state.invalid:
            mask[a] = False
        return mask

    @staticmethod
    def _threads_hold(sk: Sketch, decisions: Sequence[Any], slot: int, tile: tuple[int, ...]) -> bool:
        """Would `decisions` with `tile` at `slot` keep every threadIdx binding within its range?
        (A tile edit that leaves it is masked: VerifyGPUCode would refuse the replay.)"""
        tiles = [tile if s == slot else decisions[s] for s in sk.tile_slots]
        return all(r.holds(tiles) for r in sk.thread_ranges)

    def apply(self, state: ScheduleState, action: int) -> ScheduleState:
        """The state after one edit; the same state object when the edit is a no-op or invalid."""
        action = int(action)
        if action == ea.NOOP:
            return state
        memo_key = (state.key, action)
        if memo_key in self._memo:
            self._memo.move_to_end(memo_key)
            new = self._memo[memo_key]
        else:
            new = self._edit(state, ea.decode(action)) if self.action_mask(state)[action] else None
            self._memo[memo_key] = new
            if len(self._memo) > self.config.memo_size:
                self._memo.popitem(last=False)
        if new is None or new.key == state.key:
            state.invalid.add(action)
            return state
        return new

    def _edit(self, state: ScheduleState, edit: ea.Edit) -> ScheduleState | None:
        sk = self.sketches[state.sketch]
        d = list(state.decisions)
        par = state.parallel_extent
        if edit.kind == "tile":
            slot = sk.tile_slots[edit.inst]
            moved = ea.move_tile_factor(d[slot], edit.src, edit.dst, sk.tile_max_innermost[edit.inst], edit.whole,
                                        edit.largest)
            if moved is None:
                return None
            d[slot] = moved
        elif edit.kind == "unroll":
            slot = sk.cat_slots[edit.inst]
            d[slot] = d[slot] + edit.delta
            if not 0 <= d[slot] < sk.cat_sizes[edit.inst]:
                return None
        elif edit.kind == "parallel":
            counts = sorted(state.ladder)
            pick = [c for c in counts if c > state.anchor_fused] if edit.delta > 0 else \
                [c for c in counts if c < state.anchor_fused][::-1]
            # the postproc may hand loops back to vectorization: take the first step that moves
            for count in pick:
                new = self.replay(state.sketch, d, state.ladder[count])
                if new is not None and (new.anchor_fused - state.anchor_fused) * edit.delta > 0:
                    return new
            return None
        elif edit.kind == "compute_at":
            return self._edit_compute_at(state, sk, d, edit)
        return self.replay(state.sketch, d, par)

    def _edit_compute_at(self, state: ScheduleState, sk: Sketch, d: list[Any], edit: ea.Edit) -> ScheduleState | None:
        """Replay at the next candidate location in the edit's direction until the read-back
        decision moves (replay rounds an illegal location down to the nearest legal one)."""
        slot = sk.loc_slots[edit.inst]
        cur = d[slot]
        cands = state.loc_candidates[edit.inst]
        probes = sorted((c for c in cands if c > cur)) if edit.delta > 0 else sorted((c for c in cands if c < cur), reverse=True)
        for probe in probes:
            d[slot] = probe
            sch = self._apply(sk, d, 1)
            if sch is None:
                return None
            got = self._read_decisions(sch)[slot]
            if (got - cur) * edit.delta > 0:
                new = self._finish(sk, sch, state.parallel_extent)
                if new is None:
                    self.stats["failed"] += 1
                return new
        return None

    # ------------------------------------------------------------------ observation
    def observation(self, state: ScheduleState, score: float = 0.0) -> np.ndarray:
        """The fixed-size OBS_DIM vector of a state (layout in the module constants)."""
        sk = self.sketches[state.sketch]
        obs = np.zeros(OBS_DIM, dtype=np.float32)
        d = state.decisions
        off = 0
        for i, slot in enumerate(sk.tile_slots[: ea.MAX_TILE_INSTS]):
            factors = d[slot][: ea.MAX_TILE_LEVELS]
            extent = math.prod(d[slot])
            if extent > 1:
                for level, f in enumerate(factors):
                    obs[off + i * ea.MAX_TILE_LEVELS + level] = math.log2(f) / math.log2(extent)
            obs[OBS_TILE + i] = math.log2(max(extent, 1)) / 16.0
        off = OBS_TILE + ea.MAX_TILE_INSTS
        depth = len(state.anchor_extents) + 1
        for j, slot in enumerate(sk.loc_slots[: ea.MAX_COMPUTE_AT]):
            obs[off + j] = (d[slot] + 2) / depth
        off += ea.MAX_COMPUTE_AT
        n_anchor = max(len(state.anchor_extents), 1)
        obs[off] = state.anchor_fused / n_anchor
        obs[off + 1] = math.log2(max(math.prod(state.anchor_extents[: state.anchor_fused]), 1)) / 16.0
        off += 2
        for j, (slot, size) in enumerate(zip(sk.cat_slots[: ea.MAX_CATEGORICAL], sk.cat_sizes)):
            obs[off + j] = d[slot] / max(size - 1, 1)
        off += ea.MAX_CATEGORICAL
        obs[off] = state.sketch / max(self.num_sketches - 1, 1)
        obs[off + 1] = self.num_sketches / 16.0
        obs[off + 2] = math.log2(max(self.flops, 1.0)) / 40.0
        obs[off + 3] = n_anchor / 32.0
        obs[off + 4] = float(score)
        return obs

    # ------------------------------------------------------------------ records
    def state_from_trace_json(self, trace_json: Any) -> ScheduleState | None:
        """Rebuild a state from a trace's JSON (as `Trace.as_json()` or a record stores it)."""
        insts, decisions = trace_json[0], trace_json[1]
        end = next((i for i, inst in enumerate(insts) if inst[0] == "EnterPostproc"), len(insts))
        live = _live_positions(insts[:end])
        shape = _instruction_shape(insts[:end], live)
        by_index = {int(i): v for i, v in decisions}
        for sk in self.sketches:
            if shape[: len(sk.shape)] != sk.shape:
                continue
            # the record's own positions of the sketch's instructions
            values = [_py(by_index[i]) for i in live[: len(sk.shape)] if insts[i][0].startswith("Sample")]
            # the last value given to the root's parallel annotation: our override, or the
            # sketch's own instruction as MetaSchedule's MutateParallel rewrites it
            par = None
            for inst in insts[:end]:
                if inst[0] == "Annotate" and inst[2] and inst[2][0] == PARALLEL_ANN:
                    par = int(inst[1][1])
            if par == sk.parallel_default:
                par = None
            return self.replay(sk.index, values, par)
        return None

    def state_from_record(self, record_json: Any) -> ScheduleState | None:
        """Rebuild a state from `TuningRecord.as_json()` (None if no sketch of this task matches)."""
        try:
            return self.state_from_trace_json(record_json[0])
        except (IndexError, KeyError, TypeError, ValueError):
            return None

    def measure_candidate(self, state: ScheduleState) -> Any:
        """MetaSchedule's MeasureCandidate of a state (for cost models and feature extraction)."""
        from tvm.s_tir import meta_schedule as ms

        return ms.MeasureCandidate(state.sch, state.args_info)

    def tuning_record(self, state: ScheduleState, run_secs: Sequence[float] | None) -> Any:
        """A `ms.database.TuningRecord` of a state (workload = this task), for records and databases."""
        from tvm.s_tir import meta_schedule as ms

        return ms.database.TuningRecord(
            state.trace, ms.database.Workload(self.mod), [float(s) for s in run_secs] if run_secs else None,
            self.target, ms.arg_info.ArgInfo.from_prim_func(self.mod["main"]),
        )
