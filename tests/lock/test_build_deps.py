"""Build dependencies of sdists: read from the sdist, hash-locked by `envgen make`
(build-requirements.lock.txt), installed first and checked by `envgen install`, which then
builds with --no-build-isolation; an older lock without them is refused.

The integration tests serve the stand-in packages on a loopback index with DeepSpeed as an
sdist only, built by a real (tiny) PEP 517 backend whose own dependency must be installed."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.index_server import IndexServer, Served
from support.lock_env import wheels
from support.run import HOST_PY, run_envgen
from support.sdists import BACKEND_SOURCE, sdist_bytes
from support.wheels import build_wheel, serve_wheels

from envgen.errors import DataError, EnvgenError, NetworkError
from envgen.lock.build_deps import built_from_sdist, fetch, read_build_requires
from envgen.lock.pip_compile import Dist, PipPackage

FALLBACK = ("setuptools>=40.8.0", "wheel")

# --- reading the sdist ----------------------------------------------------------------------


def test_requires_come_from_the_build_system_table():
    name, data = sdist_bytes("pkg", "1.0", build_requires=["setuptools>=64", "cython<4"])
    assert read_build_requires(data, name, FALLBACK) == (("setuptools>=64", "cython<4"),
                                                          "pyproject.toml")


@pytest.mark.parametrize("pyproject", [None, "no-build-system"])
def test_without_a_build_system_table_pip_fallback_applies(pyproject):
    if pyproject is None:  # no pyproject.toml at all (DeepSpeed's sdist)
        name, data = sdist_bytes("pkg", "1.0", pyproject="")
        data = _without_member(data, "pkg-1.0/pyproject.toml")
        where = "no pyproject.toml"
    else:
        name, data = sdist_bytes("pkg", "1.0", build_requires=None)
        where = "no [build-system] table"
    requires, source = read_build_requires(data, name, FALLBACK)
    assert requires == FALLBACK
    assert where in source
    with pytest.raises(DataError, match="declares no build requirements"):
        read_build_requires(data, name, ())  # a matrix without [sdist_build]


def test_the_fallback_is_the_matrix_fact():
    """pip's fallback is data (curated/toolchain.toml [sdist_build]), with its source."""
    from envgen.facts.matrix import Matrix

    root = Path(__file__).parents[2] / "matrix"
    toolchain = Matrix(matrix_dir=root, data_dir=root).facts.toolchain
    assert toolchain.sdist_fallback_requires == ("setuptools>=40.8.0", "wheel")


def test_a_zip_sdist_is_read_too():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("pkg-1.0/pyproject.toml", '[build-system]\nrequires = ["flit_core>=3.2"]\n')
        z.writestr("pkg-1.0/src/pkg/pyproject.toml", '[build-system]\nrequires = ["other"]\n')
    assert read_build_requires(buf.getvalue(), "pkg-1.0.zip", FALLBACK)[0] == ("flit_core>=3.2",)


@pytest.mark.parametrize("pyproject,message", [
    ("[build-system]\nbuild-backend = 'x'\n", "no list of strings in 'requires'"),
    ("[build-system\n", "not valid TOML"),
])
def test_a_broken_build_system_is_an_error_naming_the_file(pyproject, message):
    name, data = sdist_bytes("pkg", "1.0", pyproject=pyproject)
    with pytest.raises(EnvgenError, match=message) as err:
        read_build_requires(data, name, FALLBACK)
    assert "pkg-1.0.tar.gz" in str(err.value)


def test_a_file_that_is_no_archive_is_an_error():
    with pytest.raises(EnvgenError, match="not a readable sdist"):
        read_build_requires(b"<html>not found</html>", "pkg-1.0.tar.gz", FALLBACK)


def _without_member(data: bytes, member: str) -> bytes:
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=out,
                                                                      mode="w:gz") as dst:
        for m in src.getmembers():
            if m.name != member:
                dst.addfile(m, src.extractfile(m))
    return out.getvalue()


# --- which packages are built, and fetching -------------------------------------------------

def _dist(filename: str) -> Dist:
    return Dist(url=f"https://files.example/{filename}", sha256=filename[:8] * 8,
                filename=filename)


