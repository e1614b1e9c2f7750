"""Developer and CI sessions. `nox -l` lists them; `nox -s tests` is what CI runs."""

from __future__ import annotations

import json
import os

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit and integration tests (loopback index servers, subprocesses; no internet).

    Extra arguments go to pytest: `nox -s tests -- -m "not integration" -x`.
    """
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-m", "not network"]))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, benchmarks and this file."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", "envgen", "tests", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Resolver and lock benchmarks (medians; README "Benchmarks"). The lock benchmark
    resolves its pip part against PyPI, so it needs the network."""
    session.install("-e", ".[test]")  # the lock benchmark builds its channel with tests/support
    session.run("python", "benchmarks/bench_resolve.py")
    session.run("python", "benchmarks/bench_lock.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def image(session: nox.Session) -> None:
    """Lock one combination and build its image with the ops compiled (needs dockerd).

    nox -s image -- <combination id> [envgen make options]
      e.g. nox -s image -- deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64 \
               --flavor venv --gpu-arch sm_90 --base local/debian:bookworm
    Build options come from the environment: ENVGEN_REGISTRY, ENVGEN_CA_CERT (a proxy's CA),
    ENVGEN_IMAGE_PUSH=1, ENVGEN_BUILD_ARGS="MAX_JOBS=8". Writes locks/<id>/ and prints the
    framework's own report from inside the image (DeepSpeed: ds_report).
    """
    if not session.posargs:
        session.error("usage: nox -s image -- <combination id> [envgen make options]")
    combination, *make_options = session.posargs
    session.install("-e", ".")
    out = "locks"
    session.run("envgen", "make", "--combination", combination, "--image", "--out", out,
                *make_options)
    build = ["envgen", "build", f"{out}/{combination}"]
    for arg in os.environ.get("ENVGEN_BUILD_ARGS", "").split():
        build += ["--build-arg", arg]
    if os.environ.get("ENVGEN_IMAGE_PUSH") == "1":
        build.append("--push")
    session.run(*build)  # streams the step log
    # the same build again is found by its content tag at once: read its names as JSON
    result = json.loads(session.run(*build[:3], "--json", "--quiet", silent=True, log=False))
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    if combination.startswith("deepspeed-"):
        # the CUDA ops' report; DS_ACCELERATOR only for this command (a GPU-less host would
        # otherwise list the CPU accelerator's ops)
        report = ["-e", "DS_ACCELERATOR=cuda", result["references"][0], "ds_report"]
    else:
        report = [result["references"][0], "python", "-c",
                  "import torch; print(torch.__version__, torch.version.cuda)"]
    session.run(docker, "run", "--rm", *report, external=True)


@nox.session(python=PYTHON)
def update(session: nox.Session) -> None:
    """Refresh matrix/ from the package indexes: shows the diff; `nox -s update -- --write`."""
    session.install("-e", ".")
    session.run("envgen", "matrix", "update", *session.posargs)
