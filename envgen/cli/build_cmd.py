"""``envgen build``: build a lock directory's image (from `envgen make --image`)."""

from __future__ import annotations

import argparse

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.options import check_ca_cert
from envgen.cli.render import dump_json
from envgen.errors import UsageError

EPILOG = """\
examples:
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --os debian-12 --python 3.11 \\
      --gpu-arch sm_90 --image
  envgen build locks/deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64
  envgen build DIR --registry ghcr.io/acme --push
  envgen build DIR --engine buildkit --ca-cert /etc/ssl/corp-proxy.pem   # behind a TLS proxy
  envgen build DIR --engine buildkit --build-arg MAX_JOBS=8    # keeps ccache/pip cache mounts

Names: <registry>/<framework>:<fw>-torch<t>-cu<c>-py<p>-<os> (registry: --registry, else
"envgen"), plus the content tag <that tag>-<12 hex of the build hash>, plus each --tag (a
moving alias such as deepspeed-cu132); --push pushes them all. The build hash covers the
Dockerfile, image/, the lock manifest (with its lock hash), the --build-arg values (but
MAX_JOBS and proxy settings), the --label values and the engine: when an image with that
content tag and hash exists locally, or in the registry with --registry, nothing is built.
--dry-run prints the content tag and those inputs without building.

Ops compile MAX_JOBS at a time (ninja; default: the daemon's CPU count; not in the hash).
The image is labelled io.envgen.ops with what the framework itself reports it built (read
from the builder stage, which is built first and tagged <content tag>-builder).

Engines: sdk (default) talks to the daemon through the docker SDK, whose classic builder has
no RUN cache mounts and no build secrets; buildkit runs `docker build` with BuildKit and keeps
them. ccache carries the ops' objects between builds with both: BuildKit in its cache mount;
the classic builder in a store envgen serves on the Docker bridge's gateway for the build
(~/.cache/envgen/ccache; port 47311, env ENVGEN_CCACHE_PORT; at most 5 GB, env
ENVGEN_CCACHE_MAX_GB; --no-ccache turns it off), so no layer holds its objects. --ca-cert needs
buildkit: the certificates are the build secret envgen-ca, mounted only in the steps that
download, so no layer of any stage holds them.

exit codes: 0 built (or already built), 1 the build failed (the failing step and the log
tail are shown; no stopped containers are left), 2 usage error, 4 environment (the Docker
daemon or the registry cannot be reached or refused: push, login), 130/143 interrupted.
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("build", parents=[common], help=help_for("build"),
                       description="Build the image of a lock directory written by "
                       "`envgen make --image`, tagged by content; skip it when already built.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lock_dir", metavar="DIR", help="a directory `envgen make --image` wrote")
    p.add_argument("--tag", action="append", default=[], metavar="TAG|REF",
                   help="an extra tag (in the image's repository, e.g. a moving alias "
                   "deepspeed-cu132) or a full reference; pushed with --push (repeatable)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra OCI label, e.g. org.opencontainers.image.source=URL or "
                   "io.envgen.table-row=URL (repeatable; part of the build hash)")
    p.add_argument("--registry", metavar="HOST[/PATH]",
                   help="name the image <registry>/<framework>:… and look for it there before "
                   "building (config registry, env ENVGEN_REGISTRY)")
    p.add_argument("--push", action="store_true", help="push the image to --registry")
    p.add_argument("--ca-cert", action="append", default=None, metavar="FILE",
                   help="extra CA certificate (PEM) trusted while the builder downloads, for "
                   "a TLS-intercepting proxy; a build secret, in no layer (needs --engine "
                   "buildkit; repeatable; config ca-cert, env ENVGEN_CA_CERT)")
    p.add_argument("--engine", choices=("sdk", "buildkit"), default=None,
                   help="sdk: docker SDK + the daemon's classic builder (default); buildkit: "
                   "the docker CLI with BuildKit (cache mounts); config engine, env "
                   "ENVGEN_ENGINE")
    p.add_argument("--docker-cli", metavar="PATH",
                   help="docker CLI for --engine buildkit (default: docker on PATH; env "
                   "ENVGEN_DOCKER_CLI)")
    p.add_argument("--network", metavar="NAME",
                   help="network for RUN steps, e.g. host to reach an index on loopback")
    p.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="Dockerfile build argument, e.g. MAX_JOBS=8 or "
                   "TORCH_CUDA_ARCH_LIST='8.0;9.0' (repeatable)")
    p.add_argument("--target", default="runtime", choices=("runtime", "builder", "pruned"),
                   help="stage to build (default runtime; builder keeps the compilers)")
    p.add_argument("--force", action="store_true",
                   help="build even if an image with this build hash exists")
    p.add_argument("--dry-run", action="store_true",
                   help="print the content tag this build would have and the inputs of its "
                   "hash, build nothing (no Docker needed)")
    p.add_argument("--no-cache", action="store_true",
                   help="rebuild every step (no layer cache; implies --force)")
    p.add_argument("--no-ccache", action="store_true",
                   help="engine sdk: compile the ops without envgen's ccache store (the ops "
                   "step's layer cache then misses once; BuildKit keeps its cache mount either "
                   "way)")
    p.set_defaults(func=run)


def _tag(value: str) -> str:
    """A full reference, or a bare tag for the image's own repository."""
    if "/" in value or ":" in value:
        return validate.image_ref(value, "--tag", "--tag")
    import re

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", value):
        raise UsageError(f"--tag {value!r} is not a valid tag",
                         hint="letters, digits, '_', '.', '-' (at most 128), e.g. "
                         "deepspeed-cu132", source="--tag")
    return value


