"""Read-only views of a scheduled PrimFunc that MetaSchedule computes in C++ but does not expose.

The parallel edit needs what `RewriteParallelVectorizeUnroll` sees (loop extents, iterator types,
single-child bodies of a block's outer loops) and what it did (how many loops it fused into each
parallel loop). Both are read here without calling schedule primitives, so the traces that go to
the records stay exactly the traces that were replayed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

DATA_PAR = 0  # tvm IterVar.DataPar
COMM_REDUCE = 2  # tvm IterVar.CommReduce


@dataclass(frozen=True)
class LoopInfo:
    """One loop above a block, as the parallel postproc judges it."""

    extent: int | None  # None when not a constant
    data_par: bool
    annotated: bool  # annotations or a thread binding stop the fusion
    single_child: bool


def _children(stmt: Any) -> list[Any]:
    from tvm import tirx

    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    out = []
    for attr in ("body", "then_case", "else_case"):
        child = getattr(stmt, attr, None)
        if child is not None:
            out.append(child)
    return out


def _is_realize(stmt: Any) -> bool:
    from tvm import s_tir

    return isinstance(stmt, s_tir.SBlockRealize)


def child_realizes(stmt: Any) -> Iterator[Any]:
    """The block realizes directly in `stmt`'s scope, pre-order, not descending into blocks."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if _is_realize(node):
            yield node
            continue
        stack.extend(reversed(_children(node)))


def root_child_block_names(func: Any) -> list[str]:
    """Names of the blocks in the root block's scope, in the order of `get_child_blocks(root)`."""
    root = func.body.block
    return [r.block.name_hint for r in child_realizes(root.body)]


def loops_above(func: Any, block_name: str) -> list[Any] | None:
    """The For nodes from the root down to the block named `block_name` (outermost first)."""
    from tvm import tirx

    def walk(stmt: Any, path: list[Any]) -> list[Any] | None:
        if _is_realize(stmt):
            if stmt.block.name_hint == block_name:
                return path
            return walk(stmt.block.body, path) if stmt.block.name_hint == "root" else None
        if isinstance(stmt, tirx.For):
            return walk(stmt.body, path + [stmt])
        for child in _children(stmt):
            found = walk(child, path)
            if found is not None:
                return found
        return None

    return walk(func.body, [])


def loops_data_par(loops: list[Any]) -> list[bool]:
    """MetaSchedule's GetLoopIterType(loop) == kDataPar for a chain of nested loops, in one walk.

    A loop is data-parallel when only spatial block vars bind it (or none do). Blocks that can
    use a loop's var all sit below the outermost loop, so one pass over its blocks serves all.
    """
    from tvm import tirx

    if not loops:
        return []
    index = {hash(loop.loop_var): i for i, loop in enumerate(loops)}
    bad = [False] * len(loops)  # bound by a reduction or other non-spatial block var
    for realize in child_realizes(loops[0].body):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if int(iv.iter_type) == DATA_PAR:
                continue
            for var in tirx.analysis.undefined_vars(value):
                i = index.get(hash(var))
                if i is not None:
                    bad[i] = True
    return [not b for b in bad]


def loop_infos(loops: list[Any]) -> list[LoopInfo]:
    from tvm import tirx

    infos = []
    for loop, data_par in zip(loops, loops_data_par(loops)):
        extent = loop.extent
        body = loop.body
        single = not isinstance(body, tirx.SeqStmt) or len(body.seq) == 1
        infos.append(
            LoopInfo(
                extent=int(extent.value) if hasattr(extent, "value") else None,
                data_par=data_par,
                annotated=bool(len(loop.annotations)) or loop.thread_binding is not None,
                single_child=single,
            )
        )
    return infos


