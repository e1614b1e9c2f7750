"""The Docker daemon or a registry failing under `envgen build`: exit 4 with the fix, nothing
built or tagged."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support.faultkit import run_subprocess

fault = pytest.mark.fault
pytestmark = pytest.mark.integration


@pytest.fixture
def image_lock(make_args) -> Path:
    r = run_subprocess(*make_args, "--flavor", "venv", "--torch", "2.12.0", "--image",
                       "--gpu-arch", "sm_90", "--base", "local/debian:bookworm", "--json")
    assert r.code == 0, r.err
    return Path(json.loads(r.out)["directory"])


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@fault("D01", "no Docker daemon at DOCKER_HOST", exit=4)
def test_daemon_down(cli, image_lock, tmp_path):
    r = cli("build", image_lock, "--json", env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    assert r.code == 4 and r.error["kind"] == "docker"
    assert "cannot reach the Docker daemon" in r.error["message"]
    assert "start dockerd" in r.error["fix"]


@fault("D02", "a registry that does not answer (--registry host:port down)", exit=4)
@pytest.mark.docker
def test_registry_down(cli, image_lock, docker_ready):
    r = cli("build", image_lock, "--registry", f"127.0.0.1:{_dead_port()}", "--json")
    assert r.code == 4 and r.error["kind"] == "docker"
    assert "registry" in r.error["message"]


@fault("D03", "--engine buildkit with a docker CLI that does not exist", exit=4)
@pytest.mark.docker
def test_buildkit_cli_missing(cli, image_lock, docker_ready):
    r = cli("build", image_lock, "--engine", "buildkit", "--docker-cli", "/nonexistent/docker",
            "--force")
    assert r.code == 4 and r.says("cannot run the docker CLI", "--docker-cli")
