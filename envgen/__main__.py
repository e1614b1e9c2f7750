"""``python -m envgen``: the same as the ``envgen`` command."""

from envgen.cli import entrypoint

entrypoint()
