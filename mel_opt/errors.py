"""Exception classes of mel_opt, one per kind of failure.

The CLI maps each class to an exit code (see ``EXIT_CODES``): invalid input or usage is 2,
a well-formed problem without a solution is 1.
"""

from __future__ import annotations

from dataclasses import dataclass


class MelOptError(Exception):
    """Base class of every error mel_opt raises on purpose."""

    exit_code = 2


@dataclass(frozen=True)
class Issue:
    """One problem found in an instance file.

    Attributes
    ----------
    path : str
        JSON path of the offending value, e.g. ``learners[3].cpu_hz`` (``$`` is the document).
    message : str
        What was expected, e.g. ``must be a positive number, got -1``.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InstanceError(MelOptError):
    """An instance file (or dict) is not a valid instance; carries every issue found."""

    exit_code = 2

    def __init__(self, issues: list[Issue] | Issue, source: str | None = None) -> None:
        self.issues = [issues] if isinstance(issues, Issue) else list(issues)
        if not self.issues:
            raise ValueError("InstanceError needs at least one issue")
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        head = f"{self.source}: " if self.source else ""
        if len(self.issues) == 1:
            return f"{head}invalid instance: {self.issues[0]}"
        body = "; ".join(str(i) for i in self.issues)
        return f"{head}invalid instance ({len(self.issues)} problems): {body}"


class UsageError(MelOptError):
    """A request that cannot be served: unknown method, bad option value, missing file."""

    exit_code = 2


class SettingError(UsageError):
    """A run setting (:mod:`mel_opt.settings`) with a value it does not accept.

    The library's message names the setting (``lr must be a number > 0, got -1``); the CLI,
    which knows the setting as a flag, shows :meth:`as_flag` (``--lr must be ...``).

    Attributes
    ----------
    setting : str
        The setting's name (the keyword of the settings dataclass).
    flag : str
        The command-line flag that sets it.
    detail : str
        What is wrong, without the name: ``must be a number > 0, got -1``, or a validator's
        sentence (joined to the name by ``sep``, a colon). Other settings it mentions are
        written ``{name}`` and listed in ``others`` (name -> flag), so each form names them
        its own way.
    """

    def __init__(self, setting: str, flag: str, detail: str, sep: str = " ",
                 others: dict[str, str] | None = None) -> None:
        self.setting, self.flag, self.detail, self.sep = setting, flag, detail, sep
        self.others = dict(others or {})
        super().__init__(f"{setting}{sep}{self._fill(False)}")

    def _fill(self, flags: bool) -> str:
        if not self.others:
            return self.detail
        return self.detail.format(**{k: (v if flags else k) for k, v in self.others.items()})

    def as_flag(self) -> str:
        """The message with every setting named by its command-line flag."""
        return f"{self.flag}{self.sep}{self._fill(True)}"


class SolverUnavailableError(MelOptError):
    """A solver backend needed by the chosen method cannot be used here (says why)."""

    exit_code = 1


class SolverError(MelOptError):
    """A solver backend failed in a way that leaves no usable answer."""

    exit_code = 1


def install_hint(*extras: str) -> str:
    """The command that installs mel_opt's ``extras``, from a clone and from a wheel or index."""
    names = ",".join(extras)
    return f"pip install -e '.[{names}]' in a clone, or pip install 'mel_opt[{names}]'"


def needs_extra(what: str, extra: str) -> str:
    """One message for a missing optional dependency: what needs which extra, and the command."""
    return f"{what} needs the {extra} extra: {install_hint(extra)}"
