"""Real broken CUDA-toolchain environments (Docker): each test first reproduces the real failure,
then checks that `envgen doctor` (run inside the container, on /opt/env/bin/python) names it as an
error, then runs the fix command it printed, exactly as printed, and checks that the op builds and
loads and that the doctor no longer reports that error.

Images (tests/support/broken_envs/cuda/Dockerfile, built once per module):
  envgen-test/broken-cuda:1           torch 2.14.1 (CUDA 13.0) + CUDA 13.0 toolkit from PyPI +
                                      DeepSpeed 0.19.8; fault material kept in the image
  envgen-test/broken-cuda-cputorch:1  torch 2.13.0+cpu + DeepSpeed 0.19.8 at the same /opt/env
Faults:
  1. CUDA_HOME names a second toolkit (13.2) while PATH's nvcc is torch's 13.0: DeepSpeed's op
     prebuild (DS_BUILD_FUSED_ADAM=1 pip install) raises CUDAMismatchException.
  2. a second NCCL wheel (nvidia-nccl-cu12 2.21.5) next to torch's pin (nvidia-nccl-cu13): both
     own nvidia/nccl/lib/libnccl.so.2, so `import torch` fails with an undefined nccl symbol
     (and `pip check` sees nothing wrong).
  3. a torch extensions folder shared by two environments (TORCH_EXTENSIONS_DIR): torch 2.14's
     JIT build leaves the `lock` file (an advisory lock since 2.14); torch 2.13 takes its existence
     as "another process is building" and waits forever.

Needs dockerd, PyPI through the proxy (several GB) and, for fault 3, the torch 2.13.0+cpu wheel in
/opt/wheels. Not in the default run: `nox -s doctor_envs` (or `pytest -m cuda_toolchain`).
Run with -s to see each step's time.
"""

from __future__ import annotations

import json
import shlex
import time

import pytest
from support.broken_envs.cuda import images
from support.broken_envs.cuda.images import CPU_TORCH_IMAGE, CUDA_IMAGE, Container, Volume

pytestmark = [pytest.mark.docker, pytest.mark.broken_env, pytest.mark.cuda_toolchain]

