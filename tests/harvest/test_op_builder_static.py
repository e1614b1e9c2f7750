"""The static op-builder reader on small synthetic snippets (no network, nothing executed)."""

from __future__ import annotations

import textwrap

from envgen.facts.release_read import build_facts
from envgen.harvest.diff import comparable
from envgen.harvest.frameworks import complete_build
from envgen.harvest.op_builder import deepspeed_build_facts, deepspeed_want

CUDAS = ["11.8", "12.1", "12.8", "13.0"]

BUILDER = '''
import os, sys
DEFAULT_COMPUTE_CAPABILITIES = "6.0;6.1;7.0"

def installed_cuda_version(name=""):
    import subprocess
    out = subprocess.check_output(["nvcc", "-V"])
    return 0, 0

def get_default_compute_capabilities():
    compute_caps = DEFAULT_COMPUTE_CAPABILITIES
    if installed_cuda_version()[0] >= 11:
        compute_caps += ";8.0"
        if installed_cuda_version()[1] >= 8:
            compute_caps += ";9.0"
    return compute_caps

cuda_minor_mismatch_ok = {
    11: ["11.0", "11.8"],
    12: ["12.0", "12.1", "12.8"],
}

def assert_no_cuda_mismatch(name=""):
    cuda_major, cuda_minor = installed_cuda_version(name)
    sys_cuda_version = f"{cuda_major}.{cuda_minor}"
    torch_cuda_version = ".".join(torch.version.cuda.split(".")[:2])
    if sys_cuda_version != torch_cuda_version:
        if (cuda_major in cuda_minor_mismatch_ok
                and sys_cuda_version in cuda_minor_mismatch_ok[cuda_major]
                and torch_cuda_version in cuda_minor_mismatch_ok[cuda_major]):
            return True
        elif os.getenv("DS_SKIP_CUDA_CHECK", "0") == "1":
            return True
        raise Exception("mismatch")
    return True

class OpBuilder:
    def cxx_args(self):
        return []

class CUDAOpBuilder(OpBuilder):
    def cxx_args(self):
        if sys.platform == "win32":
            return ["-O2"]
        std = "-std=c++20" if (TORCH_MAJOR, TORCH_MINOR) >= (2, 9) else "-std=c++17"
        return ["-O3", std]

    def nvcc_args(self):
        args = ["-O3"]
        cuda_major, cuda_minor = installed_cuda_version()
        args += ["-std=c++17" if cuda_major > 10 else "-std=c++14"]
        args += self.compute_capability_args()
        return args

    def compute_capability_args(self, cross_compile_archs=None):
        ccs = []
        if self.jit_mode:
            for i in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(i)
                ccs.append(f"{major}.{minor}")
        else:
            archs = os.environ.get("TORCH_CUDA_ARCH_LIST", None)
            ccs = (archs or get_default_compute_capabilities()).replace(" ", ";").split(";")
        args = []
        for cc in self.filter_ccs(ccs):
            num = cc[0] + cc[1].split("+")[0]
            args.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        return args

    def filter_ccs(self, ccs):
        return [cc.split(".") for cc in ccs]
'''

OP = '''
class FancyBuilder(CUDAOpBuilder):
    NAME = "fancy"

    def filter_ccs(self, ccs):
        kept = []
        for cc in ccs:
            if int(cc[0]) >= 8:
                kept.append(cc)
        return kept

    def is_compatible(self, verbose=False):
        cuda_okay = True
        cuda_capability = 9
        if cuda_capability < 7:
            cuda_okay = False
        if torch_cuda_major < 12 or sys_cuda_major < 12:
            cuda_okay = False
        return cuda_okay
'''


def nvcc_accepts(facts: dict, nvcc: str, torch_cuda: str):
    """The resolver's own predicate (:meth:`BuildFacts.nvcc_accepts`) over harvested facts, as
    ``envgen resolve`` loads them from harvested/frameworks.json."""
    raw = facts if "read" in facts else {"read": True, **facts}
    return build_facts(complete_build(raw)).nvcc_accepts(nvcc, torch_cuda)


def facts(builder: str = BUILDER, **extra: str) -> dict:
    files = {"op_builder/builder.py": textwrap.dedent(builder)}
    files.update({f"op_builder/{k}.py": textwrap.dedent(v) for k, v in extra.items()})
    return deepspeed_build_facts(files, CUDAS)


