"""Configuration: command-line flags, then ``envgen.toml`` or ``[tool.envgen]`` in
``pyproject.toml`` (nearest to the working directory), then environment variables.

Recognized keys (all optional)::

    matrix-dir = "matrix"          # ENVGEN_MATRIX_DIR
    data-dir = "~/envgen-data"     # ENVGEN_DATA: refreshed facts and results are written here
    cache-dir = "~/.cache/envgen"  # ENVGEN_CACHE_DIR
    ca-cert = "/etc/ssl/certs/corp.pem"   # ENVGEN_CA_CERT
    out = "locks"                  # where `envgen make` writes
    channels = ["https://mirror.example/conda-forge"]        # ENVGEN_CHANNELS
    channel-alias = "https://mirror.example/conda"           # ENVGEN_CHANNEL_ALIAS
    index-url = "https://pypi.mirror.example/simple"         # ENVGEN_INDEX_URL
    extra-index-url = ["https://extra.example/simple"]       # ENVGEN_EXTRA_INDEX_URL
    torch-index-url = "https://torch.mirror.example/whl/cu121"  # ENVGEN_TORCH_INDEX_URL
    base-image = "registry.example/cuda:12.4.1-devel"        # ENVGEN_BASE_IMAGE
    registry = "ghcr.io/acme"      # ENVGEN_REGISTRY
    engine = "buildkit"            # ENVGEN_ENGINE
    docker-cli = "/usr/bin/docker" # ENVGEN_DOCKER_CLI
    [defaults]                     # default resolver options, e.g.
    os = "ubuntu-22.04"
    python = "3.11"
    gpu-arch = "sm_90"

Every value is checked by type and shape where it is read (:mod:`envgen.validate`); an error
names where the value came from: ``--flag``, ``ENV_VAR`` or ``<file>:<key>``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen import validate
from envgen.errors import UsageError
from envgen.userfile import read_bytes


def _toml() -> Any:
    """The TOML reader, imported when a file is read (its import is ~5 ms of start-up)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


# Where a pyproject.toml can hold a [tool.envgen] table: "[tool.envgen]", "tool.envgen.key =",
# quoted keys; or "envgen = {...}" / "envgen.key =" under a "[tool]" header. A file matching
# neither is not parsed (most projects' pyproject.toml): a false match only costs the parse.
# (Patterns as text: compiled, and cached by re, only where a pyproject.toml is found.)
_TOOL_DOTTED = rb"""tool["']?\s*\.\s*["']?envgen\b"""
_TOOL_HEADER = rb"""(?m)^\s*\[\s*["']?tool["']?\s*\]"""
_TOOL_KEY = rb"""(?m)^\s*["']?envgen["']?\s*[.=]"""


def may_hold_tool_table(data: bytes) -> bool:
    """Whether pyproject.toml bytes ``data`` can hold a [tool.envgen] table (see above)."""
    return bool(re.search(_TOOL_DOTTED, data)
                or (re.search(_TOOL_HEADER, data) and re.search(_TOOL_KEY, data)))


def _registry(value: Any, what: str, source: str | None) -> str:
    return validate.registry(validate.text(value, what, source), source=source or what)


def _program(value: Any, what: str, source: str | None) -> str:
    raw = validate.text(value, what, source)
    if raw.startswith("-"):
        raise UsageError(f"{what} {validate.describe(raw)} is not a program path",
                         hint="give a program name or path, e.g. /usr/bin/docker", source=source)
    return raw


@dataclass(frozen=True, slots=True)
class Spec:
    """One setting: its flag (the argparse attribute), environment variable and check."""

    attr: str | None  # argparse dest; None: config/env only
    env: str | None
    check: Callable[[Any, str, str | None], Any]
    many: bool = False  # a list (flag repeatable; env space-separated)
    choices: tuple[str, ...] = ()


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str, str | None], str]:
    def check(value: Any, what: str, source: str | None) -> str:
        raw = validate.text(value, what, source)
        if raw not in choices:
            raise UsageError(f"{what} {raw!r} is not one of {', '.join(choices)}",
                             hint=f"use one of: {', '.join(choices)}", source=source)
        return raw
    return check


SETTINGS: dict[str, Spec] = {
    "matrix-dir": Spec("matrix_dir", "ENVGEN_MATRIX_DIR", validate.path),
    "data-dir": Spec("data", "ENVGEN_DATA", validate.path),
    "cache-dir": Spec("cache_dir", "ENVGEN_CACHE_DIR", validate.path),
    "ca-cert": Spec("ca_cert", "ENVGEN_CA_CERT", validate.path, many=True),
    "out": Spec("out", None, validate.path),
    "channels": Spec("channel", "ENVGEN_CHANNELS", validate.channel, many=True),
    "channel-alias": Spec("channel_alias", "ENVGEN_CHANNEL_ALIAS", validate.url),
    "index-url": Spec("index_url", "ENVGEN_INDEX_URL", validate.url),
    "extra-index-url": Spec("extra_index_url", "ENVGEN_EXTRA_INDEX_URL", validate.url,
                            many=True),
    "torch-index-url": Spec("torch_index_url", "ENVGEN_TORCH_INDEX_URL", validate.url),
    "base-image": Spec("base", "ENVGEN_BASE_IMAGE", validate.image_ref),
    "registry": Spec("registry", "ENVGEN_REGISTRY", _registry),
    "engine": Spec("engine", "ENVGEN_ENGINE", _choice(("sdk", "buildkit"))),
    "docker-cli": Spec("docker_cli", "ENVGEN_DOCKER_CLI", _program),
}
KEYS = {*SETTINGS, "defaults"}
DEFAULT_KEYS = {"os", "python", "cuda", "torch", "framework", "framework-version", "gpu-arch",
                "driver", "platform", "nccl", "flavor"}
