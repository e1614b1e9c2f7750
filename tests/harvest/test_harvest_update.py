from __future__ import annotations

import json

import pytest

from envgen.harvest.diff import sources_of
from envgen.harvest.update import UpdateOptions, update_matrix

pytestmark = pytest.mark.integration


def test_full_harvest(mini_matrix, index_server, fast):
    lines = []
    result = update_matrix(mini_matrix, UpdateOptions(write=True, **fast), progress=lines.append)
    assert result.written
    assert any(line.startswith("torch (pypi): metadata files:") for line in lines)
    torch = json.loads((mini_matrix / "harvested" / "torch.json").read_text())["builds"]
    keyed = {(b["version"], b["platform"], tuple(b["python"])): b for b in torch}
    b = keyed[("2.5.1", "linux-x86_64", ("3.11",))]
    assert (b["cuda"], b["cuda_from"], b["nccl"], b["cudnn"], b["triton"], b["glibc"]) == (
        "12.4",
        "nvidia-cuda-runtime-cu12==12.4.127",
        "2.21.5",
        "9.1.0.70",
        "3.1.0",
        "2.5",
    )
    assert b["source"] if "source" in b else b["sources"][0]["uploaded"] == "2024-10-29"
    assert keyed[("2.5.1", "linux-x86_64", ("3.13",))]["triton"] is None  # marker python < 3.13
    assert keyed[("2.5.1", "linux-aarch64", ("3.11",))]["cuda"] is None  # CPU-only aarch64
    t12 = keyed[("2.12.0", "linux-x86_64", ("3.13t",))]
    assert (t12["cuda"], t12["cuda_from"], t12["cuda_runtime"]) == (
        "13.0",
        "cuda-toolkit==13.0.2",
        "13.0.2",
    )
    t15 = keyed[("2.15.0", "linux-x86_64", ("3.12",))]  # read from the wheel by Range
    assert (t15["cuda"], t15["nccl"], t15["triton"]) == ("13.2", "2.30.7", "~=3.9.0")
    assert {b["version"] for b in torch} == {"2.5.1", "2.12.0", "2.15.0"}  # 1.12, rc, mac, win out

    fw = json.loads((mini_matrix / "harvested" / "frameworks.json").read_text())["releases"]
    by = {(r["framework"], r["version"]): r for r in fw}
    assert set(by) == {
        ("deepspeed", "0.8.0"),
        ("deepspeed", "0.19.8"),
        ("colossalai", "0.4.0"),
        ("colossalai", "0.5.0"),
        ("megatron-core", "0.19.2"),
    }
    assert by[("deepspeed", "0.19.8")]["metadata_from"] == "sdist:PKG-INFO"
    assert by[("deepspeed", "0.19.8")]["requires_torch"] == ">=2.0.0"
    assert by[("deepspeed", "0.8.0")]["metadata_from"] == "sdist:requires.txt"
    assert by[("deepspeed", "0.8.0")]["requires_torch"] == ""
    assert by[("colossalai", "0.5.0")]["requires_torch"] == "<=2.5.1,>=2.2.0"
    assert by[("colossalai", "0.4.0")]["metadata_from"] == "sdist:requirements.txt"
    mc = by[("megatron-core", "0.19.2")]
    assert (mc["metadata_from"], mc["wheel_python"], mc["wheel_glibc"], mc["requires_torch"]) == (
        "wheel",
        ["3.12", "3.13"],
        "2.24",
        ">=2.6.0",
    )

    cuda = json.loads((mini_matrix / "harvested" / "cuda.json").read_text())["toolkits"]
    assert [(c["cuda"], c["nvcc_version"], c["max_gcc"]) for c in cuda] == [
        ("12.1", "12.1.105", 12),
        ("12.9", "12.9.86", 14),
        ("13.0", "13.0.88", 15),
    ]
    assert (
        cuda[0]["archs"][0] == "sm_50"
        and "sm_90a" in cuda[0]["archs"]
        and "sm_20" not in cuda[0]["archs"]
    )
    assert cuda[2]["platforms"] == ["linux-aarch64"]
    # only the two members were read from nvcc wheels: Range requests, never a full GET
    nvcc_gets = [h for p, h in index_server.state.log if p.startswith("/files/nvidia_cuda_nvcc")]
    assert nvcc_gets and all("Range" in h for h in nvcc_gets)


def test_noop_refresh_is_byte_identical_and_new_release_is_added(mini_matrix, index_server, fast):
    from support.mini_pypi import add_wheel, torch_metadata, tree

    update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    before = tree(mini_matrix)
    again = update_matrix(mini_matrix, UpdateOptions(write=True, **{**fast, "today": "2026-12-01"}))
    assert again.changes == 0 and not again.written
    assert tree(mini_matrix) == before
    # 304s: pages were revalidated with ETag
    assert any("If-None-Match" in h for p, h in index_server.state.log if p == "/simple/torch/")

    add_wheel(
        index_server,
        "torch",
        "torch-2.5.2-cp311-cp311-manylinux1_x86_64.whl",
        torch_metadata("2.5.2"),
    )
    result = update_matrix(mini_matrix, UpdateOptions(**{**fast, "today": "2026-12-01"}))
    assert result.diff["files"]["torch.json"]["added"] == [
        "torch 2.5.2 linux-x86_64 manylinux1_x86_64 py3.11 [pypi]"
    ]
    assert result.changes == 1 and tree(mini_matrix) == before  # not written without write=True


