"""The CUDA toolkit each OS ships as a package (envgen/harvest/os_packages.py →
harvested/os_toolkits.json): real Packages stanzas (tests/harvest/fixtures/os_packages) served
in the archive layout on loopback, never the network."""

from __future__ import annotations

import hashlib
import json
import lzma
import socket
from pathlib import Path

import pytest
from support.mini_pypi import make_matrix, tree

from envgen.cli.main import main
from envgen.errors import HarvestError
from envgen.facts.os_toolkit import OsToolkit, read_os_toolkits
from envgen.harvest.os_packages import (
    Found,
    parse_packages,
    parse_release,
    split_version,
    toolkit_record,
)
from envgen.harvest.update import RemovalsRefused, UpdateOptions, update_matrix
from envgen.schemas.check import check

FIXTURES = Path(__file__).parent / "fixtures" / "os_packages"
ROOT = Path(__file__).resolve().parents[2]
NAMES = {"nvidia-cuda-toolkit", "nvidia-cuda-dev", "nvidia-cuda-toolkit-gcc"}
BOOKWORM = (FIXTURES / "bookworm-non-free.Packages").read_text()
JAMMY = (FIXTURES / "jammy-multiverse.Packages").read_text()
SIZES_BOOKWORM = 83993576 + 774230656 + 23084  # toolkit + nvidia-cuda-dev + -gcc


def _cfg(os_id="debian-12", index="http://deb.example/debian",
         suites=("bookworm", "bookworm-updates"), components=("non-free",), gcc=True):
    cfg = {"os": os_id, "index": index, "suites": list(suites), "components": list(components),
           "package": "nvidia-cuda-toolkit", "dev_package": "nvidia-cuda-dev"}
    if gcc:
        cfg["gcc_package"] = "nvidia-cuda-toolkit-gcc"
    return cfg


def _found(text: str, suite: str, component: str = "non-free") -> list[Found]:
    url = f"http://deb.example/debian/dists/{suite}/{component}/binary-amd64/Packages.xz"
    return [Found(s, suite, component, url, "0" * 64) for s in parse_packages(text, NAMES)]


# ------------------------------------------------------------------------------ parsing

def test_bookworm_record_from_real_stanzas():
    record = toolkit_record(_cfg(), _found(BOOKWORM, "bookworm"), "2026-11-23")
    assert record == {
        "os": "debian-12",
        "package": "nvidia-cuda-toolkit",
        "version": "11.8.89~11.8.0-5~deb12u1",
        "cuda": "11.8",
        "nvcc_version": "11.8.89",
        "gcc": 11,  # nvidia-cuda-toolkit-gcc: Depends: g++-11
        "compilers": ["g++-11", "clang-14", "clang-13", "clang-12", "g++-10", "clang-11",
                      "clang-10", "g++-9", "clang-9", "g++-8", "clang-8", "clang-7", "g++-7",
                      "clang-6.0", "g++-6"],  # each once; `clang (<< 1:15~)` is no clang-N
        "driver_min": "520",  # nvidia-cuda-dev: libcuda1 (>= 520) | ...
        "install": ["nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"],
        "download_bytes": SIZES_BOOKWORM,
        "suite": "bookworm",
        "components": ["non-free"],
        "index": "http://deb.example/debian",
        "source": {"url": "http://deb.example/debian/dists/bookworm/non-free/binary-amd64/"
                          "Packages.xz", "sha256": "0" * 64, "verified": "sha256 (Release)",
                   "retrieved": "2026-11-23"},
    }
    assert [s["Package"] for s in parse_packages(BOOKWORM, NAMES)] == [
        "nvidia-cuda-dev", "nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"]  # not -gdb


def test_ubuntu_driver_from_libcuda_so_and_no_nvcc_in_the_version():
    cfg = _cfg("ubuntu-22.04", suites=("jammy",), components=("multiverse",))
    record = toolkit_record(cfg, _found(JAMMY, "jammy", "multiverse"), "2026-11-23")
    assert (record["version"], record["cuda"], record["nvcc_version"]) == (
        "11.5.1-1ubuntu1", "11.5", None)  # 11.5.1 is the toolkit release, not nvcc's version
    # jammy's nvidia-cuda-dev names libnvidia-compute-495 (>= 495) | … | libcuda.so.1 (>= 495)
    assert record["driver_min"] == "495"
    assert record["gcc"] == 11 and record["components"] == ["multiverse"]
    assert record["download_bytes"] == 62803058 + 667065554 + 16334


