"""The rules read from each release's own files and the curated rules beside them: framework
file tags, the release's nvcc check with a fixed system nvcc, the C++ standard of torch's
headers, host gcc floor and ceiling, GPU name / arch vs nvcc, torch build and ops, the driver
floors, combined-condition breakages and releases not known to be fixed. Fixture data only."""

from __future__ import annotations

import dataclasses

import pytest

from envgen.errors import InfeasibleError, UsageError
from envgen.facts.release_model import (
    BuildFacts,
    OpFacts,
    ReleaseFiles,
    StdRule,
    ToolkitRelease,
    TorchHeaders,
    WheelFile,
)
from envgen.resolve import Request, resolve, torch_verdicts
from envgen.resolve.request import validate


def top(facts, **kw):
    return resolve(Request(**kw), facts, limit=1)[0]


def removed(facts, **kw) -> dict[str, str]:
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(**kw), facts)
    return {r.constraint: r.example for r in exc.value.explanation.removed}


def with_release(facts, framework: str, version: str, **changes):
    releases = tuple(dataclasses.replace(r, **changes)
                     if (r.framework, r.version) == (framework, version) else r
                     for r in facts.frameworks)
    return dataclasses.replace(facts, frameworks=releases)


def with_builds(facts, version: str, **changes):
    builds = tuple(dataclasses.replace(b, **changes) if b.version == version else b
                   for b in facts.torch_builds)
    return dataclasses.replace(facts, torch_builds=builds)


def ds_build(**kw) -> BuildFacts:
    base = dict(read=True, origin="sdist", nvcc_check="allow-list",
                mismatch_ok={"12": ("12.0", "12.1")}, skip_cuda_check="DS_SKIP_CUDA_CHECK",
                cxx_std=(StdRule(std="17", where="op_builder/builder.py:660"),),
                nvcc_std=(StdRule(std="17", where="op_builder/builder.py:678"),))
    return BuildFacts(**{**base, **kw})


# ------------------------------------------------------------------ files of the release

def wheel(py: str) -> WheelFile:
    tag = "cp" + py.replace(".", "")
    return WheelFile(filename=f"megatron_core-0.12.0-{tag}-{tag}-manylinux_2_17_x86_64.whl",
                     python=(py,), abi=tag, platform="linux-x86_64", glibc="2.17")


def test_release_without_a_fitting_file_is_not_offered(facts):
    files = ReleaseFiles(sdist=False, wheels=(wheel("3.10"), wheel("3.11")))
    f = with_release(facts, "megatron-core", "0.12.0", files=files)
    why = removed(f, framework="megatron-core", python="3.12")
    assert "publishes no file for Python 3.12 on linux-x86_64" in why["framework-files"]
    assert "wheels for 3.10, 3.11" in why["framework-files"]
    assert top(f, framework="megatron-core").python == "3.11"


def test_release_with_an_sdist_builds_from_it_and_says_so(facts):
    files = ReleaseFiles(sdist=True, wheels=(wheel("3.10"), wheel("3.11")))
    f = with_release(facts, "megatron-core", "0.12.0", files=files)
    c = top(f, framework="megatron-core", python="3.12")
    assert any("no wheel for Python 3.12: it builds from its sdist" in n for n in c.notes)


def test_wheel_glibc_newer_than_the_os(facts):
    w = dataclasses.replace(wheel("3.11"), glibc="2.39")
    f = with_release(facts, "megatron-core", "0.12.0",
                     files=ReleaseFiles(sdist=False, wheels=(w,)))
    why = removed(f, framework="megatron-core", python="3.11", os="ubuntu-22.04")
    assert "needs ≥ 2.39" in why["glibc"]


# ------------------------------------------------------------------ nvcc: a fixed system toolkit

def test_system_nvcc_takes_only_torch_cudas_the_allow_list_accepts(facts):
    f = with_release(facts, "deepspeed", "0.16.4", build=ds_build())
    req = validate(Request(framework="deepspeed", framework_version="0.16.4", nvcc="12.1"), f)
    verdicts = {(v["torch"], v["cuda"]): v for v in torch_verdicts(req, f)}
    assert verdicts[("2.1.2", "12.1")]["accepted"]
    out = verdicts[("2.5.1", "12.4")]
    assert not out["accepted"] and out["excluded_by"][0]["constraint"] == "nvcc"
    reason = out["excluded_by"][0]["reason"]
    assert "cuda_minor_mismatch_ok[12] lists 12.0, 12.1" in reason
    assert "DS_SKIP_CUDA_CHECK=1 turns the refusal into a warning" in reason
    c = top(f, framework="deepspeed", framework_version="0.16.4", nvcc="12.1")
    assert (c.cuda, c.nvcc, c.nvcc_from) == ("12.1", "12.1", "system")


