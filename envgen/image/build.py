"""Build, tag and push a lock directory's image.

``build_image`` names the image by content (the build hash over the Dockerfile and the lock,
see ``context.build_hash``), skips the build when that image already exists locally or in the
registry, otherwise builds it with the docker SDK (the daemon's classic builder) or with the
docker CLI's BuildKit, streaming a compact step log, and pushes on request. A runtime image is
built in two steps: the builder stage first (tagged ``<content tag>-builder``), whose
/opt/envgen/ops.json (the framework's own report of the ops it compiled) gives the label
``io.envgen.ops``, then the runtime from the same layers. MAX_JOBS defaults to the daemon's
CPU count. A failed build
raises ``BuildFailed`` naming the step and carrying the log tail; intermediate containers are
always removed (``forcerm``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from envgen import __version__
from envgen.errors import DaemonError, EnvgenError, UsageError
from envgen.image.buildlog import BuildFailed, _clip, _follow  # noqa: F401 (re-exported)
from envgen.image.context import (
    DOCKERFILE,
    build_hash,
    build_inputs,
    context_files,
    read_ca_certs,
)
from envgen.image.engines import BuildOptions, Engine, engine_for
from envgen.image.naming import ImageName, check_registry
from envgen.lock.manifest import Manifest
from envgen.userfile import read_bytes, read_text

OPS_REPORT = "/opt/envgen/ops.json"  # what the framework reports it built (check-ops.py)


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    references: tuple[str, ...]
    build_hash: str
    lock_hash: str
    skipped: str | None  # None (built), "local" or "registry": where the image was found
    pushed: tuple[str, ...]
    seconds: float
    size: int | None  # bytes, local images only
    ops: tuple[str, ...] = ()  # what the framework reports it compiled (io.envgen.ops)
    max_jobs: str | None = None  # the MAX_JOBS the ops compiled with (None: skipped)
    ccache: dict | None = None  # the classic engine's carried ccache (envgen/image/ccache_store)

    def to_dict(self) -> dict:
        return {"image_id": self.image_id, "references": list(self.references),
                "build_hash": self.build_hash, "lock_hash": self.lock_hash,
                "skipped": self.skipped, "pushed": list(self.pushed),
                "seconds": round(self.seconds, 3), "size": self.size, "ops": list(self.ops),
                "max_jobs": self.max_jobs, "ccache": self.ccache}


def docker_client():
    """A docker SDK client for DOCKER_HOST (or the local socket), checked to answer."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a dependency
        raise EnvgenError("the docker Python package is not installed",
                          hint="pip install docker") from None
    _probe_socket()
    client = None
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # docker.errors.DockerException and connection errors
        if client is not None:
            client.close()
        raise DaemonError(f"cannot reach the Docker daemon ({_short(exc)})",
                          hint="start dockerd (or Docker Desktop), or point DOCKER_HOST at "
                          "one: DOCKER_HOST=unix:///var/run/docker.sock") from None
    return client


def _probe_socket() -> None:
    """A daemon on a unix socket (the usual case) is probed with a plain connect first: a
    missing or dead socket gets a precise message (and no half-open client is left behind)."""
    import socket

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return
    path = host[len("unix://"):]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(10)
            probe.connect(path)
    except OSError as exc:
        raise DaemonError(f"cannot reach the Docker daemon at {host} ({exc.strerror or exc})",
                          hint="start dockerd (or Docker Desktop), or point DOCKER_HOST at "
                          "one: DOCKER_HOST=unix:///var/run/docker.sock",
                          source="DOCKER_HOST" if os.environ.get("DOCKER_HOST") else None
                          ) from None


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def names_for(manifest: Manifest, registry: str | None) -> ImageName:
    image = manifest.image
    if image is None:
        raise UsageError("this lock was made without --image",
                         hint="re-run its `envgen make` command with --image")
    repo = image.repository
    if registry:
        repo = f"{check_registry(registry)}/{repo.split('/', 1)[1]}"
    return ImageName(repository=repo, tag=image.tag)


