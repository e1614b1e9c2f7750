"""envgen.api.verify as a library: VerifyRequest's checks (the same messages and sources the
CLI's options had), verify() with the target's checks stood in (no subprocess, nothing
printed), the record written atomically, the JSON shape `envgen verify --json` prints, and
envgen.inside's script list."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from envgen import inside
from envgen.api import VerifyRequest, VerifyResult, verify
from envgen.errors import DaemonError, EnvgenError, UsageError
from envgen.verify import launch
from envgen.verify.launch import SmokeResult, Target

COMBINATION = "megatron-core-0.16.1-torch2.13.0-cu128-py3.11-debian12-x86_64"
LOCK_HASH = "sha256:" + "ab" * 32


def _lock(directory: Path) -> Path:
    """A valid lock manifest for COMBINATION (as tests/verify/verify_envs.write_lock)."""
    from envgen.lock.manifest import SCHEMA, manifest_hash
    from envgen.resolve.combination import parse_combination_id

    fields = parse_combination_id(COMBINATION)
    doc = {
        "schema": SCHEMA, "id": COMBINATION, "flavor": "venv", "lock_hash": LOCK_HASH,
        "inputs_hash": LOCK_HASH, "combination": {"id": COMBINATION, **fields},
        "target": {"platform": fields["platform"], "python": fields["python"],
                   "python_platform": "x86_64-manylinux_2_36"},
        "conda": None,
        "pip": {"index_url": "https://pypi.org/simple", "extra_index_urls": [],
                "requirements": [], "packages": 0},
        "toolchain": {}, "image": None, "tools": {}, "files": {},
    }
    doc["manifest_hash"] = manifest_hash(doc)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envgen.lock.json").write_text(json.dumps(doc, indent=2))
    return directory


# ------------------------------------------------------------------ VerifyRequest.checked

@pytest.mark.parametrize(("fields", "message", "source"), [
    (dict(python="/nonexistent/bin/python"), "--python /nonexistent/bin/python: no such "
     "interpreter", "--python"),
    (dict(python="no-such-python3"), "no such interpreter", "--python"),
    (dict(python="/"), "--python / is not an executable file", "--python"),
    (dict(python=""), "--python is empty", "--python"),
    (dict(image="--privileged"), "is not an image reference", "--image"),
    (dict(docker_cli=""), "--docker-cli is empty", "--docker-cli"),
    (dict(ops=("", " ")), "--ops is empty", "--ops"),
    (dict(ops=","), "--ops is empty", "--ops"),
    (dict(ops=()), "--ops is empty", "--ops"),
    (dict(ops=("cpu_adam", "-x")), "--ops '-x' is not a valid name", "--ops"),
    (dict(nproc=0), "--nproc 0: at least one process", "--nproc"),
    (dict(nproc=1.5), "--nproc must be a whole number", "--nproc"),
    (dict(timeout=-1), "--timeout must be > 0, not -1", "--timeout"),
    (dict(timeout=0), "--timeout must be > 0", "--timeout"),
    (dict(backend="mpi"), "--backend 'mpi': not one of auto, nccl, gloo", "--backend"),
    (dict(what="everything"), "verify 'everything': not one of ops, smoke, all", None),
    (dict(lock_dir=Path("a\nb")), "--lock", "--lock"),
])
def test_request_errors_name_the_option(fields, message, source):
    request = VerifyRequest(**{"what": "ops", **fields})
    with pytest.raises(UsageError) as err:
        request.checked()
    assert message in err.value.message and err.value.source == source


def test_record_naming_a_folder_is_refused(tmp_path):
    (tmp_path / "rec").mkdir()
    with pytest.raises(EnvgenError) as err:
        VerifyRequest("ops", record_path=tmp_path / "rec").checked()
    assert "is a directory" in err.value.message and err.value.source == "--record"


def test_checked_request_is_normalized(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    req = VerifyRequest("all", python=None, ops=(" cpu_adam", "", "async_io "),
                        lock_dir=Path("lock"), record_path=Path("r.json")).checked()
    assert req.python == sys.executable  # None: this interpreter
    assert req.ops == ("cpu_adam", "async_io")
    assert req.lock_dir == tmp_path / "lock" and req.record_path == tmp_path / "r.json"
    assert VerifyRequest("ops", ops="a, b").checked().ops == ("a", "b")  # the CLI's spelling
    with_image = VerifyRequest("ops", python="/nonexistent", image="local/x:1").checked()
    assert with_image.image == "local/x:1"  # --python is not looked at with --image


def test_verify_refuses_what_it_cannot_check(tmp_path):
    with pytest.raises(UsageError, match="which framework"):
        verify(VerifyRequest("ops"))
    with pytest.raises(UsageError, match="envgen has no checks for framework 'megatron'") as err:
        verify(VerifyRequest("ops", framework="megatron"))
    assert "use one of: colossalai, deepspeed, megatron-core" in err.value.hint
    with pytest.raises(UsageError, match="--record needs --lock DIR"):
        verify(VerifyRequest("all", framework="deepspeed", record_path=tmp_path / "r.json"))
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(UsageError, match="is not an envgen lock directory"):
        verify(VerifyRequest("ops", lock_dir=tmp_path))


# ------------------------------------------------------------------ verify() as a library

OPS_DOC = {"schema": 1, "framework": "megatron-core", "torch": "2.13.0", "torch_cuda": None,
           "framework_version": "0.16.1",
           "ops": [{"name": "helpers_cpp", "prebuilt": True, "status": "pass",
                    "check": "vs NumPy", "message": "", "seconds": 0.1,
                    "build_seconds": None}]}


def _smoke(status: str = "pass") -> SmokeResult:
    checks = tuple({"name": name, "rank": rank, "status": status if name == "all_reduce"
                    else "pass", "message": ""}
                   for name in ("all_reduce", "megatron_tensor_parallel") for rank in (0, 1))
    info = {"backend": "gloo", "gpu_count": 0, "torch": "2.13.0", "python": "3.11.7",
            "framework_version": "0.16.1"}
    return SmokeResult(backend="gloo", world_size=2, checks=checks, info=info, seconds=1.5,
                       returncode=0 if status == "pass" else 1, log_tail="smoke log\n")


@pytest.fixture
def stand_ins(monkeypatch):
    """run_ops / run_smoke replaced: what they were called with, and progress lines."""
    calls = {}

    def run_ops(target, framework, ops=None, *, progress, debug, timeout=None):
        calls["ops"] = (target, framework, ops)
        progress("  helpers_cpp pass")
        debug("  | compiler output")
        return OPS_DOC, "ops log\n"

    def run_smoke(target, framework, *, nproc, backend, timeout, progress):
        calls["smoke"] = (target, framework, nproc, backend, timeout)
        return calls.get("smoke_result") or _smoke()

    monkeypatch.setattr(launch, "run_ops", run_ops)
    monkeypatch.setattr(launch, "run_smoke", run_smoke)
    monkeypatch.setattr("envgen.verify.record.driver_info", lambda: (None, None))
    return calls


def test_verify_as_a_library_prints_nothing(stand_ins, tmp_path, capsys):
    lines, debug = [], []
    record_path = tmp_path / "out" / "record.json"
    (tmp_path / "out").mkdir()
    result = verify(VerifyRequest("all", python=sys.executable, lock_dir=_lock(tmp_path / "l"),
                                  ops=("helpers_cpp",), nproc=2, backend="gloo", timeout=60,
                                  record_path=record_path),
                    progress=lines.append, debug=debug.append)
    assert capsys.readouterr() == ("", "")
    assert isinstance(result, VerifyResult) and result.status == "pass" and not result.failed
    target, framework, ops = stand_ins["ops"]
    assert target == Target(python=sys.executable) and framework == "megatron-core"
    assert ops == ("helpers_cpp",)
    assert stand_ins["smoke"][1:] == ("megatron-core", 2, "gloo", 60)
    assert "  helpers_cpp pass" in lines and debug == ["  | compiler output"]
    assert f"wrote {record_path} (envgen results add {record_path})" in lines
    # the smoke checks' lines: every failure, and rank 0's passes
    assert [ln.split()[0] for ln in lines if " rank " in ln] == ["all_reduce",
                                                                  "megatron_tensor_parallel"]
    assert result.record_path == record_path and result.log == "ops log\nsmoke log\n"
    written = json.loads(record_path.read_text())
    assert written == result.record.to_dict()
    assert written["combination"] == COMBINATION and written["lock_hash"] == LOCK_HASH
    assert written["image"] is None and written["tools"]["framework_version"] == "0.16.1"
    assert set(result.durations) == {"ops", "smoke", "total"}
    assert result.to_dict() == {"status": "pass", "ops": OPS_DOC,
                                "smoke": result.smoke.section(), "record": written}
    assert not list((tmp_path / "out").glob(".*"))  # no temporary left beside it


def test_failed_check_is_a_result_not_an_exception(stand_ins):
    stand_ins["smoke_result"] = _smoke("fail")
    result = verify(VerifyRequest("smoke", framework="megatron-core"))
    assert result.status == "fail" and result.failed and "ops" not in stand_ins
    doc = result.to_dict()
    assert list(doc) == ["status", "ops", "smoke"]  # no lock: no record key
    assert doc["ops"] is None and doc["smoke"]["world_size"] == 2
    assert result.record is None and result.record_path is None


def test_ops_only_leaves_smoke_out(stand_ins):
    result = verify(VerifyRequest("ops", framework="megatron-core"))
    assert result.to_dict() == {"status": "pass", "ops": OPS_DOC, "smoke": None}
    assert "smoke" not in stand_ins and result.durations["smoke"] == 0.0


def test_image_target_asks_nvml_and_the_daemon(stand_ins, monkeypatch, tmp_path):
    """--image: GPUs from envgen.gpus.visible_gpus() (docker run --gpus all), the record's
    image digest from the docker SDK."""
    gpus = types.ModuleType("envgen.gpus")
    gpus.visible_gpus = lambda: ("GPU 0",)
    monkeypatch.setitem(sys.modules, "envgen.gpus", gpus)
    monkeypatch.setattr(launch, "image_id", lambda ref: "sha256:" + "cd" * 32)
    result = verify(VerifyRequest("ops", python="/nonexistent", image="local/mc:1",
                                  docker_cli="/usr/bin/docker", lock_dir=_lock(tmp_path)))
    assert stand_ins["ops"][0] == Target(image="local/mc:1", docker="/usr/bin/docker",
                                         gpus=True)
    assert result.record.to_dict()["image"] == {"reference": "local/mc:1",
                                                "digest": "sha256:" + "cd" * 32}
    gpus.visible_gpus = lambda: ()
    assert launch.target_for(None, "local/mc:1").gpus is False


# ------------------------------------------------------------------ launch's host side

def test_image_id_without_a_daemon_is_a_daemon_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(DaemonError) as err:
        launch.image_id("local/mc:1")
    assert "cannot reach the Docker daemon" in err.value.message
    assert "DOCKER_HOST" in err.value.hint and err.value.source == "DOCKER_HOST"


def test_frameworks_are_the_check_modules():
    assert launch.frameworks() == ["colossalai", "deepspeed", "megatron-core"]


def test_inside_names_every_script_in_its_folder():
    folder = inside.path("ops.py").parent
    assert sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "__init__.py"
                  and not p.name.endswith(".pyc")) == sorted(inside.SCRIPTS)
    assert all(inside.path(name).is_file() for name in inside.SCRIPTS)
    with pytest.raises(KeyError):
        inside.path("launch.py")


def test_inside_scripts_import_no_envgen():
    """They run where envgen is not installed: no `envgen` import in any of them."""
    import ast

    for name in inside.SCRIPTS:
        tree = ast.parse(inside.path(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not any(m == "envgen" or m.startswith("envgen.") for m in mods), name


def test_record_takes_the_driver_from_nvml(monkeypatch):
    """The record's driver and the CUDA it supports come from envgen.gpus (NVML)."""
    from envgen import gpus
    from envgen.verify.record import build_record

    monkeypatch.setattr(gpus, "driver_version", lambda: "550.54.15")
    monkeypatch.setattr(gpus, "cuda_driver_version", lambda: "12.4")
    record = build_record(combination=COMBINATION, lock_hash=LOCK_HASH, image=None,
                          started="2026-11-23T10:00:00Z", finished="2026-11-23T10:01:00Z",
                          ops=OPS_DOC, smoke=None, durations={"ops": 1.0, "smoke": 0.0,
                                                              "total": 1.0},
                          logs="", framework="megatron-core").to_dict()
    assert record["gpu"] == {"model": None, "count": 0, "driver": "550.54.15",
                             "cuda_driver": "12.4"}