def test_system_nvcc_minor_mismatch_accepted_when_both_listed(facts):
    f = with_release(facts, "deepspeed", "0.16.4",
                     build=ds_build(mismatch_ok={"12": ("12.1", "12.4", "12.6")}))
    c = top(f, framework="deepspeed", framework_version="0.16.4", nvcc="12.6", torch="2.5")
    assert (c.cuda, c.nvcc) == ("12.4", "12.6")
    assert any("both are in its cuda_minor_mismatch_ok[12]" in n for n in c.notes)


def test_unread_build_accepts_only_an_equal_nvcc(facts):
    f = with_release(facts, "deepspeed", "0.16.4",
                     build=BuildFacts(read=False, error="404 Not Found"))
    why = removed(f, framework="deepspeed", framework_version="0.16.4", nvcc="12.6",
                  torch="2.5")
    assert "build files were not read" in why["nvcc"]
    c = top(f, framework="deepspeed", framework_version="0.16.4")
    assert any("not read (404 Not Found)" in n for n in c.notes)


def test_major_check_and_no_check(facts):
    major = BuildFacts(read=True, nvcc_check="major")
    f = with_release(facts, "deepspeed", "0.16.4", build=major)
    c = top(f, framework="deepspeed", framework_version="0.16.4", nvcc="12.1", torch="2.9")
    assert (c.cuda, c.nvcc) == ("12.8", "12.1")
    why = removed(f, framework="deepspeed", framework_version="0.16.4", nvcc="11.8",
                  torch="2.9")
    assert "different major" in why["nvcc"]


def test_nvcc_flag_forms(facts):
    assert validate(Request(nvcc="cu124"), facts).nvcc == "12.4"
    assert validate(Request(nvcc="12.4.131"), facts).nvcc == "12.4"
    with pytest.raises(UsageError, match="not a CUDA toolkit version"):
        validate(Request(nvcc="twelve"), facts)


# ------------------------------------------------------------------ C++ standard and gcc

def test_cxx_standard_of_torch_headers_vs_the_release_flags(facts):
    headers = TorchHeaders(cxx_std="20", cxx_std_where="c10/util/C++17.h:12: …")
    f = with_builds(with_release(facts, "deepspeed", "0.18.2", build=ds_build()), "2.9.0",
                    headers=headers)
    why = removed(f, framework="deepspeed", framework_version="0.18.2", torch="2.9.0")
    assert "-std=c++17" in why["cxx-std"] and "require C++20" in why["cxx-std"]
    assert "op_builder/builder.py:660" in why["cxx-std"]
    fixed = ds_build(cxx_std=(StdRule(std="20", torch=">=2.9"), StdRule(std="17")),
                     nvcc_std=(StdRule(std="20", torch=">=2.9"), StdRule(std="17")))
    ok = with_release(f, "deepspeed", "0.18.2", build=fixed)
    assert top(ok, framework="deepspeed", framework_version="0.18.2").torch == "2.9.0"


def test_gcc_floor_from_the_standard_and_ceiling_from_nvcc(facts):
    headers = TorchHeaders(cxx_std="17", min_gcc=13, min_gcc_where="C++17.h:20")
    f = with_builds(facts, "2.9.0", headers=headers)
    c = top(f, framework="deepspeed", torch="2.9.0", os="ubuntu-22.04")
    assert c.gcc >= 13 and c.gcc <= 14 and c.gcc_source != "os"  # 22.04's gcc 11 is too old
    low = with_builds(facts, "2.9.0", headers=dataclasses.replace(headers, min_gcc=15))
    why = removed(low, framework="deepspeed", torch="2.9.0", os="ubuntu-22.04")
    assert "needs gcc ≥ 15" in why["gcc"] and "≤ 14 for nvcc 12.8" in why["gcc"]


# ------------------------------------------------------------------ GPU

def test_gpu_name_sets_the_arch_and_unknown_name_suggests(facts):
    assert validate(Request(gpu="v100"), facts).gpu_arch == "sm_70"
    assert validate(Request(gpu="NVIDIA H100"), facts).gpu_arch == "sm_90"
    with pytest.raises(UsageError, match="unknown GPU") as exc:
        validate(Request(gpu="H1000"), facts)
    assert "H100" in exc.value.hint
    with pytest.raises(UsageError, match="but --gpu-arch says"):
        validate(Request(gpu="V100", gpu_arch="sm_80"), facts)


