"""Options several commands share: the sources and network group (make, evidence), the CA
bundle and cache directory checks, and how a path is shown."""

from __future__ import annotations

import argparse
from pathlib import Path

from envgen.cli.context import Context
from envgen.config import cache_root
from envgen.errors import UsageError
from envgen.userfile import read_text


def add_source_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sources and network")
    g.add_argument("--channel", action="append", metavar="NAME_OR_URL",
                   help="conda channel (repeatable; replaces the defaults: conda-forge, plus "
                   "nvidia's label for CUDA 11); a name, a URL or a local directory")
    g.add_argument("--channel-alias", metavar="URL",
                   help="base URL for channel names (default: channel_alias in "
                   "matrix/curated/toolchain.toml, anaconda.org); point it at a mirror")
    g.add_argument("--index-url", metavar="URL",
                   help="Python package index replacing PyPI (https://pypi.org/simple)")
    g.add_argument("--extra-index-url", action="append", metavar="URL",
                   help="additional Python package index (repeatable)")
    g.add_argument("--torch-index-url", metavar="URL",
                   help="replaces PyTorch's index for the combination's CUDA "
                   "(https://download.pytorch.org/whl/cuXYZ)")
    g.add_argument("--ca-cert", metavar="FILE",
                   help="CA bundle for a TLS-intercepting proxy (PEM)")
    g.add_argument("--cache-dir", metavar="DIR",
                   help="solver caches (default $ENVGEN_CACHE_DIR or ~/.cache/envgen)")
    g.add_argument("--offline", action="store_true",
                   help="use only the caches; fail if something is missing")


def check_ca_cert(ca_cert: Path | None, source: str | None = "--ca-cert") -> None:
    """A CA bundle must be a readable PEM file with at least one certificate."""
    if not ca_cert:
        return
    path = Path(ca_cert)
    try:
        text = read_text(path, "certificate", encoding="ascii", errors="replace",
                         shown=f"{source} {ca_cert}")
    except OSError as exc:
        raise UsageError(f"{source} {ca_cert}: {exc.strerror or exc}",
                         hint="give the path of a PEM bundle with your proxy's CA",
                         source=source) from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise UsageError(f"{source} {ca_cert} holds no PEM certificate",
                         hint="export your proxy's CA as PEM (-----BEGIN CERTIFICATE-----)",
                         source=source)


def one_ca_cert(ctx: Context, args: argparse.Namespace) -> Path | None:
    """The single CA bundle make/install/update take (checked: a readable PEM file)."""
    certs = ctx.setting(args, "ca-cert")
    if not certs:
        return None
    source = ctx.source("ca-cert")
    if len(certs) > 1:
        raise UsageError(f"{source} names {len(certs)} files; this command takes one CA bundle",
                         hint="concatenate the PEM files into one bundle", source=source)
    check_ca_cert(certs[0], source)
    return certs[0]


def cache_dir(ctx: Context, args: argparse.Namespace) -> Path:
    """The cache directory, checked to be writable (uv and rattler would otherwise fail
    there with a message about the index or the channel)."""
    from envgen.atomic import writable_dir

    path = ctx.setting(args, "cache-dir") or cache_root()
    return writable_dir(path, "the cache directory",
                        ctx.source("cache-dir", "ENVGEN_CACHE_DIR / ~/.cache/envgen"))


def shown(path: Path) -> Path:
    """A path as the user would type it: relative to the working directory when inside it."""
    import os

    rel = os.path.relpath(path)
    return Path(rel) if not rel.startswith("..") else path
