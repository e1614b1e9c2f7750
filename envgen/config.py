"""Configuration: command-line flags, then ``envgen.toml`` or ``[tool.envgen]`` in
``pyproject.toml`` (nearest to the working directory), then environment variables.

Recognized keys (all optional)::

    matrix-dir = "matrix"          # ENVGEN_MATRIX_DIR
    cache-dir = "~/.cache/envgen"  # ENVGEN_CACHE_DIR
    ca-cert = "/etc/ssl/certs/corp.pem"   # ENVGEN_CA_CERT
    out = "locks"                  # where `envgen make` writes
    channels = ["https://mirror.example/conda-forge"]        # ENVGEN_CHANNELS
    channel-alias = "https://mirror.example/conda"           # ENVGEN_CHANNEL_ALIAS
    index-url = "https://pypi.mirror.example/simple"         # ENVGEN_INDEX_URL
    extra-index-url = ["https://extra.example/simple"]       # ENVGEN_EXTRA_INDEX_URL
    torch-index-url = "https://torch.mirror.example/whl/cu121"  # ENVGEN_TORCH_INDEX_URL
    [defaults]                     # default resolver options, e.g.
    os = "ubuntu-22.04"
    python = "3.11"
    gpu-arch = "sm_90"
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from envgen.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KEYS = {"matrix-dir", "cache-dir", "ca-cert", "defaults", "out", "channels", "channel-alias",
        "index-url", "extra-index-url", "torch-index-url", "base-image", "registry", "engine",
        "docker-cli"}
DEFAULT_KEYS = {"os", "python", "cuda", "torch", "framework", "framework-version", "gpu-arch",
                "driver", "platform", "nccl", "flavor"}


def cache_root() -> Path:
    """Where envgen caches (HTTP pages, solver repodata, uv): $ENVGEN_CACHE_DIR, else
    $XDG_CACHE_HOME/envgen (~/.cache/envgen). The harvester uses its ``http/`` folder."""
    env = os.environ.get("ENVGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envgen"


def find_config(start: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """The nearest envgen.toml, or pyproject.toml with a [tool.envgen] table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("envgen.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            try:
                with path.open("rb") as fh:
                    doc = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise UsageError(f"{path} is not valid TOML: {exc}",
                                 hint="fix the file or remove it") from None
            table = doc if name == "envgen.toml" else doc.get("tool", {}).get("envgen")
            if table is not None:
                return path, _check(path, table)
    return None, {}


def _check(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    unknown = set(table) - KEYS
    if unknown:
        raise UsageError(f"{path}: unknown envgen setting(s): {', '.join(sorted(unknown))}",
                         hint=f"known settings: {', '.join(sorted(KEYS))}")
    bad = set(table.get("defaults", {})) - DEFAULT_KEYS
    if bad:
        raise UsageError(f"{path}: unknown key(s) in [defaults]: {', '.join(sorted(bad))}",
                         hint=f"known: {', '.join(sorted(DEFAULT_KEYS))}")
    base = path.parent
    out = dict(table)
    for key in ("matrix-dir", "cache-dir", "ca-cert", "out"):
        if key in out:
            out[key] = str((base / Path(out[key]).expanduser()).resolve())
    return out
