"""Doctor snapshots (schema 1): every field optional, absent = unknown, null = known none;
checked against the shipped JSON Schema, typed, and written back as they were read."""

from __future__ import annotations

import json

import pytest

from envgen.doctor.snapshot import UNKNOWN, Gpu, Snapshot, read_snapshot
from envgen.errors import UsageError

FULL = {
    "schema": 1, "os": "Ubuntu 22.04.3 LTS", "platform": "linux-x86_64", "python": "3.11.9",
    "glibc": "2.35", "torch": "2.5.1+cu121", "torch_cuda": "12.1", "torch_cxx11_abi": False,
    "torch_nccl": "2.20.5", "torch_arch_list": ["sm_80", "sm_90"], "nvcc": "12.4",
    "cuda_home": "/usr/local/cuda-12.4", "gcc": "11.4.0", "driver": "535.104.05",
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
    "nccl_system": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3",
    "frameworks": {"deepspeed": "0.16.4", "colossalai": None},
    "packages": {"ninja": "1.11.1.1", "numpy": "1.26.4"},
    "libaio": {"library": True, "headers": False}, "ninja": "1.11.1",
    "ops": ["fused_adam", "async_io"], "env": {"CUDA_HOME": "/usr/local/cuda-12.4"},
    "torch_extensions": [{"path": "/root/.cache/torch_extensions/py311_cu121/fused_adam",
                          "torch": "2.4.0", "cuda": "12.1", "ops": ["fused_adam"],
                          "python": "3.11", "cxx11_abi": False, "loads": False,
                          "error": "undefined symbol: _ZN3c104cuda9SetDeviceEi"}],
    "path_nvcc": "12.1", "gcc_available": [11, 12],
    "conflicts": [{"package": "deepspeed", "version": "0.16.4", "requires": "pydantic>=2.0.0",
                   "have": "1.10.13"}],
    "import_errors": {"colossalai": "ImportError: cannot import name 'x' from 'y'"},
}


def test_a_full_snapshot_reads_typed_and_writes_back_the_same():
    snap = Snapshot.from_dict(FULL)
    assert snap.gpus == (Gpu("NVIDIA H100 80GB HBM3", "9.0"),)
    assert snap.torch_arch_list == ("sm_80", "sm_90") and snap.libaio.headers is False
    assert snap.frameworks["colossalai"] is None  # a source checkout: version unknown
    assert snap.to_dict() == FULL


def test_absent_is_unknown_and_null_is_known_none():
    snap = Snapshot.from_dict({"torch": "2.5.1", "torch_cuda": None})
    assert snap.known("torch_cuda") and snap.torch_cuda is None  # a CPU build of torch
    assert not snap.known("nvcc") and snap.nvcc is UNKNOWN
    assert snap.to_dict() == {"schema": 1, "torch": "2.5.1", "torch_cuda": None}
    assert Snapshot.from_dict({}).to_dict() == {"schema": 1}  # a snapshot may know nothing


@pytest.mark.parametrize("doc, says", [
    ({"platform": "beos"}, "platform: 'beos' is not one of linux-x86_64"),
    ({"gpus": [{"compute_capability": "9.0"}]}, "gpus[0]: missing 'name'"),
    ({"torch": "2.5.1 final"}, "torch: '2.5.1 final' is not a version (a digit first, no spaces"),
    ({"torch": ">2.0"}, "torch: '>2.0' is not a version (a digit first"),  # a specifier
    ({"env": {"CUDA_HOME": 12}}, "env.CUDA_HOME: 12 is not a string"),
    ({"wheels": []}, "unknown key(s) wheels"),
    ({"schema": 2}, "has snapshot schema 2; this envgen reads schema 1"),
])
def test_a_bad_snapshot_names_the_field_and_the_fix(doc, says):
    with pytest.raises(UsageError) as exc:
        Snapshot.from_dict(doc, source="snap.json")
    assert says in exc.value.message and "snap.json" in exc.value.message
    assert exc.value.exit_code == 2 and exc.value.hint


def test_read_snapshot_files(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(FULL))
    assert read_snapshot(good).to_dict() == FULL
    for name, text, says in (("bad.json", "{not json", "is not JSON"),
                             ("list.json", "[1, 2]", "holds a JSON list, not an object")):
        (tmp_path / name).write_text(text)
        with pytest.raises(UsageError, match=says):
            read_snapshot(tmp_path / name)
    with pytest.raises(UsageError, match="no such snapshot file"):
        read_snapshot(tmp_path / "missing.json")
