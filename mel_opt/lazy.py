"""Modules imported at their first use, so that commands which never need them do not wait.

Pyomo takes most of a second to import, scipy and the NLP compiler a good part of one; most
commands and most methods use neither. A module that needs one at run time binds a stand-in at
module level and keeps its code unchanged::

    from typing import TYPE_CHECKING

    from mel_opt.lazy import lazy_module

    if TYPE_CHECKING:  # the real module for the type checker
        import pyomo.environ as pyo
    else:
        pyo = lazy_module("pyomo.environ")

The first attribute read (``pyo.ConcreteModel``) imports the module; an ImportError surfaces
there, at the point of use.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
    """Stand-in for the module of the same name, imported on the first attribute read."""

    def __getattr__(self, attr: str) -> Any:
        # only called for names not yet set on the stand-in; keep each one after the first read
        value = getattr(importlib.import_module(self.__name__), attr)
        setattr(self, attr, value)
        return value


def lazy_module(name: str) -> types.ModuleType:
    """A stand-in for module ``name`` (dotted, absolute) that imports it when first used."""
    return _LazyModule(name)
