"""``flower-supernode`` with mel_opt's tuning: ``python -m mel_opt.live.supernode ARGS``.

This runs Flower's own SuperNode entry point (``flwr.supernode.cli.flower_supernode``) with
the same ``ARGS``, after the patches of :func:`mel_opt.live.flower_patches.for_supernode`, as
the :class:`~mel_opt.live.tuning.NodeTuning` in its environment says (the local federation's
nodes and ``melopt node`` set it):

- Flower 1.42's SuperNode loop sleeps a fixed 3 s whenever its pull from the SuperLink finds no
  message, and 0.5 s per check while it waits for its ClientApp's reply; no flag or
  environment variable sets either. In a round loop every node that has just replied starts
  such a 3 s sleep exactly when the next round's message is sent, so each round paid up to 3 s
  per node for nothing; on loopback that was most of a round of a small model. Here the idle
  wait is ``idle_poll`` (0.2 s) and the wait for a reply ``reply_poll`` (0.02 s, a look into
  the node's own memory, no request). The price is one Fleet API request per node every 0.2 s
  while idle: about 0.04 of a core per node at rest, the SuperLink's share included (a round
  trip of one message to two nodes on two cores took 2.5 s instead of 5.1 s).
- With ``warm`` the SuperNode starts :mod:`mel_opt.live.superexec` where Flower's loop starts
  ``flower-superexec`` (same arguments): a SuperExec that forks each message's ClientApp
  process from a warm process instead of starting a fresh interpreter, about a second less
  per message. The SuperExec's own poll for tasks has a Flower setting
  (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, the tuning's ``task_poll``).
- Objects (a message's arrays) cross between the SuperLink, a SuperNode and its ClientApp by
  separate pulls; an object asked for before it has arrived is asked again after a back-off
  that starts at 1 s and doubles up to 10 s, with no setting. A message is announced before
  its arrays have all been pushed, so on loopback nearly every hop met that back-off: about
  3.5 s from a node's first sight of a round's message to its ClientApp's start. With
  ``pull_backoff`` (0.02 s, capped at 0.2 s; the ServerApp and the warm SuperExec apply it
  too) the back-off starts and stays shorter: more requests while an object is on its way, the
  same objects in the end.

Started by hand, without the tuning in its environment, it runs with the short polls only
(:data:`~mel_opt.live.tuning.BY_HAND`). When the installed Flower no longer has what a patch
relies on, the SuperNode runs without it (``tests/live/test_flower_patches.py`` fails first).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Apply the tuning's patches, then run Flower's SuperNode with this process's
    arguments."""
    from mel_opt.live.flower_patches import for_supernode
    from mel_opt.live.tuning import BY_HAND, NodeTuning

    for_supernode(NodeTuning.from_env() or BY_HAND)
    from flwr.supernode.cli import flower_supernode

    sys.argv[0] = "flower-supernode"  # Flower's messages name the command it knows
    flower_supernode()


if __name__ == "__main__":
    main()
