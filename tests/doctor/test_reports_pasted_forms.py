"""Forms real reports paste that the doctor had misread, each on the report's own text (the
thread cited above each test): a sentence's full stop after a version, a line wrapped in
backticks, a venv's lib64 path, a conda environment file, collect_env's "Could not collect" for
torch's CUDA, a bare torch version judged as PyPI's harvested build, and the CPU build that conda
installs although CUDA was asked for. Runs on the shipped matrix where a rule needs its builds."""

from __future__ import annotations

import pytest

from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report


@pytest.fixture
def real(judge_shipped):
    return judge_shipped  # conftest: the shipped matrix


def _judge(run, text: str, frameworks=()):
    return run(text, frameworks)


def _kinds(diagnosis, severity=None):
    return {f.kind for f in diagnosis.findings if severity is None or f.severity == severity}


# https://github.com/deepspeedai/DeepSpeed/issues/4614
DS_4614 = ("here is the whole error message. I'm trying to install to work with "
           "text-generation webui, nvcc 11.5.119, pytorch 2.1.0+cu121.\n")


def test_a_sentence_full_stop_is_not_part_of_the_version(real):
    report = parse_report(DS_4614)
    assert report.snapshot.torch == "2.1.0+cu121"
    diagnosis = _judge(real, DS_4614, frameworks=["deepspeed"])
    assert "cuda_major_mismatch" in _kinds(diagnosis, "error")


# https://github.com/deepspeedai/DeepSpeed/issues/5312 (pip show, then nvcc -V)
DS_5312 = """\
Name: torch
Version: 2.2.1
Summary: Tensors and Dynamic neural networks in Python with strong GPU acceleration
Requires: filelock, fsspec, jinja2, networkx, nvidia-cublas-cu12, nvidia-cuda-runtime-cu12
Cuda compilation tools, release 11.8, V11.8.89
"""


def test_a_bare_harvested_torch_is_judged_as_pypis_build_and_says_so(real):
    """A warning, not an error: the CUDA it rests on was assumed (the evidence names it)."""
    diagnosis = _judge(real, DS_5312, frameworks=["deepspeed"])
    [found] = [f for f in diagnosis.findings if f.kind == "cuda_major_mismatch"]
    assert found.severity == "warning"
    assert found.evidence["assumed"] == "PyPI's default build of torch 2.2.1 (CUDA 12.1)"
    need = next(n for n in diagnosis.needs if n.fact == "torch_cuda")
    assert "judged as PyPI's default build of 2.2.1 (CUDA 12.1)" in need.why


def test_a_local_label_or_conda_torch_is_never_assumed(real):
    assert "cuda_major_mismatch" not in _kinds(_judge(real, DS_5312.replace(
        "Version: 2.2.1", "Version: 2.2.1+cu118"), frameworks=["deepspeed"]))
    conda = "pytorch                   2.2.1           py3.10_cuda11.8_cudnn8.7.0_0    pytorch\n"
    diagnosis = _judge(real, conda + "Cuda compilation tools, release 11.8, V11.8.89\n",
                       frameworks=["deepspeed"])
    assert "cuda_major_mismatch" not in _kinds(diagnosis)


# https://github.com/QwenLM/Qwen3/issues/321 (quoted and wrapped in backticks)
QWEN_321 = ("> `\n"
            "> ERROR: vllm 0.3.1 has requirement pydantic>=2.0, but you'll have pydantic 1.9.0 "
            "which is incompatible.`\n"
            "\n"
            ">`\n"
            "> ERROR: gradio 4.21.0 has requirement pydantic>=2.0, but you'll have pydantic 1.9.0 "
            "which is incompatible.  `\n")


def test_a_line_wrapped_in_backticks_is_read(real):
    report = parse_report(QWEN_321)
    assert [c.package for c in report.snapshot.conflicts] == ["vllm", "gradio"]
    assert "dependency_conflict" in _kinds(_judge(real, QWEN_321))


# https://github.com/instructlab/training/issues/47
INSTRUCTLAB_47 = ("`ImportError: cannot import name 'BUFSIZE' from 'numpy' (/home/jkunstle/"
                  "training/venv/lib64/python3.11/site-packages/numpy/__init__.py)`\n")


def test_a_venvs_lib64_path_gives_python_and_a_moved_name_a_warning(real):
    report = parse_report(INSTRUCTLAB_47)
    assert report.snapshot.python == "3.11"
    diagnosis = _judge(real, INSTRUCTLAB_47)
    finding = diagnosis.findings[0]
    assert (finding.kind, finding.severity) == ("dependency_conflict", "warning")
    assert finding.explains and "BUFSIZE" in finding.explains
    assert "numpy" in finding.summary
    assert any(n.fact == "pip" and "pip show numpy" in n.how for n in diagnosis.needs)


