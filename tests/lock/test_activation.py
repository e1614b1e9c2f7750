"""An installed environment sees its locked toolchain without the user exporting anything:
the env's Python (a .pth), the venv's activate/deactivate and conda's activate.d set
CUDA_HOME (and nvcc first on PATH), CC/CXX, a TORCH_EXTENSIONS_DIR of its own and the GPU
arch list; a machine's CUDA_HOME does not win. Real installs of the stand-in locks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.run import run_envgen

from envgen.lock import activation
from envgen.lock.manifest import read_manifest

pytestmark = pytest.mark.integration

PROBE = ("import json, os, shutil; print(json.dumps({k: os.environ.get(k) for k in "
         "('CUDA_HOME', 'CC', 'CXX', 'TORCH_EXTENSIONS_DIR', 'TORCH_CUDA_ARCH_LIST')} | "
         "{'nvcc': shutil.which('nvcc'), 'ninja': shutil.which('ninja')}))")


def _installed(make_args, tmp_path, *extra: str) -> tuple[Path, Path, dict]:
    proc = run_envgen(*make_args, *extra)
    assert proc.returncode == 0, proc.stderr
    (lock,) = (tmp_path / "locks").iterdir()
    prefix = tmp_path / "env"
    proc = run_envgen("install", str(lock), "--prefix", str(prefix), "--json")
    assert proc.returncode == 0, proc.stderr
    return lock, prefix, json.loads(proc.stdout)


def _probe(python: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in activation.VARIABLES}
    proc = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True,
                          env={**base, **env}, timeout=60, check=True)
    return json.loads(proc.stdout)


def _site(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())


def test_venv_python_sees_the_locked_nvcc_over_the_machines(make_args, tmp_path):
    lock, prefix, result = _installed(make_args, tmp_path, "--flavor", "venv",
                                      "--gpu-arch", "sm_90")
    home = str(_site(prefix / "bin" / "python") / "nvidia" / "cu13")
    got = _probe(prefix / "bin" / "python", CUDA_HOME="/usr/local/cuda",
                 TORCH_EXTENSIONS_DIR="/tmp/shared-extensions")
    assert got["CUDA_HOME"] == home and got["nvcc"] == f"{home}/bin/nvcc"
    assert got["TORCH_EXTENSIONS_DIR"] == str(prefix / "var" / "torch_extensions")
    assert got["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert got["ninja"] == str(prefix / "bin" / "ninja")  # run by name by torch's builder
    assert result["environment"]["values"]["CUDA_HOME"] == home
    # the lock's own nvcc answers: the release torch was built with
    out = subprocess.run([got["nvcc"], "--version"], capture_output=True, text=True).stdout
    assert "release 13.0" in out
    # ENVGEN_ENV=off leaves the process's environment alone
    off = _probe(prefix / "bin" / "python", CUDA_HOME="/usr/local/cuda", ENVGEN_ENV="off")
    assert off["CUDA_HOME"] == "/usr/local/cuda"
    record = json.loads((prefix / "etc" / "envgen" / "env.json").read_text())
    assert record["values"] == result["environment"]["values"]
    manifest = json.loads((lock / "envgen.lock.json").read_text())
    assert manifest["toolchain"]["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert "--gpu-arch sm_90" in (lock / "requirements.lock.txt").read_text()


def test_venv_activate_sets_and_deactivate_restores(make_args, tmp_path):
    _, prefix, result = _installed(make_args, tmp_path, "--flavor", "venv")
    home = result["environment"]["values"]["CUDA_HOME"]
    script = (f". {prefix}/bin/activate && echo \"$CUDA_HOME|$TORCH_EXTENSIONS_DIR\" "
              "&& command -v nvcc && deactivate && echo \"${CUDA_HOME-unset}|"
              "${TORCH_EXTENSIONS_DIR-unset}\" && { command -v nvcc || echo no-nvcc; }")
    base = {k: v for k, v in os.environ.items() if k not in activation.VARIABLES}
    path = ":".join(p for p in base["PATH"].split(":") if not shutil.which("nvcc", path=p))
    for shell in ("bash", "zsh"):
        if shutil.which(shell) is None:
            continue
        out = subprocess.run([shell, "-c", script], capture_output=True, text=True,
                             env={**base, "PATH": path, "CUDA_HOME": "/opt/site-cuda"},
                             timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.split()
        assert lines[0] == f"{home}|{prefix}/var/torch_extensions", shell
        assert lines[1] == f"{home}/bin/nvcc"
        assert lines[2:] == ["/opt/site-cuda|unset", "no-nvcc"], shell


def test_conda_env_sets_its_prefix_and_compilers(make_args, tmp_path):
    _, prefix, result = _installed(make_args, tmp_path)
    values = result["environment"]["values"]
    assert values["CUDA_HOME"] == str(prefix)
    assert values["CC"] == str(prefix / "bin" / "gcc")
    assert values["CXX"] == str(prefix / "bin" / "g++")
    assert "TORCH_CUDA_ARCH_LIST" not in values  # made for no particular GPU
    got = _probe(prefix / "bin" / "python", CUDA_HOME="/usr/local/cuda")
    assert got["CUDA_HOME"] == str(prefix) and got["CC"] == values["CC"]
    # conda activate runs etc/conda/activate.d; conda deactivate runs deactivate.d
    act = prefix / "etc" / "conda" / "activate.d" / "envgen-env.sh"
    deact = prefix / "etc" / "conda" / "deactivate.d" / "envgen-env.sh"
    out = subprocess.run(["sh", "-c", f'. "{act}"; echo "$CUDA_HOME"; . "{deact}"; '
                          'echo "${CUDA_HOME-unset}" "${CC-unset}"'], capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "CUDA_HOME": "/x"},
                         check=True).stdout.split()
    assert out == [str(prefix), "/x", "unset"]


def _manifest(tmp_path: Path, make_args, *extra: str):
    proc = run_envgen(*make_args, *extra)
    assert proc.returncode == 0, proc.stderr
    (lock,) = (tmp_path / "locks").iterdir()
    return read_manifest(lock)


def _tools(tmp_path: Path, *names: str, version: str = "12") -> Path:
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {version}.2.0\n")
        tool.chmod(0o755)
    return bin_dir


def test_gcc_of_the_lock_from_this_machine(make_args, tmp_path):
    manifest = _manifest(tmp_path, make_args, "--flavor", "venv")
    gcc = manifest.combination["gcc"]
    prefix, site = tmp_path / "p", tmp_path / "p" / "site"
    bin_dir = _tools(tmp_path, f"gcc-{gcc}", f"g++-{gcc}")
    act = activation.plan(manifest, prefix, site,
                          which=lambda n: shutil.which(n, path=str(bin_dir)))
    assert (act.values["CC"], act.values["CXX"]) == (str(bin_dir / f"gcc-{gcc}"),
                                                      str(bin_dir / f"g++-{gcc}"))
    # a plain gcc of that version will do; another version will not, and says what to install
    plain = _tools(tmp_path / "plain", "gcc", "g++", version=str(gcc))
    act = activation.plan(manifest, prefix, site,
                          which=lambda n: shutil.which(n, path=str(plain)))
    assert act.values["CC"] == str(plain / "gcc")
    other = _tools(tmp_path / "other", "gcc", "g++", version=str(gcc + 1))
    act = activation.plan(manifest, prefix, site,
                          which=lambda n: shutil.which(n, path=str(other)))
    assert "CC" not in act.values
    assert any(f"no gcc {gcc}" in n and f"gcc-{gcc} g++-{gcc}" in n for n in act.notes)
    # no nvcc where the lock put it: CUDA_HOME is not set, and the note says so
    assert "CUDA_HOME" not in act.values and any("CUDA_HOME not set" in n for n in act.notes)


def test_a_system_nvcc_lock_leaves_cuda_home_to_the_machine(make_args, tmp_path):
    manifest = _manifest(tmp_path, make_args, "--flavor", "venv", "--cuda", "12.8",
                         "--nvcc", "12.8")
    act = activation.plan(manifest, tmp_path / "p", tmp_path / "p" / "site",
                          which=lambda n: None)
    assert "CUDA_HOME" not in act.values and act.path == ()
    assert not any("CUDA_HOME" in n for n in act.notes)


def test_module_is_plain_python_that_sets_nothing_when_off(tmp_path):
    act = activation.Activation(values={"CUDA_HOME": "/e/nvidia/cu13", "CC": "/usr/bin/gcc-12"},
                                path=("/e/nvidia/cu13/bin",), notes=())
    site = tmp_path / "site"
    site.mkdir()
    activation.write(act, tmp_path, site, "venv")  # no bin/activate: the .pth and record only
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import _envgen_env, os; "
            "print(os.environ.get('CUDA_HOME'), os.environ['PATH'])")
    on = f"/e/nvidia/cu13 {tmp_path}/bin:/e/nvidia/cu13/bin:/usr/bin"  # the env's bin first
    for off, want in (("", on), ("off", "None /usr/bin")):
        out = subprocess.run(["python3", "-c", code, str(site)], capture_output=True, text=True,
                             env={"PATH": "/usr/bin", "ENVGEN_ENV": off}, check=True)
        assert out.stdout.strip() == want