def _labels(manifest: Manifest, bhash: str) -> dict[str, str]:
    return {
        "io.envgen.build-hash": bhash,
        "io.envgen.envgen-version": __version__,
        "org.opencontainers.image.created":
            datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "org.opencontainers.image.ref.name": manifest.image.tag,
    }


def find_existing(client, refs: list[str], bhash: str, registry: bool) -> tuple[str, str] | None:
    """(where, image id or digest) of an image with this build hash, locally or (when
    ``registry``) in the registry, else None."""
    import docker

    for ref in refs:
        try:
            img = client.images.get(ref)
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError as exc:
            raise DaemonError(f"cannot inspect {ref}: {_short(exc)}",
                              hint="check that dockerd is running and answering") from None
        if (img.labels or {}).get("io.envgen.build-hash") == bhash:
            return "local", img.id
    if registry:
        for ref in refs:
            try:
                data = client.images.get_registry_data(ref)
            except docker.errors.NotFound:
                continue
            except docker.errors.APIError as exc:
                if exc.status_code in (404, 401, 403) or "manifest unknown" in str(exc):
                    continue
                raise DaemonError(f"cannot query the registry for {ref}: {_short(exc)}",
                                  hint="check --registry and that you are logged in "
                                  "(docker login)") from None
            return "registry", data.id
    return None


def _push(client, ref: str, progress: Callable[[str], None]) -> None:
    repo, tag = ref.rsplit(":", 1)
    last = ""
    hint = "check the registry address and your login (docker login)"
    try:
        for item in client.api.push(repo, tag=tag, stream=True, decode=True):
            if "error" in item or "errorDetail" in item:
                msg = (item.get("errorDetail") or {}).get("message") or item.get("error")
                raise DaemonError(f"pushing {ref} failed: {msg}", hint=hint)
            status = item.get("status", "")
            if status and status != last and not item.get("progressDetail"):
                last = status
                if status.startswith(("Pushed", "Layer already exists")) or "digest" in status:
                    progress(f"  push: {_clip(status, 90)}")
    except DaemonError:
        raise
    except Exception as exc:  # docker.errors.APIError, connection errors
        raise DaemonError(f"pushing {ref} failed: {_short(exc)}", hint=hint) from None


@dataclass(frozen=True)
class BuildPlan:
    """What a build of a lock directory would be, computed without Docker: the content tag
    and every name, the build hash and the inputs that make it (``envgen build --dry-run``)."""

    references: tuple[str, ...]  # the content tag first
    build_hash: str
    lock_hash: str
    files: dict[str, str]  # the hashed files → their sha256
    inputs: dict  # the options in the hash (build args, labels, engine)
    not_hashed: dict[str, str]  # build args that do not change the image (MAX_JOBS, proxies)
    base: str | None
    target: str

    def to_dict(self) -> dict:
        return {"references": list(self.references), "build_hash": self.build_hash,
                "lock_hash": self.lock_hash, "files": self.files, "inputs": self.inputs,
                "not_hashed": self.not_hashed, "base": self.base, "target": self.target}


def plan_build(lock_dir: Path, options: BuildOptions) -> BuildPlan:
    """The names and build hash of ``lock_dir``'s image with ``options``; checks the lock
    (an edited one is refused) and the options, touches no daemon."""
    import hashlib

    from envgen.image.context import HASHED, NOT_HASHED_ARGS

    lock_dir = Path(lock_dir)
    engine_for(options.engine)
    read_ca_certs(options.ca_certs)  # a missing or non-PEM file fails before anything runs
    if options.ca_certs and options.engine != "buildkit":
        from envgen.image.engines import CA_NEEDS_BUILDKIT

        raise UsageError("--ca-cert needs --engine buildkit", hint=CA_NEEDS_BUILDKIT)
    if options.push and not options.registry:
        raise UsageError("--push needs --registry", hint="e.g. --registry ghcr.io/acme --push")
    manifest = _manifest(lock_dir)  # an edited lock is never built
    names = sorted({*(Path(n) for n in HASHED if (lock_dir / n).is_file()),
                    *context_files(lock_dir)})  # a directory without a Dockerfile: usage error
    name = names_for(manifest, options.registry)
    inputs = build_inputs(options.build_args, options.labels, options.engine)
    bhash = build_hash(lock_dir, inputs)
    suffix = "" if options.target == "runtime" else f"-{options.target}"
    content = name.ref(name.content_tag(bhash) + suffix)
    refs = (content, name.ref(name.tag + suffix),
            *(t if ("/" in t or ":" in t) else name.ref(t + suffix) for t in options.tags))
    files = {n.as_posix(): "sha256:" + hashlib.sha256(read_bytes(lock_dir / n, "lock")).hexdigest()
             for n in names}
    return BuildPlan(references=refs, build_hash=bhash, lock_hash=manifest.lock_hash,
                     files=files, inputs=inputs,
                     not_hashed={k: v for k, v in options.build_args.items()
                                 if k in NOT_HASHED_ARGS},
                     base=manifest.image.base if manifest.image else None,
                     target=options.target)


