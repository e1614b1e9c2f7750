"""Unit tests of what a lock asks the solvers for, and of the file writers. No network."""

from __future__ import annotations

import pytest
import yaml

from envgen.errors import DataError, UsageError
from envgen.facts import load_facts
from envgen.lock.conda_solve import CondaPackage
from envgen.lock.files import Solved, render
from envgen.lock.flavors import make_plan
from envgen.lock.pip_compile import Dist, PipPackage, parse_pylock, target_tags
from envgen.lock.plan import LockOptions, channel_url, python_platform
from envgen.lock.yaml import dump
from envgen.resolve import Request, resolve

PYPI = {"pypi": "https://pypi.org/simple/"}  # what matrix/sources.toml names
PYTORCH = {**PYPI, "pytorch-cu118": "https://download.pytorch.org/whl/cu118"}


@pytest.fixture
def lfacts(lock_matrix):
    return load_facts(lock_matrix)


def combo(facts, **kw):
    return resolve(Request(**kw), facts, limit=1)[0]


def test_conda_plan_pins_cuda_and_targets_the_combination(lfacts):
    c = combo(lfacts, framework="deepspeed", cuda="12.8", python="3.11", os="ubuntu-22.04")
    plan = make_plan(lfacts, c, LockOptions(), PYPI)
    assert plan.conda.channels == ("https://conda.anaconda.org/conda-forge",)
    assert "cuda-version 12.8.*" in plan.conda.specs and "cuda-nvcc" in plan.conda.specs
    assert {"python 3.11.*", "pip", "ninja", "libaio", "gxx 14.*"} <= set(plan.conda.specs)
    assert plan.gcc == 14  # newest conda gcc ≤ nvcc 12.8's maximum (14)
    virtual = {n: (v, b) for n, v, b in plan.conda.virtual}
    assert virtual["__cuda"] == ("12.8", "0") and virtual["__glibc"] == ("2.35", "0")
    assert virtual["__archspec"] == ("1", "x86_64")
    assert plan.pip.requirements == ("torch==2.9.0", "deepspeed==0.18.2")
    assert plan.pip.python_platform == "x86_64-manylinux_2_35"
    assert plan.pip.index_url == "https://pypi.org/simple" and plan.pip.extra_index_urls == ()


def test_system_nvcc_locks_no_compiler(lfacts):
    """--nvcc 12.4 (a cluster's module): the plan installs no CUDA compiler and no CUDA_HOME;
    torch's CUDA is one the release's allow-list accepts with nvcc 12.4."""
    c = combo(lfacts, framework="deepspeed", nvcc="12.4", python="3.11", os="ubuntu-22.04")
    assert c.nvcc == "12.4" and c.nvcc_from == "system"
    plan = make_plan(lfacts, c, LockOptions(), PYPI)
    assert not any(s.startswith(("cuda-nvcc", "cuda-version")) for s in plan.conda.specs)
    assert "CUDA_HOME" not in plan.env
    assert {"pip", "ninja", "libaio"} <= set(plan.conda.specs)
    venv = make_plan(lfacts, c, LockOptions(flavor="venv"), PYPI)  # CUDA 12 venv: fine now
    assert not any("cuda-toolkit" in r for r in venv.pip.requirements)


def test_cuda_11_uses_nvidias_labelled_channel_first(lfacts):
    c = combo(lfacts, cuda="11.8")
    plan = make_plan(lfacts, c, LockOptions(), PYTORCH)
    assert plan.conda.channels[0] == "https://conda.anaconda.org/nvidia/label/cuda-11.8.0"
    assert "cuda-nvcc 11.8.*" in plan.conda.specs
    assert plan.pip.extra_index_urls == ("https://download.pytorch.org/whl/cu118",)
    assert c.torch_pin.endswith("+cu118")


def test_source_options_replace_defaults(lfacts):
    c = combo(lfacts, cuda="11.8")
    opts = LockOptions(channels=("mirror-forge", "/srv/channel"), channel_alias="https://m.x/c",
                       index_url="https://pypi.m.x/simple/", torch_index_url="https://t.m.x/cu118",
                       extra_index_urls=("https://extra.x/simple",))
    plan = make_plan(lfacts, c, opts, PYTORCH)
    assert plan.conda.channels == ("https://m.x/c/mirror-forge", "file:///srv/channel")
    assert plan.pip.index_url == "https://pypi.m.x/simple"
    assert plan.pip.extra_index_urls == ("https://t.m.x/cu118", "https://extra.x/simple")


