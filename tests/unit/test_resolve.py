from __future__ import annotations

import dataclasses
import re

import pytest

from envgen.errors import InfeasibleError, UsageError
from envgen.resolve import Request, count_feasible, resolve
from envgen.resolve.engine import _python_rank


def top(facts, **kw):
    return resolve(Request(**kw), facts, limit=1)[0]


def explanation(facts, **kw):
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(**kw), facts)
    return exc.value.explanation


def test_best_deepspeed_is_newest_everything(facts):
    c = top(facts, framework="deepspeed")
    assert (c.framework_version, c.torch, c.cuda, c.python, c.os) == (
        "0.18.2", "2.9.0", "12.8", "3.12", "ubuntu-22.04")
    assert c.nccl == "2.27.5" and c.triton == "3.5.0"
    assert c.nvcc == "12.8" and c.nvcc_version == "12.8.93"
    assert c.id == "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"


def test_ranking_is_lexicographic_over_policy(facts):
    found = resolve(Request(framework="deepspeed"), facts, limit=None)
    pykey = _python_rank(facts)
    os_pref = list(facts.policy.os_preference)

    def key(c):
        v = tuple(-int(x) for x in c.framework_version.split("."))
        t = tuple(-int(x) for x in c.torch.split("."))
        cu = tuple(-int(x) for x in c.cuda.split("."))
        return (v, t, cu, pykey(c.python), os_pref.index(c.os))

    assert [key(c) for c in found] == sorted(key(c) for c in found)
    assert len({c.id for c in found}) == len(found)  # ids are unique


def test_requested_cuda_picks_newest_torch_for_it_even_if_curated(facts):
    c = top(facts, framework="deepspeed", cuda="12.1")
    assert c.torch_pin == "torch==2.5.1+cu121"
    assert c.torch_index == "pytorch-cu121" and c.evidence == "curated"
    assert any("curated data only" in n for n in c.notes)


def test_cuda_major_only_and_cu_spelling(facts):
    assert top(facts, framework="deepspeed", cuda="11").cuda == "11.8"
    assert top(facts, framework="deepspeed", cuda="cu124").cuda == "12.4"


def test_framework_torch_requirement(facts):
    c = top(facts, framework="colossalai")
    assert c.torch == "2.5.1" and c.cuda == "12.4"  # <=2.5.1 rules out 2.7 and 2.9


def test_glibc_rules_out_manylinux_2_28_on_old_os(facts):
    e = explanation(facts, framework="deepspeed", torch="2.9", os="centos-7")
    assert [r.constraint for r in e.removed] == ["glibc"]
    assert "centos-7 has glibc 2.17" in e.removed[0].example
    ok = top(facts, framework="deepspeed", os="centos-7")
    assert ok.torch == "2.5.1" and ok.torch_glibc in ("2.5", "2.17")


def test_gcc_within_nvcc_max(facts):
    c = top(facts, framework="deepspeed", cuda="12.1", os="ubuntu-24.04")
    assert (c.gcc, c.gcc_source) == (12, "os-package")  # default 13 > nvcc 12.1's max 12
    c = top(facts, framework="deepspeed", cuda="11.8", os="debian-12")
    assert (c.gcc, c.gcc_source) == (11, "conda-forge")  # debian packages only gcc 12
    c = top(facts, framework="deepspeed", cuda="12.8", os="ubuntu-24.04")
    assert (c.gcc, c.gcc_source) == (13, "os")


def test_gcc_infeasible_without_conda_gcc(facts):
    no_conda = dataclasses.replace(facts, policy=dataclasses.replace(facts.policy, conda_gcc=()))
    e = explanation(no_conda, framework="deepspeed", cuda="11.8", os="debian-12")
    assert [r.constraint for r in e.removed] == ["gcc"]
    assert "needs gcc ≥ 9 for torch 2.5.1's headers" in e.removed[0].example
    assert "≤ 11 for nvcc 11.8" in e.removed[0].example


def test_driver_minimum(facts):
    c = top(facts, framework="deepspeed", driver="450.80.02")
    assert c.cuda == "11.7"  # 12.x needs 525.60.13; the fixture has no driver row for 11.8
    e = explanation(facts, framework="deepspeed", driver="440.33")
    assert {r.constraint for r in e.removed} == {"driver", "framework-torch"}  # 0.18.2: torch>=2.1
    assert "needs driver ≥" in next(r.example for r in e.removed if r.constraint == "driver")
    assert c.min_driver == "450.80.02"


def test_gpu_arch(facts):
    assert top(facts, framework="deepspeed", gpu_arch="sm_120").cuda == "12.8"
    # Kepler sm_37: only the CUDA 11 builds (fixture arch lists) have it
    assert top(facts, framework="deepspeed", gpu_arch="3.7").cuda.startswith("11.")
    e = explanation(facts, framework="colossalai", gpu_arch="sm_120")
    assert {r.constraint for r in e.removed} >= {"gpu-arch"}


