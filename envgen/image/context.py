"""The build context of a lock directory: what goes to the daemon, and the build hash that
names the result.

The context is the Dockerfile plus image/ (what .dockerignore lets through), as a tar with
fixed owners and times so the same directory always gives the same bytes. Extra CA
certificates (``--ca-cert``) are never part of it: BuildKit gets them as the build secret
``envgen-ca`` (see images/with-ca.sh), so they enter no layer, no lock file and no build hash.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path
from typing import Any

from envgen.errors import EnvgenError, UsageError
from envgen.userfile import read_bytes

DOCKERFILE = "Dockerfile"
HASHED = ("Dockerfile", ".dockerignore", "envgen.lock.json")
CA_SECRET = "envgen-ca"  # the BuildKit secret id the Dockerfile mounts
_CACHE_MOUNT = re.compile(r"^(RUN )((?:--mount=\S+\s*\\?\n?\s*)+)", re.MULTILINE)
_CCACHE_DIR = re.compile(r"\bCCACHE_DIR=\S+ ")


def context_files(lock_dir: Path) -> list[Path]:
    """Dockerfile and every file under image/, sorted (relative paths)."""
    lock_dir = Path(lock_dir)
    if not (lock_dir / DOCKERFILE).is_file():
        raise UsageError(f"{lock_dir} has no Dockerfile",
                         hint="write one with `envgen make ... --image`, then build that "
                         "directory")
    files = [Path(DOCKERFILE)]
    image = lock_dir / "image"
    if image.is_dir():
        files += sorted(p.relative_to(lock_dir) for p in image.rglob("*") if p.is_file())
    return files


# build args that change how fast or through what an image is built, never what it holds
NOT_HASHED_ARGS = frozenset({"MAX_JOBS", "ENVGEN_CCACHE", "HTTP_PROXY", "HTTPS_PROXY",
                             "NO_PROXY", "FTP_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                             "no_proxy", "ftp_proxy", "all_proxy"})


def build_inputs(build_args: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None,
                 engine: str | None = None) -> dict[str, Any]:
    """The build options that change the image (build args but the ones in NOT_HASHED_ARGS,
    extra labels, the engine: the classic builder and BuildKit do not give the same layers),
    as they enter the build hash."""
    args = {k: v for k, v in (build_args or {}).items() if k not in NOT_HASHED_ARGS}
    return {"build_args": dict(sorted(args.items())),
            "labels": dict(sorted((labels or {}).items())), "engine": engine}


def build_hash(lock_dir: Path, inputs: dict | None = None) -> str:
    """sha256 over the Dockerfile, .dockerignore, the lock manifest (which holds the lock hash
    and every lock file's hash), image/* and the options that change the image
    (:func:`build_inputs`): the same hash means the same build."""
    lock_dir = Path(lock_dir)
    names = sorted({*(Path(n) for n in HASHED if (lock_dir / n).is_file()),
                    *context_files(lock_dir)})
    digest = hashlib.sha256()
    for rel in names:
        data = read_bytes(lock_dir / rel, "lock")
        digest.update(f"{rel.as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    extra = {k: v for k, v in (inputs or {}).items() if v}
    if extra:  # none: the hash of the files alone, as before
        import json

        digest.update(b"inputs\0" + json.dumps(extra, sort_keys=True).encode())
    return "sha256:" + digest.hexdigest()


def classic_dockerfile(text: str) -> str:
    """The Dockerfile for the daemon's classic builder (the docker SDK's): RUN --mount options
    (caches, the CA secret) are BuildKit-only, so they go; the steps are otherwise the same.
    Without its cache mount ccache would write its objects into the builder's layer, where no
    later build reads them; so it keeps them only in the remote store `envgen build` serves
    for the build (the build arg ENVGEN_CCACHE, envgen/image/ccache_store.py), writing no
    objects and no stats locally, and without that arg the compiler wrapper runs the
    compilers directly."""
    return _CCACHE_DIR.sub(lambda _m: CLASSIC_CCACHE, _CACHE_MOUNT.sub(r"\1", text))


CLASSIC_CCACHE = ("CCACHE_DIR=${ENVGEN_CCACHE:+/tmp/envgen-ccache} "
                  "CCACHE_REMOTE_STORAGE=${ENVGEN_CCACHE:-} CCACHE_REMOTE_ONLY=true "
                  "CCACHE_NOSTATS=true ")


def read_ca_certs(paths: tuple[Path, ...]) -> bytes:
    """The PEM certificates of ``paths``, concatenated (the ``envgen-ca`` secret's content);
    a usage error naming the file that cannot be read or holds no certificate."""
    out = []
    for path in paths:
        try:
            data = read_bytes(path, "certificate", shown=f"--ca-cert {path}")
        except OSError as exc:
            raise UsageError(f"--ca-cert {path}: {exc.strerror or exc}",
                             hint="give the path of a PEM file with your proxy's CA") from None
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise UsageError(f"--ca-cert {path} holds no PEM certificate",
                             hint="export the CA as PEM (-----BEGIN CERTIFICATE-----)")
        out.append(data if data.endswith(b"\n") else data + b"\n")
    return b"".join(out)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def context_tar(lock_dir: Path, classic: bool) -> bytes:
    """The context as an uncompressed tar (Dockerfile rewritten for the classic builder if
    ``classic``)."""
    lock_dir = Path(lock_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in context_files(lock_dir):
            data = read_bytes(lock_dir / rel, "lock")
            if rel.as_posix() == DOCKERFILE and classic:
                data = classic_dockerfile(data.decode("utf-8")).encode("utf-8")
            mode = 0o755 if (lock_dir / rel).stat().st_mode & 0o111 else 0o644
            _add(tar, rel.as_posix(), data, mode)
    return buf.getvalue()


def write_context(lock_dir: Path, dest: Path) -> Path:
    """The same context as a directory (for the docker CLI's BuildKit)."""
    tar_bytes = context_tar(lock_dir, classic=False)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:  # Python < 3.10.12 has no filter argument
            tar.extractall(dest)
    if not (dest / DOCKERFILE).is_file():
        raise EnvgenError(f"could not stage the build context in {dest}")
    return dest
