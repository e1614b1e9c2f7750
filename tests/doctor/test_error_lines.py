"""Error lines that decide a finding without a version beside them (envgen/doctor/reports/errors.py
and the ``*_from_error`` rules), each on a real report of the dev corpus (tests/doctor/corpus,
set = "dev"): the finding comes first, says which line it explains, and its fix fits the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report
from envgen.doctor.reports.errors import arch_of, driver_cuda, std_of
from envgen.resolve.checks import cc_of

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "doctor" / "corpus" / "reports"


def _report(name: str) -> str:
    return (CORPUS / name).read_text()


@pytest.mark.parametrize(("name", "supports"), [("ChatGLM3-100.txt", "11.6"),
                                                ("Yuan-2.0-65.txt", "11.0"),
                                                ("nanodet-216.txt", "10.1")])
def test_driver_too_old_line_names_the_cuda_the_driver_supports(diagnose, name, supports):
    # zai-org/ChatGLM3#100, IEIT-Yuan/Yuan-2.0#65 (torch's UserWarning form), RangiLyu/nanodet#216
    d = diagnose(_report(name))
    first = d.findings[0]
    assert first.kind == "driver_too_old" and first.severity == "error"
    assert "found version" in first.explains
    assert first.evidence["driver_supports_cuda"] == supports
    assert f"CUDA ≤ {supports}" in first.fix


def test_driver_number_is_1000_major_plus_10_minor() -> None:
    line = "The NVIDIA driver on your system is too old (found version {})."
    assert driver_cuda(line.format(12080)) == "12.8"
    assert driver_cuda(line.format(10010)) == "10.1"
    assert driver_cuda("no number here") is None


def test_insufficient_driver_runtime_error_names_driver_too_old(diagnose) -> None:
    # open-mmlab/mmskeleton#30: "cuda runtime error (35) : CUDA driver version is insufficient"
    d = diagnose(_report("mmskeleton-30.txt"))
    assert d.findings[0].kind == "driver_too_old"
    assert "insufficient" in d.findings[0].explains


def test_driver_line_with_a_known_torch_cuda_gives_the_floor(diagnose) -> None:
    text = _report("ChatGLM3-100.txt") + "\nPyTorch version: 2.1.0+cu121\n"
    first = diagnose(text).findings[0]
    assert first.kind == "driver_too_old" and first.evidence["needs"]
    assert f"≥ {first.evidence['needs']}" in first.fix


def test_capability_warning_gives_gpu_and_arch_list(diagnose) -> None:
    # andreimargeloiu/WPFS#3: A100 (sm_80) with a torch 1.10.1 built for sm_37 … sm_70
    report = parse_report(_report("WPFS-3.txt"))
    s = report.snapshot
    assert s.torch_arch_list == ("sm_37", "sm_50", "sm_60", "sm_70")
    assert [(g.name, g.compute_capability) for g in s.gpus] == [("NVIDIA A100-SXM4-80GB", "8.0")]
    d = diagnose(_report("WPFS-3.txt"))
    first = d.findings[0]
    assert first.kind == "gpu_arch_unsupported" and first.severity == "error"
    assert "sm_80" in first.summary and "CUDA capability sm_80" in first.explains


def test_capability_warning_beside_collect_env_is_the_first_finding(diagnose) -> None:
    # pytorch/pytorch#57922: the warning, then collect_env (torch 1.8.1+cu102, A100)
    first = diagnose(_report("pytorch-57922.txt")).findings[0]
    assert first.kind == "gpu_arch_unsupported" and "sm_80" in first.summary
    assert first.explains.startswith("A100-SXM4-40GB with CUDA capability sm_80")


def test_invalid_device_function_and_the_repl_torch_version(diagnose) -> None:
    # pytorch/pytorch#1557: torch built on another node; `>>> torch.__version__` then '0.1.12+…'
    report = parse_report(_report("pytorch-1557.txt"))
    assert report.snapshot.torch == "0.1.12+0ba2043"
    d = diagnose(_report("pytorch-1557.txt"))
    first = d.findings[0]
    assert first.kind == "gpu_arch_unsupported" and first.severity == "warning"
    assert "invalid device function" in first.explains and first.command is None
    assert {"gpu", "torch_arch_list"} <= {n.fact for n in d.needs}


def test_nvcc_unsupported_arch_too_new_for_the_toolkit(diagnose) -> None:
    # Ruyi-Zha/naf_cbct#15: RTX 3090 (compute_86) with an older CUDA toolkit
    first = diagnose(_report("naf_cbct-15.txt")).findings[0]
    assert first.kind == "gpu_arch_unsupported" and first.evidence["arch"] == "sm_86"
    assert "older than sm_86 needs" in first.summary and first.evidence["toolkits_targeting"]


def test_nvcc_unsupported_arch_dropped_by_a_newer_toolkit(diagnose, facts) -> None:
    major, minor = min(cc_of(a) for t in facts.toolkits.values() for a in t.archs)
    older = f"compute_{major - 1}{minor}"  # older than any toolkit of the matrix targets
    text = (f"nvcc fatal   : Unsupported gpu architecture '{older}'\n"
            "Cuda compilation tools, release 12.1, V12.1.105\n")
    first = diagnose(text).findings[0]
    assert first.kind == "gpu_arch_unsupported" and "no longer targets" in first.summary
    assert "TORCH_CUDA_ARCH_LIST" in first.fix
    assert arch_of(text) == f"sm_{older[8:]}"


@pytest.mark.parametrize("name", ["AMGX-76.txt", "zed-openpose-6.txt"])
def test_unsupported_gnu_version_names_host_compiler_too_new(diagnose, name) -> None:
    # NVIDIA/AMGX#76, adujardin/zed-openpose#6: "gcc versions later than 6 are not supported!"
    first = diagnose(_report(name)).findings[0]
    assert first.kind == "host_compiler_too_new" and first.evidence["max_gcc"] == 6
    assert "≤ 6" in first.fix
    assert "gcc=6" not in first.fix  # conda-forge has no gcc 6: never offered


def test_too_old_gcc_line_names_host_compiler_too_old(diagnose) -> None:
    # hpcaitech/ColossalAI-Benchmark#9: "We need GCC 5 or later." on an HPC cluster
    first = diagnose(_report("ColossalAI-Benchmark-9.txt")).findings[0]
    assert first.kind == "host_compiler_too_old" and first.evidence["needs"] == 5
    assert '"gcc=7.*"' in first.fix  # conda-forge's oldest major ≥ 5


def test_std_cxx14_compile_line_against_torch_2_1(diagnose) -> None:
    # deepspeedai/DeepSpeed#3968: async_io compiled with -std=c++14 against torch 2.1.0+cu121
    # (the fixture matrix has 2.1.2, whose headers need C++17 as 2.1.0's do in the shipped one)
    text = _report("DeepSpeed-3968.txt").replace("2.1.0", "2.1.2")
    first = diagnose(text).findings[0]
    assert first.kind == "cxx_standard_mismatch" and first.evidence["flag"] == "-std=c++14"
    assert "-std=c++14" in first.explains and first.evidence["needs"] == "c++17"


def test_std_flag_reads_the_gnu_and_old_spellings() -> None:
    assert std_of("g++ -c x.cpp -std=gnu++1y -O2") == 14
    assert std_of("nvcc -c x.cu -std=c++11") == 11
    assert std_of("gcc -c x.c -std=c99") is None


def test_std_flag_against_a_torch_whose_headers_accept_it_is_silent(diagnose) -> None:
    text = _report("DeepSpeed-3968.txt").replace("2.1.0", "1.13.1").replace("cu121", "cu117")
    assert "cxx_standard_mismatch" not in {f.kind for f in diagnose(text).findings}


def test_apex_mismatch_line_sharing_the_nvcc_banner(diagnose) -> None:
    # NVIDIA/apex#317: nvcc 8.0's banner and apex's "compiled with Cuda 9.0.176" on one line
    first = diagnose(_report("apex-317.txt")).findings[0]
    assert first.kind == "cuda_major_mismatch"
    assert first.evidence["nvcc"] == "8.0.61" and first.evidence["torch_cuda"] == "9.0"


def test_apex_mismatch_without_nvcc_asks_for_it(diagnose) -> None:
    # NVIDIA/apex#955: torch 1.5 (CUDA 10.2), the toolkit's version not pasted
    d = diagnose(_report("apex-955.txt"))
    need = next(n for n in d.needs if n.fact == "nvcc")
    assert "10.2" in need.why and "apex" in need.why


def test_cuda_not_available_asks_for_the_build_and_the_driver(diagnose) -> None:
    # BayesWatch/nas-without-training#2: "torch.cuda.is_available() returning False."
    d = diagnose(_report("nas-without-training-2.txt"))
    assert any(n.fact == "torch_cuda" and "not available" in n.why for n in d.needs)
    text = "PyTorch version: 2.1.0+cu121\nIs CUDA available: False\n"
    d = diagnose(text)
    assert any(n.fact == "driver" and "not available" in n.why for n in d.needs)


def test_pip_no_matching_torch_asks_for_python(diagnose) -> None:
    # pytorch/pytorch#67669: torch==1.10.0+cu113 on Python 3.10 (no wheel yet)
    d = diagnose(_report("pytorch-67669.txt"))
    assert any(n.fact == "python" and "no file" in n.why for n in d.needs)


def test_shm_blamed_in_prose_is_a_warning(diagnose) -> None:
    # WenmuZhou/PytorchOCR#137: "shared memory不够（因为docker限制了shm）"
    first = diagnose(_report("PytorchOCR-137.txt")).findings[0]
    assert first.kind == "shm_too_small" and first.severity == "warning"


def test_thc_named_with_torch_1_11_is_a_warning(diagnose) -> None:
    # microsoft/COCO-LM#6: the reporter describes porting THC includes for torch 1.11
    first = diagnose(_report("COCO-LM-6.txt")).findings[0]
    assert first.kind == "torch_api_removed" and first.severity == "warning"
    text = "change the include of THC/THCDeviceUtils.cuh to ATen/cuda/DeviceUtils.cuh\n"
    d = diagnose(text)
    assert not d.findings and any(n.fact == "torch" for n in d.needs)


def test_windows_python_without_a_deepspeed_windows_wheel(facts) -> None:
    # deepspeedai/DeepSpeed#7043: `python --version` → 3.13.2 at a C:\Windows prompt; deepspeed
    # publishes win_amd64 wheels for some Pythons only (the shipped matrix's harvested files)
    from envgen.facts.matrix import Matrix

    shipped = Matrix.locate(ROOT / "matrix").facts
    snapshot = parse_report(_report("DeepSpeed-7043.txt")).snapshot
    assert snapshot.platform == "windows" and snapshot.python == "3.13.2"
    d = judge(snapshot, shipped, load_catalog(ROOT / "matrix"), frameworks=("deepspeed",))
    first = d.findings[0]
    assert first.kind == "python_unsupported"
    assert "no Windows wheel for Python 3.13" in first.summary
    assert first.command.startswith("py -3.") and "deepspeed==" in first.command
    # a Python one of its releases has a Windows wheel for: that release is the fix
    text = _report("DeepSpeed-7043.txt").replace("3.13.2", "3.11.9")
    d = judge(parse_report(text).snapshot, shipped, load_catalog(ROOT / "matrix"),
              frameworks=("deepspeed",))
    fix = next(f for f in d.findings if f.kind == "python_unsupported")
    fitting = [v for v, pythons in fix.evidence["windows_wheels"].items() if "3.11" in pythons]
    newest = max(fitting, key=lambda v: tuple(map(int, v.split("."))))
    assert fix.command.endswith(f"install deepspeed=={newest}")


def test_nvcc_that_fails_on_gcc11_std_function(diagnose) -> None:
    # the error line of pytorch/pytorch#71518 (CUDA 11.6, gcc 11): curated/doctor.toml
    # [[nvcc_bug]] names nvcc 11.5 and 11.6; the reports' fix is gcc 10
    line = ("/usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not "
            "expanded with ‘...’:")
    first = diagnose(line + "\nCuda compilation tools, release 11.6, V11.6.55\n").findings[0]
    assert first.kind == "host_compiler_too_new" and first.severity == "error"
    assert "≤ 10" in first.fix and "pytorch/issues/71518" in first.source
    # an nvcc the sources do not name: still the likely cause, but a warning
    other = diagnose(line + "\nCuda compilation tools, release 12.1, V12.1.105\n").findings[0]
    assert other.kind == "host_compiler_too_new" and other.severity == "warning"


def test_a_suggested_envgen_make_shows_its_evidence_tier() -> None:
    # issue 39: the doctor's `envgen make` line carries the tier of what it would make
    # (andreimargeloiu/WPFS#3 gets `envgen make --gpu-arch sm_80`), in the JSON too
    from envgen.api import DoctorRequest, doctor
    from envgen.facts.matrix import Matrix

    result = doctor(DoctorRequest(report=str(CORPUS / "WPFS-3.txt")),
                    matrix=Matrix.locate(ROOT / "matrix"))
    made = [f for f in result.diagnosis.findings if (f.command or "").startswith("envgen make")]
    assert made and all(f.tier and f.tier["tier"].startswith("T") for f in made)
    assert made[0].to_dict()["tier"]["summary"] == made[0].tier["summary"]


def test_long_pasted_lines_are_read_in_linear_time() -> None:
    # a hang guard, not a speed target: a 200 KB line of compiler words (or of the old
    # capability warning) once took minutes in a backtracking pattern
    import time

    text = "gcc " * 50_000 + "\n" + "Found GPU0 x which is of cuda capability 3.5 " * 4_000
    start = time.monotonic()
    parse_report(text)
    assert time.monotonic() - start < 10
