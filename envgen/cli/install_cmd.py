"""``envgen install``: materialize a lock directory into a prefix."""

from __future__ import annotations

import argparse
import shlex

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
pip step. --python names the interpreter (a path, or X.Y); by default the lock's Python is
looked for on PATH, in pyenv's versions, uv's managed Pythons and conda (a pyenv shim that
would run another version is skipped); none: exit 4, with the Pythons found and how to get
the right one (uv python install X.Y).
After installing, the env sets its locked toolchain — CUDA_HOME (the locked nvcc first on
PATH), CC/CXX (the lock's gcc, where this machine has it), a TORCH_EXTENSIONS_DIR of its own,
TORCH_CUDA_ARCH_LIST (a lock made with --gpu/--gpu-arch) — whenever its Python runs (a .pth
file; ENVGEN_ENV=off turns it off), in bin/activate (deactivate restores) and in conda's
activate.d; PREFIX/etc/envgen/env.json records what and why.
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
    p.add_argument("--python", metavar="PATH|X.Y",
                   help="venv flavors: the interpreter to build the env on (default: the "
                   "lock's Python, found on PATH or in pyenv, uv or conda)")
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
                         clear_incomplete=args.clear_incomplete,
                         python=validate.text(args.python, "--python", "--python")
                         if args.python else None)
    result = install(req, progress=ctx.progress, matrix=ctx.matrix)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(f"Installed {result.conda_packages} conda + {result.pip_packages} pip packages "
              f"into {result.prefix} in {result.seconds:.1f} s\n  python: {result.python}",
              file=ctx.out)
        if result.standing is not None:
            print(validate.shown(f"  evidence: {result.standing.line()}"), file=ctx.out)
        act = result.activation
        if act is not None:
            for name, value in act.values.items():  # printable: activation.plan checks
                print(f"  {name}={shlex.quote(value)}", file=ctx.out)
            for note in act.notes:
                print(f"  note: {note}", file=ctx.out)
            prefix = shlex.quote(str(result.prefix))
            activate = (f"conda activate {prefix}" if result.env_kind == "conda"
                        else f". {shlex.quote(str(result.prefix / 'bin' / 'activate'))}")
            print("These are set whenever the env's Python runs (ENVGEN_ENV=off: not) and by "
                  f"activating it:\n  {activate}\nCheck it: envgen doctor --python "
                  f"{shlex.quote(str(result.python))}", file=ctx.out)
    return 0