def parallel_fuse_count(infos: list[LoopInfo], max_extent: int) -> int:
    """How many outer loops the parallel postproc fuses for `meta_schedule.parallel = max_extent`.

    Mirrors AdjustParallelVectorize: fuse leading data-parallel, unannotated, constant loops; the
    loop whose extent pushes the product past `max_extent` is still fused, then stop; a loop with
    several children ends the run; a product of 1 means no parallel loop (0 here). The postproc
    may still give loops back to vectorization, so callers read the real count back afterwards.
    """
    count, prod = 0, 1
    for info in infos:
        if not info.data_par or info.annotated or info.extent is None:
            break
        count += 1
        prod *= info.extent
        if prod > max_extent or not info.single_child:
            break
    return 0 if prod == 1 else count


def parallel_ladder(infos: list[LoopInfo]) -> dict[int, int]:
    """Fused-loop count -> smallest `meta_schedule.parallel` value that yields it.

    Counts are normalised like `fused_prefix` reads them back: the shortest prefix of loops with
    the same product (fusing a trailing unit loop makes the same program, so it is no step).
    """
    extents = [i.extent for i in infos]
    ladder: dict[int, int] = {}
    prod = 1
    for info in [None, *infos]:
        if info is not None:
            if info.extent is None:
                break
            prod *= info.extent
        count = parallel_fuse_count(infos, prod)
        if count == 0:
            continue
        fused = math.prod(extents[:count])
        shortest = next(k for k in range(1, count + 1) if math.prod(extents[:k]) == fused)
        ladder.setdefault(shortest, prod)
    return ladder


THREAD_EXTENT_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH = "meta_schedule.thread_extent_high_inclusive"


def thread_extents_out_of_range(func: Any) -> bool:
    """Does a block whose schedule rule bounded its threads per block (MetaSchedule's GPU tiling
    annotates it with THREAD_EXTENT_LOW / _HIGH: a warp at least, the target's limit at most) sit
    under threadIdx loops whose extents multiply to outside that range? VerifyGPUCode's first check
    (its ThreadExtentChecker) rejects exactly those, after every postproc before it has run; read
    here from the replayed loops, before any postproc (see `ScheduleSpace`)."""
    from tvm import tirx

    stack = [(func.body, 1)]
    while stack:
        node, threads = stack.pop()
        if isinstance(node, tirx.For) and node.thread_binding is not None \
                and node.thread_binding.thread_tag.startswith("threadIdx") and hasattr(node.extent, "value"):
            threads *= int(node.extent.value)
        if _is_realize(node):
            annotations = node.block.annotations
            if THREAD_EXTENT_LOW in annotations and threads < int(annotations[THREAD_EXTENT_LOW]):
                return True
            if THREAD_EXTENT_HIGH in annotations and threads > int(annotations[THREAD_EXTENT_HIGH]):
                return True
            stack.append((node.block.body, threads))
        else:
            stack.extend((child, threads) for child in _children(node))
    return False


def postproc_parallel_counts(trace: Any) -> list[int]:
    """Loops fused into each child block's parallel loop, read from the post-processed trace.

    One entry per `GetChildBlocks` child of the annotated root, in order (0: no parallel loop).
    """
    insts = list(trace.insts)
    start = next((i for i, inst in enumerate(insts) if inst.kind.name == "EnterPostproc"), None)
    if start is None:
        return []
    children: list[int] = []
    counts: dict[int, int] = {}
    fused: dict[int, int] = {}
    current: int | None = None
    for inst in insts[start + 1:]:
        kind = inst.kind.name
        if kind == "GetChildBlocks" and not children:
            children = [hash(rv) for rv in inst.outputs]
        elif kind == "GetLoops":
            current = hash(inst.inputs[0])
        elif kind == "Fuse":
            fused[hash(inst.outputs[0])] = sum(fused.get(hash(rv), 1) for rv in inst.inputs if hasattr(rv, "same_as"))
        elif kind == "Split":
            fused[hash(inst.outputs[0])] = fused.get(hash(inst.inputs[0]), 1)
        elif kind == "Parallel" and current is not None:
            counts[current] = fused.get(hash(inst.inputs[0]), 1)
    return [counts.get(h, 0) for h in children]


