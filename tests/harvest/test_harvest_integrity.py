"""Every downloaded byte is checked against the index's sha256 where that is possible; a
mismatch ends in a clear error (exit code 4) naming the URL and both hashes, leaves matrix/
untouched and caches nothing; each record says how its bytes were checked (``verified``)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile

import pytest
from support.mini_pypi import add_wheel, dist_info, fixture, sdist, torch_metadata, tree, wheel

from envgen.errors import HarvestError
from envgen.harvest.update import UpdateOptions, update_matrix

pytestmark = pytest.mark.integration

MEGATRON = (
    "/files/megatron_core-0.19.2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
)
NVCC = (
    "/files/nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
)
TORCH_RANGE = "/files/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"  # no .metadata
TORCH_PEP658 = "/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"
DEEPSPEED = "/files/deepspeed-0.19.8.tar.gz"


def _mismatch(matrix, index_server, fast, path, real_sha256, **options):
    """A writing update must fail on ``path``; the error, after checking matrix/ and the
    cache."""
    before = tree(matrix)
    with pytest.raises(HarvestError) as err:
        update_matrix(matrix, UpdateOptions(write=True, **{**fast, **options}))
    served = index_server.state.substitute[path]
    assert err.value.exit_code == 4
    assert err.value.message == (
        f"{index_server.url}{path}: sha256 mismatch: the index lists {real_sha256}, the "
        f"downloaded bytes hash to {hashlib.sha256(served).hexdigest()}"
    )
    assert "tampered or corrupted mirror" in err.value.hint
    assert "--index NAME=URL" in err.value.hint
    assert tree(matrix) == before
    blobs = fast["cache_dir"] / "blobs"
    assert not (blobs / real_sha256[:2] / real_sha256).exists()  # nothing cached from them
    return err.value


def _sources(text: str) -> dict[str, str]:
    """url file name -> verified level, over every record of a harvested file."""
    doc = json.loads(text)
    records = next(v for k, v in doc.items() if isinstance(v, list))
    out = {}
    for record in records:
        for source in [record.get("source"), *record.get("sources", [])]:
            if source:
                out[source["url"].rsplit("/", 1)[-1]] = source["verified"]
    return out


def test_tampered_sdist(committed, index_server, fast):
    real = index_server.state.files[DEEPSPEED]
    index_server.state.substitute[DEEPSPEED] = sdist(  # a valid sdist, other requirements
        "deepspeed-0.19.8",
        {"PKG-INFO": "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.19.8\n"
                     "Requires-Dist: torch>=1.0\nRequires-Dist: evil-package\n"},
    )
    _mismatch(committed, index_server, fast, DEEPSPEED, real.sha256)


def test_corrupted_sdist_that_is_not_a_tarball(committed, index_server, fast):
    real = index_server.state.files[DEEPSPEED]
    index_server.state.substitute[DEEPSPEED] = b"<html>502 Bad Gateway</html>"
    _mismatch(committed, index_server, fast, DEEPSPEED, real.sha256)


@pytest.mark.parametrize("path", [MEGATRON, NVCC])
def test_tampered_wheel_below_the_limit(whole_matrix, index_server, fast, path):
    real = index_server.state.files[path]
    with zipfile.ZipFile(io.BytesIO(real.data)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members = {n: (d + b"\n# tampered\n" if n.endswith(("METADATA", "ptxas")) else d)
               for n, d in members.items()}
    index_server.state.substitute[path] = wheel(real.filename, members)
    _mismatch(whole_matrix, index_server, fast, path, real.sha256)


def _big_torch_wheel(index_server):
    """A wheel larger than the 64 KiB first Range answer, without a .metadata file."""
    name = "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    served = add_wheel(
        index_server, "torch", name, torch_metadata("2.16.0"), pep658=False,
        extra_members={"torch/lib/blob.bin": os.urandom(200_000)},
    )
    return "/files/" + name, served


def test_wheel_below_the_limit_is_downloaded_whole_and_checked(whole_matrix, index_server, fast):
    path, served = _big_torch_wheel(index_server)
    result = update_matrix(whole_matrix, UpdateOptions(**fast))
    assert _sources(result.texts["torch.json"])[served.filename] == "sha256"
    hits = [h for p, h in index_server.state.log if p == path]
    # tail, then the whole file, checked each time: for the metadata, for the headers the
    # release's C++ facts are read from, and for the build's GPU arch list (real torch wheels
    # are far above the limit and read by Range)
    assert [h.get("Range") for h in hits] == ["bytes=-65536", None] * 3


def test_tampered_big_wheel_below_the_limit(whole_matrix, index_server, fast):
    path, served = _big_torch_wheel(index_server)
    members = {**dist_info(served.filename, torch_metadata("2.16.0").replace(
        "Requires-Dist: filelock", "Requires-Dist: filelock\nRequires-Dist: evil")),
        "torch/lib/blob.bin": os.urandom(200_000)}
    index_server.state.substitute[path] = wheel(served.filename, members)
    _mismatch(whole_matrix, index_server, fast, path, served.sha256)


@pytest.mark.parametrize("html", [False, True], ids=["pep691", "pep503"])
def test_tampered_pep658_metadata(committed, index_server, fast, html):
    index_server.state.html_only = html
    served = index_server.state.files[TORCH_PEP658]
    served.advertise_metadata = True  # the index states the .metadata file's sha256
    index_server.state.substitute[TORCH_PEP658 + ".metadata"] = served.metadata.replace(
        b"Requires-Dist: filelock", b"Requires-Dist: filelock\nRequires-Dist: evil"
    )
    _mismatch(committed, index_server, fast, TORCH_PEP658 + ".metadata",
              hashlib.sha256(served.metadata).hexdigest())


def test_range_ignored_tampered_wheel(mini_matrix, index_server, fast):
    index_server.state.range_supported = False
    real = index_server.state.files[TORCH_RANGE]
    index_server.state.substitute[TORCH_RANGE] = wheel(real.filename, dist_info(
        real.filename, fixture("torch-2.15.0-cp312-manylinux_2_28_x86_64.METADATA") + "\n"))
    _mismatch(mini_matrix, index_server, fast, TORCH_RANGE, real.sha256)


def test_verified_levels_with_whole_downloads(whole_matrix, index_server, fast):
    result = update_matrix(whole_matrix, UpdateOptions(indexes=["pytorch-cu121"], **fast))
    torch = _sources(result.texts["torch.json"])
    # its .metadata is served, but the page states no hash for it: nothing to check against
    assert torch["torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"] == "none"
    assert torch["torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"] == "sha256"
    assert torch["torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl"] == "metadata-sha256"
    frameworks = _sources(result.texts["frameworks.json"])
    assert set(frameworks.values()) == {"sha256"}  # sdists and wheels, all hashed whole
    cuda = _sources(result.texts["cuda.json"])
    assert len(cuda) == 3 and set(cuda.values()) == {"sha256"}
    # nvcc wheels are downloaded whole: no Range request beyond the first tail
    nvcc = [h for p, h in index_server.state.log if p.startswith("/files/nvidia_cuda_nvcc")]
    assert nvcc and all(h.get("Range") in (None, "bytes=-65536") for h in nvcc)


def test_wheel_above_the_limit_is_read_by_range_and_recorded_as_range(
    mini_matrix, index_server, fast
):
    """mini_matrix's limit is 0 MB: every wheel stands in for a multi-GB torch wheel."""
    result = update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    torch = _sources(result.texts["torch.json"])
    assert torch["torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"] == "range"
    assert _sources(result.texts["frameworks.json"])[MEGATRON.rsplit("/", 1)[-1]] == "range"
    assert set(_sources(result.texts["cuda.json"]).values()) == {"range"}
    hits = [h for p, h in index_server.state.log if p == TORCH_RANGE]
    assert hits and all(h.get("Range", "").startswith("bytes=") for h in hits)
    assert '"verified": "range"' in (mini_matrix / "harvested" / "torch.json").read_text()


def test_corrupted_member_read_by_range_fails_its_crc(mini_matrix, index_server, fast):
    real = index_server.state.files[TORCH_RANGE]
    with zipfile.ZipFile(io.BytesIO(real.data)) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("METADATA"))
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data = bytearray(real.data)
    for k in range(start + 10, start + 40):
        data[k] ^= 0x55
    index_server.state.substitute[TORCH_RANGE] = bytes(data)
    before = tree(mini_matrix)
    with pytest.raises(HarvestError, match=rf"{TORCH_RANGE}: could not read wheel members"):
        update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    assert tree(mini_matrix) == before


def test_cached_facts_keep_their_level(whole_matrix, index_server, fast):
    online = update_matrix(whole_matrix, UpdateOptions(**fast))
    offline = update_matrix(whole_matrix, UpdateOptions(offline=True, **fast))
    assert offline.texts == online.texts and '"verified": "sha256"' in offline.texts["cuda.json"]
