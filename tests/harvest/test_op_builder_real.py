"""The static reader against the real thing: each vendored DeepSpeed release's own
``assert_no_cuda_mismatch()`` and ``get_default_compute_capabilities()`` run in a subprocess
with a stub ``torch`` and stub ``nvcc`` scripts, for every (nvcc, torch CUDA) pair, and compared
with what :func:`envgen.harvest.op_builder.deepspeed_build_facts` reads from the same file
without running it and what the resolver's own predicate (``BuildFacts.nvcc_accepts``) decides
from those facts."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from envgen.facts.release_read import build_facts
from envgen.harvest.frameworks import complete_build
from envgen.harvest.op_builder import deepspeed_build_facts

pytestmark = pytest.mark.integration  # subprocesses

FIXTURES = Path(__file__).parents[1] / "fixtures" / "deepspeed_op_builder"
RELEASES = sorted(
    (p.name for p in FIXTURES.iterdir() if p.is_dir()),
    key=lambda v: tuple(int(x) for x in v.split(".")),
)
CUDAS = (
    [f"10.{m}" for m in range(3)]
    + [f"11.{m}" for m in range(9)]
    + [f"12.{m}" for m in range(10) if m != 7]
    + [f"13.{m}" for m in range(3)]
)

STUB_TORCH = {
    "torch/__init__.py": "__version__ = '2.5.1'\nfrom . import cuda, utils, version\n",
    "torch/version.py": "cuda = '12.1'\n",
    "torch/cuda/__init__.py": (
        "AVAILABLE = True\n\ndef is_available():\n    return AVAILABLE\n\n"
        "def is_initialized():\n    return False\n\ndef device_count():\n    return 0\n"
    ),
    "torch/utils/__init__.py": "from . import cpp_extension\n",
    "torch/utils/cpp_extension.py": "CUDA_HOME = None\nROCM_HOME = None\n",
    # builder.py imports distutils at module level in most releases (gone in Python 3.12)
    "distutils/__init__.py": "",
    "distutils/ccompiler.py": "",
    "distutils/log.py": "",
    "distutils/sysconfig.py": "",
    "distutils/errors.py": "class CompileError(Exception):\n    pass\n\n"
    "class LinkError(Exception):\n    pass\n",
}

RUNNER = r"""
import functools, importlib.util, json, os, subprocess, sys
stub, builder, cudas_json, homes = sys.argv[1:5]
sys.path.insert(0, stub)
os.environ.pop("DS_SKIP_CUDA_CHECK", None)
import torch
# nvcc -V is deterministic: run each stub nvcc once (the release's own code still parses it)
subprocess.check_output = functools.lru_cache(maxsize=None)(
    lambda args, **kw: subprocess.run(list(args), check=True, capture_output=True,
                                      text=True).stdout)
_orig = subprocess.check_output
subprocess.check_output = lambda args, **kw: _orig(tuple(args))
spec = importlib.util.spec_from_file_location("ds_builder", builder)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
cudas = json.loads(cudas_json)

def run(nvcc, torch_cuda):
    torch.utils.cpp_extension.CUDA_HOME = os.path.join(homes, nvcc)
    torch.version.cuda = torch_cuda + ".1"
    try:
        mod.assert_no_cuda_mismatch()
        return "accept"
    except Exception as exc:
        return "refuse" if "does not match" in str(exc) else f"error {type(exc).__name__}: {exc}"

out = {"pairs": {}, "skip": {}, "archs": {}}
for nvcc in cudas:
    for torch_cuda in cudas:
        out["pairs"][f"{nvcc} {torch_cuda}"] = run(nvcc, torch_cuda)
os.environ["DS_SKIP_CUDA_CHECK"] = "1"
for key, result in list(out["pairs"].items()):
    if result == "refuse":
        out["skip"][key] = run(*key.split())
del os.environ["DS_SKIP_CUDA_CHECK"]
for nvcc in cudas:
    torch.utils.cpp_extension.CUDA_HOME = os.path.join(homes, nvcc)
    out["archs"][nvcc] = mod.get_default_compute_capabilities().split(";")
