"""Render a lock into its Docker build: Dockerfile, .dockerignore and image/*.

Pure and deterministic: the templates in images/ (blocks with @NAME@ placeholders) are filled
from the solved lock, curated/images.toml and the image options, and composed in order:
header, builder (per flavor), ops, pruned (per flavor), runtime.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from envgen import __version__, inside, validate
from envgen.errors import DataError, UsageError
from envgen.facts.images import Base, Recipes
from envgen.facts.release_model import BuildFacts
from envgen.image.naming import image_name
from envgen.lock.conda_solve import CondaPackage
from envgen.lock.flavors import flavor_for
from envgen.lock.pip_compile import PipPackage
from envgen.lock.requirements import normalize
from envgen.resolve.checks import arch_entry_text
from envgen.resolve.combination import Combination

DOCKERFILE = "Dockerfile"
DOCKERIGNORE = ".dockerignore"
BASE_LOCK = "image/base.lock.txt"
FRAMEWORK_LOCK = "image/framework.lock.txt"
BUILD_LOCK = "image/build.lock.txt"
IMAGE_LOCK_DIR = "/opt/envgen/lock"  # where the runtime image keeps the lock's files
CONDA_EXPLICIT = "image/conda-explicit.txt"
WITH_CA = "image/with-ca.sh"  # trusts the envgen-ca build secret for one command
IMAGE_WITH_CA = "/opt/envgen/with-ca.sh"  # where the builder keeps it
PLACEHOLDER = re.compile(r"@([A-Z_]+)@")
ARCH = re.compile(r"^sm_(\d+)(\d)([af]?)$")


@dataclass(frozen=True)
class ImageOptions:
    """What `make --image` was asked for, beyond the lock."""

    base: str | None = None  # replaces the matrix's base image for the combination's OS
    gpu_archs: tuple[str, ...] = ()  # sm_XX; empty: images.toml [gpu] default_archs
    apptainer: bool = False  # also the Apptainer definitions (envgen.image.apptainer)


def templates_dir() -> Path:
    """images/ in a checkout; envgen/_images in an installed wheel."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "images", here.parents[1] / "_images"):
        if (candidate / "header.in").is_file():
            return candidate
    raise DataError("envgen's Dockerfile templates (images/) are missing",
                    hint="reinstall envgen, or run it from a checkout that has images/")


def fill(template: str, values: dict[str, str], name: str) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise DataError(f"images/{name}: unknown placeholder @{m.group(1)}@",
                            hint="use only the placeholders envgen/image/render.py fills")
        return values[m.group(1)]

    return PLACEHOLDER.sub(sub, template)


def arch_list(archs: tuple[str, ...]) -> str:
    """sm_80, sm_90 → "8.0;9.0+PTX" (TORCH_CUDA_ARCH_LIST); PTX for the newest only."""
    out = []
    for arch in archs:
        m = ARCH.match(arch)
        if not m:
            raise UsageError(f"--gpu-arch {arch!r} is not a compute capability",
                             hint="use sm_XY, e.g. --gpu-arch sm_90")
        out.append((int(m.group(1)), int(m.group(2)), m.group(3)))
    out.sort()
    text = [f"{a}.{b}{s}" for a, b, s in out]
    if text and not out[-1][2]:
        text[-1] += "+PTX"
    return ";".join(text)


def _framework_misreads(arch: str, build: BuildFacts | None) -> str | None:
    """Why the framework's op builder cannot compile ``arch`` ahead of time: it raises on, or
    misreads, its TORCH_CUDA_ARCH_LIST entry (read from the release's builder.py)."""
    entry = build.arch_entry(arch, "aot") if build is not None and build.read else None
    if entry is None or entry.result not in ("fails", "misread"):
        return None
    return f"{arch_entry_text(entry)} ({entry.where}, TORCH_CUDA_ARCH_LIST={entry.entry})"


