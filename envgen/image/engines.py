"""Image engines: what turns a lock directory's build context into an image. One small class
per engine behind the :class:`Engine` protocol, chosen by name in one place (:func:`engine_for`).

- ``sdk``: the docker SDK and the daemon's classic builder (no RUN cache mounts, no secrets);
- ``buildkit``: the docker CLI with BuildKit (keeps the ccache / pip cache mounts; the
  ``--ca-cert`` certificates as the build secret ``envgen-ca``).

Input: the lock directory, BuildOptions, the reference to tag and the labels. Output: the image
id, with the step log streamed to ``progress`` (envgen/image/buildlog.py).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from envgen.errors import EnvgenError, EnvironmentProblem, UsageError
from envgen.image.buildlog import _ANSI, _follow
from envgen.image.context import CA_SECRET, context_tar, read_ca_certs, write_context

BUILD_TIMEOUT = 4 * 3600.0  # a docker build (--engine cli); ENVGEN_TOOL_TIMEOUT replaces it


@dataclass(frozen=True)
class BuildOptions:
    registry: str | None = None  # host[:port][/path]; images are named <registry>/<framework>
    tags: tuple[str, ...] = ()  # extra tags (or full references) to apply
    push: bool = False
    ca_certs: tuple[Path, ...] = ()
    engine: str = "sdk"
    network: str | None = None  # network for RUN steps (e.g. "host")
    build_args: dict[str, str] = field(default_factory=dict)
    target: str = "runtime"
    force: bool = False  # build even if an image with this build hash exists
    no_cache: bool = False  # do not reuse the daemon's layer cache (a cold build)
    docker_cli: str = "docker"
    labels: dict[str, str] = field(default_factory=dict)  # extra OCI labels (--label)
    ccache: bool = True  # the classic engine's ops step uses envgen's ccache store
    extra_hosts: dict[str, str] = field(default_factory=dict)  # name → address in RUN steps


class Engine(Protocol):
    name: str

    def build(self, client, lock_dir: Path, options, ref: str, labels: dict[str, str],
              progress: Callable[[str], None], log: Callable[[str], None] | None) -> str:
        """Build ``lock_dir``'s image tagged ``ref``; returns the image id."""


class SdkEngine:
    name: ClassVar[str] = "sdk"

    def build(self, client, lock_dir, options, ref, labels, progress, log) -> str:
        return _stream_sdk(client, lock_dir, options, ref, labels, progress, log)


class BuildkitEngine:
    name: ClassVar[str] = "buildkit"

    def build(self, client, lock_dir, options, ref, labels, progress, log) -> str:
        return _stream_buildkit(lock_dir, options, ref, labels, progress, log)


ENGINES: dict[str, Engine] = {e.name: e for e in (SdkEngine(), BuildkitEngine())}
CA_NEEDS_BUILDKIT = ("the classic builder (--engine sdk) has no build secrets, and a certificate "
                     "copied into the build would stay in a layer of the image: pass --engine "
                     "buildkit (the docker CLI with BuildKit), or set engine = \"buildkit\" in "
                     "envgen.toml")


def engine_for(name: str) -> Engine:
    """The engine called ``name``; a usage error naming the choices otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}",
                         hint=f"use --engine {' or --engine '.join(ENGINES)}") from None


def _stream_sdk(client, lock_dir: Path, options: BuildOptions, ref: str,
                labels: dict[str, str], progress: Callable[[str], None],
                log: Callable[[str], None] | None) -> str:
    if options.ca_certs:  # plan_build refuses this first; never fall back to a COPY
        raise UsageError("--ca-cert needs --engine buildkit", hint=CA_NEEDS_BUILDKIT)
    tar = context_tar(lock_dir, classic=True)
    stream = client.api.build(
        fileobj=io.BytesIO(tar), custom_context=True, tag=ref, labels=labels,
        buildargs=options.build_args or None, target=options.target,
        network_mode=options.network, forcerm=True, rm=True, decode=True, pull=False,
        nocache=options.no_cache, extra_hosts=options.extra_hosts or None)
    return _follow(_sdk_lines(stream), progress, log)


def _sdk_lines(stream: Iterable[dict]) -> Iterable[tuple[str, str]]:
    for item in stream:
        if "errorDetail" in item or "error" in item:
            detail = item.get("errorDetail") or {}
            yield "error", (detail.get("message") or item.get("error") or "build failed").strip()
        elif "aux" in item and isinstance(item["aux"], dict) and "ID" in item["aux"]:
            yield "id", item["aux"]["ID"]
        elif "stream" in item:
            for line in _ANSI.sub("", item["stream"]).splitlines():
                if line.strip():
                    yield "log", line.rstrip()


def _stream_buildkit(lock_dir: Path, options: BuildOptions, ref: str, labels: dict[str, str],
                     progress: Callable[[str], None], log: Callable[[str], None] | None) -> str:
    with tempfile.TemporaryDirectory(prefix="envgen-context-") as tmp:
        ctx = write_context(lock_dir, Path(tmp) / "ctx")
        iid = Path(tmp) / "iid"
        cmd = [options.docker_cli, "build", "--progress=plain", "--target", options.target,
               "--tag", ref, "--iidfile", str(iid)]
        if options.ca_certs:  # a secret: mounted in the RUN steps that download, in no layer
            secret = Path(tmp) / "envgen-ca.pem"
            secret.touch(mode=0o600)
            secret.write_bytes(read_ca_certs(options.ca_certs))
            cmd += ["--secret", f"id={CA_SECRET},src={secret}"]
        for k, v in sorted(labels.items()):
            cmd += ["--label", f"{k}={v}"]
        for k, v in sorted(options.build_args.items()):
            cmd += ["--build-arg", f"{k}={v}"]
        if options.network:
            cmd += ["--network", options.network]
        for name, address in sorted(options.extra_hosts.items()):
            cmd += ["--add-host", f"{name}:{address}"]
        if options.no_cache:
            cmd.append("--no-cache")
        cmd.append(str(ctx))
        env = {**os.environ, "DOCKER_BUILDKIT": "1"}
        from envgen import proc as procs

        seconds = procs.limit(BUILD_TIMEOUT)
        try:
            proc = procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, errors="replace", stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot run the docker CLI {options.docker_cli!r}: {exc.strerror}",
                hint="install the docker CLI, pass --docker-cli PATH, or use --engine sdk"
            ) from None

        def lines() -> Iterable[tuple[str, str]]:
            assert proc.stdout is not None
            error = None
            for line in proc.stdout:
                line = line.rstrip()
                if line.startswith(("ERROR:", "error:")) or re.match(r"^#\d+ ERROR:", line):
                    error = line.split("ERROR:", 1)[-1].strip() or line
                if line:
                    yield "log", line
            if proc.wait() != 0:
                yield "error", error or f"docker build exited with {proc.returncode}"
            elif iid.is_file():
                yield "id", iid.read_text().strip()

        # interrupted, failed or past its limit: the build is stopped (SIGTERM, 10 s, SIGKILL
        # to the CLI's whole group), not left running
        with proc, procs.watched(proc, seconds, grace=10) as expired:
            try:
                return _follow(lines(), progress, log)
            except EnvgenError:
                if expired.is_set():
                    raise procs.time_limit("docker build", seconds, procs.TOOL_TIMEOUT_VAR,
                                           hint="compiling the ops for many GPU "
                                           "architectures takes long: give fewer with "
                                           "--gpu-arch, or more time") from None
                raise
