"""The operator graph that pipeline partitioning works on.

Nodes are operators carrying their parameter bytes; edges are tensors carrying their bytes. The
JSON form is the exchange format between importers (TFLite, Keras, synthetic), the committed
model zoo, the solvers and the pointer network:

    {"name": "resnet50", "source": "tflite", "dtype": "int8",
     "nodes": [{"name": "conv1", "op": "CONV_2D", "param_bytes": 9408, "macs": 118013952}, ...],
     "edges": [[src_index, dst_index, tensor_bytes], ...]}

`macs` is optional and written only when known: graphs imported from .tflite / .onnx files
carry it, Keras layer graphs and zoo JSON written from no .tflite at hand do not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from hiertune.errors import HiertuneError


T = TypeVar("T")


class GraphError(HiertuneError):
    """A graph file or object that cannot be partitioned (cyclic, empty, malformed)."""


@dataclass(frozen=True)
class OpNode:
    name: str
    op: str
    param_bytes: int
    macs: int = 0  # multiply-accumulates of one inference (`solvers/op_macs.py`); 0: unknown


@dataclass(frozen=True)
class Edge:
    src: int
    dst: int
    tensor_bytes: int


@dataclass
class OpGraph:
    """A DAG of operators. Node indices are positions in `nodes`; `validate()` checks acyclicity."""

    name: str
    nodes: list[OpNode]
    edges: list[Edge]
    source: str = "json"
    dtype: str = "int8"
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # ---------------------------------------------------------------- structure
    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    # The derived structures below are computed once and shared (see `memo`): read, don't modify.
    def successors(self) -> list[list[int]]:
        return self.memo("successors", OpGraph._successors)

    def predecessors(self) -> list[list[int]]:
        return self.memo("predecessors", OpGraph._predecessors)

    def _successors(self) -> list[list[int]]:
        succ: list[list[int]] = [[] for _ in self.nodes]
        for e in self.edges:
            succ[e.src].append(e.dst)
        return succ

    def _predecessors(self) -> list[list[int]]:
        pred: list[list[int]] = [[] for _ in self.nodes]
        for e in self.edges:
            pred[e.dst].append(e.src)
        return pred

    def validate(self) -> None:
        if not self.nodes:
            raise GraphError(f"graph {self.name!r} has no nodes: nothing to partition")
        n = len(self.nodes)
        for e in self.edges:
            if not (0 <= e.src < n and 0 <= e.dst < n):
                raise GraphError(
                    f"graph {self.name!r}: edge {e.src}->{e.dst} names a node outside 0..{n - 1}"
                )
            if e.src == e.dst:
                raise GraphError(f"graph {self.name!r}: self-loop on node {e.src} ({self.nodes[e.src].name})")
        for v in self.nodes:
            if v.param_bytes < 0 or v.macs < 0:
                raise GraphError(f"graph {self.name!r}: node {v.name!r} has negative param_bytes or macs")
        self._memo.clear()
        self.topological_order()  # raises on a cycle

    def memo(self, key: str, compute: Callable[[OpGraph], T]) -> T:
        """`compute(self)`, once: solvers re-derive the same structures (tensors, arrays) for
        every window they solve, and on large graphs that Python work rivals the solve itself.
        Cleared by `validate()`; a graph whose nodes or edges change must be validated again."""
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    def topological_order(self) -> list[int]:
        """Kahn's algorithm, smallest index first, so a graph stored in topological order keeps it."""
        return self.memo("topological_order", OpGraph._kahn_order)

    def _kahn_order(self) -> list[int]:
        import heapq

        indeg = [0] * len(self.nodes)
        for e in self.edges:
            indeg[e.dst] += 1
        succ = self.successors()
        ready = [v for v, d in enumerate(indeg) if d == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            v = heapq.heappop(ready)
            order.append(v)
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    heapq.heappush(ready, w)
        if len(order) != len(self.nodes):
            stuck = [self.nodes[v].name for v, d in enumerate(indeg) if d > 0][:5]
            raise GraphError(
                f"graph {self.name!r} has a cycle (through e.g. {stuck}); a pipeline needs a DAG"
            )
        return order

    def asap_levels(self) -> list[int]:
        """ASAP topological level of every node: 0 for sources, 1 + max level of predecessors."""
        return self.memo("asap_levels", OpGraph._asap_levels)

    def _asap_levels(self) -> list[int]:
        level = [0] * len(self.nodes)
        pred = self.predecessors()
        for v in self.topological_order():
            if pred[v]:
                level[v] = 1 + max(level[u] for u in pred[v])
        return level

    @property
    def total_param_bytes(self) -> int:
        return self.memo("total_param_bytes", lambda g: sum(v.param_bytes for v in g.nodes))

    @property
    def total_macs(self) -> int:
        return sum(v.macs for v in self.nodes)

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "dtype": self.dtype,
            "nodes": [{"name": v.name, "op": v.op, "param_bytes": v.param_bytes, **({"macs": v.macs} if v.macs else {})}
                      for v in self.nodes],
            "edges": [[e.src, e.dst, e.tensor_bytes] for e in self.edges],
        }

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "<dict>") -> OpGraph:
        if not isinstance(data, dict) or "nodes" not in data or "edges" not in data:
            raise GraphError(f"{origin}: not a hiertune graph (expected an object with 'nodes' and 'edges')")
        try:
            nodes = [OpNode(str(n["name"]), str(n.get("op", "")), int(n.get("param_bytes", 0)), int(n.get("macs", 0)))
                     for n in data["nodes"]]
            edges = [Edge(int(s), int(d), int(b)) for s, d, b in data["edges"]]
        except (KeyError, TypeError, ValueError) as err:
            raise GraphError(f"{origin}: malformed node or edge entry ({err}); see hiertune/solvers/graph.py for the format") from None
        return cls(
            name=str(data.get("name", Path(origin).stem)),
            nodes=nodes,
            edges=edges,
            source=str(data.get("source", "json")),
            dtype=str(data.get("dtype", "int8")),
        )

    @classmethod
    def load_json(cls, path: str | Path) -> OpGraph:
        path = Path(path)
        if not path.exists():
            raise GraphError(f"graph file {path} does not exist")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise GraphError(f"graph file {path} is not valid JSON ({err})") from None
        return cls.from_dict(data, origin=str(path))

    def save_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), separators=(",", ":")))

    def longest_path_length(self) -> int:
        return max(self.asap_levels()) + 1 if self.nodes else 0