torch.cuda.AVAILABLE = False  # a build machine without a visible GPU
out["no_gpu"] = run("11.8", "12.1")
print(json.dumps(out))
"""


def nvcc_accepts(facts: dict, nvcc: str, torch_cuda: str):
    """The resolver's own predicate (:meth:`BuildFacts.nvcc_accepts`) over harvested facts, as
    ``envgen resolve`` loads them from harvested/frameworks.json."""
    raw = facts if "read" in facts else {"read": True, **facts}
    return build_facts(complete_build(raw)).nvcc_accepts(nvcc, torch_cuda)


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("ds_real")
    stub = root / "stub"
    for name, text in STUB_TORCH.items():
        (stub / name).parent.mkdir(parents=True, exist_ok=True)
        (stub / name).write_text(text)
    homes = root / "cuda"
    for cuda in CUDAS:
        nvcc = homes / cuda / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True)
        nvcc.write_text(
            "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
            f"echo 'Cuda compilation tools, release {cuda}, V{cuda}.99'\n"
        )
        nvcc.chmod(0o755)
    runner = root / "runner.py"
    runner.write_text(RUNNER)

    def one(version: str) -> dict:
        builder = FIXTURES / version / "op_builder" / "builder.py"
        done = subprocess.run(
            [sys.executable, "-I", str(runner), str(stub), str(builder), json.dumps(CUDAS),
             str(homes)],
            capture_output=True, text=True, timeout=120, cwd=root,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=len(RELEASES)) as pool:
        return dict(zip(RELEASES, pool.map(one, RELEASES), strict=True))


def facts_of(version: str) -> dict:
    files = {
        f"op_builder/{p.name}": p.read_text()
        for p in (FIXTURES / version / "op_builder").glob("*.py")
    }
    return deepspeed_build_facts(files, CUDAS)


def test_enough_releases_vendored():
    assert len(RELEASES) >= 6
    assert RELEASES[0] == "0.8.0" and RELEASES[-1].startswith("0.19.")


@pytest.mark.parametrize("version", RELEASES)
def test_nvcc_accepts_matches_the_release(real, version):
    facts = facts_of(version)
    assert facts["unread"] == []
    observed = real[version]["pairs"]
    assert not [r for r in observed.values() if r.startswith("error")], observed
    wrong = []
    for key, result in observed.items():
        nvcc, torch_cuda = key.split()
        predicted, why = nvcc_accepts(facts, nvcc, torch_cuda)
        if predicted is not (result == "accept"):
            wrong.append(f"{key}: release {result}s, predicted {predicted} ({why})")
    assert wrong == [], "\n".join(wrong[:20])
    assert len(observed) == len(CUDAS) ** 2


@pytest.mark.parametrize("version", RELEASES)
def test_skip_variable_matches_the_release(real, version):
    facts = facts_of(version)
    skipped = real[version]["skip"]
    assert skipped, "every release refuses some pair"
    expected = "accept" if facts["skip_cuda_check"] == "DS_SKIP_CUDA_CHECK" else "refuse"
    assert set(skipped.values()) == {expected}


@pytest.mark.parametrize("version", RELEASES)
def test_default_archs_match_the_release(real, version):
    facts = facts_of(version)
    assert facts["default_archs"] == real[version]["archs"]


@pytest.mark.parametrize("version", RELEASES)
def test_no_gpu_probe_matches_the_release(real, version):
    facts = facts_of(version)
    expected = "accept" if facts["nvcc_check_skipped_without_gpu"] else "refuse"
    assert real[version]["no_gpu"] == expected


def test_eras_differ_as_the_files_say():
    """A few facts per era, read from the vendored files (not remembered)."""
    by = {v: facts_of(v) for v in RELEASES}
    assert "12" not in by["0.8.0"]["cuda_minor_mismatch_ok"]
    assert by["0.10.0"]["cuda_minor_mismatch_ok"]["12"] == ["12.0", "12.1"]
    assert by["0.8.0"]["skip_cuda_check"] is None
    assert by["0.19.8"]["skip_cuda_check"] == "DS_SKIP_CUDA_CHECK"
    assert by["0.8.1"]["nvcc_check_skipped_without_gpu"] is True
    assert [r["std"] for r in by["0.8.0"]["nvcc_std"]] == ["14"]
    assert [(r["std"], r["cuda"]) for r in by["0.10.0"]["nvcc_std"]] == [
        ("17", ">=11"), ("14", "<11")
    ]
    assert [(r["std"], r["torch"]) for r in by["0.19.8"]["cxx_std"]] == [
        ("20", ">=2.12"), ("17", "<2.12")
    ]
    ops = {o["name"]: o for o in by["0.19.8"]["ops"]}
    assert ops["transformer_inference"]["min_cc"] == "6.0"
    assert ops["transformer_inference"]["builder"] == "InferenceBuilder"
