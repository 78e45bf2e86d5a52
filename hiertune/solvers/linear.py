"""A solver-neutral integer linear model: the one partition model every backend translates.

Writing the stage-partition model once, as plain rows of integer coefficients, keeps Gurobi,
HiGHS and CP-SAT solving exactly the same problem (CP-SAT needs integers anyway, and exact
integer byte counts make the backends' optima comparable bit for bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

INF = math.inf


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
