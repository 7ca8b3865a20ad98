"""``python -m mel_opt.cli``: the same as the ``melopt`` command."""

from mel_opt.cli import run

run()
