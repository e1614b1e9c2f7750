"""The doctor's rules on snapshots, against the fixture matrix: one fault per test, named with
its kind, evidence, fix and command; known-good environments get no error; a fact a rule
needs and the snapshot lacks is asked for, not guessed; a framework of unknown version is
judged by what holds for every release of it."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.snapshot import Snapshot

GOOD = {
    "os": "Ubuntu 22.04.3 LTS", "platform": "linux-x86_64", "python": "3.11.9",
    "glibc": "2.35", "torch": "2.5.1+cu121", "torch_cuda": "12.1", "torch_cxx11_abi": False,
    "torch_nccl": "2.21.5", "torch_arch_list": ["sm_80", "sm_90"], "nvcc": "12.1.105",
    "path_nvcc": "12.1.105", "path_cuda_home": "/usr/local/cuda-12.1",
    "cuda_home": "/usr/local/cuda-12.1", "gcc": "11.4.0", "gcc_available": [11],
    "driver": "535.104.05", "gpus": [{"name": "NVIDIA H100 80GB HBM3",
                                      "compute_capability": "9.0"}],
    "nccl_system": None, "frameworks": {"deepspeed": "0.18.2"},
    "packages": {"deepspeed": "0.18.2", "torch": "2.5.1+cu121", "nvidia-nccl-cu12": "2.21.5"},
    "conflicts": [], "libaio": {"library": True, "headers": True}, "ninja": "1.11.1",
    "ops": ["fused_adam", "async_io"], "env": {}, "import_errors": {}, "torch_extensions": [],
}


@pytest.fixture
def doctor(facts, fixture_matrix):
    catalog = load_catalog(fixture_matrix)

    def run(changes=None, drop=(), **kw):
        doc = {**GOOD, **(changes or {})}
        for name in drop:
            doc.pop(name)
        kw.setdefault("python", "/opt/env/bin/python")
        return judge(Snapshot.from_dict(doc), kw.pop("facts", facts), catalog, **kw)

    return run


def kinds(d, severity="error"):
    return [f.kind for f in d.findings if f.severity == severity]


def one(d, kind):
    found = [f for f in d.findings if f.kind == kind]
    assert len(found) == 1, [f.to_dict() for f in d.findings]
    return found[0]


def test_a_known_good_environment_gets_no_finding_and_needs_nothing(doctor):
    d = doctor()
    assert d.findings == () and d.needs == () and d.ok
    assert d.judged == {"deepspeed": ("0.18.2",)}


def test_every_finding_says_kind_severity_evidence_fix_source_and_pattern(doctor):
    d = doctor({"ninja": None, "gcc": "13.1.0"})
    for f in d.findings:
        doc = f.to_dict()
        assert set(doc) == {"kind", "severity", "summary", "evidence", "fix", "command",
                            "source", "pattern"}
        assert doc["source"].startswith("https://") and doc["pattern"] and doc["fix"]
    assert d.to_dict()["schema"] == 1 and d.to_dict()["snapshot"]["gcc"] == "13.1.0"


def test_cuda_major_mismatch(doctor):
    f = one(doctor({"nvcc": "11.8.89", "path_nvcc": "11.8.89"}), "cuda_major_mismatch")
    assert f.evidence["nvcc"] == "11.8.89" and f.evidence["torch_cuda"] == "12.1"
    assert "major" in f.summary


def test_cuda_minor_mismatch_follows_the_releases_own_allow_list(doctor):
    # DeepSpeed's cuda_minor_mismatch_ok lists 12.0–12.6 and 12.8, not 12.7 (fixture)
    f = one(doctor({"nvcc": "12.7.33", "path_nvcc": "12.7.33"}), "cuda_minor_mismatch")
    assert f.severity == "error" and "12.7" in f.summary and "deepspeed" in f.summary
    assert f.source.startswith("https://files.example.invalid/deepspeed-0.18.2")
    # torch 2.5.1 is built for CUDA 12.4 too: reinstalling it for nvcc's CUDA is offered,
    # or a CUDA 12.1 compiler
    assert "cu124" not in f.fix or "index-url" in f.fix
    # 12.4 vs 12.1: both in the allow-list, so the build accepts it
    assert "cuda_minor_mismatch" not in kinds(doctor({"nvcc": "12.4.131",
                                                      "path_nvcc": "12.4.131"}))


def test_skipping_the_cuda_check_turns_the_minor_mismatch_into_a_warning(doctor):
    d = doctor({"nvcc": "12.7.33", "path_nvcc": "12.7.33", "env": {"DS_SKIP_CUDA_CHECK": "1"}})
    assert one(d, "cuda_minor_mismatch").severity == "warning" and d.ok


def test_host_compiler_too_new_uses_an_installed_gcc_that_fits(doctor):
    f = one(doctor({"gcc": "13.1.0", "gcc_available": [11, 13]}), "host_compiler_too_new")
    assert f.command == "export CC=gcc-11 CXX=g++-11"
    assert f.evidence["max_gcc"] == 12 and "later than 12" in f.summary


def test_host_compiler_too_new_installs_one_when_none_fits(doctor):
    f = one(doctor({"gcc": "13.1.0", "gcc_available": [13]}), "host_compiler_too_new")
    assert f.command.startswith("apt-get install -y gcc-12 g++-12 && export CC=gcc-12")


def test_host_compiler_too_old_against_torchs_headers(doctor):
    f = one(doctor({"gcc": "7.5.0", "gcc_available": [7, 11]}), "host_compiler_too_old")
    assert "torch 2.5.1" in f.summary and f.command == "export CC=gcc-11 CXX=g++-11"


def test_cxx_standard_mismatch_when_the_framework_compiles_below_torchs_standard(
        doctor, facts):
    from envgen.facts.release_model import StdRule

    def with_std(r):
        if r.framework != "deepspeed":
            return r
        build = dataclasses.replace(r.build, cxx_std=(StdRule(std="14", where="builder.py:9"),))
        return dataclasses.replace(r, build=build)

    changed = dataclasses.replace(facts, frameworks=tuple(map(with_std, facts.frameworks)))
    f = one(doctor(facts=changed), "cxx_standard_mismatch")
    assert "-std=c++14" in f.summary and "C++17" in f.summary


def test_libaio_missing_for_async_io(doctor):
    f = one(doctor({"libaio": {"library": True, "headers": False}}), "libaio_missing")
    assert f.command == "apt-get install -y libaio-dev" and f.severity == "error"
    rocky = one(doctor({"os": "Rocky Linux 9.3 (Blue Onyx)",
                        "libaio": {"library": False, "headers": False}}), "libaio_missing")
    assert rocky.command == "dnf install -y libaio-devel"


def test_libaio_only_matters_for_the_ops_that_need_it(doctor):
    assert doctor({"libaio": None, "ops": ["fused_adam"]}).findings == ()
    unknown_ops = doctor({"libaio": None}, drop=("ops",))
    assert one(unknown_ops, "libaio_missing").severity == "warning" and unknown_ops.ok


def test_ninja_missing(doctor):
    f = one(doctor({"ninja": None}), "ninja_missing")
    assert f.command == "/opt/env/bin/python -m pip install ninja"


def test_unsupported_platform(doctor):
    mac = doctor({"platform": "macos-arm64"})
    assert [(f.evidence["framework"], f.evidence["platform"]) for f in mac.findings
            if f.kind == "unsupported_platform"] == [("torch", "macos-arm64"),
                                                      ("deepspeed", "macos-arm64")]
    windows = doctor({"platform": "windows", "os": "Microsoft Windows 11 Pro",
                      "frameworks": {"deepspeed": "0.18.2", "megatron-core": "0.12.0"}})
    # torch has CUDA builds for Windows, DeepSpeed supports it; Megatron-Core does not
    assert [f.evidence["framework"] for f in windows.findings
            if f.kind == "unsupported_platform"] == ["megatron-core"]


def test_gpu_arch_unsupported_by_torchs_build(doctor):
    d = doctor({"gpus": [{"name": "Tesla V100-SXM2-32GB", "compute_capability": "7.0"}]})
    f = one(d, "gpu_arch_unsupported")
    assert f.evidence["arch"] == "sm_70" and "no kernel image" in f.summary


def test_gpu_arch_from_the_name_when_the_capability_is_not_given(doctor):
    d = doctor({"gpus": [{"name": "Tesla V100-SXM2-32GB"}]})
    assert one(d, "gpu_arch_unsupported").evidence["arch"] == "sm_70"
    unknown = doctor({"gpus": [{"name": "Some Future GPU"}]})
    assert [n.fact for n in unknown.needs] == ["compute capability of Some Future GPU"]


def test_ptx_lets_a_newer_gpu_run(doctor):
    d = doctor({"torch_arch_list": ["sm_80", "compute_80"],
                "gpus": [{"name": "NVIDIA H100", "compute_capability": "9.0"}]})
    assert "gpu_arch_unsupported" not in kinds(d)


def test_driver_too_old(doctor):
    f = one(doctor({"driver": "470.82.01"}), "driver_too_old")
    assert f.evidence == {"driver": "470.82.01", "torch_cuda": "12.1", "needs": "525.60.13"}


def test_torch_unsupported_by_framework(doctor):
    d = doctor({"frameworks": {"colossalai": "0.4.6"}, "torch": "2.7.1+cu126",
                "torch_cuda": "12.6", "nvcc": "12.6.85", "path_nvcc": "12.6.85"})
    f = one(d, "torch_unsupported_by_framework")
    assert "<=2.5.1" in f.summary and f.command.startswith("envgen make --framework colossalai")


def test_python_unsupported(doctor):
    d = doctor({"frameworks": {"megatron-core": "0.12.0"}, "python": "3.9.18"})
    assert "Python>=3.10" in one(d, "python_unsupported").summary


def test_glibc_too_old(doctor):
    d = doctor({"torch": "2.7.1+cu126", "torch_cuda": "12.6", "nvcc": "12.6.85",
                "path_nvcc": "12.6.85", "glibc": "2.17"})
    assert one(d, "glibc_too_old").evidence["needs"] == "2.28"


def test_two_nccl_wheels(doctor):
    d = doctor({"packages": {**GOOD["packages"], "nvidia-nccl-cu11": "2.14.3"}})
    f = one(d, "nccl_mismatch")
    assert f.command == ("/opt/env/bin/python -m pip uninstall -y nvidia-nccl-cu11 && "
                         "/opt/env/bin/python -m pip install --force-reinstall --no-deps "
                         "nvidia-nccl-cu12==2.21.5")


def test_a_system_nccl_on_ld_library_path_shadowing_torchs(doctor):
    d = doctor({"nccl_system": "/opt/nccl/lib/libnccl.so.2.18.3",
                "env": {"LD_LIBRARY_PATH": "/opt/nccl/lib:/usr/local/cuda/lib64"}})
    f = one(d, "nccl_mismatch")
    assert f.command == "export LD_LIBRARY_PATH=/usr/local/cuda/lib64"
    same = doctor({"nccl_system": "/opt/nccl/lib/libnccl.so.2.21.5",
                   "env": {"LD_LIBRARY_PATH": "/opt/nccl/lib"}})
    assert "nccl_mismatch" not in kinds(same)


def test_abi_mismatch_of_a_cached_extension(doctor):
    ext = {"path": "/root/.cache/torch_extensions/py311_cu121/fused_adam", "cxx11_abi": True,
           "cuda": "12.1", "python": "3.11", "ops": ["fused_adam"]}
    f = one(doctor({"torch_extensions": [ext]}), "abi_mismatch")
    assert f.command == "rm -rf /root/.cache/torch_extensions/py311_cu121/fused_adam"


def test_dependency_conflict_of_a_framework_is_an_error_of_others_a_warning(doctor):
    d = doctor({"conflicts": [
        {"package": "deepspeed", "version": "0.18.2", "requires": "pydantic>=2.0.0",
         "have": "1.10.13"},
        {"package": "sphinx", "version": "7.0", "requires": "docutils<0.21", "have": "0.21"}]})
    errors = [f for f in d.findings if f.kind == "dependency_conflict"]
    assert [f.severity for f in errors] == ["error", "warning"]
    assert shlex.split(errors[0].command) == ["/opt/env/bin/python", "-m", "pip", "install",
                                              "pydantic>=2.0.0"]


def test_cuda_home_and_path_disagree(doctor):
    d = doctor({"cuda_home": "/opt/cuda-12.7", "nvcc": "12.7.33",
                "env": {"CUDA_HOME": "/opt/cuda-12.7"}})
    f = one(d, "cuda_home_mismatch")
    assert f.command == "export CUDA_HOME=/usr/local/cuda-12.1"
    # the nvcc build uses is 12.7: the release's check refuses it, and the fix is the same
    assert one(d, "cuda_minor_mismatch").command == "export CUDA_HOME=/usr/local/cuda-12.1"


def test_cuda_home_without_nvcc(doctor):
    d = doctor({"cuda_home": "/opt/nothing", "nvcc": None, "env": {"CUDA_HOME": "/opt/nothing"}})
    assert one(d, "cuda_home_mismatch").command == "export CUDA_HOME=/usr/local/cuda-12.1"


def test_stale_extension_cache(doctor):
    ext = {"path": "/cache/cpu_adam", "cuda": None, "python": "3.11", "ops": ["cpu_adam"],
           "loads": False, "error": "undefined symbol: _ZN3c1017RegisterOperators"}
    f = one(doctor({"torch_extensions": [ext], "env": {"TORCH_EXTENSIONS_DIR": "/cache"}}),
            "stale_extension_cache")
    assert f.command == "rm -rf /cache/cpu_adam" and "undefined symbol" in f.summary
    built_by = {"path": "/cache/fused_adam", "torch": "2.4.0", "cuda": "12.1"}
    assert one(doctor({"torch_extensions": [built_by]}), "stale_extension_cache")


def test_import_failed(doctor):
    f = one(doctor({"import_errors": {"deepspeed": "ImportError: undefined symbol: x"}}),
            "import_failed")
    assert "undefined symbol" in f.fix


def test_missing_facts_are_asked_for_not_guessed(doctor):
    d = doctor(drop=("nvcc", "ninja", "driver", "libaio", "gcc"))
    assert d.ok and d.findings == ()
    facts = [n.fact for n in d.needs]
    assert facts == ["nvcc", "driver", "libaio", "ninja"] or set(facts) >= {
        "nvcc", "driver", "libaio", "ninja"}
    nvcc = next(n for n in d.needs if n.fact == "nvcc")
    assert "nvcc --version" in nvcc.how


def test_an_unknown_framework_version_is_judged_over_every_release(doctor):
    # DeepSpeed 0.18.2 needs torch>=2.1; 0.14.0 and 0.16.4 state nothing: not all agree,
    # so the doctor asks for the version instead of reporting a finding
    d = doctor({"frameworks": {"deepspeed": None}, "torch": "1.13.1+cu117", "torch_cuda": "11.7",
                "nvcc": "11.7.99", "path_nvcc": "11.7.99", "gcc": "9.4.0", "glibc": "2.35",
                "python": "3.10.12", "driver": "535.104.05", "torch_arch_list": None})
    assert "torch_unsupported_by_framework" not in kinds(d)
    assert [n.fact for n in d.needs] == ["deepspeed version"]
    # megatron-core has one release in the fixture: what holds for it holds for "any"
    d = doctor({"frameworks": {"megatron-core": None}, "python": "3.9.18"})
    assert one(d, "python_unsupported")


def test_the_make_command_offered_resolves(doctor, facts):
    from envgen.resolve import iter_resolve
    from envgen.resolve.request import Request

    f = one(doctor({"driver": "470.82.01"}), "driver_too_old")
    argv = shlex.split(f.command)
    assert argv[:2] == ["envgen", "make"]
    values = dict(zip(argv[2::2], argv[3::2], strict=True))
    request = Request(**{k[2:].replace("-", "_"): v for k, v in values.items()})
    assert next(iter(iter_resolve(request, facts, limit=1)))


def test_on_rhel_the_gcc_toolset_is_installed_and_enabled(doctor):
    f = one(doctor({"os": "Rocky Linux 9.3 (Blue Onyx)", "gcc": "13.1.0", "gcc_available": []}),
            "host_compiler_too_new")
    assert f.command == "dnf install -y gcc-toolset-12 && scl enable gcc-toolset-12 bash"


def test_the_shipped_catalog_has_every_kind_the_rules_emit_each_with_a_citation():
    import re
    from pathlib import Path

    import envgen.doctor as pkg

    root = Path(pkg.__file__).parent
    emitted = set()
    for module in root.glob("rules_*.py"):
        emitted |= set(re.findall(r'ctx\.finding\(\s*"([a-z_]+)"', module.read_text()))
    catalog = load_catalog(Path(__file__).parents[2] / "matrix")
    assert emitted and emitted <= set(catalog.kinds)
    required = {"cuda_major_mismatch", "cuda_minor_mismatch", "host_compiler_too_new",
                "host_compiler_too_old", "cxx_standard_mismatch", "libaio_missing",
                "ninja_missing", "unsupported_platform", "gpu_arch_unsupported",
                "driver_too_old", "torch_unsupported_by_framework", "python_unsupported",
                "glibc_too_old", "nccl_mismatch", "abi_mismatch", "dependency_conflict",
                "cuda_home_mismatch", "stale_extension_cache"}
    assert required <= emitted
    for kind in catalog.kinds.values():
        assert kind.source.startswith("https://") and kind.pattern in catalog.patterns


def test_the_gcc_offered_is_one_the_os_release_packages(doctor):
    # Debian 12 (fixture os.toml) packages gcc 12; an OS the matrix does not know gets the
    # highest major nvcc accepts
    bookworm = one(doctor({"os": "Debian GNU/Linux 12 (bookworm)", "gcc": "13.1.0",
                           "gcc_available": []}), "host_compiler_too_new")
    assert bookworm.command.startswith("apt-get install -y gcc-12 g++-12")
    sid = one(doctor({"os": "Debian GNU/Linux forky/sid", "gcc": "13.1.0",
                      "gcc_available": []}), "host_compiler_too_new")
    assert sid.command.startswith("apt-get install -y gcc-12 g++-12")  # nvcc 12.1: ≤ 12


def test_a_lock_file_hangs_torch_before_2_14(doctor):
    """torch < 2.14 waits forever while <build>/lock exists; torch 2.14 leaves the file
    (reproduced in tests/doctor/test_broken_envs_cuda.py)."""
    ext = {"path": "/ext/cpu_adam", "ops": ["cpu_adam"], "loads": True, "lock": True}
    env = {"TORCH_EXTENSIONS_DIR": "/ext"}
    old = doctor({"torch": "2.13.0+cpu", "torch_cuda": None, "torch_extensions": [ext],
                  "env": env, "frameworks": {}})
    f = one(old, "stale_extension_cache")
    assert f.command == "rm -rf /ext/cpu_adam" and "hangs" in f.summary
    assert "v2.13.0/torch/utils/file_baton.py" in f.source
    new = doctor({"torch": "2.14.1+cu130", "torch_cuda": "13.0", "torch_extensions": [ext],
                  "env": env, "frameworks": {}})
    assert "stale_extension_cache" not in kinds(new)
