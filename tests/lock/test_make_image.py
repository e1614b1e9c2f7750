"""`envgen make --image` through the CLI against the local stand-ins (no Docker needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.run import HOST_PY, run_envgen

pytestmark = pytest.mark.integration


def test_make_image_writes_and_records_the_dockerfile(make_args):
    proc = run_envgen(*make_args, "--flavor", "venv", "--torch", "2.12.0", "--image",
                      "--gpu-arch", "sm_90")
    if HOST_PY != "3.11":  # the fixture's debian-12 base has bookworm's Python 3.11
        assert proc.returncode == 2 and "venv flavor builds on the OS's Python" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    assert "Image:   envgen build " in proc.stdout
    lock_dir = Path(proc.stdout.split("Wrote ", 1)[1].split("/  (", 1)[0])
    manifest = json.loads((lock_dir / "envgen.lock.json").read_text())
    for name in ("Dockerfile", ".dockerignore", "image/base.lock.txt",
                 "image/framework.lock.txt", "image/check-ops.py", "image/portable-cc.sh"):
        assert name in manifest["files"], name
    assert manifest["image"]["cuda_arch_list"] == "9.0+PTX"
    assert manifest["image"]["base"].startswith("docker.io/library/debian:12@sha256:")
    assert "--image --gpu-arch sm_90" in (lock_dir / "Dockerfile").read_text()
    # the lock is still a lock: install verifies every file, including the image ones
    (lock_dir / "image/base.lock.txt").write_text("edited\n")
    proc = run_envgen("build", str(lock_dir))
    assert proc.returncode == 1 and "was modified after envgen wrote it" in proc.stderr


def test_make_apptainer_writes_both_definitions_with_the_image(make_args):
    """--apptainer is --image plus apptainer/envgen.def and apptainer/from-image.def, sealed
    in the manifest like every lock file, parsed by spython."""
    from spython.main.parse.parsers import SingularityParser

    proc = run_envgen(*make_args, "--torch", "2.9.0", "--apptainer", "--gpu-arch", "sm_80")
    assert proc.returncode == 0, proc.stderr
    lock_dir = Path(proc.stdout.split("Wrote ", 1)[1].split("/  (", 1)[0])
    manifest = json.loads((lock_dir / "envgen.lock.json").read_text())
    for name in ("Dockerfile", "apptainer/envgen.def", "apptainer/from-image.def"):
        assert name in manifest["files"], name
    recipe = SingularityParser(str(lock_dir / "apptainer" / "envgen.def")).recipe
    assert list(recipe) == ["micromamba", "builder", "runtime"]
    labels = dict(x.split(" ", 1) for x in recipe["runtime"].labels)
    assert labels["io.envgen.combination"] == manifest["id"]
    assert labels["io.envgen.lock-hash"] == manifest["lock_hash"]
    assert labels["io.envgen.cuda-arch-list"] == "8.0+PTX"
    assert "--apptainer --gpu-arch sm_80" in (lock_dir / "Dockerfile").read_text()
    assert "apptainer build envgen.sif apptainer/envgen.def" in proc.stdout + (
        lock_dir / "apptainer" / "envgen.def").read_text()


def test_build_dry_run_names_the_content_tag_and_its_inputs(make_args):
    """No Docker needed: the content tag a build would have, from the files and the options
    that change the image (an arch list, a label, the engine), not MAX_JOBS."""
    proc = run_envgen(*make_args, "--torch", "2.9.0", "--image", "--gpu-arch", "sm_80")
    assert proc.returncode == 0, proc.stderr
    lock_dir = proc.stdout.split("Wrote ", 1)[1].split("/  (", 1)[0]

    def plan(*extra: str) -> dict:
        out = run_envgen("build", lock_dir, "--dry-run", "--json", *extra)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    plain = plan()
    assert plain["references"][0].endswith("-" + plain["build_hash"][7:19])
    assert {"Dockerfile", "envgen.lock.json", "image/base.lock.txt"} <= set(plain["files"])
    assert plain["inputs"] == {"build_args": {}, "labels": {}, "engine": "sdk"}
    assert plan("--build-arg", "MAX_JOBS=16", "--build-arg", "HTTPS_PROXY=http://p:3128")[
        "build_hash"] == plain["build_hash"]
    for extra in (("--build-arg", "TORCH_CUDA_ARCH_LIST=9.0"), ("--label", "a.b=c"),
                  ("--engine", "buildkit")):
        assert plan(*extra)["build_hash"] != plain["build_hash"], extra
    text = run_envgen("build", lock_dir, "--dry-run", "--build-arg", "MAX_JOBS=4")
    assert text.stdout.startswith(f"Would build {plain['references'][0]}")
    assert "not in the hash (they do not change the image): --build-arg MAX_JOBS=4" in text.stdout


def test_make_image_gpu_name_sets_the_arch_list(make_args):
    """--gpu H100 without --gpu-arch: the image's ops are built for the GPU's sm_90."""
    proc = run_envgen(*make_args, "--flavor", "venv", "--torch", "2.12.0", "--image",
                      "--gpu", "H100", "--json")
    if HOST_PY != "3.11":  # the fixture's debian-12 base has bookworm's Python 3.11
        assert proc.returncode == 2
        return
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["image"]["cuda_arch_list"] == "9.0+PTX"


def test_base_without_image_is_a_usage_error(make_args):
    proc = run_envgen(*make_args, "--base", "debian:12")
    assert proc.returncode == 2 and "--base only applies with --image" in proc.stderr


def test_combination_id_must_exist(make_args):
    proc = run_envgen(*make_args, "--combination",
                      "deepspeed-9.9.9-torch2.9.0-cu128-py3.11-debian12-x86_64")
    assert proc.returncode == 3, proc.stderr  # well-formed, but no such release: infeasible
