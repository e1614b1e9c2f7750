"""Colossal-AI / Megatron-Core build facts read from their real release files (vendored)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envgen.harvest.setup_checks import (
    COLOSSALAI_WANT,
    MEGATRON_CORE_WANT,
    Evaluator,
    Unread,
    colossalai_build_facts,
    megatron_core_build_facts,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAI = FIXTURES / "colossalai_build"
MCORE = FIXTURES / "megatron_core_build"
CUDAS = ["11.0", "11.8", "12.1", "12.8", "13.0"]
# every toolkit pair the subprocess test runs: 11.0-11.8, 12.0-12.9 (no 12.7), 13.0-13.2
ALL_CUDAS = (
    [f"11.{m}" for m in range(9)]
    + [f"12.{m}" for m in range(10) if m != 7]
    + [f"13.{m}" for m in range(3)]
)
PRE_AMPERE = ["6.0", "6.1", "6.2", "7.0", "7.5"]


def release_files(root: Path, want) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and want(p.relative_to(root).as_posix())
    }


def cai(version: str) -> dict:
    return colossalai_build_facts(release_files(CAI / version, COLOSSALAI_WANT), CUDAS)


def mcore(version: str) -> dict:
    return megatron_core_build_facts(release_files(MCORE / version, MEGATRON_CORE_WANT), CUDAS)


def ops(facts: dict) -> dict[str, dict]:
    return {op["name"]: op for op in facts["ops"]}


# ------------------------------------------------------------------ Colossal-AI, real files


def test_colossalai_0_2_0_setup_skips_the_build_on_a_major_mismatch() -> None:
    facts = cai("0.2.0")
    assert facts["nvcc_check"] == "major"
    # check_cuda_torch_binary_vs_bare_metal() returns False: setup.py then builds nothing
    assert facts["nvcc_mismatch"] == "skip-build"
    assert facts["skip_cuda_check"] is None
    assert facts["requires_torch"] == ">=1.10"  # setup.py: TORCH_MAJOR < 1 or (== 1 and MINOR < 10)
    assert facts["requires_cuda"] is None
    assert facts["cxx_std"] == [
        {"std": "14", "torch": "", "cuda": "", "where": "op_builder/cpu_adam.py:29"}
    ]
    assert facts["nvcc_std"][0]["std"] == "14"
    # `int(bare_metal_major) == 11` -> 8.0 only for CUDA 11; nothing past Turing otherwise
    assert facts["default_archs"] == {
        "11.0": [*PRE_AMPERE, "8.0"],
        "11.8": [*PRE_AMPERE, "8.0"],
        "12.1": PRE_AMPERE,
        "12.8": PRE_AMPERE,
        "13.0": PRE_AMPERE,
    }
    # check_cuda_availability() returns False without a GPU: nothing is built
    assert sorted(ops(facts)) == [
        "cpu_adam",
        "fused_optim",
        "layernorm",
        "moe",
        "multi_head_attn",
        "scaled_masked_softmax",
        "scaled_upper_triangle_masked_softmax",
    ]
    assert all(op["needs_gpu"] and op["gpu_override"] is None for op in facts["ops"])
    assert ops(facts)["cpu_adam"]["builder"] == "CPUAdamBuilder"
    assert any("torch.cuda.is_available()" in e for e in ops(facts)["moe"]["evidence"])
    assert facts["unread"] == []


def test_colossalai_0_2_8_raises_on_major_mismatch_and_adds_8_6_for_cuda_11_1_plus() -> None:
    facts = cai("0.2.8")
    assert (facts["nvcc_check"], facts["nvcc_mismatch"]) == ("major", "raise")
    assert facts["requires_torch"] == ">=1.10"  # check_pytorch_version(1, 10)
    assert facts["default_archs"]["11.0"] == [*PRE_AMPERE, "8.0"]
    assert facts["default_archs"]["11.8"] == [*PRE_AMPERE, "8.0", "8.6"]
    assert facts["default_archs"]["12.8"] == PRE_AMPERE
    assert not any(op["needs_gpu"] for op in facts["ops"])
    assert facts["unread"] == []


def test_colossalai_0_3_4_cc_flags_query_the_device() -> None:
    facts = cai("0.3.4")
    assert (facts["nvcc_check"], facts["nvcc_mismatch"]) == ("major", "raise")
    assert facts["cxx_std"] == [
        {"std": "17", "torch": "", "cuda": "", "where": "op_builder/cpu_adam.py:26"}
    ]
    assert facts["nvcc_std"][0]["std"] == "17"
    by_name = ops(facts)
    # get_cuda_cc_flag() calls torch.cuda.get_device_capability(): needs a visible GPU
    assert {n for n, op in by_name.items() if op["needs_gpu"]} == {
        "fused_optim",
        "layernorm",
        "moe",
        "multi_head_attn",
        "scaled_upper_triangle_masked_softmax",
    }
    assert not by_name["cpu_adam"]["needs_gpu"]
    assert any("get_cuda_cc_flag()" in e for e in by_name["moe"]["evidence"])


def test_colossalai_0_3_6_extensions_skip_cuda_ops_without_a_gpu() -> None:
    facts = cai("0.3.6")
    assert (facts["nvcc_check"], facts["nvcc_mismatch"]) == ("major", "raise")
    assert facts["requires_torch"] == ">=1.10"
    by_name = ops(facts)
    assert "flash_attention_dao_cuda" not in by_name  # support_aot=False: never built
    assert not by_name["cpu_adam_arm"]["needs_gpu"]  # a _CppExtension
    # is_hardware_available(): torch.cuda.is_available(), no override yet
    assert by_name["cpu_adam_x86"]["needs_gpu"] and by_name["cpu_adam_x86"]["gpu_override"] is None


def test_colossalai_0_5_0_force_cuda_lifts_the_gate_but_not_the_device_query() -> None:
    facts = cai("0.5.0")
    assert (facts["nvcc_check"], facts["nvcc_mismatch"]) == ("major", "raise")
    assert facts["requires_torch"] == ">=1.10"
    assert facts["default_archs"]["11.8"] == [*PRE_AMPERE, "8.0", "8.6"]
    assert facts["default_archs"]["13.0"] == PRE_AMPERE
    by_name = ops(facts)
    assert by_name["cpu_adam_x86"]["gpu_override"] == "FORCE_CUDA"
    assert by_name["scaled_masked_softmax_cuda"]["gpu_override"] == "FORCE_CUDA"
    assert by_name["inference_ops_cuda"]["needs_gpu"]
    assert by_name["inference_ops_cuda"]["gpu_override"] is None
    assert facts["nvcc_std"][0] == {
        "std": "17",
        "torch": "",
        "cuda": "",
        "where": "extensions/pybind/cpu_adam/cpu_adam_x86.py:44",
    }
    assert json.loads(json.dumps(facts)) == facts  # JSON-able


# ------------------------------------------------------------------ the real check, run

RUNNER = textwrap.dedent(
    """
    import ast, contextlib, importlib.util, io, json, sys, types, warnings
    torch = types.ModuleType("torch")
    torch.__version__ = "2.4.0"
    torch.version = types.SimpleNamespace(cuda=None)
    sys.modules["torch"] = torch
    warnings.simplefilter("ignore")
    utils_path, setup_path, root, cudas = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    spec = importlib.util.spec_from_file_location("release_utils", utils_path)
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    check = getattr(utils, "check_system_pytorch_cuda_match", None)
    if check is None:  # 0.2.0-0.2.5: the check is a function inside setup.py
        source = open(setup_path).read()
        func = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
                    and n.name == "check_cuda_torch_binary_vs_bare_metal")
        ns = {"torch": torch, "get_cuda_bare_metal_version": utils.get_cuda_bare_metal_version}
        exec(compile(ast.Module(body=[func], type_ignores=[]), setup_path, "exec"), ns)
        check = ns[func.name]
    out = {}
    for system in cudas:
        for built in cudas:
            torch.version.cuda = built
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    result = check(f"{root}/cuda-{system}")
                out[f"{system}/{built}"] = "false" if result is False else "ok"
            except Exception:
                out[f"{system}/{built}"] = "raise"
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def toolkits(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cuda")
    for cuda in ALL_CUDAS:
        nvcc = root / f"cuda-{cuda}" / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True)
        nvcc.write_text(
            "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
            f"echo 'Cuda compilation tools, release {cuda}, V{cuda}.99'\n"
        )
        nvcc.chmod(0o755)
    return root


