"""What a problem package declares: its parser, methods, verifier and generator.

Each package under :mod:`mel_opt.problems` exposes ``PROBLEM: ProblemSpec``; the registry in
:mod:`mel_opt.problems` discovers them, so a new problem needs no change anywhere else (the CLI,
the batch runner and ``compare`` all work from these declarations).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mel_opt.problems.options import Option, read_options
from mel_opt.result import SolverInfo, Verification
from mel_opt.status import SolutionStatus, TerminationCondition

if TYPE_CHECKING:
    from mel_opt.problems.learning import LearningCycle


@dataclass(frozen=True)
class Shortfall:
    """Why a generated document's default method cannot solve it, and the fix.

    Attributes
    ----------
    message : str
        One short line: the count of learners at fault and the worst few by name, or the
        capacity against the demand; never a list of all.
    param : str
        The generator parameter (``--param KEY``) that makes it solvable when raised.
    value : float
        The smallest value of ``param`` found solvable (rounded up).
    """

    message: str
    param: str
    value: float


def round_up(x: float) -> float:
    """``x`` rounded up to 4 significant digits (never below ``x``; 147.1723 -> 147.2)."""
    if x <= 0 or not math.isfinite(x):
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - 3)
    out = float(f"{math.ceil(x / step) * step:.4g}")
    return out if out >= x else float(f"{out + step:.4g}")


@dataclass(frozen=True, eq=False, kw_only=True)
class Instance:
    """What every problem's validated instance is: a frozen dataclass with these attributes.

    Attributes
    ----------
    name : str
        The instance's name (the file stem when the file has none).
    description : str
        Free text from the file (empty when absent).
    problem : str
        The problem name (class constant of each subclass, the ``problem`` field of files).
    """

    problem: ClassVar[str] = ""
    name: str
    description: str = ""


@dataclass(frozen=True)
class SolveOptions:
    """Per-call settings every method receives.

    Attributes
    ----------
    time_limit : float | None
        Wall-clock limit in seconds for the method (backends pass it on to the solver).
    seed : int
        Seed for methods with randomness (multi-start, random baselines).
    options : Mapping
        The method's declared options (:attr:`MethodSpec.options`), every one present and
        typed (defaults filled in) once :func:`mel_opt.api.solve` has read them; e.g.
        ``opts.options["rounding"]``.
    """

    time_limit: float | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)


_TC, _SS = TerminationCondition, SolutionStatus


@dataclass(frozen=True)
class MethodOutput:
    """What a method returns before verification.

    The two axes of :mod:`mel_opt.status` say how the method stopped and what it returned; the
    user-facing status is derived from them by :meth:`~mel_opt.status.Status.of` (a method
    that keeps a backend's answer passes the backend's pair on). ``solution`` uses the keys of
    the result contract (``d``, ``tau``...). ``extras`` are method-side numbers worth reporting
    (a relaxed objective, a certified bound, a gap); the runner puts them in ``metrics``
    without letting them overwrite recomputed metrics.

    The class methods name the common cases: :meth:`optimal` (a proven optimum),
    :meth:`feasible` (an answer without an optimality claim), :meth:`stopped` (a stop with or
    without an incumbent, e.g. a limit), :meth:`nothing` (no answer, e.g. infeasible).
    """

    termination: TerminationCondition
    solution_status: SolutionStatus
    solution: dict[str, Any] | None
    solver: SolverInfo
    extras: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    @classmethod
    def optimal(cls, solution: dict[str, Any], solver: SolverInfo,
                extras: dict[str, Any] | None = None, message: str = "") -> MethodOutput:
        """A proven optimum (converged, optimal point)."""
        return cls(_TC.CONVERGED, _SS.OPTIMAL, solution, solver, dict(extras or {}), message)

    @classmethod
    def feasible(cls, solution: dict[str, Any], solver: SolverInfo,
                 extras: dict[str, Any] | None = None, message: str = "") -> MethodOutput:
        """An answer that claims no optimality (a heuristic, a baseline, a rounded point)."""
        return cls(_TC.CONVERGED, _SS.FEASIBLE, solution, solver, dict(extras or {}), message)

    @classmethod
    def stopped(cls, termination: TerminationCondition, solution: dict[str, Any] | None,
                solver: SolverInfo, extras: dict[str, Any] | None = None,
                message: str = "") -> MethodOutput:
        """A method's own search stopped by ``termination``: with a converged search its
        answer is optimal, after any other stop an answer in hand is an incumbent (feasible by
        construction of the search), and without one there is no point."""
        if solution is None:
            status = _SS.NONE
        else:
            status = _SS.OPTIMAL if termination is _TC.CONVERGED else _SS.FEASIBLE
        return cls(termination, status, solution, solver, dict(extras or {}), message)

    @classmethod
    def nothing(cls, termination: TerminationCondition, solver: SolverInfo,
                extras: dict[str, Any] | None = None, message: str = "") -> MethodOutput:
        """No answer: ``termination`` says why (``INFEASIBLE``, ``ERROR``, a limit...)."""
        return cls(termination, _SS.NONE, None, solver, dict(extras or {}), message)


@dataclass(frozen=True)
class Checked:
    """Outcome of a problem's independent verifier: feasibility, metrics and objective."""

    verification: Verification
    metrics: dict[str, Any]
    objective: float | None