# https://github.com/meta-pytorch/torchtune/issues/846 (no path: torch's own module)
TORCHTUNE_846 = ("ImportError: cannot import name 'return_and_correct_aliasing' from "
                 "'torch.utils._python_dispatch'\n")


def test_a_name_torch_lacks_is_the_framework_written_for_another_torch(real):
    diagnosis = _judge(real, TORCHTUNE_846)
    assert _kinds(diagnosis) >= {"torch_unsupported_by_framework"}
    assert any(n.fact == "torch" for n in diagnosis.needs)


@pytest.mark.parametrize("line", [
    # the user's own module: says nothing of package versions
    "ImportError: cannot import name 'helper' from 'utils' (/home/me/project/utils.py)",
    # CPython's circular-import form: a bug in the code
    "ImportError: cannot import name 'X' from partially initialized module 'numpy' (most likely "
    "due to a circular import) (/usr/lib/python3/dist-packages/numpy/__init__.py)",
])
def test_an_import_name_of_the_users_own_code_is_not_a_version_problem(real, line):
    assert "dependency_conflict" not in _kinds(_judge(real, line + "\n"))


# https://github.com/pytorch/pytorch/issues/106565 (collect_env of a conda env with cpuonly)
PYTORCH_106565 = """\
Collecting environment information...
PyTorch version: 1.8.1
Is debug build: False
CUDA used to build PyTorch: Could not collect
ROCM used to build PyTorch: N/A

OS: Ubuntu 18.04.6 LTS (x86_64)
Is CUDA available: False
CUDA runtime version: 11.4.152
GPU models and configuration:
GPU 0: NVIDIA GeForce RTX 3090
GPU 1: NVIDIA GeForce RTX 3090

Nvidia driver version: 470.182.03
"""


def test_collect_envs_could_not_collect_below_a_torch_version_is_a_cpu_build(real):
    report = parse_report(PYTORCH_106565)
    assert report.snapshot.torch_cuda is None
    diagnosis = _judge(real, PYTORCH_106565)
    assert "torch_cpu_only" in _kinds(diagnosis, "error")
    # no CUDA build was assumed: no finding about its archs or its CUDA
    assert not _kinds(diagnosis) & {"gpu_arch_unsupported", "cuda_major_mismatch"}


def test_could_not_collect_states_nothing_without_torch_or_on_a_rocm_build():
    no_torch = PYTORCH_106565.replace("PyTorch version: 1.8.1", "PyTorch version: N/A")
    assert parse_report(no_torch).snapshot.known("torch_cuda") is False
    rocm = PYTORCH_106565.replace("ROCM used to build PyTorch: N/A",
                                  "ROCM used to build PyTorch: 5.4.22803-474e8620")
    assert parse_report(rocm).snapshot.known("torch_cuda") is False


# https://github.com/pytorch/pytorch/issues/67108 (conda's install plan on Windows)
PYTORCH_67108 = """\
conda install unexpected cpu version on Windows
1. Run `conda install pytorch torchvision torchaudio cudatoolkit=11.3 -c pytorch` on Windows
The following NEW packages will be INSTALLED:
  pytorch            pytorch/win-64::pytorch-1.10.0-py3.8_cpu_0
"""


def test_a_cpu_build_installed_where_cuda_was_asked_for_is_named(real):
    report = parse_report(PYTORCH_67108)
    assert report.snapshot.requested_torch_cuda == "11.3"
    assert report.snapshot.torch_cuda is None
    finding = next(f for f in _judge(real, PYTORCH_67108).findings
                   if f.kind == "torch_cpu_only")
    assert "asked for CUDA 11.3" in finding.summary
    assert finding.evidence["requested_torch_cuda"] == "11.3"


# https://github.com/meta-pytorch/data/issues/315 (an environment.yml, then conda list)
DATA_315 = """\
Missing cuda builds on conda channel
```
name: torchdata
channels:
  - pytorch
dependencies:
  - python=3.8
  - pytorch
  - cudatoolkit=11.3
  - torchdata
```
```
❯ conda list | grep pytorch
cpuonly                   2.0                           0    pytorch
pytorch                   1.11.0              py3.8_cpu_0    pytorch
pytorch-mutex             1.0                         cpu    pytorch
torchvision               0.12.0                 py38_cpu    pytorch
```
"""


def test_a_conda_environment_files_cuda_dependency_is_what_was_asked(real):
    report = parse_report(DATA_315)
    assert report.snapshot.requested_torch_cuda == "11.3"
    assert "torch_cpu_only" in _kinds(_judge(real, DATA_315))
    # a bullet list that is no environment file asks for nothing
    loose = "- cudatoolkit=11.3\n- torch 1.11.0\n"
    assert parse_report(loose).snapshot.known("requested_torch_cuda") is False


