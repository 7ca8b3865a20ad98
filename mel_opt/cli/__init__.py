"""The ``melopt`` command line.

One module per command family (``solve.py``: solve, validate, methods; ``batch.py``; ...); each
attaches its commands to the click group of :mod:`mel_opt.cli.app` (a lazy group). Every module
of this package except ``app`` and names starting with ``_`` is imported when a command is first
looked up (the module named like the command first), so a new command family is a new module
and touches no shared file.
"""

from __future__ import annotations

from mel_opt.cli.app import cli, command_modules

# The command modules load when a command is first looked up (app.LazyGroup), not here: then
# ``melopt --version`` imports neither them nor the library behind them, and ``melopt solve``
# only the module of its own family.


def main() -> None:
    """Run ``melopt`` (raises SystemExit with the exit code, as click does)."""
    cli(prog_name="melopt")


def run() -> None:
    """The ``melopt`` executable: :func:`main`, then leave without the interpreter's teardown.

    Freeing what a large solve built (a Pyomo model of thousands of learners, compiled NLP
    data) takes the interpreter up to half a second at exit, after the answer is written: time
    a user waits for nothing and that ``--time-limit`` would otherwise overrun. The output is
    flushed first; the ordinary exit is kept whenever something still needs the teardown
    (child processes, Ray, non-daemon threads).
    """
    try:
        main()
    except SystemExit as exc:
        _leave(exc.code)
        raise


def _leave(code: object) -> None:
    import os
    import sys
    import threading

    if "ray" in sys.modules:
        return
    if "multiprocessing" in sys.modules:
        import multiprocessing

        if multiprocessing.active_children():
            return
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("message"): Python prints it and exits 1
        print(code, file=sys.stderr)
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


__all__ = ["cli", "command_modules", "main", "run"]
