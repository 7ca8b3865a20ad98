"""``melopt compare``: every method of a problem on one instance, with gaps to the best."""

from __future__ import annotations

import json

import click
from rich.table import Table

from mel_opt import api as _api
from mel_opt.api import load_instance
from mel_opt.cli.app import (
    STATUS_STYLE,
    cli,
    fmt,
    guarded,
    method_list,
    out,
    positive,
    seed_int,
    verification_text,
)
from mel_opt.cli.solve import OPTION, method_options
from mel_opt.problems import get_problem

# standard output carries the answer alone (--json): Pyomo logs on standard error
_api.PYOMO_LOG_TO_STDERR = True


@cli.command("compare")
@click.argument("path", type=click.Path())
@click.option("--methods", default=None, help="Comma-separated methods (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of "
              "a table.")
@click.option("--time-limit", type=positive(), default=None,
              help="Seconds each solve may take (default: no limit).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed of randomised methods and generators.")
@OPTION
def compare_cmd(path: str, methods: str | None, as_json: bool, time_limit: float | None,
                seed: int, options: tuple[str, ...]) -> None:
    """Every method of the instance's problem side by side, with gaps to the best proven answer.

    A method that answers a different question shows "not comparable" in place of a gap, and
    its reason under the table."""
    from mel_opt.compare import compare

    with guarded():
        inst = load_instance(path)
        cmp = compare(inst, method_list(methods), time_limit=time_limit, seed=seed,
                      options=method_options(options))
        if as_json:
            click.echo(json.dumps(cmp.to_dict(), indent=2, allow_nan=False))
            return
        spec = get_problem(inst.problem)
        ref = cmp.reference
        t = Table(title=f"{inst.name}: {spec.name} ({spec.sense}imise); reference: "
                  f"{ref.method if ref else 'none'}"
                  f"{' (proven optimal)' if cmp.reference_is_proven else ''}")
        cols = ["method", "kind", "status", "objective", "gap", "gap %", *spec.key_metrics,
                "verified", "time (s)"]
        for c in cols:
            t.add_column(c, justify="right" if c not in ("method", "kind", "status") else "left")
        for r in cmp.results:
            g, rel = cmp.gaps[r.method]
            style = STATUS_STYLE.get(r.status.value, "white")
            best = " [bold](best)[/]" if ref is not None and r is ref else ""
            apart = cmp.not_comparable.get(r.method)
            t.add_row(r.method + best, spec.methods[r.method].kind,
                      f"[{style}]{r.status.value}[/]", fmt(r.objective),
                      "not comparable" if apart else fmt(g),
                      "-" if rel is None else f"{100 * rel:.3g}",
                      *(fmt(r.metrics.get(k)) for k in spec.key_metrics),
                      verification_text(r), f"{r.solve_time_s:.4g}")
        out.print(t)
        for name, why in cmp.not_comparable.items():
            out.print(f"{name}: not comparable: {why}", markup=False)