def test_without_a_gcc_package_the_newest_gxx_of_the_alternatives():
    no_gcc = [f for f in _found(JAMMY, "jammy", "multiverse")
              if f.name != "nvidia-cuda-toolkit-gcc"]
    cfg = _cfg("ubuntu-22.04", suites=("jammy",), components=("multiverse",))
    record = toolkit_record(cfg, no_gcc, "2026-11-23")
    assert record["gcc"] == 11  # g++-11 | g++-11 | clang-12 | g++-10 | … | g++-6
    assert record["install"] == ["nvidia-cuda-toolkit"]
    assert record["download_bytes"] == 62803058 + 667065554
    # a gcc package that pins another toolkit version is not this toolkit's
    other = JAMMY.replace("nvidia-cuda-toolkit (= 11.5.1-1ubuntu1)",
                          "nvidia-cuda-toolkit (= 11.5.0-1)")
    record = toolkit_record({**cfg}, _found(other, "jammy", "multiverse"), "2026-11-23")
    assert record["install"] == ["nvidia-cuda-toolkit"]
    # an OS configured without gcc_package
    record = toolkit_record({**cfg, "gcc_package": None}, _found(JAMMY, "jammy", "multiverse"),
                            "2026-11-23")
    assert record["install"] == ["nvidia-cuda-toolkit"] and record["gcc"] == 11


def test_newest_version_across_suites_by_debian_order():
    base = BOOKWORM.replace("11.8.0-5~deb12u1", "11.8.0-2")
    newer = BOOKWORM.replace("11.8.0-5~deb12u1", "11.8.0-10")  # newer, though "10" < "2" as text
    found = _found(base, "bookworm") + _found(newer, "bookworm-updates")
    record = toolkit_record(_cfg(), found, "2026-11-23")
    assert (record["version"], record["suite"]) == ("11.8.89~11.8.0-10", "bookworm-updates")
    assert "/bookworm-updates/" in record["source"]["url"]
    assert record["install"] == ["nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"]
    # "~" sorts before everything: -5~deb12u1 is older than -5
    older = BOOKWORM.replace("11.8.0-5~deb12u1", "11.8.0-5~deb12u1~bpo1")
    found = _found(BOOKWORM, "bookworm") + _found(older, "bookworm-updates")
    assert toolkit_record(_cfg(), found, "2026-11-23")["suite"] == "bookworm"
    # the same version in two suites: the first suite listed
    found = _found(BOOKWORM, "bookworm") + _found(BOOKWORM, "bookworm-updates")
    assert toolkit_record(_cfg(), found, "2026-11-23")["suite"] == "bookworm"


def test_a_toolkit_pinning_a_missing_dev_package_is_unread():
    from envgen.harvest.os_packages import Unread

    no_dev = [f for f in _found(BOOKWORM, "bookworm") if f.name != "nvidia-cuda-dev"]
    with pytest.raises(Unread, match=r"depends on nvidia-cuda-dev \(= 11.8.89~11.8.0-5~deb12u1\)"):
        toolkit_record(_cfg(), no_dev, "2026-11-23")
    with pytest.raises(Unread, match="no nvidia-cuda-toolkit in bookworm, bookworm-updates"):
        toolkit_record(_cfg(), [], "2026-11-23")


@pytest.mark.parametrize(("version", "expected"), [
    ("11.8.89~11.8.0-5~deb12u1", ("11.8.89", "11.8")),
    ("12.4.131~12.4.1-2", ("12.4.131", "12.4")),
    ("12.0.140~12.0.1-4build4", ("12.0.140", "12.0")),
    ("11.2.2-3+deb11u3", (None, "11.2")),
    ("11.5.1-1ubuntu1", (None, "11.5")),
    ("1:12.4.131~12.4.1-2", ("12.4.131", "12.4")),
    ("garbage-1", (None, None)),
])
def test_split_version(version, expected):
    assert split_version(version) == expected