def test_gpu_excludes_ops_below_their_floor(facts):
    build = ds_build(ops=(OpFacts(name="fp_quantizer", min_cc="8.0",
                                  evidence=("op_builder/fp_quantizer.py:40: if cc < 8",)),
                          OpFacts(name="fused_adam")))
    f = with_release(facts, "deepspeed", "0.18.2", build=build)
    c = top(f, framework="deepspeed", framework_version="0.18.2", gpu="V100")
    assert c.ops_unavailable == ("fp_quantizer: needs compute capability ≥ 8.0 (have sm_70) "
                                 "(op_builder/fp_quantizer.py:40: if cc < 8)",)
    assert top(f, framework="deepspeed", framework_version="0.18.2",
               gpu="H100").ops_unavailable == ()


def test_ptx_lets_a_newer_gpu_run_and_same_major_sass_counts(facts):
    from envgen.resolve.checks import runs_on

    b = dataclasses.replace(facts.torch_builds[0], archs=("sm_80", "sm_90"),
                            archs_ptx=("compute_90",))
    assert runs_on(b, "sm_86") == (True, False)  # sm_80 code runs on 8.6
    assert runs_on(b, "sm_120") == (False, True)  # only by JIT from compute_90
    assert runs_on(b, "sm_75") == (False, False)
    f = with_builds(facts, "2.9.0", archs=("sm_80", "sm_90"), archs_ptx=("compute_90",),
                    archs_from="harvested", archs_source="https://example.invalid/t.whl")
    c = top(f, framework="deepspeed", torch="2.9.0", gpu_arch="sm_120")
    assert any("JIT-compiling its PTX (compute_90)" in n for n in c.notes)


def test_torch_build_arch_list_excludes_a_dropped_arch(facts):
    archs = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    f = with_builds(facts, "2.9.0", archs=archs, archs_source="https://example.invalid/b")
    why = removed(f, framework="deepspeed", torch="2.9.0", gpu="V100")
    assert "was compiled for sm_75" in why["gpu-arch"]
    assert "no kernel runs on V100 (sm_70)" in why["gpu-arch"]
    c = top(f, framework="deepspeed", gpu="V100")
    assert c.torch != "2.9.0"
    assert "sm_70" not in top(f, framework="deepspeed", torch="2.9.0").cuda_archs


# ------------------------------------------------------------------ driver

def test_driver_between_the_floor_and_the_release_driver(facts):
    runtime = facts.toolkits["12.8"]
    rel = ToolkitRelease(cuda="12.8", release="12.8.1", nvcc="12.8.93", cudart="12.8.90",
                         driver="570.124.06", source="https://example.invalid/notes")
    toolkits = {**facts.toolkits, "12.8": dataclasses.replace(
        runtime, min_driver="525.60.13", releases=(rel,))}
    f = with_builds(dataclasses.replace(facts, toolkits=toolkits), "2.9.0",
                    cuda_runtime="12.8.90")
    c = top(f, framework="deepspeed", torch="2.9.0", driver="535.104.05")
    assert c.min_driver == "525.60.13" and c.release_driver == "570.124.06"
    assert any("minor-version compatibility" in n and "CUDA 12.8.1" in n for n in c.notes)
    why = removed(f, framework="deepspeed", torch="2.9.0", driver="470.57.02")
    assert "needs driver ≥ 525.60.13 even under minor-version compatibility" in why["driver"]


# ------------------------------------------------------------------ curated breakages

def test_breakage_needs_every_condition(facts):
    # fixture: deepspeed <=0.14.0 × torch 2.5 × CUDA 12.4 × Python >=3.12 is broken
    why = removed(facts, framework="deepspeed", framework_version="0.14.0", torch="2.5",
                  cuda="12.4", python="3.12")
    assert "op build fails (fixture)" in why["breakage"]
    assert top(facts, framework="deepspeed", framework_version="0.14.0", torch="2.5",
               cuda="12.4", python="3.11").python == "3.11"


def test_newer_release_is_not_assumed_fixed(facts):
    c = top(facts, framework="deepspeed", framework_version="0.16.4", torch="2.5",
            cuda="12.4", python="3.12")
    assert any("not known to be fixed" in n and "deepspeed<=0.14.0" in n
               and "checked through 0.14.0" in n for n in c.notes)


def test_real_glibc_raises_what_a_tag_claims_never_lowers_it(facts):
    from envgen.facts.derive import apply_curated_torch

    row = {"torch": "<2.7", "platform": "linux-x86_64", "tag_glibc": "2.5", "glibc": "2.17",
           "source": "https://example.invalid/issue"}
    old = next(b for b in facts.torch_builds if b.version == "2.5.1" and b.glibc == "2.5")
    new = next(b for b in facts.torch_builds if b.version == "2.9.0" and b.glibc == "2.28")
    out = apply_curated_torch({"real_glibc": [row]}, [old, new], problems=None)
    assert [b.glibc for b in out] == ["2.17", "2.28"]
