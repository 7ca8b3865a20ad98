"""``melopt schema``: the JSON Schemas of the instance files and of the result JSON."""

from __future__ import annotations

import click

from mel_opt.cli.app import cli, err, guarded
from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_write
from mel_opt.io.schema import RESULT_NAME, schema_id, schema_text
from mel_opt.problems import all_problems
from mel_opt.schemas import instance_schema, result_schema


@cli.command("schema")
@click.argument("problem", required=False)
@click.option("--result", "result", is_flag=True, help="The schema of the result JSON.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the schema here (atomically); default: standard output.")
def schema_cmd(problem: str | None, result: bool, output: str | None) -> None:
    """Print the JSON Schema (draft 2020-12) of PROBLEM's instance files, or of the result JSON.

    Without PROBLEM or --result: list the problems and the $id of each schema. An instance
    file may name its schema with a "$schema" field (mel_opt ignores it).
    """
    with guarded():
        if problem is not None and result:
            raise UsageError("give either PROBLEM or --result, not both")
        if problem is None and not result:
            if output:
                raise UsageError("-o needs PROBLEM or --result")
            for name in [*all_problems(), RESULT_NAME]:
                label = "--result" if name == RESULT_NAME else name
                click.echo(f"{label:<14} {schema_id(name)}")
            return
        text = schema_text(result_schema() if result else instance_schema(str(problem)))
        if output:
            atomic_write(output, text)
            err.print(f"wrote {output}", markup=False)
        else:
            click.echo(text, nl=False)
