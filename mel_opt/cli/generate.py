"""``melopt generate``: an instance of a problem from a preset of its paper."""

from __future__ import annotations

import json
import re
from typing import Any

import click

from mel_opt.api import parse_instance
from mel_opt.cli.app import cli, err, guarded, seed_int
from mel_opt.errors import InstanceError, Issue, UsageError
from mel_opt.io.atomic import atomic_write
from mel_opt.limits import MAX_GENERATED_ITEMS
from mel_opt.problems import get_problem


@cli.command("generate")
@click.argument("problem")
@click.option("--preset", default=None,
              help="Named set-up from a paper (default: the first, marked *); `melopt methods "
                   "PROBLEM` lists each problem's presets with one line each.")
@click.option("--learners", "--devices", "learners",
              type=click.IntRange(min=1, max=MAX_GENERATED_ITEMS), default=None,
              help="Number of learners / devices.")
@click.option("--tasks", type=click.IntRange(min=1, max=MAX_GENERATED_ITEMS), default=None,
              help="Number of tasks (med).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed of everything the preset draws.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Preset parameter override (repeatable), e.g. cycle_time_s=7.5.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the instance here (atomically); default: standard output.")
@click.option("--adapt", is_flag=True, default=False,
              help="When the problem's default method could not solve the instance, raise the "
                   "one parameter that fixes it (mel-async: cycle_time_s, dab: deadline_s) to "
                   "the smallest value found solvable, and say so; without it such an instance "
                   "is refused.")
def generate_cmd(problem: str, preset: str | None, learners: int | None, tasks: int | None,
                 seed: int, params: tuple[str, ...], output: str | None, adapt: bool) -> None:
    """Generate an instance of PROBLEM from a preset (validated before it is written; one its
    default method cannot solve is refused, or adapted with --adapt)."""
    with guarded():
        spec = get_problem(problem)
        if spec.generate is None:
            raise UsageError(f"problem {problem!r} has no generator")
        if preset is not None and spec.presets and preset not in spec.presets:
            raise UsageError(
                f"unknown preset {preset!r} for {problem}; choose one of {', '.join(spec.presets)}"
            )
        overrides: dict[str, str] = {}
        for item in params:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--param expects KEY=VALUE, got {item!r}")
            overrides[key] = value
        doc = spec.generate(preset, learners=learners, tasks=tasks, seed=seed, params=overrides)
        check = spec.solvable
        short = check(doc) if check is not None else None
        if short is not None and not adapt:
            raise UsageError(f"{short.message} (--adapt sets it, or --param "
                             f"{short.param}=VALUE)")
        if short is not None:
            overrides[short.param] = f"{short.value:g}"
            doc = spec.generate(preset, learners=learners, tasks=tasks, seed=seed,
                                params=overrides)
            again = check(doc) if check is not None else None
            if again is not None:
                raise UsageError(f"--adapt: still not solvable at {short.param} = "
                                 f"{short.value:g}: {again.message}")
            err.print(f"adapted: {short.param} = {short.value:g} ({short.message})",
                      markup=False, soft_wrap=True)
        try:
            parse_instance(doc, output or "<generated>")  # never emit an invalid file
        except InstanceError as exc:  # name the learner (a trace's client id) at fault
            raise InstanceError([_named(issue, doc) for issue in exc.issues],
                                exc.source) from None
        text = json.dumps(doc, indent=2) + "\n"
        if output:
            atomic_write(output, text)
            err.print(f"wrote {output}", markup=False)
        else:
            click.echo(text, nl=False)


def _named(issue: Issue, doc: dict[str, Any]) -> Issue:
    """``issue`` with the name of the learner its path points into (``learners[3]``: the
    learner ``'1042'``, a trace's client id where the learners come from one)."""
    m = re.match(r"learners\[(\d+)\]", issue.path)
    learners = doc.get("learners")
    if m is None or not isinstance(learners, list) or int(m[1]) >= len(learners):
        return issue
    name = learners[int(m[1])].get("name") if isinstance(learners[int(m[1])], dict) else None
    if not isinstance(name, str):
        return issue
    return Issue(issue.path, f"{issue.message} (learner {name!r:.60})")

