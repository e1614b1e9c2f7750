"""The NCCL / cuDNN / triton pins of torch builds published only on PyTorch's own indexes
(matrix/curated/torch.toml [[index_builds]], the rows with an ``unknown`` table or a
``platforms`` list) agree with the sources they cite: excerpts of the real files are stored
under tests/fixtures/index_pins/ (origin in each file's header): RELEASE.md's Release
Compatibility Matrix (and the PRs that wrote its rows), pytorch/builder's manywheel script on
release branches, copies of the build matrix from a release's development. Every such build
states each pin or says why it is left out, in the facts, in `matrix show` text and JSON."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import tomllib
from support.run import in_process

from envgen.facts import load_facts
from envgen.facts.derive import NO_ROW, ROW_SILENT

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "index_pins"
CURATED = tomllib.loads((ROOT / "matrix" / "curated" / "torch.toml").read_text())
_ITEM = re.compile(r"CUDA (\d+\.\d+)(?: \(CUDNN ([\d.]+)\))?(?: \(NCCL ([\d.]+)\))?|CUDNN ([\d.]+)")


def release_matrix(text: str) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """(minor release, CUDA) -> (cuDNN, NCCL) of each row of RELEASE.md's Release Compatibility
    Matrix: "CUDA 12.6 (CUDNN x) (NCCL y)"; "CUDA 11.8, CUDNN x" (older rows: a bare CUDNN after
    bare CUDA versions is theirs); a bare CUDA with no CUDNN after it in its cell has none."""
    out: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not re.fullmatch(r"\d+\.\d+", cells[0]):
            continue
        for cell in cells[1:]:
            bare: list[str] = []
            for cuda, cudnn, nccl, shared in _ITEM.findall(cell):
                if shared:
                    out.update({((cells[0], c)): (shared, None) for c in bare})
                    bare = []
                elif cudnn:
                    out[(cells[0], cuda)] = (cudnn, nccl or None)
                else:
                    bare.append(cuda)
            out.update({(cells[0], c): (None, None) for c in bare})
    return out


def requirements(script: str) -> dict[str, dict[str, str]]:
    """CUDA version -> {wheel name: version} of PYTORCH_EXTRA_INSTALL_REQUIREMENTS in a build
    matrix excerpt (the pins of each ``"12.6": (...)`` block)."""
    out: dict[str, dict[str, str]] = {}
    key = None
    for line in script.splitlines():
        m = re.match(r'\s*"(\d+\.\d+)": \($', line)
        if m:
            key = out.setdefault(m[1], {})
            continue
        pin = re.match(r'\s*"([a-z0-9-]+)==([\d.]+);', line)
        if key is not None and pin:
            key[pin[1]] = pin[2]
    return out


def linux_arches(script: str) -> list[str]:
    """The CUDA versions the build matrix gives PYTORCH_EXTRA_INSTALL_REQUIREMENTS on Linux."""
    m = re.search(r'arch_version in (\[[^\]]*\])\s*\n\s*and os == "linux"', script)
    return json.loads(m[1])


@pytest.fixture(scope="module")
def real():
    return load_facts(ROOT / "matrix")


@pytest.fixture
def run(capsys, monkeypatch, tmp_path):
    return in_process(ROOT / "matrix", capsys, monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def table():
    return release_matrix((FIXTURES / "release-md-compatibility-matrix.md").read_text())


def _index_only(real):
    return [b for b in real.torch_builds if b.curated and b.cuda]


def _pypi(real, version: str, platform: str = "linux-x86_64"):
    return next(b for b in real.torch_builds if b.version == version and b.index == "pypi"
                and b.platform == platform and b.cuda and b.cudnn)


def test_the_parser_reads_each_row_format(table):
    assert table[("2.14", "13.2")] == ("9.24.0.43", "2.30.7")
    assert table[("2.9", "13.0")] == ("9.13.0.50", None)
    assert table[("2.5", "11.8")] == table[("2.5", "12.1")] == ("9.1.0.70", None)
    assert table[("2.6", "11.8")] == (None, None)  # "CUDA 11.8, CUDA 12.4 (CUDNN 9.1.0.70)"
    assert table[("2.6", "12.4")] == ("9.1.0.70", None)
    assert table[("1.13", "11.6")] == ("8.3.2.44", None)


def test_the_stored_copy_has_the_rows_the_prs_wrote(table):
    """The copy of RELEASE.md is not pytorch/pytorch's own: its rows equal what the PRs that
    wrote them quote (#114758: 2.2, #187075: 2.13, #194367: 2.14's values, #190386: NCCL)."""
    text = (FIXTURES / "release-md-rows-in-prs.md").read_text()
    quoted = release_matrix(text)
    for key in (("2.2", "11.8"), ("2.2", "12.1"), ("2.13", "12.6"), ("2.13", "13.2")):
        assert quoted[key] == table[key]
    for cuda, cudnn, nccl in re.findall(r"\| CUDA (\S+) \| CUDNN (\S+), NCCL (\S+) \|", text):
        assert table[("2.14", cuda)] == (cudnn, nccl)
    for minor, spec in re.findall(r"^\| (2\.1\d) \| (.*?) \|$", text, re.MULTILINE):
        for cudas, nccl in re.findall(r"([\d. /]+) → ([\d.]+)", spec):
            for cuda in cudas.split("/"):
                assert table[(minor, cuda.strip())][1] == nccl


def test_release_matrix_agrees_with_the_harvested_pypi_wheels(real, table):
    """What makes RELEASE.md's rows trusted for the other variants: for each release, its entry
    for the CUDA of PyPI's build equals that wheel's pins, but for 2.11 (PR #175672 moved 2.11 to
    cuDNN 9.19 after the row was written), whose cuDNN rows are not used."""
    checked, differ = 0, []
    for b in real.torch_builds:
        if b.index != "pypi" or not b.cuda or not b.cudnn or b.platform != "linux-x86_64":
            continue
        row = table.get((b.version.rsplit(".", 1)[0], b.cuda))
        if row is None:
            continue
        checked += 1
        if row[0] != b.cudnn or (row[1] and row[1] != b.nccl):
            differ.append((b.version, b.cuda, row, b.cudnn, b.nccl))
    assert checked > 20
    assert {d[0] for d in differ} == {"2.11.0"}, differ
    assert all(r[:2] == ("2.11.0", "13.0") and r[3] == "9.19.0.56" for r in differ)


def test_index_build_rows_citing_release_md_state_its_values(table):
    rows = [r for r in CURATED["index_builds"]
            if not r["source"].startswith("https://files.pythonhosted.org/")]
    assert len(rows) == 61
    used = 0
    for r in rows:
        if "RELEASE.md" not in r["source"]:
            continue
        cudnn, nccl = table[(r["torch"].rsplit(".", 1)[0], r["cuda"])]
        why = r.get("unknown", {})
        if "cudnn" in r:
            assert r["cudnn"] == cudnn, r
            used += 1
        elif cudnn is not None:  # a value the row does not take says why
            assert "cudnn" in why and ("2.11" in why["cudnn"] or "aarch64" in why["cudnn"]), r
        if "nccl" in r and nccl is not None:
            assert r["nccl"] == nccl, r
        if nccl is None and "nccl" not in r:
            assert "nccl" in why or r["torch"] == "2.1.0", r  # 2.1.0: [[bundled_nccl]]
    assert used >= 40


def test_the_25_rows_read_the_build_matrix_copy(real):
    script = (FIXTURES / "atalman-6cf47db5-generate_binary_build_matrix.py.txt").read_text()
    pins = requirements(script)
    assert linux_arches(script) == ["12.4", "12.1", "11.8"]
    for cuda, prefix in (("11.8", "cu11"), ("12.1", "cu12"), ("12.4", "cu12")):
        assert pins[cuda][f"nvidia-nccl-{prefix}"] == "2.21.5"
        assert pins[cuda][f"nvidia-cudnn-{prefix}"] == "9.1.0.70"
    for version in ("2.5.0", "2.5.1"):  # the copy's PyPI variant equals the harvested wheel
        pypi = _pypi(real, version)
        assert (pypi.cuda, pypi.nccl, pypi.cudnn) == ("12.4", "2.21.5", "9.1.0.70")
        assert pins["12.4"]["nvidia-cuda-runtime-cu12"] == pypi.cuda_runtime
        for cuda in ("11.8", "12.1"):
            b = next(b for b in _index_only(real) if b.version == version and b.cuda == cuda)
            assert (b.nccl, b.cudnn, b.triton) == ("2.21.5", "9.1.0.70", pypi.triton)


def test_the_29_rows_read_the_build_matrix_copy(real):
    script = (FIXTURES / "tinglvv-060774e2-generate_binary_build_matrix.py.txt").read_text()
    pins = requirements(script)
    assert set(linux_arches(script)) == {"12.6", "12.8", "12.9", "13.0"}
    assert pins["12.6"]["nvidia-nccl-cu12"] == pins["12.8"]["nvidia-nccl-cu12"] == "2.27.5"
    assert pins["13.0"]["nvidia-cudnn-cu13"] == "9.12.0.46"  # older than 2.9's 9.13.0.50
    for version in ("2.9.0", "2.9.1"):
        pypi = _pypi(real, version)
        assert pypi.cuda == "12.8" and pypi.nccl == pins["12.8"]["nvidia-nccl-cu12"]
        assert pypi.cudnn == pins["12.8"]["nvidia-cudnn-cu12"]
        assert pypi.cuda_runtime == pins["12.8"]["nvidia-cuda-runtime-cu12"]
        cu126 = next(b for b in _index_only(real) if b.version == version and b.cuda == "12.6"
                     and b.platform == "linux-x86_64")
        assert (cu126.nccl, cu126.triton) == ("2.27.5", pypi.triton)
        cu130 = next(b for b in _index_only(real) if b.version == version and b.cuda == "13.0"
                     and b.platform == "linux-x86_64")
        assert cu130.nccl is None and "9.12.0.46" in dict(cu130.pins_unknown)["nccl"]


def test_the_27_rows_read_the_build_matrix_copy(real):
    script = (FIXTURES / "pytorch-00018c94-generate_binary_build_matrix.py.txt").read_text()
    assert linux_arches(script) == ["12.8", "12.6", "11.8"]
    assert "PYTORCH_EXTRA_INSTALL_REQUIREMENTS[arch_version]" in script
    for version in ("2.7.0", "2.7.1"):
        triton = _pypi(real, version).triton
        assert {b.triton for b in _index_only(real) if b.version == version} == {triton}


def test_builder_release_branches_decide_the_old_triton_rows(real):
    old = (FIXTURES / "builder-release-1.13-build_cuda.sh").read_text()
    assert "libcudnn.so.8" in old and "triton" not in old.split("\n", 6)[-1]
    two = (FIXTURES / "builder-release-2.0-build_cuda.sh").read_text()
    assert re.search(r'-z "\$PYTORCH_EXTRA_INSTALL_REQUIREMENTS".*\n.*="triton==2\.0\.0;', two)
    for b in _index_only(real):
        if b.version.startswith("1.13."):
            assert b.triton is None and dict(b.pins_unknown)["triton"].startswith("none:")
        if b.version.startswith("2.0."):
            assert b.triton == "2.0.0" and dict(b.pins_unknown)["nccl"].startswith("bundled:")


def test_every_index_only_build_states_each_pin_or_why(real):
    builds = _index_only(real)
    assert len(builds) == 61
    for b in builds:
        why = dict(b.pins_unknown)
        for key in ("nccl", "cudnn", "triton"):
            assert (getattr(b, key) is None) == (key in why), (b.pin, b.platform, key)
            assert why.get(key) not in (NO_ROW, ROW_SILENT), (b.pin, b.platform, key)
            assert re.match(r"(not known|none|bundled): \S", why.get(key, "not known: x"))


def test_matrix_show_says_why_in_text_and_json(run):
    argv = ("matrix", "show", "--kind", "torch")
    code, out, _ = run(*argv, "--torch", "1.13.1")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("1.13.1+cu116"))
    assert re.search(r"bundled\s+8\.3\.2\.44\s+none", row)
    assert "triton of 1.13.1+cu116: none: " in out and "nccl of 1.13.1+cu116: bundled: " in out
    code, out, _ = run(*argv, "--torch", "2.12.0", "--json")
    builds = json.loads(out)["torch_builds"]
    b = next(b for b in builds if b["local"] == "cu126" and b["platform"] == "linux-x86_64")
    assert (b["nccl"], b["cudnn"], b["triton"]) == ("2.29.3", "9.10.2.21", None)
    assert b["pins_unknown"]["triton"].startswith("not known: ")
    assert b["provenance"]["pins"] == "curated"
    pypi = next(b for b in builds if b["index"] == "pypi" and b["cuda"])
    assert pypi["pins_unknown"] == {}


