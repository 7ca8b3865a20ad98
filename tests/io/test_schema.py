"""The published JSON Schemas agree with mel_opt's own validator.

* every schema is a valid draft 2020-12 schema;
* every shipped and generated instance validates against its problem's schema;
* a corpus of bad files, built by walking the field tables (so a new field is covered without
  editing this file), is rejected by BOTH the schema and :func:`mel_opt.api.parse_instance`,
  and mel_opt names the mutated JSON path;
* the cross-field rules (listed in each schema's description) are rejected by mel_opt only:
  one hand-built file per rule is valid for the schema and refused by mel_opt at the rule's path;
* results of ``melopt solve --json`` (and a batch record) validate against the result schema.

NaN and Infinity are left out of the corpus: they are not JSON (a strict JSON parser refuses
the text, so a schema never sees them); mel_opt's reader refuses them (tests/io/test_reader.py).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from mel_opt.api import load_instance, parse_instance, solve
from mel_opt.cli import cli
from mel_opt.errors import InstanceError, UsageError
from mel_opt.examples import problem_example
from mel_opt.io.fields import Field, walk
from mel_opt.io.json_io import parse_json_text
from mel_opt.io.schema import DIALECT, SOLUTIONS, field_schema, schema_id
from mel_opt.io.validate import Validator
from mel_opt.problems import all_problems, get_problem
from mel_opt.schemas import cross_field_rules, instance_schema, problem_fields, result_schema

ROOT = Path(__file__).resolve().parents[2] / "instances"
PROBLEMS = list(all_problems())
SHIPPED = sorted(ROOT.glob("*/*.json"))
HUGE = 10**31  # one digit past the reader's limit on integer literals


@cache
def schema_validator(problem: str) -> Draft202012Validator:
    return Draft202012Validator(instance_schema(problem))


@cache
def result_validator() -> Draft202012Validator:
    return Draft202012Validator(result_schema())


def schema_errors(doc: Any, problem: str) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in schema_validator(problem).iter_errors(doc)]


def mel_issues(text: str) -> list[tuple[str, str]] | None:
    """mel_opt's issues (path, message) for a JSON text, or None when it is accepted."""
    try:
        parse_instance(parse_json_text(text, "bad.json"), "bad.json")
    except InstanceError as exc:
        return [(i.path, i.message) for i in exc.issues]
    return None


def shipped(problem: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in SHIPPED if p.parent.name == problem]


@cache
def bases(problem: str) -> list[dict[str, Any]]:
    """Valid documents to mutate: the shipped instances, then one per generator preset."""
    spec = get_problem(problem)
    made = [spec.generate(preset, seed=0, params={}) for preset in spec.presets
            if spec.generate is not None]
    return shipped(problem) + [json.loads(json.dumps(doc)) for doc in made]


# -- the schemas themselves ----------------------------------------------------------------
@pytest.mark.parametrize("name", [*PROBLEMS, "result"])
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = result_schema() if name == "result" else instance_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DIALECT
    assert schema["$id"] == schema_id(name) == f"https://mel-opt.invalid/schema/{name}.json"
    json.dumps(schema, allow_nan=False)  # plain JSON, nothing non-finite