MethodFunc = Callable[[Any, SolveOptions], MethodOutput]
# (Any, not Instance: each method takes its own problem's subclass, and Callable parameters are
# contravariant, so a function of DabInstance is not a function of Instance.)


def check_params(params: Mapping[str, str] | None, known: Iterable[str], where: str) -> None:
    """Reject ``--param`` keys a generator does not read (a typo must not pass unnoticed).

    Raises ``UsageError`` naming every unknown key and the known ones; ``where`` names the
    problem or preset in the message.
    """
    from mel_opt.errors import UsageError

    known = sorted(set(known))
    unknown = sorted(set(params or {}) - set(known))
    if unknown:
        raise UsageError(f"unknown --param {', '.join(unknown)} for {where}; known: "
                         f"{', '.join(known) if known else '(none)'}")


def param_value(params: Mapping[str, str] | None, key: str, default: Any = None,
                kind: type = float) -> Any:
    """A ``--param KEY=VALUE`` of ``melopt generate`` / ``sweep``, converted to ``kind``.

    Missing keys give ``default``; ``float`` and ``int`` values must be finite numbers (``int``
    also whole); ``str`` is passed through. Bad values raise ``UsageError`` naming the key.
    """
    from mel_opt.errors import UsageError

    if not params or key not in params:
        return default
    raw = params[key]
    if kind is str:
        return raw
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--param {key} expects a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"--param {key} must be finite, got {raw!r}")
    if kind is int:
        if not value.is_integer():
            raise UsageError(f"--param {key} expects a whole number, got {raw!r}")
        return int(value)
    return kind(value)


@dataclass(frozen=True)
class MethodSpec:
    """One solution method of a problem.

    Attributes
    ----------
    kind : str
        ``exact`` (proves optimality), ``numerical`` (a solver on a formulation),
        ``analytical`` (closed form / KKT routine), ``baseline`` (a reference scheme).
    proves_optimality : bool
        True when an ``optimal`` status from this method is a proof (used by ``compare`` to
        pick the reference answer).
    backends : tuple of str
        Solver backends the method needs (``ipopt``, ``highs``); used to report availability.
    not_comparable : str
        Non-empty when the method answers a different question than the problem's objective
        (the reason); ``compare`` then shows it instead of a gap to the reference.
    options : tuple of Option
        Every option the method reads (:mod:`mel_opt.problems.options`); anything else passed
        to it is refused before it runs.
    imports : tuple of str
        Modules the method imports when it first runs (scipy, Pyomo...). ``api.solve`` imports
        them before it starts the method's clock (still inside its time limit), so a first
        call's ``solve_time_s`` is the method's, not the import's; the modules of the
        ``backends`` are added to these.
    """

    name: str
    func: MethodFunc
    summary: str
    kind: str
    proves_optimality: bool = False
    backends: tuple[str, ...] = ()
    not_comparable: str = ""
    options: tuple[Option, ...] = ()
    imports: tuple[str, ...] = ()

    def read_options(self, given: Mapping[str, Any] | None, problem: str) -> Mapping[str, Any]:
        """``given`` checked against :attr:`options`: every option typed, defaults filled in
        (:func:`~mel_opt.problems.options.read_options`; UsageError naming a bad one)."""
        return read_options(self.options, given, f"{problem} method {self.name}")