PATH_KEYS = ("matrix-dir", "data-dir", "cache-dir", "ca-cert", "out")


def cache_root() -> Path:
    """Where envgen caches (HTTP pages, solver repodata, uv): $ENVGEN_CACHE_DIR, else
    $XDG_CACHE_HOME/envgen (~/.cache/envgen). The harvester uses its ``http/`` folder."""
    env = os.environ.get("ENVGEN_CACHE_DIR")
    if env:
        return validate.path(env, "ENVGEN_CACHE_DIR", "ENVGEN_CACHE_DIR")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "envgen")


def find_config(start: str | Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """The nearest envgen.toml, or pyproject.toml with a [tool.envgen] table, checked."""
    folder = os.path.realpath(start if start is not None else os.getcwd())
    while True:
        for name in ("envgen.toml", "pyproject.toml"):
            found = os.path.join(folder, name)
            if not os.path.isfile(found):
                continue
            try:
                data = read_bytes(found, "config")
            except OSError as exc:
                raise UsageError(f"cannot read {found}: {exc.strerror or exc}",
                                 hint="fix its permissions, or remove it",
                                 source=found) from None
            if name == "pyproject.toml" and not may_hold_tool_table(data):
                continue
            path = Path(found)
            doc = _parse_toml(path, data)
            table = doc if name == "envgen.toml" else _tool_table(doc, path)
            if table is not None:
                return path, check_config(path, table)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None, {}
        folder = parent


def _parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    tomllib = _toml()
    try:
        return tomllib.loads(data.decode())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}",
                         hint="fix the file or remove it", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text ({exc.reason})",
                         hint="save it as UTF-8", source=str(path)) from None


def _tool_table(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    tool = doc.get("tool", {})
    if not isinstance(tool, dict):
        return None
    table = tool.get("envgen")
    if table is not None and not isinstance(table, dict):
        raise UsageError(f"{path}: tool.envgen must be a table", hint="write [tool.envgen]",
                         source=f"{path}:tool.envgen")
    return table


def check_config(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    """Every key known, every value of the right type and shape; relative paths made relative
    to the config file's folder. Errors name ``<file>:<key>``."""
    unknown = set(table) - KEYS
    if unknown:
        raise UsageError(f"{path}: unknown envgen setting(s): {', '.join(sorted(unknown))}",
                         hint=f"known settings: {', '.join(sorted(KEYS))}",
                         source=f"{path}:{sorted(unknown)[0]}")
    out: dict[str, Any] = {}
    for key, value in table.items():
        source = f"{path}:{key}"
        if key == "defaults":
            out[key] = _check_defaults(path, value)
            continue
        spec = SETTINGS[key]
        if key in PATH_KEYS:  # relative to the config file, not the working directory
            values = validate.strings(value, source, source) if spec.many else (
                validate.text(value, source, source),)
            folder = os.path.dirname(os.fspath(path))
            value = [os.path.join(folder, os.path.expanduser(v)) for v in values]
            value = value if spec.many else value[0]
        out[key] = (tuple(spec.check(v, source, source)
                          for v in validate.strings(value, source, source))
                    if spec.many else spec.check(value, source, source))
    return out


def _check_defaults(path: Path, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UsageError(f"{path}: defaults must be a table", hint="write [defaults]",
                         source=f"{path}:defaults")
    bad = set(value) - DEFAULT_KEYS
    if bad:
        raise UsageError(f"{path}: unknown key(s) in [defaults]: {', '.join(sorted(bad))}",
                         hint=f"known: {', '.join(sorted(DEFAULT_KEYS))}",
                         source=f"{path}:defaults.{sorted(bad)[0]}")
    out = {}
    for key, item in value.items():
        source = f"{path}:defaults.{key}"
        if not isinstance(item, str):
            raise UsageError(f"{source} must be a string, not {type(item).__name__} ({item!r})",
                             hint=f'quote the value: {key} = "…" (TOML reads an unquoted 3.10 as '
                             'the number 3.1)', source=source)
        out[key] = validate.text(item, source, source)
    return out


def setting(name: str, flag_value: Any, config: dict[str, Any], config_path: Path | None,
            environ: dict[str, str] | None = None) -> tuple[Any, str | None]:
    """(checked value, where it came from) of setting ``name``: the flag's value, then the
    config file's, then the environment variable's; ``(None, None)`` when none is set."""
    spec = SETTINGS[name]
    env = os.environ if environ is None else environ
    flag = f"--{spec.attr.replace('_', '-')}" if spec.attr else None
    if flag_value is not None and flag_value != [] and flag:
        if spec.many:
            values = flag_value if isinstance(flag_value, (list, tuple)) else [flag_value]
            return tuple(spec.check(v, flag, flag) for v in values), flag
        return spec.check(flag_value, flag, flag), flag
    if name in config:
        return config[name], f"{config_path}:{name}"
    if spec.env and env.get(spec.env, "").strip():
        raw = env[spec.env]
        if spec.many:
            return tuple(spec.check(v, spec.env, spec.env) for v in raw.split()), spec.env
        return spec.check(raw, spec.env, spec.env), spec.env
    return None, None
