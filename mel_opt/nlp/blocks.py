"""Compiled blocks of rows: values, Jacobian and Hessian contributions of several functions.

The objective is a one-row block and the constraints another. Each row is split (by Pyomo's
standard representation) into a constant, linear and quadratic triplets and nonlinear terms.
Linear parts become one sparse matrix; quadratic parts ``(row, i, j, coef)`` arrays whose
Jacobian is a constant sparse matrix times ``x`` and whose Hessian is constant per multiplier;
only nonlinear terms run generated code (:mod:`mel_opt.nlp.terms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mel_opt.nlp.graph import Graph
from mel_opt.nlp.terms import NonlinearTerms, float_array, int_array


@dataclass
class Rows:
    """Split parts of several functions: constants, linear and quadratic triplets, and
    nonlinear terms (several per row when the remainder is a sum)."""

    constant: list[float] = field(default_factory=list)
    lin_r: list[int] = field(default_factory=list)
    lin_j: list[int] = field(default_factory=list)
    lin_c: list[float] = field(default_factory=list)
    q_r: list[int] = field(default_factory=list)
    q_i: list[int] = field(default_factory=list)
    q_j: list[int] = field(default_factory=list)
    q_c: list[float] = field(default_factory=list)
    nl_r: list[int] = field(default_factory=list)
    nl_root: list[int] = field(default_factory=list)


class Block:
    """Values, Jacobian and Hessian contributions of ``m`` functions of ``n`` variables."""

    def __init__(self, rows: Rows, n: int, graph: Graph, name: str) -> None:
        self.n = n
        self.m = m = len(rows.constant)
        self.name = name
        self.b = float_array(rows.constant)
        lin_r, lin_j, lin_c = (
            int_array(rows.lin_r),
            int_array(rows.lin_j),
            float_array(rows.lin_c),
        )
        self.A = sp.csr_array((lin_c, (lin_r, lin_j)), shape=(m, n))
        self.q_r = int_array(rows.q_r)
        self.q_i = int_array(rows.q_i)
        self.q_j = int_array(rows.q_j)
        self.q_c = float_array(rows.q_c)
        self.has_quad = bool(self.q_c.size)
        self.nl = (
            NonlinearTerms(graph, list(zip(rows.nl_r, rows.nl_root, strict=True)), name)
            if rows.nl_r
            else None
        )
        g_r = self.nl.grad_rows if self.nl else int_array([])
        g_j = self.nl.grad_cols if self.nl else int_array([])

        # Jacobian pattern: union of linear, quadratic and nonlinear entries, row-major.
        keys = np.concatenate(
            [lin_r * n + lin_j, self.q_r * n + self.q_i, self.q_r * n + self.q_j, g_r * n + g_j]
        )
        self.jac_keys = np.unique(keys)
        self.jac_rows = self.jac_keys // n if n else self.jac_keys
        self.jac_cols = self.jac_keys % n if n else self.jac_keys
        nnz = self.jac_keys.size
        self.jac_const = np.bincount(self._jpos(lin_r, lin_j), weights=lin_c, minlength=nnz).astype(
            np.float64
        )
        # d(c x_i x_j) = c x_j dx_i + c x_i dx_j: a constant matrix times x (i == j sums to 2c).
        self.Jq = sp.csr_array(
            (
                np.concatenate([self.q_c, self.q_c]),
                (
                    np.concatenate(
                        [self._jpos(self.q_r, self.q_i), self._jpos(self.q_r, self.q_j)]
                    ),
                    np.concatenate([self.q_j, self.q_i]),
                ),
            ),
            shape=(nnz, n),
        )
        # Terms of one row may share a variable: accumulate with bincount, not fancy +=.
        self.nl_jpos = self._jpos(g_r, g_j)
        self.hess_nnz = 0

    def _jpos(self, r: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.jac_keys, r * self.n + j)

    # -- Hessian -----------------------------------------------------------------------------

    def hessian_keys(self) -> np.ndarray:
        """Lower-triangle keys (row * n + col) this block contributes; builds 2nd derivatives."""
        n = self.n
        hi = np.maximum(self.q_i, self.q_j)
        lo = np.minimum(self.q_i, self.q_j)
        if self.nl is not None:
            self.nl_hrow, nl_hi, nl_lo = self.nl.build_hessian()
        else:
            self.nl_hrow, nl_hi, nl_lo = int_array([]), int_array([]), int_array([])
        self._nl_hkeys = nl_hi * n + nl_lo
        return np.concatenate([hi * n + lo, self._nl_hkeys])

    def set_hessian_pattern(self, hess_keys: np.ndarray) -> None:
        """Precompute where this block's second derivatives land in the global pattern."""
        n = self.n
        nnz = hess_keys.size
        hi = np.maximum(self.q_i, self.q_j)
        lo = np.minimum(self.q_i, self.q_j)
        factor = np.where(self.q_i == self.q_j, 2.0, 1.0)
        # One column per function: the quadratic contribution is Hq @ multipliers.
        self.Hq = sp.csr_array(
            (self.q_c * factor, (np.searchsorted(hess_keys, hi * n + lo), self.q_r)),
            shape=(nnz, self.m),
        )
        self.nl_hpos = np.searchsorted(hess_keys, self._nl_hkeys)
        self.hess_nnz = nnz

    # -- evaluation --------------------------------------------------------------------------

    def values(self, x: np.ndarray) -> np.ndarray:
        out = self.A @ x + self.b
        if self.has_quad:
            out += np.bincount(
                self.q_r, weights=self.q_c * x[self.q_i] * x[self.q_j], minlength=self.m
            )
        if self.nl is not None:
            out += np.bincount(self.nl.value_rows, weights=self.nl.values(x), minlength=self.m)
        return out

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        out = self.jac_const.copy()
        if self.has_quad:
            out += self.Jq @ x
        if self.nl is not None and self.nl_jpos.size:
            out += np.bincount(
                self.nl_jpos, weights=self.nl.gradient(x), minlength=self.jac_keys.size
            )
        return out

    def hessian(self, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        out = self.Hq @ weights if self.has_quad else np.zeros(self.hess_nnz)
        if self.nl is not None and self.nl_hpos.size:
            hv = self.nl.hessian(x, self.nl_hpos.size)
            out += np.bincount(
                self.nl_hpos, weights=hv * weights[self.nl_hrow], minlength=self.hess_nnz
            )
        return out


