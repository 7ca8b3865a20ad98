"""The Flower client app of a live run (``client_app``; its server is
:mod:`mel_opt.live.server`).

A deployment names it in its app's ``pyproject.toml`` (``mel_opt.live.client:client_app``);
the simulation runtime gets it from :func:`make_client_app`. Kept apart from the server side
so that the learner process a SuperNode starts for every message imports only what a learner
needs.

It answers two messages: a QUERY (the probe: subset benchmarking of this node on its own data,
and its partition id, which maps the opaque node id to a learner of the instance) and a TRAIN
(one cycle of the allocation: train, measure, reply with the model and the measured metrics).
Only arrays and numbers cross the wire (ArrayRecord, ConfigRecord, MetricRecord: protobuf, no
pickle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from mel_opt.live import learner as L
from mel_opt.live.estimates import ALPHA
from mel_opt.problems import get_problem
from mel_opt.training.mlp import init_params, layers_for

__all__ = ["client_app", "make_client_app"]

#: Node-state key of the learner's last local model (gradient statistics compare with it).
LOCAL_MODEL = "melopt-local-model"


# -- client ------------------------------------------------------------------------------------
def _config(msg: Message) -> dict[str, Any]:
    record = msg.content.get("config")
    return dict(record) if record is not None else {}


def _partition(context: Context) -> int:
    return int(context.node_config.get("partition-id", 0))


def _state_seconds(context: Context) -> float:
    record = context.state.get("melopt")
    if record is None:
        return math.nan
    value = dict(record).get("seconds_per_sample", math.nan)
    return float(value) if isinstance(value, (int, float)) else math.nan


def _remember(context: Context, seconds: float) -> None:
    """The learner's own running estimate of its seconds per sample-pass (node state)."""
    before = _state_seconds(context)
    value = seconds if not math.isfinite(before) else (1 - ALPHA) * before + ALPHA * seconds
    context.state["melopt"] = ConfigRecord({"seconds_per_sample": value})


def _initial_model(config: Mapping[str, Any], local: L.LocalData) -> list[np.ndarray]:
    layers = layers_for(str(config.get("model", "twonn")), local.data.features,
                        local.data.classes)
    return init_params(layers, int(config.get("seed", 0)), np.float32)


def make_client_app() -> ClientApp:
    """The client app (see the module docstring)."""
    app = ClientApp()

    @app.query()
    def probe(msg: Message, context: Context) -> Message:
        config = _config(msg)
        pid = _partition(context)
        local = L.local_data(config, pid)
        done = L.probe(_initial_model(config, local), local, int(config.get("batch", 32)),
                       int(config.get("seed", 0)) * 7919 + pid)
        _remember(context, done.compute_s / done.work)
        metrics: dict[str, Any] = {"partition_id": pid, "samples_held": int(local.rows.size)}
        cycle = get_problem(str(config["problem"])).learning
        if cycle is None or not cycle.decentralised:  # a decentralised learner keeps its speed
            metrics.update(compute_s=done.compute_s, work=done.work)
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        config = _config(msg)
        pid = _partition(context)
        local = L.local_data(config, pid)
        arrays = msg.content["arrays"]
        assert isinstance(arrays, ArrayRecord)
        model = [np.asarray(a, dtype=np.float32) for a in arrays.to_numpy_ndarrays()]
        extra: dict[str, Any] = {}
        cycle = get_problem(str(config["problem"])).learning
        decentralised = cycle is not None and cycle.decentralised
        if cycle is not None and decentralised:
            plan = cycle.learner_decides(config, _state_seconds(context), pid)
            samples, passes, batch = plan.samples, plan.passes, int(config["batch"])
            extra = {"weight": plan.weight, "predicted_s": plan.predicted_s,
                     "comm_s": plan.comm_s, "samples": plan.samples, "passes": plan.passes,
                     **{k: float(v) for k, v in plan.columns.items()}}
        else:
            samples, passes = int(config["samples"]), int(config["passes"])
            batch = int(config["batch"])
        stats = None
        if int(config.get("statistics", 0)):  # adaptive-tau: at the global model, first
            previous = context.state.get(LOCAL_MODEL)
            stats = L.gradient_statistics(
                model, previous.to_numpy_ndarrays() if isinstance(previous, ArrayRecord)
                else None, local)
        seed = int(config.get("seed", 0)) * 1_000_003 + int(config.get("round", 0)) * 7919 + pid
        done = L.train_cycle(model, local, samples, passes, batch, float(config["lr"]), seed)
        if done.work > 0:
            _remember(context, done.compute_s / done.work)
        metrics = {"partition_id": pid, "compute_s": done.compute_s,
                   "samples": done.samples, "passes": done.passes, **extra}
        if not decentralised:  # the server's estimate of this learner follows it
            metrics["work"] = done.work
        records = {"arrays": ArrayRecord(done.model)}
        if stats is not None:
            context.state[LOCAL_MODEL] = ArrayRecord(done.model)  # w_i for the next round
            metrics.update(local_loss=stats.loss, statistics_s=stats.seconds)
            metrics.update({k: v for k, v in (("rho", stats.rho), ("beta", stats.beta))
                            if v is not None})
            records["gradient"] = ArrayRecord(stats.gradient)
        content = RecordDict({**records, "metrics": MetricRecord(metrics)})
        return Message(content, reply_to=msg)

    return app


client_app = make_client_app()