def test_release_parsing_refuses_what_is_not_a_release_file():
    head = (FIXTURES / "bookworm.Release.head").read_text()
    body = head + "SHA256:\n " + "a" * 64 + "  32 non-free/binary-amd64/Packages.xz\n"
    assert parse_release(body.encode(), "u") == {
        "non-free/binary-amd64/Packages.xz": ("a" * 64, 32)}
    for bad in (b"<html><title>Login</title><form></form></html>", head.encode(),
                b"\xff\xfe", (head + "SHA256:\n xyz  32 a/Packages.xz\n").encode()):
        with pytest.raises(HarvestError, match="u: not a Release file"):
            parse_release(bad, "u")


# ------------------------------------------------------------------------------ refresh

SUITE_FILES = {"bookworm": BOOKWORM, "bookworm-updates": "", "jammy": JAMMY, "jammy-updates": ""}


def _serve(server, suite: str, packages: str, root: str, component: str) -> str:
    """Serve one suite: its Packages.xz and a Release file listing its SHA256; the path of
    the Packages.xz."""
    from support.index_server import Served

    data = lzma.compress(packages.encode())
    rel = f"{component}/binary-amd64/Packages.xz"
    release = (FIXTURES / "bookworm.Release.head").read_text().replace("bookworm", suite)
    release += f"SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data):>8} {rel}\n"
    server.state.files[f"{root}/dists/{suite}/Release"] = Served("Release", release.encode())
    path = f"{root}/dists/{suite}/{rel}"
    server.state.files[path] = Served("Packages.xz", data)
    return path


OS_TABLES = """
[[os_packages]]
os = "debian-12"
index = "{url}/debian"
suites = ["bookworm", "bookworm-updates"]
components = ["non-free"]
package = "nvidia-cuda-toolkit"
gcc_package = "nvidia-cuda-toolkit-gcc"

[[os_packages]]
os = "ubuntu-22.04"
index = "{ubuntu}"
suites = ["jammy", "jammy-updates"]
components = ["multiverse"]
package = "nvidia-cuda-toolkit"
dev_package = "nvidia-cuda-dev"
gcc_package = "nvidia-cuda-toolkit-gcc"
"""


@pytest.fixture
def os_matrix(tmp_path, index_server):
    for suite in ("bookworm", "bookworm-updates"):
        _serve(index_server, suite, SUITE_FILES[suite], "/debian", "non-free")
    for suite in ("jammy", "jammy-updates"):
        _serve(index_server, suite, SUITE_FILES[suite], "/ubuntu", "multiverse")
    matrix = make_matrix(tmp_path, index_server.url, max_removed_share=0.05)
    _tables(matrix, index_server.url, index_server.url + "/ubuntu")
    return matrix


def _tables(matrix: Path, url: str, ubuntu: str, drop: str | None = None) -> None:
    text = (matrix / "sources.toml").read_text().split("\n[[os_packages]]")[0]
    tables = OS_TABLES.format(url=url, ubuntu=ubuntu)
    if drop:
        tables = "\n[[os_packages]]".join(t for t in tables.split("\n[[os_packages]]")
                                          if f'os = "{drop}"' not in t)
    (matrix / "sources.toml").write_text(text + tables)


def _doc(matrix: Path) -> dict:
    return json.loads((matrix / "harvested" / "os_toolkits.json").read_text())


OS_ONLY = {"only": "os-toolkits"}