def test_offline_uses_cache_and_misses_clearly(mini_matrix, index_server, fast):
    from envgen.errors import NetworkError

    online = update_matrix(mini_matrix, UpdateOptions(**fast))
    offline = update_matrix(mini_matrix, UpdateOptions(offline=True, **fast))
    assert offline.texts == online.texts
    with pytest.raises(
        NetworkError, match=r"offline: http://127.0.0.1:\d+/simple/[a-z0-9-]+/ is not in the cache"
    ):
        update_matrix(
            mini_matrix,
            UpdateOptions(**{**fast, "offline": True, "cache_dir": fast["cache_dir"] / "empty"}),
        )


def test_pytorch_index_relative_links(mini_matrix, index_server, fast):
    result = update_matrix(mini_matrix, UpdateOptions(indexes=["pytorch-cu121"], **fast))
    torch = json.loads(result.texts["torch.json"])["builds"]
    cu = [b for b in torch if b["index"] == "pytorch-cu121"]
    assert len(cu) == 1
    assert (
        cu[0]["version"],
        cu[0]["local"],
        cu[0]["cuda"],
        cu[0]["cuda_from"],
        cu[0]["glibc"],
        cu[0]["wheel_tag"],
    ) == ("2.1.0", "cu121", "12.1", "local:cu121", None, "linux_x86_64")
    assert cu[0]["sources"][0]["url"].endswith(
        "/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl"
    )
    # the pins come from that index's own metadata file (PEP 658, advertised on the page), so
    # an index build's NCCL / cuDNN / triton / CUDA runtime are harvested, not curated
    assert (cu[0]["nccl"], cu[0]["cudnn"], cu[0]["triton"], cu[0]["cuda_runtime"]) == (
        "2.21.5", "9.1.0.70", "3.1.0", "12.4.127")
    # advertised metadata was used: the wheel itself is touched only by Range requests for the
    # C++ facts of torch's headers, never downloaded whole
    hits = [h for p, h in index_server.state.log if p.endswith("linux_x86_64.whl")]
    assert hits and all(h.get("Range") for h in hits)


def test_mirror_replaces_index_url(mini_matrix, index_server, fast):
    from envgen.errors import UsageError

    url = index_server.url + "/simple/"
    result = update_matrix(mini_matrix, UpdateOptions(indexes=[f"pypi={url}"], **fast))
    assert result.indexes == ["pypi"]
    with pytest.raises(UsageError, match="unknown index 'nope'"):
        update_matrix(mini_matrix, UpdateOptions(indexes=["nope"], **fast))


def _strip_verified(matrix) -> None:
    """Make the snapshot look like one written before envgen recorded ``verified``."""
    for path in (matrix / "harvested").glob("*.json"):
        text = path.read_text()
        doc = json.loads(text)
        for records in (v for v in doc.values() if isinstance(v, list)):
            for record in records:
                for source in sources_of(record):
                    source.pop("verified")
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def test_refresh_adds_verified_to_old_records_without_a_change(mini_matrix, index_server, fast):
    from support.mini_pypi import tree

    update_matrix(mini_matrix, UpdateOptions(write=True, **fast))
    written = tree(mini_matrix)
    _strip_verified(mini_matrix)
    assert '"verified"' not in (mini_matrix / "harvested" / "torch.json").read_text()
    later = {**fast, "today": "2026-12-24"}
    result = update_matrix(mini_matrix, UpdateOptions(write=True, **later))
    assert result.changes == 0 and result.written  # provenance only: no change, but written
    torch = json.loads((mini_matrix / "harvested" / "torch.json").read_text())["builds"]
    sources = [s for b in torch for s in b["sources"]]
    assert {s["verified"] for s in sources} == {"none", "range"}
    assert {s["retrieved"] for s in sources} == {"2026-11-21"}  # first-seen dates kept
    # the records are the ones first written (retrieved, verified); only `generated` moved on
    for name, key in (("torch.json", "builds"), ("frameworks.json", "releases"),
                      ("cuda.json", "toolkits")):
        now = json.loads((mini_matrix / "harvested" / name).read_text())
        assert now[key] == json.loads(written[f"harvested/{name}"])[key]
        assert now["generated"]["date"] == "2026-12-24"
    again = update_matrix(mini_matrix, UpdateOptions(write=True, **later))
    assert again.changes == 0 and not again.written
