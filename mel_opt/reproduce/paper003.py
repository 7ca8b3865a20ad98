"""Catalogue entry of paper 003 (Tuor et al., the adaptive-tau demonstration).

Fig. 3 shows, live, tau*, the loss and the accuracy of distributed training on 5 nodes under
the adaptive control of Wang et al., for four ways of distributing the data and with added
communication delay. The paper states the mechanism in words: "the larger the gradient
deviation, the more frequently the system should perform aggregation", and the aggregator
"stops the learning process" when the resource budget is spent. The entry runs that loop:
mel_opt's adaptive-tau learning cycle (the learners report loss and gradient statistics, the
server estimates rho, beta, delta, c and b and sets the next tau by the control rule) with the
learners in this process (:func:`mel_opt.live.inprocess.run_in_process`) on a virtual clock.

Set-up (ours where the paper is silent): 5 nodes; the data cases of Section II (Case 1 IID;
Case 2 two digits per node; Case 3 the whole training set on every node; Case 4 digits 0-4
spread IID over the first three nodes, digits 5-9 split by label between the other two), and
Case 2 again with 1 s of added delay per aggregation (case 2, where tau* is well below its
cap, so that a larger tau* can show); the authors' configuration defaults for
SVM: phi = 0.025, eta = 0.01 (also the training's learning rate), tau_max = 100, a 15 s time
budget, and their simulated times, a local update 0.013015 s (sd 0.006946) and an aggregation
0.131604 s (sd 0.053873), drawn per node and round (seeded, truncated at 10 % of the mean).

The demonstration trains an SVM on MNIST to tell even digits from odd ones. The entry trains
that task with two models, side by side: the demonstration's own, mel_opt's ``svm`` (a linear
classifier with the hinge loss, :class:`mel_opt.mlp.Hinge`; the paper names no regulariser,
so none), and the closest model mel_opt had before it, ``softmax`` with two classes (logistic
regression). The claims are judged on the SVM's rows (the paper's model); the logistic rows are
the comparison, each claim saying whether it holds for them too. The data are the catalogue's
training set (:meth:`~mel_opt.reproduce.catalogue.Context.training_data`): the data cases place
the classes, the models predict the parity of the class index (even or odd digit on MNIST and
the digits; on Fashion-MNIST an arbitrary but fixed two-class split of its ten classes).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt.reproduce.catalogue import (
    Claim,
    Computed,
    Context,
    Entry,
    Row,
    fmt_num,
    register,
)
from mel_opt.reproduce.figures import Line, Panel, draw

NODES = 5
CASES = ("case 1", "case 2", "case 3", "case 4", "case 2 + delay")
#: The models, the paper's first (the claims are judged on its rows), then the comparison.
MODELS = ("svm", "softmax")
PAPER_MODEL = MODELS[0]
#: How the claims and the figure name each model.
MODEL_NAMES = {"svm": "SVM", "softmax": "logistic"}
ADDED_DELAY_S = 1.0
LOCAL_S, LOCAL_SD = 0.013015156, 0.006946299  # the authors' simulated times (config defaults)
AGGREGATION_S, AGGREGATION_SD = 0.131604348, 0.053873234
INSTANCE: dict[str, Any] = {
    "problem": "adaptive-tau", "schema_version": 1, "name": "tuor2018-demo",
    "description": "Paper 003's demonstration with the authors' SVM defaults: phi 0.025, eta "
                   "0.01, tau_max 100, 15 s budget, their mean simulated times; beta, delta, "
                   "rho and tau_current are starting values only (the run measures them).",
    "beta": 1.0, "delta": 0.1, "rho": 1.0, "step_size": 0.01, "phi": 0.025,
    "tau_current": 10, "tau_max": 100,
    "resources": [{"name": "time", "budget": 15.0, "local_cost": LOCAL_S,
                   "global_cost": AGGREGATION_S}]}


def case_pools(case: str, labels: np.ndarray, classes: int, seed: int) -> list[np.ndarray]:
    """Training rows of each of the 5 nodes in a data case of Section II (``labels``: the
    data set's classes, the digits on MNIST; case 4 splits them at classes // 2)."""
    from mel_opt.training.partition import Partition, make_pools, proportional_sizes

    rng = np.random.default_rng([seed, 3])
    n = labels.size
    sizes = proportional_sizes(np.ones(NODES), n)
    if case == "case 1":
        return make_pools(labels, sizes, Partition("iid"), classes, rng)
    if case.startswith("case 2"):
        return make_pools(labels, sizes, Partition("non-iid"), classes, rng)
    if case == "case 3":
        return [np.arange(n) for _ in range(NODES)]
    half = classes // 2  # case 4: digits 0-4 and 5-9 on MNIST
    low = np.flatnonzero(labels < half)
    high = np.flatnonzero(labels >= half)
    spread = rng.permutation(low)
    by_label = high[np.argsort(labels[high], kind="stable")]
    return [np.sort(p) for p in np.array_split(spread, 3)] + \
        [np.sort(p) for p in np.array_split(by_label, 2)]


def _times(seed: int) -> Any:
    from mel_opt.live.inprocess import Clock

    def draw(mean: float, sd: float, *key: int) -> float:
        z = float(np.random.default_rng([seed, *key]).standard_normal())
        return max(0.1 * mean, mean + sd * z)

    return lambda delay: Clock(
        compute_s=lambda r, k, work: draw(LOCAL_S, LOCAL_SD, r, k) * max(work, 1.0) / 32.0,
        overhead_s=lambda r: draw(AGGREGATION_S, AGGREGATION_SD, r, 99) + delay,
        probe_s_per_sample=LOCAL_S / 32.0)


def even_odd(data: Any) -> Any:
    """The demonstration's task on ``data``: is the class index even (class 0) or odd (class
    1)? The digit's parity on MNIST and the digits; an arbitrary but fixed two-class split of
    the classes elsewhere (Fashion-MNIST: T-shirt, pullover, coat, shirt, bag against the
    rest)."""
    from mel_opt.training.data import Dataset

    return Dataset(f"{data.name} even/odd", data.x_train, data.y_train % 2, data.x_test,
                   data.y_test % 2, 2)


def run_case(case: str, data: Any, seed: int, rounds: int,
             model: str = PAPER_MODEL) -> list[Row]:
    """One run of the control loop training ``model`` on the even/odd task of ``data`` (the
    data cases place the classes, the model tells even from odd); a row per round."""
    from mel_opt.live.inprocess import run_in_process
    from mel_opt.live.rounds import LiveRun, LiveSettings

    settings = LiveSettings(instance=INSTANCE, method="scan", rounds=rounds, seed=seed,
                            model=model, lr=0.01, batch_size=32, learners=NODES)
    run = LiveRun(settings, even_odd(data))
    pools = case_pools(case, data.y_train, data.classes, seed)
    clock = _times(seed)(ADDED_DELAY_S if case.endswith("delay") else 0.0)
    run_in_process(run, pools, clock)
    rows: list[Row] = []
    first = run.rounds[0]
    for r in run.rounds[1:]:
        c = r.get("control", {})
        rows.append({"model": model, "dataset": data.name, "case": case, "seed": seed,
                     "round": r["round"],
                     "tau": c.get("tau"), "last": r.get("last", False),
                     "delta": c.get("delta"), "beta": c.get("beta"), "rho": c.get("rho"),
                     "local_update_s": c.get("local_update_s"),
                     "aggregation_s": c.get("aggregation_s"), "used_s": c.get("used"),
                     "accuracy": r["accuracy"], "loss": r["loss"],
                     "initial_accuracy": first["accuracy"]})
    return rows


def compute(ctx: Context) -> Computed:
    from mel_opt.training.data import load_dataset

    name = ctx.training_data()
    data = load_dataset(name).astype(np.dtype("float32"))
    seeds = ctx.trials(full=3, quick=1)
    # the budget ends a full run first: a round costs 0.145 s on average at tau* = 1 (one
    # local update and an aggregation), so the 15 s last about 100 rounds at most
    rounds = 6 if ctx.quick else 200
    rows: list[Row] = []
    for model in MODELS:
        for case in CASES:
            for s in range(ctx.seed, ctx.seed + seeds):
                rows += run_case(case, data, s, rounds, model)
    split = ("even against odd digits (as the demonstration)" if name in ("digits", "mnist")
             else "even against odd class index (an arbitrary but fixed two-class split; "
                  "the demonstration: even against odd MNIST digits)")
    return rows, [f"{seeds} seed(s) per case and model; 5 nodes; data: {name}, {split}; the "
                  "data cases place the classes",
                  "two models: the demonstration's SVM (model svm: linear, hinge loss, no "
                  "regulariser, as the paper names none), whose rows the claims judge, and "
                  "logistic regression (two-class softmax) beside it as the comparison; the "
                  "loss column is each model's own (hinge, cross-entropy)",
                  "lr = eta = 0.01, batch 32; the authors' SVM defaults (phi 0.025, tau_max "
                  "100, 15 s budget) and simulated times (local update 0.013 s, aggregation "
                  "0.132 s, drawn per round) for both models",
                  f"'case 2 + delay': {ADDED_DELAY_S:g} s added to every aggregation",
                  "tau* statistics over the rounds after the first (which runs on the starting "
                  "estimates) and before the last (which the end-of-budget rule shortens)"]


def _steady(rows: Sequence[Row], case: str, key: str) -> list[float]:
    return [float(r[key]) for r in rows if r["case"] == case and r["round"] >= 2
            and not r.get("last") and r.get(key) is not None]


def _median(rows: Sequence[Row], case: str, key: str) -> float | None:
    vals = _steady(rows, case, key)
    return statistics.median(vals) if vals else None


def judge_model(rows: Sequence[Row]) -> list[Claim]:
    """The claims on the rows of one model."""
    tau = {c: _median(rows, c, "tau") for c in CASES}
    delta = {c: _median(rows, c, "delta") for c in CASES}
    tau_max = int(INSTANCE["tau_max"])

    def lt(a: float | None, b: float | None) -> bool:
        return a is not None and b is not None and a < b

    final = {c: [r for r in rows if r["case"] == c and r["round"] == max(
        rr["round"] for rr in rows if rr["case"] == c and rr["seed"] == r["seed"])]
        for c in CASES}
    gains = {c: statistics.mean(r["accuracy"] - r["initial_accuracy"] for r in final[c])
             for c in CASES if final[c]}
    return [
        Claim("non-IID data (case 2) shows a larger gradient deviation than IID (case 1)",
              "the gradient deviation captures the deviation between local and global "
              "gradients (Sec. I)",
              f"median delta: case 1 {fmt_num(delta['case 1'])}, case 2 "
              f"{fmt_num(delta['case 2'])}",
              lt(delta["case 1"], delta["case 2"]), "median delta of case 2 > case 1's"),
        Claim("a larger gradient deviation gives more frequent aggregation: tau* smaller in "
              "case 2 than in case 1",
              "the larger the gradient deviation, the more frequently the system should "
              "aggregate (Sec. I)",
              f"median tau*: case 1 {fmt_num(tau['case 1'])}, case 2 {fmt_num(tau['case 2'])}",
              lt(tau["case 2"], tau["case 1"]), "median tau* of case 2 < case 1's"),
        Claim("with the whole data set on every node tau* sits at its cap",
              "no gradient deviation with replicated data (Sec. II, case 3)",
              f"median tau* {fmt_num(tau['case 3'])}, median delta "
              f"{fmt_num(delta['case 3'])}",
              tau["case 3"] == tau_max, f"median tau* of case 3 = tau_max = {tau_max}"),
        Claim("added communication delay gives a larger tau*",
              "tau* adapts to the resource consumption (Sec. I-II)",
              f"median tau*: case 2 {fmt_num(tau['case 2'])}, with delay "
              f"{fmt_num(tau['case 2 + delay'])}",
              lt(tau["case 2"], tau["case 2 + delay"]),
              "median tau* of case 2 with delay > without"),
        Claim("the model learns in every case", "loss and accuracy plotted live (Fig. 3)",
              ", ".join(f"{c}: +{fmt_num(g)}" for c, g in gains.items()),
              len(gains) == len(CASES) and all(g > 0.2 for g in gains.values()),
              "every case: final accuracy - initial > 0.2 (mean over seeds)"),
    ]


def judge(rows: Sequence[Row]) -> list[Claim]:
    """Each claim judged on the SVM's rows (the paper's model), with whether it holds on the
    logistic rows too beside it (shown, not judged)."""
    by_model = {m: judge_model([r for r in rows if r.get("model") == m]) for m in MODELS}
    out = []
    for i, claim in enumerate(by_model[PAPER_MODEL]):
        beside = "".join(
            f"; {MODEL_NAMES[m]} (comparison): {by_model[m][i].ours} - "
            f"{'holds' if by_model[m][i].ok else 'does not hold'}"
            for m in MODELS if m != PAPER_MODEL and any(r.get("model") == m for r in rows))
        out.append(Claim(claim.text, claim.paper,
                         f"{MODEL_NAMES[PAPER_MODEL]}: {claim.ours}{beside}", claim.ok,
                         f"{claim.rule}, on the {MODEL_NAMES[PAPER_MODEL]} rows (the "
                         "paper's model)"))
    return out


def plot(rows: Sequence[Row], path: Path) -> None:
    seed = min((r["seed"] for r in rows), default=0)
    panels = []
    for model in MODELS:
        for key, label in (("tau", "tau* per round"), ("delta", "estimated delta"),
                           ("accuracy", "validation accuracy")):
            role = "judged" if model == PAPER_MODEL else "comparison"
            panel = Panel(f"{MODEL_NAMES[model]} ({role}): {label}",
                          f"time used [s] (seed {seed})", label)
            for case in CASES:
                mine = sorted((r["used_s"], r[key]) for r in rows if r["case"] == case
                              and r.get("model") == model and r["seed"] == seed
                              and r.get(key) is not None)
                panel.lines.append(Line(case, [p[0] for p in mine], [p[1] for p in mine],
                                        dashed=model != PAPER_MODEL))
            panels.append(panel)
    data = next((r.get("dataset") for r in rows if r.get("dataset")), None)
    draw(panels, path, "Paper 003 Fig. 3: the adaptive-tau control over data cases, even "
                       f"against odd{f' ({data})' if data else ''}; top: the SVM (judged), "
                       "bottom: logistic regression (comparison, dashed)")


register(Entry(
    id="003-fig3", paper="003 Tuor et al.",
    title="Fig. 3: tau*, loss and accuracy under the adaptive control, data cases 1-4 and "
          "added delay",
    shows=("The adaptive-tau control loop (learners report loss and gradient statistics, the "
           "server estimates rho, beta, delta, c, b and sets tau* by the rule) on 5 in-process "
           "learners, the authors' SVM defaults and simulated times, even against odd class "
           "index with the demonstration's model, a linear SVM (judged), and logistic "
           "regression beside it (comparison); cases 1-4 of Section II and case 2 with 1 s of "
           "added delay per aggregation."),
    columns=("model", "dataset", "case", "seed", "round", "tau", "last", "delta", "beta",
             "rho", "local_update_s", "aggregation_s", "used_s", "accuracy", "loss",
             "initial_accuracy"),
    compute=compute, judge=judge, plot=plot, needs=("train",)))
