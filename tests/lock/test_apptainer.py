"""Apptainer definitions (`envgen make --apptainer`): both files parsed by a real parser
(spython's, as Apptainer itself is not installable here), and checked against the Dockerfile
they come from: the same bases, every COPY as %files, every RUN in %post, the lock installed
hash-checked, the ops compiled for the target archs, labels, %test loading the ops."""

from __future__ import annotations

import pytest
from image_inputs import CASES, _input
from spython.main.parse.parsers import SingularityParser

from envgen.facts.images import load_recipes
from envgen.image.apptainer import CHECK_OPS, FROM_IMAGE, SELF_CONTAINED
from envgen.image.render import render_image


def _render(lock_matrix, case: str) -> dict[str, str]:
    inp, image, archs = _input(lock_matrix, case, apptainer=True)
    files, _ = render_image(inp, load_recipes(lock_matrix), image, supported_archs=archs)
    return files


def _parse(text: str, tmp_path, name: str) -> dict:
    path = tmp_path / name
    path.write_text(text)
    return SingularityParser(str(path)).recipe


@pytest.mark.parametrize("case", sorted(CASES))
def test_self_contained_definition_is_the_dockerfile_in_apptainer_terms(lock_matrix, tmp_path,
                                                                        case):
    files = _render(lock_matrix, case)
    recipe = _parse(files[SELF_CONTAINED], tmp_path, "envgen.def")
    dockerfile = files["Dockerfile"]
    stages = list(recipe)
    assert stages[-1] == "runtime" and "builder" in stages and "pruned" not in stages
    # the same bases, pinned by digest as in the Dockerfile
    froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")
             and not line.startswith("FROM builder")]
    assert [recipe[s].fromHeader for s in stages] == froms
    builder, runtime = recipe["builder"], recipe["runtime"]
    post = "\n".join(builder.install)
    # the lock installed hash-checked, the framework built with its ops for the target archs
    assert "-m pip install --no-deps --require-hashes -r /tmp/envgen/base.lock.txt" in post
    assert "--no-deps --no-build-isolation --no-cache-dir" in post
    assert "--require-hashes -r /tmp/envgen/framework.lock.txt" in post
    arch = next(line for line in dockerfile.splitlines()
                if line.startswith("ARG TORCH_CUDA_ARCH_LIST="))
    assert f"export {arch.removeprefix('ARG ')}" in post
    assert "--mount=" not in post  # BuildKit's cache mounts have no Apptainer equivalent
    # every file the Dockerfile copies from the context is in %files, across stages by name
    copied = {src for line in builder.files for src in [line.split()[0]]}
    assert {"image/framework.lock.txt", "image/check-ops.py", "image/portable-cc.sh"} <= copied
    assert runtime.layer_files == {"builder": ["/opt/env /opt/env",
                                               "/opt/envgen/ops.json /opt/envgen/ops.json"]}
    # the final image: its labels, environment, the op check as %test, python as runscript
    labels = dict(line.split(" ", 1) for line in runtime.labels)
    assert labels["io.envgen.combination"].startswith(case.split("-")[0])
    assert labels["io.envgen.lock-hash"] == "sha256:" + "5" * 64
    assert any(e.startswith('PATH="/opt/env/bin:') for e in runtime.environ)
    assert f"python {CHECK_OPS} --import" in "\n".join(runtime.install)  # spython's %test
    assert runtime.cmd == 'exec python "$@"'
    assert f"image/check-ops.py {CHECK_OPS}" in runtime.files
    # the CA certificates stay in the builder stage, which is not in the image
    assert not any("ca-certificates/" in line for line in runtime.files)
    head = files[SELF_CONTAINED].splitlines()
    assert " --apptainer" in head[2] and "apptainer build envgen.sif" in head[4]


def test_conda_definition_takes_micromamba_from_its_stage(lock_matrix, tmp_path):
    files = _render(lock_matrix, "deepspeed-conda-ubuntu2204")
    recipe = _parse(files[SELF_CONTAINED], tmp_path, "envgen.def")
    assert next(iter(recipe)) == "micromamba" and not recipe["micromamba"].install
    assert recipe["builder"].layer_files["micromamba"] == [
        "/bin/micromamba /usr/local/bin/micromamba"]
    assert "micromamba create --yes --prefix /opt/env --file /tmp/envgen/conda-explicit.txt" \
        in "\n".join(recipe["builder"].install)


def test_from_image_definition_bootstraps_from_the_built_image(lock_matrix, tmp_path):
    files = _render(lock_matrix, "deepspeed-venv-debian12")
    text = files[FROM_IMAGE]
    recipe = _parse(text, tmp_path, "from-image.def")
    (stage,) = recipe.values()
    assert "Bootstrap: docker-daemon" in text.splitlines()
    assert stage.fromHeader == "envgen/deepspeed:0.18.2-torch2.12.0-cu130-py3.11-debian12"
    labels = dict(line.split(" ", 1) for line in stage.labels)
    assert labels["io.envgen.ops"].split() == ["fused_adam", "cpu_adam",
                                               "transformer_inference", "async_io"]
    assert stage.files == [f"image/check-ops.py {CHECK_OPS}"]
    assert f"python {CHECK_OPS} --import deepspeed fused_adam" in "\n".join(stage.install)


def test_without_apptainer_no_definitions_are_written(lock_matrix):
    inp, image, archs = _input(lock_matrix, "deepspeed-venv-debian12")
    files, _ = render_image(inp, load_recipes(lock_matrix), image, supported_archs=archs)
    assert SELF_CONTAINED not in files and FROM_IMAGE not in files
