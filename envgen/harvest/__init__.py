"""Harvest facts from package indexes into ``matrix/harvested/`` (``envgen matrix update``).

Public entry points (what the CLI uses):

* :func:`envgen.harvest.update.update_matrix` — compute the new snapshot, diff it against the
  committed one and, when asked, write it atomically.
* :class:`envgen.harvest.update.UpdateOptions` / :class:`envgen.harvest.update.UpdateResult`.
* :func:`envgen.harvest.diff.render_text` — the human-readable diff.

Nothing here prints; progress goes to an optional callback taking one short line.
"""

from __future__ import annotations

__all__ = ["UpdateOptions", "UpdateResult", "update_matrix"]


def __getattr__(name: str):
    # Lazy: `envgen make` reads harvest.sources without paying for requests & co.
    if name in __all__:
        from envgen.harvest import update

        return getattr(update, name)
    raise AttributeError(name)
