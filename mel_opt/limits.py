"""The sizes mel_opt refuses before it reads or allocates: one documented place for each limit.

Every limit is checked before the work starts and refused with a :class:`UsageError` (exit
code 2) that gives the number found and the limit, so a mistyped size is one line, not minutes
of swapping, the kernel's OOM killer or an internal error.

- :data:`MAX_INPUT_BYTES`: an instance file (or any JSON document mel_opt reads) larger than
  this is refused before it is read (its size from ``os.stat``; a pipe or device is read up to
  the limit). Raise it with the environment variable ``MELOPT_MAX_INPUT_BYTES``.
- :data:`MAX_SIMULATION_BYTES`: the memory a Monte-Carlo simulation (``melopt simulate``,
  ``sweep --evaluate``) would take for its per-(trial, cycle, learner) arrays, estimated by
  :func:`simulation_bytes`. Raise it with ``MELOPT_MAX_SIMULATION_BYTES``.
- :data:`MAX_EVALUATION_ROWS`: rows of ``sweep --evaluate``'s table (one per point, scheme and
  trial), held in memory until the table is written.
- :data:`MAX_GENERATED_ITEMS`: learners or tasks of one ``melopt generate``.
"""

from __future__ import annotations

import os

from mel_opt.errors import UsageError

#: Largest JSON document read, bytes (256 MiB); ``MELOPT_MAX_INPUT_BYTES`` overrides it.
MAX_INPUT_BYTES = 256 * 2**20
#: Largest estimated memory of one simulation, bytes (2 GiB); ``MELOPT_MAX_SIMULATION_BYTES``
#: overrides it.
MAX_SIMULATION_BYTES = 2 * 2**30
#: Most rows one ``sweep --evaluate`` table may have.
MAX_EVALUATION_ROWS = 1_000_000
#: Most learners (or tasks) ``melopt generate`` writes: about 150 MB of JSON, so the file it
#: writes stays below :data:`MAX_INPUT_BYTES` and can be read back.
MAX_GENERATED_ITEMS = 1_000_000


def _limit(name: str, default: int) -> int:
    """The limit ``default``, or the positive integer of the environment variable ``name``."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        raise UsageError(f"{name}={text!r}: expected a whole number of bytes") from None
    if value < 1:
        raise UsageError(f"{name}={text!r}: must be at least 1")
    return value


def max_input_bytes() -> int:
    """:data:`MAX_INPUT_BYTES`, or ``MELOPT_MAX_INPUT_BYTES`` when set."""
    return _limit("MELOPT_MAX_INPUT_BYTES", MAX_INPUT_BYTES)


def simulation_bytes(trials: int, cycles: int, learners: int, states: int,
                     schemes: int) -> int:
    """Estimated peak memory of a simulation's arrays, bytes.

    Per (trial, cycle, learner): the uniforms, drawn states and noise (float64 and int64, about
    64 bytes), the state comparison (one byte per state) and, per scheme, its allocation and
    metrics (about 48 bytes). Measured: 20,000 trials x 5 cycles x 10 learners of one scheme
    take about 100 MB more than 200 trials.
    """
    return trials * cycles * learners * (64 + states + 48 * max(schemes, 1))


def check_simulation(trials: int, cycles: int, learners: int, states: int,
                     schemes: int) -> None:
    """UsageError when :func:`simulation_bytes` exceeds the limit (before anything is drawn)."""
    need = simulation_bytes(trials, cycles, learners, states, schemes)
    limit = _limit("MELOPT_MAX_SIMULATION_BYTES", MAX_SIMULATION_BYTES)
    if need > limit:
        raise UsageError(
            f"--trials {trials:,} x --cycles {cycles:,} x {learners:,} learners would need about "
            f"{_gib(need)} of memory, more than the {_gib(limit)} a simulation may take "
            "(MELOPT_MAX_SIMULATION_BYTES); use fewer trials or cycles")


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"
