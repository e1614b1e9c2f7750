"""Pasted bug reports → doctor snapshots: real report texts (tests/fixtures/reports/, each
naming its source) and the rules: nothing guessed, the most specific source wins, conflicts
are recorded, unrelated text recognises nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.reports import describe, parse_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reports"


def snapshot_of(name: str) -> dict:
    return parse_report((FIXTURES / name).read_text(encoding="utf-8")).snapshot.to_dict()


def gpus(*names: str) -> list[dict]:
    return [{"name": n, "compute_capability": None} for n in names]


# Every fact each real report states, and nothing else (the whole snapshot is compared).
EXPECTED = {
    "collect_env_colab_46973.txt": {
        "os": "Ubuntu 18.04.5 LTS", "platform": "linux-x86_64", "python": "3.6",
        "torch": "1.7.0+cu101", "torch_cuda": "10.1", "nvcc": "10.1.243",
        "path_nvcc": "10.1.243", "gcc": "7.5.0", "driver": "418.67",
        "gpus": gpus("Tesla T4")},
    "collect_env_colossalai_5594.txt": {
        "os": "Ubuntu 22.04.4 LTS", "platform": "linux-x86_64", "python": "3.10.14",
        "glibc": "2.35", "torch": "2.0.0", "torch_cuda": "11.7", "gcc": "11.4.0"},
    "collect_env_windows_48535.txt": {
        "os": "Microsoft Windows 10 Pro", "platform": "windows", "python": "3.8",
        "torch": "1.7.0", "torch_cuda": "10.2", "nvcc": "10.2.89", "path_nvcc": "10.2.89",
        "driver": "451.67", "gpus": gpus("GeForce 940MX"),
        "packages": {"numpy": "1.18.4", "torch": "1.7.0", "torchaudio": "0.7.0",
                     "torchvision": "0.8.1"}},
    "collect_env_windows_notorch_143795.txt": {
        "os": "Microsoft Windows 11 Enterprise (10.0.22631 64-bit)", "platform": "windows",
        "python": "3.10.15", "packages": {"numpy": "2.1.2", "optree": "0.13.0"}},
    "collect_env_wsl2_9293.txt": {
        "os": "Ubuntu 22.04.2 LTS", "platform": "wsl2", "python": "3.12.3", "glibc": "2.35",
        "torch": "2.4.0+cu121", "torch_cuda": "12.1", "nvcc": "12.4.131",
        "path_nvcc": "12.4.131", "gcc": "11.4.0", "driver": "551.88",
        "gpus": gpus("NVIDIA GeForce RTX 4070 Laptop GPU")},
    "colossalai_check_2992.txt": {
        "torch": "1.13.1", "torch_cuda": "11.7", "nvcc": "9.1",
        "frameworks": {"colossalai": "0.2.5"}, "packages": {"colossalai": "0.2.5"}},
    "colossalai_check_old_1033.txt": {"torch": "1.10.1", "torch_cuda": "11.3", "nvcc": "11.3",
                                     "frameworks": {"colossalai": None}},
    "colossalai_env_1389.txt": {"torch": "1.8.1+cu101", "torch_cuda": "10.1", "nvcc": "10.1.243",
                                "python": "3.8.0"},
    "cuda_mismatch_370.txt": {"nvcc": "12.0", "torch_cuda": "11.8", "python": "3.10"},
    "cuda_mismatch_windows_2902.txt": {
        "nvcc": "12.0", "torch_cuda": "11.7", "python": "3.10.9", "platform": "windows",
        "frameworks": {"deepspeed": "0.8.1"}, "packages": {"deepspeed": "0.8.1"}},
    "ds_report_amd_libaio_6972.txt": {"frameworks": {"deepspeed": None},
                                      "libaio": {"library": None, "headers": True}},
    "ds_report_general_6762.txt": {
        "torch": "2.3.0+cu121", "torch_cuda": "12.1", "nvcc": "12.0", "python": "3.12",
        "frameworks": {"deepspeed": "0.15.5+unknown"},
        "packages": {"deepspeed": "0.15.5+unknown"}},
    "ds_report_libaio_yum_1687.txt": {"libaio": {"library": None, "headers": False},
                                      "frameworks": {"deepspeed": None}},
    "ds_report_old_libaio_1124.txt": {"libaio": {"library": None, "headers": False},
                                      "frameworks": {"deepspeed": None}},
    "gcc_version_3094.txt": {"gcc": "9.4.0"},
    "libaio_header_missing_7.txt": {"libaio": {"library": None, "headers": False}},
    "module_not_found_2973.txt": {
        "python": "3.8",
        "import_errors": {"colossalai._C.cpu_adam": "No module named 'colossalai._C.cpu_adam'"}},
    "ninja_missing_242.txt": {"ninja": None},
    "nvcc_windows_5899.txt": {"nvcc": "12.5.40", "python": "3.12", "torch": "2.2.2+cu121",
                              "torch_cuda": "12.1"},
    "nvidia_smi_old_a10g_122.txt": {"driver": "470.256.02", "gpus": gpus("NVIDIA A10G")},
    "nvidia_smi_t4_889.txt": {"driver": "580.126.09", "gpus": gpus("Tesla T4")},
    "template_pip_list_7026.txt": {
        "os": "Ubuntu 20.04", "python": "3.10.12", "nvcc": "12.3",
        "packages": {"absl-py": "2.0.0", "addict": "2.4.0", "aiohttp": "3.9.1",
                     "aiosignal": "1.3.1", "annotated-types": "0.6.0", "apex": "0.1",
                     "appdirs": "1.4.4"}},
    "template_system_info_3615.txt": {
        "os": "Ubuntu 18.04", "python": "3.9.16", "torch": "1.11.0+cu113", "torch_cuda": "11.3",
        "gcc": "7.5",
        # "I installed the Deepspeed == 0.9.2": an inline pin
        "frameworks": {"deepspeed": "0.9.2"}, "packages": {"deepspeed": "0.9.2"}},
    "undefined_symbol_3410.txt": {
        "python": "3.10", "torch_cuda": "11.7",
        "import_errors": {"fused_adam": "undefined symbol: "
                          "_ZN3c104cuda20CUDACachingAllocator9allocatorE"}},
    "undefined_symbol_quantizer_3846.txt": {
        "python": "3.8", "platform": "linux-x86_64", "torch": "2.0",
        "frameworks": {"deepspeed": "0.9.5"}, "packages": {"deepspeed": "0.9.5"},
        "import_errors": {"deepspeed.ops.quantizer.quantizer_op":
                          "undefined symbol: curandCreateGenerator"}},
    "windows_build_4001.txt": {
        "os": "windows 11", "platform": "windows", "torch": "1.12.0",
        "cuda_home": "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.2",
        "frameworks": {"deepspeed": None}},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_report(name: str) -> None:
    got = {k: v for k, v in snapshot_of(name).items() if k != "errors"}  # test_rules_corpus.py
    assert got == {"schema": 1, **EXPECTED[name]}


def test_every_fixture_is_tested_and_names_its_source() -> None:
    files = sorted(p.name for p in FIXTURES.glob("*.txt"))
    assert files == sorted([*EXPECTED, "conda_list_colossalai_3012.txt", "pip_list_7028.txt"])
    for name in files:
        head = (FIXTURES / name).read_text(encoding="utf-8").splitlines()[:2]
        assert head[0].startswith("# source: https://github.com/"), name
        assert head[1] == "# retrieved: 2026-11-23", name


def test_conda_list_and_pip_list_give_frameworks() -> None:
    conda = snapshot_of("conda_list_colossalai_3012.txt")
    assert conda["frameworks"] == {"colossalai": "0.2.5"}
    assert conda["packages"]["cudatoolkit"] == "10.2.89"
    assert "torch" not in conda and "nvcc" not in conda  # cudatoolkit is not nvcc
    pip = snapshot_of("pip_list_7028.txt")
    assert pip["torch"] == "2.6.0+cu126"
    assert pip["frameworks"] == {"deepspeed": "0.16.4"}
    assert pip["packages"]["nvidia-nccl-cu12"] == "2.21.5"
    assert pip["packages"]["pydantic-core"] == "2.33.0"  # canonical names
    assert set(pip) == {"schema", "torch", "frameworks", "packages"}


def test_nvidia_smi_cuda_version_is_never_a_toolkit() -> None:
    report = parse_report((FIXTURES / "nvidia_smi_t4_889.txt").read_text())
    doc = report.snapshot.to_dict()
    assert "nvcc" not in doc and "torch_cuda" not in doc and "path_nvcc" not in doc
    unused = [e for e in report.explain if not e.kept]
    assert [(e.fact, e.value) for e in unused] == [("driver_max_cuda", "13.0")]


def test_ds_report_link_warning_alone_states_nothing_about_libaio() -> None:
    """deepspeedai/DeepSpeed#6972: libaio-dev installed, yet the warning: not evidence (that
    DeepSpeed is installed is: ds_report printed it)."""
    report = parse_report((FIXTURES / "ds_report_amd_libaio_6972.txt").read_text())
    assert report.snapshot.to_dict() == {"schema": 1, "frameworks": {"deepspeed": None},
                                         "libaio": {"library": None, "headers": True}}
    assert not report.snapshot.known("ops")  # the header is there: `find` printed its path
    assert any(e.fact == "ds_report.async_io" and "-laio" in e.note for e in report.explain)


def test_host_compiler_errors_add_no_gcc_version() -> None:
    # the line states no gcc version, but it is the error itself: kept, and it decides the rule
    text = ("/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU "
            "version! gcc versions later than 11 are not supported! The nvcc flag "
            "'-allow-unsupported-compiler' can be used to override this version check")
    report = parse_report(text)
    assert not report.snapshot.known("gcc")
    assert report.recognised
    assert [(e.fact, e.kept) for e in report.explain] == [("errors.gcc_new", True),
                                                        ("host_compiler_rejected", False)]


def test_empty_and_unrelated_text_recognise_nothing() -> None:
    for text in ("", "\n\n", "Thanks, this fixed it!\nClosing.", "```\n```"):
        report = parse_report(text)
        assert report.snapshot.to_dict() == {"schema": 1}
        assert not report.recognised and report.explain == () and report.formats == ()


MIXED = """\
### Environment

