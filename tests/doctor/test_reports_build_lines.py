"""More of what people paste (issue 38 part 2): torch's CUDA-mismatch message as pip wraps it,
an nvcc that is not there, nvcc's version in prose, ``pip show``, GPU models named in prose,
a conda list with a ``python`` row, post releases. Each test runs on a real report's text: the
dev set of tests/doctor/corpus/ (named by file) or lines quoted from the thread named."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.reports import parse_report
from envgen.facts import find_matrix_dir, load_facts

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus" / "reports"


@pytest.fixture(scope="module")
def gpus():
    return load_facts(find_matrix_dir(None)).gpus


def facts(text: str, gpus=None) -> dict:
    return parse_report(text, gpus=gpus).snapshot.to_dict()


def corpus(name: str, gpus=None) -> dict:
    return facts((CORPUS / name).read_text(encoding="utf-8"), gpus)


# --- torch's mismatch message, wrapped ------------------------------------------------------

# vllm-project/vllm#1060 (pip's indented output wraps the message after "compile")
VLLM_1060 = """\
          raise RuntimeError(CUDA_MISMATCH_MESSAGE.format(cuda_str_version, torch.version.cuda))
      RuntimeError:
      The detected CUDA version (12.2) mismatches the version that was used to compile
      PyTorch (11.7). Please make sure to use the same CUDA versions.
"""


def test_wrapped_cuda_mismatch_is_one_message() -> None:
    report = parse_report(VLLM_1060)
    doc = report.snapshot.to_dict()
    assert doc["nvcc"] == "12.2" and doc["torch_cuda"] == "11.7"
    assert "cuda_mismatch" in doc["errors"]
    assert "torch" not in doc  # "PyTorch (11.7)" is torch's CUDA, not a torch 11.7


def test_no_torch_release_has_major_ten_or_more() -> None:
    """The second half of the wrapped message alone names no torch."""
    assert "torch" not in facts("      PyTorch (12.1). Please make sure to use the same CUDA "
                                "versions.")


# --- an nvcc that is not there ------------------------------------------------------------

@pytest.mark.parametrize(("text", "home"), [
    # deepspeedai/DeepSpeed#5511 (a CUDA_HOME that a ':' joined to an empty value)
    ("FileNotFoundError: [Errno 2] No such file or directory: ':/usr/local/cuda/bin/nvcc'",
     ":/usr/local/cuda"),
    # deepspeedai/DeepSpeed#4553
    ("FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'",
     "/usr/local/cuda"),
])
def test_missing_nvcc_at_cuda_home(text: str, home: str) -> None:
    doc = facts(text)
    assert doc["nvcc"] is None and doc["cuda_home"] == home
    assert "no_nvcc" in doc["errors"]


def test_setuptools_command_failed_openpcdet_1502() -> None:
    """open-mmlab/OpenPCDet#1502: "error: command ':/usr/local/cuda-11.1/bin/nvcc' failed: No
    such file or directory"."""
    doc = corpus("OpenPCDet-1502.txt")
    assert doc["nvcc"] is None and doc["cuda_home"] == ":/usr/local/cuda-11.1"


def test_quoted_path_in_a_title_mmdetection_2113() -> None:
    """open-mmlab/mmdetection#2113's title "/usr/local/cuda-9.0/bin/nvcc': No such file or
    directory"; its conda list mixes rows with and without a build column, python among them."""
    doc = corpus("mmdetection-2113.txt")
    assert doc["nvcc"] is None and doc["cuda_home"] == "/usr/local/cuda-9.0"
    assert doc["torch"] == "1.1.0" and doc["torch_cuda"] == "10.0" and doc["python"] == "3.5.6"
    assert doc["packages"]["cudatoolkit"] == "10.0.130"


def test_shell_found_no_nvcc() -> None:
    doc = facts("/bin/sh: 1: nvcc: not found")
    assert doc["nvcc"] is None and "no_nvcc" in doc["errors"]


