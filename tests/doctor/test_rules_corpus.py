"""The error-line rules (envgen/doctor/rules_system.py) and the ranking (findings.ordered) on
real reports' text: the dev corpus (tests/doctor/corpus, set = "dev") and the report fixtures.
The finding that explains the pasted error line comes first and quotes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.findings import Finding, ordered
from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "doctor" / "corpus" / "reports"
FIXTURES = ROOT / "tests" / "fixtures" / "reports"


def test_glibc_line_names_glibc_too_old_first(diagnose) -> None:
    # pytorch/pytorch#14274: torch 1.0 on CentOS 6.8 (glibc 2.12)
    d = diagnose((CORPUS / "pytorch-14274.txt").read_text())
    first = d.findings[0]
    assert first.kind == "glibc_too_old" and first.severity == "error"
    assert "GLIBC_2.14' not found" in first.explains
    assert first.evidence["needs"] == "2.14"
    assert first.evidence["required_by"].endswith("torch/lib/libshm.so")


def test_glibc_line_with_backquote(diagnose) -> None:
    # pytorch/pytorch#6607: "version `GLIBC_2.17' not found" (CentOS 6.7)
    d = diagnose((CORPUS / "pytorch-6607.txt").read_text())
    assert d.findings[0].kind == "glibc_too_old"
    assert d.findings[0].evidence["needs"] == "2.17"


def test_glibcxx_line_in_conda_names_libstdcxx_too_old(diagnose) -> None:
    # deepspeedai/DeepSpeed#4257: cpu_adam.so JIT-built by gcc 11+, anaconda's libstdc++ loaded
    d = diagnose((CORPUS / "DeepSpeed-4257.txt").read_text())
    first = d.findings[0]
    assert first.kind == "libstdcxx_too_old" and first.severity == "error"
    assert "GLIBCXX_3.4.29' not found" in first.explains
    assert first.evidence["needs"] == "GLIBCXX_3.4.29"
    assert "gcc 11" in first.summary
    assert first.command == "conda install -c conda-forge 'libstdcxx-ng>=11'"


def test_thc_header_missing_names_torch_api_removed(diagnose) -> None:
    # pytorch/pytorch#69746: Megatron-DeepSpeed's fused kernels against a torch without THC
    d = diagnose((CORPUS / "pytorch-69746.txt").read_text())
    first = d.findings[0]
    assert first.kind == "torch_api_removed" and first.severity == "error"
    assert "THC/THCDeviceUtils.cuh" in first.explains
    assert "ATen/cuda/DeviceUtils.cuh" in first.fix


def test_thc_line_is_silent_on_a_torch_that_still_has_thc(diagnose) -> None:
    text = (CORPUS / "pytorch-69746.txt").read_text() + "\nPyTorch version: 1.10.0\n"
    d = diagnose(text)
    assert "torch_api_removed" not in {f.kind for f in d.findings}


@pytest.mark.parametrize("path", [CORPUS / "deepspeed-windows-wheels-2.txt",
                                  FIXTURES / "windows_build_4001.txt"])
def test_aio_lib_link_errors_on_windows_are_info_not_the_failure(diagnose, path) -> None:
    # 6Morpheus6/deepspeed-windows-wheels#2 (maintainer: expected on Windows) and
    # deepspeedai/DeepSpeed#4001 (the Chinese MSVC message)
    d = diagnose(path.read_text())
    op = next(f for f in d.findings if f.kind == "linux_only_op")
    assert op.severity == "info" and "aio.lib" in op.explains
    assert "DS_BUILD_AIO=0" in op.fix
    if path.name.startswith("deepspeed-windows"):
        assert not d.errors and d.findings[0] is op


def test_sigbus_line_names_shm_too_small_as_a_warning(diagnose) -> None:
    # the DataLoader message as torch prints it (matrix/curated/preflight.toml shm-small) and
    # torchrun's exit code of a SIGBUS worker
    for line in ("ERROR: Unexpected bus error encountered in worker. This might be caused by "
                 "insufficient shared memory (shm).",
                 "exitcode  : -7 (pid: 1234)"):
        d = diagnose("PyTorch version: 2.1.0+cu121\n" + line + "\n")
        first = d.findings[0]
        assert first.kind == "shm_too_small" and first.severity == "warning", line
        assert first.explains == line and "--shm-size" in first.fix


@pytest.mark.parametrize("name", ["DeepSpeed-3944.txt", "DeepSpeed-8235.txt"])
def test_cxx17_error_line_names_cxx_standard_mismatch(diagnose, name) -> None:
    # deepspeedai/DeepSpeed#3944: async_io built with -std=c++14 against torch 2.1's ATen.h;
    # deepspeedai/DeepSpeed#8235: an op built with -std=c++17 against headers needing C++20
    d = diagnose((CORPUS / name).read_text())
    first = d.findings[0]
    assert first.kind == "cxx_standard_mismatch" and first.severity == "error"
    assert "#error" in first.explains and first.evidence["needs"].startswith("c++")


def test_a_glibc_line_quoted_in_prose_is_not_the_loader_error(diagnose) -> None:
    # hpcaitech/ColossalAI#2402 (bug elsewhere): a reply quotes "… have `ImportError: …
    # version `GLIBC_2.29' not found`" about other systems
    d = diagnose((CORPUS / "ColossalAI-2402.txt").read_text())
    assert "glibc_too_old" not in {f.kind for f in d.errors}


def _finding(kind: str, severity: str = "error") -> Finding:
    return Finding(kind=kind, severity=severity, summary=kind, evidence={}, fix="",
                   command=None, source="")


def test_ranking_explaining_first_then_runtime_before_build() -> None:
    found = [_finding("cuda_major_mismatch"), _finding("gpu_arch_unsupported"),
             _finding("libstdcxx_too_old", "error"), _finding("ninja_missing", "warning")]
    line = "version `GLIBCXX_3.4.30' not found"
    out = ordered(found, {"glibcxx": line})
    assert [f.kind for f in out] == ["libstdcxx_too_old", "gpu_arch_unsupported",
                                     "cuda_major_mismatch", "ninja_missing"]
    assert out[0].explains == line and all(f.explains is None for f in out[1:])
    # no pasted error: worst first, in the rules' order
    assert [f.kind for f in ordered(found)] == ["cuda_major_mismatch", "gpu_arch_unsupported",
                                                "libstdcxx_too_old", "ninja_missing"]


def test_async_io_wanted_on_windows_is_an_error_and_libaio_is_not_asked(facts) -> None:
    # deepspeedai/DeepSpeed#4001 (collect_env says Windows 11), judged for the async_io op
    snapshot = parse_report((FIXTURES / "windows_build_4001.txt").read_text()).snapshot
    assert snapshot.platform == "windows"
    d = judge(snapshot, facts, load_catalog(ROOT / "matrix"), ops=("async_io",))
    first = d.findings[0]
    assert first.kind == "linux_only_op" and first.severity == "error"
    assert "LNK1181" in first.explains and "WSL2" in first.fix
    assert not any(n.fact == "libaio" for n in d.needs)


def test_windows_report_is_not_asked_for_libaio(diagnose) -> None:
    d = diagnose((FIXTURES / "windows_build_4001.txt").read_text())
    assert not any(n.fact in ("libaio", "glibc") for n in d.needs)
    assert "libaio_missing" not in {f.kind for f in d.findings}


def test_nvcc_not_there_names_nvcc_missing_and_the_path_list(diagnose) -> None:
    # open-mmlab/OpenPCDet#1502: setup.py develop ran ':/usr/local/cuda-11.1/bin/nvcc'
    d = diagnose((CORPUS / "OpenPCDet-1502.txt").read_text())
    first = d.findings[0]
    assert first.kind == "nvcc_missing"
    assert "':/usr/local/cuda-11.1/bin/nvcc' failed" in first.explains
    assert "CUDA_HOME is ':/usr/local/cuda-11.1': a list of paths" in first.fix


def test_nvcc_not_there_with_a_plain_cuda_home(diagnose) -> None:
    # open-mmlab/mmdetection#2113: conda's pytorch 1.1.0 for CUDA 10.0, CUDA_HOME's nvcc absent
    d = diagnose((CORPUS / "mmdetection-2113.txt").read_text())
    first = d.findings[0]
    assert first.kind == "nvcc_missing" and "list of paths" not in first.fix
    assert first.evidence["cuda_home"] == "/usr/local/cuda-9.0"
    assert "torch's CUDA 10.0" in first.summary


@pytest.mark.parametrize("text", [
    # NVIDIA/nccl#290 (a Horovod job in NVIDIA's TF container)
    "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No "
    "space left on device\ngpu2-ru7:2143:2561 [1] NCCL INFO include/shm.h:41 -> 2",
    # pytorch/ci-infra#490 (CI pods before their /dev/shm tmpfs mount)
    "[2026-04-22 21:34:20] mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow:202016:202235"
    " [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 "
    "bytes, error: No space left on device (28)",
])
def test_nccl_without_room_in_dev_shm_is_shm_too_small(diagnose, text) -> None:
    d = diagnose(text)
    first = d.findings[0]
    assert first.kind == "shm_too_small" and first.severity == "error"
    assert "No space left on device" in first.explains
    assert "--shm-size" in first.fix and "NCCL_SHM_DISABLE=1" in first.fix


def test_nccl_segment_error_without_no_space_is_not_shm_too_small(diagnose) -> None:
    # NVIDIA/nccl#1518: the segment fails on 'invalid argument' with /dev/shm not full
    d = diagnose("[1] misc/shmutils.cc:103 NCCL WARN Cuda failure 'invalid argument'\n"
                 "[1] misc/shmutils.cc:114 NCCL WARN Error while creating shared memory segment "
                 "/dev/shm/nccl-NzwJ7O (size 9637888)\ntorch 2.1.0")
    assert "shm_too_small" not in [f.kind for f in d.findings]


def test_pip_requires_python_names_python_unsupported(diagnose) -> None:
    # phoronix-test-suite/test-profiles#336: deepsparse on Debian 13's Python 3.13
    d = diagnose((CORPUS / "test-profiles-336.txt").read_text())
    first = d.findings[0]
    assert first.kind == "python_unsupported" and first.severity == "error"
    assert "Ignored the following versions" in first.explains
    assert first.evidence["requires_python"] == "<3.12,>=3.8"
    assert "3.11" in first.fix


def test_pip_requires_python_admitting_the_stated_python_says_nothing(diagnose) -> None:
    # the Python the text names is admitted by a listed release: not the interpreter pip ran
    d = diagnose("Python 3.9.7\nERROR: Ignored the following versions that require a different "
                 "python version: 1.7.1 Requires-Python >=3.7,<3.10\nERROR: No matching "
                 "distribution found for numba==1.8.0")
    assert "python_unsupported" not in [f.kind for f in d.findings]


def test_a_pasted_error_no_finding_explains_is_not_no_problems(diagnose) -> None:
    # index-tts/index-tts#295: DeepSpeed fell back to its CPU accelerator; nothing else pasted
    d = diagnose("Setting accelerator to CPU. If you have GPU or other accelerator, we were "
                 "unable to detect it.")
    assert not d.findings and [n.fact for n in d.needs] == ["torch_cuda"]
    assert d.verdict().startswith("not explained: the facts given do not say why")
    assert "no problems found" not in d.verdict()


def test_missing_cuda_exception_names_nvcc_missing(diagnose) -> None:
    # deepspeedai/DeepSpeed#7616: pip install deepspeed with --no-build-isolation, no CUDA_HOME
    d = diagnose("deepspeed 0.17.6\n>>> print(torch.__version__)\n2.8.0+cu128\n"
                 "    raise MissingCUDAException(\"CUDA_HOME does not exist, unable to "
                 "compile CUDA op(s)\")\nop_builder.builder.MissingCUDAException: CUDA_HOME does "
                 "not exist, unable to compile CUDA op(s)")
    first = d.findings[0]
    assert first.kind == "nvcc_missing" and "MissingCUDAException" in first.explains
    assert "torch's CUDA 12.8" in first.summary


def test_an_nccl_symbol_torch_misses_names_nccl_mismatch(diagnose) -> None:
    # pytorch/pytorch#119932: torch's own libtorch_cuda.so and another package's NCCL
    d = diagnose("torch 2.2.0+cu121\nImportError: /home/user/.local/lib/python3.10/site-packages/"
                 "torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister")
    first = d.findings[0]
    assert first.kind == "nccl_mismatch" and first.severity == "error"
    assert "ncclCommRegister" in first.explains
    assert "LD_LIBRARY_PATH" in first.fix


APEX_1012 = """\
When running apex command `python setup.py install --cuda_ext --cpp_ext`  I get the following \
error  `error: command '/usr/bin/nvcc' failed with exit status 1`