@pytest.mark.parametrize("problem", PROBLEMS)
def test_schema_pins_problem_and_version_and_lists_cross_rules(problem: str) -> None:
    schema = instance_schema(problem)
    assert schema["properties"]["problem"] == {
        "const": problem, "description": "the problem this file is an instance of"}
    assert schema["properties"]["schema_version"]["const"] == 1
    assert schema["additionalProperties"] is False  # unknown fields are errors (the contract)
    assert schema["properties"]["meta"]["type"] == "object"  # free-form metadata goes here
    for path, rule in cross_field_rules(problem):
        assert f"{path}: {rule}" in schema["description"]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_schema_and_reader_agree_on_unknown_fields(problem: str) -> None:
    from mel_opt.examples import problem_example

    doc = json.loads(problem_example(problem).resource.read_text())
    top = {**doc, "colour": "red"}
    assert schema_errors(top, problem) and _refused(top)
    lists = [k for k, v in doc.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    for key in lists:
        nested = copy.deepcopy(doc)
        nested[key][0]["colour"] = "red"
        assert schema_errors(nested, problem) and _refused(nested), key
    meta = {**doc, "meta": {"anything": [1, {"x": None}]}}
    assert schema_errors(meta, problem) == [] and not _refused(meta)


def _refused(doc: dict) -> bool:
    try:
        parse_instance(doc)
    except InstanceError:
        return True
    return False


# -- valid files -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_instance_validates(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert schema_errors(doc, doc["problem"]) == []
    parse_instance(doc, str(path))


def _generated() -> Iterator[Any]:
    for problem, spec in all_problems().items():
        for preset in spec.presets:
            for learners, seed in ((None, 0), (3, 1), (12, 7)):
                yield pytest.param(problem, preset, learners, seed,
                                   id=f"{problem}-{preset}-K{learners}-s{seed}")


@pytest.mark.parametrize(("problem", "preset", "learners", "seed"), list(_generated()))
def test_generated_instance_validates(problem: str, preset: str, learners: int | None,
                                      seed: int) -> None:
    gen = get_problem(problem).generate
    assert gen is not None
    tasks = 2 if problem == "med" and learners is not None else None
    try:
        doc = json.loads(json.dumps(gen(preset, learners=learners, tasks=tasks, seed=seed,
                                        params={})))
    except UsageError as exc:  # a preset of fixed size (its default size is tested)
        assert learners is not None, exc
        pytest.skip(str(exc))
    parse_instance(doc, "generated.json")
    assert schema_errors(doc, problem) == []


@pytest.mark.parametrize("problem", PROBLEMS)
def test_dollar_schema_field_is_accepted(problem: str, tmp_path: Path) -> None:
    doc = {"$schema": schema_id(problem), **shipped(problem)[0]}
    assert schema_errors(doc, problem) == []
    f = tmp_path / "with_schema.json"
    f.write_text(json.dumps(doc))
    res = CliRunner().invoke(cli, ["validate", str(f)])
    assert res.exit_code == 0, res.output
    assert "$schema" not in res.output  # not even a warning


# -- the corpus of bad files, built from the field tables -----------------------------------
IDX = object()  # "[]" in a path pattern


def tokens(pattern: str) -> list[Any]:
    out: list[Any] = []
    for part in pattern.split("."):
        key, *items = part.split("[")
        if key:
            out.append(key)
        out.extend(IDX for _ in items)
    return out


def concrete(keys: list[Any]) -> str:
    """mel_opt's spelling of a JSON path (``learners[0].cpu_hz``)."""
    text = ""
    for k in keys:
        text += f"[{k}]" if isinstance(k, int) else (f".{k}" if text else k)
    return text


def locations(node: Any, toks: list[Any], keys: list[Any] | None = None
              ) -> Iterator[list[Any]]:
    """Key lists of every place ``toks`` can name in ``node`` (the last key may be absent)."""
    keys = keys or []
    head, rest = toks[0], toks[1:]
    if head is IDX:
        if isinstance(node, list):
            for i, x in enumerate(node):
                yield from (locations(x, rest, [*keys, i]) if rest else [[*keys, i]])
    elif isinstance(node, dict):
        if not rest:
            yield [*keys, head]
        elif head in node:
            yield from locations(node[head], rest, [*keys, head])


def present(doc: Any, keys: list[Any]) -> bool:
    node = doc
    for k in keys:
        if isinstance(k, int):
            if not (isinstance(node, list) and k < len(node)):
                return False
        elif not (isinstance(node, dict) and k in node):
            return False
        node = node[k]
    return True


def changed(doc: dict[str, Any], keys: list[Any], value: Any = None,
            delete: bool = False) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for k in keys[:-1]:
        node = node[k]
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out


def find_base(problem: str, pattern: str, f: Field) -> tuple[dict[str, Any], list[Any]]:
    """A valid document and the first place where field ``pattern`` is (or may be) given
    and applies (its ``when`` condition holds)."""
    fallback = None
    for doc in bases(problem):
        if f.when is not None and doc.get(f.when.key) != f.when.value:
            continue
        for keys in locations(doc, tokens(pattern)):
            if present(doc, keys):
                return doc, keys
            fallback = fallback or (doc, keys)
    assert fallback is not None and not f.required, (
        f"no {problem} instance gives {pattern}: ship or generate one to cover the field")
    return fallback


@dataclass(frozen=True)
class Bad:
    problem: str
    label: str
    doc: Any
    path: str  # where mel_opt must report an issue

    @property
    def text(self) -> str:
        return json.dumps(self.doc)


def lower(f: Field) -> tuple[float, bool] | None:
    """The tightest lower bound of the validator's checks (value, exclusive)."""
    cands = [] if f.sign is None else [(0.0, f.sign == "positive")]
    if f.minimum is not None:
        cands.append((f.minimum, f.exclusive_minimum))
    return max(cands) if cands else None


def numeric_cases(f: Field) -> Iterator[tuple[str, Any]]:
    integer = f.kind == "integer"
    lo = lower(f)
    if lo is not None:
        value, excl = lo
        yield ("exclusive lower bound hit", value) if excl else (
            "below minimum", value - 1 if integer else math.nextafter(value, -math.inf))
    if f.maximum is not None:
        hi = f.maximum
        yield ("exclusive upper bound hit", hi) if f.exclusive_maximum else (
            "above maximum", hi + 1 if integer else math.nextafter(hi, math.inf))
    if integer:
        yield "not whole", (lo[0] if lo else 0) + 0.5
    yield "huge integer", HUGE
    yield "huge negative integer", -HUGE
    yield "boolean for a number", True
    yield "string for a number", "1"


WRONG_TYPE = {"string": 5, "bool": "true", "list": "a", "object": [1]}


def field_cases(f: Field, doc: Any, keys: list[Any]) -> Iterator[tuple[str, Any, str]]:
    """(label, bad document, issue path) for one field at one place of a valid document."""
    p = concrete(keys)
    if f.required and isinstance(keys[-1], str):
        yield "missing", changed(doc, keys, delete=True), p
    if f.numeric:
        for label, value in numeric_cases(f):
            yield label, changed(doc, keys, value), p
        return
    yield "wrong type", changed(doc, keys, WRONG_TYPE[f.kind]), p
    if f.kind == "string":
        yield "empty string", changed(doc, keys, ""), p
        if f.choices:
            yield "not in choices", changed(doc, keys, "no-such-choice"), p
    if f.kind == "list":
        if f.nonempty:
            yield "empty list", changed(doc, keys, []), p
        if not present(doc, keys):
            return
        node = doc_at(doc, keys)
        if f.fields or f.forms:
            yield "item not an object", changed(doc, [*keys, 0], 5), f"{p}[0]"
            if f.names:
                yield "name not a string", changed(doc, [*keys, 0, "name"], 5), f"{p}[0].name"
                yield "empty name", changed(doc, [*keys, 0, "name"], ""), f"{p}[0].name"
        elif f.names:
            yield "duplicate name", changed(doc, keys, [*node, node[0]]), f"{p}[{len(node)}]"


def form_mixes(problem: str, pattern: str, f: Field) -> Iterator[tuple[str, Any, str]]:
    """An item of each form (from the first base document that has one) given a valid member
    of another form as well."""
    for k, form in enumerate(f.forms):
        found = [(doc, keys) for doc in bases(problem)
                 for keys in locations(doc, tokens(pattern + "[]"))
                 if isinstance(item := doc_at(doc, keys), dict)
                 and any(m in item for m in form.marks)]
        assert found, f"no shipped item of the {form.name} form of {pattern}: add one"
        doc, keys = found[0]
        other = f.forms[(k + 1) % len(f.forms)].fields[0]
        assert other.maximum is not None
        yield (f"{form.name} form mixed with {other.key}",
               changed(doc, [*keys, other.key], other.maximum), concrete(keys))


def doc_at(doc: Any, keys: list[Any]) -> Any:
    node = doc
    for k in keys:
        node = node[k]
    return node


def corpus() -> Iterator[Bad]:
    for problem in PROBLEMS:
        base = shipped(problem)[0]
        root = [("problem missing", changed(base, ["problem"], delete=True), "problem"),
                ("problem wrong", changed(base, ["problem"], "no-such-problem"), "problem"),
                ("schema_version missing", changed(base, ["schema_version"], delete=True),
                 "schema_version"),
                ("schema_version 2", changed(base, ["schema_version"], 2), "schema_version"),
                ("schema_version string", changed(base, ["schema_version"], "1"),
                 "schema_version"),
                ("root not an object", [base], "$")]
        for label, doc, path in root:
            yield Bad(problem, label, doc, path)
        for pattern, f in walk(problem_fields(problem)):
            doc, keys = find_base(problem, pattern, f)
            cases = list(field_cases(f, doc, keys))
            if f.forms:
                cases += form_mixes(problem, pattern, f)
            for label, bad, path in cases:
                yield Bad(problem, f"{pattern}: {label}", bad, path)


CORPUS = list(corpus())


def test_corpus_covers_every_field_and_kind_of_rule() -> None:
    labels = Counter(c.label.rsplit(": ", 1)[-1] for c in CORPUS)
    for kind in ("missing", "wrong type", "below minimum", "above maximum", "not in choices",
                 "empty list", "empty string", "huge integer", "not whole", "item not an object",
                 "duplicate name", "name not a string"):
        assert labels[kind] > 0, kind
    assert any("form mixed" in c.label for c in CORPUS)
    for problem in PROBLEMS:
        for pattern, _ in walk(problem_fields(problem)):
            assert any(c.problem == problem and c.label.startswith(f"{pattern}: ")
                       for c in CORPUS), pattern


@pytest.mark.parametrize("bad", CORPUS, ids=lambda c: f"{c.problem}-{c.label}")
def test_bad_file_is_rejected_by_schema_and_by_mel_opt(bad: Bad) -> None:
    issues = mel_issues(bad.text)
    assert issues is not None, "mel_opt accepted it"
    assert bad.path in {p for p, _ in issues}, issues
    # the schema sees the same text through a strict JSON parser
    doc = json.loads(bad.text)
    assert schema_errors(doc, bad.problem), "the schema accepted it"


def _field_values(f: Field) -> list[Any]:
    vals: list[Any] = [0, -0.0, 1, 0.5, -1, 2, 3.0, 7, 1e-300, 1e300, HUGE, -HUGE, None, "",
                       "x", "z", True, False, [], {}]
    for bound in (f.minimum, f.maximum):
        if bound is not None:
            vals += [bound, math.nextafter(bound, -math.inf), math.nextafter(bound, math.inf),
                     bound - 1, bound + 1]
    vals += list(f.choices)
    return vals


#: Bounds no table uses today (exclusive ones, a sign tighter than the range, no range).
SYNTHETIC = (
    Field("a", "number", minimum=1.0, maximum=5.0, exclusive_minimum=True,
          exclusive_maximum=True),
    Field("b", "number", sign="positive", minimum=-5.0, maximum=0.5),
    Field("c", "integer", sign="non-negative", minimum=-3, maximum=7, exclusive_maximum=True),
    Field("d", "number", sign="positive", minimum=0.0, exclusive_minimum=True),
    Field("e", "integer", minimum=2, exclusive_minimum=True, maximum=10**12),
    Field("f", "bool"),
    Field("g", "string", choices=("x", "y")),
)


@pytest.mark.parametrize("table", [*PROBLEMS, "synthetic"])
def test_field_schemas_agree_with_check_value_at_the_bounds(table: str) -> None:
    """Value by value: the schema of a scalar field accepts what the validator accepts."""
    checked = 0
    fields = SYNTHETIC if table == "synthetic" else problem_fields(table)
    for pattern, f in walk(fields):
        if f.kind in ("list", "object"):
            continue
        schema = Draft202012Validator(field_schema(f))
        for value in _field_values(f):
            v = Validator()
            v.check_value(value, pattern, f)
            assert schema.is_valid(value) == v.ok, (pattern, value, v.issues)
            checked += 1
    assert checked > 0


# -- cross-field rules: mel_opt only ---------------------------------------------------------
Mutate = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutate:
    def go(doc: dict[str, Any]) -> None:
        node: Any = doc
        keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value(doc) if callable(value) else value
    return go


def _dup_name(list_key: str) -> Mutate:
    return _set(f"{list_key}[1].name", lambda d: d[list_key][0]["name"])


def _append(path: str) -> Mutate:
    def go(doc: dict[str, Any]) -> None:
        node: Any = doc
        for k in [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]:
            node = node[k]
        node.append(copy.deepcopy(node[-1]))
    return go


def _del(key: str) -> Mutate:
    return lambda doc: doc.pop(key)


@dataclass(frozen=True)
class CrossCase:
    problem: str
    base: str  # a shipped file
    mutations: tuple[Mutate, ...]
    pattern: str  # the rule's path pattern
    words: str  # in mel_opt's message


CROSS = [
    CrossCase("mel-async", "k5_T15", (_del("model"),), "model", "physical form"),
    CrossCase("mel-async", "k5_T15", (_set("model.sample_bits", 0),), "model.sample_bits",
              "task-parallel"),
    CrossCase("mel-async", "k5_T15", (_set("min_samples", 15001),), "min_samples",
              "exceeds max_samples"),
    CrossCase("mel-async", "k5_T15", (_set("max_samples", 11999),), "max_samples",
              "cannot be placed"),
    CrossCase("mel-async", "k5_T15", (_set("min_samples", 12001),), "min_samples",
              "K * d_l"),
    CrossCase("mel-async", "k5_T15", (_set("cycle_time_s", 1e-6),), "learners[]",
              "cannot finish one update"),
    CrossCase("mel-async", "k5_T15", (_set("cycle_time_s", 1e9),), "learners[]",
              "updates on min_samples"),
    CrossCase("mel-async", "k5_T15", (_dup_name("learners"),), "learners[].name", "duplicate"),
    CrossCase("dab", "mnist_ffn_testbed", (_set("min_shards", 5), _set("max_shards", 4)),
              "min_shards", "exceeds max_shards"),
    CrossCase("dab", "mnist_ffn_testbed",
              (_set("min_shards", lambda d: d["total_shards"] + 1),), "min_shards",
              "exceeds total_shards"),
    CrossCase("dab", "mnist_ffn_testbed", (_dup_name("learners"),), "learners[].name",
              "duplicate"),
    CrossCase("med", "mays2023_n4_m2", (_dup_name("tasks"),), "tasks[].name", "duplicate"),
    CrossCase("med", "mays2023_n4_m2", (_dup_name("learners"),), "learners[].name", "duplicate"),
    CrossCase("med", "mays2023_n4_m2", (_append("learners[0].state_probs"),),
              "learners[].state_probs", "entries"),
    CrossCase("med", "mays2023_n4_m2",
              (_set("learners[0].state_probs", lambda d: [
                  p / 2 for p in d["learners"][0]["state_probs"]]),),
              "learners[].state_probs", "sum to 1"),
    CrossCase("med", "mays2023_n4_m2", (_append("learners[0].bandwidth_Bps"),),
              "learners[].bandwidth_Bps", "entries"),
    CrossCase("med", "mays2023_n4_m2", (_append("learners[0].train_rate"),),
              "learners[].train_rate", "one row per task"),
    CrossCase("med", "mays2023_n4_m2", (_append("learners[0].train_rate[0]"),),
              "learners[].train_rate[]", "entries"),
    CrossCase("med", "mays2023_n4_m2", (_set("learners", lambda d: d["learners"][:1]),),
              "learners", "n >= m"),
    CrossCase("med", "mays2023_n4_m2", (_set("min_shards_per_learner", lambda d: sum(
        t["shards"] for t in d["tasks"])),), "min_shards_per_learner", "exceeds the"),
    CrossCase("feel", "ren2021_cpu_densenet121_k6", (_dup_name("devices"),), "devices[].name",
              "duplicate"),
    CrossCase("feel", "ren2021_cpu_densenet121_k6", (_set("global_batch", 5),), "global_batch",
              "must lie in"),
    CrossCase("adaptive-tau", "two_resources", (_dup_name("resources"),), "resources[].name",
              "duplicate"),
    CrossCase("adaptive-tau", "two_resources",
              (_set("resources[0].budget", lambda d: d["resources"][0]["local_cost"]
                    + d["resources"][0]["global_cost"]),), "resources[].budget",
              "use_min_loss"),
    CrossCase("adaptive-tau", "two_resources", (_set("resources[0].used", 16.0),),
              "resources[].used", "exceeds the budget"),
    CrossCase("adaptive-tau", "two_resources", (_set("tau_current", 200_000),), "tau_current",
              "search range"),
]


def test_every_cross_field_rule_has_a_case() -> None:
    """Each rule mel_opt alone checks (as listed in the schema) is exercised below."""
    for problem in PROBLEMS:
        rules = Counter(path for path, _ in cross_field_rules(problem))
        cases = Counter(c.pattern for c in CROSS if c.problem == problem)
        for path, n in rules.items():
            assert cases[path] >= n, (problem, path)
        assert set(cases) <= set(rules), (problem, set(cases) - set(rules))


@pytest.mark.parametrize("case", CROSS, ids=lambda c: f"{c.problem}-{c.pattern}-{c.words}")
def test_cross_field_rule_is_checked_by_mel_opt_only(case: CrossCase) -> None:
    doc = json.loads((ROOT / case.problem / f"{case.base}.json").read_text())
    for mutate in case.mutations:
        mutate(doc)
    assert schema_errors(doc, case.problem) == [], "expressible: belongs in the schema"
    issues = mel_issues(json.dumps(doc))
    assert issues is not None, "mel_opt accepted it"
    hits = [m for p, m in issues if re.sub(r"\[\d+\]", "[]", p) == case.pattern]
    assert any(case.words in m for m in hits), issues


# -- results ---------------------------------------------------------------------------------
# every problem's declared example (ProblemSpec.example), relative to instances/
RESULT_FILES = {p: problem_example(p).relpath for p in all_problems()}


def test_result_schema_covers_every_problem() -> None:
    assert set(SOLUTIONS) == set(PROBLEMS) == set(RESULT_FILES)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_solve_json_validates_against_result_schema(problem: str) -> None:
    res = CliRunner().invoke(cli, ["solve", str(ROOT / RESULT_FILES[problem]), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert list(result_validator().iter_errors(doc)) == []
    assert set(SOLUTIONS[problem]) <= set(doc["solution"])


@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_method_result_validates(problem: str) -> None:
    inst = load_instance(ROOT / RESULT_FILES[problem])
    for method in get_problem(problem).methods:
        doc = json.loads(solve(inst, method, time_limit=60).to_json())
        assert doc["method"] == method
        assert list(result_validator().iter_errors(doc)) == [], method


def test_result_schema_rejects_broken_results() -> None:
    res = CliRunner().invoke(cli, ["solve", str(ROOT / RESULT_FILES["mel-async"]), "--json"])
    good = json.loads(res.output)
    v = result_validator()
    assert v.is_valid({**good, "timings": {"solve": 0.1}})  # new top-level keys are allowed
    assert v.is_valid({**good, "status": "infeasible", "objective": None, "solution": {},
                       "metrics": {}, "verification": None})
    for bad in ({**good, "status": "solved"}, {**good, "method": "dab"},
                {**good, "solution": {"d": good["solution"]["d"]}},
                {**good, "objective": "1"}, {**good, "solver": {"name": "x"}},
                {**good, "verification": {"feasible": True}},
                {k: v for k, v in good.items() if k != "message"}):
        assert not v.is_valid(bad), bad


def test_batch_record_validates(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text((ROOT / RESULT_FILES["adaptive-tau"]).read_text())
    res = CliRunner().invoke(cli, ["batch", str(src), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")
               if "source" in json.loads(p.read_text())]
    assert records
    for record in records:
        assert list(result_validator().iter_errors(record)) == []


# -- the command -----------------------------------------------------------------------------
def test_schema_command(tmp_path: Path) -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["schema"])
    assert listing.exit_code == 0
    for problem in PROBLEMS:
        assert schema_id(problem) in listing.output
    shown = runner.invoke(cli, ["schema", "dab"])
    assert shown.exit_code == 0 and json.loads(shown.output) == instance_schema("dab")
    assert shown.output == json.dumps(instance_schema("dab"), indent=2) + "\n"
    result = runner.invoke(cli, ["schema", "--result"])
    assert json.loads(result.output) == result_schema()
    out = tmp_path / "feel.json"
    wrote = runner.invoke(cli, ["schema", "feel", "-o", str(out)])
    assert wrote.exit_code == 0 and json.loads(out.read_text()) == instance_schema("feel")
    for args in (["schema", "nope"], ["schema", "dab", "--result"], ["schema", "-o", "x"]):
        bad = runner.invoke(cli, args)
        assert bad.exit_code == 2 and "error:" in bad.output, args


def test_io_builds_a_schema_from_what_it_is_given_without_the_registry() -> None:
    """mel_opt.io.schema takes a table and rules (no problem registry): a made-up problem."""
    from mel_opt.api import SCHEMA_VERSION
    from mel_opt.io.schema import instance_schema_of, result_schema_of, table_rules

    pair = Field("pair", "list", length_of="names", item=Field("", "number"), doc="two numbers")
    fields = (*SYNTHETIC, Field("names", "list", names="name", item=Field("", "string")), pair)
    rules = table_rules(fields)
    assert rules == [("pair", "has one entry per entry of names")]
    schema = instance_schema_of("toy", "a toy problem", fields, [*rules, ("a", "a < c")],
                                "tests.toy")
    Draft202012Validator.check_schema(schema)
    assert SCHEMA_VERSION == 1 and schema["properties"]["schema_version"]["const"] == 1
    assert schema["properties"]["problem"] == {
        "const": "toy", "description": "the problem this file is an instance of"}
    assert schema["$id"] == schema_id("toy") and "tests.toy" in schema["$comment"]
    assert schema["properties"]["a"]["description"].endswith("mel_opt checks: a < c")
    assert "pair: has one entry per entry of names; a: a < c." in schema["description"]
    doc = {"problem": "toy", "schema_version": 1, "a": 2.0, "b": 0.1, "c": 0, "d": 1.0,
           "e": 3, "f": True, "g": "x", "names": ["u", "v"], "pair": [1.0, 2.0]}
    assert Draft202012Validator(schema).is_valid(doc)
    assert not Draft202012Validator(schema).is_valid({**doc, "a": 5.0})
    result = result_schema_of({"toy": ["m1", "m2"]})
    assert result["properties"]["problem"] == {"enum": ["toy"]}
    assert result["allOf"][0]["then"]["properties"]["method"] == {"enum": ["m1", "m2"]}
