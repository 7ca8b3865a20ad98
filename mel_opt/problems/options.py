"""Declared method options: each one's name, type, default, range and one-line doc.

A method lists its options in :attr:`MethodSpec.options <mel_opt.problems.base.MethodSpec>`;
:func:`read_options` checks what a caller passed against that declaration once, before the
method runs (an unknown key or a bad value is a :class:`~mel_opt.errors.UsageError` naming the
option, exit code 2), and hands the method every declared option as a typed value, defaults
filled in. The same declarations feed ``melopt methods --options`` and the problem pages of the
documentation, so what is listed is what is accepted (as Pyomo's ``ConfigDict`` and
scikit-learn's parameter constraints do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from mel_opt.errors import UsageError

__all__ = ["Option", "read_options"]

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class Option:
    """One option of a method.

    Attributes
    ----------
    name : str
        The key (``--option NAME=VALUE``, ``options={"NAME": ...}``).
    kind : type
        ``bool``, ``int``, ``float`` or ``str``: the type the method receives.
    default : Any
        The value when the option is not given; ``None`` means "chosen from the instance",
        which ``default_doc`` explains.
    doc : str
        One line: what the option changes.
    choices : tuple of str
        The allowed values of a ``str`` option (empty: any text).
    minimum, maximum : float or None
        Inclusive bounds of a numeric option.
    default_doc : str
        How the default is chosen when it depends on the instance.
    minimum_open : bool
        The minimum itself is refused (``> 0`` rather than ``>= 0``).
    """

    name: str
    kind: type
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    default_doc: str = ""
    minimum_open: bool = False

    def __post_init__(self) -> None:
        if self.kind not in (bool, int, float, str):
            raise TypeError(f"option {self.name}: kind must be bool, int, float or str")
        if self.default is not None:
            self.parse(self.default)  # a declaration whose default it would refuse is a bug

    @property
    def allowed(self) -> str:
        """The accepted values in words: ``a whole number >= 2``, ``one of repair, paper``..."""
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return f"one of {', '.join(self.choices)}" if self.choices else "a text"
        word = "a whole number" if self.kind is int else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{word} in {'(' if self.minimum_open else '['}{self.minimum:g}, " \
                   f"{self.maximum:g}]"
        if self.minimum is not None:
            return f"{word} {'>' if self.minimum_open else '>='} {self.minimum:g}"
        if self.maximum is not None:
            return f"{word} <= {self.maximum:g}"
        return word

    @property
    def default_text(self) -> str:
        """The default as the documentation shows it."""
        if self.default is None:
            return self.default_doc or "chosen from the instance"
        if self.kind is bool:
            return "true" if self.default else "false"
        return f"{self.default:g}" if self.kind is float else str(self.default)

    def parse(self, value: Any) -> Any:
        """``value`` as this option's type, or :class:`UsageError` naming the option.

        Text is accepted for every kind (the command line passes ``KEY=VALUE``): ``true``/
        ``false`` (also yes/no, on/off, 1/0) for a flag, a number for a numeric option.
        """
        if self.kind is bool:
            return self._flag(value)
        if self.kind is str:
            if not isinstance(value, str):
                raise self._bad(value)
            if self.choices and value not in self.choices:
                raise self._bad(value)
            return value
        return self._number(value)

    def _flag(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise self._bad(value)

    def _number(self, value: Any) -> int | float:
        if isinstance(value, bool):
            raise self._bad(value)
        number: float
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise self._bad(value) from None
        else:
            raise self._bad(value)
        if not math.isfinite(number):
            raise self._bad(value)
        if self.kind is int and not number.is_integer():
            raise self._bad(value)
        below = self.minimum is not None and (
            number <= self.minimum if self.minimum_open else number < self.minimum)
        if below or (self.maximum is not None and number > self.maximum):
            raise self._bad(value)
        if self.kind is int:
            return int(value) if isinstance(value, int) else int(number)
        return number

    def _bad(self, value: Any) -> UsageError:
        return UsageError(f"option {self.name} must be {self.allowed}, got {value!r}")


def read_options(declared: Sequence[Option], given: Mapping[str, Any] | None,
                 where: str) -> Mapping[str, Any]:
    """Check ``given`` against ``declared``; every declared option as a typed value.

    Parameters
    ----------
    declared
        The method's options.
    given
        What the caller passed (None: nothing).
    where
        The method, for messages (``"mel-async method ipopt"``).

    Returns
    -------
    Mapping
        A read-only mapping of every declared name to its parsed value or its default.

    Raises
    ------
    UsageError
        For a key the method does not declare (the message lists the ones it does) or a value
        outside the option's declaration.
    """
    by_name = {o.name: o for o in declared}
    unknown = sorted(set(given or {}) - set(by_name))
    if unknown:
        known = ", ".join(by_name) if by_name else "none"
        raise UsageError(f"unknown option {', '.join(unknown)} for {where} "
                         f"(its options: {known})")
    values = {name: opt.default for name, opt in by_name.items()}
    for name, value in (given or {}).items():
        values[name] = by_name[name].parse(value)
    return MappingProxyType(values)
