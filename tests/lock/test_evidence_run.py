"""`envgen evidence` running T1 cells against the local stand-ins (tests/support/lock_env.py):
a cell that locks is stored as a valid passing attempt record (exit 0); a cell whose lock fails
is stored as a failed record naming the problem (exit 1); an unreachable index skips the cell,
unrecorded (exit 4). Plus what envgen/evidence/run.py decides without an index: the error line
a failed attempt records, and a T2 attempt's outcome from its build step (a stand-in).

The matrix here is the session's lock matrix with the os-package data of
tests/support/os_package_env.py, matrix/sources.toml (`envgen evidence` reads the index names
from it) and the host's Python preferred (the stand-in wheels are built for it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import extmod
from support.os_package_env import extend_for_os_package
from support.run import HOST_PY, run_envgen

from envgen.errors import DaemonError, EnvgenError, EnvironmentProblem, NetworkError
from envgen.evidence import run as evidence_run
from envgen.evidence.cells import Cell
from envgen.evidence.run import RunOptions, first_error, run_cell
from envgen.facts import load_facts
from envgen.image.build import BuildFailed
from envgen.lock.manifest import ImageSection, read_manifest
from envgen.lock.pip_compile import uv_platforms
from envgen.resolve import Request, resolve
from envgen.results import attempt
from envgen.results.store import load

ROOT = Path(__file__).resolve().parents[2]
PASSING = f"deepspeed-0.18.2-torch2.12.0-cu130-py{HOST_PY}-debian12-x86_64"
# megatron-core is in the matrix but not on the stand-in index: uv cannot lock it
MISSING = f"megatron-core-0.12.0-torch2.12.0-cu130-py{HOST_PY}-debian12-x86_64"


@pytest.fixture(scope="module")
def evidence_matrix(lock_matrix, tmp_path_factory) -> Path:
    dst = extend_for_os_package(tmp_path_factory.mktemp("evidencematrix") / "matrix",
                                source=lock_matrix)
    shutil.copy(ROOT / "matrix" / "sources.toml", dst / "sources.toml")
    # the stand-in wheels are built for the host's Python: make it the preferred one, so the
    # cells `evidence` picks by itself (no --combination) are lockable
    policy = dst / "curated" / "policy.toml"
    text = policy.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("python_preference"))
    prefs = [p for p in json.loads(line.split("=", 1)[1]) if p != HOST_PY]
    policy.write_text(text.replace(line, f"python_preference = {json.dumps([HOST_PY, *prefs])}"))
    return dst


def evidence(matrix: Path, tmp: Path, index_url: str, *args: str):
    return run_envgen("evidence", "--matrix-dir", str(matrix), "--index-url", index_url,
                      "--cache-dir", str(tmp / "cache"), "--results-dir", str(tmp / "results"),
                      "--log-dir", str(tmp / "logs"), "--json", *args,
                      env={**os.environ, "UV_HTTP_RETRIES": "0"})


def stored(results: Path) -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted(results.rglob("*.json"))]


# ------------------------------------------------------------------ T1 through the CLI


@pytest.mark.integration
def test_t1_cell_that_locks_is_a_passing_record(evidence_matrix, wheel_index, tmp_path):
    _, url = wheel_index
    proc = evidence(evidence_matrix, tmp_path, url, "--tier", "T1", "--flavor", "venv",
                    "--combination", PASSING)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["passed"], out["failed"], out["skipped"]) == (1, 0, 0)
    (cell,) = out["cells"]
    assert (cell["tier"], cell["combination"], cell["flavor"], cell["status"],
            cell["error"]) == ("T1", PASSING, "venv", "pass", None)
    ((path, doc),) = stored(tmp_path / "results")
    assert str(path) == cell["record"] and path.parent.name == PASSING
    assert attempt.validate(doc) == []
    record = attempt.AttemptRecord.from_dict(doc)
    assert (record.tier, record.status, record.flavor, record.build) == ("T1", "pass", "venv",
                                                                         None)
    assert record.lock.hash.startswith("sha256:") and record.lock.inputs_hash.startswith(
        "sha256:")
    assert record.lock.packages >= 8  # torch, deepspeed, cuda-toolkit and their dependencies
    assert record.machine.gpus == tuple(record.machine.gpus) and record.machine.cpus >= 1
    assert record.command == (f"envgen evidence --tier T1 --combination {PASSING} "
                              "--flavor venv")
    # the store reads it back as an attempt record
    (back,) = load(tmp_path / "results")
    assert back.record.id == record.id
    # the full log is kept under its digest
    log = tmp_path / "logs" / f"{record.log_digest.split(':', 1)[1][:16]}.log"
    assert f"locking {PASSING}" in log.read_text()


@pytest.mark.integration
def test_t1_lock_hash_is_the_one_make_writes(evidence_matrix, wheel_index, tmp_path):
    """The record's lock hash is the lock `envgen make` writes for the same combination."""
    _, url = wheel_index
    proc = evidence(evidence_matrix, tmp_path, url, "--tier", "T1", "--flavor", "venv",
                    "--combination", PASSING)
    assert proc.returncode == 0, proc.stderr
    ((_, doc),) = stored(tmp_path / "results")
    made = run_envgen("make", "--matrix-dir", str(evidence_matrix), "--flavor", "venv",
                      "--combination", PASSING, "--index-url", url, "--cache-dir",
                      str(tmp_path / "cache"), "--out", str(tmp_path / "locks"), "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["lock_hash"] == doc["lock"]["hash"]


@pytest.mark.integration
def test_t1_cell_whose_lock_fails_is_a_failed_record(evidence_matrix, wheel_index, tmp_path):
    _, url = wheel_index
    proc = evidence(evidence_matrix, tmp_path, url, "--tier", "T1", "--flavor", "venv",
                    "--combination", MISSING)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["passed"], out["failed"], out["skipped"]) == (0, 1, 0)
    assert out["cells"][0]["status"] == "fail" and out["cells"][0]["error"]
    ((path, doc),) = stored(tmp_path / "results")
    assert path.parent.name == MISSING and str(path) == out["cells"][0]["record"]
    assert attempt.validate(doc) == []
    assert doc["status"] == "fail" and doc["lock"] is None and doc["build"] is None
    assert doc["error"].startswith("cause: Because megatron-core was not found")
    log = (tmp_path / "logs" / f"{doc['log_digest'][7:23]}.log").read_text()
    assert "uv cannot resolve the pip packages" in log  # the whole message is in the log
    assert doc["log_digest"].startswith("sha256:") and len(doc["log_digest"]) == 71
    assert (tmp_path / "logs" / f"{doc['log_digest'][7:23]}.log").is_file()


