"""The rendered-image test inputs: combinations resolved from the fixture matrix with
hand-made locked packages (no solver, no network), shared by the Dockerfile and Apptainer
tests."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from envgen.facts import load_facts
from envgen.image.render import ImageInput, ImageOptions
from envgen.lock.conda_solve import CondaPackage
from envgen.lock.files import pip_options, regenerate_command
from envgen.lock.flavors import make_plan
from envgen.lock.pip_compile import Dist, PipPackage
from envgen.lock.plan import LockOptions
from envgen.resolve import resolve
from envgen.resolve.request import Request

SOURCES = {"pypi": "https://pypi.org/simple",
           "pytorch-cu128": "https://download.pytorch.org/whl/cu128"}
OTHER_BASE = "registry.example/ubuntu:24.04@sha256:" + "ab" * 32
CASES = {
    # id suffix: (request, flavor, image options)
    "deepspeed-venv-debian12": (dict(framework="deepspeed", torch="2.12.0", python="3.11",
                                     os="debian-12"), "venv", ImageOptions(gpu_archs=("sm_90",))),
    "deepspeed-conda-ubuntu2204": (dict(framework="deepspeed", torch="2.9.0", python="3.11",
                                        os="ubuntu-22.04"), "conda", ImageOptions()),
    "deepspeed-conda-ubuntu2404": (dict(framework="deepspeed", torch="2.9.0", python="3.11",
                                    os="ubuntu-24.04"), "conda",
                               ImageOptions(base=OTHER_BASE, gpu_archs=("sm_80",))),
    "colossalai-conda-ubuntu2204": (dict(framework="colossalai", torch="2.5.1", python="3.12",
                                         os="ubuntu-22.04"), "conda", ImageOptions()),
    "megatron-core-conda-ubuntu2404": (dict(framework="megatron-core", torch="2.9.0",
                                            python="3.12", os="ubuntu-24.04"), "conda",
                                       ImageOptions(gpu_archs=("sm_90",))),
}


def _pip(name: str, version: str) -> PipPackage:
    h = hashlib.sha256(f"{name}=={version}".encode()).hexdigest()
    whl = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return PipPackage(name=name, version=version, sdist=None,
                      wheels=(Dist(url=f"https://files.example/{whl}", sha256=h, filename=whl),))


def _conda(name: str, version: str) -> CondaPackage:
    fn = f"{name}-{version}-h0_0.conda"
    return CondaPackage(name=name, version=version, build="h0_0", build_number=0,
                        subdir="linux-64", url=f"https://conda.example/linux-64/{fn}",
                        sha256="0" * 64, md5=f"{len(name):032x}", depends=(), constrains=(),
                        channel="https://conda.example", size=1, noarch=None, file_name=fn)


def _input(lock_matrix: Path, case: str, apptainer: bool = False
           ) -> tuple[ImageInput, ImageOptions, tuple[str, ...]]:
    req, flavor, image = CASES[case]
    if apptainer:
        image = replace(image, apptainer=True)
    facts = load_facts(lock_matrix)
    combo = resolve(Request(flavor=flavor, **req), facts)[0]
    plan = make_plan(facts, combo, LockOptions(flavor=flavor, image=image), SOURCES)
    pip = [_pip("torch", combo.torch), _pip(combo.framework, combo.framework_version),
           _pip("filelock", "3.16.1"), _pip("setuptools", "80.9.0"), _pip("ninja", "1.13.0")]
    conda = []
    if flavor == "venv":
        pip += [_pip("cuda-toolkit", f"{combo.cuda}.2"), _pip("nvidia-cuda-nvcc", "13.0.88"),
                _pip("nvidia-cuda-runtime", "13.0.96")]
    else:
        conda = [_conda(n, v) for n, v in (("python", "3.11.9"), ("gcc", "13.3.0"),
                                           ("gxx", "13.3.0"), ("cuda-nvcc", combo.cuda + ".0"),
                                           ("libcublas-dev", "12.8.4"), ("libaio", "0.3.113"))]
    inp = ImageInput(combination=combo, os_family=facts.oses[combo.os].family, flavor=flavor,
                     gcc=plan.gcc, pip=tuple(sorted(pip, key=lambda p: p.name)),
                     pip_options=tuple(pip_options(plan)), conda=tuple(conda),
                     lock_hash="sha256:" + "5" * 64, nvcc=combo.cuda + ".88",
                     regenerate=regenerate_command(plan, LockOptions(flavor=flavor, image=image)))
    toolkit = facts.toolkits.get(combo.nvcc)
    return inp, image, tuple(toolkit.archs) if toolkit else ()