def fused_prefix(func: Any, block_name: str, extents: list[int]) -> int:
    """How many of a block's outer loops (pre-postproc `extents`) its parallel loop now covers.

    Read from the post-processed function: the outermost loop above the block (or above its
    `_update` half after decompose-reduction) is parallel with extent P; the answer is the
    shortest prefix of `extents` whose product is P (0 when there is no parallel loop). The
    parallel loop may come from another block's fusion when both share outer loops.
    """
    from tvm import tirx

    loops = loops_above(func, block_name) or loops_above(func, block_name + "_update") or []
    if not loops or loops[0].kind != tirx.ForKind.PARALLEL or not hasattr(loops[0].extent, "value"):
        return 0
    target = int(loops[0].extent.value)
    prod = 1
    for k, extent in enumerate(extents, start=1):
        prod *= extent
        if prod == target:
            return k
        if prod > target:
            break
    return 0


def _region_buffer(region: Any) -> Any:
    """The buffer (its data var in TVM 0.27's TensorRegion) a block read/write region names."""
    return region.buffer if hasattr(region, "buffer") else region.source


def consumer_names(func: Any, producer: str) -> list[str]:
    """Blocks in the root scope that read a buffer `producer` writes ([] if it is not there)."""
    realizes = list(child_realizes(func.body.block.body))
    prod = next((r for r in realizes if r.block.name_hint == producer), None)
    if prod is None:
        return []
    written = [_region_buffer(w) for w in prod.block.writes]
    return [
        r.block.name_hint for r in realizes
        if r.block.name_hint != producer
        and any(_region_buffer(rd).same_as(b) for rd in r.block.reads for b in written)
    ]


def max_loop_depth(func: Any) -> int:
    """The deepest loop nest of a function (a bound on compute-at loop indices)."""
    from tvm import tirx

    def depth(stmt: Any) -> int:
        if _is_realize(stmt):
            return depth(stmt.block.body)
        here = 1 if isinstance(stmt, tirx.For) else 0
        return here + max((depth(c) for c in _children(stmt)), default=0)

    return depth(func.body)


def compute_location_candidates(func: Any, producer: str, fallback_consumers: list[str]) -> list[int]:
    """The locations SampleComputeLocation may choose for block `producer`, as MetaSchedule's
    CollectComputeLocation lists them, read from a schedule where the decision is already made.

    -2 (inline) and -1 (root) come first; then each loop above the first consumer up to the
    consumers' deepest common loop, skipping unit loops, data-parallel loops after a reduction
    loop and trailing reduction loops. The consumer's loops are the same before and after the
    producer moved under one of them, so the final schedule can answer; when the producer was
    inlined, `fallback_consumers` (found in the unscheduled function) name its consumers. Two
    checks stay in C++ (CanComputeInline, CanComputeAt), so the list can hold a location too many
    (replay is the judge). When the consumers cannot be found, every loop index is a candidate.
    """
    consumers = consumer_names(func, producer) or list(fallback_consumers)
    chains = [loops_above(func, name) for name in consumers]
    if not producer or not consumers or any(c is None for c in chains):
        return list(range(-2, max_loop_depth(func)))
    common = 0
    while all(len(c) > common for c in chains) and all(c[common].same_as(chains[0][common]) for c in chains):
        common += 1
    loops = chains[0][:common]
    data_par = loops_data_par(loops)
    last_dp = max((i for i, dp in enumerate(data_par) if dp), default=-1)
    out, visited_reduce = [-2, -1], False
    for i, loop in enumerate(loops):
        if hasattr(loop.extent, "value") and int(loop.extent.value) == 1:
            continue
        if data_par[i]:
            if visited_reduce:
                break
        else:
            visited_reduce = True
            if i > last_dp:
                break
        out.append(i)
    return out
