"""Unit tests: pages, file names, markers, nvcc facts, diff, sources. No network, no server."""

from __future__ import annotations

import json

import pytest
from packaging.requirements import Requirement
from support.mini_pypi import fixture

from envgen.errors import HarvestError, NetworkError, UsageError
from envgen.facts.sources import Index, Sources, select_indexes
from envgen.harvest.cuda_toolkits import archs, max_gcc
from envgen.harvest.diff import diff_snapshots, render_text
from envgen.harvest.http import Http, HttpOptions, make_session
from envgen.harvest.metadata import applies, parse_metadata, wheel_environment
from envgen.harvest.sdist import requirements_txt_lines, requires_txt_lines
from envgen.harvest.simple_index import parse_html, parse_json
from envgen.harvest.tags import linux_tag, parse_wheel, python_version
from envgen.harvest.torch_builds import build_facts, pin_value

ALIASES = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}
FILES = "https://files.pythonhosted.org/packages"
PYPI_HTML = (
    "<!DOCTYPE html><html><body>\n"
    f'<a href="{FILES}/d1/35/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl#sha256=ABCDEF" '
    'data-requires-python="&gt;=3.8.0" data-upload-time="2024-10-29T17:36:04.123Z">'
    "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl</a><br/>\n"
    f'<a href="{FILES}/x/y/torch-2.0.0.tar.gz#sha256=00" data-yanked="">torch-2.0.0.tar.gz</a>\n'
    "</body></html>"
)
TORCH_INDEX_HTML = (
    "<html><body>\n"
    '<a href="../../../whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=aa" '
    'data-dist-info-metadata="sha256=bb">torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl</a>\n'
    "</body></html>"
)


def test_parse_pep503_html():
    links = parse_html(PYPI_HTML, "https://pypi.org/simple/torch/")
    assert links[0].requires_python == ">=3.8.0"  # HTML-unescaped
    assert links[0].sha256 == "abcdef" and links[0].uploaded == "2024-10-29"
    assert links[0].url.endswith("manylinux1_x86_64.whl") and not links[0].core_metadata
    assert links[1].yanked


def test_parse_pytorch_index_relative_links():
    [link] = parse_html(TORCH_INDEX_HTML, "https://download.pytorch.org/whl/cu121/torch/")
    assert (
        link.url
        == "https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl"
    )
    assert link.filename == "torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl"
    assert link.core_metadata and link.sha256 == "aa"
    assert link.core_metadata_sha256 == "bb"  # PEP 714 data-dist-info-metadata="sha256=bb"


def test_parse_pep691_json():
    body = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "name": "torch",
            "files": [
                {
                    "filename": "a-1.0-py3-none-any.whl",
                    "url": "../../files/a-1.0-py3-none-any.whl",
                    "hashes": {"sha256": "CC"},
                    "requires-python": ">=3.9",
                    "core-metadata": {"sha256": "x"},
                    "upload-time": "2025-01-02T00:00:00Z",
                    "yanked": "broken",
                }
            ],
        }
    )
    [link] = parse_json(body, "https://x.test/simple/a/")
    assert link.url == "https://x.test/files/a-1.0-py3-none-any.whl"
    assert (link.sha256, link.core_metadata, link.yanked, link.uploaded) == (
        "cc",
        True,
        True,
        "2025-01-02",
    )
    assert link.core_metadata_sha256 == "x"
    with pytest.raises(HarvestError, match=r"https://x\.test/simple/a/: not a PEP 691"):
        parse_json("{}", "https://x.test/simple/a/")


def test_pep691_older_metadata_key_and_api_version():
    entry = {"filename": "a-1.0-py3-none-any.whl", "url": "https://x.test/a-1.0-py3-none-any.whl",
             "hashes": {}, "dist-info-metadata": {"sha256": "AB"}}
    doc = {"meta": {"api-version": "1.0"}, "name": "a", "files": [entry]}
    [link] = parse_json(json.dumps(doc), "https://x.test/simple/a/")
    assert (link.core_metadata, link.core_metadata_sha256, link.sha256) == (True, "ab", None)
    doc["meta"]["api-version"] = "2.0"
    with pytest.raises(HarvestError, match=r"not a usable simple index page \(Repository's "
                       r"version \(2\.0\)"):
        parse_json(json.dumps(doc), "https://x.test/simple/a/")
    html = '<meta name="pypi:repository-version" content="2.0"><a href="/a-1.tar.gz">a</a>'
    with pytest.raises(HarvestError, match="not a usable simple index page"):
        parse_html(html, "https://x.test/simple/a/")


