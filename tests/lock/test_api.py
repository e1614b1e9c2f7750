"""envgen.api as a library: the same pipeline as the CLI, typed requests in, typed results out,
nothing printed, progress through the callback. Against the real engines and the local
stand-ins (a rattler-indexed conda channel, a loopback PEP 503 index)."""

from __future__ import annotations

import json

import pytest
from support.run import HOST_PY

from envgen import api
from envgen.errors import InfeasibleError, UsageError
from envgen.lock.manifest import Manifest

pytestmark = pytest.mark.integration


def _lock_options(conda_channel, wheel_index, tmp_path, **kw) -> api.LockOptions:
    _, url = wheel_index
    return api.LockOptions(channels=(str(conda_channel),), index_url=url,
                           cache_dir=tmp_path / "cache", **kw)


def test_resolve_returns_values_and_prints_nothing(lock_matrix, capsys):
    matrix = api.Matrix.locate(lock_matrix)
    found = api.resolve(api.Request(framework="deepspeed", cuda="12.8"), matrix=matrix,
                        limit=3)
    combos = list(found.combinations)
    assert 1 <= len(combos) <= 3 and combos[0] == found.best
    assert found.best.cuda == "12.8"
    assert {d.axis for d in found.why} >= {"torch", "python"}
    builds = found.torch_builds()
    assert any(b["accepted"] and b["cuda"] == "12.8" for b in builds)
    assert capsys.readouterr() == ("", "")


def test_resolve_infeasible_carries_the_explanation(lock_matrix):
    with pytest.raises(InfeasibleError) as exc:
        api.resolve(api.Request(framework="deepspeed", cuda="10.2"),
                    matrix=api.Matrix.locate(lock_matrix))
    assert exc.value.explanation is not None and exc.value.exit_code == 3


def test_make_then_install_as_a_library(lock_matrix, conda_channel, wheel_index, tmp_path,
                                        capsys):
    said: list[str] = []
    req = api.MakeRequest(request=api.Request(framework="deepspeed", cuda="12.8",
                                              python=HOST_PY, os="debian-12"),
                          out=tmp_path / "locks",
                          lock=_lock_options(conda_channel, wheel_index, tmp_path))
    made = api.make(req, matrix=api.Matrix.locate(lock_matrix), progress=said.append)
    assert made.directory == tmp_path / "locks" / made.combination.id
    assert isinstance(made.lock.manifest, Manifest)
    on_disk = json.loads((made.directory / "envgen.lock.json").read_text())
    assert made.lock.manifest.to_dict() == on_disk  # the typed manifest is the file
    assert made.to_dict()["lock_hash"] == on_disk["lock_hash"]
    assert any(line.startswith("resolved ") for line in said)
    done = api.install(api.InstallRequest(lock_dir=made.directory, prefix=tmp_path / "env",
                                          cache_dir=tmp_path / "cache"), progress=said.append)
    assert done.python.exists() and done.conda_packages > 0 and done.pip_packages > 0
    assert capsys.readouterr() == ("", "")  # nothing printed: the CLI renders


def test_make_refuses_an_id_the_request_contradicts(lock_matrix, conda_channel, wheel_index,
                                                    tmp_path):
    combo = "deepspeed-0.18.2-torch2.9.0-cu128-py3.11-debian12-x86_64"
    req = api.MakeRequest(request=api.Request(cuda="13.0"), combination=combo,
                          explicit=frozenset({"cuda"}), out=tmp_path / "locks",
                          lock=_lock_options(conda_channel, wheel_index, tmp_path))
    with pytest.raises(UsageError, match=r"contradicts --cuda 13.0 \(the id has 12.8\)"):
        api.make(req, matrix=api.Matrix.locate(lock_matrix))
    assert not (tmp_path / "locks").exists()


def test_api_names_are_the_functions():
    """Each stage function is the package's attribute, not its module."""
    for name in ("resolve", "make", "install", "build", "verify", "table", "evidence",
                 "doctor"):
        assert callable(getattr(api, name)) and not isinstance(getattr(api, name), type(api))


def test_doctor_judges_a_snapshot_and_returns_values(fixture_matrix, tmp_path):
    """api.doctor: a saved snapshot → a Diagnosis (findings worst first), nothing printed."""
    path = tmp_path / "env.json"
    path.write_text('{"schema": 1, "frameworks": {"deepspeed": "0.18.2"}, "torch": "2.5.1",'
                    ' "torch_cuda": "12.1", "nvcc": "11.8.89", "ninja": null}')
    lines: list[str] = []
    result = api.doctor(api.DoctorRequest(snapshot=path),
                        matrix=api.Matrix.locate(fixture_matrix), progress=lines.append)
    kinds = [f.kind for f in result.diagnosis.findings]
    assert kinds[:2] == ["cuda_major_mismatch", "ninja_missing"]
    assert not result.diagnosis.ok and lines == ["judging it against the matrix"]