def test_missing_torch_index_is_a_data_error(lfacts):
    with pytest.raises(DataError, match="--torch-index-url"):
        make_plan(lfacts, combo(lfacts, cuda="11.8"), LockOptions(), PYPI)
    with pytest.raises(DataError, match="--index-url"):
        make_plan(lfacts, combo(lfacts, cuda="12.8"), LockOptions(), {})


def test_venv_plan_takes_nvcc_from_pip_and_gcc_from_the_os(lfacts):
    c = combo(lfacts, framework="deepspeed", cuda="13.0", os="ubuntu-24.04")
    plan = make_plan(lfacts, c, LockOptions(flavor="venv"), PYPI)
    assert plan.conda is None
    assert plan.pip.requirements[2].startswith("cuda-toolkit[nvcc,") and \
        plan.pip.requirements[2].endswith("==13.0.*")
    assert plan.os_packages == ("gcc-13", "g++-13", "libaio-dev", f"python{c.python}-dev")
    assert plan.env == {"CUDA_HOME": "$SITE_PACKAGES/nvidia/cu13"}


def test_venv_on_cuda_12_is_refused_with_the_reason(lfacts):
    c = combo(lfacts, cuda="12.8")
    with pytest.raises(UsageError, match=r"venv flavor has no CUDA 12\.8 compiler"):
        make_plan(lfacts, c, LockOptions(flavor="venv"), PYPI)


def test_inputs_hash_changes_with_any_input(lfacts):
    c = combo(lfacts, cuda="12.8")
    a = make_plan(lfacts, c, LockOptions(), PYPI).inputs_hash()
    assert a == make_plan(lfacts, c, LockOptions(), PYPI).inputs_hash()
    assert a != make_plan(lfacts, c, LockOptions(channels=("x",)), PYPI).inputs_hash()
    assert a != make_plan(lfacts, c, LockOptions(exclude_newer="2026-01-01"), PYPI).inputs_hash()


def test_channel_url_forms(tmp_path):
    alias = "https://conda.anaconda.org"
    assert channel_url("conda-forge", alias) == "https://conda.anaconda.org/conda-forge"
    assert channel_url("https://x.y/z/", alias) == "https://x.y/z"
    assert channel_url(str(tmp_path), alias) == tmp_path.as_uri()


def test_python_platform_uses_os_glibc(lfacts):
    assert python_platform(combo(lfacts, cuda="12.8", os="ubuntu-24.04")) == \
        "x86_64-manylinux_2_39"


@pytest.mark.integration
def test_resolve_cli_flavor_filter(lock_matrix):
    from support.run import run_envgen

    proc = run_envgen("resolve", "--matrix-dir", str(lock_matrix), "--flavor", "venv", "--json")
    assert proc.returncode == 0
    assert {c["cuda"] for c in __import__("json").loads(proc.stdout)["combinations"]} == {"13.0"}
    bad = run_envgen("resolve", "--matrix-dir", str(lock_matrix), "--flavor", "vnev")
    assert bad.returncode == 2 and "did you mean 'venv'" in bad.stderr


# ---- the writers ---------------------------------------------------------------------------

def _solved(lfacts, flavor="conda"):
    c = combo(lfacts, cuda="13.0" if flavor == "venv" else "12.8", python="3.11")
    plan = make_plan(lfacts, c, LockOptions(flavor=flavor), PYPI)
    conda = (CondaPackage(name="cuda-nvcc", version="12.8.93", build="0", build_number=0,
                          subdir="linux-64", url="https://c.x/linux-64/cuda-nvcc-12.8.93-0.conda",
                          sha256="a" * 64, md5="b" * 32, depends=("cuda-version >=12.8,<12.9",
                                                                  "__glibc >=2.17"),
                          constrains=(), channel="https://c.x", size=10, noarch=None,
                          file_name="cuda-nvcc-12.8.93-0.conda"),) if flavor == "conda" else ()
    wheel = Dist("https://f.x/torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl", "c" * 64,
                 "torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    generic = Dist("https://f.x/torch-2.9.0-py3-none-any.whl", "d" * 64,
                   "torch-2.9.0-py3-none-any.whl")
    pip = (PipPackage("torch", "2.9.0", (generic, wheel), None),)
    return Solved(plan=plan, options=LockOptions(flavor=flavor), conda=conda, pip=pip,
                  tools={"envgen": "t", "py-rattler": "t", "uv": "t"})


def test_render_is_deterministic_and_headed(lfacts):
    files = render(_solved(lfacts))
    assert files == render(_solved(lfacts))
    assert list(files) == ["environment.yml", "virtual-packages.yml", "conda-lock.yml",
                           "requirements.lock.txt", "envgen.lock.json"]
    for name, text in files.items():
        assert "Generated by envgen" in "\n".join(text.splitlines()[:4]), name
        assert "Regenerate with:" in text


