"""envgen doctor's live collection: the pure parsers of envgen/inside/collect_env.py and
envgen/doctor/collect.py, then collect() against real interpreters (venvs built here: without
torch, with a framework whose import fails, with a pip conflict, with the CPU torch wheel and
real C++ extensions built by torch.utils.cpp_extension, one of which fails to load).

Without the CPU torch wheel in /opt/wheels (or ENVGEN_TEST_TORCH) the torch tests skip, unless
ENVGEN_REQUIRE_TORCH=1, where they fail.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envgen import inside
from envgen.doctor.collect import (
    collect,
    driver_and_gpus,
    ops_from_env,
    parse_nvidia_smi,
    target_interpreter,
)
from envgen.doctor.snapshot import UNKNOWN, Snapshot
from envgen.errors import EnvironmentProblem, UsageError


def _load(name: str):
    """envgen/inside/<name>.py, loaded as the target runs it (its siblings importable), with
    sys.path as it was afterwards."""
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(name, inside.path(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


ce = _load("collect_env")
cp = _load("collect_parse")


# ---------------------------------------------------------------- pure parsers


def test_pip_check_lines():
    text = textwrap.dedent("""\
        deepspeed 0.19.8 has requirement pydantic>=2.0.0, but you have pydantic 1.10.13.
        torch 2.5.1 requires nvidia-nccl-cu12, which is not installed.
        torch 2.5.1 has requirement nvidia-nccl-cu12==2.21.5; platform_system == "Linux" and platform_machine == "x86_64", but you have nvidia-nccl-cu12 2.18.1.
        pyobjc 10.0 is not supported on this platform
        """)  # noqa: E501
    assert ce.parse_pip_check(text) == [
        {"package": "deepspeed", "version": "0.19.8", "requires": "pydantic>=2.0.0",
         "have": "1.10.13"},
        {"package": "torch", "version": "2.5.1", "requires": "nvidia-nccl-cu12", "have": None},
        {"package": "torch", "version": "2.5.1",
         "requires": 'nvidia-nccl-cu12==2.21.5; platform_system == "Linux" and '
                     'platform_machine == "x86_64"', "have": "2.18.1"},
    ]
    assert ce.parse_pip_check("No broken requirements found.\n") == []


def test_build_ninja_abi_flag_and_module():
    old = "cflags = -DTORCH_EXTENSION_NAME=cpu_adam -D_GLIBCXX_USE_CXX11_ABI=0 -fPIC\n" \
          "build cpu_adam.so: link cpu_adam.o\n"
    assert ce.ninja_cxx11_abi(old) is False
    assert ce.ninja_cxx11_abi(old.replace("ABI=0", "ABI=1")) is True
    assert ce.ninja_cxx11_abi("cflags = -fPIC -std=c++17\n") is None  # torch >= 2.7 passes none
    assert ce.ninja_module_file(old, "cpu_adam") == "cpu_adam.so"
    assert ce.ninja_module_file("build x_v1.so: link a.o\n", "x") == "x_v1.so"
    assert ce.ninja_module_file("", "fused_adam") == "fused_adam.so"


@pytest.mark.parametrize(("name", "expected"), [
    ("py311_cu121", ("3.11", "12.1")),
    ("py310_cpu", ("3.10", None)),
    ("py39_cu118", ("3.9", "11.8")),
    ("py313t_cu130", ("3.13", "13.0")),
    ("py311_rocm62", ("3.11", None)),
    ("cpu_adam", None),
    ("py311", None),
])
def test_extension_dir_names(name, expected):
    assert ce.parse_build_dir_name(name) == expected


def test_nvcc_version_text():
    text = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
            "Cuda compilation tools, release 13.0, V13.0.88\n"
            "Build cuda_13.0.r13.0/compiler.36424714_0\n")
    assert ce.parse_nvcc_version(text) == "13.0.88"
    assert ce.parse_nvcc_version("Cuda compilation tools, release 12.1, V12.1.105") == "12.1.105"
    assert ce.parse_nvcc_version("Cuda compilation tools, release 11.8") == "11.8"
    assert ce.parse_nvcc_version("command not found") is None


def test_os_release():
    debian = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
              'VERSION_ID="12"\nID=debian\n')
    assert ce.parse_os_release(debian) == "Debian GNU/Linux 12 (bookworm)"
    assert ce.parse_os_release('NAME="Rocky Linux"\nVERSION_ID="9.3"\n') == "Rocky Linux 9.3"
    assert ce.parse_os_release("# nothing\n") is None


def test_nccl_version_forms():
    assert cp.nccl_text((2, 27, 3)) == "2.27.3"
    assert cp.nccl_text((2, 21, 5, "+cuda12.4")) == "2.21.5"
    assert cp.nccl_text((2 << 32) | (18 << 16) | 3) == "2.18.3"
    assert cp.nccl_text(21805) == "2.18.5"
    assert cp.nccl_text(2708) == "2.7.8"


def test_nvidia_smi_csv():
    driver, gpus = parse_nvidia_smi("NVIDIA H100 80GB HBM3, 9.0, 550.54.15\n"
                                    "NVIDIA A100-SXM4-40GB, 8.0, 550.54.15\n")
    assert driver == "550.54.15"
    assert gpus == [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"},
                    {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]
    assert parse_nvidia_smi("Tesla V100-SXM2-16GB, 470.82.01\n") == (
        "470.82.01", [{"name": "Tesla V100-SXM2-16GB", "compute_capability": None}])
    assert parse_nvidia_smi("") == (None, [])


def test_ops_from_ds_build_variables():
    env = {"DS_BUILD_FUSED_ADAM": "1", "DS_BUILD_CPU_ADAM": "0", "DS_BUILD_AIO": "1",
           "DS_BUILD_OPS": "1", "DS_BUILD_STRING": "+abc", "PATH": "/bin"}
    assert ops_from_env(env) == ("async_io", "fused_adam")
    assert ops_from_env({"DS_BUILD_OPS": "1"}) == ()


# ---------------------------------------------------------------- choosing the interpreter


def test_nonexistent_python_is_a_usage_error(tmp_path):
    missing = tmp_path / "no-such-env" / "bin" / "python"
    with pytest.raises(UsageError) as err:
        collect(str(missing))
    assert str(missing) in err.value.message and "does not exist" in err.value.message
    assert err.value.exit_code == 2 and "--python" in err.value.hint
    with pytest.raises(UsageError, match="not an executable file"):
        collect(str(tmp_path))


def test_explicit_venv_python_is_run_as_if_activated(tmp_path):
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "bin" / "python").symlink_to(sys.executable)
    python, env = target_interpreter(str(prefix / "bin" / "python"),
                                     {"PATH": "/usr/bin", "PYTHONHOME": "/x"})
    assert python == str(prefix / "bin" / "python")  # not resolved through the link
    assert env["PATH"] == f"{prefix / 'bin'}{os.pathsep}/usr/bin"
    assert env["VIRTUAL_ENV"] == str(prefix) and "PYTHONHOME" not in env


def test_default_python_follows_the_active_env(tmp_path):
    prefix = tmp_path / "conda"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    python, _ = target_interpreter(None, {"CONDA_PREFIX": str(prefix), "PATH": ""})
    assert python == str(prefix / "bin" / "python")
    python, _ = target_interpreter(None, {"VIRTUAL_ENV": str(tmp_path / "gone"), "PATH": ""})
    assert python == sys.executable  # no venv python, no python3 on PATH: envgen's own


def test_a_failing_interpreter_is_an_environment_problem(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'error while loading shared libraries: "
                      "libpython3.11.so.1.0' >&2\nexit 127\n")
    broken.chmod(0o755)
    with pytest.raises(EnvironmentProblem) as err:
        collect(str(broken))
    assert str(broken) in err.value.message and "libpython3.11.so.1.0" in err.value.message
    assert err.value.exit_code == 4


def _no_driver_here() -> bool:
    """No nvidia-smi on PATH and no libnvidia-ml.so.1 the loader finds: no NVIDIA driver."""
    import ctypes

    if shutil.which("nvidia-smi") is not None:
        return False
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return True
    return False


def test_driver_and_gpus_here():
    """This machine's answer: known none only without NVML and nvidia-smi."""
    found = driver_and_gpus()
    if found.get("driver"):
        assert found["gpus"] and all(g["name"] for g in found["gpus"])
    elif _no_driver_here():
        assert found == {"driver": None, "gpus": []}
    else:
        assert found == {}