PY = "/opt/env/bin/python"
TORCH_CUDA_HOME = "/opt/env/lib/python3.11/site-packages/nvidia/cu13"
OTHER_CUDA_HOME = "/opt/cuda-13.2/nvidia/cu13"
# the reference build: the CUDA accelerator without a GPU, Hopper only, two compile jobs
CUDA_BUILD_ENV = {"DS_ACCELERATOR": "cuda", "TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "2"}
# DeepSpeed's install-time op build, as users run it (the sdist is kept in the image)
PREBUILD_FUSED_ADAM = ("cd /tmp && DS_BUILD_OPS=0 DS_BUILD_FUSED_ADAM=1 /opt/env/bin/pip install "
                       "--no-build-isolation /opt/faults/deepspeed-0.19.8.tar.gz")
LOAD_PREBUILT_FUSED_ADAM = (
    f"{PY} -c 'import deepspeed.git_version_info as g; assert g.installed_ops[\"fused_adam\"], "
    "g.installed_ops; from deepspeed.ops.op_builder import FusedAdamBuilder; "
    "m = FusedAdamBuilder().load(); print(\"LOADED\", m.__name__)'")
JIT_FUSED_ADAM = (f"{PY} -c 'from deepspeed.ops.op_builder import FusedAdamBuilder; "
                  "m = FusedAdamBuilder().load(); print(\"LOADED\", m.__file__)'")
# cpu_adam with the CPU accelerator (DS_ACCELERATOR unset, no GPU); a hang dumps its stack
JIT_CPU_ADAM = (f"{PY} -c 'import faulthandler; faulthandler.dump_traceback_later({{hang}}, "
                "exit=True); from deepspeed.ops.op_builder import CPUAdamBuilder; "
                "m = CPUAdamBuilder().load(); print(\"LOADED\", m.__file__)'")
DOCTOR = f"/opt/envgen/bin/envgen doctor --python {PY} --json"


def _step(name: str, seconds: float) -> None:
    print(f"\n[broken-cuda] {name}: {seconds:.1f} s", flush=True)


def _tail(text: str, n: int = 2500) -> str:
    return text[-n:]


@pytest.fixture(scope="module")
def built(docker_ready, tmp_path_factory) -> dict[str, bool]:
    """Both images, the cuda one first (so that nothing in it is newer than what a container of
    the other image builds later). {"cpu_torch": whether the torch 2.13 CPU image exists}."""
    start = time.monotonic()
    context = images.make_context(tmp_path_factory.mktemp("broken-cuda") / "context")
    _step("build context", time.monotonic() - start)
    _step(f"docker build {CUDA_IMAGE}", images.build(context, "cuda", CUDA_IMAGE))
    has_cpu = images.cpu_torch_wheel() is not None
    if has_cpu:
        _step(f"docker build {CPU_TORCH_IMAGE}",
              images.build(context, "cpu-torch", CPU_TORCH_IMAGE))
    return {"cpu_torch": has_cpu}


def doctor(c: Container, *args: str, prefix: str = "") -> tuple[int, dict]:
    """`envgen doctor --json ARGS` in ``c`` (after the shell lines ``prefix``): (exit code, its
    JSON report)."""
    script = f"{prefix}\n{DOCTOR} {' '.join(map(shlex.quote, args))} 2>/tmp/doctor.err"
    rc, out, seconds = c.sh(script, timeout=300)
    _step(f"envgen doctor {' '.join(args)} -> exit {rc}", seconds)
    assert rc in (0, 1), f"doctor failed ({rc}): {_tail(out)}"
    report = json.loads(out)
    for f in report["findings"]:
        print(f"  {f['severity']:7} {f['kind']}: {f['summary']}\n          command: {f['command']}")
    for n in report["needs"]:
        print(f"  need    {n['fact']}: {n['why']}")
    return rc, report


def errors(report: dict, *kinds: str) -> list[dict]:
    return [f for f in report["findings"] if f["severity"] == "error" and f["kind"] in kinds]


def test_cuda_home_names_another_toolkit(built):
    """CUDA_HOME = a 13.2 toolkit, PATH's nvcc = torch's 13.0: DeepSpeed's op prebuild refuses."""
    env = {"CUDA_HOME": OTHER_CUDA_HOME, **CUDA_BUILD_ENV}
    with Container(CUDA_IMAGE, env=env) as c:
        rc, out, seconds = c.sh(PREBUILD_FUSED_ADAM)
        _step(f"fault 1: prebuild fused_adam with CUDA_HOME={OTHER_CUDA_HOME} -> exit {rc}",
              seconds)
        assert rc != 0, _tail(out)
        assert "CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA version 13.2 " \
               "does not match the version torch was compiled with 13.0" in out, _tail(out)

        rc, report = doctor(c, "--framework", "deepspeed", "--op", "fused_adam")
        assert rc == 1
        assert report["snapshot"]["cuda_home"] == OTHER_CUDA_HOME
        assert report["snapshot"]["nvcc"].startswith("13.2.")
        assert report["snapshot"]["path_nvcc"].startswith("13.0.")
        found = errors(report, "cuda_home_mismatch", "cuda_minor_mismatch")
        assert found, report["findings"]
        command = found[0]["command"]
        assert command == f"export CUDA_HOME={TORCH_CUDA_HOME}"

        # the fix, in the same shell as the rebuild (an export lasts as long as its shell)
        rc, out, seconds = c.sh(f"set -e\n{command}\n{PREBUILD_FUSED_ADAM}\n"
                                f"{LOAD_PREBUILT_FUSED_ADAM}", timeout=1800)
        _step(f"fix: `{command}` + prebuild fused_adam + load -> exit {rc}", seconds)
        assert rc == 0, _tail(out)
        assert "LOADED" in out

        rc, report = doctor(c, "--framework", "deepspeed", "--op", "fused_adam", prefix=command)
        assert not errors(report, "cuda_home_mismatch", "cuda_minor_mismatch"), \
            report["findings"]


def test_two_nccl_wheels(built):
    """nvidia-nccl-cu12 installed next to torch's nvidia-nccl-cu13 pin: same libnccl.so.2 path,
    the older library wins, `import torch` fails (pip check is happy)."""
    with Container(CUDA_IMAGE, env=CUDA_BUILD_ENV) as c:
        pin = c.sh(f"{PY} -c 'from importlib import metadata as m; "
                   "print(m.version(\"nvidia-nccl-cu13\"))'")[1].strip()
        rc, out, seconds = c.sh("/opt/env/bin/pip install -q --no-deps "
                                "/opt/faults/nvidia_nccl_cu12-2.21.5-*.whl")
        _step("fault 2: pip install --no-deps nvidia-nccl-cu12==2.21.5", seconds)
        assert rc == 0, _tail(out)
        rc, out, _ = c.sh("/opt/env/bin/pip check")
        assert rc == 0 and "No broken requirements found" in out, out

        rc, out, seconds = c.sh(JIT_FUSED_ADAM)
        _step(f"fused_adam build with two NCCL wheels -> exit {rc}", seconds)
        assert rc != 0
        assert "ImportError: /opt/env/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: " \
               "undefined symbol: nccl" in out, _tail(out)

        rc, report = doctor(c, "--framework", "deepspeed", "--op", "fused_adam")
        assert rc == 1
        assert "torch" in report["snapshot"].get("import_errors", {}), report["snapshot"]
        found = errors(report, "nccl_mismatch")
        assert found, report["findings"]
        command = found[0]["command"]
        assert command and "nvidia-nccl-cu12" in command

        rc, out, seconds = c.sh(f"set -e\n{command}", timeout=900)
        _step(f"fix: `{command}` -> exit {rc}", seconds)
        assert rc == 0, _tail(out)
        rc, out, _ = c.sh(f"{PY} -c 'import torch; print(torch.cuda.nccl.version())'")
        assert rc == 0 and out.strip().endswith(str(tuple(int(x) for x in pin.split(".")))), out
        rc, out, seconds = c.sh(JIT_FUSED_ADAM, timeout=1800)
        _step(f"fused_adam JIT build after the fix -> exit {rc}", seconds)
        assert rc == 0 and "LOADED" in out, _tail(out)

        rc, report = doctor(c, "--framework", "deepspeed", "--op", "fused_adam")
        assert not errors(report, "nccl_mismatch"), report["findings"]


def test_extension_cache_shared_with_another_torch(built):
    """TORCH_EXTENSIONS_DIR shared by torch 2.14 (CUDA image) and torch 2.13 (CPU image): after
    2.14 builds cpu_adam there, 2.13 waits forever on the `lock` file 2.14 leaves behind."""
    if not built["cpu_torch"]:
        pytest.skip(f"no torch 2.13.0+cpu wheel in {images.CPU_TORCH_WHEELS}")
    with Volume() as volume:
        shared = {"TORCH_EXTENSIONS_DIR": "/ext", "MAX_JOBS": "2"}
        with Container(CUDA_IMAGE, env=shared, volumes={volume.name: "/ext"}) as new:
            rc, out, seconds = new.sh(JIT_CPU_ADAM.format(hang=1500), timeout=1800)
            _step(f"torch 2.14 builds cpu_adam into the shared folder -> exit {rc}", seconds)
            assert rc == 0 and "LOADED /ext/cpu_adam/cpu_adam.so" in out, _tail(out)
            assert new.sh("test -f /ext/cpu_adam/lock")[0] == 0  # torch 2.14 keeps its lock file

        with Container(CPU_TORCH_IMAGE, env=shared, volumes={volume.name: "/ext"}) as old:
            rc, out, seconds = old.sh(JIT_CPU_ADAM.format(hang=60), timeout=300)
            _step(f"torch 2.13 loads cpu_adam from the shared folder -> exit {rc} (hang)", seconds)
            assert rc != 0 and "LOADED" not in out, _tail(out)
            assert "Timeout (0:01:00)!" in out and "file_baton.py" in out and "in wait" in out, \
                _tail(out)

            rc, report = doctor(old, "--framework", "deepspeed", "--op", "cpu_adam")
            found = errors(report, "stale_extension_cache")
            assert rc == 1 and found, (report["findings"],
                                       report["snapshot"].get("torch_extensions"))
            command = found[0]["command"]
            assert command == "rm -rf /ext/cpu_adam"

            rc, out, seconds = old.sh(f"set -e\n{command}\n" + JIT_CPU_ADAM.format(hang=1500),
                                      timeout=1800)
            _step(f"fix: `{command}` + cpu_adam build with torch 2.13 -> exit {rc}", seconds)
            assert rc == 0 and "LOADED /ext/cpu_adam/cpu_adam.so" in out, _tail(out)

            rc, report = doctor(old, "--framework", "deepspeed", "--op", "cpu_adam")
            assert not errors(report, "stale_extension_cache"), report["findings"]
