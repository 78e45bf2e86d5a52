"""Direct backends for the neutral `LinearModel`: gurobipy, highspy and OR-Tools CP-SAT.

Each backend translates the same rows, minimises one objective from an optional hint and returns
integer values, so the lexicographic driver in `ilp.py` never sees a solver's own API. Gurobi's
size-limited licence (pip's gurobipy without a licence file: 2000 variables, 2000 constraints)
raises errno 10010 from `optimize()`; that is turned into `GurobiSizeLimitError` for the caller
to fall back on.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hiertune.errors import HiertuneError
from hiertune.solvers.linear import LinearModel, SolveOutcome

SOLVERS = ("gurobi", "highs", "cpsat")
GUROBI_SIZE_LIMIT = 2000  # variables and linear constraints allowed without a licence file
GUROBI_SIZE_LIMIT_ERRNO = 10010  # GRB.Error.SIZE_LIMIT_EXCEEDED
_INT64_MAX = 2**63 - 1  # CP-SAT's unbounded side of a linear domain


class GurobiSizeLimitError(HiertuneError):
    """The model is bigger than the installed Gurobi licence allows."""


def default_cpsat_parameters() -> dict[str, Any]:
    """CP-SAT parameters for the partition model. Probing and the LP relaxation cost more than they
    prune here: without them the whole-graph solves of the 14 zoo models (K = 4..6) took
    1.4-2.8x less CPU time and the Inc-ILP windows up to 3x less, every optimum unchanged.
    Presolve is much of a solve here, and little of it pays: no repeated presolve passes
    (`max_presolve_iterations` 0) and no symmetry detection. Measured on the cumulative model
    over the 42 zoo cases: the whole-graph solves 1.32x faster than with one presolve pass
    (geomean 160 -> 121 ms; NASNetMobile at K = 4, 5 slower, 1.8 -> 2.5 s), the gamma = 10
    windows about 1.2x; every optimum unchanged."""
    return {"cp_model_probing_level": 0, "linearization_level": 0,
            "max_presolve_iterations": 0, "symmetry_level": 0}


class StopSignal:
    """Ends a running solve from another thread: the solve returns its incumbent as at a time
    limit. For a proof found outside the solver (the band bound) while it searches on: stopping
    and restarting the solver instead loses its search state. CP-SAT and Gurobi honour it; HiGHS
    runs to its own limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Callable[[], None] | None = None
        self.requested = False

    def attach(self, stop: Callable[[], None]) -> None:
        """The running solve's own stop function (thread-safe in CP-SAT and Gurobi)."""
        with self._lock:
            self._stop = stop
            if self.requested:
                stop()

    def detach(self) -> None:
        with self._lock:
            self._stop = None

    def set(self) -> None:
        with self._lock:
            self.requested = True
            if self._stop is not None:
                self._stop()


@dataclass
class BackendSettings:
    """Per-solve limits; `mip_gap=0` because lexicographic fixing needs true optima.
    `cpsat_parameters`: extra CP-SAT `SatParameters` fields (name -> value)."""

    time_limit_s: float = 60.0
    mip_gap: float = 0.0
    threads: int = 1
    seed: int = 0
    cpsat_parameters: dict[str, Any] = field(default_factory=default_cpsat_parameters)
    # Called with each improving solution's values as it is found: CP-SAT and Gurobi report every
    # incumbent, HiGHS only its final one. For time-to-target measurements of unproven solves, and
    # for the band bound's checks while the solve goes on.
    on_solution: Callable[[list[int]], None] | None = None
    stop: StopSignal | None = None


