"""Ipopt (through cyipopt) for continuous Pyomo models, without ASL or an ``ipopt`` executable.

The model is compiled into numpy callbacks by :mod:`mel_opt.nlp`; this module is the cyipopt
adapter around it: availability, options, the callback object, and the mapping of Ipopt's
return status into the contract of :mod:`mel_opt.solvers.base` (dicts with defaults).
"""

from __future__ import annotations

import functools
import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from mel_opt import deadline
from mel_opt.errors import SolverUnavailableError, UsageError
from mel_opt.lazy import lazy_module
from mel_opt.solvers import forked
from mel_opt.solvers.base import (
    Availability,
    SolutionStatus,
    SolverResult,
    TerminationCondition,
)

if TYPE_CHECKING:
    from mel_opt import nlp as _nlp
    from mel_opt.nlp import CompiledNLP
else:  # the compiler (and scipy.sparse) load with the first model handed to Ipopt
    _nlp = lazy_module("mel_opt.nlp")

__all__ = [
    "STATUS_MAP",
    "STATUS_NAMES",
    "available",
    "solution_status",
    "solve_nlp",
    "version",
]

_TC = TerminationCondition

# Ipopt's ApplicationReturnStatus (IpReturnCodes_inc.h) -> TerminationCondition. Ipopt is a
# local solver, so success is LOCALLY_OPTIMAL; "acceptable level" is Ipopt's own (looser)
# convergence claim and is reported the same way (the message tells them apart).
STATUS_MAP: dict[int, TerminationCondition] = {
    0: _TC.LOCALLY_OPTIMAL,  # Solve_Succeeded
    1: _TC.LOCALLY_OPTIMAL,  # Solved_To_Acceptable_Level
    2: _TC.INFEASIBLE,  # Infeasible_Problem_Detected (locally infeasible)
    3: _TC.NUMERICAL,  # Search_Direction_Becomes_Too_Small
    4: _TC.UNBOUNDED,  # Diverging_Iterates
    5: _TC.INTERRUPTED,  # User_Requested_Stop (never requested here)
    6: _TC.CONVERGED,  # Feasible_Point_Found (square problems: the goal is a feasible point)
    -1: _TC.ITERATION_LIMIT,  # Maximum_Iterations_Exceeded
    -2: _TC.NUMERICAL,  # Restoration_Failed
    -3: _TC.NUMERICAL,  # Error_In_Step_Computation
    -4: _TC.TIME_LIMIT,  # Maximum_CpuTime_Exceeded
    -5: _TC.TIME_LIMIT,  # Maximum_WallTime_Exceeded (Ipopt >= 3.14)
    -10: _TC.ERROR,  # Not_Enough_Degrees_Of_Freedom
    -11: _TC.ERROR,  # Invalid_Problem_Definition
    -12: _TC.ERROR,  # Invalid_Option
    -13: _TC.NUMERICAL,  # Invalid_Number_Detected
    -100: _TC.ERROR,  # Unrecoverable_Exception
    -101: _TC.ERROR,  # NonIpopt_Exception_Thrown
    -102: _TC.ERROR,  # Insufficient_Memory
    -199: _TC.ERROR,  # Internal_Error
}

STATUS_NAMES: dict[int, str] = {
    0: "Solve_Succeeded",
    1: "Solved_To_Acceptable_Level",
    2: "Infeasible_Problem_Detected",
    3: "Search_Direction_Becomes_Too_Small",
    4: "Diverging_Iterates",
    5: "User_Requested_Stop",
    6: "Feasible_Point_Found",
    -1: "Maximum_Iterations_Exceeded",
    -2: "Restoration_Failed",
    -3: "Error_In_Step_Computation",
    -4: "Maximum_CpuTime_Exceeded",
    -5: "Maximum_WallTime_Exceeded",
    -10: "Not_Enough_Degrees_Of_Freedom",
    -11: "Invalid_Problem_Definition",
    -12: "Invalid_Option",
    -13: "Invalid_Number_Detected",
    -100: "Unrecoverable_Exception",
    -101: "NonIpopt_Exception_Thrown",
    -102: "Insufficient_Memory",
    -199: "Internal_Error",
}

# What Ipopt itself claims of its point; for every other code the point is judged by its
# measured violation (solution_status).
_CLAIMED: dict[int, SolutionStatus] = {
    0: SolutionStatus.OPTIMAL,
    1: SolutionStatus.OPTIMAL,
    6: SolutionStatus.FEASIBLE,
}

