"""``envgen make``: resolve the best combination and write its locked environment."""

from __future__ import annotations

import argparse
from pathlib import Path

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.options import (
    add_source_options,
    cache_dir,
    one_ca_cert,
    shown,
)
from envgen.cli.render import dump_json
from envgen.cli.resolve_cmd import (
    AXES,
    add_policy_options,
    add_request_options,
    explained,
    policy_from_args,
    request_from_args,
    with_machine,
)
from envgen.errors import UsageError
from envgen.shellcmd import command

EPILOG = """\
examples:
  envgen make --framework deepspeed --cuda 12.1
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --out locks
  envgen make --framework deepspeed --flavor os-package --os debian-13 --image
  envgen make --framework deepspeed --gpu auto --driver auto --image   # for this machine
  envgen make --framework colossalai --python 3.11 --channel https://mirror.example/conda-forge
  envgen make --framework megatron-core --index-url https://pypi.mirror.example/simple \\
      --torch-index-url https://torch.mirror.example/whl/cu124 --ca-cert /etc/ssl/corp.pem

The combination is the best for the request under the ranking policy (`envgen resolve
--help`: --prefer verified, the default, takes one proven on GPUs over a newer untested
one; --prefer newest; --min-tier T3). The summary names its tier and the record behind it.
Writes OUT/<combination id>/: environment.yml, conda-lock.yml (conda flavor),
requirements.lock.txt (pip-tools format, --hash for every file) and envgen.lock.json.
The conda part is solved with py-rattler for the target's platform and virtual packages
(__cuda, __glibc, __linux from the combination, not this machine); the pip part with
`uv pip compile` for the target Python and manylinux platform. Same inputs, same bytes.

sources (flag, then envgen.toml / [tool.envgen], then environment variable):
  --channel          channels            ENVGEN_CHANNELS (space-separated)
  --channel-alias    channel-alias       ENVGEN_CHANNEL_ALIAS
  --index-url        index-url           ENVGEN_INDEX_URL
  --extra-index-url  extra-index-url     ENVGEN_EXTRA_INDEX_URL (space-separated)
  --torch-index-url  torch-index-url     ENVGEN_TORCH_INDEX_URL
  --ca-cert          ca-cert             ENVGEN_CA_CERT
  --cache-dir        cache-dir           ENVGEN_CACHE_DIR

exit codes: 0 written, 1 failure (solve, data), 2 usage error, 3 no feasible combination,
4 environment (an unreachable channel or index, the filesystem). Nothing is written unless
everything succeeded; OUT/<id>/ is replaced only if envgen wrote it (a file or a folder of
yours there is refused).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("make", parents=[common], help=help_for("make"),
                       description="Resolve the best combination for a request and write its "
                       "conda and pip locks.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_request_options(p)
    add_policy_options(p)
    p.add_argument("--combination", metavar="ID",
                   help="lock exactly this combination id (as `envgen resolve` prints it, e.g. "
                   "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64); replaces the "
                   "request options")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write <combination id>/ (default: ./locks)")
    p.add_argument("--exclude-newer", metavar="DATE",
                   help="ignore packages published after DATE (RFC 3339, e.g. 2026-11-01) "
                   "so a re-lock later gives the same result")
    g = p.add_argument_group("image")
    g.add_argument("--image", action="store_true",
                   help="also write a Dockerfile, .dockerignore and image/ that build this lock "
                   "into an image with the framework's ops compiled (then: envgen build DIR)")
    g.add_argument("--apptainer", action="store_true",
                   help="--image, plus Apptainer definitions of the same image in apptainer/: "
                   "envgen.def (self-contained: the lock installed and the ops compiled in "
                   "%%post) and from-image.def (from the image envgen build made); build with "
                   "`apptainer build envgen.sif apptainer/envgen.def` in the lock directory")
    g.add_argument("--base", metavar="IMAGE",
                   help="base image for the builder and runtime stages (default: the one "
                   "curated/images.toml pins by digest for the combination's OS); config "
                   "base-image, env ENVGEN_BASE_IMAGE")
    add_source_options(p)
    p.set_defaults(func=run)


def options_from_args(args: argparse.Namespace, ctx: Context):
    """The LockOptions of make / evidence: flavor, sources, cache, CA bundle (checked)."""
    from envgen.lock.plan import LockOptions

    channels = ctx.setting(args, "channels")
    exclude_newer = args.exclude_newer
    if exclude_newer is not None:
        exclude_newer = validate.date(exclude_newer, "--exclude-newer", "--exclude-newer")
    return LockOptions(
        flavor=args.flavor or "conda",
        channels=tuple(channels) if channels else None,
        channel_alias=ctx.setting(args, "channel-alias"),
        index_url=ctx.setting(args, "index-url"),
        extra_index_urls=tuple(ctx.setting(args, "extra-index-url") or ()),
        torch_index_url=ctx.setting(args, "torch-index-url"),
        exclude_newer=exclude_newer,
        offline=bool(getattr(args, "offline", False)),
        cache_dir=cache_dir(ctx, args),
        ca_cert=one_ca_cert(ctx, args),
    )


def make_request(args: argparse.Namespace, ctx: Context):
    """argv + config → (the typed request of ``envgen.api.make``, what --driver/--gpu auto
    read or None); every setting checked."""
    from envgen.api import ImageOptions, MakeRequest
    from envgen.resolve.request import normalize_arch

    if args.base and not (args.image or args.apptainer):
        raise UsageError("--base only applies with --image", hint="add --image", source="--base")
    out = ctx.setting(args, "out") or validate.path("locks", "--out")
    options = options_from_args(args, ctx)
    request, machine = with_machine(request_from_args(args, ctx), ctx)
    image = None
    if args.image or args.apptainer:  # every setting is checked before any work starts
        arch = args.gpu_arch or (machine.gpu_arch if machine and not machine.gpu else None)
        archs = (normalize_arch(arch),) if arch else ()  # --gpu auto: the GPU read here
        image = ImageOptions(base=ctx.setting(args, "base-image"), gpu_archs=archs,
                             apptainer=bool(args.apptainer))
    combination = getattr(args, "combination", None)
    if combination:
        combination = validate.text(combination, "--combination", "--combination").strip()
    explicit = frozenset(a for a in AXES if ctx.sources.get(a, "").startswith("--"))
    prefer, min_tier = policy_from_args(args, ctx)
    made = MakeRequest(request=request, combination=combination, explicit=explicit, out=out,
                       out_source=ctx.source("out", "--out"), lock=options, image=image,
                       prefer=prefer, min_tier=min_tier)
    return made, machine


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import make

    req, machine = make_request(args, ctx)
    with explained(ctx, machine):
        made = make(req, matrix=ctx.matrix, progress=ctx.progress, on_debris=ctx.progress)
    if ctx.json:
        doc = made.to_dict()
        if machine is not None:
            doc["machine"] = machine.to_dict()
        dump_json(doc, ctx.out)
        return 0
    if machine is not None:
        print(validate.shown(machine.line()), file=ctx.out)
    print(summary(made, shown(made.directory)), file=ctx.out)
    return 0


def summary(made, target: Path) -> str:
    result, c = made.lock, made.combination
    plan = result.plan
    src = "PyPI" if c.torch_index == "pypi" else c.torch_index
    if c.nvcc_from == "system":
        tool = (f"the system nvcc {c.nvcc} (--nvcc; set CUDA_HOME to it) for torch's CUDA "
                f"{c.cuda}; gcc {plan.gcc}")
    elif c.nvcc_from == "os-package":
        t = plan.os_toolkit or {}
        tool = (f"{c.os}'s {t.get('package')} {t.get('version')} (nvcc {c.nvcc}) for torch's "
                f"CUDA {c.cuda}, CUDA_HOME={plan.env.get('CUDA_HOME')}; from the OS: "
                f"{' '.join(plan.os_packages)}")
    elif plan.flavor == "conda":
        tool = (f"conda: cuda-nvcc {result.nvcc} = torch's CUDA {c.cuda}; gcc {plan.gcc} "
                f"(nvcc {c.cuda} accepts ≤ {made.max_gcc or '?'}); libaio, ninja")
    else:
        tool = (f"pip: nvcc {result.nvcc} = torch's CUDA {c.cuda}; from the OS: "
                f"{' '.join(plan.os_packages)}")
    lines = [
        f"Locked {c.id}",
        f"  {c.framework} {c.framework_version} + {c.torch_pin} ({src}), Python {c.python}, "
        f"{c.os}, {c.platform}",
        f"  toolchain ({tool})",
        f"  evidence: {made.standing.line() if made.standing else 'no evidence yet'}",
        f"  {len(result.conda)} conda + {len(result.pip)} pip packages"
        + (f" + {len(result.build.packages)} build dependencies of the sdists "
           f"({', '.join(b.name for b in result.build.sdists)})" if result.build else "")
        + f", every file hash-pinned; lock hash {result.lock_hash[:19]}…",
    ]
    lines += [f"  note: {n}" for n in c.notes if "curated data only" not in n]
    files = "  ".join(sorted(result.files))
    lines.append(f"Wrote {target}/  ({files})  in {made.seconds:.1f} s")
    lines.append(f"Install: {command('envgen', 'install', target, '--prefix', './env')}")
    image = result.manifest.image
    if image:
        lines.append(f"Image:   {command('envgen', 'build', target)}   "
                     f"({image.repository}:{image.tag}, base {image.base}, ops for "
                     f"{image.cuda_arch_list})")
    if "apptainer/envgen.def" in result.files:
        lines.append(f"Apptainer: {command('cd', target)} && apptainer build envgen.sif "
                     "apptainer/envgen.def   (or apptainer/from-image.def after envgen build)")
    return validate.shown_lines("\n".join(lines))  # a path's control characters escaped
