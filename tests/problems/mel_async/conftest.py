"""Fixtures for mel-async tests: small coefficient-form instances worked by hand."""

from __future__ import annotations

from typing import Any

import pytest


def coeff_doc(T: float, d: int, dl: int, du: int, coeffs: list[tuple[float, float, float]],
              **extra: Any) -> dict[str, Any]:
    return {
        "problem": "mel-async",
        "schema_version": 1,
        "name": extra.pop("name", "hand"),
        "cycle_time_s": T,
        "total_samples": d,
        "min_samples": dl,
        "max_samples": du,
        "learners": [{"name": f"l{i}", "c2": a, "c1": b, "c0": c}
                     for i, (a, b, c) in enumerate(coeffs)],
        **extra,
    }


@pytest.fixture
def make_doc():
    return coeff_doc
