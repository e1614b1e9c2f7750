"""What a lock asks the solvers for: the conda specs and pip requirements of one combination.

Pure: facts + combination + options in, a ``LockPlan`` out. The plan is also what the lock's
inputs hash covers, so two runs with the same plan must produce the same files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from envgen.errors import DataError, UsageError
from envgen.facts.model import CudaRule, Facts, Toolchain
from envgen.resolve.combination import Combination
from envgen.versions import dotted_key


@dataclass(frozen=True)
class LockOptions:
    """How to lock: flavor, where packages come from, and how to reach them."""

    flavor: str = "conda"
    channels: tuple[str, ...] | None = None  # replaces toolchain.toml's channels entirely
    channel_alias: str | None = None  # replaces toolchain.toml's (a mirror of anaconda.org)
    index_url: str | None = None  # replaces PyPI
    extra_index_urls: tuple[str, ...] = ()
    torch_index_url: str | None = None  # replaces PyTorch's index for the combination's CUDA
    exclude_newer: str | None = None  # RFC 3339 date: ignore packages uploaded later
    offline: bool = False
    cache_dir: Path | None = None
    ca_cert: Path | None = None
    image: object | None = None  # envgen.image.render.ImageOptions: also write a Dockerfile
    gpu_archs: tuple[str, ...] = ()  # --gpu/--gpu-arch: the env's TORCH_CUDA_ARCH_LIST


@dataclass(frozen=True)
class CondaPlan:
    channels: tuple[str, ...]  # URLs, in priority order
    specs: tuple[str, ...]
    subdir: str
    virtual: tuple[tuple[str, str, str], ...]  # (name, version, build) of target virtual pkgs


@dataclass(frozen=True)
class PipPlan:
    requirements: tuple[str, ...]
    index_url: str
    extra_index_urls: tuple[str, ...]
    python_version: str
    python_platform: str  # uv's --python-platform, e.g. x86_64-manylinux_2_35


@dataclass(frozen=True)
class LockPlan:
    combination: Combination
    flavor: str
    conda: CondaPlan | None
    pip: PipPlan
    gcc: int
    os_packages: tuple[str, ...] = ()  # venv flavor: what the OS must provide
    env: dict[str, str] = field(default_factory=dict)  # for op builds (CUDA_HOME)
    exclude_newer: str | None = None
    # os-package flavor: the OS toolkit the ops are built with (package, version, cuda, …)
    os_toolkit: dict[str, str] | None = None

    def inputs(self) -> dict:
        """Everything the solvers see; the inputs hash is taken over this."""
        return {
            "combination": self.combination.id,
            "flavor": self.flavor,
            "conda": asdict(self.conda) if self.conda else None,
            "pip": asdict(self.pip),
            "gcc": self.gcc,
            "os_packages": list(self.os_packages),
            "exclude_newer": self.exclude_newer,
            **({"os_toolkit": self.os_toolkit} if self.os_toolkit else {}),
        }

    def inputs_hash(self) -> str:
        blob = json.dumps(self.inputs(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def channel_url(channel: str, alias: str) -> str:
    """A name → <alias>/<name> (conda-forge → https://conda.anaconda.org/conda-forge);
    a path → file:// URL; a URL stays."""
    c = channel.strip().rstrip("/")
    if "://" in c:
        return c
    if c.startswith(("/", "./", "../", "~")):
        return Path(c).expanduser().resolve().as_uri()
    return f"{alias.rstrip('/')}/{c}"


def _fill(template: str, **values: str | int) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError) as exc:
        raise DataError(f"curated/toolchain.toml: unknown placeholder {exc} in {template!r}",
                        hint="use only {cuda}, {release}, {python} and {gcc}") from None


def conda_gcc(facts: Facts, combo: Combination) -> int:
    """The newest conda-forge gcc that the CUDA toolkit's host_config.h accepts."""
    toolkit = facts.toolkits.get(combo.nvcc)
    top = toolkit.max_gcc if toolkit else None
    usable = [g for g in facts.policy.conda_gcc if top is None or g <= top]
    if not usable:
        raise DataError(f"no conda-forge gcc (policy.toml conda_gcc) is ≤ {top}, the maximum "
                        f"nvcc {combo.nvcc} accepts",
                        hint="add the conda-forge gcc majors to curated/policy.toml conda_gcc")
    return max(usable)


