"""The README's newcomer path, as a new user runs it, against the local stand-ins (loopback
index, no network): `envgen make --flavor venv` with no --python (a Python this machine has),
`envgen install` with no --python (the interpreter found for it), `envgen doctor` on the result
(exit 0, although the machine exports a CUDA_HOME with another nvcc), the env's compilers,
`--image` with no extra flags and `build --dry-run`, `whatif` and `drift` on the lock. The same
path against the real PyPI, with the real torch and DeepSpeed, is recorded in
docs/quickstart.md."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.run import HOST_PY

pytestmark = pytest.mark.integration


def _machine(tmp_path: Path) -> dict[str, str]:
    """This machine as the newcomer's: one Python (the host's) on PATH, no pyenv/uv/conda in
    HOME, and a site-wide CUDA_HOME whose nvcc is CUDA 13.2 (torch's is 13.0): issue 36's trap."""
    others = [p for p in glob.glob("/usr/bin/python3.*") + glob.glob("/usr/local/bin/python3.*")
              if p.rsplit("python", 1)[1] not in (HOST_PY, f"{HOST_PY}-config")]
    if others:
        pytest.skip(f"this machine has other system Pythons ({', '.join(others)}): the lock "
                    f"would be for one the loopback index has no wheels for")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / f"python{HOST_PY}").symlink_to(sys.executable)
    cuda = tmp_path / "site-cuda" / "bin"
    cuda.mkdir(parents=True)
    (cuda / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.2, "
                               "V13.2.78'\n")
    (cuda / "nvcc").chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYENV", "CONDA", "UV_", "VIRTUAL_ENV", "ENVGEN_ENV"))}
    env.update(PATH=f"{bin_dir}:{cuda}:/usr/bin:/bin", HOME=str(tmp_path / "home"),
               CUDA_HOME=str(cuda.parent))
    return env


def _envgen(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def _without(args: list[str], option: str) -> list[str]:
    i = args.index(option)
    return args[:i] + args[i + 2:]


def test_the_readme_path_on_a_new_machine(make_args, tmp_path):
    env = _machine(tmp_path)
    args = _without(make_args, "--python")
    made = _envgen(env, *args, "--flavor", "venv", "--json")
    assert made.returncode == 0, made.stderr
    lock = Path(json.loads(made.stdout)["directory"])
    assert f"-py{HOST_PY}-" in lock.name  # the Python this machine has

    prefix = tmp_path / "env"
    installed = _envgen(env, "install", str(lock), "--prefix", str(prefix))
    assert installed.returncode == 0, installed.stderr
    assert f"(from {tmp_path / 'bin' / f'python{HOST_PY}'})" in installed.stderr
    assert "Check it: envgen doctor --python" in installed.stdout

    doctor = _envgen(env, "doctor", "--python", str(prefix / "bin" / "python"), "--json")
    report = json.loads(doctor.stdout)
    kinds = [f["kind"] for f in report["findings"]]
    assert doctor.returncode == 0, kinds
    assert "cuda_minor_mismatch" not in kinds
    # the machine's CUDA_HOME is what the env's settings overrule: without them, the trap
    off = _envgen({**env, "ENVGEN_ENV": "off"}, "doctor", "--python",
                  str(prefix / "bin" / "python"), "--json")
    assert off.returncode == 1
    assert "cuda_minor_mismatch" in [f["kind"] for f in json.loads(off.stdout)["findings"]]

    # the env's compilers: the lock's gcc where this machine has it, used by a build inside
    gcc = json.loads(lock.joinpath("envgen.lock.json").read_text())["combination"]["gcc"]
    source = tmp_path / "op.c"
    source.write_text("int op(int x) { return 7 * x; }\n")
    build = subprocess.run([str(prefix / "bin" / "python"), "-c",
                            "import os, subprocess, sys; print(os.environ.get('CC', '')); "
                            "sys.exit(subprocess.call([os.environ.get('CC', 'cc'), '-c', "
                            f"{str(source)!r}, '-o', {str(tmp_path / 'op.o')!r}]))"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert build.returncode == 0, build.stderr
    if shutil.which(f"gcc-{gcc}"):
        assert build.stdout.strip() == shutil.which(f"gcc-{gcc}")

    image = _envgen(env, *args, "--flavor", "venv", "--image", "--gpu-arch", "sm_90",
                    "--out", str(tmp_path / "image-locks"), "--json")
    if HOST_PY != "3.11":  # the fixture matrix's debian-12 base has bookworm's Python 3.11
        assert image.returncode in (2, 3), image.stderr
    else:
        assert image.returncode == 0, image.stderr
        directory = json.loads(image.stdout)["directory"]
        assert f"-py{HOST_PY}-" in directory
        dry = _envgen(env, "build", directory, "--dry-run")
        assert dry.returncode == 0, dry.stderr

    # what another torch would mean: 2.9 has no CUDA 13 build, which the venv flavor needs;
    # said (exit 3), with the nearest request that works
    whatif = _envgen(env, "whatif", "--lock", str(lock), "--torch", "2.9", "--matrix-dir",
                     args[args.index("--matrix-dir") + 1], "--json")
    assert whatif.returncode == 3, whatif.stderr
    assert json.loads(whatif.stdout)["feasible"] is False
    whatif = _envgen(env, "whatif", "--lock", str(lock), "--os", "ubuntu-24.04",
                     "--matrix-dir", args[args.index("--matrix-dir") + 1], "--json")
    assert whatif.returncode == 0, whatif.stderr
    moved = json.loads(whatif.stdout)
    assert moved["new"].startswith("deepspeed-0.18.2-torch2.12.0-cu130-"), moved["new"]
    assert moved["pip"] is not None  # solved on the lock's own (loopback) index
    drift = _envgen(env, "drift", "--lock", str(lock), "--matrix-dir",
                    args[args.index("--matrix-dir") + 1], "--json")
    assert drift.returncode == 0, drift.stderr
    assert json.loads(drift.stdout)["drifted"] is False