def test_reads_the_computed_values():
    got = facts(fancy=OP)
    assert got["nvcc_check"] == "allow-list"
    assert got["cuda_minor_mismatch_ok"] == {"11": ["11.0", "11.8"], "12": ["12.0", "12.1", "12.8"]}
    assert got["skip_cuda_check"] == "DS_SKIP_CUDA_CHECK"
    assert got["default_archs"] == {
        "11.8": ["6.0", "6.1", "7.0", "8.0", "9.0"],
        "12.1": ["6.0", "6.1", "7.0", "8.0"],
        "12.8": ["6.0", "6.1", "7.0", "8.0", "9.0"],
        "13.0": ["6.0", "6.1", "7.0", "8.0"],
    }
    assert [(r["std"], r["torch"], r["cuda"]) for r in got["cxx_std"]] == [
        ("20", ">=2.9", ""), ("17", "<2.9", "")
    ]
    assert [(r["std"], r["cuda"]) for r in got["nvcc_std"]] == [("17", "")]
    assert got["nvcc_std"][0]["where"].startswith("op_builder/builder.py:")
    (op,) = got["ops"]
    assert (op["name"], op["builder"], op["min_cc"], op["requires_cuda"]) == (
        "fancy", "FancyBuilder", "8.0", ">=12"
    )
    assert any("int(cc[0]) >= 8" in e for e in op["evidence"])
    assert got["unread"] == []
    entries = {(e["mode"], e["entry"]): e for e in got["arch_entries"]}
    assert entries[("aot", "9.0a")]["result"] == "kept"
    assert entries[("aot", "9.0a")]["detail"] == "-gencode=arch=compute_90a,code=sm_90a"
    assert entries[("jit", "9.0a")]["result"] == "dropped"  # the GPU's own 9.0, list unread
    assert entries[("aot", "10.0")]["result"] == "kept"
    line = textwrap.dedent(BUILDER).splitlines().index("def get_default_compute_capabilities():")
    assert got["default_archs_where"] == f"op_builder/builder.py:{line + 1}"


def test_exact_check_and_no_skip_variable():
    start, end = BUILDER.index("def assert_no_cuda_mismatch"), BUILDER.index("class OpBuilder")
    exact = (
        "def assert_no_cuda_mismatch():\n"
        "    cuda_major, cuda_minor = installed_cuda_version()\n"
        "    sys_cuda_version = f'{cuda_major}.{cuda_minor}'\n"
        "    torch_cuda_version = '.'.join(torch.version.cuda.split('.')[:2])\n"
        "    if sys_cuda_version != torch_cuda_version:\n"
        "        raise Exception('mismatch')\n\n"
    )
    text = BUILDER[:start] + exact + BUILDER[end:]
    got = facts(text)
    assert got["nvcc_check"] == "exact"
    assert got["skip_cuda_check"] is None
    assert nvcc_accepts(got, "12.1", "12.1")[0] is True
    assert nvcc_accepts(got, "12.8", "12.1")[0] is False


def test_unread_instead_of_guessing():
    """A -std= flag chosen by something outside the whitelist is reported, not guessed."""
    odd = BUILDER.replace(
        '["-std=c++17" if cuda_major > 10 else "-std=c++14"]',
        '["-std=c++17" if probe_compiler() else "-std=c++14"]',
    )
    got = facts(odd)
    assert got["nvcc_std"] == []
    assert any("nvcc_args" in u and "probe_compiler" in u for u in got["unread"])
    # the rest is still read
    assert got["nvcc_check"] == "allow-list" and got["cxx_std"]


def test_unread_default_archs_and_odd_filter():
    odd = BUILDER.replace("if installed_cuda_version()[0] >= 11:", "if read_gpu_list():")
    op = OP.replace("if int(cc[0]) >= 8:", "if cc in ALLOWED:")
    got = facts(odd, fancy=op)
    assert got["default_archs"] is None
    assert any("get_default_compute_capabilities" in u for u in got["unread"])
    assert any("FancyBuilder.filter_ccs" in u for u in got["unread"])


def test_missing_builder_and_syntax_error():
    missing = deepspeed_build_facts({}, CUDAS)["unread"]
    assert missing == ["op_builder/builder.py: not in the release"]
    got = facts("def broken(:\n")
    assert got["nvcc_check"] is None and "does not parse" in got["unread"][0]


def test_nothing_is_executed(tmp_path):
    marker = tmp_path / "ran"
    evil = BUILDER + f"\nopen({str(marker)!r}, 'w').write('x')\n"
    evil = evil.replace("return compute_caps", f"open({str(marker)!r}, 'w'); return compute_caps")
    facts(evil)
    assert not marker.exists()


def test_wheel_paths_are_normalized():
    files = {"deepspeed/ops/op_builder/builder.py": textwrap.dedent(BUILDER)}
    assert deepspeed_build_facts(files, CUDAS)["nvcc_check"] == "allow-list"
    assert deepspeed_want("op_builder/builder.py") and deepspeed_want("op_builder/cpu/x.py")
    assert deepspeed_want("deepspeed/ops/op_builder/builder.py")
    assert not deepspeed_want("csrc/foo.cu") and not deepspeed_want("op_builder/README.md")


def test_nvcc_accepts():
    build = {"read": True, **facts()}
    assert nvcc_accepts(build, "12.1", "12.1.105")[0] is True
    assert nvcc_accepts(build, "12.8", "12.1")[0] is True  # both in the 12 list
    ok, why = nvcc_accepts(build, "12.4", "12.1")  # 12.4 not listed
    assert ok is False and "cuda_minor_mismatch_ok[12] lists" in why
    assert nvcc_accepts(build, "11.8", "12.1")[0] is False  # across majors
    unread = {"read": False, "error": "404"}  # an equal nvcc passes any check; nothing else
    assert nvcc_accepts(unread, "12.1", "12.1")[0] is True
    assert nvcc_accepts(unread, "12.8", "12.1")[0] is None


def test_build_source_provenance_is_not_a_change():
    record = {"source": {"url": "u", "verified": "sha256"},
              "build": {"read": True, "source": {"url": "u", "verified": "sha256"}}}
    other = {"source": {"url": "u"}, "build": {"read": True, "source": {"url": "u"}}}
    assert comparable(record) == comparable(other)
    assert comparable(record) != comparable({**other, "build": {"read": False}})