@pytest.mark.integration
def test_harvest_writes_verified_records(os_matrix, index_server, fast):
    lines: list[str] = []
    result = update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast),
                           progress=lines.append)
    assert result.written and result.unread_os == [] and result.indexes == []
    assert result.diff["files"]["os_toolkits.json"]["added"] == [
        "debian-12 nvidia-cuda-toolkit", "ubuntu-22.04 nvidia-cuda-toolkit"]
    assert "os toolkits: package indexes: 2/2" in lines
    doc = _doc(os_matrix)
    assert check(doc, "harvested-os-toolkits") == [] and doc["unread"] == []
    debian, ubuntu = doc["toolkits"]
    assert (debian["os"], debian["version"], debian["gcc"], debian["driver_min"]) == (
        "debian-12", "11.8.89~11.8.0-5~deb12u1", 11, "520")
    assert debian["download_bytes"] == SIZES_BOOKWORM
    served = index_server.state.files["/debian/dists/bookworm/non-free/binary-amd64/Packages.xz"]
    assert debian["source"] == {
        "url": f"{index_server.url}/debian/dists/bookworm/non-free/binary-amd64/Packages.xz",
        "sha256": served.sha256, "verified": "sha256 (Release)", "retrieved": "2026-11-21"}
    assert (ubuntu["os"], ubuntu["cuda"], ubuntu["driver_min"]) == ("ubuntu-22.04", "11.5", "495")
    # the PyPI-style indexes were not read at all
    assert not any(p.startswith("/simple/") for p, _ in index_server.state.log)
    toolkits = read_os_toolkits(doc)
    assert toolkits["debian-12"] == OsToolkit(
        os="debian-12", package="nvidia-cuda-toolkit", version="11.8.89~11.8.0-5~deb12u1",
        cuda="11.8", nvcc_version="11.8.89", gcc=11, compilers=tuple(debian["compilers"]),
        driver_min="520", install=("nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"),
        download_bytes=SIZES_BOOKWORM, suite="bookworm", components=("non-free",),
        index=f"{index_server.url}/debian", source_url=debian["source"]["url"])

    # a no-op refresh (another day) leaves the bytes alone; offline it reads the cache
    before = tree(os_matrix)
    later = {**fast, "today": "2026-12-01"}
    again = update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **later))
    assert again.changes == 0 and not again.written and tree(os_matrix) == before
    offline = update_matrix(os_matrix, UpdateOptions(offline=True, **OS_ONLY, **later))
    assert offline.texts == again.texts and offline.unread_os == []


@pytest.mark.integration
def test_a_newer_version_in_the_updates_suite_wins(os_matrix, index_server, fast):
    update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    newer = BOOKWORM.replace("11.8.0-5~deb12u1", "11.8.0-5~deb12u2")
    _serve(index_server, "bookworm-updates", newer, "/debian", "non-free")
    result = update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    changed = result.diff["files"]["os_toolkits.json"]["changed"]
    assert [c["record"] for c in changed] == ["debian-12 nvidia-cuda-toolkit"]
    assert changed[0]["fields"]["version"] == ["11.8.89~11.8.0-5~deb12u1",
                                               "11.8.89~11.8.0-5~deb12u2"]
    debian = _doc(os_matrix)["toolkits"][0]
    assert debian["suite"] == "bookworm-updates"
    assert debian["source"]["url"].endswith("/bookworm-updates/non-free/binary-amd64/Packages.xz")


@pytest.mark.integration
def test_a_sha256_mismatch_is_refused_and_nothing_written_or_cached(
        os_matrix, index_server, fast):
    path = "/debian/dists/bookworm/non-free/binary-amd64/Packages.xz"
    real = index_server.state.files[path].sha256
    index_server.state.substitute[path] = lzma.compress(b"Package: nvidia-cuda-toolkit\n")
    before = tree(os_matrix)
    with pytest.raises(HarvestError) as err:
        update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    assert err.value.exit_code == 4
    assert err.value.message.startswith(
        f"{index_server.url}{path}: sha256 mismatch: {index_server.url}/debian/dists/bookworm/"
        f"Release lists {real}, the downloaded bytes hash to ")
    assert "[[os_packages]]" in err.value.hint
    assert tree(os_matrix) == before
    assert not (fast["cache_dir"] / "blobs" / real[:2] / real).exists()


@pytest.mark.integration
def test_an_answer_that_is_not_a_release_file_is_refused(os_matrix, index_server, fast):
    index_server.state.raw["/ubuntu/dists/jammy/Release"] = (
        200, b"<html><title>Sign in</title><form></form></html>", {"Content-Type": "text/html"})
    before = tree(os_matrix)
    with pytest.raises(HarvestError, match=r"/ubuntu/dists/jammy/Release: not a Release file"):
        update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    assert tree(os_matrix) == before


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/ubuntu"  # nothing listens there now


