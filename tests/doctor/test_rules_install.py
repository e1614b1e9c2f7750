"""The install rules (envgen/doctor/rules_install.py) and the requirement-conflict lines
(envgen/doctor/reports/requirements.py) on real reports' text: the dev corpus
(tests/doctor/corpus, set = "dev") and threads quoted with their URL."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from envgen.doctor.reports import parse_report

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "doctor" / "corpus" / "reports"

# X-PLUG/MobileAgent#60 (2024-09-13), title and description as written; maintainer
# junyangwang0410: install the GPU build of torch for your CUDA (no suffix = the CPU build)
MOBILEAGENT_60 = """请教大佬：AssertionError: Torch not compiled with CUDA enabled这个问题怎么解决
当前环境：NVIDIA-SMI 475.14       Driver Version: 475.14       CUDA Version: 11.4
Python版本：3.10.11
"""
# facebookresearch/detectron2#460 (2019-12-04): the traceback's last lines as pasted
DETECTRON2_460 = """File "/home/xx/anaconda3/envs/tf-gpu/lib/python3.7/site-packages/torch/cuda/__init__.py", line 95, in _check_driver
    raise AssertionError("Torch not compiled with CUDA enabled")
AssertionError: Torch not compiled with CUDA enabled
"""  # noqa: E501


def test_transformers_require_version_names_dependency_conflict(diagnose) -> None:
    # hiyouga/WeClone#184: deepspeed 0.17.2 above the <=0.16.9 the training stack requires
    d = diagnose((CORPUS / "WeClone-184.txt").read_text())
    first = d.findings[0]
    assert first.kind == "dependency_conflict" and first.severity == "error"  # deepspeed: core
    assert "is required for a normal functioning" in first.explains
    assert first.evidence == {"package": None, "version": None,
                              "requires": "deepspeed>=0.10.0,<=0.16.9", "have": "0.17.2"}
    assert first.command == "python -m pip install 'deepspeed>=0.10.0,<=0.16.9'"
    assert shlex.split(first.command)[-1] == "deepspeed>=0.10.0,<=0.16.9"


@pytest.mark.parametrize("line, conflict", [
    # pip's resolver warning (as quoted in a vllm build note)
    ("vllm 0.6.6 requires torch==2.5.1, but you have torch 2.2.0a0+git8ac9b20 which is "
     "incompatible.", {"package": "vllm", "version": "0.6.6", "requires": "torch==2.5.1",
                       "have": "2.2.0a0+git8ac9b20"}),
    ("vllm 0.6.6 requires xformers==0.0.28.post3; platform_system == \"Linux\" and "
     "platform_machine == \"x86_64\", which is not installed.",
     {"package": "vllm", "version": "0.6.6", "have": None,
      "requires": "xformers==0.0.28.post3; platform_system == \"Linux\" and platform_machine "
                  "== \"x86_64\""}),
    # pip check, and older pips' install warning
    ("deepspeed 0.9.0 has requirement torch>=1.9, but you have torch 1.8.0.",
     {"package": "deepspeed", "version": "0.9.0", "requires": "torch>=1.9", "have": "1.8.0"}),
    ("ERROR: tensorflow 2.1.0 has requirement opt-einsum>=2.3.2, but you'll have opt-einsum "
     "0+untagged.56.g2664021.dirty which is incompatible.",
     {"package": "tensorflow", "version": "2.1.0", "requires": "opt-einsum>=2.3.2",
      "have": "0+untagged.56.g2664021.dirty"}),
])
def test_pip_conflict_lines_are_read(line, conflict) -> None:
    snap = parse_report(line).snapshot
    (c,) = snap.conflicts
    assert c.to_dict() == conflict
    assert snap.errors["requirement"] == line


def test_prose_about_requirements_is_not_a_conflict() -> None:
    snap = parse_report("the README says transformers requires accelerate, which is not "
                        "installed by default").snapshot
    assert not snap.known("conflicts")


def test_python_h_missing_names_python_headers(diagnose) -> None:
    # deepspeedai/DeepSpeed#3223: the op build stops at torch's python_headers.h
    d = diagnose((CORPUS / "DeepSpeed-3223.txt").read_text())
    f = next(f for f in d.findings if f.kind == "python_headers_missing")
    assert f.severity == "error" and "Python.h" in f.explains
    assert f.evidence["python"] == "3.10"  # from the venv's path in the error line
    assert "python3.10-dev" in f.fix and f.command is None  # the OS is not stated


def test_python_h_on_ubuntu_gives_the_apt_command(diagnose) -> None:
    text = (CORPUS / "DeepSpeed-3223.txt").read_text() + "\nOS: Ubuntu 22.04.3 LTS (x86_64)\n"
    f = next(f for f in diagnose(text).findings if f.kind == "python_headers_missing")
    assert f.command == "sudo apt-get install -y python3.10-dev"


@pytest.mark.parametrize("name, module, package", [
    # ostris/ai-toolkit#242: apex's fused_layer_norm_cuda built for another torch
    ("ai-toolkit-242.txt", "fused_layer_norm_cuda", None),
    # rusty1s/pytorch_cluster#100: torch_cluster compiled for another torch/CUDA
    ("pytorch_cluster-100.txt", "torch_cluster._grid_cuda", "torch_cluster"),
])
def test_undefined_torch_symbol_names_extension_built_for_other_torch(diagnose, name, module,
                                                                      package) -> None:
    d = diagnose((CORPUS / name).read_text())
    first = d.findings[0]
    assert first.kind == "extension_built_for_other_torch" and first.severity == "error"
    assert "undefined symbol" in first.explains
    assert first.evidence["module"] == module and first.evidence["package"] == package
    assert not any(f.kind == "import_failed" for f in d.findings)  # superseded
    if package:
        assert first.command.endswith("--no-build-isolation torch-cluster")


def test_undefined_symbol_inside_torch_is_not_an_extension_mismatch(diagnose) -> None:
    line = ("ImportError: /usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so: undefined "
            "symbol: _ZN3c104cuda9SetDeviceEi")
    kinds = {f.kind for f in diagnose(line).findings}
    assert "extension_built_for_other_torch" not in kinds


def test_apex_module_missing_names_the_install_option(diagnose) -> None:
    # NVIDIA/apex#499: apex installed without --cpp_ext --cuda_ext
    d = diagnose((CORPUS / "apex-499.txt").read_text())
    first = d.findings[0]
    assert first.kind == "apex_cuda_ext_missing" and first.severity == "error"
    assert first.evidence["option"] == "--cuda_ext"
    assert "--config-settings=--build-option=--cuda_ext" in first.command
    assert first.command.startswith("pip uninstall -y apex && git clone ")
    assert "apex/blob/6424da3" in first.source
    assert not any(f.kind == "import_failed" for f in d.findings)


def test_a_module_apex_does_not_build_is_only_import_failed(diagnose) -> None:
    kinds = {f.kind for f in diagnose("ModuleNotFoundError: No module named 'flash_attn'")
             .findings}
    assert kinds == {"import_failed"}


def test_torch_not_compiled_with_cuda_on_a_gpu_machine_is_an_error(diagnose) -> None:
    d = diagnose(MOBILEAGENT_60)
    first = d.findings[0]
    assert first.kind == "torch_cpu_only" and first.severity == "error"  # a driver is stated
    assert "Torch not compiled with CUDA enabled" in first.explains


def test_torch_not_compiled_with_cuda_without_a_gpu_is_a_warning_that_asks(diagnose) -> None:
    d = diagnose(DETECTRON2_460)
    f = next(f for f in d.findings if f.kind == "torch_cpu_only")
    assert f.severity == "warning" and "run the code on the CPU" in f.fix
    assert any(n.fact == "gpu" for n in d.needs)


def test_cpu_build_with_cuda_unavailable_gives_the_cuda_build(diagnose) -> None:
    text = ("PyTorch version: 2.5.1+cpu\nCUDA used to build PyTorch: None\n"
            "Is CUDA available: False\nNvidia driver version: 550.54.15\n")
    f = next(f for f in diagnose(text).findings if f.kind == "torch_cpu_only")
    assert f.severity == "error" and f.evidence["torch"] == "2.5.1+cpu"


def test_cpu_build_on_a_machine_without_gpu_is_fine(diagnose) -> None:
    text = "PyTorch version: 2.5.1+cpu\nCUDA used to build PyTorch: None\n"
    assert not any(f.kind == "torch_cpu_only" for f in diagnose(text).findings)


def test_cpu_build_on_macos_says_there_is_no_cuda_build(diagnose) -> None:
    text = ("PyTorch version: 2.5.1\nCUDA used to build PyTorch: None\n"
            "OS: macOS 14.4 (arm64)\n" + "AssertionError: Torch not compiled with CUDA enabled\n")
    f = next(f for f in diagnose(text).findings if f.kind == "torch_cpu_only")
    assert f.severity == "warning" and "macOS" in f.summary and f.command is None