def test_framework_python_and_nearest(facts):
    e = explanation(facts, framework="megatron-core", python="3.9")
    removed = {r.constraint: r for r in e.removed}
    # torch 1.13 and CUDA 11 builds fall to megatron's curated rules first; the rest to Python
    assert set(removed) == {"framework-torch", "framework-cuda", "framework-python"}
    assert "requires Python>=3.10" in removed["framework-python"].example
    assert e.nearest[0].relaxed == ("python",)
    assert e.nearest[0].changes["python"] == ("3.9", "3.12")


def test_curated_framework_cuda_constraint(facts):
    e = explanation(facts, framework="megatron-core", cuda="11.8")
    assert [r.constraint for r in e.removed] == ["framework-cuda"]
    assert "curated" in e.removed[0].example


def test_nvcc_minor_mismatch_allow_list(facts):
    without = {k: v for k, v in facts.toolkits.items() if k != "12.1"}
    f = dataclasses.replace(facts, toolkits=without)
    c = top(f, framework="deepspeed", cuda="12.1")
    assert c.cuda == "12.1" and c.nvcc == "12.4"  # nearest accepted minor
    assert any("nvcc 12.4 stands in for CUDA 12.1" in n and "cuda_minor_mismatch_ok[12]" in n
               for n in c.notes)
    e = explanation(f, framework="colossalai", cuda="12.1")  # colossalai has no allow-list
    removed = {r.constraint: r for r in e.removed}
    assert set(removed) == {"framework-torch", "nvcc"}  # 2.1.2 < colossalai's torch>=2.2.0
    assert "no nvcc for CUDA 12.1" in removed["nvcc"].example


def test_unknown_cuda_lists_what_exists(facts):
    e = explanation(facts, framework="deepspeed", cuda="10.2")
    assert e.empty and "no torch build for CUDA 10.2" in e.empty[0]
    assert "11.7, 11.8, 12.1, 12.4, 12.6, 12.8" in e.empty[0]
    assert e.nearest[0].relaxed == ("cuda",)


def test_two_axes_relaxed_when_one_is_not_enough(facts):
    e = explanation(facts, framework="megatron-core", python="3.9", cuda="11.8")
    assert e.nearest and all(len(a.relaxed) <= 2 for a in e.nearest)


def test_platform_aarch64(facts):
    c = top(facts, framework="deepspeed", platform="aarch64")
    assert c.platform == "linux-aarch64" and c.torch == "2.9.0" and c.id.endswith("-aarch64")
    e = explanation(facts, framework="deepspeed", platform="aarch64", os="centos-7")
    assert "no OS base matches --os centos-7" in e.empty[0]


def test_free_threaded_python_ranks_last_but_can_be_asked_for(facts):
    found = resolve(Request(framework="deepspeed", torch="2.9"), facts, limit=None)
    assert found[-1].python == "3.13t"
    assert top(facts, framework="deepspeed", python="3.13t").python == "3.13t"


def test_nccl_filter(facts):
    c = top(facts, framework="deepspeed", nccl="2.21")
    assert c.torch == "2.5.1" and c.nccl == "2.21.5"


@pytest.mark.parametrize(
    ("kw", "message", "hint"),
    [
        ({"framework": "deepspeeed"}, "unknown framework 'deepspeeed'", "did you mean 'deepspeed'"),
        ({"framework": "megatron"}, "unknown framework", "did you mean 'megatron-core'"),
        ({"os": "ubuntu-22.4"}, "unknown OS 'ubuntu-22.4'", "did you mean 'ubuntu-22.04'"),
        ({"python": "3"}, "--python '3' is not a Python version", "--python 3.11"),
        ({"cuda": "twelve"}, "--cuda 'twelve' is not a CUDA version", "--cuda 12.1"),
        ({"gpu_arch": "hopper"}, "not a GPU architecture", "sm_90"),
        ({"gpu_arch": "sm_99"}, "knows GPU architecture sm_99", "known:"),
        ({"driver": "latest"}, "not a driver version", "nvidia-smi"),
        ({"platform": "ppc64le"}, "unknown platform", "linux-x86_64"),
        ({"torch": "newest"}, "--torch 'newest' is not a version", "--torch 2.5"),
        ({"framework_version": "0.16"}, "--framework-version needs --framework", "deepspeed"),
    ],
)
def test_usage_errors_name_problem_and_fix(facts, kw, message, hint):
    with pytest.raises(UsageError) as exc:
        resolve(Request(**kw), facts)
    assert message in exc.value.message
    assert hint in exc.value.hint
    assert exc.value.exit_code == 2


def test_gpu_arch_spellings_normalize(facts):
    for spelling in ("sm_90", "sm90", "90", "9.0", "compute_90", "SM_90"):
        assert top(facts, framework="deepspeed", gpu_arch=spelling).cuda == "12.8"


def test_deterministic_and_ids_are_tag_safe(facts):
    a = resolve(Request(), facts, limit=None)
    b = resolve(Request(), facts, limit=None)
    assert a == b
    assert len(a) == count_feasible(Request(), facts)
    for c in a:
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", c.id)
    assert {c.framework for c in a} == {"deepspeed", "megatron-core", "colossalai"}
