"""The curated GPU arch lists of torch builds (matrix/curated/torch.toml [[archs]]) agree with
the build scripts they cite: excerpts of the real files are stored under
tests/fixtures/torch_archs/ (origin in each file's header), and a GPU request against a build
whose list is unknown is answered "unknown", never "fits"."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
import tomllib

from envgen.facts import load_facts

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "torch_archs"
_ARM = re.compile(r"^\s{4}([0-9.\[\]*]+)\)\s*$")
_SET = re.compile(r'^\s*TORCH_CUDA_ARCH_LIST="([^"]*)"')


def arch_list(script: str, cuda: str) -> str | None:
    """TORCH_CUDA_ARCH_LIST a build_cuda.sh excerpt sets for ``cuda`` on x86_64: the base
    assignment, then the first matching ``case`` arm's first assignment (an aarch64-only
    ``if`` branch comes first in 2.4/2.5 and is skipped)."""
    value, arm, in_case, skip = "", None, False, False
    for line in script.splitlines():
        if line.strip().startswith("case ${CUDA_VERSION}"):
            in_case = True
            continue
        match = _ARM.match(line)
        if in_case and match:
            if arm is not None:
                break
            arm = match[1] if fnmatch.fnmatch(cuda, match[1]) else None
            continue
        if "cuda-aarch64" in line:
            skip = True
            continue
        if skip and line.strip() == "else":
            skip = False
            continue
        found = _SET.match(line)
        if found and not skip and (not in_case or arm is not None):
            value = found[1].replace("${TORCH_CUDA_ARCH_LIST}", value)
            if in_case:
                return value
    return None


def _sm(value: str) -> tuple[list[str], list[str]]:
    sm, ptx = [], []
    for item in value.split(";"):
        digits = item.removesuffix("+PTX").replace(".", "")
        sm.append(f"sm_{digits}")
        if item.endswith("+PTX"):
            ptx.append(f"compute_{digits}")
    return sorted(sm, key=lambda a: int(a[3:])), ptx


def _row(torch: str, cuda: str) -> dict:
    doc = tomllib.loads((ROOT / "matrix" / "curated" / "torch.toml").read_text())
    return next(r for r in doc["archs"] if r["torch"] == torch and r["cuda"] == cuda
                and r["platforms"] == ["linux-x86_64"])


@pytest.mark.parametrize(("fixture", "torch", "cuda"), [
    ("builder-release-1.13-build_cuda.sh", "==1.13.*", "11.6"),
    ("builder-release-2.5-build_cuda.sh", "==2.5.*", "11.8"),
    ("builder-release-2.5-build_cuda.sh", "==2.5.*", "12.1"),
    ("pytorch-00c7a380-build_cuda.sh", "==2.8.*", "12.6"),
    ("pytorch-00c7a380-build_cuda.sh", "==2.8.*", "12.9"),
])
def test_curated_row_is_what_the_cited_script_sets(fixture, torch, cuda):
    script = (FIXTURES / fixture).read_text()
    value = arch_list(script, cuda)
    assert value is not None
    sm, ptx = _sm(value)
    row = _row(torch, cuda)
    assert row["archs"] == sm
    assert row.get("ptx", []) == ptx
    commit = re.search(r"at ([0-9a-f]{40})", script)[1]
    assert commit in row["source"]


def test_the_evaluator_reads_the_aarch64_branch_away_and_the_glob_arm():
    script = (FIXTURES / "builder-release-2.5-build_cuda.sh").read_text()
    assert arch_list(script, "12.4") == "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
    assert arch_list(script, "11.7") == "5.0;6.0;7.0;7.5;8.0;8.6;3.7"
    assert arch_list(script, "13.0") is None
    old = (FIXTURES / "builder-release-1.13-build_cuda.sh").read_text()
    assert arch_list(old, "11.7") == "3.7;5.0;6.0;7.0;7.5;8.0;8.6"


@pytest.fixture(scope="module")
def real():
    return load_facts(ROOT / "matrix")


def test_curated_pytorch_index_builds_carry_their_arch_list(real):
    b = next(b for b in real.torch_builds if b.version == "2.8.0" and b.cuda == "12.9")
    assert "sm_60" not in b.archs and "sm_70" in b.archs and b.archs_from == "curated"
    assert b.archs_ptx == ("compute_120",)
    b = next(b for b in real.torch_builds
             if b.version == "2.11.0" and b.cuda == "12.8" and b.platform == "linux-x86_64")
    assert "sm_70" not in b.archs and "sm_75" in b.archs


def test_aarch64_cuda_builds_of_pytorch_index(real):
    found = {(b.version, b.cuda) for b in real.torch_builds
             if b.platform == "linux-aarch64" and b.curated}
    assert {("2.9.0", "12.8"), ("2.9.1", "12.8"), ("2.12.0", "13.2")} <= found
    b = next(b for b in real.torch_builds if b.version == "2.9.1" and b.cuda == "12.6"
             and b.platform == "linux-aarch64")
    assert b.archs == ("sm_80", "sm_90") and b.pins_from == "unknown"


def test_every_unknown_arch_list_says_why(real):
    unknown = [b for b in real.torch_builds if b.cuda and b.archs is None]
    assert all(b.archs_unknown for b in unknown), [b.pin for b in unknown if not b.archs_unknown]


def test_a_gpu_against_an_unknown_arch_list_is_unknown_never_fits(real):
    import dataclasses

    from envgen.facts.model import CudaToolkit
    from envgen.resolve.checks import Checks
    from envgen.resolve.request import Request

    build = next(b for b in real.torch_builds if b.version == "2.6.0" and b.cuda == "12.6")
    assert build.archs is None
    toolkit = CudaToolkit(cuda="12.6", nvcc_package=None, nvcc_version=None, max_gcc=None,
                          archs=())
    why = Checks(Request(gpu_arch="sm_90", gpu="H100"), real).gpu(build, toolkit)
    assert why.startswith("unknown:") and "could not be read" in why
    known = dataclasses.replace(build, archs=("sm_90",), archs_from="curated")
    assert Checks(Request(gpu_arch="sm_90"), real).gpu(known, toolkit) is None


def test_the_issue_41_requests(capsys):
    from envgen.cli.main import main

    argv = ["--matrix-dir", str(ROOT / "matrix")]
    assert main(["resolve", "--torch", "2.8", "--cuda", "12.9", "--gpu", "P100", *argv]) == 3
    out = capsys.readouterr()
    text = out.out + out.err
    assert "no kernel runs on P100 (sm_60)" in text and "00c7a380" in text
    assert main(["resolve", "--platform", "linux-aarch64", "--torch", "2.9", "--cuda", "12.8",
                 *argv]) == 0
    assert "torch2.9.1-cu128" in capsys.readouterr().out