# ------------------------------------------------------------------------------ the rules

def _matrix_with(tmp_path, rows: str) -> Path:
    matrix = tmp_path / "matrix"
    shutil.copytree(ROOT / "tests" / "fixtures" / "matrix", matrix)
    with (matrix / "curated" / "torch.toml").open("a") as f:
        f.write(rows)
    return matrix


def test_a_row_per_platform_and_its_reasons(tmp_path):
    fixture = load_facts(ROOT / "tests" / "fixtures" / "matrix")
    b = next(b for b in fixture.torch_builds if b.curated and b.cuda)
    assert b.pins_from == "unknown" and dict(b.pins_unknown)["nccl"] == NO_ROW
    rows = (f'\n[[index_builds]]\ntorch = "{b.version}"\ncuda = "{b.cuda}"\n'
            f'platforms = ["{b.platform}"]\nnccl = "2.99.1"\nsource = "https://example.invalid/a"\n'
            '[index_builds.unknown]\ntriton = "not known: the test says so"\n')
    facts = load_facts(_matrix_with(tmp_path, rows))
    key = (b.version, b.cuda, b.platform, True)
    got = next(x for x in facts.torch_builds if (x.version, x.cuda, x.platform, x.curated) == key)
    assert got.nccl == "2.99.1" and got.pins_from == "curated"
    assert dict(got.pins_unknown) == {"cudnn": ROW_SILENT, "triton": "not known: the test says so"}


@pytest.mark.parametrize(("rows", "says"), [
    ('\n[[index_builds]]\ntorch = "2.5.1"\ncuda = "12.1"\nnccl = "2.21.5"\nsource = "https://e.invalid"\n'
     '[index_builds.unknown]\nnccl = "not known: both"\n', "states nccl and says why"),
    ('\n[[index_builds]]\ntorch = "2.5.1"\ncuda = "12.1"\nsource = "https://e.invalid"\n'
     '\n[[index_builds]]\ntorch = "2.5.1"\ncuda = "12.1"\nplatforms = ["linux-x86_64"]\n'
     'source = "https://e.invalid"\n', "is listed twice"),
])
def test_contradicting_rows_are_data_problems(tmp_path, rows, says):
    from envgen.errors import DataError

    with pytest.raises(DataError) as err:
        load_facts(_matrix_with(tmp_path, rows))
    assert says in str(err.value) or says in str(getattr(err.value, "hint", ""))
