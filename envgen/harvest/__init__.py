"""The harvest stage: facts from the real package indexes into ``matrix/harvested/``
(``envgen matrix update``).

Input: matrix/sources.toml (which indexes, which packages, the refresh limits) and the indexes
themselves (PEP 503/691 pages, PEP 658 metadata, range-read wheels and sdists, Debian/Ubuntu
Packages files). Output: the new snapshot (torch.json, frameworks.json, cuda.json,
os_toolkits.json), its diff against the committed one, and (with --write) the files, atomically.

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
    # Lazy: importing envgen.harvest.<module> does not load the whole update (requests & co.)
    if name in __all__:
        from envgen.harvest import update

        return getattr(update, name)
    raise AttributeError(name)