def test_conda_lock_uses_the_most_specific_wheel(lfacts):
    doc = yaml.safe_load(render(_solved(lfacts))["conda-lock.yml"])
    torch = next(p for p in doc["package"] if p["name"] == "torch")
    assert torch["url"].endswith("cp311-cp311-manylinux_2_28_x86_64.whl")
    nvcc = next(p for p in doc["package"] if p["name"] == "cuda-nvcc")
    assert nvcc["dependencies"] == {"cuda-version": ">=12.8,<12.9", "__glibc": ">=2.17"}
    assert doc["version"] == 1 and doc["metadata"]["platforms"] == ["linux-64"]


def test_requirements_lock_lists_all_hashes(lfacts):
    text = render(_solved(lfacts))["requirements.lock.txt"]
    assert f"torch==2.9.0 \\\n    --hash=sha256:{'c' * 64} \\\n    --hash=sha256:{'d' * 64}\n" \
        in text


def test_venv_render_has_no_conda_files(lfacts):
    assert list(render(_solved(lfacts, "venv"))) == ["requirements.lock.txt",
                                                     "envgen.lock.json"]


def test_yaml_round_trips_tricky_strings():
    doc = {"a": ["2.5", "3.12.7", "yes", ">=3.8", "- x", "#c", "a: b", "", "~", "*", "1e5",
                 "https://x/y z", "--index-url https://x", "0x1F", True, None, 7],
           "n": [{"k": {}, "l": []}, {"m": [[1, 2]]}]}
    assert yaml.safe_load(dump(doc)) == doc


def test_parse_pylock_and_target_tags():
    text = """lock-version = "1.0"
created-by = "uv"
[[packages]]
name = "b"
version = "1.0"
wheels = [{ url = "https://x/b-1.0-py3-none-any.whl", hashes = { sha256 = "11" } }]
[[packages]]
name = "a"
version = "2.0"
sdist = { url = "https://x/a-2.0.tar.gz", hashes = { sha256 = "22" } }
"""
    a, b = parse_pylock(text)
    assert (a.name, a.hashes, a.primary("3.12", "x86_64-manylinux_2_35").url) == \
        ("a", ("22",), "https://x/a-2.0.tar.gz")
    assert b.primary("3.12", "x86_64-manylinux_2_35").filename == "b-1.0-py3-none-any.whl"
    from packaging.tags import Tag

    tags = target_tags("3.12", "x86_64-manylinux_2_28")
    # pip's order: the newest manylinux first, pure-Python wheels last
    assert tags[Tag("cp312", "cp312", "manylinux_2_28_x86_64")] < \
        tags[Tag("cp312", "cp312", "manylinux_2_17_x86_64")] < \
        tags[Tag("py3", "none", "any")]
    assert Tag("cp312", "cp312", "manylinux_2_28_x86_64") in tags
    assert Tag("cp312", "cp312", "manylinux2014_x86_64") in tags
    assert Tag("cp312", "cp312", "manylinux_2_34_x86_64") not in tags


def test_parse_pylock_rejects_files_without_hashes():
    from envgen.errors import EnvgenError

    with pytest.raises(EnvgenError, match="no sha256"):
        parse_pylock('[[packages]]\nname = "a"\nversion = "1"\n'
                     'wheels = [{ url = "https://x/a-1-py3-none-any.whl" }]\n')


# ---- CLI usage errors (in-process; nothing is solved) ---------------------------------------

@pytest.mark.parametrize("argv, code, message", [
    (["make", "--ca-cert", "/nonexistent.pem"], 2, "No such file"),
    (["make", "--flavor", "pip"], 2, "unknown flavor 'pip'"),
    (["install", "/nonexistent-lock", "--prefix", "/tmp/x"], 2, "/nonexistent-lock does not exist"),
    (["make", "--nvcc", "12.4", "--image"], 2, "--nvcc (a toolkit already on the machine) cannot"),
    (["make", "--nvcc", "twelve"], 2, "--nvcc 'twelve' is not a CUDA toolkit version"),
    (["make", "--gpu", "V1000"], 2, "unknown GPU 'V1000'"),
])
def test_cli_usage_errors(argv, code, message, capsys, lock_matrix):
    from envgen.cli.main import main

    assert main([*argv, "--matrix-dir", str(lock_matrix)]) == code
    err = capsys.readouterr().err
    assert message in err and "hint:" in err


def test_ca_cert_must_be_pem(tmp_path, capsys, lock_matrix):
    from envgen.cli.main import main

    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    assert main(["make", "--ca-cert", str(bad), "--matrix-dir", str(lock_matrix)]) == 2
    assert "holds no PEM certificate" in capsys.readouterr().err
