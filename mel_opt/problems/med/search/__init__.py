"""med's exact search (thesis Eq. 4.4): a proven optimum, or an allocation and a bound.

Modules, each importing only those listed before it (no cycles; this file imports nothing):

- ``types``: the tolerance, ``SearchOutcome`` and small helpers every module shares.
- ``budget``: the budget subproblem of a fixed assignment (multiple-choice knapsack).
- ``type_box``: learner types as cells of a box and the dynamic programmes over it.
- ``type_search``: the type-programme search (budget search, Lagrangian multiplier on B).
- ``evaluate``: the exact value of one assignment (many-types path).
- ``local``: greedy start, local search and iterated local search.
- ``lagrangian``: the Lagrangian bound and its subgradient optimisation.
- ``bundle``: the box-step bundle method of the bound and the restricted master LP.
- ``companion``: a forked process and shared mailboxes for the primal search on a second core.
- ``exchange``: the incumbent and its exchange with the companion (what is sent and kept).
- ``branching``: how a node of the branch and bound is split (on a task's level or a learner).
- ``search_stats``: the branch and bound's statistics, typed, and their result keys.
- ``search_clock``: the branch and bound's start, deadline and the time shares of its phases.
- ``answer``: the branch and bound's answer (the incumbent's shards, ``SearchOutcome``).
- ``bounding``: the root's and the children's bounds, their columns and the restricted master.
- ``primal``: the primal heuristics of one process (polishes, local and iterated searches).
- ``companion_search``: the companion's search and the parent's handle on the companion.
- ``best_first``: the branching, best bound first (nodes bounded, split, cut, leaves).
- ``branch_and_bound``: the Lagrangian branch and bound for many learner types (its phases in
  order, the entry point).
- ``dispatch``: the entry point ``solve``, which picks one of the searches.
"""
