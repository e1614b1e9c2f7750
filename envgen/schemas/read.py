"""Read one TOML data file of matrix/ into a document, or raise DataError saying why (missing,
not TOML, not UTF-8, nested too deeply, unreadable) and what to do about it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from envgen.errors import DataError, UsageError
from envgen.userfile import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(path: Path, *, missing_hint: str, fix: str) -> dict[str, Any]:
    """``path`` parsed; ``missing_hint`` is the fix when it does not exist, ``fix`` (e.g.
    "fix matrix/cells.toml") names the file for every other problem."""
    path = Path(path)
    try:
        return tomllib.loads(read_text(path, "matrix"))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist", hint=missing_hint) from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: invalid TOML ({exc})", hint=f"{fix}: its syntax") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc})",
                        hint=f"{fix}, or restore it from the repository") from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply", hint=fix) from None
    except UsageError as exc:  # not a regular file, or too large
        raise DataError(exc.message, hint=fix) from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}",
                        hint="make it a readable file, or restore it from the repository"
                        ) from None