def choose_archs(requested: tuple[str, ...], recipes: Recipes, supported: tuple[str, ...],
                 build: BuildFacts | None = None, framework: str = "the framework"
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the archs the ops compile for, why each default arch was left out). A requested arch
    that nvcc cannot target, or that the framework's op builder cannot read, is refused."""
    knows = f"its ptxas knows {supported[0]} … {supported[-1]}" if supported else ""
    if requested:
        unknown = [a for a in requested if supported and a not in supported]
        if unknown:
            raise UsageError(f"nvcc for this combination cannot compile for {', '.join(unknown)} "
                             f"({knows})", hint=f"choose from: {', '.join(supported)}")
        for arch in requested:
            why = _framework_misreads(arch, build)
            if why is not None:
                raise UsageError(
                    f"{framework}'s op builder cannot compile for {arch}: {why}",
                    hint=f"pass --gpu-arch {arch.rstrip('af')} (the arch without its suffix) if "
                         "the builder reads that, or choose a release of the framework whose "
                         "builder reads it (envgen resolve --gpu-arch lists them)")
        return tuple(dict.fromkeys(requested)), ()
    chosen, left_out = [], []
    for arch in recipes.default_archs:
        if supported and arch not in supported:
            left_out.append(f"{arch}: nvcc cannot target it ({knows})")
        elif (why := _framework_misreads(arch, build)) is not None:
            left_out.append(f"{arch}: {framework}'s op builder cannot compile for it: {why}")
        else:
            chosen.append(arch)
    return tuple(chosen), tuple(left_out)


def _build_notes(skipped: tuple[tuple[str, str | None, str], ...],
                 left_out: tuple[str, ...]) -> str:
    """Dockerfile comment lines: the recipe's ops not built and default archs left out, why."""
    lines = [f"# not built: {name} ({why})" for name, _var, why in skipped]
    lines += [f"# not compiled for {why}" for why in left_out]
    for line in lines:
        validate.no_newlines(line, "a Dockerfile comment")
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class ImageInput:
    """What the renderer needs from a solved lock (see envgen.lock.files.Solved)."""

    combination: Combination
    os_family: str
    flavor: str
    gcc: int
    pip: tuple[PipPackage, ...]
    pip_options: tuple[str, ...]
    conda: tuple[CondaPackage, ...]  # in install order
    lock_hash: str
    nvcc: str | None
    regenerate: str
    # os-package flavor: the OS toolkit (harvested record fields: package, version, cuda,
    # suite, components, index), the OS packages the lock names and its CUDA_HOME
    os_toolkit: dict[str, str] | None = None
    os_packages: tuple[str, ...] = ()
    cuda_home: str | None = None
    # the hash-pinned build dependencies of the lock's sdists (installed before any build)
    build: tuple[PipPackage, ...] = ()
    # the release's build facts (how its op builder reads TORCH_CUDA_ARCH_LIST), and the
    # recipe's ops the combination cannot build: (op, its build variable, why)
    framework_build: BuildFacts | None = None
    ops_skipped: tuple[tuple[str, str | None, str], ...] = ()


def _base(inp: ImageInput, recipes: Recipes, options: ImageOptions) -> tuple[str, Base | None]:
    c = inp.combination
    base = recipes.bases.get(c.os)
    if options.base:  # checked by the CLI with its source; checked again for library callers
        return validate.image_ref(options.base, "the base image"), None
    if base is None:
        raise DataError(f"curated/images.toml has no base image for {c.os}",
                        hint="add a [[base]] for it, or pass --base IMAGE[@DIGEST]")
    return base.ref, base


def _split_pip(inp: ImageInput) -> tuple[list[PipPackage], list[PipPackage]]:
    fw = inp.combination.framework
    framework = [p for p in inp.pip if normalize(p.name) == normalize(fw)]
    if not framework:
        raise DataError(f"the pip lock holds no {fw}", hint="regenerate the lock")
    return [p for p in inp.pip if normalize(p.name) != normalize(fw)], framework


def _pip_file(what: str, options: tuple[str, ...], packages: list[PipPackage]) -> str:
    """A hash-pinned requirements file. Its header names no combination, so two locks that
    differ only in the framework give an identical base.lock.txt (and reuse its layer)."""
    out = [f"# {what}\n",
           "# Generated by envgen from requirements.lock.txt next to the Dockerfile; "
           "do not edit.\n",
           "# Regenerate with the command in that file's header (plus --image).\n"]
    out += [f"{line}\n" for line in options]
    out.append("\n")
    for p in packages:
        out.append(" \\\n".join([f"{p.name}=={p.version}",
                                 *(f"    --hash=sha256:{h}" for h in p.hashes)]) + "\n")
    return "".join(out)


