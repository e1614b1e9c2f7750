"""``envgen --version``: envgen's version and the data snapshot it answers from.

The snapshot is the harvested facts' date (``generated.date`` of harvested/torch.json) in the
folder the facts are read from: the shipped matrix, or a newer one `envgen matrix update
--write` left in the data directory. Computed only when ``--version`` is asked for.
"""

from __future__ import annotations

import os
import sys

from envgen import __version__


def version_text() -> str:
    """Two lines: ``envgen <version>`` and where the data comes from, dated."""
    return _usual_case() or _general()


def _general() -> str:
    """version_text() for any setup: the config file and the variables, as a command reads
    them, through envgen.facts.locate."""
    from pathlib import Path

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


def _usual_case() -> str | None:
    """version_text() without pathlib, json, re or platformdirs (each costs a large share of
    Python's own start-up; `envgen --version` is held to 2x that): no config file or variable
    names the directories, the matrix is the checkout's or the installed package's, and on
    Linux the user data dir is platformdirs' rule ($XDG_DATA_HOME or ~/.local/share, a test
    compares the two). None: anything else, answered by the general path."""
    if (sys.platform != "linux" or os.environ.get("ENVGEN_MATRIX_DIR", "").strip()
            or os.environ.get("ENVGEN_DATA", "").strip() or _config_sets_dirs()):
        return None
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    checkout = os.path.join(os.path.dirname(package), "matrix")
    installed = os.path.join(package, "_matrix")
    if os.path.isdir(os.path.join(checkout, "curated")):
        matrix, data = checkout, None  # a checkout's matrix is its own data dir
    elif os.path.isdir(os.path.join(installed, "curated")):
        matrix, data = installed, _linux_user_data_dir()
    else:
        return None
    shipped = os.path.join(matrix, "harvested")
    harvested = shipped
    if data is not None:
        refreshed = os.path.join(data, "harvested")
        if all(os.path.isfile(os.path.join(refreshed, f))
               for f in ("torch.json", "frameworks.json", "cuda.json")):
            mine, theirs = _date_of(refreshed), _date_of(shipped)
            if not (theirs and mine and theirs > mine):
                harvested = refreshed
    date = _date_of(harvested)
    if date is None:
        return None  # unusual file layout: the general path parses it
    what = "refreshed by `envgen matrix update`" if harvested != shipped else "shipped"
    return f"envgen {__version__}\ndata snapshot {date} ({what}: {harvested})"


def _linux_user_data_dir() -> str:
    """platformdirs.user_data_dir("envgen", appauthor=False) on Linux, without importing it."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    if not base:
        base = os.path.expanduser("~/.local/share")
    return os.path.join(base, "envgen")


def _date_of(harvested: str) -> str | None:
    """``generated.date`` from the last KiB of harvested/torch.json (as
    envgen.facts.locate.generated_date, by byte search instead of a regular expression)."""
    try:
        with open(os.path.join(harvested, "torch.json"), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 1024))
            tail = f.read()
    except OSError:
        return None
    at = tail.rfind(b'"generated"')
    at = tail.find(b'"date"', at) if at >= 0 else -1
    start = tail.find(b'"', tail.find(b":", at) + 1) + 1 if at >= 0 else 0
    value = tail[start:start + 10] if start > 0 else b""
    if len(value) == 10 and value[4:5] == value[7:8] == b"-" and \
            (value[:4] + value[5:7] + value[8:]).isdigit():
        return value.decode()
    return None
