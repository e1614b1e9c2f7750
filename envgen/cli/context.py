"""What every subcommand receives: where the matrix is, how to report, the resolved config."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


@dataclass
class Context:
    matrix_dir: Path
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def progress(self, message: str) -> None:
        """One line of progress on stderr (suppressed by --quiet and in --json mode's stdout)."""
        if not self.quiet:
            print(message, file=self.err, flush=True)

    def debug(self, message: str) -> None:
        if self.verbose:
            print(message, file=self.err, flush=True)

    def setting(self, args: Any, name: str, env: str, many: bool = False,
                attr: str | None = None) -> Any:
        """An option's value: the flag, then config key ``name`` (envgen.toml /
        [tool.envgen]), then environment variable ``env`` (space-separated when ``many``)."""
        value = getattr(args, attr or name.replace("-", "_"), None)
        if value is None:
            value = self.config.get(name)
        if value is None and os.environ.get(env):
            value = os.environ[env].split() if many else os.environ[env]
        if many and isinstance(value, str):
            value = value.split()
        return value