def test_metadata_hash_forms():
    page = (
        '<a href="/f/a-1-py3-none-any.whl" data-core-metadata="sha256=ABC">x</a>'
        '<a href="/f/a-2-py3-none-any.whl" data-core-metadata="true">x</a>'
        '<a href="/f/a-3-py3-none-any.whl" data-core-metadata="false">x</a>'
        '<a href="/f/a-4-py3-none-any.whl" data-core-metadata>x</a>'
    )
    links = parse_html(page, "https://x.test/simple/a/")
    assert [(lk.core_metadata, lk.core_metadata_sha256) for lk in links] == [
        (True, "abc"), (True, None), (False, None), (True, None)
    ]


def test_project_files():
    from envgen.harvest.simple_index import is_project_file

    assert is_project_file("torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl", "torch")
    assert is_project_file("megatron_core-0.19.2-cp312-cp312-manylinux_2_28_x86_64.whl",
                           "Megatron-Core")
    assert is_project_file("deepspeed-0.19.8.tar.gz", "deepspeed")
    assert not is_project_file("torchvision-0.20.0-cp311-cp311-linux_x86_64.whl", "torch")
    assert not is_project_file("login", "torch")
    assert not is_project_file("terms.pdf", "torch")
    assert not is_project_file("torch-latest.tar.gz", "torch")  # not a version


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("manylinux_2_28_x86_64", ("x86_64", "2.28")),
        ("manylinux1_x86_64", ("x86_64", "2.5")),
        ("manylinux2014_aarch64", ("aarch64", "2.17")),
        ("linux_x86_64", ("x86_64", None)),
        ("win_amd64", None),
        ("macosx_11_0_arm64", None),
    ],
)
def test_linux_tag(tag, expected):
    assert linux_tag(tag, ALIASES) == expected


def test_wheel_multi_tag_takes_lowest_glibc():
    w = parse_wheel(
        "megatron_core-0.19.2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl", ALIASES
    )
    assert (w.platform, w.glibc, w.pythons) == ("linux-x86_64", "2.24", ("3.12",))
    assert w.platform_tag == "manylinux_2_24_x86_64.manylinux_2_28_x86_64"
    w = parse_wheel(
        "nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        ALIASES,
    )
    assert (w.glibc, w.pythons) == ("2.12", ())
    assert parse_wheel("torch-2.5.1-cp311-cp311-win_amd64.whl", ALIASES).platform is None
    assert parse_wheel("a-1.0-py3-none-any.whl", ALIASES).arch is None


def test_python_versions():
    assert python_version("cp313", "cp313t") == "3.13t"
    assert python_version("cp311", "cp311") == "3.11"
    assert python_version("cp37", "cp37m") == "3.7"
    assert python_version("py3", "none") is None


def test_markers_evaluated_for_the_wheel():
    triton = Requirement(
        'triton==3.1.0; platform_system == "Linux" and platform_machine == "x86_64" '
        'and python_version < "3.13"'
    )
    assert applies(triton, wheel_environment("3.12", "x86_64"))
    assert not applies(triton, wheel_environment("3.13t", "x86_64"))
    assert not applies(triton, wheel_environment("3.12", "aarch64"))
    assert not applies(
        Requirement('pyyaml; extra == "pyyaml"'), wheel_environment("3.12", "x86_64")
    )


def _facts(meta_name: str, filename: str, python: str):
    import tomllib
    from support.mini_pypi import SOURCES

    from envgen.harvest.metadata import requirements

    cfg = tomllib.loads(
        SOURCES.format(url="http://x", max_removed_share=0.05, max_whole_download_mb=0)
    )["torch"]
    meta = parse_metadata(fixture(meta_name), meta_name)
    return build_facts(
        parse_wheel(filename, ALIASES), python, requirements(meta.requires_dist, meta_name), cfg
    )