def solve_linear(
    solver: str,
    model: LinearModel,
    objective: dict[int, int],
    settings: BackendSettings,
    hint: list[int] | None = None,
    cpsat_model: CpSatModel | None = None,
) -> SolveOutcome:
    """Minimise `objective` over `model` with one backend. `cpsat_model` carries CP-SAT's copy of
    the model from one call to the next (the phases of a lexicographic solve)."""
    if solver == "gurobi":
        return _solve_gurobi(model, objective, settings, hint)
    if solver == "highs":
        out = _solve_highs(model, objective, settings, hint)
        if settings.on_solution is not None and out.values is not None:
            settings.on_solution(out.values)
        return out
    if solver == "cpsat":
        return _solve_cpsat(model, objective, settings, hint, cpsat_model or CpSatModel())
    raise HiertuneError(f"unknown solver {solver!r}; choose one of auto, {', '.join(SOLVERS)}")


# ------------------------------------------------------------------------------------ Gurobi
@functools.lru_cache(maxsize=1)
def _gurobi_env():
    import gurobipy as gp

    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    return env


@functools.lru_cache(maxsize=1)
def gurobi_available() -> bool:
    try:
        _gurobi_env()
    except Exception:  # no gurobipy, or a licence file that does not validate
        return False
    return True


@functools.lru_cache(maxsize=1)
def gurobi_full_licence() -> bool:
    """True when Gurobi solves a model just over the size limit (a real licence is installed)."""
    if not gurobi_available():
        return False
    import gurobipy as gp

    m = gp.Model(env=_gurobi_env())
    m.addVars(GUROBI_SIZE_LIMIT + 1)
    try:
        m.optimize()
    except gp.GurobiError as err:
        if err.errno == GUROBI_SIZE_LIMIT_ERRNO:
            return False
        raise
    finally:
        m.dispose()
    return True


def gurobi_fits(model: LinearModel, extra_rows: int = 0) -> bool:
    """Whether the size-limited licence accepts the model (ranged rows count twice)."""
    rows = sum(2 if (lo > -math.inf and hi < math.inf and lo != hi) else 1 for _, lo, hi in model.rows)
    return model.num_vars <= GUROBI_SIZE_LIMIT and rows + extra_rows <= GUROBI_SIZE_LIMIT


def _solve_gurobi(model: LinearModel, objective: dict[int, int], settings: BackendSettings,
                  hint: list[int] | None) -> SolveOutcome:
    import gurobipy as gp
    from gurobipy import GRB

    start = time.perf_counter()
    m = gp.Model(env=_gurobi_env())
    try:
        m.Params.TimeLimit = max(settings.time_limit_s, 0.01)
        m.Params.MIPGap = settings.mip_gap
        m.Params.Threads = settings.threads
        m.Params.Seed = settings.seed
        xs = [
            m.addVar(lb=lb, ub=ub, vtype=GRB.BINARY if (lb, ub) == (0, 1) else GRB.INTEGER)
            for lb, ub in zip(model.lb, model.ub)
        ]
        for terms, lo, hi in model.rows:
            expr = gp.LinExpr(list(terms.values()), [xs[v] for v in terms])
            if lo == hi:
                m.addLConstr(expr, GRB.EQUAL, lo)
                continue
            if lo > -math.inf:
                m.addLConstr(expr, GRB.GREATER_EQUAL, lo)
            if hi < math.inf:
                m.addLConstr(expr, GRB.LESS_EQUAL, hi)
        m.setObjective(gp.LinExpr(list(objective.values()), [xs[v] for v in objective]), GRB.MINIMIZE)
        if hint is not None:
            for var, val in zip(xs, hint):
                var.Start = val
        on_solution = settings.on_solution

        def incumbents(model: Any, where: int) -> None:
            if where == GRB.Callback.MIPSOL:
                on_solution([int(round(v)) for v in model.cbGetSolution(xs)])

        if settings.stop is not None:
            settings.stop.attach(m.terminate)
        try:  # a Python callback runs at every Gurobi event: installed only when someone listens
            m.optimize(incumbents if on_solution is not None else None)
        except gp.GurobiError as err:
            if err.errno == GUROBI_SIZE_LIMIT_ERRNO:
                raise GurobiSizeLimitError(
                    f"the model ({model.num_vars} variables, {model.num_rows} rows) exceeds the Gurobi "
                    f"licence's size limit of {GUROBI_SIZE_LIMIT}; install a full licence (grbgetkey) "
                    "or use --solver cpsat / highs"
                ) from None
            raise
        finally:
            if settings.stop is not None:
                settings.stop.detach()
        seconds = time.perf_counter() - start
        status = m.Status
        if m.SolCount == 0:
            return SolveOutcome(None, False, None, seconds, _gurobi_status(status))
        values = [int(round(v.X)) for v in xs]
        return SolveOutcome(values, status == GRB.OPTIMAL, model.objective_value(objective, values), seconds,
                            _gurobi_status(status))
    finally:
        m.dispose()