@pytest.mark.integration
def test_an_unreachable_index_is_unread_and_keeps_the_previous_record(
        os_matrix, index_server, fast, capsys):
    update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    previous = _doc(os_matrix)["toolkits"]
    # the Ubuntu mirror is down, and Debian's -updates suite is gone (404)
    _tables(os_matrix, index_server.url, _dead_url())
    del index_server.state.files["/debian/dists/bookworm-updates/Release"]
    later = {**fast, "today": "2026-12-01"}
    result = update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **later))
    assert result.written and result.changes == 0  # the records stand; only `unread` is new
    doc = _doc(os_matrix)
    assert doc["toolkits"] == previous
    assert [u["os"] for u in doc["unread"]] == ["debian-12", "ubuntu-22.04"]
    assert doc["unread"][0]["reason"] == (
        f"{index_server.url}/debian/dists/bookworm-updates/Release is not on the mirror "
        "(HTTP 404)")
    assert "connection failed" in doc["unread"][1]["reason"]
    assert [u["kept"] for u in result.unread_os] == ["previous record"] * 2
    assert check(doc, "harvested-os-toolkits") == []

    # an OS never read before: no record, never a guess
    fresh = make_matrix(os_matrix.parent / "fresh", index_server.url)
    _tables(fresh, index_server.url, _dead_url())
    result = update_matrix(fresh, UpdateOptions(write=True, **OS_ONLY, **later))
    assert _doc(fresh)["toolkits"] == [] and [u["kept"] for u in result.unread_os] == [
        "none", "none"]

    # the CLI warns on stderr
    capsys.readouterr()
    args = ["matrix", "update", "--matrix-dir", str(os_matrix), "--cache-dir",
            str(fast["cache_dir"]), "--timeout", "2", "--retries", "0", "--only", "os-toolkits"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert ("warning: ubuntu-22.04: could not read its CUDA toolkit package (GET "
            in err) and "kept: previous record" in err


@pytest.mark.integration
def test_an_os_leaving_sources_is_a_guarded_removal(os_matrix, index_server, fast):
    update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    _tables(os_matrix, index_server.url, index_server.url + "/ubuntu", drop="ubuntu-22.04")
    before = tree(os_matrix)
    with pytest.raises(RemovalsRefused, match=r"remove 1 of the 2 os_toolkits.json records"):
        update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    assert tree(os_matrix) == before
    result = update_matrix(os_matrix, UpdateOptions(write=True, allow_removals=True, **OS_ONLY,
                                                    **fast))
    assert result.diff["files"]["os_toolkits.json"]["removed"] == [
        "ubuntu-22.04 nvidia-cuda-toolkit"]
    assert [r["os"] for r in _doc(os_matrix)["toolkits"]] == ["debian-12"]


@pytest.mark.integration
def test_only_indexes_and_a_matrix_without_os_packages_leave_the_file_alone(
        os_matrix, index_server, fast):
    update_matrix(os_matrix, UpdateOptions(write=True, **OS_ONLY, **fast))
    written = (os_matrix / "harvested" / "os_toolkits.json").read_bytes()
    hits = len(index_server.state.log)
    update_matrix(os_matrix, UpdateOptions(write=True, only="indexes", **fast))
    assert not any("/dists/" in p for p, _ in index_server.state.log[hits:])
    assert (os_matrix / "harvested" / "os_toolkits.json").read_bytes() == written
    assert json.loads((os_matrix / "harvested" / "torch.json").read_text())["builds"]


def test_cli_only_os_toolkits_refuses_index_options(capsys):
    assert main(["matrix", "update", "--only", "os-toolkits", "--index", "pypi"]) == 2
    assert "--only os-toolkits reads no [[index]]" in capsys.readouterr().err


# ------------------------------------------------------------------------------ committed

def test_the_committed_os_toolkits_json_is_valid():
    import jsonschema

    doc = json.loads((ROOT / "matrix" / "harvested" / "os_toolkits.json").read_text())
    schema = json.loads((ROOT / "envgen" / "schemas" / "harvested-os-toolkits.schema.json")
                        .read_text())
    assert check(doc, "harvested-os-toolkits") == []
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(doc)) == []
    toolkits = read_os_toolkits(doc)
    configured = {"debian-11", "debian-12", "debian-13", "ubuntu-22.04", "ubuntu-24.04"}
    assert set(toolkits) | {u["os"] for u in doc["unread"]} == configured
    for t in toolkits.values():
        assert t.source_url.startswith(t.index + "/dists/" + t.suite + "/")
        assert t.install[0] == t.package and t.download_bytes > 0
