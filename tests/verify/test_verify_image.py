"""`envgen verify all --image`: the checks run inside a real image by a real dockerd, as the
GPU runners run them (`nox -s smoke`), short of `--gpus all`.

The image is Debian's Python with a CPU torch and Megatron-Core (no compilers needed for its
smoke test), built FROM the debootstrap base from wheels downloaded on the host, and run as
uid 1000 like envgen's runtime images: envgen/inside is mounted read-only, the output
folder written by the container, torchrun runs 2 gloo ranks inside it, and the record names
the image and its digest.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from verify_envs import FRAMEWORKS, LOCK_HASH, cpu_torch, envgen, fail_or_skip, write_lock

pytestmark = [pytest.mark.integration, pytest.mark.docker]
DOCKER = "/usr/bin/docker"
COMBINATION = "megatron-core-0.16.1-torch2.13.0-cu128-py3.11-debian12-x86_64"
DOCKERFILE = """\
FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY wheels /tmp/wheels
RUN python3 -m venv /opt/env \\
 && /opt/env/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels {packages} \\
 && rm -rf /tmp/wheels
ENV PATH=/opt/env/bin:$PATH
USER 1000:1000
"""


@pytest.fixture(scope="module")
def megatron_image(docker_ready, tmp_path_factory) -> str:
    ctx = tmp_path_factory.mktemp("megatron-image")
    requirement = FRAMEWORKS["megatron-core"][0]
    # Debian bookworm's Python is 3.11, so cp311 manylinux wheels for the image
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                "-d", str(ctx / "wheels"), requirement, "numpy",
                # PyPI stays the index for the rest when torch comes from the CPU index
                *[a.replace("--index-url", "--extra-index-url") for a in cpu_torch()]]
    proc = subprocess.run(download, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        fail_or_skip(f"cannot download the image's wheels: {proc.stderr[-1500:]}")
    (ctx / "Dockerfile").write_text(DOCKERFILE.format(
        base=docker_ready["base"], packages=f"torch '{requirement}' numpy"))
    ref = "envgen-test/megatron-cpu:verify"
    proc = subprocess.run([DOCKER, "build", "--quiet", "--force-rm", "-t", ref, str(ctx)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ref


def test_verify_all_inside_the_image(megatron_image, tmp_path):
    lock = write_lock(tmp_path / "lock", COMBINATION, "megatron-core")
    record = tmp_path / "record.json"
    proc = envgen("verify", "all", "--image", megatron_image, "--docker-cli", DOCKER,
                  "--lock", str(lock), "--nproc", "2", "--record", str(record), "--json",
                  env=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(record.read_text())
    assert json.loads(proc.stdout)["record"] == doc
    image_id = subprocess.run([DOCKER, "image", "inspect", "--format", "{{.Id}}",
                               megatron_image], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert doc["image"] == {"reference": megatron_image, "digest": image_id}
    assert doc["combination"] == COMBINATION and doc["lock_hash"] == LOCK_HASH
    assert [(o["name"], o["status"]) for o in doc["ops"]] == [("helpers_cpp", "pass")]
    assert doc["smoke"]["backend"] == "gloo" and doc["smoke"]["world_size"] == 2
    passed = {(c["name"], c["rank"]) for c in doc["smoke"]["checks"] if c["status"] == "pass"}
    assert {("megatron_tensor_parallel", 0), ("megatron_tensor_parallel", 1)} <= passed
    assert doc["tools"]["framework_version"] == "0.16.1" and doc["status"] == "pass"
    assert doc["tools"]["python"].startswith("3.11")  # the image's Python, not the host's


def test_image_id_of_a_missing_image_says_so(docker_ready):
    """The record's digest comes from the docker SDK; an image the daemon lacks is a
    DaemonError naming it, with the fix."""
    from envgen.errors import DaemonError
    from envgen.verify.launch import image_id

    with pytest.raises(DaemonError) as err:
        image_id("envgen-test/no-such-image:never")
    assert err.value.message.startswith("cannot inspect image envgen-test/no-such-image:never")
    assert "envgen build" in err.value.hint