def python_platform(combo: Combination) -> str:
    """uv's --python-platform for the target: its arch and the OS's glibc as a manylinux tag."""
    arch = combo.platform.split("-", 1)[1]
    major, minor = dotted_key(combo.glibc)[:2]
    return f"{arch}-manylinux_{major}_{minor}"


def index_urls(facts_sources: dict[str, str], combo: Combination,
               options: LockOptions) -> tuple[str, tuple[str, ...]]:
    """(index URL, extra index URLs): PyPI (or its mirror), then PyTorch's index when torch
    comes from there (or its mirror), then the user's extras."""
    main = options.index_url or facts_sources.get("pypi")
    if not main:
        raise DataError("matrix/sources.toml names no 'pypi' index",
                        hint="add it to matrix/sources.toml, or pass --index-url URL")
    main = main.rstrip("/")
    extras: list[str] = []
    if combo.torch_index != "pypi":
        url = options.torch_index_url or facts_sources.get(combo.torch_index)
        if not url:
            raise DataError(f"matrix/sources.toml has no index named {combo.torch_index!r}",
                            hint="add it to matrix/sources.toml, or pass --torch-index-url URL")
        extras.append(url.rstrip("/"))
    extras += [u.rstrip("/") for u in options.extra_index_urls if u.rstrip("/") not in extras]
    return main, tuple(extras)


def host_arch_list(archs: tuple[str, ...]) -> str:
    """sm_80, sm_90 → "8.0;9.0": the GPUs an installed env compiles its JIT ops for (an
    image adds PTX for GPUs it was not built for; a machine's env knows its GPUs)."""
    from envgen.resolve.checks import cc_of

    return ";".join(f"{a}.{b}{arch[len(arch.rstrip('af')):]}" for (a, b), arch in
                    sorted((cc_of(x), x) for x in dict.fromkeys(archs)))


def _rule(tc: Toolchain, flavor: str, combo: Combination) -> CudaRule:
    """The toolchain rule that provides nvcc for ``combo`` in ``flavor`` (--nvcc: none)."""
    if combo.nvcc_from == "system":
        return CudaRule(cuda="", source="--nvcc")
    rule = tc.rule(flavor, combo.cuda)
    if rule is None:
        raise UsageError(
            f"{combo.id} cannot be locked as --flavor {flavor}: {tc.why_not(flavor, combo.cuda)}",
            hint="use --flavor conda, or ask for a CUDA the flavor covers "
            "(`envgen resolve --flavor venv` lists them)")
    return rule


def _pip_plan(requirements, index: str, extras: tuple[str, ...], combo: Combination) -> PipPlan:
    return PipPlan(requirements=tuple(requirements), index_url=index, extra_index_urls=extras,
                   python_version=combo.python.rstrip("t"), python_platform=python_platform(combo))


def conda_plan(facts: Facts, combo: Combination, options: LockOptions,
               sources: dict[str, str]) -> LockPlan:
    """The conda flavor: Python, gcc, nvcc = torch's CUDA, libaio and ninja from conda
    channels (solved for the target's virtual packages); torch and the framework from pip."""
    tc = facts.toolchain
    rule = _rule(tc, "conda", combo)
    index, extras = index_urls(sources, combo, options)
    requirements = [combo.torch_pin, f"{combo.framework}=={combo.framework_version}",
                    *tc.build_requirements(combo.framework, combo.torch)]
    gcc = conda_gcc(facts, combo)
    values = dict(cuda=combo.cuda, python=combo.python.rstrip("t"), gcc=gcc,
                  release=tc.conda_releases.get(combo.cuda, combo.cuda))
    names = options.channels if options.channels is not None else (
        *(_fill(c, **values) for c in rule.channels), *tc.conda_channels)
    alias = options.channel_alias or tc.channel_alias
    channels = tuple(dict.fromkeys(channel_url(c, alias) for c in names))
    if not channels:
        raise UsageError("no conda channels to solve against",
                         hint="pass --channel NAME_OR_URL (e.g. --channel conda-forge)")
    specs = [_fill(s, **values) for s in (*tc.conda_specs, *tc.conda_compiler, *rule.specs)]
    virtual = (("__archspec", "1", combo.platform.split("-", 1)[1]),
               ("__cuda", combo.cuda, "0"),
               ("__glibc", combo.glibc, "0"),
               ("__linux", tc.linux_version, "0"),
               ("__unix", "0", "0"))
    conda = CondaPlan(channels=channels, specs=tuple(specs), subdir=tc.subdirs[combo.platform],
                      virtual=virtual)
    env = {} if combo.nvcc_from == "system" else {"CUDA_HOME": "$CONDA_PREFIX"}
    return LockPlan(combination=combo, flavor="conda", conda=conda,
                    pip=_pip_plan(requirements, index, extras, combo), gcc=gcc,
                    os_packages=(), env=env, exclude_newer=options.exclude_newer)


