"""MkDocs hook: tables generated from the code when the site is built, so they cannot drift.

A page asks for a table with an HTML comment on a line of its own:

``<!-- melopt:fields PROBLEM -->``
    every JSON field of the problem's instance files, from the declarative ``FIELDS`` table of
    its ``instance`` module (walked by :func:`mel_opt.io.fields.walk`): path, kind, required or
    default, documented range, unit and meaning;
``<!-- melopt:methods PROBLEM -->``
    the methods of the problem's ``ProblemSpec``: kind, whether ``optimal`` is a proof, the
    backends needed, what each does, and every method's declared options;
``<!-- melopt:presets PROBLEM -->``
    the generator presets of the problem;
``<!-- melopt:metrics PROBLEM -->``
    the solution and metrics keys of a result, by solving the problem's declared example
    instance (``ProblemSpec.example``) with its default method (so the list is what the code
    produces today).

An unknown directive or problem fails the build.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from mkdocs.exceptions import PluginError

_DIRECTIVE = re.compile(r"^<!-- melopt:(\w+) ([\w-]+) -->$", re.M)

def _spec(problem: str) -> Any:
    from mel_opt.problems import all_problems

    problems = all_problems()
    if problem not in problems:
        raise PluginError(f"melopt directive names unknown problem {problem!r}")
    return problems[problem]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e6:
        return f"{int(x)}"
    return f"{x:g}"


def _range(f: Any) -> str:
    from mel_opt.io.fields import MAX_SAFE_INTEGER

    if f.choices:
        return " \\| ".join(f"`{c}`" for c in f.choices)
    if not f.numeric:
        return ""
    lo = "(" if f.exclusive_minimum else "["
    hi = ")" if f.exclusive_maximum else "]"
    low = "-inf" if f.minimum is None else _num(f.minimum)
    high = ("2^53-1" if f.maximum == MAX_SAFE_INTEGER else
            "inf" if f.maximum is None else _num(f.maximum))
    text = f"{lo}{low}, {high}{hi}"
    if f.sign == "positive" and (f.minimum is None or f.minimum <= 0):
        text += ", > 0"
    return text


def _forms(table: tuple[Any, ...], out: dict[int, str]) -> dict[int, str]:
    """id(field) -> name of the alternative item form it belongs to (lists with ``forms``)."""
    for f in table:
        for form in f.forms:
            for g in form.fields:
                out[id(g)] = form.name
            _forms(form.fields, out)
        _forms(f.fields, out)
    return out


def fields_table(problem: str) -> str:
    from mel_opt.io.fields import walk

    spec = _spec(problem)
    module = importlib.import_module(spec.parse.__module__)
    table = getattr(module, "FIELDS", None)
    if table is None:
        raise PluginError(f"{spec.parse.__module__} has no FIELDS table")
    forms = _forms(table, {})
    rows = ["| JSON path | kind | required | range / choices | unit | meaning |",
            "|---|---|---|---|---|---|"]
    for path, f in walk(table):
        if f.required:
            req = "yes"
        elif f.default is not None and not isinstance(f.default, (list, dict, tuple)):
            req = f"no (default `{f.default}`)"
        else:
            req = "no"
        notes = []
        if id(f) in forms:
            notes.append(f"*{forms[id(f)]} form*")
        if f.when is not None:
            notes.append(f"*when `{f.when.key}` = `{f.when.value}`*")
        if f.length_of:
            notes.append(f"*one entry per item of `{f.length_of}`*")
        if f.forms:
            notes.append("*items take one form: " + "; ".join(
                f"{fm.name} ({', '.join('`' + g.key + '`' for g in fm.fields)})"
                for fm in f.forms) + "*")
        meaning = " ".join([f.doc, *notes]).strip()
        rows.append(f"| `{_cell(path)}` | {f.kind} | {req} | {_range(f)} | "
                    f"{_cell(f.unit)} | {_cell(meaning)} |")
    return "\n".join(rows)


def methods_table(problem: str) -> str:
    spec = _spec(problem)
    rows = ["| method | kind | `optimal` is a proof | needs | what it does |",
            "|---|---|---|---|---|"]
    for name, m in spec.methods.items():
        label = f"`{name}` (default)" if name == spec.default_method else f"`{name}`"
        what = m.summary + (f". Not comparable: {m.not_comparable}" if m.not_comparable else "")
        rows.append(f"| {label} | {m.kind} | {'yes' if m.proves_optimality else 'no'} | "
                    f"{', '.join(m.backends) or '-'} | {_cell(what)} |")
    options = [(name, o) for name, m in spec.methods.items() for o in m.options]
    if not options:
        return "\n".join([*rows, "", "*No method of this problem takes options.*"])
    rows += ["", "Method options (`--option KEY=VALUE` on the command line, `options={...}` in "
             "`mel_opt.solve`; anything else is refused with exit code 2):", "",
             "| method | option | accepts | default | what it changes |", "|---|---|---|---|---|"]
    for name, o in options:
        rows.append(f"| `{name}` | `{o.name}` | {_cell(o.allowed)} | {_cell(o.default_text)} | "
                    f"{_cell(o.doc)} |")
    return "\n".join(rows)


def presets_list(problem: str) -> str:
    spec = _spec(problem)
    if not spec.presets:
        return "*This problem has no generator presets.*"
    rows = ["Presets of `melopt generate " + problem + "` (the first is the default):", "",
            "| preset | what it draws |", "|---|---|"]
    rows += [f"| `{p}` | {_cell(spec.preset_docs.get(p, ''))} |" for p in spec.presets]
    return "\n".join(rows)


def metrics_table(problem: str) -> str:
    import mel_opt

    spec = _spec(problem)
    from mel_opt.examples import load_example, problem_example

    example = f"instances/{problem_example(problem).relpath}"
    res = mel_opt.solve(load_example(problem), spec.default_method, seed=0)
    solution = ", ".join(f"`{k}`" for k in res.solution)
    rows = [f"`{spec.default_method}` on `{example}`: solution keys "
            f"{solution}; keys of `metrics` (other methods add their own extras):", "",
            "| key | type | shown in tables |", "|---|---|---|"]
    for key, value in res.metrics.items():
        kind = type(value).__name__.replace("NoneType", "null")
        rows.append(f"| `{key}` | {kind} | {'yes' if key in spec.key_metrics else ''} |")
    return "\n".join(rows)


def cli_reference(_: str) -> str:
    from mel_opt.cli.reference import cli_markdown

    return cli_markdown()


_MAKERS = {"fields": fields_table, "methods": methods_table, "presets": presets_list,
           "metrics": metrics_table, "cli": cli_reference}


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def replace(m: re.Match[str]) -> str:
        maker = _MAKERS.get(m.group(1))
        if maker is None:
            raise PluginError(f"{page.file.src_path}: unknown melopt directive {m.group(1)!r}")
        return maker(m.group(2))

    return _DIRECTIVE.sub(replace, markdown)
