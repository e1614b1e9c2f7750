"""Apptainer (Singularity) definition files for a lock, from the same rendered Dockerfile.

Input: the Dockerfile envgen renders for the lock (its one source of truth), the ops check the
builder runs, the image's name. Output: two definition files (``apptainer/``):

- ``envgen.def``: self-contained, multi-stage. Each Dockerfile stage becomes a stage
  (``Bootstrap: docker``, the same base pinned by digest); COPY → ``%files`` (``from <stage>``
  across stages), RUN → ``%post`` (in bash, ``set -euo pipefail`` as the Dockerfile's SHELL),
  ENV → exported in ``%post`` (and ``%environment`` in the final stage), ARG with a value →
  exported, LABEL → ``%labels``, CMD → ``%runscript``. The ``pruned`` stage (``FROM builder``)
  is continued in the builder stage, since Apptainer cannot bootstrap from a stage. The lock
  is installed hash-checked, the ops compiled for the target archs in ``%post``; ``%test``
  loads every compiled op (check-ops.py --import).
- ``from-image.def``: ``Bootstrap: docker-daemon`` from the image `envgen build` made (or
  ``docker`` from a registry: one line to change), the same labels and ``%test``.

Hand-written part: the instruction mapping (Dockerfile → definition sections) — no library
converts multi-stage Dockerfiles into Apptainer's multi-stage format; the Dockerfile itself is
parsed by ``dockerfile-parse``. The definitions are checked with spython's parser in the tests.
"""

from __future__ import annotations

import io
import re
import shlex
from dataclasses import dataclass, field

from envgen.errors import DataError

SELF_CONTAINED = "apptainer/envgen.def"
FROM_IMAGE = "apptainer/from-image.def"
CHECK_OPS = "/opt/envgen/check-ops.py"  # where the final stage keeps the op check
_CHECK_RUN = re.compile(r"python /tmp/envgen/check-ops\.py ((?:[\w.-]+ ?)+)")
_MERGED = {"pruned": "builder"}  # stages continued in another (FROM <that> AS <this>)


@dataclass
class _Stage:
    name: str
    base: str
    files: list[str] = field(default_factory=list)
    files_from: dict[str, list[str]] = field(default_factory=dict)
    post: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    runscript: str | None = None


def _parse(dockerfile: str) -> list[dict]:
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile.encode()))
    return [s for s in parser.structure if s["instruction"] != "COMMENT"]


def _stages(dockerfile: str) -> list[_Stage]:
    stages: list[_Stage] = []
    by_name: dict[str, _Stage] = {}
    stage: _Stage | None = None
    for item in _parse(dockerfile):
        op, value = item["instruction"], item["value"].strip()
        if op == "FROM":
            words = value.split()
            base, name = words[0], (words[2] if len(words) == 3 and words[1].upper() == "AS"
                                    else f"stage{len(stages)}")
            if base in by_name:  # FROM builder AS pruned: continue that stage
                stage = by_name[base]
                by_name[name] = stage
                continue
            stage = _Stage(name=name, base=base)
            stages.append(stage)
            by_name[name] = stage
            continue
        if stage is None:
            raise DataError(f"the Dockerfile has {op} before FROM",
                            hint="report this: envgen renders a FROM first")
        _instruction(stage, op, value, by_name)
    return stages


def _instruction(stage: _Stage, op: str, value: str, by_name: dict[str, _Stage]) -> None:
    if op == "RUN":
        words = value.split(None, 1)
        while words and words[0].startswith("--mount="):  # BuildKit caches: not in Apptainer
            words = words[1].split(None, 1) if len(words) > 1 else []
        if words:
            stage.post.append(" ".join(words))
    elif op == "COPY":
        args = shlex.split(value)
        source_stage = next((a.split("=", 1)[1] for a in args if a.startswith("--from=")), None)
        paths = [a for a in args if not a.startswith("--")]
        *sources, dest = paths
        # a directory (trailing /) copies its contents, as COPY does
        lines = [f"{src}* {dest}" if src.endswith("/") else f"{src} {dest}" for src in sources]
        if source_stage is None:
            stage.files += lines
        else:
            origin = by_name[source_stage].name if source_stage in by_name else source_stage
            stage.files_from.setdefault(origin, []).extend(lines)
    elif op == "ENV":
        for line in _exports(value):
            stage.post.append(line)
            stage.environment.append(line)
    elif op == "ARG":
        if "=" in value:  # an ARG without a value is unset unless given: leave it unset
            stage.post += _exports(value)
    elif op == "LABEL":
        for pair in shlex.split(value):
            key, _, label = pair.partition("=")
            stage.labels.append(f"{key} {label}")
    elif op == "CMD":
        try:
            import json

            argv = json.loads(value)
        except ValueError:
            argv = ["/bin/sh", "-c", value]
        stage.runscript = f'exec {shlex.join(argv)} "$@"'
    # SHELL: %post runs in bash with pipefail below; USER / WORKDIR: Apptainer runs as the
    # calling user in the calling directory, so they have no equivalent