cudatoolkit: 10.0.130
Pytorch: 1.4.0
Python: 3.6.9
GCC: 7.3.0

$nvcc -V
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2017 NVIDIA Corporation
Built on Fri_Nov__3_21:07:56_CDT_2017
Cuda compilation tools, release 9.1, V9.1.85
"""


def test_a_failed_extension_build_is_judged_as_a_build() -> None:
    # NVIDIA/apex#1012: no framework the matrix knows, but the paste is a CUDA extension build;
    # against the shipped matrix (torch 1.4.0 is one of its reference builds)
    from envgen.facts import load_facts

    matrix = ROOT / "matrix"
    d = judge(parse_report(APEX_1012).snapshot, load_facts(matrix), load_catalog(matrix),
              origin="report")
    first = d.findings[0]
    assert first.kind == "cuda_major_mismatch"
    assert "failed with exit status 1" in first.explains
    assert "nvcc 9.1.85" in first.summary


def test_a_failed_extension_build_without_nvcc_asks_for_it(diagnose) -> None:
    # the same build line with torch's CUDA stated and no nvcc version: asked, not judged
    d = diagnose("torch 2.1.0+cu121\nerror: command '/usr/local/cuda/bin/nvcc' failed with exit "
                 "code 1")
    assert not d.findings and "nvcc" in [n.fact for n in d.needs]
    assert d.verdict().startswith("not explained")


def test_torch_shared_tensor_without_room_is_shm_too_small(diagnose) -> None:
    # NVIDIA/flownet2-pytorch#43: a DataLoader in nvidia-docker; --ipc=host fixed it
    d = diagnose("Error : RuntimeError: unable to write to file </torch_18693_1954506624> at "
                 "/pytorch/torch/lib/TH/THAllocator.c:271")
    first = d.findings[0]
    assert first.kind == "shm_too_small" and first.severity == "error"
    assert "</torch_18693_1954506624>" in first.explains
    assert "--ipc=host" in first.fix


def test_driver_too_old_line_without_found_version_deepblast_151(diagnose) -> None:
    # flatironinstitute/deepblast#151: the title "RuntimeError: The NVIDIA driver on your system
    # is too old" and `pip3 install torch … --extra-index-url …/whl/cu117`
    d = diagnose((CORPUS / "deepblast-151.txt").read_text())
    first = d.findings[0]
    assert first.kind == "driver_too_old"
    assert first.explains == "RuntimeError: The NVIDIA driver on your system is too old"