def venv_plan(facts: Facts, combo: Combination, options: LockOptions,
              sources: dict[str, str]) -> LockPlan:
    """The venv flavor: everything from pip (nvcc from NVIDIA's wheels, CUDA 13+ or --nvcc);
    the OS provides Python, gcc and libaio (``os_packages``)."""
    tc = facts.toolchain
    rule = _rule(tc, "venv", combo)
    index, extras = index_urls(sources, combo, options)
    values = dict(cuda=combo.cuda, python=combo.python.rstrip("t"), gcc=combo.gcc,
                  release=combo.cuda)
    requirements = [combo.torch_pin, f"{combo.framework}=={combo.framework_version}",
                    *tc.build_requirements(combo.framework, combo.torch),
                    *(_fill(r, **values) for r in rule.requirements)]
    family = facts.oses[combo.os].family
    os_packages = tuple(_fill(p, **values) for p in tc.venv_os_packages.get(family, ()))
    env = {"CUDA_HOME": f"$SITE_PACKAGES/{rule.cuda_home}"} if rule.cuda_home else {}
    return LockPlan(combination=combo, flavor="venv", conda=None,
                    pip=_pip_plan(requirements, index, extras, combo), gcc=combo.gcc,
                    os_packages=os_packages, env=env, exclude_newer=options.exclude_newer)


def os_package_plan(facts: Facts, combo: Combination, options: LockOptions,
                     sources: dict[str, str]) -> LockPlan:
    """The os-package flavor: pip for torch and the framework, and from the OS its own CUDA
    toolkit (the packages harvested/os_toolkits.json names), its g++ and libaio."""
    tc = facts.toolchain
    toolkit = facts.os_toolkits.get(combo.os)
    if combo.nvcc_from != "os-package" or toolkit is None:
        raise UsageError(f"{combo.id} was not resolved for --flavor os-package",
                         hint="resolve it with --flavor os-package --os OS (an OS that ships "
                         "a CUDA toolkit package), then lock that")
    family = facts.oses[combo.os].family
    home = tc.os_package_home.get(family)
    if home is None:
        raise DataError(f"curated/toolchain.toml [os-package.cuda_home] has no entry for the "
                        f"{family} family", hint="add where its toolkit puts CUDA_HOME")
    values = dict(cuda=combo.cuda, python=combo.python.rstrip("t"), gcc=combo.gcc,
                  release=combo.cuda)
    index, extras = index_urls(sources, combo, options)
    requirements = (combo.torch_pin, f"{combo.framework}=={combo.framework_version}",
                    *tc.build_requirements(combo.framework, combo.torch))
    extra = tuple(_fill(p, **values) for p in tc.os_package_os_packages.get(family, ()))
    os_packages = tuple(dict.fromkeys((*toolkit.install, *extra)))
    pip = PipPlan(requirements=requirements, index_url=index, extra_index_urls=extras,
                  python_version=combo.python.rstrip("t"), python_platform=python_platform(combo))
    return LockPlan(combination=combo, flavor="os-package", conda=None, pip=pip, gcc=combo.gcc,
                    os_packages=os_packages, env={"CUDA_HOME": home},
                    exclude_newer=options.exclude_newer,
                    os_toolkit={"os": toolkit.os, "package": toolkit.package,
                                "version": toolkit.version, "cuda": toolkit.cuda,
                                "suite": toolkit.suite, "components": " ".join(toolkit.components),
                                "index": toolkit.index})