# Ipopt's default constr_viol_tol: the absolute violation up to which Ipopt itself calls a
# point feasible when it declares success; the same standard judges a point from a limit.
_CONSTR_VIOL_TOL = 1e-4

# cyipopt 1.7 has no text for codes added in Ipopt 3.14; these fill the gap.
_EXTRA_MESSAGES: dict[int, str] = {-5: "Maximum wall time exceeded."}

# Ipopt treats |bound| >= 1e19 as "no bound"; passing a finite sentinel avoids relying on how
# infinities travel through the C interface.
_IPOPT_INF = 1e20

_HESSIAN_MODES = ("exact", "lbfgs")

# Under a time limit, models with at least this many variables plus constraints run in a child
# process (``_run_ipopt``). A step of a smaller model takes milliseconds, so the callback guard
# holds the limit there, and the fork (about 15 ms) is not worth paying.
FORK_FROM = 2000


# --------------------------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------------------------


class _Probe:
    """Callbacks of the one-variable problem min (x - 1)^2 used to probe cyipopt."""

    def objective(self, x: np.ndarray) -> float:
        return float((x[0] - 1.0) ** 2)

    def gradient(self, x: np.ndarray) -> np.ndarray:
        return np.array([2.0 * (x[0] - 1.0)])

    def hessianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0]), np.array([0])

    def hessian(self, x: np.ndarray, lagrange: np.ndarray, obj_factor: float) -> np.ndarray:
        return np.array([2.0 * obj_factor])


@functools.cache
def available() -> Availability:
    """Report whether cyipopt imports and solves a trivial problem.

    The result is cached for the process: the probe costs a few milliseconds once.

    Returns
    -------
    Availability
        Truthy when usable; otherwise ``.reason`` says why not.
    """
    try:
        import cyipopt
    except Exception as exc:  # pragma: no cover - depends on the installation
        return Availability(False, f"cyipopt is not importable: {exc}")
    try:
        prob = cyipopt.Problem(n=1, m=0, problem_obj=_Probe(), lb=[-10.0], ub=[10.0])
        prob.add_option("print_level", 0)
        prob.add_option("sb", "yes")
        x, info = prob.solve(np.array([0.0]))
        prob.close()
    except Exception as exc:  # pragma: no cover - broken binary wheel
        return Availability(False, f"cyipopt imports but cannot solve: {exc}")
    if info["status"] != 0 or abs(float(x[0]) - 1.0) > 1e-6:  # pragma: no cover
        return Availability(False, f"cyipopt probe solve failed (status {info['status']})")
    return Availability(True)


def version() -> str:
    """Return the Ipopt and cyipopt versions, e.g. ``"Ipopt 3.14.11 (cyipopt 1.7.0)"``.

    Raises
    ------
    SolverUnavailableError
        When cyipopt cannot be imported.
    """
    try:
        import cyipopt
    except Exception as exc:  # pragma: no cover - depends on the installation
        raise SolverUnavailableError(f"cyipopt is not importable: {exc}") from exc
    ipopt = ".".join(str(p) for p in getattr(cyipopt, "IPOPT_VERSION", ()))
    return f"Ipopt {ipopt or '?'} (cyipopt {getattr(cyipopt, '__version__', '?')})"


# --------------------------------------------------------------------------------------------
# Callbacks
# --------------------------------------------------------------------------------------------