<details>
<summary>collect_env</summary>

```
> Collecting environment information...
> PyTorch version: 2.1.0+cu121
> Is debug build: False
> CUDA used to build PyTorch: 12.1
> OS: Ubuntu 22.04.3 LTS (x86_64)
> GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
> Libc version: glibc-2.35
> Python version: 3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)
> CUDA runtime version: 12.1.105
> GPU models and configuration:
> GPU 0: NVIDIA A100-SXM4-80GB
> GPU 1: NVIDIA A100-SXM4-80GB
> Nvidia driver version: 535.104.05
> Versions of relevant libraries:
> [pip3] numpy==1.26.0
> [conda] pytorch                   2.1.0           py3.10_cuda12.1_cudnn8.9.2_0    pytorch
```
</details>

- DeepSpeed version: 0.12.3
- PyTorch version: 2.0.1
- GPU count and types: 8x A100 80GB

```
torch version .................... 2.1.0+cu121
torch cuda version ............... 12.1
nvcc version ..................... 11.8
deepspeed info ................... 0.12.3, unknown, unknown
```
pip freeze:
```
deepspeed @ file:///home/me/DeepSpeed
megatron-core==0.4.0
-e git+https://github.com/hpcaitech/ColossalAI.git@abc1234#egg=colossalai
torch==2.0.1
```
"""


def test_mixed_sections_and_conflicts() -> None:
    report = parse_report(MIXED)
    doc = report.snapshot.to_dict()
    assert doc["torch"] == "2.1.0+cu121"  # collect_env over the template and pip freeze
    assert doc["torch_cuda"] == "12.1" and doc["python"] == "3.10.12"
    assert doc["nvcc"] == "11.8"  # CUDA_HOME's (ds_report) is the one builds use
    assert doc["path_nvcc"] == "12.1.105"  # collect_env runs the nvcc on PATH
    assert doc["gpus"] == gpus("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")
    assert doc["frameworks"] == {"deepspeed": "0.12.3", "megatron-core": "0.4.0",
                                 "colossalai": None}
    assert doc["packages"]["numpy"] == "1.26.0"
    assert doc["driver"] == "535.104.05" and doc["glibc"] == "2.35"
    conflicts = [e for e in report.explain if "conflict" in e.note]
    assert sorted((e.fact, e.format, e.line) for e in conflicts) == [
        ("gpus", "issue_template", 28), ("nvcc", "collect_env", 15),
        ("packages.torch", "pip_freeze", 41), ("torch", "issue_template", 27),
        ("torch", "pip_freeze", 41)]
    assert [e.value for e in conflicts if e.fact == "gpus"] == [tuple(gpus(*["A100 80GB"] * 8))]
    assert {e.value for e in conflicts if e.fact != "gpus"} == {"2.0.1", "12.1.105"}
    assert set(report.formats) >= {"collect_env", "ds_report", "issue_template", "pip_freeze",
                                   "conda_list"}
    lines = describe(report)
    assert "torch = 2.1.0+cu121   (collect_env, line 8: '> PyTorch version: 2.1.0+cu121')" in lines
    assert any(line.startswith("  not used: torch = 2.0.1") and "conflict" in line
               for line in lines)


def test_more_precise_agreeing_value_is_kept() -> None:
    text = ("nvcc version ..................... 12.1\n"
            "Cuda compilation tools, release 12.1, V12.1.105\n")
    assert parse_report(text).snapshot.nvcc == "12.1.105"


def test_windows_11_collect_env() -> None:
    text = ("Collecting environment information...\nPyTorch version: 2.1.0+cu121\n"
            "Is debug build: False\nCUDA used to build PyTorch: 12.1\n"
            "OS: Microsoft Windows 11 Pro\nLibc version: N/A\n")
    doc = parse_report(text).snapshot.to_dict()
    assert doc == {"schema": 1, "os": "Microsoft Windows 11 Pro", "platform": "windows",
                   "torch": "2.1.0+cu121", "torch_cuda": "12.1"}


def test_cpu_build_when_collect_env_says_none_or_could_not_collect_it() -> None:
    """collect_env prints torch.version.cuda; its None is "None" when every CUDA field is
    missing, else "Could not collect" (replace_nones): a CPU build either way once torch
    imported. Without torch ("PyTorch version: N/A") it states nothing."""
    cpu = parse_report("PyTorch version: 2.1.0+cpu\nIs debug build: False\n"
                       "CUDA used to build PyTorch: None\n").snapshot
    assert cpu.known("torch_cuda") and cpu.torch_cuda is None
    collected = parse_report("PyTorch version: 2.1.0\nIs debug build: False\n"
                             "CUDA used to build PyTorch: Could not collect\n").snapshot
    assert collected.known("torch_cuda") and collected.torch_cuda is None
    unknown = parse_report("PyTorch version: N/A\nIs debug build: N/A\n"
                           "CUDA used to build PyTorch: Could not collect\n").snapshot
    assert not unknown.known("torch_cuda")


def test_conda_cpu_build_and_wrapped_template() -> None:
    text = ("# Name                    Version                   Build  Channel\n"
            "pytorch                   2.1.0               py3.10_cpu_0    pytorch\n"
            "numpy                     1.26.0          py310h5f9d8c6_0\n")
    doc = parse_report(text).snapshot.to_dict()
    assert doc["torch"] == "2.1.0" and doc["torch_cuda"] is None
    assert doc["packages"] == {"torch": "2.1.0", "numpy": "1.26.0"}


def test_template_examples_are_not_facts() -> None:
    text = ("**System info (please complete the following information):**\n"
            " - OS: [e.g. Ubuntu 18.04]\n - GPU count and types [e.g. two machines with x8 "
            "A100s each]\n - Python version\n")
    assert not parse_report(text).recognised


def test_ds_report_without_cuda_home() -> None:
    text = ("nvcc version .....................  [FAIL] cannot find CUDA_HOME via "
            "torch.utils.cpp_extension.CUDA_HOME=None \n")
    doc = parse_report(text).snapshot.to_dict()
    assert doc == {"schema": 1, "cuda_home": None, "nvcc": None,
                   "frameworks": {"deepspeed": None}}


def test_inline_pins_in_prose_but_not_install_commands() -> None:
    """deepspeedai/DeepSpeed#2055: "My environment is `pytorch==1.7.1+cu110` and
    `deepspeed==0.6.5`"."""
    doc = parse_report("My environment is `pytorch==1.7.1+cu110` and `deepspeed==0.6.5`\n"
                       "then I ran `pip install colossalai==0.3.0` which failed\n")
    # the install command states what was asked for (ranked last), not an installed package
    assert doc.snapshot.to_dict() == {
        "schema": 1, "torch": "1.7.1+cu110",
        "frameworks": {"deepspeed": "0.6.5", "colossalai": "0.3.0"},
        "packages": {"torch": "1.7.1+cu110", "deepspeed": "0.6.5"}}
    assert [e.format for e in doc.explain if e.fact == "frameworks.colossalai"] == [
        "install_command"]