def _gurobi_status(code: int) -> str:
    from gurobipy import GRB

    return {GRB.OPTIMAL: "optimal", GRB.TIME_LIMIT: "time_limit", GRB.INFEASIBLE: "infeasible",
            GRB.INTERRUPTED: "interrupted"}.get(code, f"gurobi:{code}")


# ------------------------------------------------------------------------------------- HiGHS
def _solve_highs(model: LinearModel, objective: dict[int, int], settings: BackendSettings,
                 hint: list[int] | None) -> SolveOutcome:
    import highspy

    start = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(max(settings.time_limit_s, 0.01)))
    h.setOptionValue("mip_rel_gap", float(settings.mip_gap))
    h.setOptionValue("random_seed", int(settings.seed))
    h.setOptionValue("threads", int(settings.threads))
    n = model.num_vars
    inf = highspy.kHighsInf
    cost = np.zeros(n)
    for v, c in objective.items():
        cost[v] = c
    empty_i = np.zeros(0, dtype=np.int32)
    h.addCols(n, cost, np.asarray(model.lb, dtype=float), np.asarray(model.ub, dtype=float), 0,
              empty_i, empty_i, np.zeros(0))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.ones(n, dtype=np.uint8))
    lower, upper, starts, index, value = [], [], [], [], []
    for terms, lo, hi in model.rows:
        lower.append(lo if lo > -math.inf else -inf)
        upper.append(hi if hi < math.inf else inf)
        starts.append(len(index))
        index.extend(terms.keys())
        value.extend(terms.values())
    if model.rows:
        h.addRows(len(model.rows), np.asarray(lower, dtype=float), np.asarray(upper, dtype=float), len(index),
                  np.asarray(starts, dtype=np.int32), np.asarray(index, dtype=np.int32),
                  np.asarray(value, dtype=float))
    if hint is not None:
        h.setSolution(n, np.arange(n, dtype=np.int32), np.asarray(hint, dtype=float))
    h.run()
    seconds = time.perf_counter() - start
    status = h.getModelStatus()
    status_name = h.modelStatusToString(status)
    if h.getInfo().primal_solution_status != 2:  # 2 = feasible
        return SolveOutcome(None, False, None, seconds, status_name)
    values = [int(round(v)) for v in h.getSolution().col_value]
    optimal = status == highspy.HighsModelStatus.kOptimal
    return SolveOutcome(values, optimal, model.objective_value(objective, values), seconds, status_name)