def _conda_explicit(inp: ImageInput) -> str:
    lines = ["# conda packages of the lock, in conda's explicit format (URL#md5)\n",
             "# Generated by envgen from envgen.lock.json next to the Dockerfile; do not edit.\n",
             "@EXPLICIT\n"]
    lines += [f"{p.url}#{p.md5}\n" for p in inp.conda]
    return "".join(lines)


def _matching(names: list[str], patterns: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names if any(fnmatch.fnmatchcase(n, pat) for pat in patterns)})


def _env_lines(env: dict[str, str], values: dict[str, str]) -> str:
    return "".join(f" \\\n    {k}={v.format(**values)}" for k, v in sorted(env.items()))


def _labels(inp: ImageInput, base_ref: str, base: Base | None, archs: str, tag: str,
            ops: tuple[str, ...]) -> str:
    c = inp.combination
    labels = {
        "org.opencontainers.image.title": f"{c.framework} {c.framework_version} + torch "
                                          f"{c.torch} (CUDA {c.cuda}), Python {c.python}, {c.os}",
        "org.opencontainers.image.description": f"envgen image for {c.id}: ops "
                                                f"{' '.join(ops)} compiled for {archs}",
        "org.opencontainers.image.version": tag,
        "org.opencontainers.image.base.name": base.image if base else base_ref.split("@")[0],
        "io.envgen.combination": c.id,
        "io.envgen.lock-hash": inp.lock_hash,
        "io.envgen.flavor": inp.flavor,
        "io.envgen.framework": c.framework,
        "io.envgen.framework-version": c.framework_version,
        "io.envgen.torch": c.torch,
        "io.envgen.cuda": c.cuda,
        "io.envgen.python": c.python,
        "io.envgen.os": c.os,
        "io.envgen.cuda-arch-list": archs,
        "io.envgen.ops": " ".join(ops),
        # the lock the env was installed from, inside the image (its hash: io.envgen.lock-hash)
        "io.envgen.lock": IMAGE_LOCK_DIR,
    }
    if "@" in base_ref:
        labels["org.opencontainers.image.base.digest"] = base_ref.split("@", 1)[1]
    return " \\\n      ".join(f"{k}={dockerfile_string(v)}" for k, v in sorted(labels.items()))


def dockerfile_string(value: str) -> str:
    """``value`` as a double-quoted Dockerfile word (LABEL, ENV): backslash, quote and ``$``
    (variable substitution) escaped; a line break refused."""
    validate.no_newlines(value, "a Dockerfile value")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _apt_sources(inp: ImageInput, recipes: Recipes) -> str:
    """os-package flavor: the command enabling the toolkit's component, then ``&&``."""
    if inp.flavor != "os-package":
        return ""
    t = inp.os_toolkit or {}
    template = recipes.os_package_sources.get(inp.os_family)
    if template is None or not t:
        raise DataError(f"curated/images.toml has no [os_package.{inp.os_family}] sources "
                        f"command for the {inp.os_family} family",
                        hint="add one that writes the apt sources entry of the toolkit")
    values = {k: shlex.quote(t[k]) for k in ("index", "suite")}
    values["components_quoted"] = shlex.quote(t["components"])
    return template.format(**values) + " \\\n && "


def _nvcc_guard(inp: ImageInput) -> str:
    """os-package flavor: the OS's nvcc must be the release the lock was made for (a newer
    point release of the OS could bring another toolkit)."""
    t = inp.os_toolkit or {}
    want = t.get("cuda", inp.combination.nvcc)
    return (f"nvcc --version | grep -F 'release {want},' || {{ echo \"envgen: the OS's nvcc is "
            f"not CUDA {want} ({t.get('package', 'nvidia-cuda-toolkit')} "
            f"{t.get('version', '')} was locked); re-run envgen make\" >&2; exit 1; }}")


@dataclass(frozen=True)
class BuilderToolkit:
    """How the builder stage gets the CUDA compiler of a lock flavor: environment lines, setup
    commands, what to prune from the runtime, the builder's OS packages, CC/CXX, extra files."""

    env: str
    setup: list[str]
    prune_names: list[str]
    prune: str
    builder_packages: tuple[str, ...]
    cc: str
    cxx: str
    files: dict[str, str] = field(default_factory=dict)


