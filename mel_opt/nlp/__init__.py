"""Pyomo-to-numpy NLP compiler: a continuous Pyomo model as vectorised callbacks.

Pyomo's own ``cyipopt`` interface needs PyNumero's compiled ASL library, which is not shipped
here, so this package compiles a model itself, in three phases, all before a solver starts:

1. *Split* (:mod:`~mel_opt.nlp.pyomo_reader`): Pyomo's standard representation splits the
   objective and every constraint body into constant + linear + quadratic + nonlinear remainder.
2. *Vectorise* (:mod:`~mel_opt.nlp.blocks`): linear parts become one sparse matrix per block;
   quadratic parts ``(row, i, j, coef)`` arrays evaluated with numpy fancy indexing.
3. *Generate code* (:mod:`~mel_opt.nlp.graph`, :mod:`~mel_opt.nlp.terms`,
   :mod:`~mel_opt.nlp.codegen`): nonlinear remainders become a hash-consed expression graph,
   differentiated symbolically; terms of one structure are evaluated together with numpy,
   the rest as straight-line scalar Python.

The result, :class:`CompiledNLP` (:mod:`~mel_opt.nlp.compiled`), has the callback interface
of cyipopt (objective, gradient, constraints, Jacobian and Hessian with their structures).
"""

from mel_opt.nlp.compiled import CompiledNLP, compile_nlp
from mel_opt.nlp.graph import NLPEvaluationError

__all__ = ["CompiledNLP", "NLPEvaluationError", "compile_nlp"]