# ------------------------------------------------------------------------------------ CP-SAT
class CpSatModel:
    """CP-SAT's copy of a `LinearModel`, kept across the phases of one lexicographic solve.

    Each phase's model extends the last one: new variables and rows are appended and bounds only
    tighten. So only what is new is copied. Copying costs about a microsecond per term, as much
    as CP-SAT's own solve on a window of a few hundred variables. A model that does not extend
    the copy (other rows first) is copied afresh. Rows are compared as objects, as `LinearModel`
    never changes a row once added."""

    def __init__(self) -> None:
        self.proto: Any = None
        self.lb: list[int] = []
        self.ub: list[int] = []
        self.rows: list[tuple[dict[int, int], float, float]] = []

    def sync(self, model: LinearModel) -> Any:
        """The proto holding exactly `model`'s variables and rows (objective and hint not set)."""
        from ortools.sat.python import cp_model_helper as cmh

        n, r = len(self.lb), len(self.rows)
        if self.proto is None or model.num_vars < n or model.rows[:r] != self.rows:
            self.proto, n, r = cmh.CpModelProto(), 0, 0
        elif model.lb[:n] != self.lb or model.ub[:n] != self.ub:
            for i, (lb, ub) in enumerate(zip(model.lb[:n], model.ub[:n])):
                if lb != self.lb[i] or ub != self.ub[i]:
                    domain = self.proto.variables[i].domain
                    domain.clear()
                    domain.extend((lb, ub))
        variables = self.proto.variables
        for lb, ub in zip(model.lb[n:], model.ub[n:]):
            variables.add().domain.extend((lb, ub))
        constraints = self.proto.constraints
        for terms, lo, hi in model.rows[r:]:
            linear = constraints.add().linear
            linear.vars.extend(terms.keys())
            linear.coeffs.extend(terms.values())
            linear.domain.extend((int(lo) if lo > -math.inf else -_INT64_MAX, int(hi) if hi < math.inf else _INT64_MAX))
        self.lb, self.ub, self.rows = list(model.lb), list(model.ub), list(model.rows)
        return self.proto


def _solve_cpsat(model: LinearModel, objective: dict[int, int], settings: BackendSettings,
                 hint: list[int] | None, cpsat_model: CpSatModel) -> SolveOutcome:
    """Fills CP-SAT's model proto directly: the `CpModel` builder API costs a few microseconds a
    term, which on an Inc-ILP window (a few ms of solving) was a third of the time."""
    from ortools.sat.python import cp_model_helper as cmh

    start = time.perf_counter()
    proto = cpsat_model.sync(model)
    proto.clear_objective()
    proto.objective.vars.extend(objective.keys())
    proto.objective.coeffs.extend(objective.values())
    proto.clear_solution_hint()
    if hint is not None:
        proto.solution_hint.vars.extend(range(len(hint)))
        proto.solution_hint.values.extend(int(v) for v in hint)
    params = cmh.SatParameters()
    params.max_time_in_seconds = float(max(settings.time_limit_s, 0.01))
    params.num_workers = int(settings.threads)
    params.random_seed = int(settings.seed)
    params.relative_gap_limit = float(settings.mip_gap)
    for name, value in settings.cpsat_parameters.items():
        try:
            setattr(params, name, value)
        except (AttributeError, TypeError) as err:
            raise HiertuneError(f"CP-SAT parameter {name}={value!r} is not a valid SatParameters field: {err}") from None
    wrapper = cmh.SolveWrapper()
    wrapper.set_parameters(params)
    if settings.on_solution is not None:
        on_solution = settings.on_solution

        class Incumbents(cmh.SolutionCallback):  # type: ignore[misc]
            def OnSolutionCallback(self) -> None:  # noqa: N802 - OR-Tools' name
                on_solution([int(v) for v in self.Response().solution])

        callback = Incumbents()  # held until the solve returns
        wrapper.add_solution_callback(callback)
    if settings.stop is not None:
        settings.stop.attach(wrapper.stop_search)
    try:
        response = wrapper.solve(proto)
    finally:
        if settings.stop is not None:
            settings.stop.detach()
    seconds = time.perf_counter() - start
    status = response.status
    name = status.name.lower()
    if status not in (cmh.CpSolverStatus.OPTIMAL, cmh.CpSolverStatus.FEASIBLE):
        return SolveOutcome(None, False, None, seconds, name)
    values = [int(v) for v in response.solution]
    return SolveOutcome(values, status == cmh.CpSolverStatus.OPTIMAL, model.objective_value(objective, values),
                        seconds, name)