def _venv_toolkit(inp: ImageInput, recipes: Recipes, family, values: dict) -> BuilderToolkit:
    """NVIDIA's pip toolkit inside the venv ([[venv_toolkit]] of images.toml for its CUDA)."""
    c = inp.combination
    toolkit = recipes.venv_toolkit(c.cuda)
    if toolkit is None:
        raise DataError(f"curated/images.toml has no [[venv_toolkit]] for CUDA {c.cuda}",
                        hint="add one with its cuda_home and fix-ups")
    values["cuda_home"] = (f"/opt/env/lib/python{values['python']}/site-packages/"
                           f"{toolkit.cuda_home}")
    values["cc"] = family.cc.format(**values)
    prune_names = _matching([p.name for p in inp.pip], toolkit.build_only)
    return BuilderToolkit(
        env=_env_lines(toolkit.env, values), setup=[s.format(**values) for s in toolkit.setup],
        prune_names=prune_names,
        prune=f"python -m pip uninstall --yes {' '.join(prune_names)}" if prune_names else "",
        builder_packages=(*family.python, *family.builder),
        cc=family.cc.format(**values), cxx=family.cxx.format(**values))


def _os_package_toolkit(inp: ImageInput, recipes: Recipes, family,
                        values: dict) -> BuilderToolkit:
    """The OS's own toolkit package, installed with the builder's packages and checked."""
    values["cc"] = family.cc.format(**values)
    return BuilderToolkit(
        env="", setup=[_nvcc_guard(inp)], prune_names=[], prune="",
        builder_packages=tuple(dict.fromkeys((*family.python, *family.builder,
                                              *inp.os_packages))),
        cc=family.cc.format(**values), cxx=family.cxx.format(**values))


def _conda_toolkit(inp: ImageInput, recipes: Recipes, family, values: dict) -> BuilderToolkit:
    """conda's nvcc and gcc inside the env; the build-only conda packages pruned after."""
    values["target"] = recipes.conda.targets.get(inp.combination.platform, "")
    prune_names = _matching([p.name for p in inp.conda], recipes.conda.build_only)
    return BuilderToolkit(
        env=_env_lines(recipes.conda.env, values), setup=[], prune_names=prune_names,
        prune=(f"python /tmp/envgen/prune-conda.py /opt/env {' '.join(prune_names)}"
               if prune_names else ""),
        builder_packages=family.conda_builder, cc="gcc", cxx="g++",
        files={CONDA_EXPLICIT: _conda_explicit(inp),
               "image/prune-conda.py": inside.path("prune-conda.py").read_text(
                   encoding="utf-8")})


# the builder stage's toolkit per lock flavor (envgen.lock.flavors names them)
_BUILDER_TOOLKITS = {"venv": _venv_toolkit, "os-package": _os_package_toolkit,
                     "conda": _conda_toolkit}


SINGLE_LINE = ("ID", "REGENERATE", "REPOSITORY", "TAG", "BASE", "BASE_IMAGE", "FRAMEWORK",
               "FRAMEWORK_VERSION", "PYTHON", "NVCC", "ARCH_LIST", "OPS", "OPS_ARGS",
               "MICROMAMBA", "CUDA_HOME", "CC", "CXX")