def test_torch_facts_from_real_metadata():
    f = _facts(
        "torch-2.5.1-cp311-manylinux1_x86_64.METADATA",
        "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
        "3.11",
    )
    assert (f["cuda"], f["cuda_runtime"], f["nccl"], f["cudnn"], f["triton"]) == (
        "12.4",
        "12.4.127",
        "2.21.5",
        "9.1.0.70",
        "3.1.0",
    )
    f = _facts(
        "torch-1.13.1-cp310-manylinux1_x86_64.METADATA",
        "torch-1.13.1-cp310-cp310-manylinux1_x86_64.whl",
        "3.10",
    )
    assert (f["cuda"], f["nccl"]) == ("11.7", None)  # 1.13 links NCCL statically
    f = _facts(
        "torch-1.13.1-cp310-manylinux2014_aarch64.METADATA",
        "torch-1.13.1-cp310-cp310-manylinux2014_aarch64.whl",
        "3.10",
    )
    assert (f["cuda"], f["cuda_from"]) == (None, "none")
    f = _facts(
        "torch-2.15.0-cp312-manylinux_2_28_x86_64.METADATA",
        "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "3.12",
    )
    assert (f["cuda"], f["cuda_from"], f["triton"]) == ("13.2", "cuda-toolkit==13.2.2", "~=3.9.0")
    f = _facts(
        "torch-2.5.1-cp311-manylinux1_x86_64.METADATA",
        "torch-2.5.1+cu121-cp311-cp311-linux_x86_64.whl",
        "3.11",
    )
    assert (f["cuda"], f["cuda_from"], f["local"], f["glibc"]) == (
        "12.1",
        "local:cu121",
        "cu121",
        None,
    )
    assert (
        _facts(
            "torch-2.5.1-cp311-manylinux1_x86_64.METADATA",
            "torch-2.5.1+rocm6.1-cp311-cp311-linux_x86_64.whl",
            "3.11",
        )
        is None
    )


def test_pin_value():
    assert pin_value(Requirement("a==1.2")) == "1.2"
    assert pin_value(Requirement("a~=3.9.0")) == "~=3.9.0"


def test_metadata_requires_name_and_version():
    with pytest.raises(HarvestError, match=r"x\.metadata: metadata is truncated"):
        parse_metadata("Metadata-Version: 2.1\nName: torch\n", "x.metadata")


def test_requirements_files():
    assert (
        requires_txt_lines(fixture("colossalai-0.5.0.requires.txt"))[10] == "torch<=2.5.1,>=2.2.0"
    )
    assert "xgboost" not in requires_txt_lines(fixture("deepspeed-0.19.8.requires.txt"))
    assert requirements_txt_lines("# c\nnumpy  # why\n-r x.txt\ngit+https://x/y\ntorch>=2\n") == [
        "numpy",
        "torch>=2",
    ]


def test_host_config_and_ptxas():
    assert max_gcc(fixture("host_config-12.1.105.h").encode()) == 12
    assert max_gcc(fixture("host_config-12.9.86.h").encode()) == 14
    ptxas = b"\0".join(s.encode() for s in fixture("ptxas-strings-12.1.105.txt").split())
    got = archs(ptxas + b"\0sm_11\0sm_20\0")
    assert got[0] == "sm_50" and got[-2:] == ["sm_90", "sm_90a"] and "sm_20" not in got
    assert archs(b"compute_100f compute_100 compute_100a compute_90")[-3:] == [
        "sm_100",
        "sm_100a",
        "sm_100f",
    ]


def test_select_indexes():
    src = Sources(
        indexes=(
            Index("pypi", "https://pypi.org/simple/", ("torch",), True),
            Index("pytorch-cu121", "https://d/whl/cu121", ("torch",)),
        ),
        torch={"project": "torch"},
    )
    assert [i.name for i in select_indexes(src)] == ["pypi"]
    assert [i.name for i in select_indexes(src, all_indexes=True)] == ["pypi", "pytorch-cu121"]
    [mirror] = select_indexes(src, ["pypi=https://mirror.test/simple/"])
    assert (mirror.url, mirror.projects) == ("https://mirror.test/simple/", ("torch",))
    extra = select_indexes(src, ["mine=https://m.test/simple/"])[-1]
    assert extra.adhoc and extra.projects == ("torch",)
    with pytest.raises(UsageError, match="unknown index 'cu999'"):
        select_indexes(src, ["cu999"])
    with pytest.raises(UsageError, match="bad --index"):
        select_indexes(src, ["x=ftp://nope"])


