"""The registry of schemes: what a server does with a population of learners.

Every scheme is declared once (:class:`~mel_opt.schemes.base.SchemeSpec`): mel_opt's allocation
(:mod:`~mel_opt.schemes.allocation`) and the field's alternatives, each module holding its
rules as pure functions and small classes that can be checked by hand:
:mod:`~mel_opt.schemes.deadline` (FedAvg with a round deadline, late learners dropped),
:mod:`~mel_opt.schemes.oort` (Oort's participant selection, Lai et al., OSDI 2021),
:mod:`~mel_opt.schemes.fedbuff` (buffered asynchronous aggregation and its server loop, Nguyen
et al., AISTATS 2022) and :mod:`~mel_opt.schemes.fedprox` (partial work with a proximal term,
Li et al., MLSys 2020), mel_opt's allocation inside asynchronous training
(:mod:`~mel_opt.schemes.staggered`: the allocation's data, each learner's work sized to arrive
in its group's slot, FedBuff's server step per group), and two ablations of mel_opt's
allocation (:mod:`~mel_opt.schemes.ablations`: filling the budget with equal data; the
allocation's work on equal data). ``melopt arena`` runs them on a virtual clock
(:mod:`mel_opt.arena`), ``melopt live`` on real learner processes (:mod:`mel_opt.live`); both
list, check and configure schemes from here and compare no scheme's name.
"""

from __future__ import annotations

from mel_opt.errors import UsageError
from mel_opt.schemes import ablations, allocation, deadline, fedbuff, fedprox, oort, staggered
from mel_opt.schemes.base import ENGINES, Loop, RoundClose, RoundContext, RoundPolicy, SchemeSpec
from mel_opt.settings import Setting

__all__ = ["ALLOCATION", "ENGINES", "SCHEMES", "Loop", "RoundClose", "RoundContext",
           "RoundPolicy", "SchemeSpec", "declaring", "get_scheme", "scheme_options",
           "schemes_for"]

#: Every scheme by name, mel_opt's allocation first.
SCHEMES: dict[str, SchemeSpec] = {s.name: s for s in (
    allocation.SPEC, deadline.SPEC, oort.SPEC, fedbuff.SPEC, fedprox.SPEC, staggered.SPEC,
    ablations.FILL, ablations.EQUAL_DATA)}
#: mel_opt's allocation (the problem's method).
ALLOCATION = allocation.SPEC


def schemes_for(engine: str) -> list[SchemeSpec]:
    """The schemes that run in ``engine`` (``arena`` or ``live``), in registry order."""
    return [s for s in SCHEMES.values() if engine in s.engines]


def get_scheme(name: str, engine: str | None = None) -> SchemeSpec:
    """The scheme ``name`` (that runs in ``engine``, where given), or UsageError naming the
    choices."""
    spec = SCHEMES.get(name)
    choices = schemes_for(engine) if engine else list(SCHEMES.values())
    if spec is None or spec not in choices:
        raise UsageError(f"unknown scheme {name!r}; choose from "
                         f"{', '.join(s.name for s in choices)}")
    return spec


def scheme_options(engine: str) -> tuple[Setting, ...]:
    """Every option the schemes of ``engine`` declare, each once (in registry order)."""
    out: dict[str, Setting] = {}
    for spec in schemes_for(engine):
        for option in spec.options_for(engine):
            was = out.setdefault(option.name, option)
            if was is not option:
                raise ValueError(f"two declarations of the {engine} option {option.name!r}")
    return tuple(out.values())


def declaring(engine: str, option: str) -> list[SchemeSpec]:
    """The schemes of ``engine`` that declare ``option``."""
    return [s for s in schemes_for(engine)
            if any(o.name == option for o in s.options_for(engine))]