def build_image(lock_dir: Path, options: BuildOptions,
                progress: Callable[[str], None] = lambda _m: None, client=None,
                log: Callable[[str], None] | None = None) -> BuildResult:
    """Build (or find) the image of ``lock_dir``; see the module docstring."""
    started = time.monotonic()
    lock_dir = Path(lock_dir)
    engine = engine_for(options.engine)
    plan = plan_build(lock_dir, options)
    manifest = _manifest(lock_dir)
    bhash, refs = plan.build_hash, list(plan.references)
    content = refs[0]
    client = client or docker_client()
    with _daemon_errors():
        return _build(client, engine, lock_dir, options, manifest, bhash, content, refs,
                      started, progress, log)


@contextlib.contextmanager
def _daemon_errors() -> Iterator[None]:
    """The daemon going away mid-build (or answering an API error) is an environment
    problem with a message, not a traceback."""
    import docker
    import requests

    try:
        yield
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DaemonError(f"the Docker daemon failed: {_short(exc)}",
                          hint="check that dockerd is running (and has disk space), then run "
                          "envgen build again") from None


def _build(client, engine: Engine, lock_dir: Path, options: BuildOptions, manifest: Manifest,
           bhash: str,
           content: str, refs: list[str], started: float, progress: Callable[[str], None],
           log: Callable[[str], None] | None) -> BuildResult:
    lock_hash = manifest.lock_hash
    found = None if options.force or options.no_cache else find_existing(
        client, [content], bhash, registry=bool(options.registry))
    pushed: list[str] = []
    ops: tuple[str, ...] = ()
    max_jobs = None
    ccache = None
    if found:
        where, image_id = found
        progress(f"{content} is already built ({where}); skipping the build")
        if where == "local":
            _tag(client, image_id, refs[1:])
    else:
        options = _with_jobs(client, options)
        max_jobs = options.build_args.get("MAX_JOBS")
        progress(f"building {content} with the {options.engine} engine "
                 f"(ops: MAX_JOBS={max_jobs or 'ninja default'})")
        labels = {**options.labels, **_labels(manifest, bhash)}
        with _carried_ccache(client, lock_dir, options, progress) as (options, store):
            if options.target == "runtime" and _reports_ops(lock_dir):
                # the builder first: what the framework says it compiled labels the image
                builder_id = engine.build(client, lock_dir, replace(options, target="builder"),
                                          f"{content}-builder", labels, progress, log)
                options = replace(options, no_cache=False)  # the builder steps just ran
                report = read_ops_report(client, builder_id)
                if report:
                    ops = tuple(report["ops"])
                    labels.update({"io.envgen.ops": " ".join(ops),
                                   "io.envgen.ops-source": report["source"]})
                    progress(f"ops built ({report['source']}): {' '.join(ops)}")
            image_id = engine.build(client, lock_dir, options, content, labels, progress, log)
        ccache = store.summary() if store else None
        _tag(client, image_id, refs[1:])
    if options.push and (not found or found[0] == "local"):
        for ref in refs:  # the content tag, the combination's tag, the moving aliases
            progress(f"pushing {ref}")
            _push(client, ref, progress)
            pushed.append(ref)
    size = None
    if not found or found[0] == "local":
        attrs = client.images.get(image_id).attrs
        size = attrs.get("Size")
        ops = ops or tuple(((attrs.get("Config") or {}).get("Labels") or {})
                           .get("io.envgen.ops", "").split())
    return BuildResult(image_id=image_id, references=tuple(refs), build_hash=bhash,
                       lock_hash=lock_hash, skipped=found[0] if found else None,
                       pushed=tuple(pushed), seconds=time.monotonic() - started, size=size,
                       ops=ops, max_jobs=max_jobs, ccache=ccache)


