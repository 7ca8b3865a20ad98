"""The typed log of a live run: one :class:`LearnerRow` per learner asked in a round, one
:class:`RoundRecord` per round (or server step), the warnings, and why the run stopped early.

Every scheme writes its outputs through :class:`RunLog`'s methods (a synchronous round, a
FedBuff step and its replies alike), so ``rounds.csv`` and ``summary.json``
(:mod:`mel_opt.live.report`) read one shape whatever ran; the plain dictionaries they are
written from come from :meth:`LearnerRow.as_dict` and :meth:`RoundRecord.as_dict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LearnerRow", "RoundRecord", "RunLog", "STATUSES"]

#: What became of a learner in a round: answered in time (or where no deadline judges it),
#: answered past its deadline, did not answer, answered something that was refused.
STATUSES = ("ok", "late", "missing", "ignored")


@dataclass(frozen=True)
class LearnerRow:
    """One learner in one round (a row of ``rounds.csv``).

    Attributes
    ----------
    round, learner : int
    name : str
        The learner's name in the instance.
    node : int or None
        Its node (None: it never joined).
    status : str
        One of :data:`STATUSES`.
    predicted_s, measured_s : float or None
        Busy time for the round as planned and as measured (its compute time plus the plan's
        emulated transfers) [s].
    deadline_met : bool or None
        None where no deadline judges the learner.
    compute_predicted_s, compute_measured_s : float or None
        The computing part of those [s].
    comm_emulated_s : float or None
        The transfers the plan emulates [s].
    comm_predicted_s, comm_measured_s : float or None
        The reply's round trip beyond the learner's computation as estimated before the round
        and as measured [s].
    shipped_bytes : int or None
        Bytes of samples the server sent with the model (claimed shards).
    samples, passes : int or None
        The plan's work.
    columns : Mapping
        The allocation's own numbers (the problem's declared columns: ``d``, ``tau``, ...) and
        the scheme's (FedBuff's ``staleness``).
    reason : str or None
        Why an ``ignored`` reply was refused, or what the aggregation rule did to an ``ok``
        one (clipped, left out).
    adapted : str or None
        What the problem changed in the file's job for this round.
    """

    round: int
    learner: int
    name: str
    node: int | None
    status: str
    predicted_s: float | None = None
    measured_s: float | None = None
    deadline_met: bool | None = None
    compute_predicted_s: float | None = None
    compute_measured_s: float | None = None
    comm_emulated_s: float | None = None
    comm_predicted_s: float | None = None
    comm_measured_s: float | None = None
    shipped_bytes: int | None = None
    samples: int | None = None
    passes: int | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None
    adapted: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got "
                             f"{self.status!r}")

    def as_dict(self) -> dict[str, Any]:
        """The row as ``rounds.csv`` and a remote run's records hold it: every field by name
        (None where unknown), the columns beside them; ``reason`` and ``adapted`` only where
        set. A column named as a field (feel's ``samples``) leaves the field's value."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("columns", "reason", "adapted")}
        out.update({k: v for k, v in self.columns.items() if k not in out})
        for key in ("reason", "adapted"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class RoundRecord:
    """One round of a live run (or one server step of an asynchronous scheme), as
    ``summary.json``'s ``rounds`` lists them.

    Round 0 is the untrained model: its record holds the evaluation, the times and the
    learners only.

    Attributes
    ----------
    round : int
    evaluation : Mapping
        Validation ``loss`` and ``accuracy`` of the global model (and each task's, ``tasks``).
    wall_s : float
        Wall time since the run started [s].
    clock_s : float or None
        Time on the problem's clock since the start (None: an asynchronous scheme has none).
    learners : int
        Replies aggregated.
    round_wall_s : float or None
        The round's own wall time [s].
    missing : tuple of int
        Learners missing after it.
    method : str
    solve_s : float
    allocation : Mapping
    last : bool
    control : Mapping or None
        The problem's feedback record (adaptive-tau's control numbers), or what a planned
        asynchronous scheme's plan had in force at the step (staggered's ``period_s``).
    adapted : Mapping or None
        What the problem changed in the file's job.
    staleness : tuple of int or None
        An asynchronous step's updates' staleness.
    clipped : Mapping or None
        Learners whose reply the aggregation rule clipped or left out, and why.
    kept : str or None
        Why the round kept the previous global model (its aggregate was not finite).
    placed : Mapping or None
        The data placed again after the step (a planned asynchronous scheme, a learner's
        speed moved): each learner's ``samples``, the ``s_per_sample_pass`` they were placed
        at, and the plan's ``control`` from then on (``control`` above is the step's own).
    """

    round: int
    evaluation: Mapping[str, Any]
    wall_s: float
    clock_s: float | None
    learners: int
    round_wall_s: float | None = None
    missing: tuple[int, ...] = ()
    method: str = ""
    solve_s: float = 0.0
    allocation: Mapping[str, Any] = field(default_factory=dict)
    last: bool = False
    control: Mapping[str, Any] | None = None
    adapted: Mapping[str, Any] | None = None
    staleness: tuple[int, ...] | None = None
    clipped: Mapping[int, str] | None = None
    kept: str | None = None
    placed: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record as ``summary.json`` holds it (keys in a fixed order; the optional ones
        only where set)."""
        out: dict[str, Any] = {"round": self.round, **self.evaluation, "wall_s": self.wall_s}
        if self.round == 0:
            out.update(clock_s=self.clock_s, learners=self.learners)
            return out
        out.update(round_wall_s=self.round_wall_s, clock_s=self.clock_s,
                   learners=self.learners, missing=list(self.missing), method=self.method,
                   solve_s=self.solve_s, allocation=dict(self.allocation), last=self.last)
        if self.control:
            out["control"] = dict(self.control)
        if self.adapted:
            out["adapted"] = dict(self.adapted)
        if self.staleness is not None:
            out["staleness"] = list(self.staleness)
        if self.clipped:
            out["clipped"] = {str(k): v for k, v in self.clipped.items()}
        if self.kept:
            out["kept"] = self.kept
        if self.placed:
            out["placed"] = dict(self.placed)
        return out


class RunLog:
    """What a live run has recorded: rows, rounds, warnings, and why it stopped early.

    The only writer of these; everything else reads them (:attr:`rows`, :attr:`rounds`,
    :attr:`warnings` are read-only views).
    """

    def __init__(self) -> None:
        self._rows: list[LearnerRow] = []
        self._rounds: list[RoundRecord] = []
        self._warnings: list[str] = []
        self._stopped: dict[str, Any] | None = None

    # -- writing -----------------------------------------------------------------------------
    def warn(self, text: str) -> None:
        self._warnings.append(text)

    def add_rows(self, rows: Sequence[LearnerRow]) -> None:
        self._rows.extend(rows)

    def add_round(self, record: RoundRecord) -> None:
        self._rounds.append(record)

    def stop(self, r: int, why: str) -> None:
        """The run ends before round ``r``, which could not be planned (``why``: one line);
        the rounds done keep their records."""
        self._stopped = {"round": int(r), "reason": why}
        self.warn(why)

    # -- reading -----------------------------------------------------------------------------
    @property
    def rows(self) -> tuple[LearnerRow, ...]:
        return tuple(self._rows)

    @property
    def rounds(self) -> tuple[RoundRecord, ...]:
        return tuple(self._rounds)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._warnings)

    @property
    def stopped(self) -> dict[str, Any] | None:
        return None if self._stopped is None else dict(self._stopped)

    @property
    def last(self) -> RoundRecord:
        return self._rounds[-1]

    def row_dicts(self, round_: int | None = None) -> list[dict[str, Any]]:
        """Every row as a dictionary (of round ``round_`` only, where given)."""
        return [r.as_dict() for r in self._rows if round_ is None or r.round == round_]

    def round_dicts(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self._rounds]