def test_a_long_line_without_the_message_is_read_in_linear_time() -> None:
    doc = facts("torch 2.1.0\n" + "x/bin/nvcc" * 100_000)
    assert "nvcc" not in doc and doc["torch"] == "2.1.0"


# --- versions in prose ----------------------------------------------------------------------

def test_nvcc_version_in_prose() -> None:
    """autonomousvision/transfuser#272: "The NVCC version 11.8 is installed in my host/conda
    environment." """
    assert facts("The NVCC version 11.8 is installed in my host/conda environment.")["nvcc"] \
        == "11.8"


def test_version_is() -> None:
    assert facts("My torch version is 1.10.0 and python is 3.8")["torch"] == "1.10.0"


def test_nccl_version_of_torch_nccl_error_is_recognised_explain_only() -> None:
    """pytorch's NCCL error line ends in the NCCL version the process loaded: recognisable,
    not a snapshot fact (it may not be the one torch pins)."""
    report = parse_report("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                          "ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3")
    assert report.recognised and "nccl" not in report.snapshot.to_dict()
    assert any(e.fact == "nccl" and e.value == "2.10.3" and not e.kept for e in report.explain)


# --- pip show -------------------------------------------------------------------------------

def test_pip_show() -> None:
    """deepspeedai/DeepSpeed#5312: `pip show torch` pasted with its prompt."""
    doc = facts("(qwenpro) ya@C4090-2:~/qwenpro$ pip show torch\nName: torch\nVersion: 2.2.1\n"
                "Summary: Tensors and Dynamic neural networks in Python with strong GPU "
                "acceleration\nLocation: /home/ya/anaconda3/envs/qwenpro/lib/python3.10/"
                "site-packages\n")
    assert doc["torch"] == "2.2.1" and doc["python"] == "3.10"


# --- GPU models in prose --------------------------------------------------------------------

def test_one_gpu_model_in_prose_deepspeed_3968(gpus) -> None:
    """deepspeedai/DeepSpeed#3968: "… and try to use it on H100 GPUs"."""
    doc = corpus("DeepSpeed-3968.txt", gpus)
    assert [g["name"] for g in doc["gpus"]] == ["H100"]


def test_gpu_name_without_a_space_naf_cbct_15(gpus) -> None:
    """"I configured the environment to run on RTX3090 with this …" """
    doc = corpus("naf_cbct-15.txt", gpus)
    assert [g["name"] for g in doc["gpus"]] == ["RTX 3090"]


def test_several_gpu_models_name_no_one_gpu(gpus) -> None:
    report = parse_report("Training works on A100 but fails on V100 with torch 2.1.0", gpus=gpus)
    assert "gpus" not in report.snapshot.to_dict()
    assert {e.value for e in report.explain if e.fact == "gpu_models"} == {"A100", "V100"}


def test_a_short_name_needs_a_gpu_word(gpus) -> None:
    assert "gpus" not in facts("see table T4 in the paper; torch 2.1.0", gpus)
    assert facts("one NVIDIA T4 GPU, torch 2.1.0", gpus)["gpus"][0]["name"] == "T4"


def test_gpus_are_not_read_without_the_catalogue() -> None:
    assert "gpus" not in facts("8x A100, torch 2.1.0")


# --- an undefined symbol without "ImportError:" ------------------------------------------------

def test_bare_undefined_torch_symbol_lmcache_1294() -> None:
    """LMCache/LMCache#1294: "lmcache/c_ops.cpython-312-x86_64-linux-gnu.so: undefined symbol:
    _ZN3c105ErrorC2ENS_14SourceLocationESs" (no ImportError prefix)."""
    doc = corpus("LMCache-1294.txt")
    assert doc["import_errors"] == {  # module_of: a path outside site-packages gives its stem
        "c_ops": "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs"}
    assert "torch_abi" in doc["errors"]


def test_bare_undefined_non_torch_symbol_is_not_read_extension_cpp_6() -> None:
    """pytorch/extension-cpp#6: "…lltm_cpp.cpython-36m-x86_64-linux-gnu.so: undefined symbol:
    THPVariableClass" alone (torch was not imported first): not an import error of its own."""
    assert "import_errors" not in corpus("extension-cpp-6.txt")


# --- pip's Requires-Python list -------------------------------------------------------------

def test_pip_requires_python_list_test_profiles_336() -> None:
    """phoronix-test-suite/test-profiles#336: pip's "Ignored the following versions that require
    a different python version: 1.1.0 Requires-Python >=3.6, <3.11; …" and "No matching
    distribution found for deepsparse==1.7.0"."""
    doc = corpus("test-profiles-336.txt")
    assert doc["requires_python"]["deepsparse 1.9.0"] == "<3.12,>=3.8"
    assert doc["requires_python"]["deepsparse 1.1.0"] == ">=3.6, <3.11"
    assert doc["python"] == "3.13" and "python_requires" in doc["errors"]


def test_pip_requires_python_without_the_package_line() -> None:
    """vllm-project/vllm#6497 as quoted: the package is named only on a later "(from outlines)"
    line of pip's, which says "satisfies the requirement numba"."""
    doc = facts("ERROR: Ignored the following versions that require a different python version: "
                "1.6.2 Requires-Python >=3.7,<3.10; 1.7.1 Requires-Python >=3.7,<3.10\n"
                "ERROR: Could not find a version that satisfies the requirement numba (from "
                "outlines) (from versions: none)")
    assert doc["requires_python"] == {"numba 1.6.2": ">=3.7,<3.10", "numba 1.7.1": ">=3.7,<3.10"}


# --- Chinese -------------------------------------------------------------------------------

def test_chinese_my_version_is_detzero_19() -> None:
    """PJLab-ADG/DetZero#19: "好像是pytorch版本太高了，我的版本是2.0.1" (pytorch's version seems too
    high, mine is 2.0.1)."""
    assert corpus("DetZero-19.txt")["torch"] == "2.0.1"


def test_chinese_version_of_each_package() -> None:
    doc = facts("torch版本为1.13.1，python版本3.8")
    assert doc["torch"] == "1.13.1" and doc["python"] == "3.8"


def test_chinese_version_with_another_package_on_the_line_is_not_torch() -> None:
    assert "torch" not in facts("pytorch装好了，cuda版本是11.8")


# --- macOS ---------------------------------------------------------------------------------

def test_apple_silicon_deepspeed_mii_441() -> None:
    """deepspeedai/DeepSpeed-MII#441: "On M3 Pro Macbook having issues with installation" and
    a /Users/… path."""
    doc = corpus("DeepSpeed-MII-441.txt")
    assert doc["platform"] == "macos-arm64" and doc["os"] == "macOS"


def test_macos_home_folder_without_the_chip() -> None:
    doc = facts('  File "/Users/someone/work/train.py", line 3, in <module>\ntorch 2.1.0')
    assert doc["os"] == "macOS" and "platform" not in doc


# --- `accelerate env` / `transformers-cli env` -----------------------------------------------

ACCELERATE_1048 = """\
- `Accelerate` version: 0.16.0
- Platform: Linux-5.4.15-1.el7.elrepo.x86_64-x86_64-with-glibc2.27
- Python version: 3.9.16
- Numpy version: 1.23.5
- PyTorch version (GPU?): 1.12.1+cu116 (True)
"""


def test_accelerate_env_huggingface_accelerate_1048() -> None:
    """huggingface/accelerate#1048: `accelerate env`: Python's platform string (the machine and
    its glibc), torch with its local label and torch.cuda.is_available() in parentheses."""
    doc = facts(ACCELERATE_1048)
    assert doc["platform"] == "linux-x86_64" and doc["glibc"] == "2.27"
    assert doc["torch"] == "1.12.1+cu116" and doc["torch_cuda"] == "11.6"
    assert doc["python"] == "3.9.16" and "errors" not in doc


def test_env_with_gpu_false_is_cuda_unavailable() -> None:
    doc = facts(ACCELERATE_1048.replace("1.12.1+cu116 (True)", "2.0.1+cpu (False)"))
    assert doc["torch_cuda"] is None and "cuda_unavailable" in doc["errors"]


def test_deepspeed_cpu_accelerator_warning_is_cuda_unavailable() -> None:
    """index-tts/index-tts#295: DeepSpeed's "Setting accelerator to CPU. If you have GPU or
    other accelerator, we were unable to detect it." (accelerator/real_accelerator.py from
    0.14.1: torch.cuda.is_available() was False)."""
    doc = facts("如果控制台输出前几行出现Setting accelerator to CPU. If you have GPU or other "
                "accelerator, we were unable to detect it.")
    assert "cuda_unavailable" in doc["errors"]


def test_deepspeed_accepting_a_minor_mismatch_is_no_error_line() -> None:
    """azshue/AutoPoison#6: DeepSpeed's "Installed CUDA version 11.3 does not match the version
    torch was compiled with 11.8 but since the APIs are compatible, accepting this combination"
    (a warning it went past, op_builder/builder.py): the versions, and no error to explain."""
    doc = facts("Installed CUDA version 11.3 does not match the version torch was compiled with "
                "11.8 but since the APIs are compatible, accepting this combination\nUsing "
                "/home/wangyidan/.cache/torch_extensions/py39_cu118/ as PyTorch extensions "
                "root...")
    assert doc["nvcc"] == "11.3" and doc["torch_cuda"] == "11.8"
    assert "errors" not in doc


# --- CPU-only builds as conda and pip name them ----------------------------------------------

def test_conda_install_plan_pytorch_30664() -> None:
    """pytorch/pytorch#30664: conda's plan installed conda-forge's CPU build although
    cudatoolkit=10.1 was asked for ("pytorch conda-forge/linux-64::pytorch-1.10.0-cpu_…")."""
    doc = facts("  python             conda-forge/linux-64::python-3.7.12-hb7a2778_100_cpython\n"
                "  python_abi         conda-forge/linux-64::python_abi-3.7-2_cp37m\n"
                "  pytorch            conda-forge/linux-64::pytorch-1.10.0-cpu_py37hf3cc979_0\n"
                "  pytorch-cpu        conda-forge/linux-64::pytorch-cpu-1.10.0-cpu_py37h718b53a_0"
                "\n")
    assert doc["torch"] == "1.10.0" and doc["torch_cuda"] is None and doc["python"] == "3.7.12"


def test_conda_list_features_column_pytorch_32369() -> None:
    """pytorch/pytorch#32369: "pytorch 1.4.0 py3.7_cpu_0 [cpuonly] pytorch" (conda list's
    features column)."""
    doc = facts("# Name                    Version                   Build  Channel\n"
                "pytorch                   1.4.0               py3.7_cpu_0  [cpuonly]  pytorch\n")
    assert doc["torch"] == "1.4.0" and doc["torch_cuda"] is None


@pytest.mark.parametrize("command", [
    # the "CPU Only" commands of v1.12.1 (conda) and v2.1.0 (pip) on PyTorch's previous-versions
    # page (pytorch.github.io _get_started/previous-versions.md)
    "conda install pytorch==1.12.1 torchvision==0.13.1 torchaudio==0.12.1 cpuonly -c pytorch",
    "pip install torch==2.1.0 torchvision==0.16.0 torchaudio==2.1.0 --index-url "
    "https://download.pytorch.org/whl/cpu",
])
def test_cpu_only_install_commands(command: str) -> None:
    assert facts(command)["torch_cuda"] is None


@pytest.mark.parametrize(("text", "glibc"), [
    ("my glibc version is 2.17", "2.17"),
    ("CentOS 7, glibc 2.17, torch 2.7.0", "2.17"),
    ("torch 2.7 requires glibc 2.28", None),
    ("needs at least glibc 2.28", None),
])
def test_glibc_in_prose_is_the_machines_not_a_requirement(text: str, glibc) -> None:
    assert facts(text).get("glibc") == glibc
