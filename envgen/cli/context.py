"""What every subcommand receives: where the matrix and the data are, how to report, the
checked config, and where each setting came from."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

    from envgen.cli.progress import Reporter
    from envgen.facts.matrix import Matrix


class Context:
    """What every command is given: where the matrix and data are, the output mode and
    streams, and the configuration read (with where each setting came from)."""

    def __init__(self, matrix_dir: Path | None, json: bool = False, quiet: bool = False,
                 verbose: bool = False, config: dict[str, Any] | None = None,
                 config_path: Path | None = None, data_dir: Path | None = None,
                 out: TextIO | None = None, err: TextIO | None = None,
                 sources: dict[str, str] | None = None) -> None:
        self._matrix_dir = matrix_dir  # None: the located matrix's (see matrix_dir)
        self.json, self.quiet, self.verbose = json, quiet, verbose
        self.config = {} if config is None else config
        self.config_path = config_path
        self._data_dir = data_dir  # where refreshed facts and results are written
        self.out: TextIO = sys.stdout if out is None else out
        self.err: TextIO = sys.stderr if err is None else err
        self.sources = {} if sources is None else sources  # setting → "--flag" / ENV / file:key

    def __repr__(self) -> str:
        return (f"Context(matrix_dir={self.matrix_dir!r}, data_dir={self.data_dir!r}, "
                f"json={self.json!r}, quiet={self.quiet!r}, verbose={self.verbose!r})")

    @property
    def matrix_dir(self) -> Path | None:
        """The matrix directory: as given, else the located matrix's."""
        return self._given_or_located("matrix_dir", self._matrix_dir)

    @property
    def data_dir(self) -> Path | None:
        """Where refreshed facts and results are written: as given, else the matrix's."""
        return self._given_or_located("data_dir", self._data_dir)

    def _given_or_located(self, name: str, given: Path | None) -> Path | None:
        if given is None and "matrix" in self.__dict__:
            return getattr(self.matrix, name)
        return given

    @functools.cached_property
    def progress(self) -> Reporter:
        """Progress on stderr: lines (suppressed by --quiet), and bars on a terminal
        (envgen.cli.progress); pass it to envgen.api functions as their ``progress``."""
        from envgen.cli.progress import Reporter

        return Reporter(self.err, quiet=self.quiet, as_json=self.json)

    def close(self) -> None:
        """End the live progress display, if one was drawn."""
        if "progress" in self.__dict__:
            self.progress.close()

    def debug(self, message: str) -> None:
        if self.verbose:
            print(message, file=self.err, flush=True)

    def setting(self, args: Any, name: str) -> Any:
        """A setting's checked value: the flag, then config key ``name`` (envgen.toml /
        [tool.envgen]), then its environment variable (see envgen.config.SETTINGS); a tuple
        for list settings. Where it came from is kept in ``sources[name]``."""
        from envgen import config as _config

        spec = _config.SETTINGS[name]
        flag_value = getattr(args, spec.attr, None) if spec.attr else None
        value, source = _config.setting(name, flag_value, self.config, self.config_path)
        if source:
            self.sources[name] = source
        return value

    def source(self, name: str, default: str | None = None) -> str | None:
        """Where setting ``name`` came from (after ``setting``), for error messages."""
        return self.sources.get(name, default)

    @functools.cached_property
    def matrix(self) -> Matrix:
        """The matrix this command reads (and the data directory it writes)."""
        from envgen.facts.matrix import Matrix

        return Matrix(matrix_dir=self._matrix_dir, data_dir=self._data_dir)

    @property
    def results_dir(self) -> Path:
        """Where new result records are stored: <data dir>/results."""
        return self.matrix.results_dir

    def results_dirs(self) -> list[Path]:
        """Where records are read from: the shipped matrix's and the data dir's."""
        return self.matrix.results_dirs()