def test_an_install_command_asking_for_cuda_with_a_cuda_build_is_no_finding(real):
    text = ("conda install pytorch cudatoolkit=11.3 -c pytorch\n"
            "pytorch                   1.11.0          py3.8_cuda11.3_cudnn8.2.0_0    pytorch\n")
    assert "torch_cpu_only" not in _kinds(_judge(real, text))


# https://github.com/pytorch/pytorch/issues/28195 (a REPL session of torch 1.0)
PYTORCH_28195 = """\
>>> print(torch.__version__)
1.0.0.dev20190102
>>> print(torch.version.cuda)
9.0.176
"""


def test_an_old_torchs_three_part_cuda_after_its_command_is_read():
    report = parse_report(PYTORCH_28195)
    assert report.snapshot.torch_cuda == "9.0.176"
    assert report.snapshot.torch == "1.0.0.dev20190102"
    # alone, a three-part version says no program: not torch's CUDA
    assert not parse_report("9.0.176\n").snapshot.known("torch_cuda")


@pytest.mark.parametrize(("text", "count"), [
    ("My GPU is 8x H100\n", 8),                           # pytorch/torchtitan#853
    ("Running TGI on a 4 x A100 GPU server\n", 4),        # text-generation-inference#1655
    ("I have 4 A100 GPU\n", 4),                           # hiyouga/EasyR1#228
    ("training on an A100 with CUDA 12 A100\n", 1),       # a version is no count
    ("CUDA 12.1 A100\n", 1),
])
def test_a_gpu_count_in_prose_is_kept(shipped, text, count):
    facts, _ = shipped
    gpus = parse_report(text, gpus=facts.gpus).snapshot.gpus
    assert len(gpus) == count and {g.name for g in gpus} == {"A100" if "A100" in text
                                                            else "H100"}


# https://github.com/pytorch/pytorch/issues/32369 (two environments: a working env1's
# collect_env, and the failing env2's conda row quoted in prose)
PYTORCH_32369 = """\
But in the non-working environment (env1):
pytorch                   1.4.0               py3.7_cpu_0  [cpuonly]  pytorch
. cuda.is_available()==False

# collect_env on Conda env1
Collecting environment information...
PyTorch version: 1.3.1
Is debug build: No
CUDA used to build PyTorch: 10.0.130
"""


def test_two_values_of_a_deciding_fact_are_said_and_asked_for(shipped):
    report = parse_report(PYTORCH_32369)
    assert set(report.disputed) == {"torch", "torch_cuda"}
    assert report.disputed["torch_cuda"][0] == "10.0.130 (collect_env, line 9)"
    facts, catalog = shipped
    diagnosis = judge(report.snapshot, facts, catalog, origin="report",
                      disputed=report.disputed)
    notes = [c.note for c in diagnosis.coverage if c.fact == "torch_cuda"]
    assert notes and "none (conda_list, line 2)" in notes[0] and "judged with the first" in notes[0]
    need = next(n for n in diagnosis.needs if n.fact == "torch_cuda")
    assert "in the failing environment" in need.how


def test_prose_or_an_install_command_beside_a_list_is_no_dispute():
    text = ("I installed torch 2.0.1 yesterday\npip install torch==2.0.1\n"
            "Collecting environment information...\nPyTorch version: 2.1.0\n"
            "Is debug build: False\n")
    assert parse_report(text).disputed == {}


# https://github.com/hpcaitech/ColossalAI/issues/2802
COLOSSALAI_2802 = "CUDA 12.0/PyTorch 2.0.0/Pytorch-cuda 11.8/python 3.8.16/colossalai 0.2.5\n"


def test_versions_joined_by_slashes_and_condas_pytorch_cuda_are_read(real):
    snapshot = parse_report(COLOSSALAI_2802).snapshot
    assert (snapshot.torch, snapshot.torch_cuda, snapshot.frameworks) == (
        "2.0.0", "11.8", {"colossalai": "0.2.5"})
    assert "torch_unsupported_by_framework" in _kinds(_judge(real, COLOSSALAI_2802))
    # a path's "/torch/" or "/python3.8/" is still no version
    path = '  File "/usr/lib/python3.8/site-packages/torch/nn/modules/module.py", line 1\n'
    assert not parse_report(path).snapshot.known("torch")


def test_path_nvcc_beside_cuda_homes_is_no_dispute():
    """ds_report's nvcc is CUDA_HOME's, collect_env's the one on PATH: two toolkits."""
    text = ("nvcc version ..................... 11.8\n"
            "torch cuda version ............... 12.1\n"
            "Collecting environment information...\nPyTorch version: 2.1.0+cu121\n"
            "Is debug build: False\nCUDA runtime version: 12.1.105\n")
    assert "nvcc" not in parse_report(text).disputed