class _Callbacks:
    """cyipopt's problem object: forwards to a CompiledNLP, counts iterations and stops Ipopt
    at the deadline (Ipopt's own ``max_wall_time`` is the first line, this the guard)."""

    def __init__(self, nlp: CompiledNLP, evaluation_error: type[Exception],
                 until: deadline.Deadline) -> None:
        self._nlp = nlp
        self._err = evaluation_error
        self._until = until
        self.iterations = 0
        self.stopped_by_deadline = False
        # Set when Ipopt runs in a child process: every iterate (and its number) is published
        # there, so the parent keeps the last one if it has to end the child at the limit.
        self.problem: Any = None
        self.progress: forked.Progress | None = None

    def objective(self, x: np.ndarray) -> float:
        try:
            return self._nlp.objective(x)
        except _nlp.NLPEvaluationError:
            # Ipopt cuts the step back when f or g cannot be evaluated at a trial point.
            raise self._err() from None

    def gradient(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.gradient(x)
        except _nlp.NLPEvaluationError:
            raise self._err() from None

    def constraints(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.constraints_values(x)
        except _nlp.NLPEvaluationError:
            raise self._err() from None

    def jacobianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return self._nlp.jacobianstructure()

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.jacobian(x)
        except _nlp.NLPEvaluationError:
            raise self._err() from None

    def intermediate(self, alg_mod: int, iter_count: int, *_: Any) -> bool:
        self.iterations = int(iter_count)
        if self.progress is not None:
            x = self.problem.get_current_iterate(scaled=False)["x"]
            self.progress.publish(np.append(np.asarray(x, dtype=float), float(iter_count)))
        if self._until.expired():
            self.stopped_by_deadline = True
            return False  # Ipopt stops with User_Requested_Stop
        return True


class _CallbacksWithHessian(_Callbacks):
    """Adds the exact Hessian; cyipopt switches to L-BFGS when these methods are absent."""

    def hessianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return self._nlp.hessianstructure()

    def hessian(self, x: np.ndarray, lagrange: np.ndarray, obj_factor: float) -> np.ndarray:
        try:
            return self._nlp.hessian(x, lagrange, obj_factor)
        except _nlp.NLPEvaluationError:
            raise self._err() from None


# --------------------------------------------------------------------------------------------
# Options and status
# --------------------------------------------------------------------------------------------


def _option_value(key: str, val: Any) -> str | float | int:
    # cyipopt accepts exactly str, float or int (it checks type(val) ==, not isinstance).
    if isinstance(val, bool | np.bool_):
        return "yes" if val else "no"
    if isinstance(val, int | np.integer):
        return int(val)
    if isinstance(val, float | np.floating):
        return float(val)
    if isinstance(val, str):
        return val
    raise UsageError(f"Ipopt option {key}: unsupported value type {type(val).__name__}")


def _check_arguments(hessian: str, time_limit: float | None, tol: float, max_iter: int) -> None:
    if hessian not in _HESSIAN_MODES:
        raise UsageError(f"hessian must be one of {_HESSIAN_MODES}, got {hessian!r}")
    if time_limit is not None and not time_limit > 0:
        raise UsageError(f"time_limit must be positive, got {time_limit}")
    if not tol > 0:
        raise UsageError(f"tol must be positive, got {tol}")
    if int(max_iter) < 0:
        raise UsageError(f"max_iter must be >= 0, got {max_iter}")


def _ipopt_options(
    *,
    print_level: int,
    tol: float,
    max_iter: int,
    hessian: str,
    wall_time: float | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """Ipopt options of one solve; the caller's ``options`` are applied last."""
    opts: dict[str, Any] = {
        "print_level": int(print_level),
        "sb": "yes",
        "tol": float(tol),
        "max_iter": int(max_iter),
        "nlp_scaling_method": "gradient-based",
        # Ipopt 3.14 defaults to "no" and may return x a hair (~1e-8) outside its bounds.
        "honor_original_bounds": "yes",
    }
    if hessian == "lbfgs":
        opts["hessian_approximation"] = "limited-memory"
    if wall_time is not None:
        # Ipopt rejects a non-positive limit; a tiny one still stops at the first check. The
        # CPU limit is the same number: one thread never spends more CPU than wall time.
        opts["max_wall_time"] = max(wall_time, 1e-6)
        opts["max_cpu_time"] = max(wall_time, 1e-6)
    opts.update(options or {})
    return opts


def solution_status(code: int, violation: float, feasibility_tol: float) -> SolutionStatus:
    """What Ipopt handed back with return code ``code``.

    Success codes carry Ipopt's own claim (optimal; feasible for ``Feasible_Point_Found``);
    any other finite point is feasible iff its largest absolute violation is at most
    ``feasibility_tol``, and infeasible otherwise; NaN (``x`` not finite or not evaluable)
    means no point.
    """
    if math.isnan(violation):
        return SolutionStatus.NONE
    claimed = _CLAIMED.get(code)
    if claimed is not None:
        return claimed
    return SolutionStatus.FEASIBLE if violation <= feasibility_tol else SolutionStatus.INFEASIBLE


def _message(code: int, info: dict[str, Any]) -> str:
    raw_msg = info.get("status_msg", b"")
    text = raw_msg.decode(errors="replace") if isinstance(raw_msg, bytes) else str(raw_msg)
    if not text or text == "Unknown status":
        text = _EXTRA_MESSAGES.get(code, text or "Unknown status")
    return f"{STATUS_NAMES.get(code, f'status {code}')}: {text}"


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _objective_at(nlp: CompiledNLP, x: np.ndarray) -> float | None:
    """Objective in the model's own sense at ``x``; None when not finite or not evaluable."""
    try:
        value = nlp.sense * nlp.objective(x)
    except _nlp.NLPEvaluationError:
        return None
    return value if math.isfinite(value) else None


def _load(nlp: CompiledNLP, x: np.ndarray) -> None:
    # skip_validation: values may sit a hair outside a domain bound after Ipopt's bound
    # relaxation, and Pyomo would warn about each one.
    for var, val in zip(nlp.variables, x.tolist(), strict=True):
        var.set_value(val, skip_validation=True)


def _multipliers(nlp: CompiledNLP, mult: np.ndarray) -> dict[str, float]:
    """Multipliers by constraint name; constant constraints, not seen by Ipopt, get 0."""
    out = dict(zip(nlp.con_names, mult.tolist(), strict=True))
    out.update({name: 0.0 for name, _ in nlp.constant_constraints})
    return out


def _trivial_result(
    nlp: CompiledNLP, termination: TerminationCondition, message: str
) -> SolverResult:
    """Result without calling Ipopt (nothing free to optimise, or a violated constant row)."""
    x = nlp.x0.copy()
    violation = nlp.constraint_violation(x)
    status = SolutionStatus.NONE
    if termination is TerminationCondition.LOCALLY_OPTIMAL and not math.isnan(violation):
        status = SolutionStatus.OPTIMAL
    return SolverResult(
        termination=termination,
        solution_status=status,
        objective=_objective_at(nlp, x),
        values=dict(zip(nlp.var_names, x.tolist(), strict=True)),
        x=x,
        message=message,
        constraint_violation=violation,
        multipliers=_multipliers(nlp, np.zeros(nlp.m)),
        build_time_s=nlp.build_time_s,
    )


def _deadline_result(nlp: CompiledNLP, message: str) -> SolverResult:
    """The time limit passed before Ipopt could start: no point."""
    return SolverResult(
        termination=TerminationCondition.TIME_LIMIT,
        solution_status=SolutionStatus.NONE,
        objective=None,
        message=message,
        build_time_s=nlp.build_time_s,
    )


def _crossed_bounds(nlp: CompiledNLP) -> str:
    """Describe the first variable or constraint whose lower bound exceeds its upper bound."""
    for names, low, high, kind in (
        (nlp.var_names, nlp.x_lb, nlp.x_ub, "variable"),
        (nlp.con_names, nlp.g_lb, nlp.g_ub, "constraint"),
    ):
        bad = np.flatnonzero(low > high)
        if bad.size:
            k = int(bad[0])
            return f"{kind} {names[k]} has lower bound {low[k]:.6g} > upper bound {high[k]:.6g}"
    return ""


def _without_ipopt(nlp: CompiledNLP) -> SolverResult | None:
    """The result of a model Ipopt need not (or cannot usefully) see, else None."""
    violated = [(name, viol) for name, viol in nlp.constant_constraints if viol > 1e-6]
    if violated:
        name, viol = violated[0]
        return _trivial_result(
            nlp,
            TerminationCondition.INFEASIBLE,
            f"constraint {name} has no free variable and is violated by {viol:.3g}",
        )
    crossed = _crossed_bounds(nlp)
    if crossed:
        # Ipopt would stop with Invalid_Problem_Definition; this is plain infeasibility.
        return _trivial_result(nlp, TerminationCondition.INFEASIBLE, crossed)
    if nlp.n == 0:
        return _trivial_result(
            nlp, TerminationCondition.LOCALLY_OPTIMAL, "no free variables: nothing to optimise"
        )
    return None


def _run_ipopt(
    nlp: CompiledNLP, callbacks: _Callbacks, opts: dict[str, Any], until: deadline.Deadline
) -> tuple[np.ndarray, dict[str, Any], float]:
    """Hand ``nlp`` to Ipopt with ``opts``; return (x, Ipopt's info dict, seconds inside).

    Under a finite deadline a model of ``FORK_FROM`` or more variables plus constraints runs in
    a forked child (:mod:`mel_opt.solvers.forked`) where fork is possible: one step of Ipopt
    (a factorisation) can take seconds in C code that neither ``max_wall_time`` nor the
    callback guard can interrupt, and the child can be ended at the deadline, its last
    published iterate kept. ``callbacks`` then carries the child's iteration count and guard
    flag back.
    """
    if not math.isfinite(until.end) or nlp.n + nlp.m < FORK_FROM or not forked.can_fork():
        return _solve_here(nlp, callbacks, opts)
    progress = forked.Progress(nlp.n + 1)
    callbacks.progress = progress

    def in_child() -> tuple[np.ndarray, dict[str, Any], float, int, bool]:
        x, info, seconds = _solve_here(nlp, callbacks, opts)
        return x, info, seconds, callbacks.iterations, callbacks.stopped_by_deadline

    try:
        outcome = forked.run_forked(in_child, until.end)
    finally:
        callbacks.progress = None
    if outcome.finished:
        x, info, seconds, callbacks.iterations, callbacks.stopped_by_deadline = outcome.value
        return x, info, seconds
    last = progress.latest()
    x = np.full(nlp.n, np.nan) if last is None else last[:-1]
    callbacks.iterations = 0 if last is None else int(last[-1])
    info = {
        "status": -5,
        "status_msg": (f"Ipopt was inside one step at the time limit; its process was ended "
                       f"{'with no iterate yet' if last is None else 'and its last iterate kept'}"),
        "mult_g": np.zeros(nlp.m),
    }
    return x, info, outcome.seconds


def _solve_here(
    nlp: CompiledNLP, callbacks: _Callbacks, opts: dict[str, Any]
) -> tuple[np.ndarray, dict[str, Any], float]:
    """Ipopt in this process: (x, Ipopt's info dict, seconds inside)."""
    import cyipopt

    problem = cyipopt.Problem(
        n=nlp.n,
        m=nlp.m,
        problem_obj=callbacks,
        lb=np.clip(nlp.x_lb, -_IPOPT_INF, _IPOPT_INF),
        ub=np.clip(nlp.x_ub, -_IPOPT_INF, _IPOPT_INF),
        cl=np.clip(nlp.g_lb, -_IPOPT_INF, _IPOPT_INF),
        cu=np.clip(nlp.g_ub, -_IPOPT_INF, _IPOPT_INF),
    )
    callbacks.problem = problem
    try:
        for key, val in opts.items():
            try:
                problem.add_option(key, _option_value(key, val))
            except (TypeError, ValueError) as exc:
                raise UsageError(f"Ipopt rejected option {key}={val!r}: {exc}") from exc
        t0 = time.perf_counter()
        x, info = problem.solve(nlp.x0.copy())
        solve_time = time.perf_counter() - t0
    finally:
        callbacks.problem = None
        problem.close()
    return np.asarray(x, dtype=float), info, solve_time


def _ipopt_result(
    nlp: CompiledNLP,
    x: np.ndarray,
    info: dict[str, Any],
    *,
    iterations: int,
    solve_time: float,
    feasibility_tol: float,
    load_solutions: bool,
) -> SolverResult:
    """Map Ipopt's answer into the contract (and load ``x`` into the model when asked)."""
    code = int(info["status"])
    objective: float | None = None
    violation = math.nan
    if bool(np.all(np.isfinite(x))):
        objective = _objective_at(nlp, x)
        violation = nlp.constraint_violation(x)
        if load_solutions:
            _load(nlp, x)
    return SolverResult(
        termination=STATUS_MAP.get(code, TerminationCondition.ERROR),
        solution_status=solution_status(code, violation, feasibility_tol),
        objective=objective,
        values=dict(zip(nlp.var_names, x.tolist(), strict=True)),
        x=x,
        solve_time_s=solve_time,
        iterations=iterations,
        message=_message(code, info),
        constraint_violation=violation,
        multipliers=_multipliers(nlp, np.asarray(info.get("mult_g", np.zeros(nlp.m)), float)),
        build_time_s=nlp.build_time_s,
    )


def solve_nlp(
    model: Any,
    *,
    time_limit: float | None = None,
    hessian: str = "exact",
    tol: float = 1e-8,
    max_iter: int = 3000,
    options: dict[str, Any] | None = None,
    load_solutions: bool = True,
    print_level: int = 0,
) -> SolverResult:
    """Solve a continuous Pyomo model with Ipopt (local optimum).

    Parameters
    ----------
    model : pyomo.environ.ConcreteModel
        Continuous variables (bounds honoured, fixed variables are constants), exactly one
        active Objective (minimise or maximise), any active Constraints (equality, one-sided,
        ranged, indexed, inside active Blocks). The variables' current values are the
        starting point; a variable without value starts at 0 projected into its bounds.
    time_limit : float, optional
        Wall-clock seconds for the whole call, within the current deadline of
        :mod:`mel_opt.deadline` (whichever ends first holds). What remains after compiling
        becomes Ipopt's ``max_wall_time`` and ``max_cpu_time``, and the intermediate callback
        stops Ipopt once the deadline passes; a deadline passed before Ipopt starts returns
        ``TIME_LIMIT`` without a point (TimeLimitReached is raised instead when the current
        deadline had passed before the call).
    hessian : {"exact", "lbfgs"}
        Exact Lagrangian Hessian, or Ipopt's limited-memory quasi-Newton approximation
        (second derivatives are then not even built).
    tol : float
        Ipopt's ``tol`` (relative convergence tolerance).
    max_iter : int
        Ipopt's ``max_iter``.
    options : dict, optional
        Further Ipopt options, applied last so they override the above (e.g.
        ``{"nlp_scaling_method": "none"}``; the default is Ipopt's ``gradient-based``).
        Booleans become ``"yes"``/``"no"``. ``constr_viol_tol`` (default 1e-4, Ipopt's) also
        sets the absolute violation up to which a point from a limit counts as feasible.
    load_solutions : bool
        Write the returned point into the model's free variables whenever it is finite,
        whatever the termination. This is the only mutation of the model.
    print_level : int
        Ipopt's ``print_level`` (0 = silent; the banner is always suppressed).

    Returns
    -------
    SolverResult
        ``bound`` is None (Ipopt proves no bound); ``multipliers`` are Ipopt's ``lambda`` by
        constraint name. Ipopt solves ``min sense*f`` with Lagrangian
        ``sense*f(x) + lambda^T g(x)``, so for a minimisation ``lambda_i = -d f*/d rhs_i`` and
        for a maximisation ``lambda_i = +d f*/d rhs_i`` (an active ``>=`` constraint of a
        minimisation has ``lambda <= 0``); constant constraints, not seen by Ipopt, get 0.

    Raises
    ------
    SolverUnavailableError
        cyipopt is not usable here.
    UsageError
        Invalid arguments or options, integer variables, no single active objective, or an
        unsupported expression.
    """
    _check_arguments(hessian, time_limit, tol, max_iter)
    avail = available()
    if not avail:
        raise SolverUnavailableError(f"Ipopt unavailable: {avail.reason}")
    import cyipopt

    # A solve whose deadline has passed stops here (api.solve reports it); a time_limit of this
    # call alone gives a TIME_LIMIT result below instead.
    deadline.check("the model build")
    until = deadline.current().within(time_limit)
    nlp = _nlp.compile_nlp(model, hessian=hessian == "exact")
    trivial = _without_ipopt(nlp)
    if trivial is not None:
        return trivial
    if deadline.current().expired():
        # The solve in progress has run out (a call's own tiny limit still lets Ipopt make its
        # first check and classify the starting point).
        return _deadline_result(nlp, "time limit reached while compiling the model")

    cls = _CallbacksWithHessian if hessian == "exact" else _Callbacks
    callbacks = cls(nlp, cyipopt.CyIpoptEvaluationError, until)
    opts = _ipopt_options(
        print_level=print_level,
        tol=tol,
        max_iter=max_iter,
        hessian=hessian,
        wall_time=until.seconds(),
        options=options,
    )
    x, info, solve_time = _run_ipopt(nlp, callbacks, opts, until)
    if callbacks.stopped_by_deadline:
        # the guard acted for max_wall_time: same meaning, and a message that says so
        info = {**info, "status": -5,
                "status_msg": "the iteration callback stopped Ipopt at the time limit"}
    feasibility_tol = opts.get("constr_viol_tol", _CONSTR_VIOL_TOL)
    return _ipopt_result(
        nlp,
        x,
        info,
        iterations=callbacks.iterations,
        solve_time=solve_time,
        feasibility_tol=float(feasibility_tol),
        load_solutions=load_solutions,
    )
