"""Causes as real reports state them, each on the thread's own text (cited above each test):
DeepSpeed's refusal of a minor pair, a failed build with an nvcc older than torch's CUDA,
nvidia-container-cli's requirement error, titles that cut or reword the mismatch line, NVIDIA's
CUDA image flavors, "nvcc does not exist", a "pytorch==" pin and a written torch.version.cuda; a
semaphore with no room in /dev/shm; a torch module a release removed. Runs on the shipped matrix
(driver figures of curated/cuda.toml, [[removed_api]] of curated/doctor.toml)."""

from __future__ import annotations

import pytest

from envgen.doctor.reports import parse_report


@pytest.fixture
def real(judge_shipped):
    return judge_shipped  # conftest: the shipped matrix


def _judge(run, text: str, frameworks=()):
    return run(text, frameworks)


def _found(diagnosis, kind):
    return [f for f in diagnosis.findings if f.kind == kind]


# https://github.com/Xirider/finetune-gpt2xl/issues/1 (DeepSpeed of early 2021 raised on it)
XIRIDER_1 = ("Exception: Installed CUDA version 11.0 does not match the version torch was "
             "compiled with 11.1 [SOLUTION]\n")


def test_the_pasted_refusal_of_a_minor_pair_is_named_from_its_line(real):
    [found] = _found(_judge(real, XIRIDER_1), "cuda_minor_mismatch")
    assert found.severity == "error" and found.explains.startswith("Exception: Installed CUDA")
    # DeepSpeed's warning that it accepted the pair is no refusal
    accepted = XIRIDER_1.replace(" [SOLUTION]", ", but since the APIs are compatible, accepting "
                                 "this combination")
    assert not _found(_judge(real, accepted), "cuda_minor_mismatch")


# https://github.com/turboderp/exllama/issues/65 (torch from …/whl/nightly/cu118, nvcc 11.5; the
# maintainer's fix: the 11.8 toolkit)
EXLLAMA_65 = """\
Error running. ArgTypes. Ninja: Build stopped: subcommand failed
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.
I installed this pythorch version "pip install --pre torch --index-url https://download.pytorch.org/whl/nightly/cu118"
Cuda compilation tools, release 11.5, V11.5.119
"""


def test_a_failed_build_with_an_older_toolkit_than_torchs_cuda_is_a_warning(real):
    [found] = _found(_judge(real, EXLLAMA_65), "cuda_minor_mismatch")
    assert found.severity == "warning"
    assert "older than the CUDA 11.8 torch was built with" in found.summary
    assert "exllama/issues/65" in found.source
    # a newer toolkit than torch's, or no failed build: nothing
    newer = EXLLAMA_65.replace("release 11.5, V11.5.119", "release 12.4, V12.4.131").replace(
        "cu118", "cu121")
    assert not _found(_judge(real, newer), "cuda_minor_mismatch")
    no_build = "\n".join(EXLLAMA_65.splitlines()[2:]) + "\n"
    assert not _found(_judge(real, no_build), "cuda_minor_mismatch")


# https://github.com/TabbyML/tabby/issues/4309
TABBY_4309 = """\
nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your driver to a newer version, or use an earlier cuda container: unknown
Checking with nvidia-smi: `NVIDIA-SMI 570.169                Driver Version: 570.169        CUDA Version: 12.8`
"""  # noqa: E501 (the report's lines as pasted)


def test_the_container_runtimes_cuda_requirement_is_the_drivers_limit(real):
    [found] = _found(_judge(real, TABBY_4309), "driver_too_old")
    assert found.severity == "error"
    assert found.evidence["image_requires_cuda"] == "12.9"
    # the check compares the driver's own CUDA: CUDA 12.9's GA driver, not the 12.x floor
    assert found.evidence["needs"] == "575.51.03"
    assert "libnvidia-container" in found.source
    assert found.explains.startswith("nvidia-container-cli: requirement error")


# https://github.com/deepspeedai/DeepSpeed-MII/issues/277 (the title; the rest are screenshots)
MII_277 = "Installed CUDA version 11.7 does not match torch version\n"


def test_a_title_that_cuts_deepspeeds_line_gives_nvcc_and_asks_torchs_cuda(real):
    report = parse_report(MII_277)
    assert report.snapshot.nvcc == "11.7" and not report.snapshot.known("torch_cuda")
    assert any(n.fact == "torch_cuda" for n in _judge(real, MII_277).needs)


# https://github.com/mistralai/mistral-inference/issues/54 (the title rewords torch's line)
MISTRAL_54 = ("Unable to build Docker image with cuda:11.8.0-devel-ubuntu20.04 - CUDA version "
              "(11.8) mismatches the version that was used to compile PyTorch (12.1)\n")


def test_a_reworded_mismatch_line_and_a_devel_image_state_the_toolkit(real):
    report = parse_report(MISTRAL_54)
    assert (report.snapshot.nvcc, report.snapshot.torch_cuda) == ("11.8", "12.1")
    assert _found(_judge(real, MISTRAL_54), "cuda_major_mismatch")


# https://github.com/EleutherAI/gpt-neox/issues/1021
NEOX_1021 = ("Bug: nvcc does not exists in runtime version of nvidia base image used in "
             "Dockerfile\n")


