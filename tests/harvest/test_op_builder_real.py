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


# ------------------------------------------------------------------ per-op rules, arch entries
# Each vendored release's own async_io/gds cxx_args() run for a row of torch versions, and its
# own CUDAOpBuilder.compute_capability_args() run on each probed TORCH_CUDA_ARCH_LIST entry
# (ahead of time, and as a JIT load on a machine with one GPU of that capability), compared
# with what the static reader states for them.

OPS_RUNNER = r"""
import importlib, json, os, sys, traceback
stub, parent, torches, entries, ops = sys.argv[1:6]
sys.path[:0] = [stub, parent]
import torch
torch.utils.cpp_extension.CUDA_HOME = "/usr/local/cuda"
STUBBED = {"cpu_arch": "-march=native", "simd_width": "-D__AVX512__",
           "get_cuda_compile_flag": "-D__ENABLE_CUDA__",
           "get_cuda_lib64_path": "/usr/local/cuda/lib64"}  # they probe the host: not judged

def fresh(version):
    torch.__version__ = version
    for name in [m for m in sys.modules if m == "op_builder" or m.startswith("op_builder.")]:
        del sys.modules[name]
    return importlib.import_module("op_builder.builder")

out = {"std": {}, "arch": []}
for t in json.loads(torches):
    fresh(t + ".0")
    for module, cls in json.loads(ops).items():
        op = getattr(importlib.import_module("op_builder." + module), cls)()
        for name, value in STUBBED.items():
            setattr(op, name, lambda *a, v=value, **k: v)
        try:
            stds = [a for a in op.cxx_args() if isinstance(a, str) and a.startswith("-std=")]
            out["std"].setdefault(module, {})[t] = stds[-1] if stds else None
        except Exception as exc:
            out["std"].setdefault(module, {})[t] = f"error {type(exc).__name__}: {exc}"
builder = fresh("2.5.1")

class Probe(builder.CUDAOpBuilder):
    BUILD_VAR = "DS_BUILD_PROBE"
    NAME = "probe"

    def __init__(self):
        super().__init__(name=self.NAME)

    def absolute_name(self):
        return "probe"

    def sources(self):
        return []

for jit in (False, True):
    for entry in json.loads(entries):
        major, minor = entry.split(".")
        gpu = (int(major), int(minor.rstrip("af")))
        torch.cuda.device_count = lambda: 1
        torch.cuda.get_device_capability = lambda i=0, g=gpu: g
        os.environ["TORCH_CUDA_ARCH_LIST"] = entry
        probe = Probe()
        probe.jit_mode = jit
        row = {"mode": "jit" if jit else "aot", "entry": entry}
        try:
            row["args"] = probe.compute_capability_args()
            row["env"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__)
                      if f.filename.endswith("builder.py")]
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["line"] = frames[-1].lineno
        out["arch"].append(row)
print(json.dumps(out))
"""
OP_CLASSES = {"async_io": "AsyncIOBuilder", "gds": "GDSBuilder"}
TORCHES = ["1.13", "2.0", "2.1", "2.5", "2.11", "2.12", "2.15", "3.0"]
STUB_EXTRA = {"distutils/spawn.py": "def find_executable(name):\n    return None\n"}


@pytest.fixture(scope="module")
def ops_real(tmp_path_factory) -> dict[str, dict]:
    from envgen.harvest.op_builder_archs import ARCH_ENTRIES

    root = tmp_path_factory.mktemp("ds_ops_real")
    stub = root / "stub"
    for name, text in {**STUB_TORCH, **STUB_EXTRA}.items():
        (stub / name).parent.mkdir(parents=True, exist_ok=True)
        (stub / name).write_text(text)
    runner = root / "runner.py"
    runner.write_text(OPS_RUNNER)

    def one(version: str) -> dict:
        parent = root / version
        package = parent / "op_builder"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        for path in (FIXTURES / version / "op_builder").glob("*.py"):
            (package / path.name).write_text(path.read_text())
        ops = {m: c for m, c in OP_CLASSES.items() if (package / f"{m}.py").exists()}
        done = subprocess.run(
            [sys.executable, "-I", str(runner), str(stub), str(parent), json.dumps(TORCHES),
             json.dumps(ARCH_ENTRIES), json.dumps(ops)],
            capture_output=True, text=True, timeout=120, cwd=root,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=len(RELEASES)) as pool:
        return dict(zip(RELEASES, pool.map(one, RELEASES), strict=True))


def test_vendored_releases_hold_the_op_files():
    """The files the per-op comparisons run: async_io from 0.10.0 (its own -std=c++14), the
    0.12.6 torch-conditional one, 0.16.4's super().cxx_args() edit, gds on top of it."""
    have = {v for v in RELEASES if (FIXTURES / v / "op_builder" / "async_io.py").exists()}
    assert {"0.10.0", "0.12.6", "0.16.4", "0.19.8"} <= have
    assert (FIXTURES / "0.19.8" / "op_builder" / "gds.py").exists()


