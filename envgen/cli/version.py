"""``envgen --version``: envgen's version and the data snapshot it answers from.

The snapshot is the harvested facts' date (``generated.date`` of harvested/torch.json) in the
folder the facts are read from: the shipped matrix, or a newer one `envgen matrix update
--write` left in the data directory. Computed only when ``--version`` is asked for.
"""

from __future__ import annotations

import os
from pathlib import Path

from envgen import __version__


def version_text() -> str:
    """Two lines: ``envgen <version>`` and where the data comes from, dated."""
    from envgen.errors import EnvgenError

    try:  # what a command's Context does: the config file, then the environment
        from envgen.facts.locate import (
            check_data_dir,
            default_data_dir,
            find_matrix_dir,
            generated_date,
            harvested_dir,
        )

        if _config_sets_dirs():
            from envgen.config import find_config, setting
        else:
            find_config, setting = None, _env_setting

        path, config = find_config() if find_config else (None, {})
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


def _config_sets_dirs() -> bool:
    """Whether the config file a command would read (the nearest envgen.toml, or
    pyproject.toml with [tool.envgen]) mentions matrix-dir or data-dir. Hand-written: a byte
    search, so that the usual answer (no) costs no TOML parse and no envgen.config import."""
    folder = os.path.realpath(os.getcwd())
    while True:
        for name in ("envgen.toml", "pyproject.toml"):
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    text = f.read()
            except OSError:
                continue
            if name == "envgen.toml" or b"[tool.envgen" in text:
                return b"matrix-dir" in text or b"data-dir" in text
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


def _env_setting(name: str, flag_value, config, config_path):
    """envgen.config.setting for matrix-dir / data-dir when no config file sets them: the
    environment variable, as given (find_matrix_dir / check_data_dir check it)."""
    variable = {"matrix-dir": "ENVGEN_MATRIX_DIR", "data-dir": "ENVGEN_DATA"}[name]
    value = os.environ.get(variable, "").strip()
    return (os.path.expanduser(value), variable) if value else (None, None)
