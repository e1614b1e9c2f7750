"""``envgen install``: materialize a lock directory into a prefix."""

from __future__ import annotations

import argparse

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.options import cache_dir, one_ca_cert
from envgen.cli.render import dump_json

EPILOG = """\
examples:
  envgen install locks/deepspeed-0.19.8-torch2.15.0-cu132-py3.12-ubuntu22.04-x86_64 --prefix ./env
  ./env/bin/python -c "import torch, deepspeed; print(torch.version.cuda)"

Conda flavor: py-rattler downloads each conda package, checks its sha256 against the lock and
links it; then uv (envgen's own; the prefix's pip where uv is missing) installs
requirements.lock.txt into the prefix's Python with --require-hashes --no-deps, its progress
lines shown (no resolution on the target; pip.conf, uv.toml and PIP_* / UV_* index settings are
ignored). Venv flavor: a venv of the locked Python (it must be installed here), then the same
pip step.
A failed or interrupted install (Ctrl-C, SIGTERM) removes the prefix it created (or empties
the empty folder it was given). An install killed outright leaves its marker
(PREFIX/.envgen-install.json): the next install into PREFIX names it, and --clear-incomplete
removes it first. Before installing, the manifest's own hash and every lock file's hash are
checked: an edited lock is refused.

exit codes: 0 installed, 1 failure (an edited lock, a hash mismatch, uv / pip or the conda
installer failed), 2 usage error, 4 environment (network, filesystem), 130/143 interrupted.
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("install", parents=[common], help=help_for("install"),
                       description="Install the environment a lock directory describes.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lock_dir", metavar="DIR", help="a directory `envgen make` wrote")
    p.add_argument("--prefix", metavar="PATH", required=True,
                   help="the environment to create (must not exist, or be empty)")
    p.add_argument("--ca-cert", metavar="FILE", help="CA bundle for a TLS-intercepting proxy")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="package cache (default $ENVGEN_CACHE_DIR or ~/.cache/envgen)")
    p.add_argument("--clear-incomplete", action="store_true",
                   help="if PREFIX holds an envgen install that was killed before it finished, "
                   "remove it and install again")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import InstallRequest, install

    req = InstallRequest(lock_dir=validate.path(args.lock_dir, "DIR", "DIR"),
                         prefix=validate.path(args.prefix, "--prefix", "--prefix"),
                         cache_dir=cache_dir(ctx, args), ca_cert=one_ca_cert(ctx, args),
                         clear_incomplete=args.clear_incomplete)
    result = install(req, progress=ctx.progress)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(f"Installed {result.conda_packages} conda + {result.pip_packages} pip packages "
              f"into {result.prefix} in {result.seconds:.1f} s\n  python: {result.python}",
              file=ctx.out)
    return 0