def test_only_packages_without_a_wheel_for_the_target_are_built():
    sdist = _dist("b-1.0.tar.gz")
    packages = [
        PipPackage("a", "1.0", (_dist("a-1.0-py3-none-any.whl"),), _dist("a-1.0.tar.gz")),
        PipPackage("b", "1.0", (), sdist),
        # a wheel for another platform only: the target builds the sdist
        PipPackage("c", "1.0", (_dist("c-1.0-cp312-cp312-manylinux_2_28_aarch64.whl"),),
                   _dist("c-1.0.tar.gz")),
    ]
    built = built_from_sdist(packages, "3.12", "x86_64-manylinux_2_28")
    assert [(p.name, d.filename) for p, d in built] == [("b", "b-1.0.tar.gz"),
                                                         ("c", "c-1.0.tar.gz")]


def test_fetch_checks_the_sha256_and_caches_by_it(tmp_path):
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(b"sdist bytes")
    good = Dist(url=path.as_uri(), sha256=hashlib.sha256(b"sdist bytes").hexdigest(),
                filename=path.name)
    assert fetch(good, tmp_path / "cache", offline=False, ca_cert=None) == b"sdist bytes"
    path.unlink()  # from the cache now, also offline
    assert fetch(good, tmp_path / "cache", offline=True, ca_cert=None) == b"sdist bytes"
    bad = Dist(url=(tmp_path / "other.tar.gz").as_uri(), sha256="0" * 64,
               filename="other.tar.gz")
    (tmp_path / "other.tar.gz").write_bytes(b"other bytes")
    with pytest.raises(EnvgenError, match="does not match the sha256 uv locked"):
        fetch(bad, tmp_path / "cache", offline=False, ca_cert=None)
    with pytest.raises(NetworkError, match=r"--offline: other\.tar\.gz"):
        fetch(bad, tmp_path / "cache", offline=True, ca_cert=None)


# --- make and install against a loopback index ----------------------------------------------

@pytest.fixture(scope="module")
def sdist_index(tmp_path_factory):
    """The lock stand-ins with DeepSpeed as an sdist only (built by minibackend, which needs
    minihelper); yields (server, URL)."""
    out = tmp_path_factory.mktemp("sdist-wheels")
    made = [w for w in wheels(out) if not w.name.startswith("deepspeed-")]
    made += [build_wheel(out, "minibackend", "1.0", requires=["minihelper"],
                         files={"minibackend/__init__.py": BACKEND_SOURCE}),
             build_wheel(out, "minihelper", "2.0")]
    with IndexServer() as server:
        url = serve_wheels(server, made)
        name, data = sdist_bytes("deepspeed", "0.18.2", requires=["torch", "ninja", "packaging"],
                                 files={"deepspeed/__init__.py": "__version__ = '0.18.2'\n"})
        server.state.add("/simple/deepspeed/", Served(filename=name, data=data))
        yield server, url


@pytest.fixture
def sdist_make_args(lock_matrix, conda_channel, sdist_index, tmp_path):
    _, url = sdist_index
    return ["make", "--matrix-dir", str(lock_matrix), "--framework", "deepspeed",
            "--python", HOST_PY, "--os", "debian-12", "--flavor", "venv", "--index-url", url,
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "locks")]


def _lock_dir(tmp_path: Path) -> Path:
    (one,) = [p for p in (tmp_path / "locks").iterdir() if not p.name.startswith(".")]
    return one


integration = pytest.mark.integration