# ---------------------------------------------------------------- real environments


def _venv(root: Path, *, pip: bool = True) -> str:
    cmd = [sys.executable, "-m", "venv", *([] if pip else ["--without-pip"]), str(root)]
    subprocess.run(cmd, check=True, capture_output=True)
    return str(root / "bin" / "python")


def _site_packages(python: str) -> Path:
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _write_package(site: Path, module: str, body: str, *, version: str | None = None) -> None:
    pkg = site / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    if version:
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\n"
                                       f"Version: {version}\n")
        (info / "RECORD").write_text("")
        (info / "INSTALLER").write_text("pip\n")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """The collection reads the environment: none of the caller's venv / build variables."""
    for name in list(os.environ):
        if name.startswith(ce.ENV_PREFIXES) or name in (
                *ce.ENV_NAMES, "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory) -> str:
    return _venv(tmp_path_factory.mktemp("plain") / "venv")


@pytest.fixture(scope="module")
def broken_python(tmp_path_factory) -> str:
    """A venv where deepspeed 0.19.8 is installed but its import fails (as when its compiled
    part cannot be found), and a package whose metadata requires what is not installed."""
    root = tmp_path_factory.mktemp("broken")
    python = _venv(root / "venv")
    site = _site_packages(python)
    _write_package(site, "deepspeed", """\
        from deepspeed.ops.op_builder import _the_compiled_part  # a module that is not there
        """, version="0.19.8")
    project = root / "needy"
    (project / "needy").mkdir(parents=True)
    (project / "needy" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "needy"
        version = "1.0"
        dependencies = ["pip>=999", "envgen-test-not-installed>=1"]
        """))
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(project)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return python


@pytest.mark.integration
def test_a_venv_without_torch(plain_python):
    snap = collect(plain_python, ops=("cpu_adam",))
    assert isinstance(snap, Snapshot)
    assert snap.python == "{}.{}.{}".format(*sys.version_info[:3])
    assert snap.torch is None and snap.torch_cuda is UNKNOWN  # not installed: no torch facts
    assert snap.import_errors == {} and snap.frameworks == {}
    assert "pip" in snap.packages and snap.conflicts == ()
    assert snap.ops == ("cpu_adam",)
    assert snap.torch_extensions == () or all(e.loads is None for e in snap.torch_extensions)
    assert snap.platform in ("linux-x86_64", "linux-aarch64", "wsl2")
    assert snap.glibc and snap.os
    assert snap.libaio is not UNKNOWN and snap.env == {}
    assert snap.ninja == (_ninja_version() if shutil.which("ninja") else None)
    if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda"):
        assert snap.cuda_home is None and snap.nvcc is None and snap.path_nvcc is None
    else:
        assert snap.cuda_home and snap.nvcc
    if _no_driver_here():
        assert snap.driver is None and snap.gpus == ()
    assert Snapshot.from_dict(snap.to_dict()) == snap  # a saved snapshot reads back equal


def _ninja_version() -> str:
    return subprocess.run(["ninja", "--version"], capture_output=True, text=True
                          ).stdout.strip()


@pytest.mark.integration
def test_environment_variables_and_ds_build_ops(plain_python, monkeypatch, tmp_path):
    monkeypatch.setenv("DS_BUILD_FUSED_ADAM", "1")
    monkeypatch.setenv("DS_BUILD_OPS", "0")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-12.1"))  # a toolkit that is not there
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    snap = collect(plain_python, ops=("cpu_adam",))
    assert snap.ops == ("cpu_adam", "fused_adam")
    assert snap.env == {"CUDA_HOME": str(tmp_path / "cuda-12.1"), "DS_BUILD_FUSED_ADAM": "1",
                        "DS_BUILD_OPS": "0", "NCCL_DEBUG": "INFO"}
    assert snap.cuda_home == str(tmp_path / "cuda-12.1") and snap.nvcc is None


@pytest.mark.integration
def test_a_failing_framework_import_is_a_fact(broken_python, monkeypatch, tmp_path):
    checkout = tmp_path / "ColossalAI"  # a source checkout on PYTHONPATH: no metadata
    _write_package(checkout, "colossalai", "")
    monkeypatch.setenv("PYTHONPATH", str(checkout))
    snap = collect(broken_python)
    assert snap.frameworks == {"deepspeed": "0.19.8", "colossalai": None}
    assert snap.packages["deepspeed"] == "0.19.8" and "colossalai" not in snap.packages
    assert snap.import_errors == {"deepspeed": "ModuleNotFoundError: No module named "
                                               "'deepspeed.ops'"}
    assert snap.torch is None


@pytest.mark.integration
def test_pip_check_conflicts(broken_python):
    snap = collect(broken_python)
    assert {c.to_dict()["package"] for c in snap.conflicts} == {"needy"}
    by_requirement = {c.requires: c for c in snap.conflicts}
    assert by_requirement["envgen-test-not-installed"].have is None  # pip names only
    pip = by_requirement["pip>=999"]
    assert pip.version == "1.0" and pip.have == snap.packages["pip"]


@pytest.mark.integration
def test_an_import_that_crashes_or_hangs_does_not_stop_the_collection(plain_python, tmp_path,
                                                                       monkeypatch):
    extra = tmp_path / "path"
    _write_package(extra, "apex", "import ctypes\nctypes.string_at(0)\n")  # a real SIGSEGV
    _write_package(extra, "flash_attn", "raise OSError('libcudart.so.12: cannot open shared "
                                        "object file: No such file or directory')\n")
    _write_package(extra, "transformer_engine", "import time\ntime.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", str(extra))
    snap = collect(plain_python, timeout=18)
    assert snap.import_errors["apex"].startswith("the process died (killed by signal 11)")
    assert snap.import_errors["flash_attn"] == ("OSError: libcudart.so.12: cannot open shared "
                                               "object file: No such file or directory")
    assert snap.import_errors["transformer_engine"].startswith("timed out after")
    assert snap.python and snap.packages  # the rest was collected


@pytest.mark.integration
def test_an_old_python(tmp_path):
    """The script runs under the oldest Python a target may have (3.8)."""
    found = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8")) or [
        p for p in [shutil.which("python3.8")] if p]
    if not found:
        pytest.skip("no Python 3.8 on this machine")
    snap = collect(found[0])
    assert snap.python.startswith("3.8.") and snap.packages and snap.import_errors == {}


# ---------------------------------------------------------------- a real CPU torch


def _torch_requirement() -> list[str] | None:
    if os.environ.get("ENVGEN_TEST_TORCH"):
        return [os.environ["ENVGEN_TEST_TORCH"]]
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    local = sorted(glob.glob(f"/opt/wheels/torch-*+cpu-{tag}-*.whl"))
    return [local[-1]] if local else None


def _fail_or_skip(reason: str):
    if os.environ.get("ENVGEN_REQUIRE_TORCH"):
        pytest.fail(reason)
    pytest.skip(reason)


GOOD = """\
#include <pybind11/pybind11.h>
int add_one(int x) { return x + 1; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one); }
"""
# declared, called, defined nowhere: the shared object links (undefined symbols are allowed
# in one) and fails to load, as a cache built against another torch does
BROKEN = """\
#include <pybind11/pybind11.h>
extern "C" int envgen_symbol_from_another_torch(int);
int call(int x) { return envgen_symbol_from_another_torch(x); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("call", &call); }
"""
BUILD = """\
import sys
from torch.utils.cpp_extension import load
name, source, directory = sys.argv[1:4]
try:
    load(name, [source], build_directory=directory or None)
except ImportError as exc:
    print("IMPORT FAILED:", exc)
else:
    print("LOADED")
"""


@pytest.fixture(scope="module")
def torch_env(tmp_path_factory):
    """A venv with the CPU torch wheel, and three extensions built by
    torch.utils.cpp_extension.load: two under a TORCH_EXTENSIONS_DIR (one loads, one fails
    with "undefined symbol"), one in torch's default cache layout under XDG_CACHE_HOME."""
    requirement = _torch_requirement()
    if requirement is None:
        _fail_or_skip("no CPU torch wheel for this Python in /opt/wheels (set "
                      "ENVGEN_TEST_TORCH)")
    root = tmp_path_factory.mktemp("torch")
    python = _venv(root / "venv")
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", *requirement],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if proc.returncode != 0:
        _fail_or_skip(f"cannot install the CPU torch wheel: {proc.stderr[-1500:]}")
    if not (shutil.which("ninja") and shutil.which("c++")):
        _fail_or_skip("building torch extensions needs ninja and c++ on PATH")
    ext_dir, cache = root / "torch_extensions", root / "cache"
    (root / "build.py").write_text(BUILD)
    (root / "good.cpp").write_text(GOOD)
    (root / "broken.cpp").write_text(BROKEN)
    base = {**os.environ, "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}"}
    base.pop("TORCH_EXTENSIONS_DIR", None)
    jobs = [("good_ext", "good.cpp", str(ext_dir / "good_ext"), {}),
            ("broken_ext", "broken.cpp", str(ext_dir / "broken_ext"), {}),
            ("cached_ext", "good.cpp", "", {"XDG_CACHE_HOME": str(cache)})]
    procs = []
    for name, source, directory, extra in jobs:
        if directory:
            Path(directory).mkdir(parents=True)
        procs.append(subprocess.Popen(
            [python, str(root / "build.py"), name, str(root / source), directory],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
            env={**base, **extra}))
    outputs = {}
    for (name, *_), proc in zip(jobs, procs, strict=True):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        outputs[name] = out
    # the real failure first: the broken build's module does not load
    assert "LOADED" in outputs["good_ext"] and "LOADED" in outputs["cached_ext"]
    assert "undefined symbol: envgen_symbol_from_another_torch" in outputs["broken_ext"]
    return {"python": python, "ext_dir": ext_dir, "cache": cache}


@pytest.mark.integration
def test_torch_facts_of_a_cpu_build(torch_env):
    snap = collect(torch_env["python"])
    assert snap.torch.endswith("+cpu") and snap.packages["torch"] == snap.torch
    assert snap.torch_cuda is None and snap.torch_nccl is None
    assert snap.torch_arch_list is None  # a CPU build has no CUDA archs
    assert snap.torch_cxx11_abi is True  # the manylinux_2_28 wheels use the C++11 ABI
    assert "torch" not in snap.import_errors


@pytest.mark.integration
def test_cached_extensions_and_whether_they_load(torch_env, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(torch_env["ext_dir"]))
    snap = collect(torch_env["python"])
    by_op = {e.ops[0]: e for e in snap.torch_extensions}
    assert set(by_op) == {"good_ext", "broken_ext"}
    good, broken = by_op["good_ext"], by_op["broken_ext"]
    assert good.path == str(torch_env["ext_dir"] / "good_ext")
    assert good.loads is True and good.error is None
    assert broken.loads is False
    assert "undefined symbol: envgen_symbol_from_another_torch" in broken.error
    assert broken.error.startswith("ImportError: ")
    assert good.python is None and good.cuda is None  # this layout's names say neither
    assert good.cxx11_abi is None  # torch >= 2.7 passes no -D_GLIBCXX_USE_CXX11_ABI


@pytest.mark.integration
def test_the_default_extension_cache_layout(torch_env, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(torch_env["cache"]))
    snap = collect(torch_env["python"])
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}_cpu"
    (entry,) = snap.torch_extensions
    assert entry.path == str(torch_env["cache"] / "torch_extensions" / tag / "cached_ext")
    assert entry.ops == ("cached_ext",) and entry.cuda is None
    assert entry.python == "{}.{}".format(*sys.version_info[:2])
    assert entry.loads is True and entry.torch is None


@pytest.mark.integration
def test_a_failing_torch_import_keeps_its_version(torch_env, monkeypatch, tmp_path):
    """torch installed but its import fails: the version still comes from torch/version.py."""
    shadow = tmp_path / "shadow"
    _write_package(shadow, "typing_extensions", "raise ImportError('broken typing_extensions')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    snap = collect(torch_env["python"])
    assert snap.import_errors["torch"] == "ImportError: broken typing_extensions"
    assert snap.torch.endswith("+cpu") and snap.torch_cuda is None
    assert snap.torch_cxx11_abi is UNKNOWN
