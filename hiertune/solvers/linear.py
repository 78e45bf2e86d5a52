"""A solver-neutral integer linear model: the one partition model every backend translates.

Writing the stage-partition model once, as plain rows of integer coefficients, keeps Gurobi,
HiGHS and CP-SAT solving exactly the same problem (CP-SAT needs integers anyway, and exact
integer byte counts make the backends' optima comparable bit for bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

INF = math.inf


class LinExpr:
    """`const + sum(coef * var)`: the side of a model row, built the way the model reads on paper
    (`P - mem_k >= 0`), so no row spells out its own constant-and-terms bookkeeping."""

    __slots__ = ("const", "terms")

    def __init__(self, const: int = 0, terms: dict[int, int] | None = None) -> None:
        self.const = const
        self.terms = terms if terms is not None else {}

    @staticmethod
    def var(index: int) -> LinExpr:
        return LinExpr(0, {index: 1})

    def __add__(self, other: LinExpr | int) -> LinExpr:
        return self._combined(other, 1)

    def __sub__(self, other: LinExpr | int) -> LinExpr:
        return self._combined(other, -1)

    def _combined(self, other: LinExpr | int, sign: int) -> LinExpr:
        """self + sign * other as a new expression (one dict copy: model rows are built by the
        ten thousand)."""
        if isinstance(other, int):
            return LinExpr(self.const + sign * other, dict(self.terms))
        terms = dict(self.terms)
        for i, c in other.terms.items():
            terms[i] = terms.get(i, 0) + sign * c
        return LinExpr(self.const + sign * other.const, terms)


@dataclass
class LinearModel:
    """Integer variables with bounds and ranged rows `lo <= sum(coef * var) <= hi`."""

    lb: list[int] = field(default_factory=list)
    ub: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rows: list[tuple[dict[int, int], float, float]] = field(default_factory=list)

    @property
    def num_vars(self) -> int:
        return len(self.lb)

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def add_var(self, lb: int, ub: int, name: str = "") -> int:
        self.lb.append(int(lb))
        self.ub.append(int(ub))
        self.names.append(name)
        return len(self.lb) - 1

    def add_row(self, terms: dict[int, int], lo: float = -INF, hi: float = INF) -> None:
        """Add `lo <= terms <= hi`; zero coefficients are dropped, constant rows are checked."""
        terms = {v: int(c) for v, c in terms.items() if c}
        if not terms:
            if lo > 0 or hi < 0:
                raise ValueError(f"infeasible constant row: {lo} <= 0 <= {hi}")
            return
        self.rows.append((terms, lo, hi))

    def add_ge(self, lhs: LinExpr, rhs: LinExpr | int = 0) -> None:
        """Add the row `lhs >= rhs`."""
        self._add_difference(lhs, rhs, lower=True)

    def add_le(self, lhs: LinExpr, rhs: LinExpr | int = 0) -> None:
        """Add the row `lhs <= rhs`."""
        self._add_difference(lhs, rhs, lower=False)

    def _add_difference(self, lhs: LinExpr, rhs: LinExpr | int, lower: bool) -> None:
        """lhs - rhs >= 0 (or <= 0), without building the difference as an expression first."""
        terms = dict(lhs.terms)
        bound = -lhs.const
        if isinstance(rhs, int):
            bound += rhs
        else:
            bound += rhs.const
            for i, c in rhs.terms.items():
                terms[i] = terms.get(i, 0) - c
        terms = {v: c for v, c in terms.items() if c}
        lo, hi = (bound, INF) if lower else (-INF, bound)
        if not terms:
            if lo > 0 or hi < 0:
                raise ValueError(f"infeasible constant row: {lo} <= 0 <= {hi}")
            return
        self.rows.append((terms, lo, hi))

    def objective_value(self, objective: dict[int, int], values: list[int]) -> int:
        return sum(c * values[v] for v, c in objective.items())

    def copy(self) -> LinearModel:
        return LinearModel(list(self.lb), list(self.ub), list(self.names), list(self.rows))


@dataclass
class SolveOutcome:
    """What a backend found: integer values (None when it found nothing), proven optimality."""

    values: list[int] | None
    optimal: bool
    objective: int | None
    seconds: float
    status: str