def parse_labels(values: list[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = validate.text(v, "--label", "--label").partition("=")
        if not sep or not key or any(c.isspace() for c in key):
            raise UsageError(f"--label {v!r} is not KEY=VALUE",
                             hint="e.g. --label org.opencontainers.image.source="
                             "https://github.com/acme/envs", source="--label")
        if key.startswith("io.envgen.") and key != "io.envgen.table-row":
            raise UsageError(f"--label {key}: envgen sets the io.envgen.* labels itself",
                             hint="use your own namespace (or io.envgen.table-row)",
                             source="--label")
        out[key] = validate.no_newlines(val, "--label value")
    return out


def parse_build_args(values: list[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = validate.text(v, "--build-arg", "--build-arg").partition("=")
        if not sep or not key:
            raise UsageError(f"--build-arg {v!r} is not KEY=VALUE",
                             hint="e.g. --build-arg MAX_JOBS=8", source="--build-arg")
        out[validate.identifier(key, "--build-arg name", "--build-arg")] = val
    return out


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import BuildOptions, BuildRequest, build

    lock_dir = validate.path(args.lock_dir, "DIR", "DIR")
    ca = ctx.setting(args, "ca-cert") or ()
    for cert in ca:
        check_ca_cert(cert, ctx.source("ca-cert"))
    options = BuildOptions(
        registry=ctx.setting(args, "registry"),
        tags=tuple(_tag(t) for t in args.tag), push=args.push,
        ca_certs=tuple(ca), engine=ctx.setting(args, "engine") or "sdk",
        network=validate.name(args.network, "--network", "--network") if args.network else None,
        build_args=parse_build_args(args.build_arg), target=args.target, force=args.force,
        no_cache=args.no_cache, docker_cli=ctx.setting(args, "docker-cli") or "docker",
        labels=parse_labels(args.label), ccache=not args.no_ccache)
    if args.dry_run:
        return _dry_run(BuildRequest(lock_dir=lock_dir, options=options), ctx)
    result = build(BuildRequest(lock_dir=lock_dir, options=options), progress=ctx.progress,
                   log=ctx.debug if ctx.verbose else None)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
        return 0
    verb = f"Found ({result.skipped})" if result.skipped else "Built"
    size = f", {result.size / 1e9:.2f} GB" if result.size else ""
    print(f"{verb} {result.references[0]} in {result.seconds:.1f} s{size}", file=ctx.out)
    print(f"  image {result.image_id}", file=ctx.out)
    if result.ops:
        print(f"  ops built: {' '.join(result.ops)}"
              + (f" (MAX_JOBS={result.max_jobs})" if result.max_jobs else ""), file=ctx.out)
    if result.ccache and "hits" in result.ccache:
        c = result.ccache
        print(f"  ccache: {c['hits']} hits, {c['misses']} misses, {c['stored']} stored "
              f"({c['directory']})", file=ctx.out)
    for ref in result.references[1:]:
        print(f"  also tagged {ref}", file=ctx.out)
    for ref in result.pushed:
        print(f"  pushed {ref}", file=ctx.out)
    return 0


def _dry_run(req, ctx: Context) -> int:
    from envgen.api import build_plan
    from envgen.lock.secrets import shown_text

    plan = build_plan(req)
    if ctx.json:  # a proxy's or an index's credentials in a build argument are shown masked
        doc = plan.to_dict()
        for key in ("not_hashed",):
            doc[key] = {k: shown_text(v) for k, v in (doc.get(key) or {}).items()}
        if isinstance(doc.get("inputs"), dict):
            doc["inputs"]["build_args"] = {k: shown_text(v) for k, v in
                                           doc["inputs"].get("build_args", {}).items()}
        dump_json(doc, ctx.out)
        return 0
    out = [f"Would build {plan.references[0]}",
           *(f"  also tagged {r}" for r in plan.references[1:]),
           f"  build hash {plan.build_hash} (lock hash {plan.lock_hash}); target {plan.target}, "
           f"base {plan.base}",
           "  from these files:", *(f"    {h}  {n}" for n, h in plan.files.items()),
           f"  and these options: engine {plan.inputs['engine']}"]
    out += [f"    --build-arg {k}={shown_text(v)}" for k, v in plan.inputs["build_args"].items()]
    out += [f"    --label {k}={v}" for k, v in plan.inputs["labels"].items()]
    out += [f"  not in the hash (they do not change the image): --build-arg {k}={shown_text(v)}"
            for k, v in plan.not_hashed.items()]
    print("\n".join(out), file=ctx.out)
    return 0
