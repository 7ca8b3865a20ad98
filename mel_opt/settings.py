"""Run settings declared once: each one's name, type, range, default, flag and doc.

A run of ``melopt train`` or ``melopt live`` is described by a frozen dataclass of settings
(:class:`~mel_opt.training.settings.TrainSettings`,
:class:`~mel_opt.live.settings.LiveSettings`, :class:`~mel_opt.live.settings.LiveOptions`).
Each field is declared by a :class:`Setting` (a method :class:`~mel_opt.problems.options.Option`
with a command-line flag, ``None`` where it means something, and comma-separated lists), and
:class:`Declared` checks every field against its declaration when the dataclass is made, in
the library: a bad value is a :class:`~mel_opt.errors.SettingError` naming the setting, whoever
made the settings (the CLI, a script, a server app reading them from JSON). The CLI builds its
options from the same declarations (:func:`mel_opt.cli.app.declared_options`), so a default, a
range or a doc is written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mel_opt.errors import SettingError, UsageError
from mel_opt.problems.options import Option

__all__ = ["Declared", "Setting", "declared"]


@dataclass(frozen=True)
class Setting(Option):
    """One setting of a run.

    Attributes (beyond :class:`~mel_opt.problems.options.Option`'s)
    ----------
    flag : str
        The command-line flag that sets it (default: ``--`` and the name with dashes).
    nullable : bool
        ``None`` is a value (``default_doc`` says what it means: "all", "the CPUs", ...).
    many : bool
        A tuple of values of ``kind`` (text: comma-separated), at least one.
    check : callable, optional
        A further rule on the parsed value that a type and a range cannot say (a known model
        name, a partition's syntax): raises :class:`~mel_opt.errors.UsageError`, whose message
        becomes the setting's.
    """

    flag: str = ""
    nullable: bool = False
    many: bool = False
    check: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        super().__post_init__()

    @property
    def allowed(self) -> str:
        one = super().allowed
        return f"comma-separated values, each {one}" if self.many else one

    @property
    def default_text(self) -> str:
        if self.many and self.default is not None:
            return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in self.default)
        return super().default_text

    def parse(self, value: Any) -> Any:
        """``value`` as this setting's type (a tuple when ``many``), or SettingError."""
        if value is None:
            if self.nullable:
                return None
            raise self._bad(value)
        if self.many:
            value = self._items(value)
        else:
            value = super().parse(value)
        if self.check is not None:
            try:
                self.check(value)
            except SettingError:
                raise
            except UsageError as exc:
                raise SettingError(self.name, self.flag, str(exc), ": ") from None
        return value

    def _items(self, value: Any) -> tuple[Any, ...]:
        if isinstance(value, str):
            parts: Iterable[Any] = (v.strip() for v in value.split(",") if v.strip())
        elif isinstance(value, Iterable) and not isinstance(value, Mapping):
            parts = value
        else:
            raise self._bad(value)
        out = tuple(Option.parse(self, v) for v in parts)
        if not out:
            raise SettingError(self.name, self.flag, "needs at least one value")
        return out

    def _bad(self, value: Any) -> SettingError:
        if value is None and self.default is None and not self.nullable:  # never given
            return SettingError(self.name, self.flag, f"is required: {self.allowed}")
        return SettingError(self.name, self.flag, f"must be {self.allowed}, got {value!r}")


class Declared:
    """Base of a frozen dataclass whose fields are declared settings.

    Subclasses list their declarations in ``SETTINGS``, one per field (fields that are not
    settings, such as an instance document, are listed in ``UNDECLARED``); every declared field
    is parsed by its declaration when the object is made (a value of the right type replaces
    it: text ``"0.5,0.8"`` becomes ``(0.5, 0.8)``), then :meth:`check_together` runs the rules
    that involve several settings.
    """

    SETTINGS: ClassVar[tuple[Setting, ...]] = ()
    UNDECLARED: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for s in self.SETTINGS:
            object.__setattr__(self, s.name, s.parse(getattr(self, s.name)))
        self.check_together()

    def check_together(self) -> None:
        """Rules between settings (SettingError naming one of them); default: none."""

    @classmethod
    def setting(cls, name: str) -> Setting:
        """The declaration of ``name``."""
        for s in cls.SETTINGS:
            if s.name == name:
                return s
        raise KeyError(name)

    def values(self) -> dict[str, Any]:
        """Every field by name (what a JSON record of the run's settings holds)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def declared(cls: type[Declared]) -> list[str]:
    """Why ``cls`` and its declarations disagree (empty when every field is declared with the
    field's own default); the test suite runs it on every settings class."""
    problems = []
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    names = [s.name for s in cls.SETTINGS]
    if len(set(names)) != len(names):
        problems.append("a setting is declared twice")
    for s in cls.SETTINGS:
        f = fields.get(s.name)
        if f is None:
            problems.append(f"{s.name}: declared but not a field")
        elif f.default is not dataclasses.MISSING and f.default != s.default:
            problems.append(f"{s.name}: field default {f.default!r} != declared {s.default!r}")
    for name in fields:
        if name not in names and name not in cls.UNDECLARED:
            problems.append(f"{name}: a field without a declaration")
    return problems


def pick(settings: Sequence[Setting], *names: str) -> tuple[Setting, ...]:
    """The declarations of ``names`` from ``settings``, in that order."""
    by_name = {s.name: s for s in settings}
    return tuple(by_name[n] for n in names)
