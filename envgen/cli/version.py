"""``envgen --version``: envgen's version and the data snapshot it answers from.

The snapshot is the harvested facts' date (``generated.date`` of harvested/torch.json) in the
folder the facts are read from: the shipped matrix, or a newer one `envgen matrix update
--write` left in the data directory. Computed only when ``--version`` is asked for.
"""

from __future__ import annotations

from pathlib import Path

from envgen import __version__


def version_text() -> str:
    """Two lines: ``envgen <version>`` and where the data comes from, dated."""
    from envgen.errors import EnvgenError

    try:  # what a command's Context does (config file, then environment), without its imports
        from envgen.config import find_config, setting
        from envgen.facts.locate import (
            check_data_dir,
            default_data_dir,
            find_matrix_dir,
            generated_date,
            harvested_dir,
        )

        path, config = find_config()
        matrix, matrix_from = setting("matrix-dir", None, config, path)
        data, data_from = setting("data-dir", None, config, path)
        matrix_dir = find_matrix_dir(matrix, matrix_from)
        data_dir = (check_data_dir(Path(data), data_from) if data
                    else default_data_dir(matrix_dir))
        harvested = harvested_dir(matrix_dir, data_dir)
    except EnvgenError as exc:
        return f"envgen {__version__}\ndata: none found ({exc})"
    date = generated_date(harvested) or "undated"
    refreshed = harvested.parent.resolve() != matrix_dir.resolve()
    what = "refreshed by `envgen matrix update`" if refreshed else "shipped"
    return f"envgen {__version__}\ndata snapshot {date} ({what}: {harvested})"
