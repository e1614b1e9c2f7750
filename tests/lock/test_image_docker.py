"""`envgen build` against a real dockerd: build FROM the debootstrap base, labels read back,
the skip-if-built paths (local and registry), push/pull through a local registry, a failing
build that leaves no containers, and the BuildKit engine.

The lock is the venv flavor of the stand-in combination (tests/support/lock_env.py), whose
wheels the builder installs from the loopback index (so RUN steps use --network host).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
from support.run import HOST_PY, run_envgen

pytestmark = [
    pytest.mark.integration, pytest.mark.docker,
    pytest.mark.skipif(HOST_PY != "3.11", reason="the image's Python is bookworm's 3.11 and the "
                       "stand-in wheels are built for the host's Python"),
]
DOCKER = "/usr/bin/docker"


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=check,
                          timeout=600)


def containers() -> set[str]:
    return set(docker("ps", "-aq", "--no-trunc").stdout.split())


@pytest.fixture(scope="module")
def image_lock(docker_ready, lock_matrix, conda_channel, wheel_index, tmp_path_factory):
    """`envgen make --flavor venv --image` for the stand-ins, FROM the local base."""
    _, url = wheel_index
    tmp = tmp_path_factory.mktemp("imagelock")
    proc = run_envgen("make", "--matrix-dir", str(lock_matrix), "--framework", "deepspeed",
                      "--python", HOST_PY, "--os", "debian-12", "--flavor", "venv",
                      "--torch", "2.12.0", "--index-url", url, "--cache-dir", str(tmp / "cache"),
                      "--out", str(tmp / "locks"), "--image", "--base", docker_ready["base"],
                      "--gpu-arch", "sm_90", "--json")
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    return made


def build(lock_dir: str, *extra: str) -> subprocess.CompletedProcess:
    return run_envgen("build", lock_dir, "--network", "host", *extra, timeout=900)


@pytest.fixture(scope="module")
def built(image_lock, tmp_path_factory):
    """The image, built for real on a cold or a warm machine: the ccache store (its token,
    in the ops step's ENVGEN_CCACHE build argument) is this run's own, so the ops step misses
    Docker's layer cache and runs whatever earlier runs left; an image from an earlier run
    with the same build hash is removed first, so nothing is skipped."""
    cache = tmp_path_factory.mktemp("build-cache")
    content = run_envgen("build", image_lock["directory"], "--dry-run", "--json")
    assert content.returncode == 0, content.stderr
    for ref in json.loads(content.stdout)["references"]:
        docker("image", "rm", "--force", ref, check=False)
    before = containers()
    proc = run_envgen("build", image_lock["directory"], "--network", "host", "--json",
                      env={**os.environ, "ENVGEN_CACHE_DIR": str(cache)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert containers() == before, "the build left containers behind"
    return json.loads(proc.stdout), proc


def test_build_labels_and_runtime(image_lock, built):
    result, proc = built
    assert result["skipped"] is None
    assert "[ 1/" in proc.stderr and "done in" in proc.stderr  # the compact step log
    ref = result["references"][0]
    assert ref.startswith("envgen/deepspeed:0.18.2-torch2.12.0-cu130-py3.11-debian12-")
    labels = json.loads(docker("image", "inspect", ref, "--format",
                               "{{json .Config.Labels}}").stdout)
    manifest = json.loads(Path(image_lock["directory"], "envgen.lock.json").read_text())
    assert labels["io.envgen.lock-hash"] == manifest["lock_hash"] == image_lock["lock_hash"]
    assert labels["io.envgen.build-hash"] == result["build_hash"]
    assert labels["io.envgen.combination"] == image_lock["id"]
    assert labels["io.envgen.cuda-arch-list"] == "9.0+PTX"
    # what DeepSpeed itself reports it built (pin_memory too), read from the builder stage
    assert labels["io.envgen.ops"] == ("async_io cpu_adam fused_adam pin_memory "
                                       "transformer_inference")
    assert labels["io.envgen.ops-source"] == "deepspeed.git_version_info.installed_ops"
    assert result["ops"] == labels["io.envgen.ops"].split()
    cpus = json.loads(docker("info", "--format", "{{json .NCPU}}").stdout)
    assert result["max_jobs"] == str(cpus)  # the daemon's cores, not ninja's cores + 2
    assert labels["org.opencontainers.image.version"] == manifest["image"]["tag"]
    assert labels["org.opencontainers.image.created"].endswith("+00:00")
    # the human tag points at the same image
    human = docker("image", "inspect", result["references"][1], "--format", "{{.Id}}").stdout
    assert human.strip() == result["image_id"]
    # runtime: non-root, the env works, the build-only packages and compilers are gone
    run = docker("run", "--rm", ref, "bash", "-c",
                 "id -u; python -c 'import torch, deepspeed; print(deepspeed.__version__)';"
                 " python -m pip show nvidia-cuda-nvcc >/dev/null 2>&1 && echo has-nvcc;"
                 " command -v gcc-12 g++-12 || echo no-compilers;"
                 " echo ${DS_ACCELERATOR:-unset}")
    want = ["1000", "0.18.2", "no-compilers", "unset"]
    assert run.stdout.split() == want, run.stdout + run.stderr
    # the lock is inside, where its label says
    assert labels["io.envgen.lock"] == "/opt/envgen/lock"
    lock = docker("run", "--rm", ref, "ls", "/opt/envgen/lock").stdout.split()
    assert lock == ["base.lock.txt", "framework.lock.txt"]
    report = json.loads(docker("run", "--rm", ref, "cat", "/opt/envgen/ops.json").stdout)
    assert report["ops"] == result["ops"]


def test_classic_builds_carry_ccache_in_a_store_not_a_layer(built, tmp_path):
    """The classic engine's ops step reaches envgen's ccache store through the bridge: the
    build served one (its counts are in the result), and the builder image's own wrapper and
    ccache, run with the Dockerfile's classic ccache settings against a store on the gateway,
    miss then hit, and write no object locally (what would land in the layer)."""
    from envgen.image import ccache_store
    from envgen.image.context import CLASSIC_CCACHE

    result, proc = built
    assert "ccache: objects in" in proc.stderr and "hits," in proc.stderr
    assert set(result["ccache"]) >= {"hits", "misses", "stored", "directory"}
    assert result["ccache"]["directory"].endswith("/ccache/objects")  # this run's own store
    gateway = ccache_store.ipam_gateway(json.loads(docker(
        "network", "inspect", "bridge", "--format", "{{json .IPAM.Config}}").stdout))
    assert gateway, "the default bridge has no IPv4 gateway"
    with socket.socket() as s:
        s.bind((gateway, 0))
        port = s.getsockname()[1]
    script = ("printf 'int op(int x) { return 7 * x; }\\n' > /tmp/op.c && for n in 1 2; do "
              f"ENVGEN_CC=gcc-12 {CLASSIC_CCACHE}/opt/envgen/bin/cc -c /tmp/op.c -o /tmp/op$n.o"
              "; done && cmp /tmp/op1.o /tmp/op2.o && find /tmp/envgen-ccache -type f -size +0")
    with ccache_store.serving(gateway, tmp_path / "ccache", port) as store:
        assert not isinstance(store, str), store
        run = docker("run", "--rm", "--add-host", f"envgen-ccache:{gateway}", "-e",
                     f"ENVGEN_CCACHE={store.url}", f"{result['references'][0]}-builder",
                     "sh", "-c", script, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == ""  # no ccache object or stats file in the container
    assert (store.counts.misses, store.counts.stored) >= (1, 1) and store.counts.hits >= 1


def test_rebuild_is_skipped(image_lock, built):
    result, _ = built
    proc = build(image_lock["directory"], "--json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["skipped"] == "local" and again["image_id"] == result["image_id"]
    assert "already built (local); skipping the build" in proc.stderr


def test_push_pull_and_registry_skip(image_lock, built, docker_ready):
    registry = docker_ready["registry"]
    proc = build(image_lock["directory"], "--registry", registry, "--push", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pushed = json.loads(proc.stdout)
    ref = pushed["references"][0]
    assert ref.startswith(f"{registry}/deepspeed:") and ref in pushed["pushed"]
    # gone locally, still in the registry: the build is skipped, and a pull brings it back
    docker("image", "rm", *pushed["references"][:2])
    proc = build(image_lock["directory"], "--registry", registry, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped"] == "registry"
    docker("pull", ref)
    pulled = json.loads(docker("image", "inspect", ref, "--format",
                               "{{json .Config.Labels}}").stdout)
    assert pulled["io.envgen.build-hash"] == pushed["build_hash"]


def test_max_jobs_does_not_change_the_image(image_lock, built):
    """MAX_JOBS (like proxy settings) is not in the content hash: the build is found."""
    result, _ = built
    proc = build(image_lock["directory"], "--build-arg", "MAX_JOBS=3", "--json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["skipped"] == "local" and again["build_hash"] == result["build_hash"]


def test_push_with_a_moving_alias_and_table_row_label(image_lock, built, docker_ready):
    """A published image: its content tag, its combination's tag and the moving
    <framework>-cu<XY> alias, all pushed; the label linking its table row on the image."""
    import urllib.request

    registry = docker_ready["registry"]
    row = f"https://example.org/envgen/compatibility/#{image_lock['id']}"
    proc = build(image_lock["directory"], "--registry", registry, "--push", "--tag",
                 "deepspeed-cu130", "--label", f"io.envgen.table-row={row}", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pushed = json.loads(proc.stdout)
    assert pushed["build_hash"] != built[0]["build_hash"]  # the label is part of the image
    alias = f"{registry}/deepspeed:deepspeed-cu130"
    assert pushed["references"][2] == alias
    assert pushed["pushed"] == pushed["references"]
    with urllib.request.urlopen(f"http://{registry}/v2/deepspeed/tags/list") as answer:
        tags = set(json.loads(answer.read())["tags"])
    assert {r.rsplit(":", 1)[1] for r in pushed["references"]} <= tags
    docker("image", "rm", alias)
    docker("pull", alias)
    labels = json.loads(docker("image", "inspect", alias, "--format",
                               "{{json .Config.Labels}}").stdout)
    assert labels["io.envgen.table-row"] == row
    assert labels["io.envgen.build-hash"] == pushed["build_hash"]


def test_after_no_cache_the_builder_target_reuses_every_builder_step(image_lock, built):
    """The cache trap: after a --no-cache build, a cached build of the same Dockerfile
    (--target builder) must reuse every builder step, not follow the runtime stage's chain
    of identical first steps and rebuild everything."""
    cold = build(image_lock["directory"], "--no-cache", "--json")
    assert cold.returncode == 0, cold.stderr[-3000:]
    again = build(image_lock["directory"], "--target", "builder", "--force", "-v")
    assert again.returncode == 0, again.stderr[-3000:]
    # each Dockerfile step's block: "Step i/n : INSTR" then " ---> Using cache" or
    # " ---> Running in …"; the daemon appends the build's labels (their date changes) last
    blocks = re.split(r"^Step \d+/\d+ : ", again.stderr, flags=re.M)[1:]
    own = [b for b in blocks if not b.startswith("LABEL ")]
    assert len(own) > 10 and own[0].startswith("FROM ")
    missed = [b.splitlines()[0] for b in own[1:] if "---> Using cache" not in b]
    assert not missed, f"rebuilt after --no-cache: {missed}"


def test_failing_build_names_step_and_leaves_no_containers(image_lock, built):
    """Without --network host the loopback index is unreachable from the build, so the ops
    step (its cache busted by a new MAX_JOBS) fails downloading the framework."""
    before = containers()
    proc = run_envgen("build", image_lock["directory"], "--force", "--build-arg", "MAX_JOBS=3",
                      timeout=900)
    assert proc.returncode == 1, proc.stderr
    assert "envgen: error: the build failed at step" in proc.stderr
    assert "DS_ACCELERATOR=cuda" in proc.stderr.split("envgen: error:")[1]  # the ops step
    assert "--- build log, last" in proc.stderr  # the tail is shown
    assert containers() == before


def test_buildkit_engine(image_lock, built):
    proc = build(image_lock["directory"], "--engine", "buildkit", "--docker-cli", DOCKER,
                 "--force", "--tag", "envgen-test/buildkit:1", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    labels = json.loads(docker("image", "inspect", "envgen-test/buildkit:1", "--format",
                               "{{json .Config.Labels}}").stdout)
    assert labels["io.envgen.build-hash"] == result["build_hash"]


def _layer_files(ref: str, tmp: Path) -> dict[str, bytes]:
    """Every file of every layer of ``ref`` (docker save), keyed "<layer>:<path>"."""
    import tarfile

    archive = tmp / "image.tar"
    docker("save", "-o", str(archive), ref)
    out: dict[str, bytes] = {}
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(layer)) as inner:
                for m in inner.getmembers():
                    if m.isfile():
                        out[f"{layer}:{m.name}"] = inner.extractfile(m).read()
    archive.unlink()
    return out


def test_ca_cert_is_a_build_secret_in_no_layer_of_any_stage(image_lock, built, tmp_path):
    """--ca-cert with BuildKit: the certificate is mounted as the envgen-ca secret in the
    steps that download (with-ca.sh says so in the log) and no layer of the builder or the
    runtime image holds it; the classic engine refuses it rather than copy it in."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    pem = tmp_path / "proxy-ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    body = b"".join(ca.cert_pem.bytes().split(b"\n")[1:-2])  # the base64, without the markers
    refused = build(image_lock["directory"], "--ca-cert", str(pem), "--json")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["error"]["message"] == "--ca-cert needs --engine buildkit"
    # one cold build: the builder stage first (tagged <content tag>-builder), then the runtime
    proc = build(image_lock["directory"], "--engine", "buildkit", "--docker-cli", DOCKER,
                 "--ca-cert", str(pem), "--no-cache", "-v", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("with-ca: trusting the extra CA certificates (envgen-ca) for") >= 2
    runtime = json.loads(proc.stdout)["references"][0]
    for target, ref in (("builder", f"{runtime}-builder"), ("runtime", runtime)):
        files = _layer_files(ref, tmp_path)
        assert len(files) > 100, target
        leaked = [name for name, data in files.items() if body[:64] in data]
        assert not leaked, f"the CA is in {target} layers: {leaked}"
        assert not [n for n in files if "envgen-ca" in n.rsplit(":", 1)[1]], target


def test_build_usage_errors(tmp_path, image_lock):
    proc = run_envgen("build", str(tmp_path))
    assert proc.returncode == 2 and "is not an envgen lock directory" in proc.stderr
    proc = run_envgen("build", image_lock["directory"], "--push")
    assert proc.returncode == 2 and "--push needs --registry" in proc.stderr
    bad = tmp_path / "bad.pem"
    bad.write_text("not a cert")
    proc = run_envgen("build", image_lock["directory"], "--ca-cert", str(bad))
    assert proc.returncode == 2 and "holds no PEM certificate" in proc.stderr