def _exports(value: str) -> list[str]:
    """``export K="V"`` per pair of an ENV/ARG value (``$VAR`` still expands, as in Docker)."""
    words = shlex.split(value)
    if words and "=" not in words[0]:  # the legacy form: ENV KEY the value
        words = [f"{words[0]}={' '.join(words[1:])}"]
    out = []
    for word in words:
        key, _, val = word.partition("=")
        quoted = val.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
        out.append(f'export {key}="{quoted}"')
    return out


def _section(name: str, lines: list[str]) -> list[str]:
    return [f"%{name}", *(f"    {line}" for line in lines), ""] if lines else []


def _render(stage: _Stage, header: list[str], test: str | None, final: bool) -> list[str]:
    out = [*header, "Bootstrap: docker", f"From: {stage.base}", f"Stage: {stage.name}", ""]
    out += _section("files", stage.files)
    for origin, lines in stage.files_from.items():
        out += [f"%files from {origin}", *(f"    {line}" for line in lines), ""]
    if stage.post:
        out += _section("post -c /bin/bash", ["set -euo pipefail", *stage.post])
    if final:
        out += _section("environment", stage.environment)
        out += _section("labels", stage.labels)
        if test:
            out += _section("test", [test])
        out += _section("runscript", [stage.runscript or 'exec python "$@"'])
    return out


def check_command(dockerfile: str) -> str | None:
    """The op check the builder runs, as the final image's %test (loading every op)."""
    m = _CHECK_RUN.search(dockerfile)
    return f"python {CHECK_OPS} --import {m.group(1).strip()}" if m else None


def definitions(dockerfile: str, *, combination: str, regenerate: str, image_ref: str
                ) -> dict[str, str]:
    """File name → text of the two definition files for the rendered ``dockerfile``."""
    stages = _stages(dockerfile)
    if not stages:
        raise DataError("the Dockerfile has no stage", hint="report this")
    final = stages[-1]
    test = check_command(dockerfile)
    if test:
        final.files.append(f"image/check-ops.py {CHECK_OPS}")
    common = [f"# Apptainer definition for {combination}",
              "# Generated by envgen from the Dockerfile next to it; do not edit by hand. "
              "Regenerate with:",
              f"#     {regenerate}"]
    self_contained = [*common,
                      "# Self-contained: every stage of the Dockerfile, the lock installed "
                      "hash-checked in %post. Build in the lock directory:",
                      "#     cd <this lock directory> && apptainer build envgen.sif "
                      f"{SELF_CONTAINED}", ""]
    text: list[str] = []
    for i, stage in enumerate(stages):
        text += _render(stage, self_contained if i == 0 else [], test, stage is final)
    from_image = [*common,
                  "# From the image `envgen build` made (in the local Docker daemon). From a "
                  "registry instead:",
                  f"#     Bootstrap: docker   From: <registry>/{image_ref.split('/', 1)[-1]}",
                  "# Build in the lock directory:",
                  f"#     cd <this lock directory> && apptainer build envgen.sif {FROM_IMAGE}",
                  "", "Bootstrap: docker-daemon", f"From: {image_ref}", ""]
    from_image += _section("files", [f"image/check-ops.py {CHECK_OPS}"] if test else [])
    from_image += _section("labels", final.labels)
    if test:
        from_image += _section("test", [test])
    from_image += _section("runscript", [final.runscript or 'exec python "$@"'])
    return {SELF_CONTAINED: "\n".join(text).rstrip() + "\n",
            FROM_IMAGE: "\n".join(from_image).rstrip() + "\n"}