def test_diff_ignores_generated_and_retrieved():
    src = {"url": "u", "sha256": "s", "uploaded": "d", "retrieved": "2026-01-01", "index": "pypi"}
    rec = {"framework": "deepspeed", "version": "0.1", "requires_torch": "", "source": src}
    old = {
        "torch.json": {"builds": []},
        "cuda.json": {"toolkits": []},
        "frameworks.json": {"generated": {"date": "x"}, "releases": [rec]},
    }
    new_rec = {**rec, "requires_torch": ">=2", "source": {**src, "retrieved": "2026-02-02"}}
    new = {**old, "frameworks.json": {"generated": {"date": "y"}, "releases": [new_rec]}}
    diff = diff_snapshots(old, new)
    assert diff["changes"] == 1
    assert diff["files"]["frameworks.json"]["changed"] == [
        {"record": "deepspeed 0.1", "fields": {"requires_torch": ["", ">=2"]}}
    ]
    assert "~ deepspeed 0.1: requires_torch:  -> >=2" in render_text(diff)
    assert (
        diff_snapshots(old, old)["changes"] == 0
        and render_text(diff_snapshots(old, old)) == "no changes"
    )


def test_ca_bundle_option_and_env(tmp_path, monkeypatch):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("x")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    with make_session() as s:
        assert s.verify == str(bundle)
    with make_session(str(bundle)) as s:
        assert s.verify == str(bundle)
    with pytest.raises(NetworkError, match=r"CA bundle /nonexistent\.pem does not exist"):
        make_session("/nonexistent.pem")


def test_retry_policy_is_bounded_and_honours_retry_after():
    """urllib3's Retry on the session's adapter: GET/HEAD, 429/5xx, growing back-off with
    jitter up to backoff_max, Retry-After honoured but capped at backoff_max."""
    from urllib3 import HTTPResponse

    http = Http(HttpOptions(retries=3, backoff=1.0, backoff_max=5.0))
    try:
        retry = http.retry
        assert retry.total == 3 and retry.status_forcelist == {429, 500, 502, 503, 504}
        assert retry.is_retry("GET", 503) and not retry.is_retry("POST", 503)
        assert not retry.is_retry("GET", 404)
        for _ in range(2):
            retry = retry.increment("GET", "https://x.test/", error=ConnectionError())
        assert 2.0 <= retry.get_backoff_time() <= 3.0  # factor 1 × 2, plus up to 1 s jitter
        for _ in range(10):
            retry = retry.new(total=5).increment("GET", "https://x.test/", error=OSError())
        assert retry.get_backoff_time() == 5.0
        assert retry.get_retry_after(HTTPResponse(headers={"Retry-After": "4"})) == 4.0
        assert retry.get_retry_after(HTTPResponse(headers={"Retry-After": "3600"})) == 5.0
        adapter = http.session.get_adapter("https://pypi.org/simple/")
        assert adapter.max_retries is http.retry
    finally:
        http.close()


def test_ptxas_compute_entries_glued_to_the_previous_string():
    # ptxas 13.0.88's string table: "...neri_memcheck_malloccompute_75\0compute_80\0..."
    table = b"neri_memcheck_malloccompute_75\x00compute_80\x00compute_90a\x00xcompute_1000"
    assert archs(table) == ["sm_75", "sm_80", "sm_90a"]


def test_windows_wheels_are_listed_apart_from_the_linux_ones():
    # deepspeed 0.16.5's files on PyPI: an sdist and win_amd64 wheels for 3.10-3.12 only
    from envgen.harvest.frameworks import _releases, release_files
    from envgen.harvest.simple_index import FileLink

    names = ["deepspeed-0.16.5.tar.gz", "deepspeed-0.16.5-cp310-cp310-win_amd64.whl",
             "deepspeed-0.16.5-cp311-cp311-win_amd64.whl",
             "deepspeed-0.16.5-cp312-cp312-win_amd64.whl",
             "deepspeed-0.16.5-cp312-cp312-macosx_11_0_arm64.whl"]
    links = [FileLink(n, f"https://files.invalid/{n}") for n in names]
    releases = _releases(links, {"min_version": "0.10.0"}, ALIASES)
    files = release_files(next(iter(releases.values())))
    assert files == {"sdist": True, "wheels": [], "windows": ["3.10", "3.11", "3.12"]}