@pytest.mark.parametrize("version", RELEASES)
def test_op_std_rules_match_the_release(ops_real, version):
    built = build_facts(complete_build({"read": True, **facts_of(version)}))
    ops = {op.name: op for op in built.ops}
    observed = ops_real[version]["std"]
    assert set(observed) == {m for m in OP_CLASSES
                             if (FIXTURES / version / "op_builder" / f"{m}.py").exists()}
    for module, per_torch in observed.items():
        op = ops[module]
        assert op.cxx_std, f"{module} passes its own -std= flag, the reader has no rule"
        for torch, flag in per_torch.items():
            rule = built.std(op.cxx_std, torch, "12.8")
            if flag is not None and flag.startswith("error"):
                assert rule is None, (module, torch, flag)
                assert any("raises" in e and flag.split(": ", 1)[1] in e for e in op.evidence)
            else:
                assert rule is not None and flag == f"-std=c++{rule.std}", (module, torch, rule)


def test_op_std_rules_the_issue_names():
    """0.10.0's async_io is -std=c++14 whatever torch (op_builder/async_io.py:42); from 0.11
    it follows torch 2.1's C++17; gds inherits async_io's; the link probes name libaio and
    libcufile; 0.19.8's pin_memory refuses win32."""
    by = {v: {o["name"]: o for o in facts_of(v)["ops"]} for v in ("0.10.0", "0.12.6", "0.19.8")}
    assert [(r["std"], r["torch"], r["where"]) for r in by["0.10.0"]["async_io"]["cxx_std"]] == [
        ("14", "", "op_builder/async_io.py:42")]
    assert by["0.10.0"]["async_io"]["build_var"] == "DS_BUILD_AIO"
    assert by["0.10.0"]["async_io"]["libraries"] == ["aio"]
    assert ("17", ">=2.1,<3") in [(r["std"], r["torch"])
                                  for r in by["0.12.6"]["async_io"]["cxx_std"]]
    assert by["0.19.8"]["gds"]["libraries"] == ["cufile", "aio"]
    assert by["0.19.8"]["gds"]["cxx_std"] == by["0.19.8"]["async_io"]["cxx_std"]
    assert by["0.19.8"]["pin_memory"]["refuses_platforms"] == ["win32"]
    assert any(e.startswith("op_builder/pin_memory.py:")
               for e in by["0.19.8"]["pin_memory"]["evidence"])


@pytest.mark.parametrize("version", RELEASES)
def test_arch_entries_match_the_release(ops_real, version):
    static = {(e["mode"], e["entry"]): e for e in facts_of(version)["arch_entries"]}
    observed = ops_real[version]["arch"]
    assert len(observed) == len(static) == 10
    for row in observed:
        read = static[(row["mode"], row["entry"])]
        key = (version, row["mode"], row["entry"])
        if "error" in row:
            assert read["result"] == "fails", key
            assert read["where"] == f"op_builder/builder.py:{row['line']}", key
            assert read["detail"].endswith(row["error"]), key
            continue
        made = " ".join(row["args"]) if row["args"] else f"TORCH_CUDA_ARCH_LIST={row['env']}"
        assert read["detail"].endswith(made), (key, read["detail"], made)
        major, minor = row["entry"].split(".")
        want, base = f"sm_{major}{minor}", f"sm_{major}{minor.rstrip('af')}"
        listed = (row["env"] or "").replace("+PTX", "").split(";")
        if row["args"]:
            kept, dropped = f"code={want}" in made, f"code={base}" in made
        else:
            kept, dropped = row["entry"] in listed, row["entry"].rstrip("af") in listed
        assert read["result"] == ("kept" if kept else "dropped" if dropped else "misread"), key


def test_arch_entries_the_issue_names():
    """0.19.8 raises on 9.0a in its JIT load at builder.py:710 (the H200 machine's failure,
    docs/gpu-runners.md); 0.10.0 reads 10.0 as compute_1.; 0.16.4 keeps 9.0a ahead of time."""
    by = {v: {(e["mode"], e["entry"]): e for e in facts_of(v)["arch_entries"]}
          for v in ("0.10.0", "0.16.4", "0.19.8")}
    jit = by["0.19.8"][("jit", "9.0a")]
    assert (jit["result"], jit["where"]) == ("fails", "op_builder/builder.py:710")
    assert "invalid literal for int() with base 10: '0a'" in jit["detail"]
    assert by["0.10.0"][("aot", "10.0")]["result"] == "misread"
    assert "compute_1." in by["0.10.0"][("aot", "10.0")]["detail"]
    assert by["0.16.4"][("aot", "9.0a")]["result"] == "kept"
