"""--driver auto / --gpu auto: this machine's driver and GPUs read through a real NVML-shaped
shared library (tests/support/fake_nvml.c, compiled here with the system's C compiler as
libnvidia-ml.so.1 and found by NVIDIA's binding, pynvml, through LD_LIBRARY_PATH in a process
of its own: the loader reads that variable when a process starts), through a fake
`nvidia-smi` on PATH, and with neither; then mapped onto a request
(envgen.api.machine_request) and resolved by the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envgen.api import machine_request
from envgen.errors import UsageError
from envgen.facts.matrix import Matrix
from envgen.machine_gpus import GpuSeen, MachineGpus, parse_nvidia_smi
from envgen.resolve.request import Request

SOURCE = Path(__file__).resolve().parents[1] / "support" / "fake_nvml.c"
H100 = "NVIDIA H100 80GB HBM3|9.0"
READ = """
import json, sys
from envgen.machine_gpus import read
found = read(timeout=float(sys.argv[1]) if len(sys.argv) > 1 else None)
print(json.dumps({"driver": found.driver, "source": found.source, "reason": found.reason,
                  "gpus": [[g.name, g.compute_capability] for g in found.gpus],
                  "absent": found.absent}))
"""


def _compile(folder: Path, *defines: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) to build the fake NVML library: apt-get install gcc")
    folder.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *defines, "-o",
                    str(folder / "libnvidia-ml.so.1"), str(SOURCE)], check=True,
                   capture_output=True, timeout=120)
    return folder


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, Path]:
    """Folders holding a fake libnvidia-ml.so.1: complete, without nvmlErrorString, without
    the _v2 count; and one holding none."""
    d = tmp_path_factory.mktemp("nvml")
    (d / "none").mkdir()
    return {"nvml": _compile(d / "nvml"),
            "no_error_string": _compile(d / "no-error-string", "-DNO_ERROR_STRING"),
            "no_count_v2": _compile(d / "no-count-v2", "-DNO_COUNT_V2"),
            "none": d / "none"}


@dataclass
class Machine:
    """A machine for a subprocess: its environment (the fake NVML on LD_LIBRARY_PATH, one H100
    unless a test says otherwise, PATH holding only ``bin``, where a fake nvidia-smi goes)."""

    env: dict[str, str]
    bin: Path
    log: Path
    libs: dict[str, Path] = field(default_factory=dict)

    def nvml(self, which: str) -> None:
        self.env["LD_LIBRARY_PATH"] = str(self.libs[which])

    def read(self, timeout: float | None = None) -> MachineGpus:
        proc = subprocess.run([sys.executable, "-c", READ,
                               *([str(timeout)] if timeout is not None else [])],
                              env=self.env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        d = json.loads(proc.stdout)
        return MachineGpus(driver=d["driver"], source=d["source"], reason=d["reason"],
                           gpus=tuple(GpuSeen(n, c) for n, c in d["gpus"]),
                           absent=d["absent"])

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


@pytest.fixture
def machine(libs, tmp_path) -> Machine:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FAKE_NVML_") and k != "LD_LIBRARY_PATH"}
    env.update({"PATH": str(bin_dir), "LD_LIBRARY_PATH": str(libs["nvml"]),
                "FAKE_NVML_GPUS": H100, "FAKE_NVML_LOG": str(tmp_path / "nvml.log")})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parents[2]),
                                                     env.get("PYTHONPATH")) if p)
    return Machine(env=env, bin=bin_dir, log=tmp_path / "nvml.log", libs=libs)


def _smi(bin_dir: Path, script: str) -> None:
    """A fake nvidia-smi: ``script`` is sh run with the arguments nvidia-smi got."""
    path = bin_dir / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


# ---------------------------------------------------------------- reading: NVML

def test_nvml_reads_the_driver_and_each_gpu(machine):
    machine.env["FAKE_NVML_DRIVER"] = "580.159.04"
    machine.env["FAKE_NVML_GPUS"] = ";".join([H100] * 8)
    found = machine.read()
    assert found == MachineGpus(driver="580.159.04", gpus=(GpuSeen("NVIDIA H100 80GB HBM3",
                                                                   "9.0"),) * 8, source="nvml")
    assert found.summary() == ("driver 580.159.04 and 8× NVIDIA H100 80GB HBM3 (sm_90) read "
                               "through NVML")
    assert found.to_dict() == {
        "driver": "580.159.04", "gpu_count": 8, "source": "nvml", "reason": None,
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                  "arch": "sm_90", "count": 8}]}
    assert machine.calls() == ["init", "shutdown"]  # NVML is shut down after the read


def test_several_models_are_listed_in_the_drivers_order(machine):
    machine.env["FAKE_NVML_GPUS"] = "NVIDIA A100-SXM4-80GB|8.0;" + H100 + ";" + H100
    assert machine.read().gpus_text() == ("1× NVIDIA A100-SXM4-80GB (sm_80), "
                                          "2× NVIDIA H100 80GB HBM3 (sm_90)")


def test_a_driver_that_is_not_loaded_is_not_known_and_says_why(machine):
    machine.env["FAKE_NVML_INIT"] = "9"  # NVML_ERROR_DRIVER_NOT_LOADED
    found = machine.read()
    assert not found.known and found.gpus == () and found.source is None
    assert not found.absent  # a library that answers: the driver is there, not loaded
    assert found.reason == ("NVML: nvmlInit failed: Driver Not Loaded; "
                            "nvidia-smi: not on PATH")
    assert machine.calls() == ["init"]  # nothing to shut down


def test_no_library_no_nvidia_smi(machine):
    machine.nvml("none")
    found = machine.read()
    if found.source == "nvml":
        pytest.skip("this machine has a real libnvidia-ml.so.1 on the loader's path")
    assert not found.known and found.absent  # nothing to ask: no driver installed
    assert found.reason == ("NVML: libnvidia-ml.so.1 not found (no NVIDIA driver installed "
                            "here?); nvidia-smi: not on PATH")


def test_without_nvml_error_string_the_binding_names_the_code(machine):
    machine.nvml("no_error_string")
    machine.env["FAKE_NVML_INIT"] = "18"  # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    found = machine.read()
    assert found.reason.startswith("NVML: nvmlInit failed: ")
    assert "version mismatch" in found.reason or "code 18" in found.reason


def test_a_library_without_a_function_leaves_the_gpus_not_known(machine):
    machine.nvml("no_count_v2")
    found = machine.read()
    assert found.driver == "550.54.15" and found.gpus == ()
    assert found.reason.endswith(": the GPUs are not known")


def test_a_gpu_without_permission_is_left_out(machine):
    machine.env["FAKE_NVML_GPUS"] = f"{H100};NVIDIA A100-SXM4-80GB|8.0"
    machine.env["FAKE_NVML_HANDLE_RC"] = "1:4"  # NVML_ERROR_NO_PERMISSION
    found = machine.read()
    assert found.gpus == (GpuSeen("NVIDIA H100 80GB HBM3", "9.0"),)
    assert found.reason == "NVML: 1 GPU(s) this process has no permission to use were left out"


def test_a_lost_gpu_leaves_the_gpus_not_known_and_the_driver_known(machine):
    machine.env["FAKE_NVML_HANDLE_RC"] = "0:15"  # NVML_ERROR_GPU_IS_LOST
    found = machine.read()
    assert found.driver == "550.54.15" and found.gpus == () and found.source == "nvml"
    assert found.reason == "NVML: GPU is lost: the GPUs are not known"
    assert machine.calls() == ["init", "shutdown"]


def test_a_hung_driver_is_given_up_at_the_deadline(machine):
    machine.env["FAKE_NVML_SLEEP"] = "5"
    _smi(machine.bin, "echo should-not-run >&2; exit 1")
    started = time.monotonic()
    found = machine.read(timeout=0.5)
    assert time.monotonic() - started < 4.5  # the process ends; the hung thread is left
    assert not found.known
    assert found.reason.startswith("NVML did not answer within 0.5 s")


def test_a_driver_string_that_is_not_a_version_is_not_believed(machine):
    machine.env["FAKE_NVML_DRIVER"] = "550\x1b[2J"
    found = machine.read()
    assert not found.known and "is not a version" in found.reason


# ---------------------------------------------------------------- reading: nvidia-smi

def test_nvidia_smi_when_nvml_cannot_start(machine):
    machine.env["FAKE_NVML_INIT"] = "9"
    _smi(machine.bin, 'case "$1" in *compute_cap*) printf "%s\\n" '
         '"550.54.15, NVIDIA H100 80GB HBM3, 9.0" "550.54.15, NVIDIA H100 80GB HBM3, 9.0";; '
         '*) exit 1;; esac')
    found = machine.read()
    assert found.driver == "550.54.15" and found.source == "nvidia-smi"
    assert found.gpus == (GpuSeen("NVIDIA H100 80GB HBM3", "9.0"),) * 2
    assert found.summary().endswith("2× NVIDIA H100 80GB HBM3 (sm_90) read through nvidia-smi")


def test_an_nvidia_smi_without_compute_cap_gives_the_names(machine):
    machine.env["FAKE_NVML_INIT"] = "9"
    _smi(machine.bin, 'case "$1" in *compute_cap*) '
         'echo \'Field "compute_cap" is not a valid field to query.\'; exit 2;; '
         '*) echo "470.82.01, Tesla V100-SXM2-16GB";; esac')
    found = machine.read()
    assert found.driver == "470.82.01"
    assert found.gpus == (GpuSeen("Tesla V100-SXM2-16GB", None),)
    assert "no compute_cap field" in found.reason
    assert found.gpus_text() == "1× Tesla V100-SXM2-16GB (compute capability not read)"


def test_a_failing_nvidia_smi_is_the_reason(machine):
    machine.env["FAKE_NVML_INIT"] = "9"
    _smi(machine.bin, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the "
         "NVIDIA driver.\"; exit 9")
    found = machine.read()
    assert not found.known
    assert found.reason.endswith("nvidia-smi exited with 9: NVIDIA-SMI has failed because it "
                                 "couldn't communicate with the NVIDIA driver.")


def test_a_hanging_nvidia_smi_is_stopped(machine):
    machine.env["FAKE_NVML_INIT"] = "9"
    _smi(machine.bin, f"exec {shutil.which('sleep', path=os.defpath)} 30")
    started = time.monotonic()
    found = machine.read(timeout=0.5)
    assert time.monotonic() - started < 10
    assert found.reason.endswith("nvidia-smi did not answer within 0.5 s")


def test_parse_nvidia_smi():
    text = "535.104.05, NVIDIA A100-SXM4-80GB, 8.0\n\n535.104.05, Odd, Name, 9.0\ngarbage\n"
    found = parse_nvidia_smi(text)
    assert found.driver == "535.104.05"
    assert found.gpus == (GpuSeen("NVIDIA A100-SXM4-80GB", "8.0"), GpuSeen("Odd, Name", "9.0"))
    assert parse_nvidia_smi("No devices were found\n").reason == (
        "nvidia-smi listed no GPU (No devices were found)")
    assert parse_nvidia_smi("550.54.15, NVIDIA L4, [N/A]\n").gpus == (GpuSeen("NVIDIA L4", None),)


# ---------------------------------------------------------------- onto a request

@pytest.fixture
def fmatrix(fixture_matrix):
    return Matrix(matrix_dir=fixture_matrix)


def _seen(*gpus: tuple[str, str | None], driver: str = "550.54.15") -> MachineGpus:
    return MachineGpus(driver=driver, gpus=tuple(GpuSeen(n, c) for n, c in gpus), source="nvml")


def test_a_known_gpu_becomes_its_curated_name(fmatrix):
    request, answer = machine_request(Request(framework="deepspeed", gpu="auto", driver="AUTO"),
                                      matrix=fmatrix,
                                      machine=_seen(("NVIDIA H100 80GB HBM3", "9.0")))
    assert (request.gpu, request.gpu_arch, request.driver) == ("H100", None, "550.54.15")
    assert answer.flags() == "--driver 550.54.15 --gpu H100" and answer.notes == ()
    assert answer.line() == ("Machine: driver 550.54.15 and 1× NVIDIA H100 80GB HBM3 (sm_90) "
                             "read through NVML → --driver 550.54.15 --gpu H100")
    assert answer.to_dict()["used"] == {"driver": "550.54.15", "gpu": "H100", "gpu_arch": "sm_90"}


def test_an_unknown_gpu_is_resolved_by_its_compute_capability(fmatrix):
    request, answer = machine_request(Request(gpu="auto"), matrix=fmatrix,
                                      machine=_seen(("NVIDIA L40S", "8.9")))
    assert (request.gpu, request.gpu_arch, request.driver) == (None, "sm_89", None)
    assert answer.flags() == "--gpu-arch sm_89"


def test_models_of_one_architecture_give_the_architecture(fmatrix):
    request, _ = machine_request(Request(gpu="auto"), matrix=fmatrix,
                                 machine=_seen(("NVIDIA H100 80GB HBM3", "9.0"),
                                               ("NVIDIA H200", "9.0")))
    assert (request.gpu, request.gpu_arch) == (None, "sm_90")


def test_gpus_of_several_architectures_are_refused_with_the_choices(fmatrix):
    with pytest.raises(UsageError) as exc:
        machine_request(Request(gpu="auto"), matrix=fmatrix,
                        machine=_seen(("NVIDIA A100-SXM4-80GB", "8.0"),
                                      ("NVIDIA H100 80GB HBM3", "9.0")))
    assert "GPUs of 2 architectures (1× NVIDIA A100-SXM4-80GB (sm_80), 1× NVIDIA H100 80GB " \
           "HBM3 (sm_90))" in exc.value.message
    assert exc.value.hint == "name the GPUs the job will run on: --gpu A100 or --gpu H100"
    assert exc.value.to_dict()["machine"]["gpu_count"] == 2


def test_the_drivers_compute_capability_wins_over_the_catalogue(fmatrix):
    request, answer = machine_request(Request(gpu="auto"), matrix=fmatrix,
                                      machine=_seen(("NVIDIA H100 PCIe", "8.0")))
    assert (request.gpu, request.gpu_arch) == (None, "sm_80")
    assert "curated/gpus.toml says H100 is sm_90: the driver's sm_80 is used" in answer.notes[0]


def test_a_name_without_compute_capability_uses_the_catalogue_or_nothing(fmatrix):
    request, _ = machine_request(Request(gpu="auto"), matrix=fmatrix,
                                 machine=_seen(("Tesla V100-SXM2-16GB", None)))
    assert request.gpu == "V100"
    request, answer = machine_request(Request(gpu="auto"), matrix=fmatrix,
                                      machine=_seen(("NVIDIA Mystery", None)))
    assert (request.gpu, request.gpu_arch) == (None, None)
    assert "the architecture of NVIDIA Mystery is not known" in answer.notes[0]
    assert answer.line().endswith("→ as if --gpu were not given")


def test_nothing_read_leaves_both_free_with_one_note(fmatrix):
    nothing = MachineGpus(driver=None, reason="NVML: cannot load libnvidia-ml.so.1")
    request, answer = machine_request(Request(framework="deepspeed", gpu="auto",
                                              driver="auto"), matrix=fmatrix, machine=nothing)
    assert request == Request(framework="deepspeed")
    assert answer.notes == ("--driver auto --gpu auto: nothing read (NVML: cannot load "
                            "libnvidia-ml.so.1); resolved as if --driver and --gpu were not "
                            "given",)
    assert answer.line() == ("Machine: nothing read: NVML: cannot load libnvidia-ml.so.1 → as "
                             "if --driver and --gpu were not given")


def test_a_driver_without_gpus_keeps_the_driver(fmatrix):
    request, answer = machine_request(Request(gpu="auto", driver="auto"), matrix=fmatrix,
                                      machine=_seen())
    assert (request.driver, request.gpu) == ("550.54.15", None)
    assert answer.notes == ("--gpu auto: the driver lists no GPU; resolved as if --gpu were "
                            "not given",)


def test_gpu_auto_with_gpu_arch_is_a_usage_error(fmatrix):
    with pytest.raises(UsageError, match="--gpu auto and --gpu-arch both choose the GPU"):
        machine_request(Request(gpu="auto", gpu_arch="sm_90"), matrix=fmatrix,
                        machine=_seen(("NVIDIA H100 80GB HBM3", "9.0")))


def test_no_auto_reads_nothing(fmatrix):
    request = Request(gpu="H100", driver="550.54.15")
    assert machine_request(request, matrix=fmatrix) == (request, None)


# ---------------------------------------------------------------- the CLI (its own process)

@pytest.fixture
def run(machine, fixture_matrix, tmp_path):
    """``run(*argv) -> (exit code, stdout, stderr)``: envgen's CLI in a process of its own on
    ``machine``, against the fixture matrix, from an empty folder."""
    machine.env["ENVGEN_MATRIX_DIR"] = str(fixture_matrix)

    def go(*argv: str) -> tuple[int, str, str]:
        proc = subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                              text=True, env=machine.env, timeout=120, cwd=tmp_path)
        return proc.returncode, proc.stdout, proc.stderr

    return go


def test_resolve_auto_reports_what_it_read_and_resolves_for_it(run):
    code, out, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver",
                         "auto", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["request"] == {"framework": "deepspeed", "gpu": "H100", "driver": "550.54.15"}
    assert doc["machine"]["source"] == "nvml" and doc["machine"]["driver"] == "550.54.15"
    assert doc["machine"]["gpus"] == [{"name": "NVIDIA H100 80GB HBM3", "compute_capability":
                                       "9.0", "arch": "sm_90", "count": 1}]
    assert doc["machine"]["used"] == {"driver": "550.54.15", "gpu": "H100", "gpu_arch": "sm_90"}
    driver = next(d for d in doc["why"] if d["axis"] == "driver")
    assert "--driver 550.54.15" in driver["reason"]
    code, out, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver",
                         "auto", "--limit", "1")
    assert code == 0, err
    assert out.splitlines()[:2] == [
        "Machine: driver 550.54.15 and 1× NVIDIA H100 80GB HBM3 (sm_90) read through NVML → "
        "--driver 550.54.15 --gpu H100",
        "Best match for --framework deepspeed --gpu H100 --driver 550.54.15:"]


def test_an_old_driver_read_here_is_infeasible_for_the_driver(run, machine):
    machine.env["FAKE_NVML_DRIVER"] = "450.80.02"
    code, out, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver",
                         "auto", "--json")
    assert code == 3
    error = json.loads(out)["error"]
    assert error["kind"] == "infeasible"
    assert error["machine"]["driver"] == "450.80.02"
    removed = {r["constraint"]: r for r in error["explanation"]["removed"]}
    assert "driver" in removed and "have 450.80.02" in removed["driver"]["example"]
    assert err.startswith("Machine: driver 450.80.02 and 1× NVIDIA H100 80GB HBM3 (sm_90) read "
                          "through NVML → --driver 450.80.02 --gpu H100\n"
                          "No combination satisfies: --framework deepspeed --gpu H100 "
                          "--driver 450.80.02")


def test_without_a_driver_auto_is_dropped_with_a_note(run, machine):
    machine.env["FAKE_NVML_INIT"] = "9"
    code, out, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver",
                         "auto", "--limit", "1")
    assert code == 0, err
    assert "note: --driver auto --gpu auto: nothing read (NVML: nvmlInit failed" in err
    lines = out.splitlines()
    assert lines[0].startswith("Machine: nothing read: NVML: nvmlInit failed: Driver Not Loaded")
    assert lines[0].endswith("nvidia-smi: not on PATH → as if --driver and --gpu were not given")
    assert lines[1] == "Best match for --framework deepspeed:"
    code, out, _ = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--json")
    found = json.loads(out)["machine"]
    assert found["driver"] is None and found["source"] is None
    assert found["used"] == {"driver": None, "gpu": None, "gpu_arch": None}
    assert "nvidia-smi: not on PATH" in found["reason"] and found["notes"]


def test_an_architecture_no_toolkit_knows_names_where_it_came_from(run, machine):
    machine.env["FAKE_NVML_GPUS"] = "NVIDIA Future|15.0"
    code, _, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto")
    assert code == 2
    assert "no CUDA toolkit in the matrix knows GPU architecture sm_150" in err
    assert "source: --gpu (auto, read through nvml)" in err


IN_PROCESS = """
import json, sys
from envgen.cli.context import Context
from envgen.cli.main import build_parser
from envgen.cli.make_cmd import make_request
from envgen.cli.whatif_cmd import machine_changes
from envgen.errors import UsageError
ctx = Context(sys.argv[1])
if sys.argv[2:] == ["nothing"]:
    try:
        machine_changes({"gpu": "auto"}, ctx)
    except UsageError as exc:
        print(json.dumps({"error": exc.message}))
    raise SystemExit(0)
