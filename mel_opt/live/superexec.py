"""A SuperExec that keeps the learner warm: ``python -m mel_opt.live.superexec ARGS``.

Flower 1.42's SuperNode hands every message to a SuperExec, which starts a fresh
``flwr-clientapp`` process for it (its ``SubprocessExecutor``). That process imports Flower,
numpy and mel_opt's learner (about 1.2 s of CPU here) and loads its data set before it does a
moment of the learner's work, and a local node pays this on every message: with four nodes on
two cores it was most of a round's overhead beyond the slowest learner.

This module runs Flower's own SuperExec (``flwr.supercore.cli.flower_superexec``, the same
arguments, the same task loop over the Runtime API) with one difference: its executor is a
:class:`ForkExecutor` (:func:`mel_opt.live.flower_patches.fork_executor`). The process imports
the ClientApp's runtime and mel_opt's learner once at start (and loads the data set of the
tuning's ``warm_data``, if any: :class:`~mel_opt.live.tuning.NodeTuning`); each task then runs
in a child *forked* from that warm process, which calls Flower's own ``run_clientapp`` with the
task's token (exactly what ``flwr-clientapp`` does after parsing its arguments) and exits with
its code. So every message still gets a process of its own, as Flower's isolation wants (a
crash, a leak or a global of one message cannot reach the next), but that process starts in
milliseconds with everything imported.

The learner's state between messages is Flower's node state (as before: nothing is kept in the
warm process). The forked child is a descendant of the SuperNode, so the throttle of a slow
node (:mod:`mel_opt.live.throttle`), the ending of a federation and the killing of a node reach
it as they reached ``flwr-clientapp``. Task types other than the ClientApp's (a SuperNode runs
none) go to Flower's own ``SubprocessExecutor``.

:mod:`mel_opt.live.supernode` starts this module in place of ``flower-superexec`` when the
node's tuning has ``warm`` (the default).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

from mel_opt.live.tuning import WarmData

__all__ = ["ForkExecutor", "main", "warm_up"]


def warm_up(data: WarmData | None = None) -> None:
    """Import what a learner's ClientApp needs, and load ``data`` (a data set that cannot be
    loaded is reported and skipped: the learner then loads it itself)."""
    import flwr.supernode.runtime.run_clientapp  # noqa: F401  (the ClientApp's runtime)

    import mel_opt.live.client  # noqa: F401  (the app, its learner and the model)
    from mel_opt.blas import blas_threads
    from mel_opt.live import learner
    from mel_opt.problems import all_problems

    # what a learner's first message did in every forked child before its training: finding
    # the problems (their modules and the plug-ins' entry points, 0.2 s) and threadpoolctl's
    # first look at the loaded libraries (0.1 s); done here once, the children inherit both
    all_problems()
    with blas_threads(1):
        pass

    if data is None:
        return
    try:
        learner.dataset(data.name, data.max_train, data.max_test)
    except Exception as exc:  # noqa: BLE001 - a cache, never a reason to fail the node
        print(f"mel_opt superexec: data set {data.name!r} not preloaded: {exc}",
              file=sys.stderr)


def _run_task(spec: Any) -> int:
    """What ``flwr-clientapp`` does with its arguments, in this (forked) process."""
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime.run_clientapp import run_clientapp

    run_clientapp(
        runtime_api_address=spec.runtime_api_address,
        token=spec.token,
        insecure=spec.insecure,
        certificates=validate_and_resolve_root_certificates(spec.root_certificates_path,
                                                            spec.insecure),
        parent_pid=spec.parent_pid,
        runtime_dependency_install=spec.runtime_dependency_install,
    )
    return 0


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


class ForkExecutor:
    """Flower's executor protocol (``flwr.supercore.superexec.executor.types.Executor``):
    ClientApp tasks run in a child forked from this warm process; other task types go to
    ``fallback`` (Flower's ``SubprocessExecutor``)."""

    #: exit codes kept of the children that ended last (for logs and tests)
    KEEP_ENDED = 64

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.children: set[int] = set()
        self.ended: dict[int, int] = {}  # pid -> exit code (or -signal)

    def get_eligible_capacity(self, supported_task_types: set[Any], *, insecure: bool = False,
                              root_certificates_path: str | None = None
                              ) -> tuple[set[Any], set[str]]:
        return self.fallback.get_eligible_capacity(
            supported_task_types, insecure=insecure,
            root_certificates_path=root_certificates_path)

    def wait_for_capacity(self, task_type: Any = None, *, fab_hash: str | None = None,
                          insecure: bool = False,
                          root_certificates_path: str | None = None) -> None:
        self.fallback.wait_for_capacity(task_type, fab_hash=fab_hash, insecure=insecure,
                                        root_certificates_path=root_certificates_path)

    def launch(self, spec: Any) -> Any:
        from flwr.supercore.constant import TaskType
        from flwr.supercore.superexec.executor.types import LaunchResult

        if spec.task_type != TaskType.CLIENT_APP:
            return self.fallback.launch(spec)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            return LaunchResult.failed(f"fork failed: {exc}")
        if pid == 0:  # the task's own process
            code = 1
            try:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)  # Flower's runtime sets its own
                if spec.suppress_output:
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 1)
                    os.dup2(devnull, 2)
                code = _run_task(spec)
            except SystemExit as exc:
                code = _exit_code(exc)
            except BaseException:  # noqa: BLE001 - reported, then the child ends
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        self.children.add(pid)
        return LaunchResult.accepted()

    def reconcile(self) -> None:
        """Reap the children that ended (no zombies between polls)."""
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its code is unknown
                done, status = pid, -1
            if done:
                self.children.discard(pid)
                self.ended[pid] = os.waitstatus_to_exitcode(status) if status >= 0 else -1
                while len(self.ended) > self.KEEP_ENDED:
                    self.ended.pop(next(iter(self.ended)))
        self.fallback.reconcile()

    def close(self) -> None:
        """End the children still running (the SuperExec is going away)."""
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.reconcile()
        self.fallback.close()


def main() -> None:
    """Apply the tuning's patches (:func:`~mel_opt.live.flower_patches.for_superexec`: the
    forking executor, the pulls of the ClientApps' messages), warm up, then run Flower's
    SuperExec with this process's arguments."""
    from mel_opt.live.flower_patches import for_superexec
    from mel_opt.live.tuning import NodeTuning

    tuning = NodeTuning.from_env()
    for_superexec(tuning, ForkExecutor)
    warm_up(None if tuning is None else tuning.warm_data)
    from flwr.supercore.cli import flower_superexec

    sys.argv[0] = "flower-superexec"
    flower_superexec()


if __name__ == "__main__":
    main()
