"""``melopt reproduce``: the papers' figures and tables that mel_opt regenerates.

:mod:`~mel_opt.reproduce.catalogue` defines entries, claims, outcomes and the registry; one
module per paper adds its entries; :mod:`~mel_opt.reproduce.report` runs entries into a folder
and writes the Markdown report.
"""

from __future__ import annotations

from mel_opt.reproduce.catalogue import (
    Claim,
    Context,
    Entry,
    Outcome,
    all_entries,
    register,
    select,
    verdict_of,
)
from mel_opt.reproduce.report import run_entries

__all__ = ["Claim", "Context", "Entry", "Outcome", "all_entries", "register", "run_entries",
           "select", "verdict_of"]
