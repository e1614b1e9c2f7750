"""Reading a release's build files from the loopback index (tests/support/mini_pypi.py), and
what ``matrix update`` does when they cannot be read: the release is named, its previous build
facts are kept, the update goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.index_server import Served
from support.mini_pypi import add_wheel, fixture, sdist

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache
from envgen.harvest.frameworks import BUILD_KEYS
from envgen.harvest.http import Http, HttpOptions
from envgen.harvest.op_builder import deepspeed_want
from envgen.harvest.sdist import CACHE_MEMBER
from envgen.harvest.simple_index import FileLink
from envgen.harvest.update import UpdateOptions, update_matrix

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "deepspeed_op_builder"
BUILDER = (FIXTURES / "0.10.0" / "op_builder" / "builder.py").read_text()
PKG_INFO = fixture("deepspeed-0.8.0.PKG-INFO").replace("0.8.0", "0.10.0")
PATH = "/files/deepspeed-0.10.0.tar.gz"


def add_release(server) -> Served:
    data = sdist("deepspeed-0.10.0", {
        "PKG-INFO": PKG_INFO,
        "op_builder/builder.py": BUILDER,
        "op_builder/__init__.py": "",
        "csrc/big.cu": "// not wanted\n",
    })
    served = Served("deepspeed-0.10.0.tar.gz", data)
    server.state.add("/simple/deepspeed/", served)
    return served


def link_of(server, served: Served) -> FileLink:
    return FileLink(served.filename, f"{server.url}/files/{served.filename}", served.sha256)


@pytest.fixture
def http():
    client = Http(HttpOptions(timeout=2.0, retries=1, backoff=0.01))
    yield client
    client.close()


def test_reads_wanted_members_and_caches_them(index_server, http, tmp_path):
    from envgen.harvest.release_files import read_release_files

    served = add_release(index_server)
    cache = Cache(tmp_path / "c")
    files, verified = read_release_files(http, cache, link_of(index_server, served),
                                         deepspeed_want, 0)
    assert verified == "sha256"
    assert set(files) == {"op_builder/builder.py", "op_builder/__init__.py"}
    assert files["op_builder/builder.py"] == BUILDER
    index_server.state.raw[PATH] = (404, b"gone", {})  # the cache answers now
    again = read_release_files(http, cache, link_of(index_server, served), deepspeed_want, 0)
    assert again == (files, verified)

    def other(path: str) -> bool:  # a different selection never hits that entry
        return path == "PKG-INFO"

    with pytest.raises(HarvestError, match="404"):
        read_release_files(http, cache, link_of(index_server, served), other, 0)


def test_wheel_members(index_server, http, tmp_path):
    from envgen.harvest.release_files import read_release_files

    served = add_wheel(index_server, "deepspeed", "deepspeed-0.10.0-py3-none-any.whl", PKG_INFO,
                       extra_members={"deepspeed/ops/op_builder/builder.py": BUILDER})
    link = FileLink(served.filename, f"{index_server.url}/files/{served.filename}",
                    served.sha256)
    files, verified = read_release_files(http, Cache(tmp_path / "c"), link, deepspeed_want,
                                         64 << 20)
    assert files == {"deepspeed/ops/op_builder/builder.py": BUILDER}
    assert verified == "sha256"


def test_404_and_corrupt_archive_name_the_url(index_server, http, tmp_path):
    from envgen.harvest.release_files import read_release_files

    served = add_release(index_server)
    link = link_of(index_server, served)
    index_server.state.raw[PATH] = (404, b"gone", {})
    with pytest.raises(HarvestError, match=r"deepspeed-0\.10\.0\.tar\.gz: 404"):
        read_release_files(http, Cache(tmp_path / "a"), link, deepspeed_want, 0)
    del index_server.state.raw[PATH]
    junk = Served("deepspeed-0.10.1.tar.gz", b"\x1f\x8b not really gzip")
    index_server.state.add("/simple/deepspeed/", junk)
    with pytest.raises(HarvestError, match=r"deepspeed-0\.10\.1\.tar\.gz: not a readable"):
        read_release_files(http, Cache(tmp_path / "b"), link_of(index_server, junk),
                           deepspeed_want, 0)


def releases(matrix: Path) -> dict[str, dict]:
    doc = json.loads((matrix / "harvested" / "frameworks.json").read_text())
    return {f"{r['framework']} {r['version']}": r for r in doc["releases"]}


def test_update_keeps_previous_build_facts(mini_matrix, index_server, fast, tmp_path):
    served = add_release(index_server)
    first = update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    before = releases(mini_matrix)
    build = before["deepspeed 0.10.0"]["build"]
    assert build["read"] is True and build["from"] == "sdist" and build["error"] is None
    assert build["source"] == {"url": f"{index_server.url}{PATH}", "sha256": served.sha256,
                               "verified": "sha256"}
    assert build["cuda_minor_mismatch_ok"]["12"] == ["12.0", "12.1"]
    assert set(build["default_archs"]) == {"12.1", "12.9", "13.0"}  # this run's toolkits
    assert before["deepspeed 0.10.0"]["files"] == {"sdist": True, "wheels": [], "windows": []}
    # the mini index's other DeepSpeed sdists carry no op_builder: named, never fatal
    named = {u["release"] for u in first.unread_builds}
    assert {"deepspeed 0.8.0", "deepspeed 0.19.8"} <= named
    assert before["deepspeed 0.8.0"]["build"] == {
        **BUILD_KEYS, "read": False, "error": "no op_builder/builder.py in the release"
    }
    mc = before["megatron-core 0.19.2"]["files"]["wheels"]
    assert {(w["python"][0], w["abi"], w["platform"], w["glibc"]) for w in mc} == {
        ("3.12", "cp312", "linux-x86_64", "2.24"), ("3.13", "cp313", "linux-x86_64", "2.24")
    }

    # the build files can no longer be read (the requirements still come from the cache)
    for blob in Path(fast["cache_dir"]).rglob("release-files.*"):
        blob.unlink()
    index_server.state.raw[PATH] = (404, b"gone", {})
    again = update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    unread = {u["release"]: u for u in again.unread_builds}
    assert "404" in unread["deepspeed 0.10.0"]["error"]
    assert unread["deepspeed 0.10.0"]["kept"] == "previous build facts"
    assert releases(mini_matrix)["deepspeed 0.10.0"]["build"] == build
    assert not any("deepspeed 0.10.0" in c["record"]
                   for c in again.diff["files"]["frameworks.json"]["changed"])

    # a corrupt archive the index lists with its own sha256 (requirements cached from before)
    del index_server.state.raw[PATH]
    junk = Served("deepspeed-0.10.0.tar.gz", b"\x1f\x8b not really gzip")
    page = index_server.state.projects["/simple/deepspeed/"]
    page.remove(served)
    index_server.state.add("/simple/deepspeed/", junk)
    cache = Cache(fast["cache_dir"])
    cache.put_blob(junk.sha256, CACHE_MEMBER, cache.get_blob(served.sha256, CACHE_MEMBER) or b"")
    third = update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    unread = {u["release"]: u for u in third.unread_builds}
    assert "not a readable tar.gz" in unread["deepspeed 0.10.0"]["error"]
    assert releases(mini_matrix)["deepspeed 0.10.0"]["build"] == build


def test_cli_warns_and_reports_in_json(mini_matrix, index_server, fast, capsys):
    from envgen.cli.main import main

    add_release(index_server)
    code = main(["--json", "matrix", "update", "--matrix-dir", str(mini_matrix),
                 "--cache-dir", str(fast["cache_dir"]), "--retries", "1", "--timeout", "2"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "warning: deepspeed 0.8.0: could not read its build files" in err
    payload = json.loads(out)
    assert "deepspeed 0.19.8" in {u["release"] for u in payload["unread_builds"]}
