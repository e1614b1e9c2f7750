"""Which cells `envgen evidence` runs: T1 (lock) cells per framework × torch CUDA minor across
the given flavors, T2 (build) cells per framework × --build target, the --build syntax, and
`envgen evidence --plan` (text / --json) with its usage errors.

Pure: the fixture matrix extended with the os-package data (tests/support/os_package_env.py);
`--plan` runs nothing, so nothing here locks or builds.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from packaging.version import Version
from support.run import in_process

from envgen.errors import InfeasibleError, UsageError
from envgen.evidence.cells import BuildTarget, build_cells, lock_cells
from envgen.facts import load_facts
from envgen.resolve import Request, resolve

FRAMEWORKS = ("deepspeed", "megatron-core", "colossalai")


def cudas(cells, framework: str) -> list[str]:
    return [c.combination.cuda for c in cells if c.combination.framework == framework]


# ------------------------------------------------------------------ --build FLAVOR:OS=BASE


@pytest.mark.parametrize(("text", "want"), [
    ("os-package:debian-13=local/debian:trixie", ("os-package", "debian-13",
                                                  "local/debian:trixie")),
    ("venv:debian-12=docker.io/library/debian:12@sha256:" + "a" * 64,
     ("venv", "debian-12", "docker.io/library/debian:12@sha256:" + "a" * 64)),
    ("conda:ubuntu-22.04=127.0.0.1:5000/ubuntu:22.04", ("conda", "ubuntu-22.04",
                                                        "127.0.0.1:5000/ubuntu:22.04")),
    (" venv : debian-12 = img ", ("venv", "debian-12", "img")),
])
def test_build_target_parses(text, want):
    t = BuildTarget.parse(text)
    assert (t.flavor, t.os, t.base) == want


@pytest.mark.parametrize("text", ["venv:debian-12", "venv=img", ":debian-12=img",
                                  "venv:=img", "venv:debian-12=", "", "=", "venv-debian-12=img"])
def test_build_target_refuses_other_shapes(text):
    with pytest.raises(UsageError, match="is not FLAVOR:OS=BASE_IMAGE") as exc:
        BuildTarget.parse(text)
    assert exc.value.source == "--build" and "--build os-package:debian-13=" in exc.value.hint


# ------------------------------------------------------------------ T1 cells


def test_one_lock_cell_per_framework_and_cuda(ofacts):
    cells = lock_cells(ofacts, FRAMEWORKS, ("conda",))
    assert {c.tier for c in cells} == {"T1"} and {c.flavor for c in cells} == {"conda"}
    keys = Counter((c.combination.framework, c.combination.cuda) for c in cells)
    assert max(keys.values()) == 1
    assert cudas(cells, "deepspeed") == ["12.8", "12.6", "12.4", "12.1", "11.8", "11.7"]
    assert cudas(cells, "megatron-core") == ["12.8", "12.6", "12.4", "12.1"]  # CUDA ≥ 12
    assert cudas(cells, "colossalai") == ["12.4", "12.1", "11.8"]  # torch ≤ 2.5.1
    # each cell is the resolver's best for its framework × CUDA in that flavor
    for c in cells:
        best = resolve(Request(framework=c.combination.framework, cuda=c.combination.cuda,
                               flavor="conda"), ofacts, limit=1)[0]
        assert c.id == best.id
        assert c.why == (f"newest {c.combination.framework} × CUDA {c.combination.cuda} the "
                         "conda flavor can lock")


def test_lock_cells_keep_the_framework_order_given(ofacts):
    cells = lock_cells(ofacts, ("colossalai", "deepspeed"), ("conda",))
    names = [c.combination.framework for c in cells]
    assert names == sorted(names, key=("colossalai", "deepspeed").index)


def test_the_first_flavor_wins_a_cuda(ofacts):
    cells = lock_cells(ofacts, ("megatron-core",), ("os-package", "conda"))
    by_cuda = {c.combination.cuda: c.flavor for c in cells}
    # megatron-core's build files are unread: only an equal nvcc, i.e. debian-13's 12.4
    assert by_cuda == {"12.4": "os-package", "12.8": "conda", "12.6": "conda", "12.1": "conda"}
    assert len(cells) == 4
    reverse = lock_cells(ofacts, ("megatron-core",), ("conda", "os-package"))
    assert {c.flavor for c in reverse} == {"conda"} and len(reverse) == 4


def test_a_flavor_that_provides_nothing_adds_no_cell(ofacts):
    # the fixture's venv flavor covers CUDA ≥ 13 only, and no torch is built for it
    assert lock_cells(ofacts, FRAMEWORKS, ("venv",)) == []
    assert lock_cells(ofacts, ("deepspeed",), ("venv", "conda")) == lock_cells(
        ofacts, ("deepspeed",), ("conda",))


def test_torch_index_filter(ofacts):
    cells = lock_cells(ofacts, ("deepspeed",), ("conda",), ("pypi",))
    assert {c.combination.torch_index for c in cells} == {"pypi"}
    by_cuda = {c.combination.cuda: c.combination.torch for c in cells}
    # 2.5.1+cu121 / +cu118 live only on PyTorch's indexes: PyPI's 2.1.2 is the CUDA 12.1 cell
    assert by_cuda == {"12.8": "2.9.0", "12.6": "2.7.1", "12.4": "2.5.1", "12.1": "2.1.2",
                       "11.7": "1.13.1"}
    only = lock_cells(ofacts, ("deepspeed",), ("conda",), ("pytorch-cu121",))
    assert [c.combination.torch_pin for c in only] == ["torch==2.5.1+cu121"]
    assert lock_cells(ofacts, ("deepspeed",), ("conda",), ("no-such-index",)) == []


def test_os_package_cell_takes_the_os_whose_nvcc_is_nearest(ofacts):
    cells = lock_cells(ofacts, ("deepspeed",), ("os-package",))
    chosen = {c.combination.cuda: (c.combination.os, c.combination.nvcc) for c in cells}
    assert chosen == {
        "12.8": ("debian-13", "12.4"),  # 12.4 is nearer 12.8 than ubuntu-24.04's 12.0
        "12.6": ("debian-13", "12.4"),
        "12.4": ("debian-13", "12.4"),
        "12.1": ("ubuntu-24.04", "12.0"),  # 12.0 is nearer 12.1 than 12.4
        "11.8": ("debian-12", "11.8"),
        "11.7": ("debian-12", "11.8"),
    }
    assert {c.combination.nvcc_from for c in cells} == {"os-package"}
    why = {c.combination.cuda: c.why for c in cells}
    assert why["12.1"] == ("newest deepspeed × CUDA 12.1 the os-package flavor on ubuntu-24.04 "
                           "can lock")


def test_os_package_nearest_nvcc_never_beats_a_newer_release(ofacts):
    """The nvcc distance only breaks ties: the newest framework release and torch first."""
    def key(c):
        return Version(c.framework_version), Version(c.torch)

    cells = lock_cells(ofacts, ("deepspeed",), ("os-package",))
    for c in cells:
        for os_id in ofacts.os_toolkits:
            try:
                other = resolve(Request(framework="deepspeed", cuda=c.combination.cuda,
                                        flavor="os-package", os=os_id), ofacts, limit=1)[0]
            except InfeasibleError:  # that OS's toolkit cannot serve this CUDA
                continue
            assert key(other) <= key(c.combination), (c.id, other.id)


def test_a_toolkit_of_an_os_not_in_os_toml(os_matrix, tmp_path):
    """os_toolkits.json is harvested from sources.toml's OS list, os.toml is curated: an OS
    in the first only is either refused when the matrix loads, or left out of the cells."""
    import shutil

    from support.os_package_env import TOOLKITS, toolkits_doc

    from envgen.errors import DataError

    matrix = tmp_path / "matrix"
    shutil.copytree(os_matrix, matrix)
    extra = {**TOOLKITS[0], "os": "debian-11", "cuda": "11.2", "version": "11.2.2-3+deb11u3",
             "suite": "bullseye"}
    (matrix / "harvested" / "os_toolkits.json").write_text(
        json.dumps(toolkits_doc([*TOOLKITS, extra])))
    try:
        facts = load_facts(matrix)
    except DataError as exc:
        assert "debian-11" in str(exc)
        return
    cells = lock_cells(facts, ("deepspeed",), ("os-package",))
    assert cells and "debian-11" not in {c.combination.os for c in cells}


def test_unknown_flavor_is_a_usage_error(ofacts):
    with pytest.raises(UsageError, match="unknown flavor 'pip'") as exc:
        lock_cells(ofacts, ("deepspeed",), ("pip",))
    assert exc.value.source == "--flavor"


# ------------------------------------------------------------------ T2 cells

D13 = BuildTarget("os-package", "debian-13", "local/debian:trixie")


def test_build_cell_uses_the_bases_python(ofacts):
    cells = build_cells(ofacts, ("deepspeed",), (D13,), {"debian-13": ("3.13",)})
    assert [(c.tier, c.flavor, c.base, c.id) for c in cells] == [
        ("T2", "os-package", "local/debian:trixie",
         "deepspeed-0.18.2-torch2.9.0-cu128-py3.13-debian13-x86_64")]
    assert cells[0].why == "newest deepspeed the os-package flavor on debian-13 can build"


def test_build_cell_tries_the_bases_pythons_in_order(ofacts):
    cells = build_cells(ofacts, ("deepspeed",), (D13,), {"debian-13": ("3.11", "3.13")})
    assert cells[0].combination.python == "3.11"
    # a Python no torch build has is skipped for the next
    cells = build_cells(ofacts, ("deepspeed",), (D13,), {"debian-13": ("3.7", "3.13")})
    assert cells[0].combination.python == "3.13"
    assert build_cells(ofacts, ("deepspeed",), (D13,), {"debian-13": ("3.7",)}) == []


def test_build_cell_without_known_pythons_takes_the_policys(ofacts):
    cells = build_cells(ofacts, ("deepspeed",), (D13,), {})
    assert cells[0].combination.python == "3.12"  # policy.toml python_preference


def test_build_cells_per_framework_and_target(ofacts):
    targets = (D13, BuildTarget("os-package", "debian-12", "local/debian:bookworm"))
    pythons = {"debian-13": ("3.13",), "debian-12": ("3.11",)}
    cells = build_cells(ofacts, FRAMEWORKS, targets, pythons)
    got = [(c.combination.framework, c.combination.os, c.base) for c in cells]
    # megatron-core needs CUDA ≥ 12: debian-12's toolkit is 11.8, so no cell there
    assert got == [("deepspeed", "debian-13", "local/debian:trixie"),
                   ("deepspeed", "debian-12", "local/debian:bookworm"),
                   ("megatron-core", "debian-13", "local/debian:trixie"),
                   ("colossalai", "debian-13", "local/debian:trixie"),
                   ("colossalai", "debian-12", "local/debian:bookworm")]
    assert {c.combination.nvcc for c in cells if c.combination.os == "debian-12"} == {"11.8"}


def test_build_cells_torch_index_filter(ofacts):
    target = BuildTarget("conda", "ubuntu-22.04", "local/ubuntu:22.04")
    cells = build_cells(ofacts, ("deepspeed",), (target,), {"ubuntu-22.04": ("3.10",)},
                        ("pytorch-cu118",))
    assert [c.combination.torch_pin for c in cells] == ["torch==2.5.1+cu118"]


# ------------------------------------------------------------------ envgen evidence --plan


@pytest.fixture
def run(os_matrix, capsys, monkeypatch, tmp_path):
    return in_process(os_matrix, capsys, monkeypatch, tmp_path)


def test_plan_prints_the_cells(run):
    code, out, err = run("evidence", "--plan", "--framework", "deepspeed", "--flavor",
                         "os-package", "--build", "os-package:debian-13=local/debian:trixie")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("T1  os-package deepspeed-0.18.2-torch2.9.0-cu128-py3.12-debian13-"
                        "x86_64")
    assert lines[1].strip() == ("newest deepspeed × CUDA 12.8 the os-package flavor on "
                                "debian-13 can lock")
    assert ("T2  os-package deepspeed-0.18.2-torch2.9.0-cu128-py3.13-debian13-x86_64  FROM "
            "local/debian:trixie") in lines
    assert lines[-1] == "7 cells"  # six CUDA minors, one build target


def test_plan_json(run, ofacts):
    code, out, err = run("evidence", "--plan", "--json", "--tier", "T1", "--flavor", "conda",
                         "--framework", "colossalai")
    assert code == 0, err
    cells = json.loads(out)["cells"]
    assert [c["combination"] for c in cells] == [
        c.id for c in lock_cells(ofacts, ("colossalai",), ("conda",))]
    assert cells[0] == {"tier": "T1", "combination":
                        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64",
                        "flavor": "conda", "base": None,
                        "why": "newest colossalai × CUDA 12.4 the conda flavor can lock"}


def test_plan_default_is_every_framework_and_flavor(run, ofacts):
    code, out, _ = run("evidence", "--plan", "--json")
    assert code == 0
    cells = json.loads(out)["cells"]
    assert {c["tier"] for c in cells} == {"T1"}  # no --build: no T2 cell
    assert {c["combination"].split("-0.")[0] for c in cells} == set(FRAMEWORKS)
    # conda (first in the default order) takes every CUDA it can lock
    assert {c["flavor"] for c in cells} == {"conda"}


def test_plan_torch_index(run):
    code, out, _ = run("evidence", "--plan", "--json", "--tier", "T1", "--flavor", "conda",
                       "--framework", "deepspeed", "--torch-index", "pytorch-cu118")
    assert code == 0
    assert [c["combination"] for c in json.loads(out)["cells"]] == [
        "deepspeed-0.18.2-torch2.5.1-cu118-py3.12-ubuntu22.04-x86_64"]


def test_plan_combination_picks_its_cell(run):
    want = "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu24.04-x86_64"
    code, out, _ = run("evidence", "--plan", "--json", "--tier", "T1", "--flavor",
                       "os-package", "--combination", want)
    assert code == 0
    cells = json.loads(out)["cells"]
    assert [(c["combination"], c["flavor"]) for c in cells] == [(want, "os-package")]
    assert "the os-package flavor on ubuntu-24.04" in cells[0]["why"]


def test_plan_combination_that_is_not_the_newest(run):
    """An older torch than the cell's newest: resolved as given, in the --flavor's flavor."""
    want = "deepspeed-0.18.2-torch2.5.1-cu124-py3.11-debian13-x86_64"
    code, out, err = run("evidence", "--plan", "--json", "--tier", "T1", "--flavor",
                         "os-package", "--combination", want)
    assert code == 0, err
    cells = json.loads(out)["cells"]
    assert cells == [{"tier": "T1", "combination": want, "flavor": "os-package", "base": None,
                      "why": f"{want} as asked (--combination)"}]


def test_plan_t2_combination_uses_the_build_target_for_its_os(run):
    want = "deepspeed-0.18.2-torch2.7.1-cu126-py3.13-debian13-x86_64"
    code, out, err = run("evidence", "--plan", "--json", "--tier", "T2", "--combination",
                         want, "--build", "os-package:debian-13=local/debian:trixie")
    assert code == 0, err
    cells = json.loads(out)["cells"]
    assert [(c["tier"], c["combination"], c["flavor"], c["base"]) for c in cells] == [
        ("T2", want, "os-package", "local/debian:trixie")]


def usage_error(run, *argv) -> dict:
    code, out, err = run("evidence", "--plan", "--json", *argv)
    assert code == 2, (out, err)
    return json.loads(out)["error"]


def test_t2_needs_a_build_target(run):
    e = usage_error(run, "--tier", "T2")
    assert e["kind"] == "usage" and e["message"] == "--tier T2 needs a --build target"
    code, out, err = run("evidence", "--plan", "--tier", "T2")
    assert code == 2 and out == "" and "--tier T2 needs a --build target" in err


def test_bad_combination(run):
    e = usage_error(run, "--combination", "not-an-id")
    assert e["source"] == "--combination" and "is not a combination id" in e["message"]
    e = usage_error(run, "--tier", "T1", "--flavor", "conda", "--combination",
                    "deepspeed-9.9.9-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64")
    assert e["message"] == ("no T1 cell is deepspeed-9.9.9-torch2.9.0-cu128-py3.12-ubuntu22.04-"
                            "x86_64")
    assert "envgen evidence --plan" in e["fix"]


def test_t2_combination_without_a_target_for_its_os(run):
    e = usage_error(run, "--tier", "T2", "--build", "os-package:debian-13=local/debian:trixie",
                    "--combination", "deepspeed-0.18.2-torch2.9.0-cu128-py3.11-debian12-x86_64")
    assert e["source"] == "--combination" and e["message"].startswith("no T2 cell is")


def test_unknown_framework(run):
    e = usage_error(run, "--framework", "deepspeed", "--framework", "nemo")
    assert e["message"] == "unknown framework 'nemo'" and e["source"] == "--framework"
    assert "deepspeed, megatron-core, colossalai" in e["fix"]


@pytest.mark.parametrize(("build", "message"), [
    ("venv:debian-12", "is not FLAVOR:OS=BASE_IMAGE"),
    ("venv:debian-99=local/debian:bookworm", "unknown OS 'debian-99'"),
    ("venv:debian-12=not a ref", "base image"),
    ("pip:debian-12=local/debian:bookworm", "unknown flavor 'pip'"),
    ("os-package:ubuntu-22.04=local/ubuntu:22.04", "ships no CUDA toolkit package"),
])
def test_bad_build_target(run, build, message):
    e = usage_error(run, "--tier", "T2", "--build", build)
    assert message in e["message"], e


def test_unknown_flavor(run):
    e = usage_error(run, "--tier", "T1", "--flavor", "pip")
    assert e["message"] == "unknown flavor 'pip'" and e["source"] == "--flavor"


def test_tier_choices(run):
    code, _, err = run("evidence", "--plan", "--tier", "T3")
    assert code == 2 and "invalid choice: 'T3'" in err