@pytest.mark.parametrize("version", ["0.2.0", "0.2.8", "0.3.4", "0.3.6", "0.5.0"])
def test_real_check_matches_extracted_nvcc_check(version: str, toolkits: Path, tmp_path) -> None:
    release = CAI / version
    utils = release / "extensions" / "utils.py"
    if not utils.exists():
        utils = release / "op_builder" / "utils.py"
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    done = subprocess.run(
        [
            sys.executable,
            str(runner),
            str(utils),
            str(release / "setup.py"),
            str(toolkits),
            *ALL_CUDAS,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    observed = json.loads(done.stdout)
    facts = cai(version)
    assert facts["nvcc_check"] == "major"
    failed = "raise" if facts["nvcc_mismatch"] == "raise" else "false"
    for pair, outcome in observed.items():
        system, built = pair.split("/")
        expected = "ok" if system.split(".")[0] == built.split(".")[0] else failed
        assert outcome == expected, (version, pair)
    assert len(observed) == len(ALL_CUDAS) ** 2


# ------------------------------------------------------------------ Megatron-Core, real files


def test_megatron_core_0_4_0_builds_a_non_optional_cpp_helper_without_std() -> None:
    facts = mcore("0.4.0")
    assert facts["nvcc_check"] == "none"
    assert facts["default_archs"] is None
    assert facts["cxx_std"] == [] and facts["nvcc_std"] == []
    assert facts["requires_torch"] is None and facts["requires_cuda"] is None
    (op,) = facts["ops"]
    assert (op["name"], op["builder"], op["optional"]) == (
        "megatron.core.datasets.helpers",
        "Extension",
        False,
    )


@pytest.mark.parametrize(
    ("version", "builder", "where"),
    [
        ("0.10.0", "Extension", "setup.py:114"),
        ("0.13.0", "Extension", "setup.py:17"),
        ("0.19.2", "Pybind11Extension", "setup.py:12"),
    ],
)
def test_megatron_core_optional_cpp17_helper(version: str, builder: str, where: str) -> None:
    facts = mcore(version)
    assert facts["nvcc_check"] == "none"
    assert facts["cxx_std"] == [{"std": "17", "torch": "", "cuda": "", "where": where}]
    (op,) = facts["ops"]
    assert op["name"] == "megatron.core.datasets.helpers_cpp"
    assert op["builder"] == builder and op["optional"] is True and op["needs_gpu"] is False
    assert facts["unread"] == []


def test_megatron_core_wheel_only_release_is_unread() -> None:
    facts = megatron_core_build_facts({}, CUDAS)
    assert facts["nvcc_check"] is None
    assert facts["unread"] == [
        "setup.py: not in the archive (a wheel-only release has no build script)"
    ]


def test_want_predicates() -> None:
    assert COLOSSALAI_WANT("setup.py") and COLOSSALAI_WANT("op_builder/utils.py")
    assert COLOSSALAI_WANT("extensions/pybind/moe/moe_cuda.py")
    assert not COLOSSALAI_WANT("extensions/csrc/kernel/cuda/moe_kernel.cu")
    assert not COLOSSALAI_WANT("colossalai/__init__.py")
    assert MEGATRON_CORE_WANT("setup.py") and MEGATRON_CORE_WANT("pyproject.toml")
    assert not MEGATRON_CORE_WANT("megatron/core/datasets/helpers.cpp")


# ------------------------------------------------------------------ synthetic snippets


def run(source: str, env: dict | None = None) -> Evaluator:
    evaluator = Evaluator(env)
    evaluator.run(ast.parse(textwrap.dedent(source)).body)
    return evaluator


def test_evaluator_arch_list() -> None:
    source = """
        archs = ["7.0"]
        if int(major) >= 11:
            archs.append("8.0")
            if int(minor) > 0:
                archs += ["8.6"]
        else:
            pass
        os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(archs)
    """
    assert run(source, {"major": "11", "minor": "8"}).environ == {
        "TORCH_CUDA_ARCH_LIST": "7.0;8.0;8.6"
    }
    assert run(source, {"major": "10", "minor": "2"}).environ["TORCH_CUDA_ARCH_LIST"] == "7.0"


@pytest.mark.parametrize(
    "source",
    ["x = open('f')", "x = {a: a for a in b}", "import os", "while b: pass", "x = y",
     "for a in b:\n    pass\nelse:\n    pass", "x = sorted(b, key=len, cmp=None)",
     "x = (lambda a=1: a)()", "with b: pass"],
)
def test_evaluator_refuses_what_it_does_not_whitelist(source: str) -> None:
    with pytest.raises(Unread):
        run(source, {"b": [1]})


def test_unread_arch_block_is_reported_not_guessed() -> None:
    utils = textwrap.dedent(
        """
        def set_cuda_arch_list(cuda_dir):
            if os.environ.get("TORCH_CUDA_ARCH_LIST", None) is None:
                bare_metal_major, bare_metal_minor = get_cuda_bare_metal_version(cuda_dir)
                archs = list({a: 1 for a in ["8.0"]})
                os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(archs)

        def check_system_pytorch_cuda_match(cuda_dir):
            bare_metal_major, bare_metal_minor = get_cuda_bare_metal_version(cuda_dir)
            torch_cuda_major, torch_cuda_minor = get_cuda_version_in_pytorch()
            if bare_metal_major != torch_cuda_major:
                raise Exception("major")
            if bare_metal_minor != torch_cuda_minor:
                raise Exception("minor")
        """
    )
    facts = colossalai_build_facts({"setup.py": "", "op_builder/utils.py": utils}, ["12.4"])
    assert facts["default_archs"] is None
    assert any(u.startswith("op_builder/utils.py:5: archs = list({a: 1 for a in")
               for u in facts["unread"])
    assert (facts["nvcc_check"], facts["nvcc_mismatch"]) == ("exact", "raise")


def test_no_check_and_syntax_errors_are_unread() -> None:
    facts = colossalai_build_facts({"setup.py": "def f(:\n"}, ["12.4"])
    assert facts["nvcc_check"] is None
    assert facts["unread"][0].startswith("setup.py: not parseable")
    mc = megatron_core_build_facts(
        {
            "setup.py": "from torch.utils.cpp_extension import CUDAExtension\n"
            "setup(ext_modules=[CUDAExtension('m', sources=['a.cu'])])\n"
        },
        ["12.4"],
    )
    assert mc["nvcc_check"] is None
    assert any("CUDA extension" in u for u in mc["unread"])
