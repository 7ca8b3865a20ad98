"""The Flower server app of a live run (``server_app``; its client is
:mod:`mel_opt.live.client`).

A deployment names it in its app's ``pyproject.toml`` (``mel_opt.live.server:server_app``);
the simulation runtime gets it from :func:`make_server_app`.

The server app reads its settings from the run config key ``melopt-settings`` (a JSON
document: :class:`~mel_opt.live.rounds.LiveSettings` with the instance document inside, so a
SuperLink on another machine needs no file of ours) and, with ``melopt-out`` set, writes the
outputs there after every round; it also logs every round as one ``melopt-live`` JSON line,
from which ``melopt live --engine remote`` rebuilds the outputs on the user's machine.

"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from mel_opt.live import learner as L
from mel_opt.live.flower_exchange import FlowerExchange
from mel_opt.live.loop import run_live
from mel_opt.live.report import RECORD_PREFIX
from mel_opt.live.rounds import LiveRun
from mel_opt.live.settings import LiveSettings

__all__ = ["make_server_app", "server_app", "settings_json"]

SETTINGS_KEY = "melopt-settings"
OUT_KEY = "melopt-out"
NODES_KEY = "melopt-nodes"


def settings_json(settings: LiveSettings) -> str:
    """``settings`` as the JSON text the server app reads back."""
    doc = settings.values()
    doc["instance"] = dict(settings.instance)
    return json.dumps(doc)


def settings_from_json(text: str) -> LiveSettings:
    """The settings again (checked against their declarations, as on the user's machine)."""
    return LiveSettings(**json.loads(text))


# -- server ------------------------------------------------------------------------------------
def make_server_app(settings: LiveSettings | None = None,
                    on_round: Callable[[LiveRun], None] | None = None,
                    expected_nodes: int | None = None,
                    log: Callable[[str], None] | None = None,
                    instance: Any = None) -> ServerApp:
    """The server app; without ``settings`` it reads them from the run config. ``instance``:
    the parsed instance of ``settings`` (an app in this process: it is not parsed again)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        from mel_opt.live.flower_patches import for_serverapp
        from mel_opt.live.report import write_outputs
        from mel_opt.live.tuning import NodeTuning

        # the pulls of the replies' arrays (a local federation's tuning)
        for_serverapp(NodeTuning.from_env())

        config = context.run_config
        s = settings if settings is not None else settings_from_json(str(config[SETTINGS_KEY]))
        out = str(config.get(OUT_KEY, "") or "")
        nodes = expected_nodes if expected_nodes is not None else int(config.get(NODES_KEY, 1))
        data = L.dataset(s.dataset, s.max_train, s.max_test)
        run = LiveRun(s, data, instance if settings is not None else None)

        def after_round(r: LiveRun) -> None:
            if settings is None:  # a deployment: the runner rebuilds the outputs from the log
                print(RECORD_PREFIX + json.dumps(_record(r)), flush=True)
            if out:
                write_outputs(r, out)
            if on_round is not None:
                on_round(r)

        run_live(run, FlowerExchange(grid, expected_nodes=nodes), after_round, log or print)
        if out:
            write_outputs(run, out, figure=True)

    return app


def _record(run: LiveRun) -> dict[str, Any]:
    """The newest round of ``run`` as one JSON-able record (rows and the summary)."""
    last = run.log.last.round
    return {"round": last, "rows": run.log.row_dicts(last), "summary": run.summary()}


server_app = make_server_app()