args = build_parser().parse_args(["make", "--framework", "deepspeed", "--gpu", "auto",
                                  "--driver", "auto", "--image", "--out", "locks"])
req, read = make_request(args, ctx)
changes, answer = machine_changes({"gpu": "auto", "driver": "auto", "torch": "2.9"}, ctx)
print(json.dumps({"image_archs": list(req.image.gpu_archs), "gpu_arch": req.request.gpu_arch,
                  "driver": req.request.driver, "source": read.read.source,
                  "changes": changes}))
"""


def test_make_and_whatif_use_what_was_read(machine, fixture_matrix, tmp_path):
    """make --image builds the ops for the GPU read here; whatif's changes take the read
    driver and GPU."""
    machine.env["FAKE_NVML_GPUS"] = "NVIDIA Future|12.0"
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(fixture_matrix)],
                          env=machine.env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["image_archs"] == ["sm_120"] and got["gpu_arch"] == "sm_120"
    assert got["driver"] == "550.54.15" and got["source"] == "nvml"
    assert got["changes"] == {"torch": "2.9", "gpu_arch": "sm_120", "driver": "550.54.15"}


def test_whatif_refuses_auto_when_nothing_is_read(machine, fixture_matrix, tmp_path):
    machine.env["FAKE_NVML_INIT"] = "9"
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(fixture_matrix), "nothing"],
                          env=machine.env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "read nothing on this machine" in json.loads(proc.stdout.splitlines()[-1])["error"]


def test_whatif_releases_and_apply():
    from envgen.api._whatif import _apply, _releases

    assert _releases({"driver": "550.54.15"}) == [(), ("cuda",), ("torch", "cuda")]
    assert _apply(Request(gpu="H100"), {"gpu_arch": "sm_120"}) == Request(gpu_arch="sm_120")


def test_auto_through_a_real_process(run, machine):
    """The read values reach the resolver; its exit code and streams are real."""
    machine.env.update({"FAKE_NVML_GPUS": "Tesla V100-SXM2-16GB|7.0",
                        "FAKE_NVML_DRIVER": "470.82.01"})
    code, out, err = run("resolve", "--framework", "deepspeed", "--gpu", "auto", "--driver",
                         "auto", "--json", "--limit", "1")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["request"]["gpu"] == "V100" and doc["machine"]["driver"] == "470.82.01"


def test_resolve_without_auto_loads_no_machine_reader(fixture_matrix):
    code = ("import sys; from envgen.cli.main import main; "
            "main(['--matrix-dir', sys.argv[1], 'resolve', '--framework', 'deepspeed', "
            "'--gpu', 'H100', '--limit', '1', '-q']); "
            "print([m for m in ('envgen.machine_gpus', 'envgen.api._machine') "
            "if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code, str(fixture_matrix)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_completion_offers_auto():
    from envgen.cli.completers import _values

    assert _values("driver", None) == ["auto"]
    facts = Matrix(matrix_dir=Path(__file__).resolve().parents[1] / "fixtures" / "matrix").facts
    assert _values("gpu", facts)[0] == "auto" and "H100" in _values("gpu", facts)


@pytest.mark.integration
def test_whatif_a_lock_on_this_machines_older_driver(make_args, libs, tmp_path):
    """A real lock (the loopback index and local channel) for torch 2.12 / CUDA 13.0, asked
    what running it here means: this matrix knows no driver floor for CUDA 13.0, so with the
    driver read (550) the CUDA and then torch go (each said); the GPU keeps its curated name."""
    from support.run import run_envgen

    made = run_envgen(*make_args, "--torch", "2.12.0", "--json")
    assert made.returncode == 0, made.stderr
    lock_dir = json.loads(made.stdout)["directory"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML_")}
    env.update({"LD_LIBRARY_PATH": str(libs["nvml"]), "FAKE_NVML_GPUS": H100,
                "FAKE_NVML_DRIVER": "550.54.15"})
    matrix = make_args[make_args.index("--matrix-dir") + 1]
    proc = run_envgen("--matrix-dir", matrix, "whatif", "--lock", lock_dir, "--gpu", "auto",
                      "--driver", "auto", "--no-lock", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["changes"] == {"gpu": "H100", "driver": "550.54.15"}
    assert answer["machine"]["used"] == {"driver": "550.54.15", "gpu": "H100",
                                         "gpu_arch": "sm_90"}
    assert answer["released"] == ["torch", "cuda"]  # this matrix: one CUDA per torch
    assert "-torch2.9.0-cu128-" in answer["new"]
    torch = next(d for d in answer["decisions"] if d["axis"] == "torch")
    assert "2.12.0: no minimum driver known for CUDA 13.0" in torch["new_reason"]
    text = run_envgen("--matrix-dir", matrix, "whatif", "--lock", lock_dir, "--gpu", "auto",
                      "--driver", "auto", "--no-lock", env=env)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("Machine: driver 550.54.15 and 1× NVIDIA H100 80GB HBM3 "
                                  "(sm_90) read through NVML → --driver 550.54.15 --gpu H100\n"
                                  "What if ")
