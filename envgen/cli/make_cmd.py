"""``envgen make``: resolve the best combination and write its locked environment."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from envgen import validate
from envgen.cli.context import Context
from envgen.cli.render import dump_json
from envgen.cli.resolve_cmd import (
    AXES,
    add_request_options,
    request_from_args,
    resolve_or_explain,
)
from envgen.config import cache_root
from envgen.errors import UsageError
from envgen.facts import load_facts
from envgen.harvest.sources import load_sources
from envgen.lock import LockOptions, lock, write_lock
from envgen.lock.files import MANIFEST
from envgen.resolve.combination import Combination, parse_combination_id

EPILOG = """\
examples:
  envgen make --framework deepspeed --cuda 12.1
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --out locks
  envgen make --framework deepspeed --flavor os-package --os debian-13 --image
  envgen make --framework colossalai --python 3.11 --channel https://mirror.example/conda-forge
  envgen make --framework megatron-core --index-url https://pypi.mirror.example/simple \\
      --torch-index-url https://torch.mirror.example/whl/cu124 --ca-cert /etc/ssl/corp.pem

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


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("make", parents=[common], help="resolve and lock an environment",
                       description="Resolve the best combination for a request and write its "
                       "conda and pip locks.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_request_options(p)
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
    g.add_argument("--base", metavar="IMAGE",
                   help="base image for the builder and runtime stages (default: the one "
                   "curated/images.toml pins by digest for the combination's OS); config "
                   "base-image, env ENVGEN_BASE_IMAGE")
    add_source_options(p)
    p.set_defaults(func=run)


def check_ca_cert(ca_cert: Path | None, source: str | None = "--ca-cert") -> None:
    """A CA bundle must be a readable PEM file with at least one certificate."""
    if not ca_cert:
        return
    path = Path(ca_cert)
    try:
        text = path.read_text(encoding="ascii", errors="replace")
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


def options_from_args(args: argparse.Namespace, ctx: Context) -> LockOptions:
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


def _conflicts(request, fields: dict[str, str]) -> list[str]:
    """Request flags the combination id contradicts ("--cuda 12.1 (the id has 13.2)")."""
    from envgen.resolve.request import PLATFORM_ALIASES, cuda_matches, matcher

    out = []
    for axis, value in fields.items():
        asked = getattr(request, axis)
        if asked is None or (axis == "platform" and asked == "linux-x86_64"):
            continue
        if axis in ("torch", "framework_version"):
            ok = matcher(f"--{axis.replace('_', '-')}", asked)(value)
        elif axis == "cuda":
            ok = cuda_matches(asked.lower().removeprefix("cu"), value)
        elif axis == "platform":
            ok = PLATFORM_ALIASES.get(asked, asked) == value
        else:
            ok = asked.strip().lower().replace("_", "-") == value
        if not ok:
            out.append(f"--{axis.replace('_', '-')} {asked} (the id has {value})")
    return out


def choose(args: argparse.Namespace, ctx: Context, facts) -> Combination:
    from dataclasses import replace

    request = request_from_args(args, ctx)
    combination = getattr(args, "combination", None)
    if combination:
        combination = validate.text(combination, "--combination", "--combination").strip()
        fields = parse_combination_id(combination)
        if fields is None:
            raise UsageError(f"--combination {combination!r} is not a combination id",
                             hint="copy an id from `envgen resolve` (framework-version-torchX-"
                             "cuXY-pyX.Y-osNN-arch)", source="--combination")
        # only flags can contradict the id; [defaults] from a config file are just defaults
        from_flags = replace(request, **{
            a: ("linux-x86_64" if a == "platform" else None) for a in AXES
            if not ctx.sources.get(a, "").startswith("--")})
        clash = _conflicts(from_flags, fields)
        if clash:
            raise UsageError(f"--combination {combination} contradicts {', '.join(clash)}",
                             hint="drop the contradicting option(s): --combination already "
                             "pins framework, versions, CUDA, Python, OS and platform",
                             source="--combination")
        request = replace(request, **fields)
    if request.flavor is None:
        request = replace(request, flavor="conda")
    combo = resolve_or_explain(request, facts, ctx, limit=1)[0]
    if combination and combo.id != combination:
        raise UsageError(f"the matrix has no combination {combination}",
                         hint=f"the closest is {combo.id}; list them with `envgen resolve`",
                         source="--combination")
    return combo


def _is_lock_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def run(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    if args.base and not args.image:
        raise UsageError("--base only applies with --image", hint="add --image", source="--base")
    if args.image and getattr(args, "nvcc", None):
        raise UsageError("--nvcc (a toolkit already on the machine) cannot be combined with "
                         "--image: envgen's image installs the toolkit matched to torch",
                         hint="drop --nvcc to build an image, or drop --image to lock for the "
                         "machine whose nvcc you named", source="--nvcc")
    out = ctx.setting(args, "out") or validate.path("locks", "--out")
    options = options_from_args(args, ctx)
    image = None
    if args.image:  # every setting is checked before any work starts
        from envgen.image import ImageOptions
        from envgen.resolve.request import normalize_arch

        archs = (normalize_arch(args.gpu_arch),) if args.gpu_arch else ()
        image = ImageOptions(base=ctx.setting(args, "base-image"), gpu_archs=archs)
    facts = load_facts(ctx.matrix_dir, ctx.data_dir)
    combo = choose(args, ctx, facts)
    ctx.progress(f"resolved {combo.id}")
    recipes = None
    if image is not None:
        from dataclasses import replace

        from envgen.image import load_recipes
        from envgen.resolve.request import Request
        from envgen.resolve.request import validate as check_request

        if not image.gpu_archs and getattr(args, "gpu", None):  # --gpu H100: build for sm_90
            arch = check_request(Request(gpu=args.gpu), facts).gpu_arch
            image = replace(image, gpu_archs=(arch,) if arch else ())
        recipes = load_recipes(ctx.matrix_dir)
        options = replace(options, image=image)
    has_sources = (Path(ctx.matrix_dir) / "sources.toml").exists()
    sources = ({i.name: i.url for i in load_sources(ctx.matrix_dir).indexes}
               if has_sources else {})
    result = lock(facts, combo, options, sources, progress=ctx.progress, recipes=recipes)
    target = write_lock(out, result, source=ctx.source("out", "--out"),
                        on_debris=lambda p: ctx.progress(f"removed {p}, left by an "
                                                         "interrupted envgen run"))
    elapsed = time.monotonic() - started
    if ctx.json:
        dump_json({
            "id": combo.id, "directory": str(target), "flavor": result.plan.flavor,
            "lock_hash": result.lock_hash, "inputs_hash": result.plan.inputs_hash(),
            "files": sorted(result.files), "conda_packages": len(result.conda),
            "pip_packages": len(result.pip), "nvcc": result.nvcc, "gcc": result.plan.gcc,
            "combination": combo.to_dict(), "seconds": round(elapsed, 3),
            "image": json.loads(result.files[MANIFEST]).get("image"),
        }, ctx.out)
        return 0
    toolkit = facts.toolkits.get(combo.nvcc)
    print(summary(result, combo, shown(target), elapsed,
                  toolkit.max_gcc if toolkit else None), file=ctx.out)
    return 0


def shown(path: Path) -> Path:
    """A path as the user would type it: relative to the working directory when inside it."""
    import os

    rel = os.path.relpath(path)
    return Path(rel) if not rel.startswith("..") else path


def summary(result, c: Combination, target: Path, elapsed: float, max_gcc: int | None) -> str:
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
                f"(nvcc {c.cuda} accepts ≤ {max_gcc or '?'}); libaio, ninja")
    else:
        tool = (f"pip: nvcc {result.nvcc} = torch's CUDA {c.cuda}; from the OS: "
                f"{' '.join(plan.os_packages)}")
    lines = [
        f"Locked {c.id}",
        f"  {c.framework} {c.framework_version} + {c.torch_pin} ({src}), Python {c.python}, "
        f"{c.os}, {c.platform}",
        f"  toolchain ({tool})",
        f"  {len(result.conda)} conda + {len(result.pip)} pip packages, every file hash-pinned; "
        f"lock hash {result.lock_hash[:19]}…",
    ]
    lines += [f"  note: {n}" for n in c.notes if "curated data only" not in n]
    files = "  ".join(sorted(result.files))
    lines.append(f"Wrote {target}/  ({files})  in {elapsed:.1f} s")
    lines.append(f"Install: envgen install {target} --prefix ./env")
    image = json.loads(result.files[MANIFEST]).get("image")
    if image:
        lines.append(f"Image:   envgen build {target}   ({image['repository']}:{image['tag']}, "
                     f"base {image['base']}, ops for {image['cuda_arch_list']})")
    return "\n".join(lines)