@integration
def test_make_locks_the_sdists_build_dependencies_and_install_builds_with_them(
        sdist_make_args, tmp_path):
    proc = run_envgen(*sdist_make_args)
    assert proc.returncode == 0, proc.stderr
    d = _lock_dir(tmp_path)
    build = (d / "build-requirements.lock.txt").read_text()
    # the backend and its own dependency, each hash-pinned; nothing of the runtime lock
    pins = [line.split(" ")[0] for line in build.splitlines()
            if "==" in line and not line.startswith("#")]
    assert pins == ["minibackend==1.0", "minihelper==2.0"]
    assert build.count("--hash=sha256:") == 2
    assert "# deepspeed 0.18.2 needs: minibackend==1.0 (pyproject.toml)" in build
    req = (d / "requirements.lock.txt").read_text()
    assert "--no-build-isolation -r requirements.lock.txt" in req
    assert "# Built from sdists on the target: deepspeed 0.18.2" in req
    manifest = json.loads((d / "envgen.lock.json").read_text())
    assert "build-requirements.lock.txt" in manifest["files"]

    prefix = tmp_path / "env"
    proc = run_envgen("install", str(d), "--prefix", str(prefix),
                      "--cache-dir", str(tmp_path / "cache"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "installing the 2 build dependencies of the lock's sdists" in proc.stderr
    out = subprocess.run([prefix / "bin" / "python", "-c",
                          "import deepspeed, minibackend; print(deepspeed.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0.18.2"


@integration
def test_a_build_dependency_with_other_bytes_fails_the_install(sdist_make_args, tmp_path,
                                                               sdist_index):
    server, _ = sdist_index
    assert run_envgen(*sdist_make_args).returncode == 0
    d = _lock_dir(tmp_path)
    evil = build_wheel(tmp_path / "evil", "minihelper", "2.0",
                       files={"minihelper/__init__.py": "raise SystemExit('tampered')\n"})
    path = next(p for p in server.state.files if p.endswith("/" + evil.name))
    original = server.state.files[path].data
    server.state.files[path].data = evil.read_bytes()
    try:
        prefix = tmp_path / "env"
        proc = run_envgen("install", str(d), "--prefix", str(prefix),
                          "--cache-dir", str(tmp_path / "cache2"), timeout=300)
    finally:
        server.state.files[path].data = original
    assert proc.returncode == 1, proc.stderr
    assert "does not match the hash in build-requirements.lock.txt" in proc.stderr
    assert not prefix.exists()


@integration
def test_a_lock_with_sdists_but_no_build_lock_is_refused(sdist_make_args, tmp_path):
    from envgen.lock.manifest import Manifest

    assert run_envgen(*sdist_make_args).returncode == 0
    d = _lock_dir(tmp_path)
    # what an older envgen wrote: the same lock without build-requirements.lock.txt
    (d / "build-requirements.lock.txt").unlink()
    path = d / "envgen.lock.json"
    manifest = Manifest.from_dict(json.loads(path.read_text()))
    files = {k: v for k, v in manifest.files.items() if k != "build-requirements.lock.txt"}
    from dataclasses import replace

    path.write_text(replace(manifest, files=files).sealed().to_json())
    prefix = tmp_path / "env"
    proc = run_envgen("install", str(d), "--prefix", str(prefix), "--json")
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert "builds deepspeed 0.18.2 from source" in error["message"]
    assert "not hash-locked" in error["message"]
    assert "regenerate the lock" in error["fix"]
    assert not prefix.exists()


@integration
def test_pip_without_uv_builds_against_the_build_lock_too(sdist_make_args, tmp_path,
                                                          monkeypatch):
    """Where uv is missing, pip does both steps: the build lock hash-checked, then the lock
    with --no-build-isolation (the backend found in the env, nothing fetched for the build)."""
    from envgen.lock import install as installing
    from envgen.lock import pip_compile

    assert run_envgen(*sdist_make_args).returncode == 0
    d = _lock_dir(tmp_path)
    monkeypatch.setattr(pip_compile, "uv_binary", lambda: "/nonexistent/uv")
    lines: list[str] = []
    counts: list[tuple[str, int, int | None]] = []

    class Progress:  # what the CLI's reporter is: lines, and counts for its bars
        def __call__(self, line: str) -> None:
            lines.append(line)

        def count(self, task: str, done: int, total: int | None) -> None:
            counts.append((task, done, total))

    result = installing.install(d, tmp_path / "env", cache_dir=tmp_path / "cache",
                                progress=Progress())
    assert any(line.startswith("installing the 2 build dependencies of the lock's sdists with "
                               "pip") for line in lines)
    assert ("packages", 2, 2) in counts  # the build lock's bar reached its end
    assert counts[-1][1] == counts[-1][2] > 2  # and the lock's
    assert any("sdists built against the build dependencies above" in line for line in lines)
    out = subprocess.run([result.python, "-c", "import deepspeed; print(deepspeed.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0.18.2"