def test_a_title_saying_nvcc_is_missing_is_read(real):
    assert parse_report(NEOX_1021).snapshot.errors.get("no_nvcc")


@pytest.mark.parametrize(("tag", "nvcc"), [
    ("FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04", "12.1"),
    ("FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04", None),
    ("FROM nvidia/cuda:11.8.0-base-ubuntu20.04", None),
])
def test_nvidias_cuda_image_flavors(tag, nvcc):
    """NVIDIA's container images page: devel adds the compiler toolchain to runtime."""
    snapshot = parse_report(tag + "\n").snapshot
    assert snapshot.known("nvcc") and snapshot.nvcc == nvcc
    # what the build itself printed outranks the image's tag
    printed = parse_report(tag + "\nCuda compilation tools, release 12.4, V12.4.131\n")
    assert printed.snapshot.nvcc == "12.4.131"


def test_a_runtime_image_with_a_failed_extension_build_is_nvcc_missing(real):
    text = ("FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\n"
            "RuntimeError: Error building extension 'fused_adam'\n"
            "torch 2.1.0+cu121\n")
    assert _found(_judge(real, text), "nvcc_missing")


# https://github.com/locuslab/open-unlearning/issues/50 (flash-attn's setup.py runs nvcc -V)
UNLEARNING_50 = """\
    File "/tmp/pip-install-2pd30da5/flash-attn_be676ed8407c4c34a6df1fdb2fe64203/setup.py", line 89, in get_cuda_bare_metal_version
      raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
"""  # noqa: E501 (the report's lines as pasted)


def test_a_build_that_failed_running_nvcc_asks_for_nvcc(real):
    diagnosis = _judge(real, UNLEARNING_50)
    assert {n.fact for n in diagnosis.needs} >= {"nvcc", "torch_cuda"}


# https://github.com/liucongg/ChatGLM-Finetuning/issues/125 and
# https://github.com/rusty1s/pytorch_scatter/issues/45
def test_a_pytorch_pin_and_a_written_torch_version_cuda_are_torchs():
    assert parse_report("pytorch==1.13.0+cu116\n").snapshot.torch == "1.13.0+cu116"
    text = ("hi, i have a problem: my torch.version.cuda is 9.0.176, but my nvcc --version is "
            "10.0  what can I do to fix the problem? thank you.\n")
    snapshot = parse_report(text).snapshot
    assert (snapshot.torch_cuda, snapshot.nvcc) == ("9.0.176", "10.0")


# https://github.com/NVIDIA/Megatron-LM/issues/878 (a DataLoader in a container: /dev/shm 64M
# at 100%)
MEGATRON_878 = """\
  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 57, in __init__
    sl = self._semlock = _multiprocessing.SemLock(
OSError: [Errno 28] No space left on device
"""


def test_no_space_for_a_semaphore_is_a_full_dev_shm(real):
    [found] = _found(_judge(real, MEGATRON_878), "shm_too_small")
    assert found.severity == "error"
    assert found.explains == "OSError: [Errno 28] No space left on device"
    assert "sem_overview" in found.source
    # the same errno with no SemLock above (a full disk) is not /dev/shm
    assert not _found(_judge(real, "OSError: [Errno 28] No space left on device\n"),
                      "shm_too_small")


# https://github.com/NVIDIA/Megatron-LM/issues/293 (torch 2.0)
MEGATRON_293 = """\
Megtaron code incompatibility with pytorch 2.0
from torch._six import inf
ModuleNotFoundError: No module named 'torch._six'
"""


def test_a_torch_module_a_release_removed_is_named_before_the_failing_import(real):
    diagnosis = _judge(real, MEGATRON_293)
    kinds = [f.kind for f in diagnosis.findings]
    assert kinds[:2] == ["torch_api_removed", "import_failed"]
    found = diagnosis.findings[0]
    assert found.evidence["removed_in"] == "2.0" and "from torch import inf" in found.fix
    assert "pull/94709" in found.source


# https://github.com/facebookresearch/detectron2/issues/3098 (the build ran CUDA 8.0's nvcc;
# "When I used CUDA 10.1, the problem was solved")
DETECTRON2_3098 = """\
    nvcc fatal   : Value 'c++14' is not defined for option 'std'
    [5/6] /usr/local/cuda-8.0-cudnn6/bin/nvcc -DWITH_CUDA […]
"""


def test_the_toolkit_folder_of_the_nvcc_a_build_ran_gives_its_version(real):
    report = parse_report(DETECTRON2_3098)
    assert report.snapshot.nvcc == "8.0"
    assert report.snapshot.errors.get("ext_build")  # an "nvcc fatal :" line: a failed build
    assert any(n.fact == "torch_cuda" for n in _judge(real, DETECTRON2_3098).needs)
    assert not parse_report("/usr/local/cuda/bin/nvcc -c x.cu\n").snapshot.known("nvcc")


def test_the_interpreter_in_a_printed_command_is_quoted(shipped):
    """--python may be a path with a space: every "how to get it" command quotes it."""
    from envgen.doctor.judge import judge

    facts, catalog = shipped
    diagnosis = judge(parse_report(UNLEARNING_50).snapshot, facts, catalog, origin="report",
                      python="/opt/my env/bin/python")
    how = next(n.how for n in diagnosis.needs if n.fact == "torch_cuda")
    assert how.startswith("`'/opt/my env/bin/python' -c ")