def render_image(inp: ImageInput, recipes: Recipes, options: ImageOptions,
                 supported_archs: tuple[str, ...] = ()) -> tuple[dict[str, str], dict]:
    """(file name → text, the manifest's "image" section)."""
    c = inp.combination
    family = recipes.families.get(inp.os_family)
    if family is None:
        raise DataError(f"curated/images.toml has no [family.{inp.os_family}] for {c.os}",
                        hint="add [family.<name>] with its install command and packages")
    ops = recipes.ops.get(c.framework)
    if ops is None:
        raise DataError(f"curated/images.toml has no [ops.{c.framework}]",
                        hint="add the framework's op build recipe to curated/images.toml")
    base_ref, base = _base(inp, recipes, options)
    python = c.python.rstrip("t")
    flavor = flavor_for(inp.flavor)
    if not flavor.own_python and base and python not in base.python:
        same = c.os.split("-")[0]  # an OS of the same distribution first
        with_it = sorted((o for o, b in recipes.bases.items() if python in b.python),
                         key=lambda o: (o.split("-")[0] != same, o))
        raise UsageError(
            f"the {inp.flavor} flavor builds on the OS's Python, and {c.os} has Python "
            f"{', '.join(base.python)}, not {python}",
            hint=(f"pass --os {with_it[0]} (its Python is {python}), or " if with_it else
                  "pass ") + f"--python {base.python[-1]}, or --flavor conda (it brings its "
            "own Python), or --base IMAGE with that Python")
    framework = f"{c.framework} {c.framework_version}"
    archs, left_out = choose_archs(options.gpu_archs, recipes, supported_archs,
                                   inp.framework_build, framework)
    if not archs:
        raise UsageError("no GPU architecture to compile the ops for"
                         + (f" (left out: {'; '.join(left_out)})" if left_out else ""),
                         hint="pass --gpu-arch sm_XY (e.g. sm_90)")
    arch_text = arch_list(archs)
    values = {"python": python, "gcc": str(inp.gcc), "cuda": c.cuda}

    def pkgs(names: tuple[str, ...]) -> str:
        return " ".join(dict.fromkeys(n.format(**values) for n in names))

    runtime = family.runtime_by_os.get(c.os, family.runtime)
    base_pkgs, framework_pkgs = _split_pip(inp)
    name = image_name(c, recipes.naming, registry=None)
    uses_ccache = "ccache" in (family.conda_builder if flavor.env_kind == "conda"
                               else family.builder)

    files: dict[str, str] = {
        BASE_LOCK: _pip_file("pip lock without the framework (the builder's first pip layer)",
                             inp.pip_options, base_pkgs),
        FRAMEWORK_LOCK: _pip_file("the framework, built with its ops in the builder",
                                  inp.pip_options, framework_pkgs),
        **({BUILD_LOCK: _pip_file("build dependencies of the lock's sdists (installed first, "
                                  "hash-checked; then every sdist builds without isolation)",
                                  inp.pip_options, list(inp.build))} if inp.build else {}),
    }
    tpl = templates_dir()
    files["image/check-ops.py"] = inside.path("check-ops.py").read_text(encoding="utf-8")
    files["image/portable-cc.sh"] = (tpl / "portable-cc.sh").read_text(encoding="utf-8")
    files[WITH_CA] = (tpl / "with-ca.sh").read_text(encoding="utf-8")
    arch = c.platform.split("-", 1)[1]
    portable = recipes.portable.get(arch)
    if portable is None:
        raise DataError(f"curated/images.toml [portable] has no flags for {arch}",
                        hint=f"add [portable.{arch}] with the portable -march to compile for")
    files["image/portable-flags"] = (
        f"# host-specific flag → portable flag for {arch} (curated/images.toml [portable])\n"
        + "".join(f"{k} {v}\n" for k, v in sorted(portable.items())))
    bt = _BUILDER_TOOLKITS[flavor.name](inp, recipes, family, values)
    files.update(bt.files)
    toolkit_env, setup, prune_names, prune = bt.env, bt.setup, bt.prune_names, bt.prune
    builder_pkgs, cc, cxx = bt.builder_packages, bt.cc, bt.cxx
    ops_files = ["image/framework.lock.txt", "image/check-ops.py"]
    env = {**recipes.ops_build_env, **ops.env}
    skipped = {op for op, _var, _why in inp.ops_skipped}
    built = tuple(o for o in ops.ops if not set(o.split("|")) & skipped)
    for op, var, _why in inp.ops_skipped:
        if any(op in o.split("|") for o in ops.ops):
            if not var or var not in env:
                raise DataError(f"{framework} cannot build {op}, and curated/images.toml "
                                f"[ops.{c.framework}] builds it without a variable envgen "
                                f"knows to turn off ({var or 'its BUILD_VAR was not read'})",
                                hint=f"set the op's build variable in [ops.{c.framework}] env")
            env[var] = "0"  # the op's own switch (DS_BUILD_AIO): not built, not checked
    if ops.gpu_query_shim:  # see envgen/inside/sitecustomize.py
        files["image/sitecustomize.py"] = inside.path("sitecustomize.py").read_text(
            encoding="utf-8")
        ops_files.append("image/sitecustomize.py")
        env.update(ENVGEN_GPU_QUERY_SHIM="1", PYTHONPATH="/tmp/envgen")
    ops_env = "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(env.items()))
    ops_env += "\\\n    " if ops_env else ""
    fill_values = {
        "ID": c.id, "FLAVOR": inp.flavor, "VERSION": __version__, "REGENERATE": inp.regenerate,
        "REPOSITORY": name.repository, "TAG": name.tag, "BASE": base_ref,
        "BASE_IMAGE": base_ref.split("@")[0], "FRAMEWORK": c.framework,
        "FRAMEWORK_VERSION": c.framework_version, "OPS": " ".join(built),
        "OPS_ARGS": " ".join(map(shlex.quote, built)),
        "BUILD_NOTES": _build_notes(tuple(o for o in inp.ops_skipped
                                          if any(o[0] in r.split("|") for r in ops.ops)),
                                    left_out),
        "NVCC": inp.nvcc or "?", "ARCH_LIST": arch_text, "PYTHON": python,
        "MICROMAMBA": recipes.conda.ref, "MICROMAMBA_PATH": recipes.conda.path,
        "CA_BUNDLE": family.ca_bundle, "WITH_CA": f"sh {IMAGE_WITH_CA} ",
        "INSTALL_BUILDER": _apt_sources(inp, recipes)
        + family.install.format(packages=pkgs(builder_pkgs)),
        "INSTALL_RUNTIME": family.install.format(packages=pkgs(runtime)),
        "USERADD": family.useradd,
        "CUDA_HOME": inp.cuda_home or values.get("cuda_home", "/opt/env"),
        "TOOLKIT_ENV": toolkit_env,
        "TOOLKIT_SETUP": "RUN " + " \\\n && ".join(setup) if setup else "",
        "OPS_ENV": ops_env, "CC": cc, "CXX": cxx,
        "CCACHE": "CCACHE_DIR=/root/.cache/ccache " if uses_ccache else "",
        "CHECK": ops.check, "PRUNE": prune or "true", "OPS_FILES": " ".join(ops_files),
        "BUILD_ONLY_NOTE": " ".join(prune_names) or "nothing",
        "ENV_KEY": "CONDA_PREFIX" if flavor.env_kind == "conda" else "VIRTUAL_ENV",
        "LABELS": _labels(inp, base_ref, base, arch_text, name.tag, built),
        "BASE_LOCKS": " ".join([BASE_LOCK, *([BUILD_LOCK] if inp.build else [])]),
        "BUILD_DEPS": ("/opt/env/bin/python -m pip install --no-deps --require-hashes -r "
                       f"/tmp/envgen/build.lock.txt \\\n && sh {IMAGE_WITH_CA} "
                       if inp.build else ""),
        "NO_ISOLATION": "--no-build-isolation " if inp.build else "",
        "LOCK_FILES": " ".join(n for n in (CONDA_EXPLICIT, BASE_LOCK, FRAMEWORK_LOCK, BUILD_LOCK)
                               if n in files),
    }
    for key in SINGLE_LINE:  # a line break here would add Dockerfile instructions
        validate.no_newlines(fill_values[key], f"the Dockerfile's {key.lower()}")
    env_kind = flavor.env_kind  # os-package: a venv too
    blocks = ["header.in", f"builder-{env_kind}.in", "ops.in", f"prune-{env_kind}.in",
              "runtime.in"]
    text = "".join(fill((tpl / b).read_text(encoding="utf-8"), fill_values, b) for b in blocks)
    text = re.sub(r"\n{3,}", "\n\n", text.replace("\n\n\n", "\n\n"))
    files[DOCKERFILE] = text
    if options.apptainer:
        from envgen.image.apptainer import definitions

        files.update(definitions(text, combination=c.id, regenerate=inp.regenerate,
                                 image_ref=name.ref()))
    files[DOCKERIGNORE] = ("# Generated by envgen; the build context is image/ only.\n"
                           "*\n!image/\n")
    section = {
        "dockerfile": DOCKERFILE, "base": base_ref, "cuda_arch_list": arch_text,
        "ops": list(built), "repository": name.repository, "tag": name.tag,
        "build_only": prune_names,
    }
    return files, section