def _with_jobs(client, options: BuildOptions) -> BuildOptions:
    """MAX_JOBS (how many compilers the ops build runs at once) defaults to the daemon's CPU
    count: ninja alone would start cores + 2, and each nvcc can take gigabytes. Not part of the
    build hash (it does not change what is built)."""
    if "MAX_JOBS" in options.build_args:
        return options
    try:
        cpus = int(client.info().get("NCPU") or 0)
    except Exception:  # an old daemon without NCPU: leave ninja its default
        cpus = 0
    if cpus <= 0:
        return options
    return replace(options, build_args={**options.build_args, "MAX_JOBS": str(cpus)})


@contextlib.contextmanager
def _carried_ccache(client, lock_dir: Path, options: BuildOptions,
                    progress: Callable[[str], None]) -> Iterator[tuple[BuildOptions, object]]:
    """The classic engine's ops step gets its ccache from a store envgen serves for the
    build (envgen/image/ccache_store.py); BuildKit has its cache mount, and a Dockerfile from
    before this, or ``--no-ccache``, gets nothing. Yields (options, the store or None)."""
    from envgen.image import ccache_store

    text = read_text(lock_dir / DOCKERFILE, "lock")
    if (options.engine != "sdk" or not options.ccache or "CCACHE_DIR=" not in text
            or f"ARG {ccache_store.BUILD_ARG}" not in text):
        yield options, None
        return
    address = ccache_store.gateway(client, options.network)
    if address is None:
        progress("ccache: no bridge gateway on this daemon; the ops compile without it "
                 "(--engine buildkit keeps a cache mount)")
        yield options, None
        return
    with ccache_store.serving(address) as store:
        if isinstance(store, str):
            progress(f"ccache: {store}")
            yield options, None
            return
        progress(f"ccache: objects in {store.root} (served on {address} for this build"
                 f"{', shared with a running envgen build' if store.shared else ''})")
        yield replace(options, build_args={**options.build_args, **store.build_args},
                      extra_hosts={**options.extra_hosts, **store.extra_hosts}), store
        counts = store.counts
        if counts is not None:
            progress(f"ccache: {counts.hits} hits, {counts.misses} misses, "
                     f"{counts.stored} objects stored")


def _reports_ops(lock_dir: Path) -> bool:
    """A Dockerfile from envgen 0.x before the ops report has no /opt/envgen/ops.json."""
    return "ENVGEN_OPS_REPORT=" in read_text(lock_dir / DOCKERFILE, "lock")


def read_ops_report(client, image_id: str) -> dict | None:
    """/opt/envgen/ops.json of an image (check-ops.py writes it in the builder: the ops the
    framework itself reports it built), read from a created, never started container; None
    when the image has none."""
    import io
    import json
    import tarfile

    import docker

    container = client.containers.create(image_id, command=["true"])
    try:
        stream, _ = container.get_archive(OPS_REPORT)
        data = b"".join(stream)
    except docker.errors.NotFound:
        return None
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        handle = tar.extractfile(member) if member else None
        return json.loads(handle.read()) if handle else None


def _tag(client, image_id: str, refs: list[str]) -> None:
    for ref in refs:
        repo, _, tag = ref.rpartition(":")
        if "/" in tag or not repo:
            repo, tag = ref, "latest"
        client.api.tag(image_id, repo, tag=tag)


def _manifest(lock_dir: Path) -> Manifest:
    from envgen.lock import read_manifest
    from envgen.lock.install import verify_files

    manifest = read_manifest(lock_dir)
    verify_files(lock_dir, manifest)  # a hand-edited lock is not built
    return manifest
