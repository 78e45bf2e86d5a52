"""Seeded random operator DAGs for training the pointer-network pre-scheduler.

Why synthetic: exact-ILP labels are cheap only on small graphs (|V| = 30), so the pre-scheduler
learns on many small DAGs that look like pieces of real networks and then runs on real ones.
The statistics mimic Keras layer graphs of ImageNet models (see the committed zoo): one input,
mostly in-degree 1 with merge nodes (Add/Concatenate) of in-degree 2..max, branch points with
out-degree 2..4, a bit under half the nodes carrying parameters with log-normal sizes (a few
large Dense/Conv layers dominate), activation tensors that shrink with depth, and every branch
merged back so the graph ends in one output. Each graph is either chain-like (ResNet, VGG,
MobileNet) or branchy (Inception, NASNet), drawn per graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.graph import Edge, OpGraph, OpNode


@dataclass(frozen=True)
class SyntheticDagConfig:
    """How to draw one random DAG; `max_in_degree` may be a fixed int or drawn per graph from a range."""

    num_nodes: int = 30
    min_max_in_degree: int = 2          # per graph, max in-degree is drawn from [min, max]
    max_max_in_degree: int = 6
    branchy_prob: float = 0.35          # share of graphs that are branchy (Inception-like)
    param_node_prob: float = 0.6        # share of nodes carrying parameters (Conv/BN/Dense)
    log10_param_mean: float = 4.4       # log10 bytes of a convolution (~25 KB); BN/depthwise smaller
    log10_param_sd: float = 0.4
    log10_graph_scale_sd: float = 0.4   # per-graph shift of all parameter sizes (small vs big nets)
    log10_tensor_start: float = 5.6     # log10 bytes of the first activation tensor (~400 KB int8)
    log10_tensor_end: float = 4.3       # ... and of the last one (~20 KB): tensors shrink with depth
    log10_tensor_sd: float = 0.3

    def validate(self) -> None:
        if self.num_nodes < 1:
            raise HiertuneError(f"SyntheticDagConfig.num_nodes={self.num_nodes}: need at least 1 node")
        if not (1 <= self.min_max_in_degree <= self.max_max_in_degree):
            raise HiertuneError(
                f"SyntheticDagConfig in-degree range [{self.min_max_in_degree}, {self.max_max_in_degree}] "
                "is empty or below 1: use 1 <= min_max_in_degree <= max_max_in_degree (e.g. 2..6)"
            )
        for name in ("branchy_prob", "param_node_prob"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise HiertuneError(f"SyntheticDagConfig.{name}={p}: must be a probability in [0, 1]")


_MERGE_OPS = ("Add", "Concatenate")
# op, probability, log10 shift from a convolution (BN: 4 bytes/channel; depthwise: 9/channel)
_PARAM_OPS = (("Conv2D", 0.42, 0.0), ("BatchNormalization", 0.4, -2.0), ("DepthwiseConv2D", 0.14, -1.6),
              ("Dense", 0.04, 0.8))
_FREE_OPS = ("Activation", "ReLU", "MaxPooling2D", "ZeroPadding2D", "Dropout")


def generate_dag(seed: int, config: SyntheticDagConfig = SyntheticDagConfig()) -> OpGraph:
    """One random DAG, identical for identical (seed, config). Node indices are a topological order."""
    config.validate()
    rng = np.random.default_rng(seed)
    n = config.num_nodes
    max_in = int(rng.integers(config.min_max_in_degree, config.max_max_in_degree + 1))
    branchy = bool(rng.random() < config.branchy_prob)
    # Chain-like nets branch rarely (residual blocks); branchy nets fork often and wide.
    fork_prob = 0.3 if branchy else 0.08
    merge_prob = 0.3 if branchy else 0.12
    scale = rng.normal(0.0, config.log10_graph_scale_sd)

    preds: list[list[int]] = [[] for _ in range(n)]
    open_ends: list[int] = [0] if n > 0 else []   # nodes whose output nobody consumes yet
    fanout = [0] * n
    fan_target = [1] * n
    for v in range(n):
        if rng.random() < fork_prob:
            fan_target[v] = int(rng.integers(2, 5))
    for v in range(1, n):
        remaining = n - v  # nodes left including v
        # Close branches near the end so the graph ends in (mostly) one output.
        must_close = len(open_ends) > 1 and len(open_ends) - 1 >= (remaining - 1) * (max_in - 1)
        want_merge = len(open_ends) > 1 and (must_close or rng.random() < merge_prob or remaining <= 2)
        if want_merge:
            k = min(len(open_ends), max_in)
            k = k if (must_close or remaining <= 2) else int(rng.integers(2, k + 1))
            # most recent open ends first: merges join the branches just produced
            chosen = list(open_ends[-k:])
        else:
            # extend a branch: usually the newest open end, sometimes an older one; or re-read a
            # fork point that still wants consumers (a new parallel branch)
            forks = [u for u in range(v) if fanout[u] >= 1 and fanout[u] < fan_target[u] and v - u <= 8]
            if forks and rng.random() < 0.5:
                chosen = [forks[int(rng.integers(len(forks)))]]
            elif open_ends:
                idx = len(open_ends) - 1 - min(int(rng.geometric(0.7)) - 1, len(open_ends) - 1)
                chosen = [open_ends[idx]]
            else:
                chosen = [v - 1]
        preds[v] = sorted(set(chosen))
        for u in preds[v]:
            fanout[u] += 1
            if u in open_ends:
                open_ends.remove(u)
        open_ends.append(v)

    nodes: list[OpNode] = []
    for v in range(n):
        if len(preds[v]) >= 2:
            op = _MERGE_OPS[int(rng.integers(len(_MERGE_OPS)))]
            pb = 0
        elif v > 0 and rng.random() < config.param_node_prob:
            op, _, shift = _PARAM_OPS[int(rng.choice(len(_PARAM_OPS), p=[o[1] for o in _PARAM_OPS]))]
            pb = int(10 ** rng.normal(config.log10_param_mean + scale + shift, config.log10_param_sd))
        else:
            op = "InputLayer" if v == 0 else _FREE_OPS[int(rng.integers(len(_FREE_OPS)))]
            pb = 0
        nodes.append(OpNode(f"{op.lower()}_{v}", op, max(pb, 0)))

    edges: list[Edge] = []
    for v in range(n):
        for u in preds[v]:
            frac = u / max(n - 1, 1)
            mean = config.log10_tensor_start + frac * (config.log10_tensor_end - config.log10_tensor_start)
            tb = int(10 ** rng.normal(mean, config.log10_tensor_sd))
            edges.append(Edge(u, v, max(tb, 1)))
    return OpGraph(name=f"synthetic_{n}_{seed}", nodes=nodes, edges=edges, source="synthetic")


def generate_dags(count: int, seed: int, config: SyntheticDagConfig = SyntheticDagConfig()) -> list[OpGraph]:
    """`count` graphs with seeds derived from `seed` (graph i of one call is the same in every call)."""
    if count < 0:
        raise HiertuneError(f"graph count {count} is negative")
    return [generate_dag(int(s), config) for s in np.random.SeedSequence(seed).generate_state(count)]


def graph_statistics(graph: OpGraph) -> dict[str, float]:
    """Shape statistics used to match the generator against real model graphs."""
    n = graph.num_nodes
    indeg = [len(p) for p in graph.predecessors()]
    outdeg = [len(s) for s in graph.successors()]
    params = [v.param_bytes for v in graph.nodes]
    nz = [p for p in params if p > 0]
    tens = [e.tensor_bytes for e in graph.edges if e.tensor_bytes > 0]
    return {
        "nodes": float(n),
        "edges_per_node": len(graph.edges) / n,
        "frac_in_ge2": sum(d >= 2 for d in indeg) / n,
        "max_in_degree": float(max(indeg)),
        "frac_out_ge2": sum(d >= 2 for d in outdeg) / n,
        "frac_param_nodes": len(nz) / n,
        "log10_param_median": float(np.median(np.log10(nz))) if nz else 0.0,
        "log10_param_sd": float(np.std(np.log10(nz))) if nz else 0.0,
        "top5_param_share": sum(sorted(params)[-5:]) / max(sum(params), 1),
        "log10_tensor_median": float(np.median(np.log10(tens))) if tens else 0.0,
        "depth_ratio": graph.longest_path_length() / n,
        "sinks": float(sum(d == 0 for d in outdeg)),
    }

