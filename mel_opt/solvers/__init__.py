"""Solver backends: one module per backend (``highs``, ``ipopt``), one contract in ``base``.

Backends import their native library inside their functions, so importing this package is cheap.
"""