@pytest.mark.integration
def test_failed_lock_record_names_the_cause(evidence_matrix, wheel_index, tmp_path):
    _, url = wheel_index
    proc = evidence(evidence_matrix, tmp_path, url, "--tier", "T1", "--flavor", "venv",
                    "--combination", MISSING)
    assert proc.returncode == 1, proc.stderr
    ((_, doc),) = stored(tmp_path / "results")
    assert "megatron-core" in doc["error"]
    log = (tmp_path / "logs" / f"{doc['log_digest'][7:23]}.log").read_text()
    assert "megatron-core was not found" in log


@pytest.mark.integration
def test_t1_os_package_cell_locks_for_debian_13(evidence_matrix, wheel_index, tmp_path):
    """Debian 13's glibc 2.41 is a manylinux tag newer than uv knows: the lock resolves for
    the newest one uv accepts, and the lock is the one `envgen make` writes."""
    _, url = wheel_index
    combo = f"deepspeed-0.18.2-torch2.9.0-cu128-py{HOST_PY}-debian13-x86_64"
    proc = evidence(evidence_matrix, tmp_path, url, "--tier", "T1", "--flavor", "os-package",
                    "--combination", combo)
    assert proc.returncode == 0, proc.stderr
    ((_, doc),) = stored(tmp_path / "results")
    assert attempt.validate(doc) == []
    assert (doc["combination"], doc["flavor"], doc["status"]) == (combo, "os-package", "pass")
    log = (tmp_path / "logs" / f"{doc['log_digest'][7:23]}.log").read_text()
    assert "(x86_64-manylinux_2_41) with uv" in log
    if "x86_64-manylinux_2_41" not in uv_platforms():
        assert "uv knows manylinux tags up to x86_64-manylinux_2_" in log
    made = run_envgen("make", "--matrix-dir", str(evidence_matrix), "--flavor", "os-package",
                      "--combination", combo, "--index-url", url, "--cache-dir",
                      str(tmp_path / "cache"), "--out", str(tmp_path / "locks"), "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["lock_hash"] == doc["lock"]["hash"]
    lock_dir = tmp_path / "locks" / combo
    assert sorted(p.name for p in lock_dir.iterdir()) == ["envgen.lock.json", "pylock.toml",
                                                          "requirements.lock.txt"]
    manifest = read_manifest(lock_dir)
    assert manifest.flavor == "os-package" and manifest.conda is None
    assert manifest.target.python_platform == "x86_64-manylinux_2_41"
    assert manifest.toolchain.nvcc == "12.4 (the OS's package)"
    assert manifest.toolchain.os_toolkit["version"] == "12.4.131~12.4.1-2"
    assert manifest.toolchain.env == {"CUDA_HOME": "/usr"}
    assert "nvidia-cuda-toolkit" in manifest.toolchain.os_packages
    locked = (lock_dir / "requirements.lock.txt").read_text()
    assert "torch==2.9.0" in locked and "deepspeed==0.18.2" in locked
    assert "nvidia-cuda-nvcc" not in locked


@pytest.mark.integration
def test_t1_without_sources_toml_locks_like_make(lock_matrix, wheel_index, tmp_path):
    _, url = wheel_index
    assert not (lock_matrix / "sources.toml").exists()
    made = run_envgen("make", "--matrix-dir", str(lock_matrix), "--flavor", "venv",
                      "--combination", PASSING, "--index-url", url, "--cache-dir",
                      str(tmp_path / "cache"), "--out", str(tmp_path / "locks"))
    assert made.returncode == 0, made.stderr
    proc = evidence(lock_matrix, tmp_path, url, "--tier", "T1", "--flavor", "venv",
                    "--combination", PASSING)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_unreachable_index_skips_the_cell_unrecorded(evidence_matrix, tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = evidence(evidence_matrix, tmp_path, f"http://127.0.0.1:{port}/simple", "--tier",
                    "T1", "--flavor", "venv", "--combination", PASSING)
    assert proc.returncode == 4, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["passed"], out["failed"], out["skipped"]) == (0, 0, 1)
    cell = out["cells"][0]
    assert cell["status"] == "skipped" and cell["record"] is None
    assert cell["error"].startswith(f"cannot read Python package index http://127.0.0.1:{port}")
    assert "skipped, not recorded" in proc.stderr
    assert stored(tmp_path / "results") == []


@pytest.mark.integration
def test_ca_cert_for_t2_builds_needs_buildkit(evidence_matrix, tmp_path):
    """A proxy's CA for the builds is a BuildKit secret: with the classic engine the run is
    refused before anything is locked or recorded (T1 alone locks with it as before)."""
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    proc = evidence(evidence_matrix, tmp_path, "http://127.0.0.1:9/simple", "--tier", "T2",
                    "--ca-cert", str(pem))
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["message"] == "--ca-cert needs --engine buildkit for the T2 builds"
    assert "would stay in a layer" in error["fix"]
    assert not (tmp_path / "results").exists()


def test_a_failure_does_not_stop_the_run(evidence_matrix, wheel_index, tmp_path):
    """The venv flavor's T1 cells of two frameworks (megatron-core is not on the index,
    deepspeed is): both are recorded, and the exit code says some failed."""
    _, url = wheel_index
    args = ("--tier", "T1", "--flavor", "venv", "--framework", "megatron-core", "--framework",
            "deepspeed")
    plan = run_envgen("evidence", "--matrix-dir", str(evidence_matrix), "--plan", "--json",
                      *args)
    assert plan.returncode == 0, plan.stderr
    planned = [c["combination"] for c in json.loads(plan.stdout)["cells"]]
    assert planned == [f"megatron-core-0.12.0-torch2.12.0-cu130-py{HOST_PY}-ubuntu22.04-x86_64",
                       f"deepspeed-0.18.2-torch2.12.0-cu130-py{HOST_PY}-ubuntu22.04-x86_64"]
    proc = evidence(evidence_matrix, tmp_path, url, *args)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert [(c["combination"], c["status"]) for c in out["cells"]] == [
        (planned[0], "fail"), (planned[1], "pass")]
    records = {doc["combination"]: doc["status"] for _, doc in stored(tmp_path / "results")}
    assert records == {planned[0]: "fail", planned[1]: "pass"}
    assert "[1/2] T1" in proc.stderr and "[2/2] T1" in proc.stderr


# ------------------------------------------------------------------ the error line


@pytest.mark.parametrize(("lines", "want"), [
    (["Reading package lists...", "Building dependency tree...",
      "E: Unable to locate package nvidia-cuda-toolkit", "error: later"],
     "E: Unable to locate package nvidia-cuda-toolkit"),
    (["Collecting deepspeed==0.18.2", "  error: subprocess-exited-with-error", "",
      "  × python setup.py egg_info did not run successfully."],
     "error: subprocess-exited-with-error"),
    (["The following packages have unmet dependencies:", "E: Unable to correct problems"],
     "The following packages have unmet dependencies:"),
    (["x.cu(3): error: identifier \"foo\" is undefined"],
     "x.cu(3): error: identifier \"foo\" is undefined"),
    (["Traceback (most recent call last):", "ImportError: libcuda.so.1"],
     "ImportError: libcuda.so.1"),  # the exception's own line, not the traceback header
    (["E:   Unable\tto   fetch"], "E: Unable to fetch"),  # whitespace folded
    (["gcc -Werror=return-type -c x.c", "0 warnings", "build step 7 stopped"],
     "build step 7 stopped"),  # -Werror is not an error line: the last line stands
    (["", "   "], "failed without output"),
    ([], "failed without output"),
])
def test_first_error(lines, want):
    assert first_error(lines) == want


def test_first_error_is_cut_at_500_characters():
    assert first_error(["error: " + "x" * 900]) == ("error: " + "x" * 900)[:500]


# ------------------------------------------------------------------ run_cell without an index


@pytest.fixture(scope="module")
def cell_facts(lock_matrix):
    return load_facts(lock_matrix)


def _cell(facts, tier: str) -> Cell:
    combo = resolve(Request(framework="deepspeed", torch="2.12.0", python="3.11",
                            os="debian-12", flavor="venv"), facts, limit=1)[0]
    return Cell(combo, "venv", tier, base="local/debian:bookworm" if tier == "T2" else None)


def _locked(monkeypatch, error: Exception | None = None):
    """`lock_with_image` replaced: a result with a hash and six packages, or ``error``
    raised."""
    def fake_lock(facts, combo, options, sources, recipes, progress=None):
        if error is not None:
            raise error
        progress("resolving pip packages (stand-in)")
        plan = SimpleNamespace(inputs_hash=lambda: "sha256:" + "1" * 64)
        return SimpleNamespace(lock_hash="sha256:" + "2" * 64, plan=plan, conda=(),
                               pip=tuple(range(6)))

    monkeypatch.setattr(evidence_run, "lock_with_image", fake_lock)


class FakeClient:
    def version(self):
        return {"Version": "26.1.0"}


def _build_result(ops):
    return {"image": {"reference": "envgen/deepspeed:x", "digest": "sha256:" + "3" * 64},
            "size_bytes": 123456789, "seconds": 61.2, "arch_list": "9.0+PTX", "nvcc": "13.0",
            "ops": ops}


def test_run_cell_t1_pass(monkeypatch, cell_facts):
    _locked(monkeypatch)
    record = run_cell(_cell(cell_facts, "T1"), cell_facts, {}, RunOptions())
    assert attempt.validate(record) == []
    assert record["status"] == "pass" and record["lock"]["packages"] == 6
    assert record["machine"]["docker"] is None  # T1 never asks the daemon


def test_run_cell_records_an_envgen_error(monkeypatch, cell_facts, tmp_path):
    _locked(monkeypatch, EnvgenError("the lock holds cuda-nvcc 12.8.93, not 13.0",
                                     hint="check the channel"))
    record = run_cell(_cell(cell_facts, "T1"), cell_facts, {},
                      RunOptions(log_dir=tmp_path / "logs"))
    assert attempt.validate(record) == []
    assert record["status"] == "fail" and record["lock"] is None
    assert record["error"] == "the lock holds cuda-nvcc 12.8.93, not 13.0"
    (log,) = (tmp_path / "logs").iterdir()
    assert log.name == record["log_digest"][7:23] + ".log"
    assert "failed: the lock holds cuda-nvcc 12.8.93" in log.read_text()


def test_run_cell_raises_environment_problems(monkeypatch, cell_facts):
    _locked(monkeypatch, NetworkError("cannot read Python package index http://x/simple"))
    with pytest.raises(NetworkError):
        run_cell(_cell(cell_facts, "T1"), cell_facts, {}, RunOptions())


def test_run_cell_t2_pass_with_loaded_ops(monkeypatch, cell_facts):
    _locked(monkeypatch)
    ops = [{"name": "fused_adam", "status": "pass", "message": ""},
           {"name": "async_io", "status": "skip", "message": "needs the NVIDIA driver to load"}]
    monkeypatch.setattr(evidence_run, "_build", lambda *a: _build_result(ops))
    record = run_cell(_cell(cell_facts, "T2"), cell_facts, {}, RunOptions(), client=FakeClient())
    assert attempt.validate(record) == [], attempt.validate(record)
    assert record["status"] == "pass" and record["error"] is None
    assert record["build"]["ops"] == ops and record["build"]["size_bytes"] > 0
    assert record["machine"]["docker"] == "26.1.0"


def test_run_cell_t2_op_that_does_not_load_fails_the_attempt(monkeypatch, cell_facts):
    _locked(monkeypatch)
    ops = [{"name": "fused_adam", "status": "pass", "message": ""},
           {"name": "cpu_adam", "status": "fail",
            "message": "ImportError: undefined symbol: _ZN3c10"}]
    monkeypatch.setattr(evidence_run, "_build", lambda *a: _build_result(ops))
    record = run_cell(_cell(cell_facts, "T2"), cell_facts, {}, RunOptions(), client=FakeClient())
    assert attempt.validate(record) == []
    assert record["status"] == "fail"
    assert record["error"] == "op cpu_adam did not load: ImportError: undefined symbol: _ZN3c10"
    assert record["build"]["ops"] == ops  # the build is kept: it says which op failed


def test_run_cell_t2_build_failure_records_the_log_tail(monkeypatch, cell_facts):
    _locked(monkeypatch)

    tail = ["Step 4/9 : RUN apt-get update", "Get:1 http://deb.debian.org bookworm InRelease",
            "E: Unable to locate package python3.13-venv",
            "The command returned a non-zero code: 100"]

    def failing(*a):
        raise BuildFailed("the build failed at step 4/9 (RUN apt-get update …)",
                          step="RUN apt-get update", tail=tail, hint="see the log tail")

    monkeypatch.setattr(evidence_run, "_build", failing)
    record = run_cell(_cell(cell_facts, "T2"), cell_facts, {}, RunOptions(), client=FakeClient())
    assert attempt.validate(record) == []
    assert record["status"] == "fail" and record["build"] is None
    assert record["error"] == "E: Unable to locate package python3.13-venv"
    assert record["lock"] is not None  # the lock part passed


def test_run_cell_t2_without_a_daemon_raises(monkeypatch, cell_facts):
    _locked(monkeypatch)

    class NoDaemon:
        def version(self):
            raise DaemonError("cannot reach the Docker daemon")

    with pytest.raises(DaemonError):
        run_cell(_cell(cell_facts, "T2"), cell_facts, {}, RunOptions(), client=NoDaemon())


def test_run_cell_t2_without_the_docker_cli_is_an_environment_problem(monkeypatch, cell_facts,
                                                                       tmp_path):
    _locked(monkeypatch)

    def build_then_load(cell, result, options, client, log):  # the image built; load its ops
        manifest = SimpleNamespace(image=ImageSection(dockerfile="Dockerfile", base="b",
                                                      repository="envgen/x", tag="1",
                                                      ops=("fused_adam",)))
        evidence_run._load_ops(tmp_path, manifest, "envgen/x:1", cell, options, log)

    monkeypatch.setattr(evidence_run, "_build", build_then_load)
    options = RunOptions(docker_cli=str(tmp_path / "no-such-docker"))
    with pytest.raises(EnvironmentProblem):
        run_cell(_cell(cell_facts, "T2"), cell_facts, {}, options, client=FakeClient())


# ------------------------------------------------------------------ check-ops.py --import

needs_cc = pytest.mark.skipif(not extmod.can_compile(),
                              reason="no C compiler or Python headers to build stand-in ops")


def _site(tmp: Path) -> Path:
    """A site dir with a stand-in torch, deepspeed's op layout and a package of modules, each
    op a real extension module: one loads, one fails in its init, one needs libcuda.so.1."""
    site = tmp / "site"
    for pkg in ("torch", "deepspeed", "deepspeed/ops", "deepspeed/ops/adam",
                "deepspeed/ops/aio", "deepspeed/ops/op_builder", "fw", "fw/_C"):
        (site / pkg).mkdir(parents=True, exist_ok=True)
        (site / pkg / "__init__.py").write_text("")
    # DeepSpeed's own loader, as check-ops.py calls it: installed_ops says what was prebuilt,
    # ALL_OPS[name].load() imports the op's module (OpBuilder.load for a prebuilt op)
    (site / "deepspeed/git_version_info.py").write_text(
        "installed_ops = {'fused_adam': 1, 'cpu_adam': 1, 'async_io': 1,"
        " 'transformer_inference': 1}\n")
    (site / "deepspeed/ops/op_builder/all_ops.py").write_text(
        "import importlib\n"
        "class Builder:\n"
        "    def __init__(self, module):\n"
        "        self.module = module\n"
        "    def load(self, verbose=True):\n"
        "        return importlib.import_module(self.module)\n"
        "ALL_OPS = {'fused_adam': Builder('deepspeed.ops.adam.fused_adam_op'),\n"
        "           'cpu_adam': Builder('deepspeed.ops.adam.cpu_adam_op'),\n"
        "           'async_io': Builder('deepspeed.ops.aio.async_io_op'),\n"
        "           'transformer_inference': Builder('deepspeed.ops.transformer.inference.x')}\n")
    extmod.extension(site / "deepspeed/ops/adam", "fused_adam_op")
    extmod.extension(site / "deepspeed/ops/adam", "cpu_adam_op",
                     fail="cpu_adam_op: undefined symbol _ZN3c10")
    extmod.extension(site / "deepspeed/ops/aio", "async_io_op", needs_libcuda=True)
    extmod.extension(site / "fw/_C", "good")
    extmod.extension(site / "fw/_C", "driver", needs_libcuda=True)
    return site


def check_ops_import(site: Path, *args: str) -> tuple[int, list[dict]]:
    proc = subprocess.run([sys.executable, str(ROOT / "envgen" / "inside" / "check-ops.py"),
                           "--import", *args], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(site), "PATH": os.environ["PATH"]})
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@needs_cc
def test_check_ops_import_loads_each_deepspeed_op(tmp_path):
    site = _site(tmp_path)
    code, results = check_ops_import(site, "deepspeed", "fused_adam", "cpu_adam", "async_io",
                                     "transformer_inference")
    assert code == 1  # cpu_adam failed
    by = {r["name"]: r for r in results}
    assert [r["name"] for r in results] == ["fused_adam", "cpu_adam", "async_io",
                                            "transformer_inference"]
    assert by["fused_adam"] == {"name": "fused_adam", "module":
                                "deepspeed.ops.adam.fused_adam_op", "status": "pass",
                                "message": ""}
    assert by["cpu_adam"]["status"] == "fail"
    assert by["cpu_adam"]["message"] == "ImportError: cpu_adam_op: undefined symbol _ZN3c10"
    # linked to the driver's library, which a GPU-less machine lacks: not the op's fault
    assert by["async_io"]["status"] == "skip"
    assert by["async_io"]["message"].startswith("needs the NVIDIA driver to load: ImportError: "
                                                "libcuda.so.1")
    assert by["transformer_inference"] == {"name": "transformer_inference", "status": "fail",
                                           "message": "no compiled module"}


@needs_cc
def test_check_ops_import_modules_check(tmp_path):
    site = _site(tmp_path)
    code, results = check_ops_import(site, "modules", "fw._C.good", "fw._C.driver",
                                     "fw._C.renamed|fw._C.good", "fw._C.absent")
    assert code == 1
    assert [(r["name"], r["status"]) for r in results] == [
        ("fw._C.good", "pass"), ("fw._C.driver", "skip"), ("fw._C.renamed|fw._C.good", "pass"),
        ("fw._C.absent", "fail")]
    assert results[2]["module"] == "fw._C.good"
    code, results = check_ops_import(site, "modules", "fw._C.good", "fw._C.driver")
    assert code == 0  # a skip is not a failure