@dataclass(frozen=True)
class ProblemSpec:
    """Declaration of one problem.

    Attributes
    ----------
    name : str
        The ``problem`` field of instance files.
    parse : callable(dict, source) -> instance
        Validates a raw JSON document; raises :class:`~mel_opt.errors.InstanceError`.
    verify : callable(instance, solution) -> Checked
        Independent re-check of a solution (must not call the methods' code).
    methods : mapping name -> MethodSpec
    default_method : str
        The recommended method (``melopt solve`` without ``--method``).
    sense : str
        ``min`` or ``max``: direction of ``objective`` (for gaps in ``compare``).
    key_metrics : tuple of str
        Metrics shown in tables (``solve`` summaries, ``compare``, batch ``summary.csv``).
    generate : callable(preset, size, seed, **kw) -> dict, optional
        Instance generator for ``melopt generate``.
    presets : tuple of str
    preset_docs : Mapping of str to str
        One line per preset (what set-up it draws), listed by ``melopt methods``.
    build_model : callable(instance, method) -> pyomo model, optional
        The Pyomo formulation behind a method, for ``melopt export``.
    evaluate : callable(instance, seed, options) -> list of dict, optional
        A Monte-Carlo evaluation of the problem's schemes (med's simulator): one row per
        (scheme, trial) with ``method`` naming the scheme and numeric metrics, used by
        ``melopt sweep --evaluate`` to plot evaluated metrics with bands over trials.
    example : str
        File name of the problem's small example among its shipped instances
        (``instances/<problem>/``): the one instance the documentation's generated tables
        and the registry-wide tests solve.
    learning : LearningCycle, optional
        How one global cycle of training runs under an allocation of this problem
        (:mod:`mel_opt.problems.learning`); problems that declare one run live
        (``melopt live``), and those whose cycle is ``emulated`` also in the emulator
        (``melopt train``).
    solvable : callable(document) -> Shortfall or None, optional
        What ``melopt generate`` asks before it writes an instance: None when the default
        method can solve the document, else a :class:`Shortfall` (why not, in one short line,
        and the one parameter value from which it can).
    """

    name: str
    summary: str
    parse: Callable[[Mapping[str, Any], str | None], Instance]
    verify: Callable[[Any, Mapping[str, Any]], Checked]
    methods: Mapping[str, MethodSpec]
    default_method: str
    sense: str = "min"
    key_metrics: tuple[str, ...] = ()
    generate: Callable[..., dict[str, Any]] | None = None
    presets: tuple[str, ...] = ()
    preset_docs: Mapping[str, str] = field(default_factory=dict)
    build_model: Callable[[Any, str], Any] | None = None
    evaluate: Callable[[Any, int, Mapping[str, Any]], list[dict[str, Any]]] | None = None
    example: str = ""
    learning: LearningCycle | None = None
    solvable: Callable[[Mapping[str, Any]], Shortfall | None] | None = None

    def method(self, name: str | None) -> MethodSpec:
        from mel_opt.errors import UsageError

        key = self.default_method if name is None else name
        try:
            return self.methods[key]
        except KeyError:
            raise UsageError(
                f"problem {self.name!r} has no method {key!r}; "
                f"choose one of: {', '.join(self.methods)}"
            ) from None
